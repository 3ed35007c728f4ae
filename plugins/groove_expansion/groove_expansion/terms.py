"""Choosing expansion terms from feedback passages: no store, no query context.

A term's weight is RM3's relevance model times IDF: the sum over the feedback passages of
its share of the passage's tokens (``tf / |passage|``) times the passage's weight, times
bm25's IDF over the whole index. A passage's weight is its reciprocal rank, normalised to
sum to 1 (RM3 weighs a passage by its query likelihood; bm25 scores differ between storage
backends, ranks do not): the first passages, the likeliest to be relevant, say the most.
The IDF drops the words every passage has. A term must occur in at least two feedback
passages (when there are two): a word of one passage only re-finds that passage, which the
query already ranks near the top.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence

from groove_core import words

#: Upper bounds of the two settings (``[search.prf]``): the passages read per query and the
#: terms added to it. Reading costs a chunk-row read and a tokenization per passage, and the
#: expanded query's bm25 grows with its terms (docs: the plugin's README, "Cost").
MAX_PASSAGES = 50
MAX_TERMS = 30
#: Feedback passages a term must occur in (fewer when fewer passages came back).
MIN_PASSAGES = 2
#: Candidates, by their feedback weight alone, whose document frequency is looked up: the
#: lookup is the one step whose cost grows with the passages' vocabulary.
MAX_CANDIDATES = 200


def eligible(term: str) -> bool:
    """A token worth adding: not a number (``12``, ``1960``) and not one Latin letter."""
    if term.isdigit():
        return False
    return not (len(term) == 1 and term.isascii())


def passage_weights(count: int) -> list[float]:
    """The weights of ``count`` passages, best first: reciprocal ranks summing to 1."""
    ranks = [1.0 / rank for rank in range(1, count + 1)]
    total = sum(ranks)
    return [r / total for r in ranks]


def feedback_weights(passages: Sequence[Sequence[str]], skip: Collection[str]) -> dict[str, float]:
    """term -> its feedback weight over ``passages`` (best first), for the terms in at least
    ``min(MIN_PASSAGES, len(passages))`` of them, leaving out ``skip`` and ineligible ones.

    The best :data:`MAX_CANDIDATES` by weight, ties by term (a stable order)."""
    share: dict[str, float] = {}
    holding: Counter[str] = Counter()
    for tokens, weight in zip(passages, passage_weights(len(passages)), strict=True):
        if not tokens:
            continue
        counts = Counter(t for t in tokens if t not in skip and eligible(t))
        for term, tf in counts.items():
            share[term] = share.get(term, 0.0) + weight * tf / len(tokens)
            holding[term] += 1
    need = min(MIN_PASSAGES, len(passages))
    found = {t: s for t, s in share.items() if holding[t] >= need}
    best = sorted(found.items(), key=lambda item: (-item[1], item[0]))[:MAX_CANDIDATES]
    return dict(best)


def choose(
    candidates: Mapping[str, float], idf: Callable[[str], float], count: int
) -> list[tuple[str, float]]:
    """The ``count`` best (term, weight) by feedback weight × IDF, best first; terms whose
    IDF is 0 (in half the index or more, or in none of it) are left out."""
    scored = []
    for term, weight in candidates.items():
        value = weight * idf(term)
        if value > 0:
            scored.append((term, value))
    scored.sort(key=lambda item: (-item[1], item[0]))
    return scored[:count]


def document_idf(df: Mapping[str, int], chunks: int) -> Callable[[str], float]:
    """IDF over the index from document frequencies; 0 for a term no chunk holds."""

    def idf(term: str) -> float:
        found = df.get(term, 0)
        return words.idf(found, chunks) if found else 0.0

    return idf
