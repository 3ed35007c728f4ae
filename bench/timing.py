"""What the benchmarks share for timing (run as ``python bench/NAME.py``, so this folder is
on ``sys.path``): a timed ``groove`` run and summaries of latency samples."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence

#: groove's environment in a benchmark: offline, the models it needs already cached.
OFFLINE_ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def run_groove(
    *args: str, env: Mapping[str, str] = OFFLINE_ENV, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """``groove ARGS`` in its own process, as a user runs it, its output captured; with
    ``check``, a failed run raises ``subprocess.CalledProcessError``."""
    command = [sys.executable, "-m", "groove_core", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, check=check)


def timed_groove(
    *args: str, env: Mapping[str, str] = OFFLINE_ENV, check: bool = True
) -> tuple[float, str]:
    """(wall seconds, stdout) of :func:`run_groove`."""
    started = time.perf_counter()
    done = run_groove(*args, env=env, check=check)
    return time.perf_counter() - started, done.stdout


def p95(samples: list[float]) -> float:
    """The 95th percentile (nearest rank) of ``samples``."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def pct(samples: list[float]) -> str:
    """``median / p95`` of samples in seconds, printed in milliseconds."""
    return f"{statistics.median(samples) * 1000:.1f} / {p95(samples) * 1000:.1f}"


def fastest(
    queries: Sequence[str], runs: Sequence[Callable[[str], float]], passes: int
) -> list[list[float]]:
    """Each run's fastest time per query over ``passes`` passes (``run(query)`` returns the
    seconds it measured), the runs taken in turn for every query, their order reversed
    every other pass: whatever drifts (caches, a busy machine) falls on each alike."""
    times: list[list[list[float]]] = [[[] for _ in queries] for _ in runs]
    for n in range(passes):
        order = list(enumerate(runs)) if n % 2 == 0 else list(enumerate(runs))[::-1]
        for i, query in enumerate(queries):
            for r, run in order:
                times[r][i].append(run(query))
    return [[min(t) for t in per] for per in times]


def ratio_row(first: list[float], second: list[float]) -> str:
    """``median / p95`` of each and of the per-query ratio (second over first), a table's
    cells."""
    ratios = [b / a for a, b in zip(first, second, strict=True) if a > 0]
    return f"{pct(first)} | {pct(second)} | {statistics.median(ratios):.2f} / {p95(ratios):.2f}"
