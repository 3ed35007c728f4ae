"""What the bilingual leg (plugin groove-bilingual, issue #45) adds to a search: English
questions over Japanese notes searched with the leg on and off, query by query, in one
process, at a chosen size.

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python bench/bilingual_cost.py \
        --work DIR [--copies 7] [--passes 3] [--golden FILE ...]

The KB is ``evaldata/md-vue-docs-ja``'s pages copied ``--copies`` times under ``DIR``
(7 copies: 840 files, about 10,300 chunks), indexed once with the hashing embedder (the
leg's cost does not depend on the embedder; later runs reuse the index). The queries are
the collection's English golden files (titles and questions, 175), unless ``--golden``
names others. Each query is searched with the leg on and off in turn, the order changing
every pass; its time is its fastest pass, in CPU seconds of the thread that searches
(``Searcher.run`` runs every leg on the calling thread). Not the process clock: numpy's
BLAS workers spin for a while after each call (the vector leg's) and the process clock
counts that, twice a search's own CPU here, and more of it the longer the search (the
leg's added time read 13 ms at the median by the process clock, 6.5 ms with one BLAS
thread). Each query's vector is computed once, in a warm-up pass, and cached; that pass
also builds what the leg builds once per index state (the notes' katakana table) and
converts JMdict on a first use, and is reported apart.
Prints median / p95 of each and of the per-query difference (the leg's added time).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from pathlib import Path

from timing import fastest, p95, pct, run_groove

from groove_core.app import Groove
from groove_core.evaluation.golden import load_golden
from groove_core.evaluation.runner import CachedEmbedder
from groove_core.pipeline import Searcher
from groove_core.plugins import make_plugin_manager

ROOT = Path(__file__).resolve().parents[1]
COLLECTION = ROOT / "evaldata" / "md-vue-docs-ja"
GOLDEN = [
    COLLECTION / "golden-xlang-en2ja.jsonl",
    COLLECTION / "golden-questions-en2ja.jsonl",
]


def prepare(work: Path, copies: int) -> Path:
    """The Vue docs copied ``copies`` times under ``work``, indexed (hashing embedder)."""
    kb = work / f"vue-ja-x{copies}"
    if not (kb / "docs").exists():
        for n in range(copies):
            shutil.copytree(COLLECTION / "docs", kb / "docs" / f"copy{n}")
        (kb / "groove.toml").write_text('[embedder]\nname = "hashing"\n', encoding="utf-8")
    started = time.perf_counter()
    out = run_groove("index", str(kb))
    print(f"indexed in {time.perf_counter() - started:.0f} s: {out.stdout.strip()}")
    return kb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="scratch folder for the KB")
    parser.add_argument("--copies", type=int, default=7)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--golden", type=Path, action="append", default=[])
    args = parser.parse_args()
    kb = prepare(args.work, args.copies)
    queries = [q.query for golden in args.golden or GOLDEN for q in load_golden(golden).queries]
    app = Groove.open(kb)
    searcher = Searcher(make_plugin_manager(app.config), app.store, CachedEmbedder(app.embedder))

    def timed(query: str, on: bool) -> float:
        started = time.thread_time()
        searcher.run(searcher.context(query, options={"bilingual": on}))
        return time.thread_time() - started

    try:
        started = time.thread_time()
        for query in queries:  # warm-up: embeds each query once, builds the leg's tables
            timed(query, True)
        warm = time.thread_time() - started
        chunks = app.store.counts().get("chunks", "?")
        off, on = fastest(
            queries,
            [lambda q: timed(q, False), lambda q: timed(q, True)],
            args.passes,
        )
    finally:
        app.close()
    added = [b - a for a, b in zip(off, on, strict=True)]
    print(f"chunks: {chunks}; {len(queries)} English queries; fastest of {args.passes} passes")
    print(f"warm-up pass (tables built once per index state): {warm:.2f} s CPU")
    print("| leg off: median / p95 ms | leg on: median / p95 ms | added: median / p95 ms |")
    print("|---|---|---|")
    print(
        f"| {pct(off)} | {pct(on)} | "
        f"{statistics.median(added) * 1000:.1f} / {p95(added) * 1000:.1f} |"
    )


if __name__ == "__main__":
    main()
