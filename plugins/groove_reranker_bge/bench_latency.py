"""Rerank latency on this CPU: 50 candidates of ≈200 tokens, randomly initialised
cross-encoders of MiniLM size (6 layers, 384 hidden) and base size (12 layers, 768 hidden),
through each installed backend, and what a time budget holds a rerank to.

Random weights cost exactly what trained ones do (the work is the same matrix products);
only the scores are meaningless. Run from the repository root::

    HF_HUB_OFFLINE=1 .venv/bin/python plugins/groove_reranker_bge/bench_latency.py [--json out.json]

It needs the plugin's ``test`` extra (the MiniLM tokenizer); the ``flag`` backend is
measured when FlagEmbedding is installed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from groove_reranker_bge.backends import ModelKey, get_model
from groove_reranker_bge.budget import score_within_budget
from groove_reranker_bge.testing import (
    BASE,
    MINILM,
    Size,
    build_random_cross_encoder,
    minilm_tokenizer_dir,
)

# Set before any model library is imported (they are imported lazily, below).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

CANDIDATES = 50
PASSAGE_TOKENS = 200
QUERY = "how does reciprocal rank fusion combine the lexical and vector legs"
VOCABULARY = (
    "search index chunk vector lexical fusion rank query model score budget latency cache "
    "document heading passage tokenizer batch transformer reranker candidate pool result "
    "knowledge base markdown note embedding cosine distance trigram phrase exclusion filter"
)


def passages(n: int, tokens: int, seed: int = 0) -> list[str]:
    """``n`` word-salad passages of about ``tokens`` WordPiece tokens each."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(minilm_tokenizer_dir()))
    rng = random.Random(seed)
    words_pool = VOCABULARY.split()
    out = []
    for _ in range(n):
        words: list[str] = []
        while len(tokenizer.tokenize(" ".join(words))) < tokens:
            words.append(rng.choice(words_pool))
        out.append(" ".join(words))
    return out


def time_full(model: Any, pairs: list[tuple[str, str]], batch_size: int, runs: int) -> float:
    """Median milliseconds to score every pair, batch by batch (no budget)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        score_within_budget(model.score, pairs, batch_size=batch_size, budget_ms=None)
        times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(times)


def time_budget(
    model: Any, pairs: list[tuple[str, str]], batch_size: int, budget_ms: float, prior: bool
) -> dict[str, float]:
    """One budgeted rerank: wall milliseconds and candidates scored."""
    start = time.perf_counter()
    scored = score_within_budget(
        model.score,
        pairs,
        batch_size=batch_size,
        budget_ms=budget_ms,
        prior_ms_per_item=model.ms_per_pair if prior else None,
    )
    model.ms_per_pair = scored.ms_per_item
    return {"ms": (time.perf_counter() - start) * 1000.0, "scored": len(scored.scores)}


def bench_size(
    name: str, size: Size, root: Path, backends: list[str], args: argparse.Namespace
) -> list[dict[str, Any]]:
    model_dir = build_random_cross_encoder(root / name, size)
    pairs = [(QUERY, p) for p in passages(CANDIDATES, PASSAGE_TOKENS)]
    rows = []
    for backend in backends:
        start = time.perf_counter()
        model = get_model(ModelKey(str(model_dir), backend, max_length=512))  # type: ignore[arg-type]
        load_ms = (time.perf_counter() - start) * 1000.0
        model.score(pairs[:2])  # first-call warm-up (lazy kernels, allocator)
        for batch_size in args.batch_sizes:
            row: dict[str, Any] = {
                "size": name,
                "backend": backend,
                "batch_size": batch_size,
                "load_ms": round(load_ms),
                "full_ms": round(time_full(model, pairs, batch_size, args.runs)),
                # Other jobs share the machine: the 1-minute load average, to read the row by.
                "load": round(os.getloadavg()[0], 1),
            }
            for budget in args.budgets:
                model.ms_per_pair = None
                first = time_budget(model, pairs, batch_size, budget, prior=False)
                later = time_budget(model, pairs, batch_size, budget, prior=True)
                row[f"budget_{budget:g}"] = {
                    "first_query": {k: round(v) for k, v in first.items()},
                    "later_query": {k: round(v) for k, v in later.items()},
                }
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["minilm", "base"])
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[8, 16])
    parser.add_argument("--budgets", nargs="+", type=float, default=[500.0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: torch's)"
    )
    parser.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = parser.parse_args()
    import torch

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    backends = ["sentence-transformers"]
    if importlib.util.find_spec("FlagEmbedding") is not None:
        backends.append("flag")
    print(f"torch threads: {torch.get_num_threads()}; backends: {backends}", flush=True)
    sizes = {"minilm": MINILM, "base": BASE}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.sizes:
            rows += bench_size(name, sizes[name], Path(tmp), backends, args)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
