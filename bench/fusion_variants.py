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
from pathlib import Path
from typing import Any

from paired import GOLDEN_SETS, variant_table

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
    # [search.fusion] method = "scores": each leg's scores over its best (issue #47)
    "scores": {"search.fusion.method": "scores"},
    "scores-nocov": {"search.fusion.method": "scores", "search.fusion.coverage_vector": 1.0},
    "scores-v2": {"search.fusion.method": "scores", "search.fusion.weights": {"vector": 2.0}},
    "nocov": {"search.fusion.coverage_vector": 1.0},
    "v2": {"search.fusion.weights": {"vector": 2.0}},
    "prf": {"search.prf.enabled": True},
    "prf-scores": {"search.prf.enabled": True, "search.fusion.method": "scores"},
    "nocov-v2": {"search.fusion.coverage_vector": 1.0, "search.fusion.weights": {"vector": 2.0}},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "groove-eval")
    parser.add_argument("--variants", default="seed,default")
    parser.add_argument("--golden", action="append", default=None)
    args = parser.parse_args()
    variant_table(parser, args.work, args.golden or GOLDEN_SETS, VARIANTS, args.variants)


if __name__ == "__main__":
    main()
