"""A command-line search answered by a running server against the same search alone
(issue #31): wall time of the whole ``groove search`` process, the two interleaved run by
run, and the background server's memory while idle.

Usage (from the repository root)::

    HF_HUB_OFFLINE=1 .venv/bin/python bench/warm_cli.py [--chunks 10000] [--runs 15] \
        [--work DIR]

The KB (``bench/corpus.py``, real paragraphs) is made and indexed with the default
embedder in ``--work`` the first time and reused after. Each round runs one search alone
(``GROOVE_NO_SERVER=1``) and one answered by ``groove serve --background``, on the same
query; the figures are medians over the rounds and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ["再ランキングの評価", "aerodynamic heating of a cone", "東京の人口", "the flow of air"]


def _groove(*args: str, cold: bool = False) -> float:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if cold:
        env["GROOVE_NO_SERVER"] = "1"
    began = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "groove_core", *args],
        env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return time.perf_counter() - began


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "groove-warm")
    args = parser.parse_args()
    kb = args.work / f"kb-{args.chunks}"
    if not kb.exists():
        subprocess.run([sys.executable, str(ROOT / "bench/corpus.py"), str(args.chunks), str(kb)],
                       check=True)  # fmt: skip
    subprocess.run([sys.executable, "-m", "groove_core", "index", str(kb)], check=True,
                   stderr=subprocess.DEVNULL)  # fmt: skip
    started = subprocess.run(
        [sys.executable, "-m", "groove_core", "serve", "--background", "--kb", str(kb)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    pid = int(started.stdout.split("(pid ")[1].split(")")[0])
    try:
        cold, warm = [], []
        for i in range(args.runs):
            query = QUERIES[i % len(QUERIES)]
            cold.append(_groove("search", query, "--kb", str(kb), cold=True))
            warm.append(_groove("search", query, "--kb", str(kb)))
        time.sleep(2)
        idle = _rss_mib(pid)
    finally:
        subprocess.run([sys.executable, "-m", "groove_core", "serve", "--stop", "--kb", str(kb)],
                       capture_output=True)  # fmt: skip
    result = {
        "chunks": args.chunks,
        "runs": args.runs,
        "cold_median_ms": round(statistics.median(cold) * 1000, 1),
        "warm_median_ms": round(statistics.median(warm) * 1000, 1),
        "warm_over_cold": round(statistics.median(warm) / statistics.median(cold), 3),
        "server_idle_rss_mib": round(idle, 1),
        "load_average": os.getloadavg()[0],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
