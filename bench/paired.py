"""Paired comparison of two `groove eval --per-query` runs over the same golden file.

    .venv/bin/python bench/paired.py A.jsonl B.jsonl [--metric ndcg@10]

Prints the mean of each, the mean difference B - A with a 95% paired bootstrap interval,
and how many queries got better, worse or stayed equal. A difference whose interval
contains 0 is not significant.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path

#: The golden sets the ranking benchmarks run by default (docs/benchmarks.md).
GOLDEN_SETS = (
    "jsquad-ja-para/golden.jsonl",
    "jsquad-ja-para/golden-hard.jsonl",
    "jsquad-ja-para/golden-short.jsonl",
    "xquad-en-para/golden.jsonl",
    "xquad-en-para/golden-hard.jsonl",
    "cranfield-en/golden.jsonl",
    "md-vue-docs-ja/golden-xlang-en2ja.jsonl",
)


def versus(values: list[float], base: list[float] | None) -> str:
    """A table cell comparing ``values`` with the baseline's, query by query: the mean
    difference, its 95% interval, the p-value and whether it is a real change."""
    from groove_core.evaluation.metrics import paired_test

    if base is None:
        return "(baseline)"
    cmp = paired_test(values, base)
    d = cmp.delta
    verdict = "sig" if cmp.significant else "noise"
    return f"{d.mean:+.3f} ({d.low:+.3f}..{d.high:+.3f}) p={cmp.p_value:.3f} {verdict}"


def load(path: Path, metric: str) -> dict[str, float]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return {r["id"]: float(r[metric]) for r in rows if r.get("variant", "default") == "default"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--metric", default="ndcg@10")
    parser.add_argument("--rounds", type=int, default=10_000)
    args = parser.parse_args()
    a, b = load(args.a, args.metric), load(args.b, args.metric)
    ids = sorted(a.keys() & b.keys())
    diffs = [b[i] - a[i] for i in ids]
    rng = random.Random(7)
    means = sorted(statistics.fmean(rng.choices(diffs, k=len(diffs))) for _ in range(args.rounds))
    low, high = means[int(0.025 * args.rounds)], means[int(0.975 * args.rounds)]
    better = sum(d > 0 for d in diffs)
    worse = sum(d < 0 for d in diffs)
    print(
        f"{args.metric}: A {statistics.fmean(a[i] for i in ids):.4f}  "
        f"B {statistics.fmean(b[i] for i in ids):.4f}  "
        f"B-A {statistics.fmean(diffs):+.4f} (95% {low:+.4f} .. {high:+.4f})  "
        f"better {better} worse {worse} equal {len(ids) - better - worse} of {len(ids)}"
    )


if __name__ == "__main__":
    main()
