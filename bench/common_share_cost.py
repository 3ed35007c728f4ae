"""What searching a query's common words costs: whole searches under two settings (by
default ``[search] lexical_common_share`` 0.2, the default, and 0.5, which keeps every word
bm25 still weighs; issue #42, docs/eval.md), query by query, in one process.

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python bench/common_share_cost.py \
        --kb DIR --golden FILE [--golden FILE ...] [--first KEY=VALUE] [--second KEY=VALUE] \
        [--passes 3]

``--kb`` is an indexed KB (any embedder: the query vectors are computed once, in a warm-up
pass, and cached, so the figures are the search without the embedding). Every query is
searched once per setting, alternately, the order reversed every other pass; each query's time
is its fastest pass, in process CPU seconds (the legs run on threads of their own, which
the process clock counts). Prints, per golden file, median / p95 per setting and the median
and p95 of the per-query ratio (second over first). A setting is a dotted key and a JSON
value (``search.lexical_common_share=0.5``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from timing import fastest, ratio_row

from groove_core.app import Groove
from groove_core.evaluation.golden import load_golden
from groove_core.evaluation.runner import CachedEmbedder, with_changes
from groove_core.pipeline import Searcher
from groove_core.plugins import make_plugin_manager


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kb", type=Path, required=True)
    parser.add_argument("--golden", type=Path, action="append", required=True)
    parser.add_argument("--first", default="search.lexical_common_share=0.2")
    parser.add_argument("--second", default="search.lexical_common_share=0.5")
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    app = Groove.open(args.kb)
    embedder = CachedEmbedder(app.embedder)
    searchers = []
    for setting in (args.first, args.second):
        key, _, value = setting.partition("=")
        config = with_changes(app.config, {key: json.loads(value)})
        searchers.append(Searcher(make_plugin_manager(config), app.store, embedder))
    chunks = app.store.counts().get("chunks", "?")
    print(f"KB: {args.kb.name}, {chunks} chunks; {args.first} vs {args.second}")
    print(
        "| golden | queries | first: median / p95 ms | second: median / p95 ms "
        "| ratio median / p95 |"
    )
    print("|---|---|---|---|---|")
    for golden in args.golden:
        queries = [q.query for q in load_golden(golden).queries]
        for searcher in searchers:  # warm-up: embeds each query once
            for query in queries:
                searcher.run(searcher.context(query))
        runs = [lambda q, s=searcher: _timed(s, q) for searcher in searchers]
        first, second = fastest(queries, runs, args.passes)
        print(
            f"| {golden.parent.name}/{golden.name} | {len(queries)} | {ratio_row(first, second)} |"
        )
    app.close()


def _timed(searcher: Searcher, query: str) -> float:
    started = time.process_time()
    searcher.run(searcher.context(query))
    return time.process_time() - started


if __name__ == "__main__":
    main()
