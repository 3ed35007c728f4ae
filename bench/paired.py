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
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

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


def variant_rows(
    work: Path, golden: str, variants: Mapping[str, dict[str, Any]], names: list[str]
) -> list[str]:
    """One Markdown row per variant on one golden file (``collection/name.jsonl`` under
    ``work``, indexed): nDCG@10 and hit@10, and nDCG@10 paired against the first variant.
    The file is opened once (one store, one cached query embedder); every variant runs at
    stage 1, limit 10, as ``groove eval`` measures."""
    from groove_core.evaluation.metrics import bootstrap
    from groove_core.evaluation.runner import with_changes
    from groove_core.evaluation.session import EvalSession

    collection, name = golden.split("/")
    kb = work / collection
    session = EvalSession.open(kb, None, kb / name)
    rows: list[str] = []
    base: dict[str, list[float]] | None = None
    for variant in names:
        config = with_changes(session.config, variants[variant])
        started = time.perf_counter()
        outcomes = session.run(config, stage="candidates", limit=10)
        took = time.perf_counter() - started
        values = {m: outcomes.values(m) for m in ("ndcg@10", "hit@10")}
        ndcg, hit = bootstrap(values["ndcg@10"]), bootstrap(values["hit@10"])
        cells = [
            golden,
            str(len(values["ndcg@10"])),
            variant,
            f"{ndcg.mean:.3f} ({ndcg.low:.3f}–{ndcg.high:.3f})",
            f"{hit.mean:.3f}",
            versus(values["ndcg@10"], None if base is None else base["ndcg@10"]),
            f"{took:.1f}s",
        ]
        if base is None:
            base = values
        rows.append("| " + " | ".join(cells) + " |")
        print(rows[-1], flush=True)
    session.app.close()
    return rows


def variant_table(
    parser: argparse.ArgumentParser,
    work: Path,
    goldens: Iterable[str],
    variants: Mapping[str, dict[str, Any]],
    names: str,
) -> None:
    """Print the table of ``names`` (comma-separated keys of ``variants``) on every golden
    file; an unknown name is the parser's error."""
    chosen = names.split(",")
    unknown = [n for n in chosen if n not in variants]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {', '.join(variants)}")
    print("| golden | n | variant | nDCG@10 (95% CI) | hit@10 | Δ nDCG vs first | time |")
    print("|---|---|---|---|---|---|---|")
    for golden in goldens:
        variant_rows(work, golden, variants, chosen)


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
