"""Quality and cost of MMR and the parent retriever next to the baseline, on one KB.

    .venv/bin/python plugins/groove_mmr/bench_eval.py            # cranfield-en, USE embedder

Indexes the collection into ``--work`` (never into the collection folder: the index path
comes from a groove.toml written there), then runs every golden query three ways on the
same index: baseline, ``mmr`` on, ``parent`` on (per-query options, so nothing else
differs). Reports

* quality at limit 10, doc-level credit (a hit counts for an expected document when its
  path is expected; each document is credited once): recall@1/5/10 (share of expected
  documents found in the top k), MRR, nDCG@10 (binary gains);
* cost: per-search milliseconds at limit 10 and 50 (median and mean over the queries,
  configurations interleaved query by query so drift hits all alike), and the time spent
  inside the diversify / expand stage alone.

The first run embeds the collection (cranfield with USE: a couple of minutes on 2 cores);
later runs reuse the index. ``groove eval`` is the product feature; this script exists so
the plugin's figures can be reproduced without it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from groove_core.app import Groove

EVALDATA = Path(__file__).resolve().parents[2] / "evaldata"
CONFIGS: dict[str, dict[str, bool]] = {
    "baseline": {},
    "mmr": {"mmr": True},
    "parent": {"parent": True},
}
STAGE_HOOKS = {"groove_diversify", "groove_expand"}


def load_golden(path: Path) -> list[tuple[str, set[str]]]:
    queries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            queries.append((item["query"], set(item["expected"])))
    return queries


def doc_ranking(paths: Sequence[str]) -> list[str]:
    """Result paths with repeats removed: a document is credited once, at its best rank."""
    seen: dict[str, None] = {}
    for path in paths:
        seen.setdefault(path, None)
    return list(seen)


def metrics(ranked: list[str], expected: set[str]) -> dict[str, float]:
    out = {f"recall@{k}": len(set(ranked[:k]) & expected) / len(expected) for k in (1, 5, 10)}
    first = next((i for i, p in enumerate(ranked, start=1) if p in expected), None)
    out["mrr"] = 0.0 if first is None else 1.0 / first
    dcg = sum(1.0 / math.log2(i + 1) for i, p in enumerate(ranked[:10], start=1) if p in expected)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(expected), 10) + 1))
    out["ndcg@10"] = dcg / ideal
    return out


def open_app(collection: Path, work: Path, embedder: str, mmr_lambda: float = 0.7) -> Groove:
    """The collection with its index (and this config file) under ``work``."""
    work.mkdir(parents=True, exist_ok=True)
    config = work / f"{collection.name}-{embedder}-lambda{mmr_lambda}.toml"
    index = work / f"{collection.name}-{embedder}.sqlite"
    config.write_text(
        f'[embedder]\nname = "{embedder}"\n[index]\npath = "{index}"\nignore = ["SOURCE.md"]\n'
        f"[search.mmr]\nlambda = {mmr_lambda}\n",
        encoding="utf-8",
    )
    return Groove.open(collection, config)


class StageTimer:
    """Seconds spent inside the diversify and expand hooks, via pluggy's call monitoring."""

    def __init__(self, app: Groove) -> None:
        self.total = 0.0
        self._start = 0.0
        app.plugins.pm.add_hookcall_monitoring(self._before, self._after)

    def _before(self, name: str, impls: Any, kwargs: Any) -> None:
        if name in STAGE_HOOKS:
            self._start = time.perf_counter()

    def _after(self, outcome: Any, name: str, impls: Any, kwargs: Any) -> None:
        if name in STAGE_HOOKS:
            self.total += time.perf_counter() - self._start


Run = tuple[str, Groove, dict[str, bool]]


def quality(runs: list[Run], golden: list[tuple[str, set[str]]]) -> dict[str, dict[str, float]]:
    table = {}
    for name, app, options in runs:
        rows = []
        for query, expected in golden:
            hits = app.search(query, limit=10, options=options).results
            rows.append(metrics(doc_ranking([h.path for h in hits]), expected))
        table[name] = {key: statistics.fmean(r[key] for r in rows) for key in rows[0]}
    return table


def cost(
    app: Groove, queries: list[str], limit: int, timer: StageTimer
) -> dict[str, dict[str, float]]:
    samples: dict[str, list[float]] = {name: [] for name in CONFIGS}
    stage: dict[str, float] = dict.fromkeys(CONFIGS, 0.0)
    for query in queries:
        for name, options in CONFIGS.items():
            before = timer.total
            start = time.perf_counter()
            app.search(query, limit=limit, options=options)
            samples[name].append((time.perf_counter() - start) * 1000)
            stage[name] += (timer.total - before) * 1000
    return {
        name: {
            "median_ms": statistics.median(values),
            "mean_ms": statistics.fmean(values),
            "stage_mean_ms": stage[name] / len(values),
        }
        for name, values in samples.items()
    }


def _print_table(
    title: str, table: dict[str, dict[str, float]], fmt: Callable[[float], str]
) -> None:
    keys = list(next(iter(table.values())))
    print(f"\n{title}\n| config | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for name, row in table.items():
        print(f"| {name} | " + " | ".join(fmt(row[k]) for k in keys) + " |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--collection", type=Path, default=EVALDATA / "cranfield-en")
    parser.add_argument("--golden", default="golden.jsonl")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "groove-bench")
    parser.add_argument("--embedder", default="use-multilingual")
    parser.add_argument("--timing-queries", type=int, default=100)
    parser.add_argument(
        "--lambdas",
        type=float,
        nargs="*",
        default=[0.5, 0.9],
        help="extra MMR lambdas to measure quality for (0.7, the default, always runs)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)

    app = open_app(args.collection, args.work, args.embedder)
    report = app.index(progress=None)
    print(
        f"index: {report.documents_total} documents, {report.chunks_total} chunks "
        f"({report.chunks_embedded} embedded now, {report.seconds:.1f} s)",
        file=sys.stderr,
    )
    golden = load_golden(args.collection / args.golden)
    runs: list[Run] = [(name, app, options) for name, options in CONFIGS.items()]
    for value in args.lambdas:
        other = open_app(args.collection, args.work, args.embedder, value)
        runs.append((f"mmr λ={value}", other, {"mmr": True}))
    figures: dict[str, Any] = {"queries": len(golden), "quality": quality(runs, golden)}
    _print_table(f"quality, {len(golden)} queries, limit 10", figures["quality"], "{:.4f}".format)

    timer = StageTimer(app)
    queries = [q for q, _ in golden[: args.timing_queries]]
    for query in queries[:5]:  # warm caches and the embedder before measuring
        app.search(query, limit=10)
    for limit in (10, 50):
        figures[f"cost@{limit}"] = cost(app, queries, limit, timer)
        _print_table(
            f"cost per search, limit {limit}, {len(queries)} queries",
            figures[f"cost@{limit}"],
            "{:.2f}".format,
        )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
