"""Figures for docs (README "Measured"): the mixed-folder nDCG@10 with the default
embedder, and indexing a 100-page text PDF against the same text as Markdown.

    python plugins/groove_documents/bench_documents.py [--hashing]
    python plugins/groove_documents/bench_documents.py --hostile

``--hostile``: each hostile file of the tests read through its loader with the default
caps, in a fresh process: seconds and peak resident memory.
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


HOSTILE = {
    "encrypted.pdf": "pdf_bytes([['secret']], password='pw')",
    "truncated.pdf": "pdf_bytes([['one'], ['two']])[:900]",
    "bomb.docx": "zip_bomb_docx(128 << 20)",
    "100000-paragraphs.docx": "many_paragraphs_docx(100_000)",
    "10000-pages.pdf": "many_pages_pdf(10_000)",
    "huge-page.pdf": "huge_page_pdf(4 << 20)",
    "deep.html": "('<div>' * 100_000 + 'x' + '</div>' * 100_000).encode()",
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
started = time.perf_counter()
try:
    outcome = "read: " + "; ".join(table.load({name!r}, data)[1].warnings or ("no warning",))
except Exception as err:
    outcome = "skipped: " + str(err)
spent = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(f"{{spent:.2f}} s, peak {{peak // 1024}} MB (was {{before // 1024}} MB): {{outcome}}")
"""


def hostile() -> None:
    import subprocess

    for name, make in HOSTILE.items():
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
