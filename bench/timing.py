"""Summaries of latency samples shared by the benchmarks (run as ``python bench/NAME.py``,
so this folder is on ``sys.path``)."""

from __future__ import annotations

import statistics


def p95(samples: list[float]) -> float:
    """The 95th percentile (nearest rank) of ``samples``."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def pct(samples: list[float]) -> str:
    """``median / p95`` of samples in seconds, printed in milliseconds."""
    return f"{statistics.median(samples) * 1000:.1f} / {p95(samples) * 1000:.1f}"
