"""``groove tune``: does RRF k or a bm25 column weight move quality on this KB?

The grid (documented in docs/eval.md):

* ``rrf_k`` in GRID_K (only the configured k under ``method = "scores"`` when every leg
  declares a score scale: k then weighs nothing, ADR-0019);
* ``heading`` in GRID_HEADING and ``context`` in GRID_CONTEXT with ``content`` fixed at
  1.0 — bm25 is a weighted *sum* over columns, so scaling all three weights together never
  changes a ranking and only the ratios to ``content`` are free;
* the RRF weight of the lexical leg that reports the query's terms (the word leg; the
  ``word`` knob) in GRID_WORD and the two query-dependent rules
  (``cross_script_lexical`` in GRID_CROSS, ``coverage_vector`` in GRID_COVERAGE), swept
  together at the current k and column weights (ADR-0012);
* plus the current setting, exactly as configured.

The golden queries are split deterministically (a hash of each query's key) into a tuning
part and a held-out part. The best point is chosen on the tuning part only and then
compared with the current setting on the held-out part with a paired test, so the
verdict is not flattered by having picked the maximum of ~170 noisy numbers.

Speed: a query's non-lexical legs (the vector leg: embedding + KNN) do not depend on any
knob of the grid, so they run once per query; the lexical legs (every leg whose spec says
``lexical``) run once per weight setting, and fusion once per k. The whole grid costs
about as much as 25 plain eval runs of FTS.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from groove_core.evaluation.metrics import (
    DEFAULT_SEED,
    METRIC_NAMES,
    Estimate,
    PairedComparison,
    bootstrap,
    paired_test,
)
from groove_core.evaluation.runner import (
    GoldenSearcher,
    Outcomes,
    QueryOutcome,
    failed,
    score,
    with_changes,
)
from groove_core.weighting import (
    Features,
    apply,
    features,
    leg_bridges,
    leg_defaults,
    leg_kinds,
    leg_weights,
)

if TYPE_CHECKING:
    from groove_core.config import GrooveConfig
    from groove_core.context import LegSpec, QueryContext
    from groove_core.evaluation.golden import ResolvedQuery
    from groove_core.evaluation.runner import Progress
    from groove_core.models import LegResult

GRID_K = (5.0, 10.0, 20.0, 40.0, 60.0, 100.0, 200.0)
GRID_HEADING = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0)
GRID_CONTEXT = (0.0, 0.5, 1.0, 2.0)
GRID_WORD = (0.0, 0.5, 1.0, 1.5, 2.0)
GRID_CROSS = (0.0, 0.25, 0.5, 1.0)
GRID_COVERAGE = (0.25, 0.5, 1.0)
HOLDOUT_FRACTION = 0.5


@dataclass(frozen=True, order=True)
class Point:
    """One setting of the knobs: RRF k, the bm25 column weights, and the fusion weights
    (``word``: the weight of the lexical leg reporting the query's terms, and the two
    rules' factors; see groove_core.weighting)."""

    rrf_k: float
    heading: float
    context: float
    content: float
    word: float = 1.0
    cross_script_lexical: float = 0.0
    coverage_vector: float = 0.25

    @property
    def weights(self) -> tuple[float, float, float]:
        return (self.heading, self.context, self.content)

    @property
    def fusion_weights(self) -> tuple[float, float, float]:
        return (self.word, self.cross_script_lexical, self.coverage_vector)

    def label(self) -> str:
        return (
            f"k={_num(self.rrf_k)} w={_num(self.heading)}/{_num(self.context)}/{_num(self.content)}"
            f" word={_num(self.word)} xs={_num(self.cross_script_lexical)}"
            f" cov={_num(self.coverage_vector)}"
        )

    def to_json(self) -> dict[str, float]:
        """Every knob by its field name, in the order of the fields."""
        return asdict(self)

    def fusion_values(self) -> dict[str, float]:
        """The ``[search.fusion]`` keys of this point (the ``word`` weight lives in
        ``[search.fusion.weights]``, under the terms leg's name)."""
        out = self.to_json()
        del out["word"]
        return out


def _num(value: float) -> str:
    return f"{value:g}"


def current_point(config: GrooveConfig, terms_leg: str | None, terms_default: float = 1.0) -> Point:
    """The configured point; ``terms_leg`` names the leg whose weight is the ``word`` knob
    (``Plugins.terms_leg()``; None: no such leg, the knob stays 1.0), ``terms_default`` its
    weight when the configuration does not set it (its spec's)."""
    f = config.search.fusion
    return Point(
        f.rrf_k,
        f.heading,
        f.context,
        f.content,
        f.weights.get(terms_leg, terms_default) if terms_leg is not None else 1.0,
        f.cross_script_lexical,
        f.coverage_vector,
    )


def k_values(config: GrooveConfig, specs: Sequence[LegSpec]) -> tuple[float, ...]:
    """The RRF k values worth trying: GRID_K, or only the configured k when the score
    fusion reads every leg's scores (k then sets the share of no leg: ADR-0019)."""
    fusion = config.search.fusion
    if fusion.method == "scores" and all(spec.scale != "rank" for spec in specs):
        return (fusion.rrf_k,)
    return GRID_K


def grid(current: Point, ks: Sequence[float] = GRID_K) -> list[Point]:
    """The k (``ks``) x column-weight grid at the current fusion weights, then the
    fusion-weight grid at the current k and column weights (a full product would be 45x
    larger)."""
    fusion = current.fusion_weights
    points = {Point(k, h, c, 1.0, *fusion) for k in ks for h in GRID_HEADING for c in GRID_CONTEXT}
    points |= {
        Point(current.rrf_k, *current.weights, w, x, v)
        for w in GRID_WORD
        for x in GRID_CROSS
        for v in GRID_COVERAGE
    }
    points.add(current)
    return sorted(points)


def split(keys: Sequence[str], holdout: float) -> tuple[list[int], list[int]]:
    """(tuning, held-out) indices: a query is held out when a hash of its key says so.

    Hash-based rather than positional so that adding queries to a golden file does not
    move the old ones between the parts.
    """
    tune: list[int] = []
    held: list[int] = []
    for i, key in enumerate(keys):
        bucket = int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big") / 2**32
        (held if bucket < holdout else tune).append(i)
    return tune, held


@dataclass
class _Prepared:
    """A query's context and its knob-independent legs, computed once."""

    query: ResolvedQuery
    ctx: QueryContext | None
    legs: list[LegResult]
    error: str | None = None


def _prepare(
    searcher: GoldenSearcher,
    queries: Sequence[ResolvedQuery],
    limit: int,
    progress: Progress | None,
) -> list[_Prepared]:
    from groove_core.query import QueryError

    prepared = []
    for query in queries:
        try:
            ctx = searcher.searcher.context(query.golden.query, limit=limit)
        except QueryError as err:
            prepared.append(_Prepared(query, None, [], str(err)))
        else:
            prepared.append(_Prepared(query, ctx, searcher.plugins.candidates(ctx)))
        if progress is not None:
            progress(1)
    return prepared


def _lexical_legs(
    searcher: GoldenSearcher, ctx: QueryContext, config: GrooveConfig
) -> dict[str, LegResult]:
    """The lexical legs (those that may read the bm25 column weights), recomputed for
    ``config``."""
    weighted = replace(ctx, config=config)
    return {leg.name: leg for leg in searcher.plugins.candidates(weighted, kinds={"lexical"})}


@dataclass
class GridResult:
    points: list[Point]
    outcomes: dict[Point, Outcomes]


def run_grid(
    searcher: GoldenSearcher,
    queries: Sequence[ResolvedQuery],
    *,
    limit: int,
    progress: Progress | None = None,
) -> GridResult:
    """Per-query outcomes at every grid point (stage 1, as ``groove eval`` measures)."""
    config = searcher.config
    prepared = _prepare(searcher, queries, limit, progress)
    terms_leg = searcher.plugins.terms_leg()
    current = current_point(config, terms_leg, searcher.plugins.leg_weight(terms_leg))
    points = grid(current, k_values(config, searcher.plugins.leg_specs()))
    lexical = {s.name for s in searcher.plugins.leg_specs() if s.kind == "lexical"}
    by_weights: dict[tuple[float, float, float], list[Point]] = {}
    for point in points:
        by_weights.setdefault(point.weights, []).append(point)
    outcomes = {p: Outcomes() for p in points}
    for weights, same in by_weights.items():
        changes = dict(zip(("heading", "context", "content"), weights, strict=True))
        weighted = with_changes(config, {f"search.fusion.{k}": v for k, v in changes.items()})
        for item in prepared:
            legs = _legs_for(searcher, item, weighted, lexical)
            found = features(item.ctx, legs) if item.ctx is not None else None
            for point in same:
                fused = _weighted(legs, found, point, config, terms_leg)
                outcomes[point].items.append(_score(searcher, item, fused, point.rrf_k, limit))
        if progress is not None:
            progress(len(prepared))
    return GridResult(points, outcomes)


def _weighted(
    legs: list[LegResult],
    found: Features | None,
    point: Point,
    config: GrooveConfig,
    terms_leg: str | None,
) -> list[LegResult]:
    """The legs with this point's fusion weights (the rules' features do not change)."""
    if found is None:
        return legs
    f = config.search.fusion
    word = {terms_leg: point.word} if terms_leg is not None else {}
    fusion = f.model_copy(
        update={
            "weights": {**f.weights, **word},
            "cross_script_lexical": point.cross_script_lexical,
            "coverage_vector": point.coverage_vector,
        }
    )
    weights = leg_weights(found, leg_kinds(legs), fusion, leg_defaults(legs), leg_bridges(legs))
    return apply(legs, weights)


def _legs_for(
    searcher: GoldenSearcher, item: _Prepared, config: GrooveConfig, lexical: set[str]
) -> list[LegResult]:
    if item.ctx is None or not lexical:
        return item.legs
    fresh = _lexical_legs(searcher, item.ctx, config)
    return [
        fresh[leg.name] if leg.name in lexical and leg.name in fresh else leg for leg in item.legs
    ]


def _score(
    searcher: GoldenSearcher, item: _Prepared, legs: list[LegResult], k: float, limit: int
) -> QueryOutcome:
    if item.error is not None:
        return failed(item.query, item.error)
    return score(item.query, searcher.fused(legs, k, limit))


@dataclass
class TuneReport:
    metric: str
    current: Point
    best: Point
    tune_n: int
    held_n: int
    tune_means: dict[Point, float]
    held_best: Estimate
    held_current: Estimate
    comparison: PairedComparison

    @property
    def spread(self) -> tuple[float, float]:
        values = list(self.tune_means.values())
        return min(values), max(values)

    def verdict(self) -> str:
        low, high = self.spread
        if self.best == self.current:
            return (
                f"the current setting ({self.current.label()}) is already the best of the grid "
                f"on the tuning queries; {self.metric} ranges {low:.3f}-{high:.3f} over the grid"
            )
        d = self.comparison.delta
        if self.comparison.significant and d.mean > 0:
            return (
                f"{self.best.label()} beats the current setting on held-out queries by "
                f"{d.mean:+.3f} {self.metric} (95% CI {d.low:+.3f}..{d.high:+.3f}, "
                f"p={self.comparison.p_value:.3f}): worth adopting (groove tune --write)"
            )
        return (
            f"no setting beats the current one beyond noise: the best on the tuning queries "
            f"({self.best.label()}) changes held-out {self.metric} by {d.mean:+.3f} "
            f"(95% CI {d.low:+.3f}..{d.high:+.3f}, p={self.comparison.p_value:.3f}). "
            f"These knobs do not move quality measurably on this KB "
            f"({self.metric} {low:.3f}-{high:.3f} across the whole grid)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "current": self.current.to_json(),
            "best": self.best.to_json(),
            "tune_queries": self.tune_n,
            "held_out_queries": self.held_n,
            "held_out": {"best": self.held_best.to_json(), "current": self.held_current.to_json()},
            "comparison": self.comparison.to_json(),
            "grid_spread": [round(v, 4) for v in self.spread],
            "recommend": self.best != self.current
            and self.comparison.significant
            and self.comparison.delta.mean > 0,
            "verdict": self.verdict(),
            "grid": [
                {**p.to_json(), "tune_mean": round(v, 4)}
                for p, v in sorted(self.tune_means.items())
            ],
        }


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def assess(
    result: GridResult,
    keys: Sequence[str],
    current: Point,
    *,
    metric: str = "ndcg@10",
    holdout: float = HOLDOUT_FRACTION,
    seed: int = DEFAULT_SEED,
) -> TuneReport:
    """Pick the best point on the tuning part; test it against ``current`` on the rest."""
    if metric not in METRIC_NAMES:
        raise ValueError(f"unknown metric {metric!r}; choose one of {', '.join(METRIC_NAMES)}")
    tune_idx, held_idx = split(keys, holdout)
    if not tune_idx or not held_idx:
        raise ValueError("too few queries to split into a tuning and a held-out part")
    means = {}
    for point, outcomes in result.outcomes.items():
        values = outcomes.values(metric)
        means[point] = _mean([values[i] for i in tune_idx])
    # Ties prefer the current setting, then the grid order: no change without a gain.
    best = max(result.points, key=lambda p: (round(means[p], 12), p == current))
    held = {p: [result.outcomes[p].values(metric)[i] for i in held_idx] for p in (best, current)}
    return TuneReport(
        metric,
        current,
        best,
        len(tune_idx),
        len(held_idx),
        means,
        bootstrap(held[best], seed=seed),
        bootstrap(held[current], seed=seed),
        paired_test(held[best], held[current], seed=seed),
    )
