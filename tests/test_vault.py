"""An Obsidian user's habits, through the CLI as they would type them.

The fixture is a vault whose ``.obsidian/`` folder sits above the KB (one folder of the
vault is indexed), with nested and Japanese tags, a ``%% comment %%``, wikilinks inside
Japanese sentences, aliases, embeds and an attachment.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest
from click.testing import CliRunner

from groove_core.cli import build_cli
from groove_core.testing import FAST_CONFIG, make_kb

NOTES = {
    "日誌.md": (
        "# 作業日誌\n\nこれは[[保管庫]]内のノートです。詳細は参照。#進行中\n\n"
        "%% 下書きの秘密 draftsecret %%\n\n公開する本文。\n"
    ),
    # no wikilink in it: only the vault above says this is an Obsidian note
    "status.md": "# Status board\n\nThe release train is on time. #status/active #scratch\n",
    "保管庫.md": "# 保管庫\n\n保管庫はノートを置くフォルダである。\n",
}


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(build_cli(None), list(args), catch_exceptions=False)
    return result.exit_code, result.output


def _indexed(root: Path, files: Mapping[str, str | bytes], config: str = FAST_CONFIG) -> Path:
    """A KB of ``files`` at ``root``, indexed as a user does: ``groove index``."""
    kb = make_kb(root, files, config=config)
    code, out = _run("index", str(kb))
    assert code == 0, out
    return kb


@pytest.fixture
def vault_kb(tmp_path: Path) -> Path:
    vault = tmp_path / "vault"
    (vault / ".obsidian").mkdir(parents=True)
    return _indexed(vault / "Notes", NOTES)


def _paths(kb: Path, query: str, *options: str) -> list[str]:
    code, out = _run("search", query, "--kb", str(kb), "--json", *options)
    assert code == 0, out
    return [hit["path"] for hit in json.loads(out)["results"]]


def test_a_kb_inside_a_vault_reads_inline_tags(vault_kb: Path) -> None:
    # .obsidian/ is one folder up: the note without wikilinks is still an Obsidian note
    assert _paths(vault_kb, "release train", "--tag", "status/active") == ["status.md"]


def test_a_tag_after_japanese_punctuation_is_a_tag(vault_kb: Path) -> None:
    assert _paths(vault_kb, "公開する本文", "--tag", "進行中") == ["日誌.md"]


def test_a_tag_matches_the_tags_nested_under_it_and_takes_a_hash(vault_kb: Path) -> None:
    assert _paths(vault_kb, "release train", "--tag", "status") == ["status.md"]
    assert _paths(vault_kb, "release train", "--tag", "#scratch") == ["status.md"]
    # a prefix of a tag's name is not the tag
    assert _paths(vault_kb, "release train", "--tag", "stat") == []


def _served(kb: Path, query: str) -> str:
    code, out = _run("search", query, "--kb", str(kb), "--json", "--full")
    assert code == 0, out
    return json.dumps(json.loads(out)["results"], ensure_ascii=False)


def test_comments_are_neither_served_nor_searchable(vault_kb: Path) -> None:
    for query in ("draftsecret", "公開する本文"):
        served = _served(vault_kb, query)
        assert "draftsecret" not in served and "下書きの秘密" not in served


def test_comments_can_be_kept(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    (vault / ".obsidian").mkdir(parents=True)
    kb = _indexed(vault / "Notes", NOTES, FAST_CONFIG + '\n[index]\nobsidian_comments = "keep"\n')
    assert _paths(kb, "draftsecret")[0] == "日誌.md"
    assert "draftsecret" in _served(kb, "draftsecret")


def test_links_inside_japanese_text_add_no_spaces(vault_kb: Path) -> None:
    text = _served(vault_kb, "公開する本文")
    assert "これは保管庫内のノートです" in text
    assert "は 保管庫" not in text


def test_aliases_and_description_are_searchable_by_their_words(tmp_path: Path) -> None:
    kb = _indexed(
        tmp_path / "kb",
        {
            "Zettelkasten.md": (
                "---\naliases: [slip box, カード箱]\ndescription: A method of linked "
                "index cards for thinking in writing.\n---\n# Zettelkasten\n\n"
                "Each note holds one idea and links to others.\n"
            ),
            "Other.md": "# Other\n\nA page about gardening and tomatoes.\n",
        },
    )
    for query in ("slip box", "カード箱", "index cards for thinking"):
        code, out = _run("search", query, "--kb", str(kb), "--explain")
        assert code == 0, out
        assert "leg fts: 0 candidates" not in out, (query, out)
        assert _paths(kb, query)[0] == "Zettelkasten.md", query


def test_get_finds_a_note_by_its_name_and_lists_an_ambiguous_one(tmp_path: Path) -> None:
    notes = {
        "Help/Canvas.md": "# Canvas\n\nAn infinite space.\n",
        "a/Draft.md": "# Draft A\n",
        "b/Draft.md": "# Draft B\n",
    }
    kb = _indexed(tmp_path / "kb", notes)
    for name in ("Canvas.md", "Canvas", "canvas"):
        code, out = _run("get", name, "--kb", str(kb))
        assert code == 0, out
        assert out.startswith("Help/Canvas.md:1-3")
    code, out = _run("get", "Draft", "--kb", str(kb))
    assert code != 0
    assert "'Draft' names 2 notes: a/Draft.md, b/Draft.md" in out
    code, out = _run("get", "Nothing.md", "--kb", str(kb))
    assert code != 0
    assert "list_documents" not in out and "a note's name" in out


def test_links_name_attachments_mark_embeds_and_take_a_note_name(tmp_path: Path) -> None:
    kb = _indexed(
        tmp_path / "kb",
        {
            "Notes/Mouse.md": (
                "# Mouse\n\n![[Engelbart.jpg]] shows [[Demo]]; ![[Demo]] again; [[Nowhere]].\n"
            ),
            "Notes/Demo.md": "# Demo\n\nThe mother of all demos.\n",
            "Attachments/Engelbart.jpg": b"\xff\xd8\xff\xe0 not really a picture",
        },
    )
    code, out = _run("links", "Mouse", "--kb", str(kb))
    assert code == 0, out
    assert "embed Engelbart.jpg -> Attachments/Engelbart.jpg (attachment)" in out
    assert "  Demo -> Notes/Demo.md" in out and "embed Demo -> Notes/Demo.md" in out
    assert "Nowhere -> (unresolved)" in out
    code, out = _run("links", "Notes/Mouse.md", "--kb", str(kb), "--json")
    assert code == 0, out
    outgoing = {link["target"]: link for link in json.loads(out)["outgoing"]}
    assert outgoing["Engelbart.jpg"]["attachment"] == "Attachments/Engelbart.jpg"
    assert outgoing["Engelbart.jpg"]["kind"] == "embed"
    assert outgoing["Nowhere"]["attachment"] is None
