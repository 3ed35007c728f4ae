"""The MMR selection rule on hand-made vectors (no index, no groove types)."""

from __future__ import annotations

import numpy as np
from groove_mmr.mmr import normalize_scores, select, unit_rows

E1, E2, E3 = np.eye(3)


def test_min_max_normalization_and_its_edge_cases() -> None:
    assert np.allclose(normalize_scores([0.03, 0.02, 0.01]), [1.0, 0.5, 0.0])
    assert normalize_scores([-4.0, 6.0]).tolist() == [0.0, 1.0]
    # All equal: no relevance signal, every candidate counts as fully relevant.
    assert normalize_scores([0.5, 0.5, 0.5]).tolist() == [1.0, 1.0, 1.0]
    assert normalize_scores([]).size == 0


def test_unit_rows_scale_to_length_one_and_keep_zero_rows() -> None:
    rows = unit_rows(np.array([[3.0, 4.0], [0.0, 0.0]]))
    assert np.allclose(rows, [[0.6, 0.8], [0.0, 0.0]])


def test_a_near_duplicate_gives_way_to_a_less_relevant_but_new_candidate() -> None:
    vectors = unit_rows(np.stack([E1, E1 + 0.01 * E2, E2]))
    relevance = np.array([1.0, 0.9, 0.5])
    # After A: A' gains .7*.9 - .3*~1 = ~.33, B gains .7*.5 - 0 = .35.
    assert select(relevance, vectors, [1, 2, 3], 3, lambda_=0.7, same_doc_penalty=0.0) == [
        0,
        2,
        1,
    ]


def test_lambda_one_without_penalty_keeps_the_relevance_order() -> None:
    vectors = unit_rows(np.stack([E1, E1, E1, E2]))
    relevance = np.array([1.0, 0.8, 0.6, 0.1])
    assert select(relevance, vectors, [1, 1, 1, 2], 4, lambda_=1.0, same_doc_penalty=0.0) == [
        0,
        1,
        2,
        3,
    ]


def test_same_doc_penalty_pushes_a_second_chunk_of_a_picked_document_down() -> None:
    vectors = unit_rows(np.stack([E1, E2, E3]))  # all dissimilar: only the penalty differs
    relevance = np.array([1.0, 0.9, 0.5])
    docs = [7, 7, 8]
    assert select(relevance, vectors, docs, 3, lambda_=0.7, same_doc_penalty=0.0) == [0, 1, 2]
    assert select(relevance, vectors, docs, 3, lambda_=0.7, same_doc_penalty=0.5) == [0, 2, 1]


def test_similarity_is_the_true_maximum_including_negative_cosines() -> None:
    # C (orthogonal to A) comes before B (opposite to A) with equal relevance; B's negative
    # similarity to A must count in its favour, not be floored at 0 into a tie C would win.
    vectors = unit_rows(np.stack([E1, E2, -E1]))
    relevance = np.array([1.0, 0.5, 0.5])
    assert select(relevance, vectors, [1, 2, 3], 2, lambda_=0.7, same_doc_penalty=0.0) == [0, 2]


def test_ties_go_to_the_better_stage_two_rank_and_k_is_capped_by_the_pool() -> None:
    vectors = np.zeros((3, 4))  # no stored vectors: similar to nothing
    relevance = np.ones(3)
    assert select(relevance, vectors, [1, 2, 3], 10, lambda_=0.5, same_doc_penalty=0.0) == [
        0,
        1,
        2,
    ]
    assert select(relevance[:0], vectors[:0], [], 5, lambda_=0.5, same_doc_penalty=0.0) == []


def test_the_first_pick_is_the_most_relevant_candidate() -> None:
    vectors = unit_rows(np.stack([E1, E2, E3]))
    relevance = np.array([0.2, 1.0, 0.4])
    assert select(relevance, vectors, [1, 2, 3], 1, lambda_=0.3, same_doc_penalty=0.0) == [1]
