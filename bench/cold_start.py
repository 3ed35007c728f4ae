"""Whole-process cost of a one-shot CLI search, against ``groove --help``, interleaved.

    .venv/bin/python bench/cold_start.py KB [--rounds 9] [--query Q] [--tree LABEL=DIR ...]

Each round runs, in turn: ``python -c pass``, ``groove --help`` and ``groove search Q --kb
KB`` (a fresh process each, the model cache already built), and the same for every extra
``--tree`` (another checkout of groove, e.g. the commit before a change, put first on
``PYTHONPATH``). Reported per command: medians over the rounds of wall time, CPU time
(user+sys of the child, from ``os.wait4``) and peak RSS, and the search's CPU time as a
multiple of ``--help``'s and above it. CPU time is the figure to compare on a loaded
machine: wall time there mostly measures the queue for a core.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(argv: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MiB) of one child process."""
    started = time.perf_counter()
    # a neutral working directory: `python -m` puts it first on sys.path, where a
    # checkout's groove_core would shadow the tree under test
    proc = subprocess.Popen(
        argv,
        env=env,
        cwd=tempfile.gettempdir(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{argv} failed ({proc.returncode}): {err.decode(errors='replace')}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("kb", type=Path)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--query", default="再ランキングの評価")
    parser.add_argument("--tree", action="append", default=[], help="LABEL=DIR")
    args = parser.parse_args()

    trees = {"this": ROOT, **{t.split("=", 1)[0]: Path(t.split("=", 1)[1]) for t in args.tree}}
    base_env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    groove = [sys.executable, "-m", "groove_core"]
    commands: dict[str, tuple[list[str], dict[str, str]]] = {
        "python -c pass": ([sys.executable, "-c", "pass"], base_env)
    }
    for label, tree in trees.items():
        env = {**base_env, "PYTHONPATH": str(tree)}
        commands[f"{label}: groove --help"] = ([*groove, "--help"], env)
        search = [*groove, "search", args.query, "--kb", str(args.kb)]
        commands[f"{label}: groove search"] = (search, env)
    for argv, env in commands.values():
        run(argv, env)  # warm the page cache and build the model cache outside the figures

    samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in commands}
    load_before = os.getloadavg()[0]
    for r in range(args.rounds):
        names = list(commands) if r % 2 == 0 else list(reversed(commands))
        for name in names:
            samples[name].append(run(*commands[name]))
    load_after = os.getloadavg()[0]

    print(
        f"rounds {args.rounds}, load average {load_before:.1f} -> {load_after:.1f}, "
        f"{os.cpu_count()} CPUs, query {args.query!r}"
    )
    print("| command | wall s | CPU s | peak RSS MiB |")
    print("|---|---|---|---|")
    med: dict[str, tuple[float, ...]] = {}
    for name, rows in samples.items():
        med[name] = tuple(statistics.median(col) for col in zip(*rows, strict=True))
        wall, cpu, rss = med[name]
        print(f"| `{name}` | {wall:.2f} | {cpu:.2f} | {rss:.0f} |")
    print()
    for label in trees:
        help_, search = med[f"{label}: groove --help"], med[f"{label}: groove search"]
        ratios = [
            s[1] / h[1]
            for s, h in zip(
                samples[f"{label}: groove search"], samples[f"{label}: groove --help"], strict=True
            )
        ]
        print(
            f"{label}: search CPU {statistics.median(ratios):.2f}x --help "
            f"(median of per-round ratios), {search[1] - help_[1]:+.2f} s CPU and "
            f"{search[0] - help_[0]:+.2f} s wall above it"
        )


if __name__ == "__main__":
    main()
