"""The word leg's table in the SQLite index, ``word_chunks``, and all of its SQL.

FTS5 over the chunks' word tokens (``groove_core.words.segment``), indexed by the
``unicode61`` tokenizer, which then only splits at the spaces between them. The table is
contentless (schema 4): it keeps the index, not the text, so a row is deleted by handing
FTS5 the same segmented text again, computed from the chunk (:func:`delete_rows`); an
index written under other segmentation rules is re-filled first (``store``). The
``fts5vocab`` view of the table gives the per-token document frequencies.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from groove_core.words import segment

__all__ = [
    "WORD_SCHEMA",
    "create_table",
    "delete_rows",
    "document_frequencies",
    "fill",
    "insert_row",
    "migrate_add_word_table",
    "row_ids",
    "search",
]

WORD_SCHEMA = """
CREATE VIRTUAL TABLE IF NOT EXISTS word_chunks USING fts5(
    heading, context, content, content = '', tokenize = 'unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE IF NOT EXISTS word_vocab USING fts5vocab(word_chunks, 'row');
"""

_RANKED_SQL = (
    "SELECT rowid, bm25(word_chunks, ?, ?, ?) AS s FROM word_chunks "
    "WHERE word_chunks MATCH ? ORDER BY s, rowid LIMIT ?"
)
_RANKED_FILTERED_SQL = (
    "SELECT rowid, bm25(word_chunks, ?, ?, ?) AS s FROM word_chunks "
    "WHERE word_chunks MATCH ? AND rowid IN (SELECT value FROM json_each(?)) "
    "ORDER BY s, rowid LIMIT ?"
)


def insert_row(conn: Any, chunk_id: int, heading: str, context: str, content: str) -> None:
    """Index one chunk (already NFKC-normalised); called in the chunk's own transaction."""
    conn.execute(
        "INSERT INTO word_chunks(rowid, heading, context, content) VALUES (?, ?, ?, ?)",
        (chunk_id, segment(heading), segment(context), segment(content)),
    )


def delete_rows(conn: Any, rows: Iterable[tuple[int, str, str, str]]) -> None:
    """Delete these chunks' rows: (chunk id, heading, context, content), NFKC-normalised,
    the text they were written with. A contentless table cannot look it up, and FTS5
    removes exactly the tokens it is given (other text would damage the index)."""
    conn.executemany(
        "INSERT INTO word_chunks(word_chunks, rowid, heading, context, content) "
        "VALUES ('delete', ?, ?, ?, ?)",
        [(i, segment(h), segment(c), segment(t)) for i, h, c, t in rows],
    )


def row_ids(conn: Any) -> frozenset[int]:
    """Every chunk id the table holds (for the doctor's consistency check)."""
    return frozenset(int(r[0]) for r in conn.execute("SELECT rowid FROM word_chunks"))


def search(
    conn: Any,
    expr: str,
    weights: tuple[float, float, float],
    limit: int,
    allowed: frozenset[int] | None = None,
) -> list[tuple[int, float]]:
    """Ranked candidates: (chunk id, bm25) best first (bm25 is negative, smaller is better)."""
    if allowed is None:
        rows = conn.execute(_RANKED_SQL, (*weights, expr, limit))
    else:
        ids = json.dumps(sorted(allowed))
        rows = conn.execute(_RANKED_FILTERED_SQL, (*weights, expr, ids, limit))
    return [(int(r[0]), float(r[1])) for r in rows]


def document_frequencies(conn: Any, terms: Sequence[str]) -> dict[str, int]:
    """How many chunks contain each single-token term (phrases are left out)."""
    single = [t for t in terms if " " not in t]
    rows = conn.execute(
        "SELECT term, doc FROM word_vocab WHERE term IN (SELECT value FROM json_each(?))",
        (json.dumps(single, ensure_ascii=False),),
    )
    found = {str(r[0]): int(r[1]) for r in rows}
    return {t: found.get(t, 0) for t in single}


def create_table(conn: Any) -> None:
    for statement in WORD_SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)


def fill(conn: Any, rows: Iterable[tuple[int, str, str, str]]) -> None:
    """Write the rows of these chunks (id, heading, context, content; NFKC-normalised)."""
    conn.executemany(
        "INSERT INTO word_chunks(rowid, heading, context, content) VALUES (?, ?, ?, ?)",
        [(i, segment(h), segment(c), segment(t)) for i, h, c, t in rows],
    )


def migrate_add_word_table(conn: Any) -> None:
    """Schema 1 → 2: create the word table. Schema 4 makes it contentless and fills it from
    the chunks already indexed (``store``), so an upgrade needs no re-embedding."""
    create_table(conn)
