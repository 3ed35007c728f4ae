"""Greedy Maximal Marginal Relevance over a scored candidate pool (docs/retrieval-
pipeline.md, stage 3).

Pure numpy, no groove types: the plugin maps hits to arrays and back, so the selection
rule can be tested on hand-made vectors.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def normalize_scores(scores: Sequence[float]) -> np.ndarray:
    """Min-max scale to [0, 1], so λ means the same for fused (0-4, or RRF's ≈0.01) and
    reranker (±10) scores.

    All-equal scores carry no relevance signal: every candidate gets 1.0 and the similarity
    term alone decides (ties keep the input order).
    """
    values = np.asarray(scores, dtype=np.float64)
    if values.size == 0:
        return values
    low, high = float(values.min()), float(values.max())
    if not high > low:  # also false for NaN, which then cannot poison the ranking
        return np.ones_like(values)
    return (values - low) / (high - low)


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 so that a dot product is the cosine; zero rows stay zero."""
    matrix = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    scaled: np.ndarray = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    return scaled


def select(
    relevance: np.ndarray,
    vectors: np.ndarray,
    doc_ids: Sequence[int],
    k: int,
    *,
    lambda_: float,
    same_doc_penalty: float,
) -> list[int]:
    """Indices of ``k`` candidates in pick order, greedily maximizing

    ``λ·rel(c) − (1−λ)·max_sim(c, picked) − same_doc_penalty·1[doc(c) ∈ docs(picked)]``.

    ``relevance`` is already in [0, 1]; ``vectors`` holds one row per candidate (unit rows,
    or zero rows for candidates without a stored embedding: they look dissimilar to
    everything). Ties go to the earlier candidate, i.e. the better stage-2 rank, so the
    result is deterministic.
    """
    n = len(relevance)
    k = min(k, n)
    docs = np.asarray(doc_ids)
    # Nothing is picked yet, so the similarity term starts at 0; after the first pick it is
    # the true maximum over the picked chunks (negative cosines included).
    max_sim = np.zeros(n, dtype=np.float64)
    doc_seen = np.zeros(n, dtype=bool)
    available = np.ones(n, dtype=bool)
    picked: list[int] = []
    while len(picked) < k:
        # Before the first pick there is nothing to be similar to: max_sim is 0.
        gain = lambda_ * relevance - (1.0 - lambda_) * max_sim - same_doc_penalty * doc_seen
        best = int(np.argmax(np.where(available, gain, -np.inf)))
        picked.append(best)
        available[best] = False
        # Incremental update: one matrix-vector product per pick, not a full n×n matrix.
        sims = vectors @ vectors[best]
        max_sim = sims if len(picked) == 1 else np.maximum(max_sim, sims)
        doc_seen |= docs == docs[best]
    return picked
