"""Metric code against values computed by hand (binary, graded, ties, cut-offs)."""

from __future__ import annotations

import math

import pytest

from groove_core.evaluation.metrics import (
    RankedDoc,
    bootstrap,
    documents_in_order,
    first_relevant_rank,
    paired_test,
    query_metrics,
)


def _docs(*items: tuple[str, float]) -> list[RankedDoc]:
    return [RankedDoc(p, s) for p, s in items]


L3 = math.log2(3)


def test_strict_order_binary() -> None:
    docs = _docs(("a", 0.9), ("b", 0.8), ("c", 0.7))
    m = query_metrics(docs, {"b": 1, "d": 1})
    assert m["recall@1"] == 0
    assert m["recall@5"] == m["recall@10"] == 0.5
    assert m["mrr@10"] == 0.5
    assert m["hit@10"] == 1
    # DCG = 1/log2(3); IDCG = 1 + 1/log2(3)
    assert m["ndcg@10"] == pytest.approx((1 / L3) / (1 + 1 / L3))


def test_graded_ndcg_uses_linear_gain() -> None:
    docs = _docs(("a", 3.0), ("b", 2.0), ("c", 1.0))
    m = query_metrics(docs, {"a": 1, "c": 3, "d": 2})
    dcg = 1 / 1 + 3 / 2  # a at rank 1, c at rank 3 (log2 4 = 2)
    idcg = 3 + 2 / L3 + 1 / 2
    assert m["ndcg@10"] == pytest.approx(dcg / idcg)
    assert m["ndcg@10"] == pytest.approx(0.525005, abs=1e-6)
    assert m["recall@1"] == pytest.approx(1 / 3)


def test_a_tie_is_credited_as_the_average_over_its_orderings() -> None:
    docs = _docs(("a", 0.5), ("b", 0.5), ("c", 0.3))
    m = query_metrics(docs, {"b": 1})
    assert m["recall@1"] == 0.5  # b is first in half of the orderings
    assert m["mrr@10"] == pytest.approx(0.5 * 1 + 0.5 * 0.5)
    assert m["ndcg@10"] == pytest.approx(0.5 * (1 + 1 / L3))
    # The strict-order value would depend on which of a and b came first:
    swapped = query_metrics(_docs(("b", 0.5), ("a", 0.5), ("c", 0.3)), {"b": 1})
    assert swapped == m


def test_two_relevant_in_a_tie_of_three() -> None:
    docs = _docs(("a", 1.0), ("b", 1.0), ("c", 1.0))
    m = query_metrics(docs, {"a": 1, "c": 1})
    assert m["recall@1"] == pytest.approx(1 / 3)  # 2/3 of a relevant doc, of 2
    # first relevant at rank 1 with p 2/3, at rank 2 with p 1/3
    assert m["mrr@10"] == pytest.approx(2 / 3 + 1 / 6)
    assert m["hit@10"] == 1


def test_a_tie_straddling_rank_10_counts_only_its_share_inside() -> None:
    head = [(f"d{i}", 10.0 - i) for i in range(9)]
    docs = _docs(*head, ("x", 0.5), ("rel", 0.5), ("y", 0.5))
    m = query_metrics(docs, {"rel": 1})
    assert m["recall@10"] == pytest.approx(1 / 3)
    assert m["hit@10"] == pytest.approx(1 / 3)
    assert m["mrr@10"] == pytest.approx(1 / 3 * 1 / 10)
    assert m["ndcg@10"] == pytest.approx((1 / 3) / math.log2(11))


def test_documents_are_credited_once_at_their_best_rank() -> None:
    docs = documents_in_order([("a", 0.9), ("a", 0.8), ("b", 0.7), ("a", 0.1)])
    assert docs == _docs(("a", 0.9), ("b", 0.7))
    assert first_relevant_rank(docs, {"b": 1}) == 2
    assert first_relevant_rank(docs, {"z": 1}) is None
    assert query_metrics(docs, {"a": 1, "b": 1})["recall@5"] == 1.0


def test_nothing_found_scores_zero_and_no_relevant_is_an_error() -> None:
    m = query_metrics([], {"a": 1})
    assert set(m.values()) == {0.0}
    with pytest.raises(ValueError):
        query_metrics(_docs(("a", 1.0)), {"a": 0})


def test_bootstrap_is_deterministic_and_brackets_the_mean() -> None:
    values = [0.0, 1.0] * 50
    first, second = bootstrap(values, seed=7), bootstrap(values, seed=7)
    assert first == second
    assert first.mean == 0.5
    assert 0.35 < first.low < 0.5 < first.high < 0.65
    constant = bootstrap([0.3] * 10)
    assert (constant.low, constant.high) == pytest.approx((0.3, 0.3))


def test_paired_test_tells_a_real_gain_from_noise() -> None:
    old = [0.0, 1.0] * 40
    assert paired_test(old, old).p_value == 1.0
    assert not paired_test(old, old).significant
    better = [1.0] * 80  # wins on every query that was lost
    gain = paired_test(better, old)
    assert gain.significant and gain.delta.mean == pytest.approx(0.5)
    # one query flipped out of 80 is not evidence of anything
    noisy = list(old)
    noisy[0] = 1.0
    assert not paired_test(noisy, old).significant
    with pytest.raises(ValueError):
        paired_test([1.0], [1.0, 0.0])
