"""What the word leg's term cap costs: whole searches of the queries past its 48 distinct
terms, keeping the most distinctive 48 (groove's rule: ``groove_core.builtins.legs.
word_terms``) against the first 48 (the rule before it; issue #42, docs/query-syntax.md),
query by query, in one process.

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python bench/word_cap_cost.py \
        --kb DIR --golden FILE [--golden FILE ...] [--joined FILE] [--passes 5] [--cold]

``--kb`` is an indexed KB (any embedder: each query's vector is computed once, in a warm-up
pass, and cached). ``--joined`` adds long requests made of a golden file's queries joined
two by two (``evaldata/lisa-en/golden.jsonl``: requests of 60 to 90 distinct terms). Only
the queries past the cap are timed. Each is searched once per rule, alternately, the first
rule changing every pass; its time is its fastest pass, in process CPU seconds (the legs run
on threads of their own, which the process clock counts). Prints, per source, median / p95
per rule (the first 48, then the most distinctive) and the median and p95 of the per-query
ratio (most distinctive over first). An index keeps the terms' chunk counts it has read
until it changes; ``--cold`` drops them before every search (SQLite), so that each search
also pays for counting its terms, as the first search of a term does.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from timing import fastest, ratio_row

from groove_core import words
from groove_core.app import Groove
from groove_core.builtins import legs
from groove_core.context import QueryContext
from groove_core.evaluation.golden import load_golden
from groove_core.evaluation.runner import CachedEmbedder
from groove_core.pipeline import Searcher
from groove_core.plugins import make_plugin_manager

Rule = Callable[[QueryContext], tuple[list[str], bool]]


def first_terms(ctx: QueryContext) -> tuple[list[str], bool]:
    """The rule before: the query's first ``words.MAX_TERMS`` distinct terms."""
    return words.query_terms(ctx.query.positive_parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kb", type=Path, required=True)
    parser.add_argument("--golden", type=Path, action="append", default=[])
    parser.add_argument("--joined", type=Path, action="append", default=[])
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--cold", action="store_true", help="count every term anew")
    args = parser.parse_args()
    sources: list[tuple[str, list[str]]] = []
    for golden in args.golden:
        sources.append((golden.parent.name, [q.query for q in load_golden(golden).queries]))
    for golden in args.joined:
        queries = [q.query for q in load_golden(golden).queries]
        pairs = [f"{a} {b}" for a, b in zip(queries[::2], queries[1::2], strict=False)]
        sources.append((f"{golden.parent.name}, joined two by two", pairs))
    app = Groove.open(args.kb)
    searcher = Searcher(make_plugin_manager(app.config), app.store, CachedEmbedder(app.embedder))
    distinctive: Rule = legs._capped_terms
    rules: list[Rule] = [distinctive, first_terms]

    counts = getattr(app.store.leg_index("word"), "_counts", None)

    def timed(rule: Rule, query: str) -> float:
        legs._capped_terms = rule
        if args.cold and counts is not None:
            counts.cache = {}
        started = time.process_time()
        searcher.run(searcher.context(query))
        return time.process_time() - started

    try:
        report(args, sources, searcher, rules, timed)
    finally:
        legs._capped_terms = distinctive
        app.close()


def report(
    args: argparse.Namespace,
    sources: list[tuple[str, list[str]]],
    searcher: Searcher,
    rules: list[Rule],
    timed: Callable[[Rule, str], float],
) -> None:
    chunks = searcher.store.counts().get("chunks", "?")
    cold = ", term counts read anew each search" if args.cold else ""
    print(f"chunks: {chunks}; most distinctive 48 terms vs the first 48{cold}")
    print(
        "| queries | past the cap | first: median / p95 ms | most distinctive: median / p95 ms "
        "| ratio median / p95 |"
    )
    print("|---|---|---|---|---|")
    for name, queries in sources:
        long = [q for q in queries if len(words.term_parts(_parts(searcher, q))) > words.MAX_TERMS]
        if not long:
            print(f"| {name} | 0 of {len(queries)} | | | |")
            continue
        for query in long:  # warm-up: embeds each query once
            timed(first_terms, query)
        runs = [lambda q, rule=rule: timed(rule, q) for rule in rules]
        first, distinctive = fastest(long, runs[::-1], args.passes)
        print(f"| {name} | {len(long)} of {len(queries)} | {ratio_row(first, distinctive)} |")


def _parts(searcher: Searcher, query: str) -> tuple[tuple[str, bool], ...]:
    return searcher.context(query).query.positive_parts


if __name__ == "__main__":
    main()
