"""Scoring candidates batch by batch within a time budget (pure Python, no torch).

The candidates arrive best-first (RRF order). When a budget is set, every batch is
preceded by a forecast: the milliseconds per candidate measured so far (or, before the
first batch of this query, the cost remembered from earlier queries) times the batch size.
A batch that would overrun the budget is cut to what fits; when not even one candidate
fits, scoring stops. With nothing to forecast from (the model's first query), a single
candidate is scored first as the measurement, so the budget is overrun by at most one
candidate's cost, not a whole batch's. The candidates scored are therefore always a prefix
of the input, in rank order — the ones RRF trusted most get the reranker's attention first.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

_UNLIMITED = 1 << 30


@dataclass(frozen=True)
class Scored:
    """Scores for the first ``len(scores)`` of ``total`` items, and what they cost."""

    scores: tuple[float, ...]
    total: int
    elapsed_ms: float

    @property
    def complete(self) -> bool:
        return len(self.scores) == self.total

    @property
    def ms_per_item(self) -> float | None:
        """Measured cost of one item, for the next query's first forecast."""
        return self.elapsed_ms / len(self.scores) if self.scores else None


def score_within_budget(
    score_batch: Callable[[Sequence[T]], Sequence[float]],
    items: Sequence[T],
    *,
    batch_size: int,
    budget_ms: float | None,
    prior_ms_per_item: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Scored:
    """Score a prefix of ``items`` with ``score_batch``, all of them when ``budget_ms`` is None.

    The per-item forecast includes each call's fixed overhead, so it errs on the side of
    scoring fewer items; the budget can still be overrun by the variance of one batch (a
    machine whose load changes between the measurement and the batch).
    """
    scores: list[float] = []
    start = clock()
    while len(scores) < len(items):
        batch = items[len(scores) : len(scores) + batch_size]
        if budget_ms is not None:
            batch = batch[: _fits(budget_ms, (clock() - start) * 1000.0, scores, prior_ms_per_item)]
            if not batch:
                break
        batch_scores = list(score_batch(batch))
        if len(batch_scores) != len(batch):  # a short answer would loop forever
            raise ValueError(f"{len(batch_scores)} scores for a batch of {len(batch)} items")
        scores.extend(float(s) for s in batch_scores)
    return Scored(tuple(scores), len(items), (clock() - start) * 1000.0)


def _fits(budget_ms: float, elapsed_ms: float, done: list[float], prior: float | None) -> int:
    """How many more items the rest of the budget is forecast to pay for."""
    per_item = elapsed_ms / len(done) if done else prior
    if per_item is None:  # nothing to forecast from: one candidate is the measurement
        return 1
    if per_item <= 0.0:
        return _UNLIMITED
    return max(0, int((budget_ms - elapsed_ms) / per_item))
