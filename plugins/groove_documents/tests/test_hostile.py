"""Hostile documents are bounded like hostile Markdown: each is skipped or capped with a
one-line reason in the run's report, quickly, and never stops ``index`` or ``watch``."""

from __future__ import annotations

import io
import subprocess
import sys
import time
import zipfile
from pathlib import Path

from groove_documents import plugin
from groove_documents.testing import (
    docx_of_sections,
    flate_bomb_pdf,
    huge_page_pdf,
    lying_docx,
    many_pages_pdf,
    many_paragraphs_docx,
    pdf_bytes,
    xml_flood_docx,
    zip_bomb_docx,
)

from groove_core.app import Groove
from groove_core.cli.get import Target, read_target
from groove_core.index_report import IndexReport
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


def _read_all(
    tmp_path: Path, files: dict[str, str | bytes], settings: str = ""
) -> tuple[Groove, list[tuple[str, str]], float]:
    """Index NOTE and ``files`` under these ``[plugin.documents]`` settings, where each
    hostile file must be read (capped or cut, with a warning), none skipped: the app, the
    run's warnings and its seconds."""
    config = FAST_CONFIG + (f"\n[plugin.documents]\n{settings}" if settings else "")
    kb = make_kb(tmp_path / "kb", {**NOTE, **files}, config=config)
    app, skipped, warnings, spent = _index(kb)
    assert skipped == {}
    return app, warnings, spent


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
    # The streaming reader reads about 230,000 paragraphs a second: a quarter of a second
    # of them is already 3 MB of text for the index (the bound covers indexing it).
    settings = "max_seconds = 0.25\nmax_chars = 100000000\n"
    app, warnings, spent = _read_all(
        tmp_path, {"long.docx": many_paragraphs_docx(150_000)}, settings
    )
    assert ("long.docx", "stopped reading after [plugin.documents] max_seconds (0.25)") in warnings
    assert "long.docx" in {d.path for d in app.store.documents()}
    assert spent < BOUND_SECONDS


def test_a_pdf_of_10000_pages_is_capped_with_a_warning(tmp_path: Path) -> None:
    app, warnings, spent = _read_all(
        tmp_path, {"tome.pdf": many_pages_pdf(10_000)}, "max_pages = 300\n"
    )
    assert (
        "tome.pdf",
        "only the first 300 of 10000 pages read ([plugin.documents] max_pages)",
    ) in warnings
    chunks = [c for d in app.store.documents() if d.path == "tome.pdf" for c in [d.chunks]]
    assert chunks == [300]
    assert spent < BOUND_SECONDS


def test_one_huge_page_is_left_out_and_the_rest_read(tmp_path: Path) -> None:
    app, warnings, spent = _read_all(tmp_path, {"poster.pdf": huge_page_pdf(4 << 20)})
    assert (
        "poster.pdf",
        "page 1 left out: its content is 4194313 bytes, over [plugin.documents] "
        "max_page_content_bytes (524288)",
    ) in warnings
    assert app.search("lichens", limit=1).results[0].heading_path[-1] == "Page 2"
    assert spent < BOUND_SECONDS


def test_deeply_nested_html_is_read_flat_past_the_depth_cap(tmp_path: Path) -> None:
    depth = 100_000
    files: dict[str, str | bytes] = {
        "deep.html": "<div>" * depth + "buried treasure" + "</div>" * depth,
        "wide.html": "<p>" + "<b>x</b>" * 200_000 + "</p>",
    }
    app, warnings, spent = _read_all(tmp_path, files)
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


# -- issue #46: hostile files bounded in time and memory as they are read --------------

#: Memory one hostile file may add to the process while its loader reads it.
BOUND_MB = 128
PROBE = """
import resource, sys, time
from groove_core.config import GrooveConfig
from groove_core.plugins import make_plugin_manager
from groove_documents import plugin
from groove_documents.testing import *
table = make_plugin_manager(GrooveConfig(), extra=[("documents", plugin)]).loaders()
for name, warm in (("w.html", b"<p>warm</p>"), ("w.pdf", pdf_bytes([["warm"]])),
                   ("w.docx", docx_of_sections("Warm", [("up", ["warm"])]))):
    table.load(name, warm)  # the libraries imported before the peak is taken
data = {make}
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
cpu = time.process_time()
try:
    outcome = "; ".join(table.load({name!r}, data)[1].warnings)
except Exception as err:
    outcome = "skipped: " + str(err)
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
print(f"{{time.process_time() - cpu:.3f}} {{grown:.0f}} {{outcome}}")
"""


def _probe(name: str, make: str) -> tuple[float, float, str]:
    """CPU seconds and peak memory growth (MB) of loading the file ``make`` builds, in a
    fresh process, and the loader's warnings (or its reason to skip the file)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(make=make, name=name)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    cpu, grown, outcome = done.stdout.strip().splitlines()[-1].split(" ", 2)
    return float(cpu), float(grown), outcome


def test_malformed_html_is_read_in_linear_time(tmp_path: Path) -> None:
    """html.parser's close() rescanned to the end from every ``<`` of markup that never
    closes: 200 KB of ``<a`` took 22 s, 8 MB never ended. Each such page is now read up
    to that markup, the rest left out with one warning; the other files are indexed."""
    kb = make_kb(tmp_path / "kb", NOTE)
    openers = {"tag": "<a", "decl": "<!", "end": "</", "pi": "<?", "cdata": "<![CDATA["}
    for kind, opener in openers.items():
        page = "<html><body><p>kept before the mess</p>" + opener * (200_000 // len(opener))
        (kb / f"{kind}.html").write_text(page, encoding="utf-8")
    (kb / "fine.html").write_text("<h1>Fine</h1><p>gooseberry</p>", encoding="utf-8")
    app, skipped, warnings, spent = _index(kb)
    assert spent < BOUND_SECONDS  # before: over 28 s, 21 s of it the page of <a
    assert skipped == {}
    left_open = {path: w for path, w in warnings if w.startswith("markup left open")}
    assert set(left_open) == {f"{kind}.html" for kind in openers}
    assert left_open["tag.html"] == (
        "markup left open at line 1 ('<a' never closed) runs to the end of the file: its "
        "200000 characters were left out"
    )
    for kind in openers:
        text = read_target(app, Target(path=f"{kind}.html"), 0)["content"]
        assert text.strip() == "kept before the mess"
    assert app.search("gooseberry", limit=1).results[0].path == "fine.html"


def test_8_mb_of_unclosed_markup_costs_a_scan() -> None:
    cpu, grown, outcome = _probe("tags.html", "b'<html><body><p>x</p>' + b'<a' * 4_000_000")
    assert cpu < 2.0  # before: never ended (the probe's 300 s ran out)
    assert grown < BOUND_MB
    assert outcome.startswith("markup left open at line 1 ('<a' never closed)")


def test_a_page_with_a_bogus_meta_charset_is_read_as_utf8(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", NOTE)
    for name in ("idna", "undefined", "utf-16", "no-such-charset"):
        page = f'<html><head><meta charset="{name}"></head><body><p>café {name}</p></body>'
        (kb / f"{name}.html").write_bytes(page.encode("utf-8"))
    app, skipped, _, _ = _index(kb)
    assert skipped == {}
    for name in ("idna", "undefined", "utf-16", "no-such-charset"):
        hit = app.search(f"café {name}", limit=1).results[0]
        assert (hit.path, "café" in hit.content) == (f"{name}.html", True)


def test_html_reading_stops_at_its_time_budget(tmp_path: Path) -> None:
    app, warnings, spent = _read_all(
        tmp_path, {"long.html": "<p>lorem ipsum</p>" * 500_000}, "max_seconds = 0.05\n"
    )
    assert ("long.html", "stopped reading after [plugin.documents] max_seconds (0.05)") in warnings
    assert "long.html" in {d.path for d in app.store.documents()}
    assert spent < BOUND_SECONDS


def test_pdf_stream_bombs_cost_their_budget_not_their_size(tmp_path: Path) -> None:
    """Each page's FlateDecode streams (16 MB of zeros each, 16 KB in the file) are
    inflated up to max_page_content_bytes across all of them, never whole and never
    kept: 8 pages of one bomb, one page of 8 bombs (before: 128 MB decoded and kept)."""
    over = (
        "left out: its content is over [plugin.documents] max_page_content_bytes (524288), "
        "decoded no further"
    )
    for make in ("flate_bomb_pdf(8, 16 << 20)", "flate_bomb_pdf(1, 16 << 20, streams=8)"):
        cpu, grown, outcome = _probe("bomb.pdf", make)
        assert (grown < 32, cpu < 2.0) == (True, True), (make, grown, cpu)
        assert over in outcome
    files: dict[str, str | bytes] = {
        "pages.pdf": flate_bomb_pdf(8, 16 << 20),
        "streams.pdf": flate_bomb_pdf(1, 16 << 20, streams=8, other="cobbles"),
    }
    app, warnings, spent = _read_all(tmp_path, files)
    assert [w for path, w in warnings if path == "pages.pdf"] == [
        f"page {n} {over}" for n in range(1, 9)
    ]
    assert [w for path, w in warnings if path == "streams.pdf"] == [f"page 1 {over}"]
    assert app.search("lichens", limit=1).results[0].heading_path[-1] == "Page 9"
    assert app.search("cobbles", limit=1).results[0].path == "streams.pdf"
    assert spent < BOUND_SECONDS


def test_a_pdf_stops_at_its_budget_of_decoded_content(tmp_path: Path) -> None:
    heavy = flate_bomb_pdf(4, 400_000, lead="the cover page")  # 400 KB a page: each fits
    settings = "max_document_content_bytes = 1048576\n"
    app, warnings, _ = _read_all(tmp_path, {"heavy.pdf": heavy}, settings)
    text = read_target(app, Target(path="heavy.pdf"), 0)["content"]
    assert "the cover page" in text and "lichens" not in text  # the last page not reached
    assert [w for path, w in warnings if path == "heavy.pdf"] == [
        "page 4 left out: its content is over what is left of [plugin.documents] "
        "max_document_content_bytes (1048576)",
        "stopped after page 4 of 6: over [plugin.documents] max_document_content_bytes (1048576)",
    ]


def test_a_docx_of_99_mb_of_xml_is_read_as_it_streams(tmp_path: Path) -> None:
    """2.2 million tiny paragraphs, 99 MB of XML in a 300 KB file: python-docx parsed
    it whole first (6.5 s and 1.4 GB here). It is read a piece at a time, up to max_chars."""
    make = "xml_flood_docx(2_200_000, 'lorem ipsum')"
    cpu, grown, outcome = _probe("flood.docx", make)
    assert grown < BOUND_MB
    assert cpu < 5.0
    assert outcome == "text cut at [plugin.documents] max_chars (5000000)"
    kb = make_kb(
        tmp_path / "kb", NOTE, config=FAST_CONFIG + "\n[plugin.documents]\nmax_chars = 20000\n"
    )
    (kb / "flood.docx").write_bytes(xml_flood_docx(2_200_000, "lorem ipsum"))
    app, skipped, warnings, spent = _index(kb)
    assert (skipped, warnings) == (
        {},
        [("flood.docx", "text cut at [plugin.documents] max_chars (20000)")],
    )
    assert app.search("lorem ipsum", limit=1).results[0].path == "flood.docx"
    assert spent < BOUND_SECONDS


def test_a_docx_part_that_lies_about_its_size_is_never_inflated_whole(tmp_path: Path) -> None:
    """Its header says 4 KB, it inflates to 200 MB (a 200 KB file): zipfile, asked for the
    whole part, inflated all of it before cutting it to the size the header gives."""
    cpu, grown, outcome = _probe("lies.docx", "lying_docx(200_000_000)")
    assert grown < 32  # before: 380 MB more
    assert cpu < 2.0
    assert outcome == "skipped: damaged .docx (Bad CRC-32 for file 'word/document.xml')"
    kb = make_kb(tmp_path / "kb", NOTE)
    (kb / "lies.docx").write_bytes(lying_docx(16 << 20))
    (kb / "fine.docx").write_bytes(docx_of_sections("Fine", [("Fruit", ["gooseberry"])]))
    app, skipped, _, _ = _index(kb)
    assert skipped == {"lies.docx": "damaged .docx (Bad CRC-32 for file 'word/document.xml')"}
    assert app.search("gooseberry", limit=1).results[0].path == "fine.docx"


def _with_document_xml(docx: bytes, edit: object) -> bytes:
    source = zipfile.ZipFile(io.BytesIO(docx))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as out:
        for item in source.infolist():
            body = source.read(item.filename)
            if item.filename == "word/document.xml":
                body = edit(body.decode("utf-8")).encode("utf-8")  # type: ignore[operator]
            out.writestr(item.filename, body)
    return buf.getvalue()


def test_the_text_after_an_unresolved_entity_in_a_docx_is_kept(tmp_path: Path) -> None:
    """An entity reference (declared in the XML's own DTD, internal or a file outside)
    is never expanded nor fetched; it is left out and the text after it kept, as is the
    text after a comment."""
    base = docx_of_sections("Entities", [("Section", ["MARK"])])
    dtd = (
        '<!DOCTYPE w:document [<!ENTITY inner "INNER"> '
        '<!ENTITY outer SYSTEM "file:///etc/hostname">]><w:document'
    )
    kb = make_kb(tmp_path / "kb", NOTE)
    for name, text in (("inner", "&inner;"), ("outer", "&outer;"), ("comment", "<!-- c -->")):
        docx = _with_document_xml(
            base,
            lambda xml, text=text: xml.replace("<w:document", dtd, 1).replace(
                "MARK", f"before {text} after"
            ),
        )
        (kb / f"{name}.docx").write_bytes(docx)
    app, skipped, _, _ = _index(kb)
    assert skipped == {}
    for name in ("inner", "outer", "comment"):
        text = read_target(app, Target(path=f"{name}.docx"), 0)["content"]
        assert "\nbefore after\n" in text, text
