"""``groove get``: a document, a line range or a chunk, read as get_document reads it."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from groove_core.cli import build_cli
from groove_core.cli.get import Target, parse_target
from groove_core.testing import SECTION_CHUNKS, make_kb, open_kb

DOC = (
    "# Handbook\n"  # 1
    "\n"
    "Intro line.\n"  # 3
    "\n"
    "## Deploy\n"  # 5
    "\n"
    "Run the deploy script.\n"  # 7
    "\n"
    "### Rollback\n"  # 9
    "\n"
    "Revert the release tag.\n"  # 11
)


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    files = {"ops/handbook.md": DOC, "a.md": "# A\n\nalpha\n"}
    root = make_kb(tmp_path / "kb", files, config=SECTION_CHUNKS)  # a chunk per section
    open_kb(root).close()
    return root


def _run(*args: str) -> Result:
    return CliRunner().invoke(build_cli(None), list(args), catch_exceptions=False)


def _get_json(kb: Path, target: str, *extra: str) -> dict[str, object]:
    result = _run("get", target, "--kb", str(kb), "--json", *extra)
    assert result.exit_code == 0, result.output
    payload: dict[str, object] = json.loads(result.output)
    return payload


def test_parse_target_forms(tmp_path: Path) -> None:
    assert parse_target("a.md", tmp_path) == Target(path="a.md")
    assert parse_target("a.md:3", tmp_path) == Target(path="a.md", start=3, end=3)
    assert parse_target("a.md:3-9", tmp_path) == Target(path="a.md", start=3, end=9)
    assert parse_target("a.md:3-", tmp_path) == Target(path="a.md", start=3, end=None)
    assert parse_target("#42", tmp_path) == Target(chunk_id=42)
    assert parse_target("chunk:42", tmp_path) == Target(chunk_id=42)
    (tmp_path / "odd:12.md").write_text("x", encoding="utf-8")
    assert parse_target("odd:12.md", tmp_path) == Target(path="odd:12.md")
    with pytest.raises(click.BadParameter):
        parse_target("a.md:0-3", tmp_path)


def test_whole_document(kb: Path) -> None:
    result = _run("get", "ops/handbook.md", "--kb", str(kb))
    assert result.exit_code == 0, result.output
    header, body = result.output.split("\n", 1)
    assert header == "ops/handbook.md:1-11  Handbook"
    assert body == DOC


def test_line_range_has_the_heading_path_of_its_first_line(kb: Path) -> None:
    result = _run("get", "ops/handbook.md:9-11", "--kb", str(kb))
    assert result.output.splitlines() == [
        "ops/handbook.md:9-11  Handbook > Deploy > Rollback",
        "### Rollback",
        "",
        "Revert the release tag.",
    ]
    payload = _get_json(kb, "ops/handbook.md:7")
    assert (payload["line_start"], payload["line_end"]) == (7, 7)
    assert payload["content"] == "Run the deploy script.\n"
    assert payload["heading_path"] == ["Handbook", "Deploy"]
    assert _get_json(kb, "ops/handbook.md:10-")["line_end"] == 11
    assert _get_json(kb, "ops/handbook.md:10-500")["line_end"] == 11


def test_chunk_by_id_matches_the_search_hit(kb: Path) -> None:
    search = _run("search", "revert release", "--kb", str(kb), "--json", "--limit", "1")
    hit = json.loads(search.output)["results"][0]
    payload = _get_json(kb, f"#{hit['chunk_id']}")
    assert payload["path"] == hit["path"] == "ops/handbook.md"
    assert payload["heading_path"] == hit["heading_path"]
    assert (payload["line_start"], payload["line_end"]) == (hit["line_start"], hit["line_end"])
    assert hit["content"].strip() in str(payload["content"])
    wider = _get_json(kb, f"chunk:{hit['chunk_id']}", "--neighbours", "1")
    assert int(str(wider["line_start"])) < int(str(payload["line_start"]))
    human = _run("get", f"chunk:{hit['chunk_id']}", "--kb", str(kb)).output
    assert human.startswith("ops/handbook.md:9-11  Handbook > Deploy > Rollback\n")


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("../outside.md", "contains '..'"),
        ("/etc/passwd", "absolute path"),
        (".groove/index.sqlite", "index folder"),
        ("missing.md", "no file 'missing.md'"),
        ("a.md:9", "start_line 9 is past the end of the file (3 lines)"),
        ("a.md:3-2", "end_line 2 is before start_line 3"),
        ("#999999", "no chunk 999999 in the index"),
    ],
)
def test_refusals_are_one_clear_line(kb: Path, target: str, message: str) -> None:
    result = _run("get", target, "--kb", str(kb))
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output
    assert str(kb) not in result.output


def test_symlink_out_of_the_kb_is_refused(kb: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("# Secret\n", encoding="utf-8")
    (kb / "link.md").symlink_to(secret)
    result = _run("get", "link.md", "--kb", str(kb))
    assert result.exit_code == 1
    assert "leads outside the knowledge base" in result.output
    assert "Secret" not in result.output


def test_control_characters_are_escaped_but_lines_and_tabs_kept(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"evil.md": "# T\x1b]0;owned\x07\n\tcode\r\nend\u202e\n"})
    open_kb(root).close()
    result = _run("get", "evil.md", "--kb", str(root))
    assert "\x1b" not in result.output and "\u202e" not in result.output
    assert result.output.splitlines()[1:] == ["# T\\x1b]0;owned\\x07", "\tcode", "end\\u202e"]
    payload = _get_json(root, "evil.md")
    assert payload["content"] == "# T\x1b]0;owned\x07\n\tcode\r\nend\u202e\n"


def test_reading_before_indexing_works_and_says_not_indexed(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"a.md": "# A\n\nalpha\n"})
    payload = _get_json(root, "a.md:3")
    assert payload["indexed"] is False and payload["content"] == "alpha\n"
    assert not (root / ".groove").exists()


def test_a_file_changed_since_indexing_is_flagged(kb: Path) -> None:
    (kb / "a.md").write_text("# A\n\nalpha, edited at length\n", encoding="utf-8")
    assert _get_json(kb, "a.md")["changed_since_index"] is True
    result = CliRunner().invoke(build_cli(None), ["get", "a.md", "--kb", str(kb)])
    assert "changed since it was indexed" in result.output


def test_a_missing_target_hints_at_the_unquoted_hash(kb: Path) -> None:
    # What a shell passes for `groove get #42`: the # starts a comment.
    result = _run("get", "--kb", str(kb))
    assert result.exit_code == 2
    assert "quoted ('#42') or written chunk:42" in result.output
