"""The lexical leg on PostgreSQL: the SQLite FTS5 trigram leg's matching and bm25, redone.

SQLite's leg (docs/retrieval-pipeline.md, "Lexical leg") indexes heading / context /
content, NFKC-normalised, with FTS5's ``trigram remove_diacritics 1`` tokenizer, matches
the compiled query's quoted phrases and ranks with ``bm25(fts_chunks, heading, context,
content)``. Here:

* each column is stored NFKC-normalised and *folded* (:func:`fold`: the tokenizer's case
  folding and diacritic removal, one character for one, so positions and lengths agree);
* a phrase matches a column when it is a substring of it (what a trigram phrase match
  is), found through a pg_trgm GIN index on the three columns joined by U+001F (the query
  compiler turns control characters into spaces, so no phrase spans two columns);
* the score is FTS5's bm25, computed in SQL from the same quantities: per phrase the
  number of rows it matches (its IDF), per row its weighted phrase frequency (overlapping
  occurrences, as trigram positions count them) and its length in trigram tokens, and the
  KB's average length — kept in ``kbs`` and per-chunk ``ntok``, written in the
  documents' own transaction. Per-trigram document frequencies (``trigram_df``) answer the
  common-phrase rule (``PgTrigramIndex.rows``, groove_postgres.legs), as FTS5's
  vocabulary does for the SQLite store;
  a build that fills a KB writes them once, at its end (``PostgresStore.defer_statistics``).
* a phrase of Latin letters and digits alone (what the leg mostly searches: the words of
  a question's Latin text, since it leaves Japanese to the word leg) is scored without
  reading text. Such a phrase occurs only inside the maximal runs of those characters, its
  *surface words* (:func:`surface_words`), so its count in a column is the sum, over the
  surface words that contain it, of the word's count in the column times its occurrences
  in the word. Each chunk's surface words are kept as postings at write time (in
  ``word_tf``, their terms marked by :data:`SURFACE_MARK`, their length the chunk's
  trigram tokens), and the KB's distinct surface words in ``surface_terms``, whose
  pg_trgm index finds the ones containing a phrase. The counts, and so the scores, are
  the text's (:func:`surface_phrase` says which phrases qualify).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from groove_core.folding import fold_char

#: The indexed lexical text: the three folded columns joined by :data:`SEPARATOR`, as SQL.
#: Written out literally wherever a query must use the GIN index on it.
TEXT_SQL = "(heading_n || E'\\x1f' || context_n || E'\\x1f' || content_n)"
#: The surface-word mark (:data:`SURFACE_MARK`) as SQL.
SURFACE_MARK_SQL = "E'\\x1f'"

__all__ = [
    "SEPARATOR",
    "SURFACE_MARK",
    "fold",
    "like_pattern",
    "overlap_witnesses",
    "surface_phrase",
    "surface_words",
    "token_count",
    "trigrams",
]

#: Joins the three folded columns in the indexed expression (a control character: never
#: part of a compiled phrase).
SEPARATOR = "\x1f"

#: Marks a surface word's postings in ``word_tf`` (the word leg's tokens never hold a
#: control character), so the two legs' postings share a table and its upkeep.
SURFACE_MARK = "\x1f"
#: The characters of surface words, written out: the SQL that counts them again
#: (``PostgresStore.counted_postings``) uses the same class, not a locale's ranges.
SURFACE_CHARS = "0123456789abcdefghijklmnopqrstuvwxyz"
#: A surface word of three characters or more: a shorter one holds no trigram phrase.
_SURFACE_WORD = re.compile(f"[{SURFACE_CHARS}]{{3,}}")

#: FTS5's bm25 constants (fts5_aux.c).
K1 = 1.2
B = 0.75


class _FoldTable(dict[int, str]):
    """Code point -> the character as the trigram tokenizer compares it: the core's rule for
    its common-phrase estimate (groove_core/folding.py), computed once per character
    the first time :func:`fold`'s ``str.translate`` meets it. NUL, which PostgreSQL text
    cannot hold, maps to U+FFFD."""

    def __missing__(self, code: int) -> str:
        folded = fold_char("\ufffd" if code == 0 else chr(code))
        self[code] = folded
        return folded


_FOLD = _FoldTable()


def fold(text: str) -> str:
    """``text`` (already NFKC-normalised) folded one character for one; NUL, which
    PostgreSQL text cannot hold, becomes U+FFFD. (One ``str.translate`` pass: a per
    character Python call cost more than the rest of a chunk's row.)"""
    return text.translate(_FOLD)


def token_count(folded: str) -> int:
    """Trigram tokens of one column: FTS5's column size for the trigram tokenizer."""
    return max(len(folded) - 2, 0)


def trigrams(columns: Iterable[str]) -> set[str]:
    """The distinct trigrams of folded columns (none spans two columns)."""
    out: set[str] = set()
    for text in columns:
        # Three characters joined in C: cheaper than slicing in a generator expression.
        out.update(map("".join, zip(text, text[1:], text[2:], strict=False)))
    return out


def surface_words(folded: str) -> list[str]:
    """The surface words of one folded column, each occurrence: its maximal runs of
    :data:`SURFACE_CHARS` three characters long or more."""
    return _SURFACE_WORD.findall(folded)


def surface_phrase(folded: str) -> bool:
    """Whether a folded phrase is counted from the surface words' postings: three or more
    characters, all of them :data:`SURFACE_CHARS` (so no occurrence crosses a run's end)."""
    return _SURFACE_WORD.fullmatch(folded) is not None


def like_pattern(phrase: str) -> str:
    """A LIKE pattern matching ``phrase`` anywhere (backslash is LIKE's escape)."""
    escaped = phrase.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def overlap_witnesses(phrase: str) -> list[str]:
    """The shortest texts holding two overlapping occurrences of ``phrase``, one per way
    they can overlap: a proper prefix that equals a suffix (``n`` in ``nation``) lets an
    occurrence start where the previous one's suffix does (``nationation``). A column
    holds overlapping occurrences exactly when it contains one of these; without them the
    cheaper ``replace`` arithmetic counts every occurrence."""
    size = len(phrase)
    found = [phrase + phrase[n:] for n in range(size - 1, 0, -1) if phrase[:n] == phrase[-n:]]
    # A witness that contains a shorter one adds nothing (``aaaaa`` holds ``aaaa``).
    return [w for w in found if not any(o != w and o in w for o in found)]


_REGEX_SPECIAL = set("\\^$.|?*+()[]{}")


def overlap_regex(phrase: str) -> str:
    """A PostgreSQL ARE that matches (empty) at every start of ``phrase``, overlaps
    included: ``regexp_count(text, re)`` is the phrase's occurrence count."""
    body = "".join("\\" + ch if ch in _REGEX_SPECIAL else ch for ch in phrase)
    return f"(?={body})"
