"""Query expansion (the groove-expansion plugin's ``prf`` leg) on the evaluation
collections, each setting paired against the default configuration.

Usage (from the repository root, with groove-expansion installed, after the collections
were copied and indexed into ``--work`` as ``bench/eval_collections.py`` does)::

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python bench/prf_variants.py \
        --work DIR [--variants default,prf,...] [--golden cranfield-en/golden.jsonl]

Each golden file is opened once (one store, one cached query embedder) and every variant
runs at stage 1, limit 10, as ``groove eval`` measures; each row gives nDCG@10 and hit@10
and the paired difference from the first variant (``groove eval``'s own test: bootstrap
interval of the mean difference, sign-flip p; "sig" when p < 0.05 and the interval
excludes 0). The figures in docs/eval.md ("Query expansion") come from this script.
"""

from __future__ import annotations

from typing import Any

from fusion_variants import variants_main
from paired import GOLDEN_SETS

ON = {"search.prf.enabled": True}
#: Every query expanded, as before ``min_terms``: the settings tables of docs/eval.md
#: ("Query expansion") were measured so.
EVERY = {**ON, "search.prf.min_terms": 1}

#: name -> config changes (dotted keys), relative to the default configuration.
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "prf": ON,  # the plugin's defaults: 10 passages, 10 terms, min_terms 5, weight 1
    "all": EVERY,
    "min4": {**ON, "search.prf.min_terms": 4},
    "min7": {**ON, "search.prf.min_terms": 7},
    "k5": {**EVERY, "search.prf.passages": 5},
    "k20": {**EVERY, "search.prf.passages": 20},
    "m5": {**EVERY, "search.prf.terms": 5},
    "m20": {**EVERY, "search.prf.terms": 20},
    "w0.5": {**EVERY, "search.fusion.weights.prf": 0.5},
    "w2": {**EVERY, "search.fusion.weights.prf": 2.0},
    # The word leg re-run with the expanded query instead of fused beside it.
    "replace": {**EVERY, "search.fusion.weights.word": 0.0},
}

#: The dev collections of issue #27 (the ranking benchmarks' sets and the vault's two).
GOLDEN = (
    *GOLDEN_SETS,
    "dendron-vault-en/golden.jsonl",
    "dendron-vault-en/golden-keywords.jsonl",
)


def main() -> None:
    variants_main(__doc__ or "", VARIANTS, GOLDEN, "default,prf", None)


if __name__ == "__main__":
    main()
