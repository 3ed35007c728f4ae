"""The term-choosing rules on hand-made token lists (no index)."""

from __future__ import annotations

import math

from groove_expansion.terms import (
    MAX_CANDIDATES,
    choose,
    document_idf,
    eligible,
    feedback_weights,
    passage_weights,
)


def test_a_term_must_occur_in_two_feedback_passages() -> None:
    passages = [["wing", "lift", "flutter"], ["wing", "flutter", "panel"], ["wing", "drag"]]
    found = feedback_weights(passages, skip={"wing"})
    assert set(found) == {"flutter"}  # lift, panel and drag are in one passage each
    first, second, _ = passage_weights(3)
    assert math.isclose(found["flutter"], first / 3 + second / 3)


def test_passages_weigh_by_reciprocal_rank() -> None:
    weights = passage_weights(4)
    assert math.isclose(sum(weights), 1.0)
    assert math.isclose(weights[0], 2 * weights[1]) and math.isclose(weights[0], 4 * weights[3])
    # The same term mass in the first passage weighs more than in the second.
    found = feedback_weights([["lift", "lift", "drag"], ["lift", "drag", "drag"]], skip=set())
    assert found["lift"] > found["drag"]


def test_one_passage_is_enough_when_only_one_came_back() -> None:
    assert set(feedback_weights([["lift", "drag", "lift"]], skip=set())) == {"lift", "drag"}


def test_query_terms_numbers_and_single_letters_are_never_candidates() -> None:
    passages = [["wing", "1960", "x", "型", "lift"], ["wing", "1960", "x", "型", "lift"]]
    assert set(feedback_weights(passages, skip={"lift"})) == {"wing", "型"}
    assert not eligible("12") and not eligible("x") and eligible("型") and eligible("xy")


def test_a_term_is_weighted_by_its_share_of_each_passage() -> None:
    # "flutter" is half of a short passage; "panel" a tenth of a long one: equal weights.
    short = ["flutter", "panel"]
    long = ["flutter", "panel", *[f"w{i}" for i in range(8)]]
    found = feedback_weights([short, long], skip=set())
    first, second = passage_weights(2)
    assert math.isclose(found["flutter"], first / 2 + second / 10)
    assert math.isclose(found["panel"], found["flutter"])


def test_candidates_are_capped_before_their_frequencies_are_read() -> None:
    vocabulary = [f"t{i:04d}" for i in range(MAX_CANDIDATES * 2)]
    found = feedback_weights([vocabulary, vocabulary], skip=set())
    assert len(found) == MAX_CANDIDATES


def test_the_choice_multiplies_by_idf_and_leaves_out_terms_without_it() -> None:
    idf = document_idf({"rare": 1, "common": 60, "everywhere": 90}, chunks=100)
    chosen = choose({"rare": 0.1, "common": 0.3, "everywhere": 0.9, "absent": 0.5}, idf, 5)
    # "everywhere" is in most chunks (IDF 0), "absent" in none: neither is added.
    assert [term for term, _ in chosen] == ["rare"]
    assert math.isclose(chosen[0][1], 0.1 * math.log((100 - 1 + 0.5) / 1.5))


def test_the_choice_keeps_the_best_count_terms_best_first() -> None:
    idf = document_idf({"a1": 5, "b2": 5, "c3": 5}, chunks=100)
    chosen = choose({"a1": 0.1, "b2": 0.3, "c3": 0.2}, idf, 2)
    assert [term for term, _ in chosen] == ["b2", "c3"]
