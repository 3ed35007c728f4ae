"""Hostile documents are bounded like hostile Markdown: each is skipped or capped with a
one-line reason in the run's report, quickly, and never stops ``index`` or ``watch``."""

from __future__ import annotations

import time
from pathlib import Path

from groove_documents import plugin
from groove_documents.testing import (
    docx_of_sections,
    huge_page_pdf,
    many_pages_pdf,
    many_paragraphs_docx,
    pdf_bytes,
    zip_bomb_docx,
)

from groove_core.app import Groove
from groove_core.indexer import IndexReport
from groove_core.testing import FAST_CONFIG, make_kb, open_kb
from groove_core.watch import Watcher

#: What each hostile file may cost at most, reading included (issue #32).
BOUND_SECONDS = 10.0
NOTE = {"note.md": "# Note\n\nthe one plain note\n"}


def _index(kb: Path) -> tuple[Groove, dict[str, str], list[tuple[str, str]], float]:
    app = open_kb(kb, extra_plugins=[("documents", plugin)], entry_points=False, index=False)
    started = time.perf_counter()
    report = app.index()
    spent = time.perf_counter() - started
    return app, dict(report.skipped), report.warnings, spent


def test_an_encrypted_pdf_is_skipped_and_one_with_an_empty_password_is_read(
    tmp_path: Path,
) -> None:
    kb = make_kb(tmp_path / "kb", NOTE)
    (kb / "locked.pdf").write_bytes(pdf_bytes([["secret plans"]], password="hunter2"))
    (kb / "open.pdf").write_bytes(pdf_bytes([["open plans"]], password=""))
    app, skipped, _, spent = _index(kb)
    assert skipped == {"locked.pdf": "encrypted PDF (it needs a password)"}
    assert {d.path for d in app.store.documents()} == {"note.md", "open.pdf"}
    assert spent < BOUND_SECONDS


def test_truncated_and_corrupt_files_are_skipped_with_the_reason(tmp_path: Path) -> None:
    pdf = pdf_bytes([["page one"], ["page two"]])
    docx = docx_of_sections("Title", [("Heading", ["text"])])
    kb = make_kb(tmp_path / "kb", NOTE)
    (kb / "cut.pdf").write_bytes(pdf[: len(pdf) // 3])
    (kb / "junk.pdf").write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 40)
    (kb / "cut.docx").write_bytes(docx[: len(docx) // 2])
    (kb / "word97.docx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 600)
    (kb / "fake.pdf").write_bytes(b"just some text named like a PDF")
    (kb / "page.html").write_bytes(b"<p>caf\xe9 in Latin-1</p>")
    app, skipped, _, spent = _index(kb)
    assert set(skipped) == {"cut.pdf", "junk.pdf", "cut.docx", "word97.docx", "fake.pdf"}
    assert skipped["cut.pdf"].startswith("damaged PDF") or "no text" in skipped["cut.pdf"]
    assert skipped["cut.docx"].startswith("damaged .docx (not a readable zip")
    assert skipped["word97.docx"] == (
        "encrypted or legacy Word file (an OLE container, not a .docx zip)"
    )
    assert skipped["fake.pdf"] == "not a PDF file by its content (checked by: pdf)"
    assert all("\n" not in reason for reason in skipped.values())
    assert app.search("café", limit=1).results[0].path == "page.html"
    assert spent < BOUND_SECONDS


def test_a_zip_bomb_docx_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", NOTE)
    (kb / "bomb.docx").write_bytes(zip_bomb_docx(128 << 20))
    _, skipped, _, spent = _index(kb)
    assert skipped == {
        "bomb.docx": "a .docx expanding to 134217736 bytes (a zip bomb?): over "
        "[plugin.documents] max_unzipped_bytes (104857600)"
    }
    assert spent < BOUND_SECONDS


def test_a_docx_of_very_many_paragraphs_stops_at_its_time_budget(tmp_path: Path) -> None:
    config = FAST_CONFIG + "\n[plugin.documents]\nmax_seconds = 0.5\nmax_chars = 100000000\n"
    kb = make_kb(tmp_path / "kb", NOTE, config=config)
    (kb / "long.docx").write_bytes(many_paragraphs_docx(150_000))
    app, skipped, warnings, spent = _index(kb)
    assert skipped == {}
    assert ("long.docx", "stopped reading after [plugin.documents] max_seconds (0.5)") in warnings
    assert "long.docx" in {d.path for d in app.store.documents()}
    assert spent < BOUND_SECONDS


def test_a_pdf_of_10000_pages_is_capped_with_a_warning(tmp_path: Path) -> None:
    config = FAST_CONFIG + "\n[plugin.documents]\nmax_pages = 300\n"
    kb = make_kb(tmp_path / "kb", NOTE, config=config)
    (kb / "tome.pdf").write_bytes(many_pages_pdf(10_000))
    app, skipped, warnings, spent = _index(kb)
    assert skipped == {}
    assert (
        "tome.pdf",
        "only the first 300 of 10000 pages read ([plugin.documents] max_pages)",
    ) in warnings
    chunks = [c for d in app.store.documents() if d.path == "tome.pdf" for c in [d.chunks]]
    assert chunks == [300]
    assert spent < BOUND_SECONDS


def test_one_huge_page_is_left_out_and_the_rest_read(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", NOTE)
    (kb / "poster.pdf").write_bytes(huge_page_pdf(4 << 20))
    app, skipped, warnings, spent = _index(kb)
    assert skipped == {}
    assert (
        "poster.pdf",
        "page 1 left out: its content is 4194313 bytes, over [plugin.documents] "
        "max_page_content_bytes (524288)",
    ) in warnings
    assert app.search("lichens", limit=1).results[0].heading_path[-1] == "Page 2"
    assert spent < BOUND_SECONDS


def test_deeply_nested_html_is_read_flat_past_the_depth_cap(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", NOTE)
    depth = 100_000
    (kb / "deep.html").write_text(
        "<div>" * depth + "buried treasure" + "</div>" * depth, encoding="utf-8"
    )
    (kb / "wide.html").write_text("<p>" + "<b>x</b>" * 200_000 + "</p>", encoding="utf-8")
    app, skipped, warnings, spent = _index(kb)
    assert skipped == {}
    assert (
        "deep.html",
        "markup nested deeper than [plugin.documents] max_depth (256) was read as plain text",
    ) in warnings
    assert app.search("buried treasure", limit=1).results[0].path == "deep.html"
    assert spent < 2 * BOUND_SECONDS  # two hostile files in this run


def test_the_watcher_keeps_going_past_hostile_files(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", NOTE)
    app = open_kb(kb, extra_plugins=[("documents", plugin)], entry_points=False, index=False)
    reports: list[IndexReport] = []
    watcher = Watcher(app, interval=0.05, debounce=0.05, on_report=reports.append)
    bomb, locked = zip_bomb_docx(128 << 20), pdf_bytes([["secret"]], password="pw")
    thread = watcher.start()
    try:
        deadline = time.monotonic() + 30
        while not reports and time.monotonic() < deadline:
            time.sleep(0.05)
        caught_up = len(reports)
        (kb / "bomb.docx").write_bytes(bomb)
        (kb / "locked.pdf").write_bytes(locked)
        (kb / "fine.html").write_text("<h1>Fine</h1><p>gooseberry</p>", encoding="utf-8")
        while time.monotonic() < deadline and not any(r.added for r in reports[caught_up:]):
            time.sleep(0.05)
    finally:
        watcher.stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive()
    assert caught_up == 1 and reports[1:]
    skipped = {path for r in reports[1:] for path, _ in r.skipped}
    assert skipped == {"bomb.docx", "locked.pdf"}
    assert app.search("gooseberry", limit=1).results[0].path == "fine.html"
