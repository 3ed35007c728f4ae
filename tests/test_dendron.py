"""A Dendron user's workspace (issue #44's walk, finding 5): a ``dendron.yml`` above the KB
makes its notes Dendron's, whose links are written alias first (``[[alias|note.name]]``,
``dendron://vault/note.name``) and whose tags are dotted (``#stage.germ``). Read as
Obsidian's, the links pointed at the alias and ``related`` answered wrongly."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from groove_core.chunking import parse_markdown
from groove_core.cli import build_cli
from groove_core.dialects import DENDRON, OBSIDIAN, markup_for, vault_kind
from groove_core.testing import FAST_CONFIG, make_kb

NOTES = {
    "dendron.topic.scratch-note.md": "# Scratch notes\n\nA scratch note is a quick note.\n",
    "scratch.md": "# Scratch\n\nAnother note, named like the alias.\n",
    "howto.md": (
        "# How to\n\nWrite down ideas in [[a scratch|dendron.topic.scratch-note]] first, "
        "or see [[dendron://dendron.dendron-site/dendron.topic.scratch-note#usage]].\n\n"
        "This idea is still growing. #stage.germ\n"
    ),
}


def _run(*args: str) -> str:
    result = CliRunner().invoke(build_cli(None), list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "dendron.yml").write_text("version: 5\n", encoding="utf-8")
    kb = make_kb(workspace / "vault", NOTES, config=FAST_CONFIG)
    _run("index", str(kb))
    return kb


def test_a_dendron_workspace_is_told_by_its_dendron_yml(tmp_path: Path) -> None:
    kb = _workspace(tmp_path)
    assert vault_kind(kb) == "dendron"
    assert vault_kind(tmp_path) is None
    assert markup_for("auto", "howto.md", NOTES["howto.md"], "dendron") == DENDRON
    assert markup_for("dendron", "a.md", "", None) == DENDRON
    assert markup_for("auto", "howto.md", NOTES["howto.md"], None) == OBSIDIAN  # [[...]]


def test_links_are_read_alias_first_and_reach_the_note(tmp_path: Path) -> None:
    kb = _workspace(tmp_path)
    links = json.loads(_run("links", "howto.md", "--kb", str(kb), "--json"))
    targets = [(link["target"], link["path"]) for link in links["outgoing"]]
    assert targets == [
        ("dendron.topic.scratch-note", "dendron.topic.scratch-note.md"),
        ("dendron.topic.scratch-note", "dendron.topic.scratch-note.md"),
    ]
    back = json.loads(_run("links", "dendron.topic.scratch-note.md", "--kb", str(kb), "--json"))
    assert back["backlinks_total"] == 2
    scratch = json.loads(_run("links", "scratch.md", "--kb", str(kb), "--json"))
    assert scratch["backlinks_total"] == 0  # the alias names no note


def test_the_alias_is_the_text_and_dotted_tags_are_whole(tmp_path: Path) -> None:
    parsed = parse_markdown(NOTES["howto.md"], fallback_title="howto", markup=DENDRON)
    content = parsed.chunks[0].content
    assert "Write down ideas in a scratch first" in content
    assert "dendron.topic.scratch-note]]" not in content
    assert parsed.tags == ("stage.germ",)
    obsidian = parse_markdown(NOTES["howto.md"], fallback_title="howto", markup=OBSIDIAN)
    assert obsidian.tags == ("stage",)  # Obsidian's tags stop at a dot
    kb = _workspace(tmp_path)
    hits = json.loads(
        _run("search", "growing idea", "--kb", str(kb), "--tag", "stage.germ", "--json")
    )
    assert [h["path"] for h in hits["results"]] == ["howto.md"]
