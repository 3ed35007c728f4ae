"""The word leg on PostgreSQL: the SQLite ``word_chunks`` table (groove_core/words.py) redone.

SQLite indexes each chunk's script-boundary tokens (``words.segment``) with FTS5's
``unicode61 remove_diacritics 2`` tokenizer and ranks the query's terms (``t1``, ``t2 t3``) with
``bm25(word_chunks, heading, context, content)``. Here each chunk row holds, per column,
its tokens folded as that tokenizer folds them (:func:`column_tokens`) and written
*padded* (:func:`padded`: every token between two spaces, `` a  b ``), so that a term or a
phrase of tokens is a substring of the column exactly where FTS5 finds it; ``wterms`` (the
chunk's distinct tokens) carries a GIN index that selects the candidates. The score is
FTS5's bm25 from the same quantities: rows matching each term (its IDF), per row the
weighted term frequency and its length in tokens (``wtok``), and the KB's total tokens,
kept with the per-term document frequencies (``word_df``) in the documents' own
transactions (a build that fills a KB writes the frequencies once, at its end:
``PostgresStore.defer_statistics``). The same transactions keep each chunk's postings
(``word_tf``: per distinct token its count in each column, and ``wtok``), from which a
one-token term is scored without reading the text; only a phrase of tokens is found and
counted in the padded columns.
"""

from __future__ import annotations

from collections.abc import Sequence

from groove_core import words
from groove_postgres import lexical

__all__ = ["column_tokens", "overlap_witnesses", "padded", "query_term"]


def column_tokens(normalized: str) -> list[str]:
    """The tokens FTS5 indexes for one NFKC-normalised column: ``words.segment``'s tokens,
    case- and diacritic-folded as ``unicode61 remove_diacritics 2`` folds them. Folded in one
    pass over the segmented text: ``lexical.fold`` maps one character to one and no other
    character to a space, so the tokens are the same as folded one by one."""
    return [t for t in lexical.fold(words.segment(normalized)).split(" ") if t]


def padded(tokens: Sequence[str]) -> str:
    """Tokens each between two spaces: a phrase's padded form is a substring of a column's
    exactly where its tokens stand next to each other."""
    return f" {'  '.join(tokens)} " if tokens else ""


def query_term(term: str) -> list[str]:
    """The folded tokens of one of the word leg's terms (a phrase: several)."""
    return [lexical.fold(t) for t in term.split(" ") if t]


def overlap_witnesses(tokens: Sequence[str]) -> list[str]:
    """lexical.overlap_witnesses for a phrase of tokens, padded: padded occurrences only
    ever overlap by whole tokens (``a a`` in ``a a a``), never by the padding."""
    size = len(tokens)
    found = [
        padded([*tokens, *tokens[n:]])
        for n in range(size - 1, 0, -1)
        if list(tokens[:n]) == list(tokens[-n:])
    ]
    return [w for w in found if not any(o != w and o in w for o in found)]
