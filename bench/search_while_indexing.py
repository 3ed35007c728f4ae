"""Searches in a process that is indexing, the embedding in the process or in a child.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/search_while_indexing.py [--size 2500]
        [--rounds 2] [--root DIR]

What a `groove serve --watch` does when a large change arrives: one thread of the process
indexes while others search. Builds (once; reused) a KB of about SIZE chunks from real text
(bench/corpus.py), then per round and per setting of `[embedder] own_process` ("never":
the embedding in the indexing thread; "auto": in a child process, as a run of 1 MB or more
does) indexes it from scratch in a thread while the main thread searches back to back
(queries drawn from the corpus's paragraphs, default embedder, its own Groove object as a
server worker has) from the first moment the index is searchable to the end of the run.
Prints the run's time and the searches' count and latency (p50 / p95 / max).
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus

from groove_core.app import Groove
from groove_core.errors import GrooveError


def queries(count: int = 60, seed: int = 3) -> list[str]:
    """Short questions-like strings cut from the corpus's paragraphs."""
    rng = random.Random(seed)
    picked = rng.sample(corpus.paragraphs(), count)
    return [body[:40].strip() for _lang, body in picked]


def one_round(source: Path, work: Path, mode: str, asked: list[str]) -> dict[str, float]:
    kb = work / f"kb-{mode}"
    shutil.rmtree(kb, ignore_errors=True)
    shutil.copytree(source, kb, ignore=shutil.ignore_patterns(".groove", "groove.toml"))
    (kb / "groove.toml").write_text(
        f'[index]\nmax_chunk_tokens = 400\n[embedder]\nown_process = "{mode}"\n',
        encoding="utf-8",
    )
    indexer = Groove.open(kb)
    done = threading.Event()
    took: list[float] = []

    def index() -> None:
        started = time.perf_counter()
        try:
            indexer.index()
        finally:
            took.append(time.perf_counter() - started)
            done.set()

    searcher = Groove.open(kb)
    searcher.embedder.embed_query("warm up")  # the model loaded before the run starts
    thread = threading.Thread(target=index)
    thread.start()
    latencies: list[float] = []
    i = 0
    while not done.is_set():
        query = asked[i % len(asked)]
        i += 1
        started = time.perf_counter()
        try:
            searcher.search(query, limit=10)
        except GrooveError:  # not searchable yet (no index before the first batch)
            searcher.close()
            time.sleep(0.05)
            continue
        latencies.append(time.perf_counter() - started)
    thread.join()
    searcher.close()
    indexer.close()
    ms = sorted(1000 * s for s in latencies)
    return {
        "run_s": took[0],
        "searches": len(ms),
        "p50_ms": statistics.median(ms) if ms else 0.0,
        "p95_ms": ms[int(0.95 * (len(ms) - 1))] if ms else 0.0,
        "max_ms": ms[-1] if ms else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=2500, help="chunks (about)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--root", type=Path, default=Path(tempfile.gettempdir()) / "groove-search-while-indexing"
    )
    args = parser.parse_args()
    source = args.root / f"{args.size}-source"
    corpus.write(args.size, source)
    asked = queries()
    print("| round | own_process | run | searches during it | p50 | p95 | max |")
    print("|---|---|---|---|---|---|---|")
    for round_ in range(1, args.rounds + 1):
        for mode in ("never", "auto"):
            row = one_round(source, args.root, mode, asked)
            print(
                f"| {round_} | {mode} | {row['run_s']:.1f} s | {row['searches']} | "
                f"{row['p50_ms']:.1f} ms | {row['p95_ms']:.1f} ms | {row['max_ms']:.1f} ms |",
                flush=True,
            )


if __name__ == "__main__":
    main()
