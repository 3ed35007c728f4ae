"""Figures for docs (README "Measured"): the mixed-folder nDCG@10 with the default
embedder, and indexing a 100-page text PDF against the same text as Markdown.

    python plugins/groove_documents/bench_documents.py [--hashing]
    python plugins/groove_documents/bench_documents.py --hostile [NAME ...]

``--hostile``: each hostile file (those of the tests, and those of issue #46 at the full
size it gives) read through its loader with the default caps, in a fresh process: wall and
CPU seconds of the loader, and the process's peak resident memory (the file's making
included; "was" is the peak before the loader ran). NAMEs pick some of them.
"""

from __future__ import annotations

import json
import runpy
import sys
import tempfile
import time
from pathlib import Path

from groove_documents import plugin
from groove_documents.testing import pdf_bytes

from groove_core.testing import FAST_CONFIG, make_kb, open_kb

HERE = Path(__file__).resolve().parent
PAGES = 100


def _pages() -> list[list[str]]:
    """100 Cranfield abstracts, one a page."""
    golden = runpy.run_path(str(HERE / "tests" / "test_golden_mixed.py"))
    docs = sorted((golden["CRANFIELD"] / "docs").glob("cran-*.md"))[:PAGES]
    return [[title, *paragraphs] for title, paragraphs in map(golden["_abstract"], docs)]


def index_seconds(root: Path, config: str | None) -> dict[str, float]:
    pages = _pages()
    markdown = "\n\n".join(f"## Page {i}\n\n" + "\n\n".join(p) for i, p in enumerate(pages, 1))
    md_kb = make_kb(root / "md", {"book.md": markdown + "\n"}, config=config)
    pdf_kb = make_kb(root / "pdf", {}, config=config)
    (pdf_kb / "book.pdf").write_bytes(pdf_bytes(pages))
    out = {}
    for name, kb, extra in (("markdown", md_kb, []), ("pdf", pdf_kb, [("documents", plugin)])):
        app = open_kb(kb, extra_plugins=extra, entry_points=False, index=False)
        app.embedder.embed_query("warm up")  # the model's load is not indexing
        started = time.perf_counter()
        report = app.index()
        out[f"{name}_seconds"] = round(time.perf_counter() - started, 2)
        out[f"{name}_chunks"] = report.chunks_total
    out["ratio"] = round(out["pdf_seconds"] / out["markdown_seconds"], 2)
    return out


#: Markup html.parser never sees closed, one of each kind (issue #46).
UNCLOSED = {"tag": "<a", "declaration": "<!", "end-tag": "</", "pi": "<?", "cdata": "<![CDATA["}
HOSTILE = {
    "encrypted.pdf": "pdf_bytes([['secret']], password='pw')",
    "truncated.pdf": "pdf_bytes([['one'], ['two']])[:900]",
    "bomb.docx": "zip_bomb_docx(128 << 20)",
    "100000-paragraphs.docx": "many_paragraphs_docx(100_000)",
    "10000-pages.pdf": "many_pages_pdf(10_000)",
    "huge-page.pdf": "huge_page_pdf(4 << 20)",
    "deep.html": "('<div>' * 100_000 + 'x' + '</div>' * 100_000).encode()",
    # Issue #46: malformed HTML (quadratic in html.parser's close()), 200 KB and 8 MB.
    **{
        f"unclosed-{kind}-{size // 1000}k.html": (
            f"b'<html><body><p>x</p>' + {tag!r}.encode() * ({size} // {len(tag)})"
        )
        for kind, tag in UNCLOSED.items()
        for size in (200_000, 8_000_000)
    },
    # PDF stream bombs: 121 pages of 74 MB each, one page of 120 such streams.
    "flate-bomb-121-pages.pdf": "flate_bomb_pdf(121, 74_000_000)",
    "flate-bomb-120-streams.pdf": "flate_bomb_pdf(1, 74_000_000, streams=120)",
    # DOCX: 99 MB of XML in 2.2 million paragraphs; a part whose header lies (200 MB).
    "xml-flood.docx": "xml_flood_docx(2_200_000, 'lorem ipsum')",
    "xml-flood-no-cut.docx": "xml_flood_docx(3_000_000, 'x')",  # under max_chars: all read
    "lying-size.docx": "lying_docx(200_000_000)",
}
PROBE = """
import resource, sys, time
from groove_core.config import GrooveConfig
from groove_core.plugins import make_plugin_manager
from groove_documents import plugin
from groove_documents.testing import *
data = {make}
table = make_plugin_manager(GrooveConfig(), extra=[("documents", plugin)]).loaders()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started, cpu = time.perf_counter(), time.process_time()
try:
    warnings = table.load({name!r}, data)[1].warnings or ("no warning",)
    outcome = f"read ({{len(warnings)}} warnings): " + warnings[0]
except Exception as err:
    outcome = "skipped: " + str(err)
spent, cpu = time.perf_counter() - started, time.process_time() - cpu
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(f"{{len(data) / 1e6:.2f}} MB file, {{spent:.2f}} s ({{cpu:.2f}} s CPU), peak "
      f"{{peak // 1024}} MB (was {{before // 1024}} MB): {{outcome}}")
"""


def hostile() -> None:
    import subprocess

    wanted = [a for a in sys.argv[1:] if not a.startswith("--")]
    for name, make in HOSTILE.items():
        if wanted and name not in wanted:
            continue
        probe = PROBE.format(make=make, name=name)
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
        print(f"{name}: {(done.stdout or done.stderr).strip().splitlines()[-1]}")


def main() -> None:
    if "--hostile" in sys.argv:
        hostile()
        return
    config = FAST_CONFIG if "--hashing" in sys.argv else None
    golden = runpy.run_path(str(HERE / "tests" / "test_golden_mixed.py"))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        figures = {"embedder": "hashing" if config else "default"}
        figures.update(index_seconds(root / "speed", config))
        found = golden["measure"](root / "golden", config if config else "")
        figures.update({k: round(v, 4) for k, v in found.items()})
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
