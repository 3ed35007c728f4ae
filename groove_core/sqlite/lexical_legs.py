"""The built-in lexical legs' indexes in the SQLite file: the trigram leg's ``fts_chunks``
and the word leg's ``word_chunks`` (``word_table``), with their queries.

Both are FTS5 tables over a chunk's heading, context and content, contentless (schema 4:
they keep the index, not a third copy of the text, ~14% smaller; docs/benchmarks.md,
"Issue #21"), so a row is deleted by handing FTS5 the text it was written with, computed
again from the chunk; the store's versioning of leg indexes (``groove_core.leg_index``)
fills a table again when the rules that text depends on change. Not
``contentless_delete = 1``: FTS5 then never subtracts a deleted row from the row count and
token totals that bm25 uses, so scores would drift with every edit.

The FTS5 query syntax is compiled here (:func:`match_expression`), in the SQLite wing: the
legs hand these indexes phrases and terms, never FTS5 text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from groove_core.builtins.legs import fts_version, word_version
from groove_core.leg_index import BoundIndex, IndexedChunk
from groove_core.query import match_expression, normalize
from groove_core.rows import Allowed, Ranked, Weights
from groove_core.sqlite import word_table

__all__ = [
    "DEFAULT_INDEXES",
    "FTS_SCHEMA",
    "TrigramIndex",
    "WordIndex",
]

FTS_SCHEMA = """
CREATE VIRTUAL TABLE IF NOT EXISTS fts_chunks USING fts5(
    heading, context, content, content = '', tokenize = 'trigram remove_diacritics 1'
);
"""

#: Ranked trigram leg. bm25() is negative, smaller is better.
FTS_RANKED_SQL = (
    "SELECT rowid, bm25(fts_chunks, ?, ?, ?) AS s FROM fts_chunks "
    "WHERE fts_chunks MATCH ? ORDER BY s, rowid LIMIT ?"
)
FTS_RANKED_FILTERED_SQL = (
    "SELECT rowid, bm25(fts_chunks, ?, ?, ?) AS s FROM fts_chunks "
    "WHERE fts_chunks MATCH ? AND rowid IN (SELECT value FROM json_each(?)) "
    "ORDER BY s, rowid LIMIT ?"
)
#: The exclusion id scan: no bm25, no ORDER BY (ADR-0011).
FTS_IDS_SQL = "SELECT rowid FROM fts_chunks WHERE fts_chunks MATCH ?"
#: Rows per trigram, for the common-phrase rule. The fts5vocab view lives in the
#: connection's temp schema, so the index file and its schema are unchanged.
FTS_VOCAB_SQL = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_vocab USING fts5vocab(main, fts_chunks, row)"
)
FTS_TERM_ROWS_SQL = "SELECT doc FROM temp.fts_vocab WHERE term = ?"


#: (chunk id, heading, context, content) as the lexical tables index them (NFKC).
LexicalRow = tuple[int, str, str, str]


def lexical_rows(chunks: Iterable[IndexedChunk]) -> list[LexicalRow]:
    # FTS holds the NFKC form so that full- and half-width text match each other.
    return [
        (c.chunk_id, normalize(c.heading), normalize(c.context), normalize(c.content))
        for c in chunks
    ]


#: Terms whose row counts one index keeps, at most (each a short string and an int).
MAX_CACHED = 100_000


class _Counts:
    """Row counts per term from an FTS5 vocabulary, valid for one ``PRAGMA data_version``
    (another connection's commit changes it): counting a common term's rows reads its whole
    doclist, as costly as matching it, and the common terms are those every query shares."""

    def __init__(self, conn: Any, docsize: str) -> None:
        self.conn, self._docsize = conn, docsize
        self._version: int | None = None
        self.cache: dict[str, int] = {}
        self.total = 0

    def fresh(self) -> bool:
        """Drop the cache when the index changed; True when it did. A cache past
        MAX_CACHED terms is dropped too: long queries (a pasted log's every token) would
        otherwise grow it for as long as the index does not change."""
        version = int(self.conn.execute("PRAGMA data_version").fetchone()[0])
        if version == self._version:
            if len(self.cache) > MAX_CACHED:
                self.cache = {}
            return False
        self.cache = {}
        # FTS5's own per-row table: the same rows the vocabulary counts, a b-tree count.
        self.total = int(self.conn.execute(f"SELECT count(*) FROM {self._docsize}").fetchone()[0])
        self._version = version
        return True


class _Fts5Index:
    """What both contentless FTS5 tables share: create, drop, the row ids, the self-check."""

    table = ""
    schema = ""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self._counts = _Counts(conn, f"{self.table}_docsize")

    def create(self, connection: Any) -> None:
        for statement in self.schema.split(";"):
            if statement.strip():
                connection.execute(statement)

    def chunk_ids(self) -> frozenset[int]:
        return frozenset(int(r[0]) for r in self.conn.execute(f"SELECT rowid FROM {self.table}"))

    def check(self) -> list[str]:
        """FTS5's own consistency check (issued as an INSERT: the store runs it only on a
        writable index)."""
        import pysqlite3.dbapi2 as sqlite3

        table = self.table
        try:
            self.conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
        except sqlite3.DatabaseError as err:
            return [f"{table}: {err}"]
        return []


class TrigramIndex(_Fts5Index):
    """The trigram leg's table: FTS5 ``trigram`` over the NFKC text, matched by phrase."""

    table = "fts_chunks"
    schema = FTS_SCHEMA

    def drop(self, connection: Any) -> None:
        connection.execute("DROP TABLE IF EXISTS temp.fts_vocab")
        connection.execute("DROP TABLE IF EXISTS fts_chunks")
        self._counts = _Counts(self.conn, f"{self.table}_docsize")

    def write(self, connection: Any, chunks: Sequence[IndexedChunk]) -> None:
        connection.executemany(
            "INSERT INTO fts_chunks(rowid, heading, context, content) VALUES (?, ?, ?, ?)",
            lexical_rows(chunks),
        )

    def delete(self, connection: Any, chunks: Sequence[IndexedChunk]) -> None:
        connection.executemany(
            "INSERT INTO fts_chunks(fts_chunks, rowid, heading, context, content) "
            "VALUES ('delete', ?, ?, ?, ?)",
            lexical_rows(chunks),
        )

    def search(
        self,
        phrases: Sequence[str],
        weights: Weights,
        limit: int,
        allowed: Allowed = None,
        *,
        excluded: Sequence[str] = (),
    ) -> Ranked:
        """Up to ``limit`` (chunk id, bm25) of the chunks that hold any of ``phrases`` and
        none of ``excluded``, best first (ties by id). A phrase is matched whole, NFKC-
        normalised and folded as :func:`groove_core.folding.fold_char` folds it, anywhere
        in the heading, context or content; ``weights`` are the columns' bm25 weights;
        ``allowed``: only those chunk ids. Cost: grows with the rows the phrases match
        (every match is scored before the limit)."""
        if not phrases:
            return []
        expr = match_expression(phrases, excluded)
        if allowed is None:
            rows = self.conn.execute(FTS_RANKED_SQL, (*weights, expr, limit))
        else:
            ids = json.dumps(sorted(allowed))
            rows = self.conn.execute(FTS_RANKED_FILTERED_SQL, (*weights, expr, ids, limit))
        return [(int(r[0]), float(r[1])) for r in rows]

    def ids(self, phrases: Sequence[str]) -> frozenset[int]:
        """Every chunk id holding any of ``phrases``, matched as :meth:`search` matches
        them, unranked (the exclusion scan). Cost: the matches, no scoring."""
        if not phrases:
            return frozenset()
        expr = match_expression(phrases, ())
        return frozenset(int(r[0]) for r in self.conn.execute(FTS_IDS_SQL, (expr,)))

    def rows(self, trigrams: Iterable[str]) -> tuple[dict[str, int], int]:
        """(rows containing each trigram, rows in all), for the common-phrase rule; cached
        until the index changes."""
        trigrams = list(trigrams)
        if self._counts.fresh():
            self.conn.execute(FTS_VOCAB_SQL)
        cache = self._counts.cache
        for term in dict.fromkeys(trigrams):
            if term not in cache:
                found = self.conn.execute(FTS_TERM_ROWS_SQL, (term,)).fetchone()
                cache[term] = 0 if found is None else int(found[0])
        return {t: cache[t] for t in trigrams}, self._counts.total

    def expression(self, phrases: Sequence[str], excluded: Sequence[str] = ()) -> str:
        """The FTS5 expression :meth:`search` runs (``--explain``)."""
        return match_expression(phrases, excluded)


class WordIndex(_Fts5Index):
    """The word leg's table (``word_table``): FTS5 over each chunk's word tokens."""

    table = "word_chunks"
    schema = word_table.WORD_SCHEMA

    def drop(self, connection: Any) -> None:
        connection.execute("DROP TABLE IF EXISTS word_vocab")
        connection.execute("DROP TABLE IF EXISTS word_chunks")
        self._counts = _Counts(self.conn, f"{self.table}_docsize")

    def write(self, connection: Any, chunks: Sequence[IndexedChunk]) -> None:
        word_table.fill(connection, lexical_rows(chunks))

    def delete(self, connection: Any, chunks: Sequence[IndexedChunk]) -> None:
        word_table.delete_rows(connection, lexical_rows(chunks))

    def search(
        self, terms: Sequence[str], weights: Weights, limit: int, allowed: Allowed = None
    ) -> Ranked:
        """Up to ``limit`` (chunk id, bm25) of the chunks holding any of ``terms`` among
        their word tokens, best first, scored as the trigram leg's. A term is one token,
        or several separated by a space (a phrase: the tokens side by side, in order), as
        ``words.query_terms`` writes them. Cost: the rows the terms match."""
        if not terms:
            return []
        return word_table.search(self.conn, match_expression(terms, ()), weights, limit, allowed)

    def rows(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        """(chunks containing each single-token term, chunks in all); terms with a space
        (phrases) are left out of the dict. Cached until the index changes."""
        self._counts.fresh()
        cache = self._counts.cache
        single = [t for t in dict.fromkeys(terms) if " " not in t]
        missing = [t for t in single if t not in cache]
        if missing:
            cache.update(word_table.document_frequencies(self.conn, missing))
        return {t: cache[t] for t in single}, self._counts.total

    def expression(self, terms: Sequence[str]) -> str:
        """The FTS5 expression :meth:`search` runs (``--explain``)."""
        return match_expression(terms, ())


#: The built-in legs' indexes, as a store opened without a plugin set keeps them (tests,
#: benchmarks, tools that open an index file directly).
DEFAULT_INDEXES = (
    BoundIndex("fts", fts_version(), TrigramIndex, "fts"),
    BoundIndex("word", word_version(), WordIndex, "word"),
)
