"""Fusion of every candidate leg: Reciprocal Rank Fusion (the seed's), or leg scores."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from groove_core.models import LegResult, ScoreScale

if TYPE_CHECKING:
    from groove_core.context import LegSpec

#: ``[search.fusion] method``: ``rrf`` (the seed's) or ``scores`` (:func:`by_scores`).
FusionMethod = Literal["rrf", "scores"]


@dataclass
class Fused:
    chunk_id: int
    score: float
    # leg name -> (1-based rank in that leg, the leg's raw score)
    legs: dict[str, tuple[int, float]] = field(default_factory=dict)


def fuse(
    legs: Sequence[LegResult],
    method: FusionMethod,
    k: float,
    size: int,
    scales: Mapping[str, ScoreScale] | None = None,
) -> list[Fused]:
    """The legs fused by ``method``; ``scales``: leg name -> its spec's score scale (read by
    ``scores`` only; a leg not named is ranked by its order)."""
    if method == "scores":
        return by_scores(legs, k, size, scales or {})
    return rrf(legs, k, size)


def leg_scales(specs: Iterable[LegSpec]) -> dict[str, ScoreScale]:
    """Leg name -> the scale its spec declares, for :func:`fuse`."""
    return {spec.name: spec.scale for spec in specs}


def rrf(legs: Sequence[LegResult], k: float, size: int) -> list[Fused]:
    """score(c) = sum over legs of w_leg / (k + rank_leg(c)); the best ``size``, best first.

    ``w_leg`` is ``leg.meta["weight"]`` (set by ``groove_core.weighting``; 1.0 when absent,
    which is the seed's plain RRF). A leg weighted 0 is left out entirely, as if disabled,
    so its ranks do not even break ties.

    Ties break on the best single-leg rank, then on chunk id, so the order is stable
    across runs and machines (the baseline snapshot depends on it).
    """
    return _sum(legs, size, lambda leg, w: [w / (k + rank) for rank in _ranks(leg)])


def by_scores(
    legs: Sequence[LegResult], k: float, size: int, scales: Mapping[str, ScoreScale]
) -> list[Fused]:
    """score(c) = sum over legs of w_leg * share_leg(c): the hit's value over the leg's best
    value, both measured from the scale's floor (:data:`~groove_core.models.ScoreScale`).

    ``best`` is the largest finite value of the leg. A leg with no value above its floor
    (a plugin's scores on another convention) is ranked by its order, as a ``rank`` leg.

    Where RRF sees only ranks, this keeps how far apart a leg's hits are: a bm25 leg whose
    first hit matches every rare word of the query far ahead of its second counts that
    gap, and a vector leg whose first ten hits are nearly as near as each other gives
    them nearly equal shares. A leg on the ``rank`` scale (its scores mean nothing outside
    it) gives its hit RRF's share scaled so that its first is 1: ``(k + 1) / (k + rank)``.
    Weights, the zero-weight rule and tie-breaks are RRF's (:func:`rrf`).
    """

    def by_rank(leg: LegResult) -> list[float]:
        return [rank_share(rank, k) for rank in _ranks(leg)]

    def shares(leg: LegResult) -> list[float]:
        scale = scales.get(leg.name, "rank")
        if scale == "rank" or not leg.hits:
            return by_rank(leg)
        values, floor = _values(leg, scale)
        finite = [v for v in values if math.isfinite(v)]
        best = max(finite, default=floor)
        if best <= floor:
            # no value above the scale's floor (a plugin's scores on another convention,
            # every bm25 column weighted 0): the scores say nothing, the order still does
            return by_rank(leg)
        # a value that is not finite counts as the floor; an infinite best is not a
        # best (it would turn every share into 0)
        return [share(v, best, floor) for v in values]

    return _sum(legs, size, lambda leg, w: [w * share for share in shares(leg)])


def score_value(raw: float, scale: ScoreScale) -> tuple[float, float]:
    """A raw score as a value on which larger is better, and the scale's floor (the
    ``rank`` scale has none: its raw score is returned as it is)."""
    if scale == "bm25":
        return -raw, 0.0
    if scale == "distance":  # unit vectors: |a - b|^2 = 2 - 2 cos
        return 1.0 - raw * raw / 2.0, -1.0
    return raw, 0.0


def rank_share(rank: int, k: float) -> float:
    """A hit's share by its rank alone, where a leg's scores say nothing: RRF's share
    scaled so that the first is 1."""
    return (k + 1.0) / (k + rank)


def share(value: float, best: float, floor: float) -> float:
    """A value's share of the best, both measured from the floor (0 for a value that is not
    finite)."""
    if not math.isfinite(value):
        return 0.0
    return min(1.0, max(0.0, (value - floor) / (best - floor)))


def _values(leg: LegResult, scale: ScoreScale) -> tuple[list[float], float]:
    """The leg's hits as values on which larger is better, and the scale's floor."""
    floor = score_value(0.0, scale)[1]
    return [score_value(hit.raw_score, scale)[0] for hit in leg.hits], floor


def _ranks(leg: LegResult) -> range:
    return range(1, len(leg.hits) + 1)


def _sum(
    legs: Sequence[LegResult],
    size: int,
    contributions: Callable[[LegResult, float], list[float]],
) -> list[Fused]:
    """Each leg's ``contributions(leg, weight)`` (one a hit) added up per chunk."""
    fused: dict[int, Fused] = {}
    for leg in legs:
        weight = float(leg.meta.get("weight", 1.0))
        if weight <= 0:
            continue
        added = contributions(leg, weight)
        for rank, (hit, value) in enumerate(zip(leg.hits, added, strict=True), start=1):
            item = fused.setdefault(hit.chunk_id, Fused(hit.chunk_id, 0.0))
            if leg.name in item.legs:
                continue
            item.score += value
            item.legs[leg.name] = (rank, hit.raw_score)
    ordered = sorted(
        fused.values(),
        key=lambda f: (-f.score, min(r for r, _ in f.legs.values()), f.chunk_id),
    )
    return ordered[:size]
