"""What the ``prf`` leg (groove-expansion) adds to a search, with its defaults
(``min_terms`` included), on the evaluation collections.

Usage (from the repository root, with groove-expansion installed, after the collections
were copied and indexed into ``--work`` as ``bench/eval_collections.py`` does)::

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python bench/prf_cost.py --work DIR \
        [--golden cranfield-en/golden.jsonl ...] [--passes 3]

Each golden file's KB is opened once, in this process; every query is searched with the
leg off and on (the per-query switch, as ``--prf`` / ``--no-prf``), alternately, in the
same order on every pass, after one pass that embeds the queries (their vectors are then
cached, as a server's repeated query would not be: the figures are the search without the
embedding). Prints, per golden file, the share of queries the leg expanded, and the
median / p95 of the whole search off and on, and of the difference query by query, for
all queries and for the expanded ones.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from timing import p95

from groove_core.app import Groove
from groove_core.evaluation.golden import load_golden
from groove_core.evaluation.runner import CachedEmbedder
from groove_core.pipeline import Searcher

GOLDEN = (
    "cranfield-en/golden.jsonl",
    "jsquad-ja-para/golden.jsonl",
    "xquad-en-para/golden.jsonl",
    "dendron-vault-en/golden.jsonl",
    "dendron-vault-en/golden-keywords.jsonl",
)


def ms(samples: list[float]) -> str:
    if not samples:
        return "—"
    return f"{statistics.median(samples) * 1000:.1f} / {p95(samples) * 1000:.1f}"


def measure(work: Path, golden: str, passes: int) -> str:
    collection, name = golden.split("/")
    app = Groove.open(work / collection)
    searcher = Searcher(app.plugins, app.store, CachedEmbedder(app.embedder), kb=app.kb)
    queries = [q.query for q in load_golden(work / collection / name).queries]
    expanded = set()
    for query in queries:  # embeds each query once; finds which ones the leg expands
        _, legs = searcher.run(searcher.context(query, options={"prf": True}))
        if any(leg.name == "prf" and leg.hits for leg in legs):
            expanded.add(query)
    off: dict[str, list[float]] = {q: [] for q in queries}
    on: dict[str, list[float]] = {q: [] for q in queries}
    for _ in range(passes):
        for query in queries:
            for flag, times in ((False, off), (True, on)):
                started = time.perf_counter()
                searcher.run(searcher.context(query, options={"prf": flag}))
                times[query].append(time.perf_counter() - started)
    app.close()
    best_off = {q: min(t) for q, t in off.items()}
    best_on = {q: min(t) for q, t in on.items()}
    added = [best_on[q] - best_off[q] for q in queries]
    added_expanded = [best_on[q] - best_off[q] for q in queries if q in expanded]
    return (
        f"| {golden} | {len(queries)} | {len(expanded) / len(queries):.0%} "
        f"| {ms(list(best_off.values()))} | {ms(list(best_on.values()))} "
        f"| {ms(added)} | {ms(added_expanded)} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--golden", action="append", default=None)
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    print(
        "| golden | queries | expanded | search off | search on | added | added, expanded "
        "queries |\n|---|---|---|---|---|---|---|"
    )
    for golden in args.golden or GOLDEN:
        print(measure(args.work, golden, args.passes), flush=True)
    print("\nms, median / p95 over the queries of each query's fastest of the passes")


if __name__ == "__main__":
    main()
