"""Two vector legs (USE and e5) fused outside groove, from ``bench/e5_compare.py --json``.

    .venv/bin/python bench/fuse_rankings.py RESULTS.json [RESULTS.json ...]

For each golden file, document-level weighted RRF (k = 60) over the top-10 lists of
variants already run (``use:lexical``, ``use:vector``, ``e5:vector``): "lexical + USE +
e5" against "lexical + e5" and "lexical + USE", built the same way, so the comparison
is fair even though top-10 document lists only approximate groove's chunk-level fusion.
Each row is paired against the first (paired bootstrap interval and sign-flip test).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from paired import versus

from groove_core.evaluation.metrics import bootstrap

K = 60.0

#: name -> (variant, weight) lists
FUSIONS: dict[str, list[tuple[str, float]]] = {
    "lexical + USE": [("use:lexical", 1.0), ("use:vector", 1.0)],
    "lexical + e5": [("use:lexical", 1.0), ("e5:vector", 1.0)],
    "lexical + e5 x2": [("use:lexical", 1.0), ("e5:vector", 2.0)],
    "lexical + USE + e5": [("use:lexical", 1.0), ("use:vector", 1.0), ("e5:vector", 1.0)],
    "lexical + USE + e5 x2": [("use:lexical", 1.0), ("use:vector", 1.0), ("e5:vector", 2.0)],
}


def ndcg(docs: list[str], grades: dict[str, float]) -> float:
    gain = sum(grades.get(d, 0.0) / math.log2(i + 2) for i, d in enumerate(docs[:10]))
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(grades.values())[::-1][:10]))
    return gain / ideal if ideal else 0.0


def fuse(rows: dict[str, list[dict[str, Any]]], legs: list[tuple[str, float]]) -> list[float]:
    out = []
    for i, first in enumerate(rows[legs[0][0]]):
        scores: dict[str, float] = {}
        for variant, weight in legs:
            for rank, doc in enumerate(rows[variant][i]["docs"], start=1):
                scores[doc] = scores.get(doc, 0.0) + weight / (K + rank)
        ranked = sorted(scores, key=lambda d: (-scores[d], d))
        out.append(ndcg(ranked, first["grades"]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", type=Path, nargs="+")
    args = parser.parse_args()
    print("| golden | fusion | nDCG@10 | Δ vs first (95% CI, p) |\n|---|---|---|---|")
    for path in args.results:
        for golden, rows in json.loads(path.read_text(encoding="utf-8")).items():
            base: list[float] | None = None
            for name, legs in FUSIONS.items():
                if any(variant not in rows for variant, _ in legs):
                    continue
                values = fuse(rows, legs)
                cells = [golden, name, f"{bootstrap(values).mean:.3f}"]
                cells.append(versus(values, base))
                if base is None:
                    base = values
                print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
