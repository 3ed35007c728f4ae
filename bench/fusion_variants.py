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
from collections.abc import Iterable, Mapping
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


def variants_main(
    doc: str,
    variants: Mapping[str, dict[str, Any]],
    goldens: Iterable[str],
    default: str,
    work: Path | None,
) -> None:
    """The command line a benchmark of config variants shares (this one's and
    bench/prf_variants.py's): ``--work`` (required where ``work`` is None), ``--variants``
    (``default`` unless given), ``--golden`` (repeated; ``goldens`` unless given); prints
    the table of bench/paired.py."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--work", type=Path, default=work, required=work is None)
    parser.add_argument("--variants", default=default)
    parser.add_argument("--golden", action="append", default=None)
    args = parser.parse_args()
    variant_table(parser, args.work, args.golden or goldens, variants, args.variants)


def main() -> None:
    work = Path(tempfile.gettempdir()) / "groove-eval"
    variants_main(__doc__ or "", VARIANTS, GOLDEN_SETS, "seed,default", work)


if __name__ == "__main__":
    main()
