"""The title index in the SQLite file: one row per document (its folded title) and one per
chunk (its document), so that a query reads titles from a narrow table of their own and
the matching documents' chunks from an index, never every document through the storage
contract."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from groove_core.leg_index import IndexedChunk
from groove_title_leg.common import fold

SCHEMA = """
CREATE TABLE IF NOT EXISTS title_docs (
    doc_id INTEGER PRIMARY KEY, path TEXT NOT NULL, title TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS title_chunks (
    chunk_id INTEGER PRIMARY KEY, doc_id INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS title_chunks_doc ON title_chunks(doc_id, chunk_id);
"""


class TitleIndex:
    """The title leg's index on SQLite (``site``: the store's pysqlite3 connection)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    # -- what the store calls (groove_core.leg_index.LegIndex) ----------------------------

    def create(self, connection: Any) -> None:
        for statement in SCHEMA.split(";"):
            if statement.strip():
                connection.execute(statement)

    def drop(self, connection: Any) -> None:
        connection.execute("DROP TABLE IF EXISTS title_chunks")
        connection.execute("DROP TABLE IF EXISTS title_docs")

    def write(self, connection: Any, chunks: Sequence[IndexedChunk]) -> None:
        connection.executemany(
            "INSERT OR REPLACE INTO title_docs(doc_id, path, title) VALUES (?, ?, ?)",
            list({c.doc_id: (c.doc_id, c.path, fold(c.title)) for c in chunks}.values()),
        )
        connection.executemany(
            "INSERT INTO title_chunks(chunk_id, doc_id) VALUES (?, ?)",
            [(c.chunk_id, c.doc_id) for c in chunks],
        )

    def delete(self, connection: Any, chunks: Sequence[IndexedChunk]) -> None:
        connection.executemany(
            "DELETE FROM title_chunks WHERE chunk_id = ?", [(c.chunk_id,) for c in chunks]
        )
        connection.executemany(
            "DELETE FROM title_docs WHERE doc_id = ? AND NOT EXISTS "
            "(SELECT 1 FROM title_chunks WHERE doc_id = ?)",
            [(d, d) for d in {c.doc_id for c in chunks}],
        )

    def chunk_ids(self) -> frozenset[int]:
        return frozenset(int(r[0]) for r in self.conn.execute("SELECT chunk_id FROM title_chunks"))

    def check(self) -> list[str]:
        orphans = self.conn.execute(
            "SELECT count(*) FROM title_chunks WHERE doc_id NOT IN (SELECT doc_id FROM title_docs)"
        ).fetchone()[0]
        return [f"{orphans} title_chunks rows without their title"] if orphans else []

    # -- the leg's queries --------------------------------------------------------------

    def documents(self, phrases: Sequence[str], limit: int) -> list[tuple[int, int]]:
        """(doc id, how many of ``phrases`` (folded) its folded title holds) for documents
        whose title holds at least one: most first, then by path; at most ``limit``."""
        if not phrases:
            return []
        matched = " + ".join("(instr(title, ?) > 0)" for _ in phrases)
        rows = self.conn.execute(
            f"SELECT doc_id, {matched} AS n FROM title_docs WHERE n > 0 "
            "ORDER BY n DESC, path LIMIT ?",
            (*phrases, limit),
        )
        return [(int(r[0]), int(r[1])) for r in rows]

    def chunks(self, doc_id: int) -> list[int]:
        """The document's chunk ids, ascending (its chunks in document order)."""
        rows = self.conn.execute(
            "SELECT chunk_id FROM title_chunks WHERE doc_id = ? ORDER BY chunk_id", (doc_id,)
        )
        return [int(r[0]) for r in rows]


def title_index(conn: Any) -> TitleIndex:
    return TitleIndex(conn)
