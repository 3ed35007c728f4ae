"""The pure parts: scoring within a time budget, the merge of scored and unscored hits,
the pool sizes of docs/retrieval-pipeline.md. A fake clock makes every budget decision exact."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import pytest
from groove_reranker_bge.budget import score_within_budget
from groove_reranker_bge.plugin import passage_text, pool_size, reorder

from groove_core.models import SearchHit


class FakeModel:
    """Scores item i as ``10 * i`` and advances a fake clock by ``overhead_ms`` per call
    plus ``ms_per_item`` per item, recording each batch it was given."""

    def __init__(self, ms_per_item: float, overhead_ms: float = 0.0) -> None:
        self.now = 0.0
        self.ms_per_item = ms_per_item
        self.overhead_ms = overhead_ms
        self.batches: list[list[int]] = []

    def clock(self) -> float:
        return self.now / 1000.0

    def score(self, batch: Sequence[int]) -> list[float]:
        self.batches.append(list(batch))
        self.now += self.overhead_ms + self.ms_per_item * len(batch)
        return [float(10 * i) for i in batch]


def run(
    model: FakeModel, n: int, batch_size: int, budget: float | None, prior: float | None = None
):
    return score_within_budget(
        model.score,
        list(range(n)),
        batch_size=batch_size,
        budget_ms=budget,
        prior_ms_per_item=prior,
        clock=model.clock,
    )


def test_without_a_budget_every_item_is_scored_in_batches() -> None:
    model = FakeModel(ms_per_item=100.0)
    scored = run(model, 10, 4, None)
    assert scored.complete and scored.scores == tuple(10.0 * i for i in range(10))
    assert model.batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert scored.elapsed_ms == pytest.approx(1000.0)
    assert scored.ms_per_item == pytest.approx(100.0)


def test_one_candidate_measures_and_the_rest_is_cut_to_what_fits() -> None:
    # 10 ms per item, budget 65 ms: the first candidate alone measures the cost (10 ms);
    # 55 ms pay for 5 more, cut to the batch size (4); the last 15 ms pay for 1 more.
    model = FakeModel(ms_per_item=10.0)
    scored = run(model, 20, 4, 65.0)
    assert model.batches == [[0], [1, 2, 3, 4], [5]]
    assert len(scored.scores) == 6 and scored.total == 20 and not scored.complete
    assert scored.elapsed_ms == pytest.approx(60.0)


def test_without_a_prior_one_candidate_is_scored_even_over_budget() -> None:
    model = FakeModel(ms_per_item=10.0)
    scored = run(model, 20, 4, 1.0)
    assert model.batches == [[0]]
    assert scored.elapsed_ms == pytest.approx(10.0)  # the documented overrun: one candidate


def test_a_prior_cost_sizes_the_first_batch_too() -> None:
    model = FakeModel(ms_per_item=10.0)
    assert len(run(model, 20, 8, 35.0, prior=10.0).scores) == 3
    model = FakeModel(ms_per_item=10.0)
    nothing = run(model, 20, 8, 5.0, prior=10.0)
    assert nothing.scores == () and model.batches == [] and nothing.ms_per_item is None


def test_the_forecast_is_updated_from_every_batch() -> None:
    # A 30 ms fixed cost per call makes the measurement look expensive (40 ms for one
    # item); each batch refines the average (90 ms / 3, then 140 ms / 5), erring on the
    # side of scoring fewer: 5 items in 150 ms, where 10 ms/item alone would allow more.
    model = FakeModel(ms_per_item=10.0, overhead_ms=30.0)
    scored = run(model, 20, 4, 150.0)
    assert [len(b) for b in model.batches] == [1, 2, 2]
    assert scored.elapsed_ms == pytest.approx(140.0)


def test_a_budget_that_covers_everything_scores_everything() -> None:
    model = FakeModel(ms_per_item=1.0)
    assert run(model, 10, 3, 1000.0).complete


def test_a_scorer_that_drops_items_is_an_error_not_a_hang() -> None:
    with pytest.raises(ValueError, match="1 scores for a batch of 3 items"):
        score_within_budget(lambda batch: [0.0], [1, 2, 3], batch_size=3, budget_ms=None)


def _hit(i: int, score: float) -> SearchHit:
    return SearchHit(
        chunk_id=i,
        doc_id=i,
        path=f"{i}.md",
        title=f"T{i}",
        heading="",
        heading_path=(),
        level=1,
        content=f"c{i}",
        score=score,
        rank=i + 1,
        line_start=1,
        line_end=1,
        byte_start=0,
        byte_end=2,
        token_count=1,
    )


HITS = [_hit(i, 1.0 / (60 + i)) for i in range(5)]


def test_reorder_sorts_the_scored_hits_and_switches_their_score() -> None:
    out = reorder(HITS, [0.5, 3.0, -1.0, 3.0, 2.0])
    assert [h.chunk_id for h in out] == [1, 3, 4, 0, 2]  # ties keep the RRF order
    assert [h.score for h in out] == [3.0, 3.0, 2.0, 0.5, -1.0]
    assert [h.rank for h in out] == [1, 2, 3, 4, 5]


def test_unscored_hits_follow_in_rrf_order_at_the_lowest_score() -> None:
    out = reorder(HITS, [1.0, 4.0])
    assert [h.chunk_id for h in out] == [1, 0, 2, 3, 4]
    assert [h.score for h in out] == [4.0, 1.0, 1.0, 1.0, 1.0]
    assert [h.rank for h in out] == [1, 2, 3, 4, 5]


def test_with_nothing_scored_the_rrf_order_and_scores_stay() -> None:
    assert reorder(HITS, []) == HITS


def test_a_nan_score_sorts_last_and_does_not_scramble_the_order() -> None:
    out = reorder(HITS[:3], [math.nan, 2.0, 1.0])
    assert [h.chunk_id for h in out] == [1, 2, 0]


def test_reorder_leaves_its_input_alone() -> None:
    before = list(HITS)
    reorder(HITS, [5.0, 4.0, 3.0, 2.0, 1.0])
    assert before == HITS and [h.rank for h in HITS] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize(
    ("limit", "mmr", "parent", "expected"),
    [
        (10, False, False, 50),  # the reranker alone: limit × 5
        (3, False, False, 15),
        (3, True, False, 50),  # MMR on: limit × 5, at least 50
        (20, True, False, 100),
        (20, True, True, 100),
        (10, False, True, 10),  # only the parent retriever besides: limit
    ],
)
def test_pool_sizes_follow_the_seed(limit: int, mmr: bool, parent: bool, expected: int) -> None:
    assert pool_size(limit, diversified=mmr, expanded=parent) == expected


def test_the_passage_carries_the_title_and_heading_path_like_the_embedded_text() -> None:
    hit = replace(HITS[0], title="Guide", heading_path=("Guide", "Install"), content="Run it.")
    assert passage_text(hit) == "Guide > Install\nRun it."
    assert passage_text(replace(hit, title="", heading_path=())) == "Run it."
