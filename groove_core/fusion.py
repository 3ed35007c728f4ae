"""Reciprocal Rank Fusion of every candidate leg."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from groove_core.models import LegResult


@dataclass
class Fused:
    chunk_id: int
    score: float
    # leg name -> (1-based rank in that leg, the leg's raw score)
    legs: dict[str, tuple[int, float]] = field(default_factory=dict)


def rrf(legs: Sequence[LegResult], k: float, size: int) -> list[Fused]:
    """score(c) = sum over legs of w_leg / (k + rank_leg(c)); the best ``size``, best first.

    ``w_leg`` is ``leg.meta["weight"]`` (set by ``groove_core.weighting``; 1.0 when absent,
    which is the seed's plain RRF). A leg weighted 0 is left out entirely, as if disabled,
    so its ranks do not even break ties.

    Ties break on the best single-leg rank, then on chunk id, so the order is stable
    across runs and machines (the baseline snapshot depends on it).
    """
    fused: dict[int, Fused] = {}
    for leg in legs:
        weight = float(leg.meta.get("weight", 1.0))
        if weight <= 0:
            continue
        for rank, hit in enumerate(leg.hits, start=1):
            item = fused.setdefault(hit.chunk_id, Fused(hit.chunk_id, 0.0))
            if leg.name in item.legs:
                continue
            item.score += weight / (k + rank)
            item.legs[leg.name] = (rank, hit.raw_score)
    ordered = sorted(
        fused.values(),
        key=lambda f: (-f.score, min(r for r, _ in f.legs.values()), f.chunk_id),
    )
    return ordered[:size]
