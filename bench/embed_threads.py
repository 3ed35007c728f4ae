"""BLAS threads of the default embedder: 1 against 2, for index batches and for queries.

    .venv/bin/python bench/embed_threads.py [--burners N] [--rounds R]

One process, one loaded model; the thread counts alternate round by round (1, 2, 1, 2,
...) so a change in the machine's load hits both sides alike. Each round embeds one index
batch (64 real paragraphs, the indexer's batch size) and 40 single queries (golden
questions, Japanese and English) with each thread count. ``--burners N`` starts N
processes that only burn CPU beside the benchmark: the "loaded machine" case (an editor, a
browser, an agent, a test run on a 2-core laptop). Reported per thread count: medians over
the rounds of wall time and of process CPU time (user+sys of every thread: BLAS threads
that spin while waiting for a core show up there), as chunks/s and ms per query.

``--kb KB`` (an indexed KB) adds warm end-to-end searches: the same questions through
``app.search`` with ``query_threads`` 1 and 2, alternating, p50 / p95 of wall time.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: corpus
import corpus

from groove_core.app import Groove
from groove_core.embedding import USEMultilingual

BATCH = 64
QUERIES = 40


def _texts() -> tuple[list[str], list[str]]:
    paras = [text for _, text in corpus.paragraphs()]
    # interleave languages so one batch holds both, as a mixed KB's batches do
    paras = paras[::2][: BATCH // 2] + paras[1::2][: BATCH // 2]
    questions: list[str] = []
    for collection in ("jsquad-ja-para", "xquad-en-para"):
        lines = (corpus.EVALDATA / collection / "golden.jsonl").read_text("utf-8").splitlines()
        questions += [json.loads(line)["query"] for line in lines[: QUERIES // 2]]
    return paras[:BATCH], questions


def _timed(fn: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--burners", type=int, default=0, help="CPU-burning processes beside")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--kb", type=Path, help="an indexed KB: also time warm searches")
    args = parser.parse_args()

    batch, questions = _texts()
    embedders = {n: USEMultilingual(query_threads=n, index_threads=n) for n in (1, 2)}
    for embedder in embedders.values():
        embedder.embed_documents(batch[:4])  # load the model outside the timings

    apps = _apps(args.kb) if args.kb else {}
    search_walls: dict[int, list[float]] = {1: [], 2: []}
    search_cpus: dict[int, list[float]] = {1: [], 2: []}
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.burners)
    ]
    samples: dict[int, dict[str, list[float]]] = {
        n: {"batch_wall": [], "batch_cpu": [], "query_wall": [], "query_cpu": []} for n in (1, 2)
    }
    try:
        time.sleep(0.5 if burners else 0)
        load_before = os.getloadavg()[0]
        for r in range(args.rounds):
            for n in (1, 2) if r % 2 == 0 else (2, 1):
                embedder = embedders[n]
                wall, cpu = _timed(functools.partial(embedder.embed_documents, batch))
                samples[n]["batch_wall"].append(wall)
                samples[n]["batch_cpu"].append(cpu)
                walls, cpus = [], []
                for q in questions:
                    wall, cpu = _timed(functools.partial(embedder.embed_query, q))
                    walls.append(wall)
                    cpus.append(cpu)
                samples[n]["query_wall"].append(statistics.median(walls))
                samples[n]["query_cpu"].append(statistics.median(cpus))
                for q in questions if apps else ():
                    wall, cpu = _timed(functools.partial(apps[n].search, q, limit=10))
                    search_walls[n].append(wall)
                    search_cpus[n].append(cpu)
        load_after = os.getloadavg()[0]
    finally:
        for proc in burners:
            proc.kill()
            proc.wait()

    print(
        f"burners {args.burners}, rounds {args.rounds}, "
        f"load average {load_before:.1f} -> {load_after:.1f}, {os.cpu_count()} CPUs"
    )
    print(
        "| threads | index batch chunks/s (wall) | CPU ms / batch "
        "| query ms (wall) | CPU ms / query |"
    )
    print("|---|---|---|---|---|")
    for n, s in samples.items():
        bw, bc = statistics.median(s["batch_wall"]), statistics.median(s["batch_cpu"])
        qw, qc = statistics.median(s["query_wall"]), statistics.median(s["query_cpu"])
        print(f"| {n} | {BATCH / bw:.0f} | {bc * 1000:.0f} | {qw * 1000:.1f} | {qc * 1000:.1f} |")
    if apps:
        print("\n| query_threads | warm search p50 ms | p95 ms | CPU ms p50 |\n|---|---|---|---|")
        for n, walls in search_walls.items():
            ordered = sorted(walls)
            p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
            cpu = statistics.median(search_cpus[n])
            print(
                f"| {n} | {statistics.median(walls) * 1000:.1f} | {p95 * 1000:.1f} | "
                f"{cpu * 1000:.1f} |"
            )


def _apps(kb: Path) -> dict[int, Groove]:
    """One warm app per query thread count, on the same index."""
    apps = {}
    for n in (1, 2):
        config = Path(tempfile.mkdtemp()) / "groove.toml"
        config.write_text(f"[embedder]\nquery_threads = {n}\n", encoding="utf-8")
        apps[n] = Groove.open(kb, config)
        apps[n].search("warm up the model, the index and the page cache", limit=10)
    return apps


if __name__ == "__main__":
    main()
