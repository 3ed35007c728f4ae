"""Files other programs made (Google Docs, pdfTeX, Microsoft Word), not the tests' own
writers: what a user's folder holds (tests/files/SOURCE.md gives their origin)."""

from __future__ import annotations

import shutil
from pathlib import Path

from groove_documents import plugin

from groove_core.app import Groove
from groove_core.cli.get import Target, read_target
from groove_core.testing import make_kb, open_kb

FILES = Path(__file__).parent / "files"


def _app(tmp_path: Path) -> Groove:
    kb = make_kb(tmp_path / "kb", {"note.md": "# Note\n\nA note beside the documents.\n"})
    for file in FILES.iterdir():
        if file.suffix != ".md":
            shutil.copy(file, kb / file.name)
    return open_kb(kb, extra_plugins=[("documents", plugin)], entry_points=False)


def test_real_pdfs_are_searchable_by_page(tmp_path: Path) -> None:
    app = _app(tmp_path)
    hit = app.search("Readability counts", limit=1).results[0]
    assert (hit.path, hit.heading_path[-1]) == ("google-doc-document.pdf", "Page 1")
    assert "Readability counts." in hit.content
    last = read_target(app, Target(path="pdflatex-4-pages.pdf#page=4"), 0)["content"]
    assert last.startswith("## Page 4\n")
    assert "the length of words should match the language." in last
    assert "## Page 3" not in last


def test_real_word_files_keep_their_headings_and_tables(tmp_path: Path) -> None:
    app = _app(tmp_path)
    styles = read_target(app, Target(path="par-known-styles.docx"), 0)["content"]
    assert "\n# Heading 1\n" in styles and "Body Text" in styles
    tables = read_target(app, Target(path="blk-paras-and-tables.docx"), 0)["content"]
    assert tables.startswith("Lorem ipsum dolor sit amet, consectetur adipiscing elit.")
    assert "| --- |" in tables
    hit = app.search("Donec semper facilisis", limit=1).results[0]
    assert hit.path == "blk-paras-and-tables.docx"


def test_every_real_file_is_indexed(tmp_path: Path) -> None:
    app = _app(tmp_path)
    paths = {d.path for d in app.store.documents()}
    assert paths == {"note.md", *(f.name for f in FILES.iterdir() if f.suffix != ".md")}


def test_a_page_and_a_chunk_together_are_refused_over_mcp(tmp_path: Path) -> None:
    from groove_core.mcp.server import build_mcp_server
    from groove_core.testing import call_tools

    app = _app(tmp_path)
    hit = app.search("Readability counts", limit=1).results[0]
    both, chunk = call_tools(
        build_mcp_server(app),
        ("get_document", {"path": "google-doc-document.pdf#page=1", "chunk_id": hit.chunk_id}),
        ("get_document", {"path": "google-doc-document.pdf", "chunk_id": hit.chunk_id}),
    )
    assert both.is_error and "not both" in both.content[0].text
    assert "Readability counts." in chunk.structured_content["content"]
