"""Ranking metrics with document-level credit, tie-aware, and their uncertainty.

Why tie-aware: RRF produces exact score ties all the time (the first hit of the lexical
leg alone and the first hit of the vector leg alone both score ``1 / (k + 1)``), and the
order inside a tie is decided by chunk id, which says nothing about relevance. Crediting
that arbitrary order would let a re-index (new chunk ids) move recall@1 by itself. Every
metric here is therefore the *expected* value over all orderings of each run of tied
scores (McSherry & Najork, ECIR 2008); with no ties it is the usual strict-order value.

Why bootstrap intervals: golden sets are a few hundred queries, and two configurations
often differ by less than the sampling noise. A seeded percentile bootstrap over queries
gives each mean a 95% interval, and a paired test over per-query differences says whether
a change between two runs is more than noise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

#: Cutoffs reported for recall; MRR and nDCG are cut at 10 (docs/eval.md, "What is measured").
RECALL_CUTOFFS = (1, 5, 10)
DEPTH = 10
METRIC_NAMES = ("recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10", "hit@10")
BOOTSTRAP_SAMPLES = 2000
PERMUTATION_SAMPLES = 10000
DEFAULT_SEED = 20240917


@dataclass(frozen=True)
class RankedDoc:
    """One document in a result list, at the best rank any of its chunks reached."""

    path: str
    score: float


def documents_in_order(hits: Sequence[tuple[str, float]]) -> list[RankedDoc]:
    """Collapse a chunk list (path, score), best first, to documents at their best rank.

    A document with three chunks in the top 10 is one document found, not three: credit
    is per document, so a chunker that splits a page finely earns nothing for it.
    """
    seen: set[str] = set()
    out: list[RankedDoc] = []
    for path, score in hits:
        if path not in seen:
            seen.add(path)
            out.append(RankedDoc(path, score))
    return out


def _tie_groups(docs: Sequence[RankedDoc]) -> list[tuple[int, int]]:
    """(start, end) half-open index ranges of adjacent documents with equal scores."""
    groups: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(docs) + 1):
        if i == len(docs) or docs[i].score != docs[start].score:
            groups.append((start, i))
            start = i
    return groups


def _expected_reciprocal_rank(first: int, size: int, relevant: int) -> float:
    """E[1 / rank of the first relevant item] when ``relevant`` of ``size`` tied items,
    occupying 0-based positions ``first``.., are shuffled uniformly; ranks past DEPTH
    count 0 (MRR@10)."""
    total = math.comb(size, relevant)
    expected = 0.0
    for j in range(min(size - relevant + 1, DEPTH - first)):
        # P(the first relevant item sits at offset j) = C(size-1-j, relevant-1) / C(size, relevant)
        expected += math.comb(size - 1 - j, relevant - 1) / total / (first + j + 1)
    return expected


def query_metrics(docs: Sequence[RankedDoc], grades: Mapping[str, float]) -> dict[str, float]:
    """Every metric of METRIC_NAMES for one query (each in [0, 1]).

    ``grades`` maps each relevant document to its grade (> 0); binary judgements use 1.
    nDCG uses linear gain ``grade / log2(rank + 1)`` (as trec_eval does), so with binary
    grades it is the textbook binary nDCG. Recall divides by every relevant document, so
    a query with 20 relevant documents can never reach recall@5 = 1. A tie group that
    straddles rank 10 is credited for the share of it that falls inside the top 10.
    """
    relevant = {p: g for p, g in grades.items() if g > 0}
    if not relevant:
        raise ValueError("a query needs at least one relevant document")
    found = {k: 0.0 for k in RECALL_CUTOFFS}
    dcg, mrr, hit, first_seen = 0.0, 0.0, 0.0, False
    for start, end in _tie_groups(docs):
        if start >= DEPTH:
            break
        size = end - start
        gains = [relevant.get(d.path, 0.0) for d in docs[start:end]]
        hits = sum(1 for g in gains if g > 0)
        mean_gain = sum(gains) / size
        dcg += sum(mean_gain / math.log2(pos + 2) for pos in range(start, min(end, DEPTH)))
        for k in RECALL_CUTOFFS:
            inside = min(max(k - start, 0), size)  # group slots that fall within the top k
            found[k] += hits * inside / size
        if hits and not first_seen:
            # Groups before this one hold no relevant document, so the first one is here.
            first_seen = True
            mrr = _expected_reciprocal_rank(start, size, hits)
            slots = min(DEPTH - start, size)
            hit = 1.0 - math.comb(size - hits, slots) / math.comb(size, slots)
    ideal = sorted(relevant.values(), reverse=True)[:DEPTH]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return {
        "recall@1": found[1] / len(relevant),
        "recall@5": found[5] / len(relevant),
        "recall@10": found[10] / len(relevant),
        "mrr@10": mrr,
        "ndcg@10": dcg / idcg,
        "hit@10": hit,
    }


def first_relevant_rank(docs: Sequence[RankedDoc], grades: Mapping[str, float]) -> int | None:
    """1-based document rank of the first relevant document as listed, or None."""
    for rank, doc in enumerate(docs, start=1):
        if grades.get(doc.path, 0.0) > 0:
            return rank
    return None


@dataclass(frozen=True)
class Estimate:
    """A mean over queries and its 95% bootstrap percentile interval."""

    mean: float
    low: float
    high: float

    def to_json(self) -> dict[str, float]:
        return {
            "mean": round(self.mean, 4),
            "ci_low": round(self.low, 4),
            "ci_high": round(self.high, 4),
        }


def bootstrap(
    values: Sequence[float], *, seed: int = DEFAULT_SEED, samples: int = BOOTSTRAP_SAMPLES
) -> Estimate:
    """Mean and seeded 95% percentile bootstrap interval (deterministic for a seed)."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        return Estimate(0.0, 0.0, 0.0)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, data.size, size=(samples, data.size))
    means = data[idx].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return Estimate(float(data.mean()), float(low), float(high))


@dataclass(frozen=True)
class PairedComparison:
    """New minus old over the queries both runs share."""

    n: int
    delta: Estimate
    p_value: float

    @property
    def significant(self) -> bool:
        """True when the difference is unlikely to be noise at the 5% level."""
        return self.p_value < 0.05 and (self.delta.low > 0 or self.delta.high < 0)

    def to_json(self) -> dict[str, float | int | bool]:
        return {
            "n": self.n,
            **self.delta.to_json(),
            "p_value": round(self.p_value, 4),
            "significant": self.significant,
        }


def paired_test(
    new: Sequence[float],
    old: Sequence[float],
    *,
    seed: int = DEFAULT_SEED,
    samples: int = PERMUTATION_SAMPLES,
) -> PairedComparison:
    """Paired bootstrap interval of the mean difference and a two-sided sign-flip
    randomization test (under H0 each query's difference is as likely negated)."""
    if len(new) != len(old):
        raise ValueError("paired samples must have the same length")
    diffs = np.asarray(new, dtype=np.float64) - np.asarray(old, dtype=np.float64)
    delta = bootstrap(diffs.tolist(), seed=seed)
    if diffs.size == 0 or not np.any(diffs):
        return PairedComparison(int(diffs.size), delta, 1.0)
    rng = np.random.default_rng(seed + 1)
    observed = abs(diffs.mean())
    extreme = 0
    for chunk in range(0, samples, 1000):
        signs = rng.choice((-1.0, 1.0), size=(min(1000, samples - chunk), diffs.size))
        extreme += int(np.sum(np.abs((signs * diffs).mean(axis=1)) >= observed - 1e-12))
    return PairedComparison(int(diffs.size), delta, (extreme + 1) / (samples + 1))
