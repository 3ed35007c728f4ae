"""The title index on PostgreSQL: the same two tables as on SQLite (one row per document,
its folded title; one per chunk, its document), in groove's schema and shared by every
knowledge base of the database, so every row carries the KB's id (``site.kb``) and every
statement is scoped to it. A pg_trgm GIN index on the titles serves the substring match.

Imported only by the factory the leg registers for ``"postgres"``: SQLite users never
import psycopg. Every statement is composed with ``psycopg.sql`` (the schema as an
identifier) and takes its values as parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from psycopg import sql

from groove_core.leg_index import IndexedChunk
from groove_title_leg.common import fold

if TYPE_CHECKING:
    from groove_postgres.legs import PostgresSite

#: The tables and indexes, ``{s}`` the schema. The rows reference the KB: a KB deleted
#: while the leg is disabled (when groove cannot call the index) takes them along.
SCHEMA = (
    """CREATE TABLE IF NOT EXISTS {s}.title_docs (
        kb integer NOT NULL REFERENCES {s}.kbs(id) ON DELETE CASCADE,
        doc_id bigint NOT NULL,
        path text NOT NULL,
        title text NOT NULL,
        PRIMARY KEY (kb, doc_id))""",
    "CREATE INDEX IF NOT EXISTS title_docs_trgm ON {s}.title_docs USING gin (title gin_trgm_ops)",
    """CREATE TABLE IF NOT EXISTS {s}.title_chunks (
        kb integer NOT NULL REFERENCES {s}.kbs(id) ON DELETE CASCADE,
        chunk_id bigint NOT NULL,
        doc_id bigint NOT NULL,
        PRIMARY KEY (kb, chunk_id))""",
    "CREATE INDEX IF NOT EXISTS title_chunks_doc ON {s}.title_chunks(kb, doc_id, chunk_id)",
)


def like_pattern(phrase: str) -> str:
    """A LIKE pattern matching ``phrase`` anywhere (backslash is LIKE's escape)."""
    escaped = phrase.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class TitleIndex:
    """The title leg's index on PostgreSQL (``site``: a ``groove_postgres.legs.PostgresSite``)."""

    def __init__(self, site: PostgresSite) -> None:
        self.site = site

    def _sql(self, text: str) -> sql.Composed:
        """``text`` with ``{s}`` as the schema, quoted as an identifier."""
        return sql.SQL(text).format(s=sql.Identifier(self.site.schema))

    # -- what the store calls (groove_core.leg_index.LegIndex) ----------------------------

    def create(self, connection: Any) -> None:
        for statement in SCHEMA:
            connection.execute(self._sql(statement))

    def drop(self, connection: Any) -> None:
        """Delete this KB's rows (the tables are every KB's); nothing when they were never
        created."""
        for table in ("title_chunks", "title_docs"):
            found = connection.execute(
                "SELECT to_regclass(%s)",
                (sql.Identifier(self.site.schema, table).as_string(connection),),
            ).fetchone()
            if found is not None and found[0] is not None:
                connection.execute(
                    sql.SQL("DELETE FROM {t} WHERE kb = %s").format(
                        t=sql.Identifier(self.site.schema, table)
                    ),
                    (self.site.kb,),
                )

    def write(self, connection: Any, chunks: Sequence[IndexedChunk]) -> None:
        if not chunks:
            return
        docs = {c.doc_id: (c.path, fold(c.title)) for c in chunks}
        ids = sorted(docs)
        connection.execute(
            self._sql(
                "INSERT INTO {s}.title_docs(kb, doc_id, path, title) "
                "SELECT %s, d, p, t "
                "FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS u(d, p, t) "
                "ON CONFLICT (kb, doc_id) DO UPDATE "
                "SET path = excluded.path, title = excluded.title"
            ),
            (self.site.kb, ids, [docs[d][0] for d in ids], [docs[d][1] for d in ids]),
        )
        connection.execute(
            self._sql(
                "INSERT INTO {s}.title_chunks(kb, chunk_id, doc_id) "
                "SELECT %s, c, d FROM unnest(%s::bigint[], %s::bigint[]) AS u(c, d)"
            ),
            (self.site.kb, [c.chunk_id for c in chunks], [c.doc_id for c in chunks]),
        )

    def delete(self, connection: Any, chunks: Sequence[IndexedChunk]) -> None:
        if not chunks:
            return
        connection.execute(
            self._sql("DELETE FROM {s}.title_chunks WHERE kb = %s AND chunk_id = ANY(%s)"),
            (self.site.kb, [c.chunk_id for c in chunks]),
        )
        # A document's row goes with its last chunk.
        connection.execute(
            self._sql(
                "DELETE FROM {s}.title_docs d WHERE d.kb = %s AND d.doc_id = ANY(%s) "
                "AND NOT EXISTS (SELECT 1 FROM {s}.title_chunks c "
                "WHERE c.kb = d.kb AND c.doc_id = d.doc_id)"
            ),
            (self.site.kb, sorted({c.doc_id for c in chunks})),
        )

    def chunk_ids(self) -> frozenset[int]:
        with self.site.connection() as conn:
            rows = conn.execute(
                self._sql("SELECT chunk_id FROM {s}.title_chunks WHERE kb = %s"), (self.site.kb,)
            ).fetchall()
        return frozenset(int(r[0]) for r in rows)

    def check(self) -> list[str]:
        """Chunk rows without their document's row, and document rows without a chunk."""
        with self.site.connection() as conn:
            row = conn.execute(
                self._sql(
                    "SELECT (SELECT count(*) FROM {s}.title_chunks c WHERE c.kb = %s "
                    "AND NOT EXISTS (SELECT 1 FROM {s}.title_docs d "
                    "WHERE d.kb = c.kb AND d.doc_id = c.doc_id)), "
                    "(SELECT count(*) FROM {s}.title_docs d WHERE d.kb = %s "
                    "AND NOT EXISTS (SELECT 1 FROM {s}.title_chunks c "
                    "WHERE c.kb = d.kb AND c.doc_id = d.doc_id))"
                ),
                (self.site.kb, self.site.kb),
            ).fetchone()
        orphans, empty = (int(v) for v in row) if row else (0, 0)
        problems = []
        if orphans:
            problems.append(f"{orphans} title_chunks rows without their title")
        if empty:
            problems.append(f"{empty} title_docs rows without a chunk")
        return problems

    # -- the leg's queries --------------------------------------------------------------

    def documents(self, phrases: Sequence[str], limit: int) -> list[tuple[int, int]]:
        """(doc id, how many of ``phrases`` (folded) its folded title holds) for documents
        whose title holds at least one: most first, then by path (in code point order, as
        on SQLite); at most ``limit``. Each phrase is a LIKE pattern the titles' trigram
        index serves (one with three characters or more)."""
        if not phrases or limit <= 0:
            return []
        patterns = [like_pattern(p) for p in phrases]
        matched = sql.SQL(" + ").join(sql.SQL("(title LIKE %s)::int") for _ in patterns)
        anywhere = sql.SQL(" OR ").join(sql.SQL("title LIKE %s") for _ in patterns)
        query = sql.SQL(
            "SELECT doc_id, n FROM (SELECT doc_id, path, {matched} AS n FROM {t} "
            'WHERE kb = %s AND ({anywhere})) m ORDER BY n DESC, path COLLATE "C" LIMIT %s'
        ).format(
            matched=matched,
            anywhere=anywhere,
            t=sql.Identifier(self.site.schema, "title_docs"),
        )
        with self.site.connection() as conn:
            rows = conn.execute(query, (*patterns, self.site.kb, *patterns, limit)).fetchall()
        return [(int(r[0]), int(r[1])) for r in rows]

    def chunks(self, doc_id: int) -> list[int]:
        """The document's chunk ids, ascending (its chunks in document order)."""
        with self.site.connection() as conn:
            rows = conn.execute(
                self._sql(
                    "SELECT chunk_id FROM {s}.title_chunks WHERE kb = %s AND doc_id = %s "
                    "ORDER BY chunk_id"
                ),
                (self.site.kb, doc_id),
            ).fetchall()
        return [int(r[0]) for r in rows]


def title_index(site: PostgresSite) -> TitleIndex:
    """The factory the leg registers under ``"postgres"``."""
    return TitleIndex(site)
