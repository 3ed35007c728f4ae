"""e5-small against USE on the evaluation collections: vector leg alone and fusion settings,
each paired against today's default (USE, default fusion) on the same golden queries.

Usage (from the repository root)::

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python bench/e5_compare.py \
        --use USE_WORK --e5 E5_WORK [--variants default,vector,...] [--golden C/G.jsonl ...]

``USE_WORK`` and ``E5_WORK`` each hold the collections as ``bench/eval_collections.py``
lays them out (``<work>/<collection>/docs`` + golden files), indexed with the default
embedder and with ``[embedder] name = "e5-small"`` respectively. Indexing is the slow part
(e5: a few chunks/s on 2 cores); every variant here only changes search settings, so one
index per embedder serves them all. Variants are prefixed ``use:`` or ``e5:``; the first
row of each golden file is the baseline (``use:default``). ``--json FILE`` also writes each
variant's per-query nDCG@10 and ranked documents, for fusing rankings outside groove.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from paired import GOLDEN_SETS, versus

from groove_core.evaluation.metrics import bootstrap
from groove_core.evaluation.runner import with_changes
from groove_core.evaluation.session import EvalSession

VECTOR_ONLY = {"plugins.disabled": ["fts", "word"]}
LEXICAL_ONLY = {"plugins.disabled": ["vector"]}
NO_RULES = {"search.fusion.cross_script_lexical": 1.0, "search.fusion.coverage_vector": 1.0}

#: name -> config changes (dotted keys), relative to the collection's configuration.
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "vector": VECTOR_ONLY,
    "lexical": LEXICAL_ONLY,
    "norules": NO_RULES,
    "cov-off": {"search.fusion.coverage_vector": 1.0},
    "xs-off": {"search.fusion.cross_script_lexical": 1.0},
    "cov0.5": {"search.fusion.coverage_vector": 0.5},
    "vec1.5": {"search.fusion.weights": {"vector": 1.5}},
    "vec2": {"search.fusion.weights": {"vector": 2.0}},
    "vec3": {"search.fusion.weights": {"vector": 3.0}},
    "cov-off+vec2": {
        "search.fusion.coverage_vector": 1.0,
        "search.fusion.weights": {"vector": 2.0},
    },
    "cov0.5+vec2": {"search.fusion.coverage_vector": 0.5, "search.fusion.weights": {"vector": 2.0}},
    "norules+vec2": {**NO_RULES, "search.fusion.weights": {"vector": 2.0}},
    "cov-off+vec1.5": {
        "search.fusion.coverage_vector": 1.0,
        "search.fusion.weights": {"vector": 1.5},
    },
    "cov-off+vec2+k20": {
        "search.fusion.coverage_vector": 1.0,
        "search.fusion.weights": {"vector": 2.0},
        "search.fusion.rrf_k": 20.0,
    },
    "cov-off+vec2+c100": {
        "search.fusion.coverage_vector": 1.0,
        "search.fusion.weights": {"vector": 2.0},
        "search.fusion.candidates": 100,
    },
}

for _t in (0.7, 0.8, 0.9, 1.0):
    for _w in (1.5, 2.0):
        VARIANTS[f"cov-t{_t:g}+vec{_w:g}"] = {
            "search.fusion.coverage_threshold": _t,
            "search.fusion.weights": {"vector": _w},
        }
    VARIANTS[f"cov-t{_t:g}"] = {"search.fusion.coverage_threshold": _t}
for _x in (0.0, 0.1, 0.25, 0.5, 1.0):
    VARIANTS[f"exact{_x:g}"] = {"search.fusion.cross_script_exact": _x}
VARIANTS["cov0.125+vec2"] = {
    "search.fusion.coverage_vector": 0.125,
    "search.fusion.weights": {"vector": 2.0},
}


def run(works: dict[str, Path], golden: str, names: list[str], per_query: dict[str, Any]) -> None:
    collection, name = golden.split("/")
    sessions: dict[str, EvalSession] = {}
    base: list[float] | None = None
    for full in names:
        side, variant = full.split(":", 1)
        if side not in sessions:
            kb = works[side] / collection
            sessions[side] = EvalSession.open(kb, None, kb / name)
        session = sessions[side]
        config = with_changes(session.config, VARIANTS[variant])
        started = time.perf_counter()
        outcomes = session.run(config, stage="candidates", limit=10)
        took = time.perf_counter() - started
        ndcg_values = outcomes.values("ndcg@10")
        ndcg, hit = bootstrap(ndcg_values), bootstrap(outcomes.values("hit@10"))
        per_query.setdefault(golden, {})[full] = [
            {
                "key": o.key,
                "ndcg": o.metrics["ndcg@10"],
                "docs": [d.path for d in o.docs],
                "grades": dict(q.grades),
            }
            for o, q in zip(outcomes.items, session.queries, strict=True)
        ]
        cells = [golden, str(len(ndcg_values)), full, f"{ndcg.mean:.3f}", f"{hit.mean:.3f}"]
        cells.append(versus(ndcg_values, base))
        if base is None:
            base = ndcg_values
        cells.append(f"{took:.1f}s")
        print("| " + " | ".join(cells) + " |", flush=True)
    for session in sessions.values():
        session.app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--use", type=Path, required=True, help="collections indexed with USE")
    parser.add_argument("--e5", type=Path, required=True, help="collections indexed with e5")
    parser.add_argument("--variants", default="use:default,use:vector,e5:vector,e5:default")
    parser.add_argument("--golden", action="append", default=None)
    parser.add_argument("--json", type=Path, default=None, help="per-query nDCG@10 here")
    args = parser.parse_args()
    names = args.variants.split(",")
    unknown = [n for n in names if n.partition(":")[2] not in VARIANTS or ":" not in n]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: use:/e5: + {', '.join(VARIANTS)}")
    print("| golden | n | variant | nDCG@10 | hit@10 | Δ nDCG vs first (95% CI, p) | time |")
    print("|---|---|---|---|---|---|---|")
    per_query: dict[str, Any] = {}
    for golden in args.golden or GOLDEN_SETS:
        run({"use": args.use, "e5": args.e5}, golden, names, per_query)
        if args.json is not None:  # after each file: a long run's early results survive
            args.json.write_text(json.dumps(per_query), encoding="utf-8")


if __name__ == "__main__":
    main()
