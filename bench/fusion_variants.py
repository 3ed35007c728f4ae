"""Compare fusion configurations on the evaluation collections, paired against a baseline.

Usage (from the repository root, after ``bench/eval_collections.py`` has indexed the
collections into ``--work``)::

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python bench/fusion_variants.py \
        [--work DIR] [--variants seed,default,...] [--golden jsquad-ja-para/golden-hard.jsonl]

Each golden file is opened once (one store, one cached query embedder) and every variant
is run at stage 1, as ``groove eval`` measures. Each row gives nDCG@10 and hit@10 with the
95% bootstrap interval, and the paired difference from the first variant (interval and
sign-flip p-value; "sig" when p < 0.05 and the interval excludes 0). The figures in ADR-0012
and docs/eval.md come from this script.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from paired import GOLDEN_SETS, versus

from groove_core.evaluation.metrics import bootstrap
from groove_core.evaluation.runner import with_changes
from groove_core.evaluation.session import EvalSession

#: name -> config changes (dotted keys), relative to the default configuration.
VARIANTS: dict[str, dict[str, Any]] = {
    "seed": {"plugins.disabled": ["word"]},
    "default": {},
    "word-norules": {
        "search.fusion.cross_script_lexical": 1.0,
        "search.fusion.coverage_vector": 1.0,
    },
    "word+cross": {"search.fusion.coverage_vector": 1.0},
    "word+coverage": {"search.fusion.cross_script_lexical": 1.0},
    "xs0.25": {"search.fusion.cross_script_lexical": 0.25},
    "xs0": {"search.fusion.cross_script_lexical": 0.0},
}


def run(work: Path, golden: str, names: list[str]) -> list[str]:
    collection, name = golden.split("/")
    kb = work / collection
    session = EvalSession.open(kb, None, kb / name)
    rows: list[str] = []
    base: dict[str, list[float]] | None = None
    for variant in names:
        config = with_changes(session.config, VARIANTS[variant])
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
        ]
        cells.append(versus(values["ndcg@10"], None if base is None else base["ndcg@10"]))
        if base is None:
            base = values
        cells.append(f"{took:.1f}s")
        rows.append("| " + " | ".join(cells) + " |")
        print(rows[-1], flush=True)
    session.app.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "groove-eval")
    parser.add_argument("--variants", default="seed,default")
    parser.add_argument("--golden", action="append", default=None)
    args = parser.parse_args()
    names = args.variants.split(",")
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    print("| golden | n | variant | nDCG@10 (95% CI) | hit@10 | Δ nDCG vs first | time |")
    print("|---|---|---|---|---|---|---|")
    for golden in args.golden or GOLDEN_SETS:
        run(args.work, golden, names)


if __name__ == "__main__":
    main()
