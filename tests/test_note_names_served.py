"""Notes by their names over MCP as on the command line, a did-you-mean for a typo, and a
hit read by its chunk id alone (issue #44, item 3)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from mcp.types import CallToolResult

from groove_core.cli import build_cli
from groove_core.mcp.server import build_mcp_server
from groove_core.testing import FAST_CONFIG, call_tools, make_kb, open_kb

NOTES = {
    "Help/Canvas.md": "# Canvas\n\nInfinite space for notes. See [[Graph view]].\n",
    "Help/Graph view.md": "# Graph view\n\nShows links between notes, like [[Canvas]].\n",
    "Help/Sync.md": "# Sync\n\nEnd-to-end encrypted sync between devices.\n",
}


def _text(result: CallToolResult) -> str:
    return result.content[0].text  # type: ignore[union-attr]


def _kb(tmp_path: Path) -> Path:
    kb = make_kb(tmp_path / "vault", NOTES, config=FAST_CONFIG)
    (kb / "secret.env").write_text("TOKEN=1\n", encoding="utf-8")
    return kb


def test_get_document_and_related_take_a_notes_name(tmp_path: Path) -> None:
    server = build_mcp_server(open_kb(_kb(tmp_path)))
    by_name, with_ext, related = call_tools(
        server,
        ("get_document", {"path": "Canvas"}),
        ("get_document", {"path": "graph view.md"}),
        ("related", {"path": "Canvas"}),
    )
    assert not by_name.is_error and by_name.structured_content["path"] == "Help/Canvas.md"
    assert with_ext.structured_content["path"] == "Help/Graph view.md"
    assert related.structured_content["path"] == "Help/Canvas.md"


def test_a_typo_gets_the_right_reason_and_a_did_you_mean(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    [typo, typo_md] = call_tools(
        build_mcp_server(open_kb(kb)),
        ("get_document", {"path": "Canvs"}),
        ("get_document", {"path": "Help/Canvs.md"}),
    )
    assert typo.is_error and typo_md.is_error
    assert "no note named 'Canvs'" in _text(typo)
    assert "did you mean 'Help/Canvas.md'?" in _text(typo)
    assert "is not a Markdown file" not in _text(typo)
    assert "no file 'Help/Canvs.md'" in _text(typo_md)
    assert "did you mean 'Help/Canvas.md'?" in _text(typo_md)
    result = CliRunner().invoke(build_cli(None), ["get", "Canvs", "--kb", str(kb)])
    assert result.exit_code != 0
    assert "did you mean 'Help/Canvas.md'?" in result.output


def test_whether_an_unserved_file_exists_is_not_told(tmp_path: Path) -> None:
    there, missing = call_tools(
        build_mcp_server(open_kb(_kb(tmp_path))),
        ("get_document", {"path": "secret.env"}),
        ("get_document", {"path": "nothing.env"}),
    )
    assert _text(there).replace("secret", "X") == _text(missing).replace("nothing", "X")


def test_a_hit_is_read_by_its_chunk_id_alone(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path))
    hit = app.search("encrypted sync between devices", limit=1).results[0]
    around, neither = call_tools(
        build_mcp_server(app),
        ("get_document", {"chunk_id": hit.chunk_id, "neighbours": 0}),
        ("get_document", {}),
    )
    doc = around.structured_content
    assert not around.is_error and doc["path"] == hit.path == "Help/Sync.md"
    assert (doc["line_start"], doc["line_end"]) == (hit.line_start, hit.line_end)
    assert neither.is_error and "give path" in _text(neither)


def test_a_dotted_name_and_a_title_are_notes_too(tmp_path: Path) -> None:
    """Dendron names notes with dots (``dendron.topic.math``): a typo in one is no note,
    with the nearest ones, never 'not a Markdown file'; a note's title finds it."""
    kb = make_kb(
        tmp_path / "vault",
        {
            "dendron.topic.math.md": "---\ntitle: Math\n---\n# Formulas\n\nKaTeX blocks.\n",
            "notes.md": "# Notes\n\nplain\n",
        },
        config=FAST_CONFIG,
    )
    app = open_kb(kb)
    typo, titled = call_tools(
        build_mcp_server(app),
        ("get_document", {"path": "dendron.topic.mathh"}),
        ("get_document", {"path": "math"}),
    )
    assert "no note named 'dendron.topic.mathh'" in _text(typo)
    assert "did you mean 'dendron.topic.math.md'?" in _text(typo)
    assert titled.structured_content["path"] == "dendron.topic.math.md"


def test_a_name_with_another_extension_is_not_read_as_the_md_note(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "vault", {"guide.md": "# Guide\n\ntext\n"}, config=FAST_CONFIG)
    [wrong] = call_tools(build_mcp_server(open_kb(kb)), ("get_document", {"path": "guide.mdx"}))
    assert wrong.is_error and "did you mean 'guide.md'?" in _text(wrong)
