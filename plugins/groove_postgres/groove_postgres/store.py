"""The index on PostgreSQL: schema, connect-time checks and :class:`PostgresStore`.

The method names and return shapes mirror ``groove_core.store.Store`` (the SQLite index,
docs/adr/0001-one-sqlite-file-per-knowledge-base.md) so the store can stand behind the
core's backend contract. What differs:

* Several knowledge bases share one database: every table carries ``kb`` (a row of
  ``kbs``), every statement is scoped to this store's KB.
* The lexical leg is a pg_trgm GIN index plus bm25 statistics kept by groove
  (``groove_postgres.lexical``); the vector leg is pgvector HNSW (L2, as sqlite-vec), one
  partial index per KB because each KB has its own embedder dimension.
* Writes take a transaction-scoped advisory lock keyed by the KB; an index run takes a
  session-scoped one (:meth:`PostgresStore.run_lock`), so two runs on one KB queue.
* Reads and writes borrow connections from a psycopg pool, so searches run concurrently.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from groove_core.query import normalize
from groove_core.store import (
    INCOMPLETE_KEY,
    LAST_RUN_KEY,
    DocState,
    EmbedderMismatchError,
    NewDocument,
    StoreError,
)
from groove_postgres import lexical
from groove_postgres.settings import PostgresSettings, SettingsError, connect_kwargs, scrub

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

    from groove_core.chunking import Chunk

__all__ = ["MIN_SERVER_VERSION", "SCHEMA_VERSION", "PostgresStore", "PostgresStoreError"]

SCHEMA_VERSION = 1
#: regexp_count (overlapping phrase counts) is PostgreSQL 15+; pgvector 0.8 needs 13+.
MIN_SERVER_VERSION = 150000
#: Text whose trigrams a UTF-8 database with a usable character classification yields.
TRIGRAM_PROBE = "日本語の文章"
#: Advisory lock namespaces (the first key of pg_advisory_lock(int, int)); the second
#: key is the KB's id (0 for the schema).
LOCK_SCHEMA = 0x67727630  # 'grv0'
LOCK_RUN = 0x67727631
LOCK_WRITE = 0x67727632
#: Up to this many allowed chunks, a filtered KNN is an exact scan of just those rows.
EXACT_KNN_MAX_ROWS = 20_000


class PostgresStoreError(StoreError):
    """The PostgreSQL index cannot be used as it is; the message says why (never a password)."""


def _schema_sql(s: str) -> list[str]:
    """The DDL, in the schema ``s`` (validated by the settings model as an identifier)."""
    return [
        f"CREATE SCHEMA IF NOT EXISTS {s}",
        f"CREATE TABLE IF NOT EXISTS {s}.info (key text PRIMARY KEY, value text NOT NULL)",
        f"""CREATE TABLE IF NOT EXISTS {s}.kbs (
            id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            name text NOT NULL UNIQUE,
            nrow bigint NOT NULL DEFAULT 0,
            ntok bigint NOT NULL DEFAULT 0)""",
        f"""CREATE TABLE IF NOT EXISTS {s}.meta (
            kb integer NOT NULL REFERENCES {s}.kbs(id) ON DELETE CASCADE,
            key text NOT NULL,
            value text NOT NULL,
            PRIMARY KEY (kb, key))""",
        f"""CREATE TABLE IF NOT EXISTS {s}.documents (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            kb integer NOT NULL REFERENCES {s}.kbs(id) ON DELETE CASCADE,
            path text NOT NULL,
            title text NOT NULL,
            tags text NOT NULL DEFAULT '[]',
            content_hash text NOT NULL,
            size bigint NOT NULL,
            mtime_ns bigint NOT NULL,
            indexed_at double precision NOT NULL,
            UNIQUE (kb, path))""",
        f"""CREATE TABLE IF NOT EXISTS {s}.doc_tags (
            kb integer NOT NULL,
            doc_id bigint NOT NULL REFERENCES {s}.documents(id) ON DELETE CASCADE,
            tag text NOT NULL,
            PRIMARY KEY (doc_id, tag))""",
        f"CREATE INDEX IF NOT EXISTS doc_tags_tag ON {s}.doc_tags(kb, tag)",
        f"""CREATE TABLE IF NOT EXISTS {s}.chunks (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            kb integer NOT NULL,
            doc_id bigint NOT NULL REFERENCES {s}.documents(id) ON DELETE CASCADE,
            ordinal integer NOT NULL,
            heading text NOT NULL,
            heading_path text NOT NULL,
            level integer NOT NULL,
            context text NOT NULL,
            content text NOT NULL,
            token_count integer,
            byte_start bigint NOT NULL,
            byte_end bigint NOT NULL,
            line_start integer NOT NULL,
            line_end integer NOT NULL,
            heading_n text NOT NULL,
            context_n text NOT NULL,
            content_n text NOT NULL,
            ntok integer NOT NULL)""",
        f"CREATE INDEX IF NOT EXISTS chunks_doc ON {s}.chunks(doc_id, ordinal)",
        f"CREATE INDEX IF NOT EXISTS chunks_kb ON {s}.chunks(kb, id)",
        f"CREATE INDEX IF NOT EXISTS chunks_trgm ON {s}.chunks USING gin (({_TEXT}) gin_trgm_ops)",
        f"""CREATE TABLE IF NOT EXISTS {s}.vectors (
            chunk_id bigint PRIMARY KEY REFERENCES {s}.chunks(id) ON DELETE CASCADE,
            kb integer NOT NULL,
            embedding vector NOT NULL)""",
        f"""CREATE TABLE IF NOT EXISTS {s}.trigram_df (
            kb integer NOT NULL,
            tri text NOT NULL,
            df integer NOT NULL,
            PRIMARY KEY (kb, tri))""",
        f"""CREATE TABLE IF NOT EXISTS {s}.links (
            doc_id bigint NOT NULL REFERENCES {s}.documents(id) ON DELETE CASCADE,
            kb integer NOT NULL,
            ordinal integer NOT NULL,
            kind text NOT NULL,
            target text NOT NULL,
            key text NOT NULL,
            line integer NOT NULL,
            PRIMARY KEY (doc_id, ordinal))""",
        f"CREATE INDEX IF NOT EXISTS links_key ON {s}.links(kb, key)",
    ]


#: The indexed lexical text: the three folded columns joined by lexical.SEPARATOR. Written
#: out literally wherever a query must use the GIN index on it.
_TEXT = "(heading_n || E'\\x1f' || context_n || E'\\x1f' || content_n)"


def _ascii_lower(tag: str) -> str:
    """SQLite's NOCASE folds ASCII letters only; tags keep that rule here."""
    return tag.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _as_array(value: Any) -> np.ndarray:
    """A stored vector as float32 (pgvector's loader gives a Vector or an ndarray)."""
    to_numpy = getattr(value, "to_numpy", None)
    return np.asarray(to_numpy() if to_numpy else value, dtype=np.float32)


def _pg_text(text: str) -> str:
    """PostgreSQL text cannot hold NUL: it is stored as U+FFFD."""
    return text.replace("\x00", "\ufffd")


class PostgresStore:
    """One knowledge base's index in a PostgreSQL database.

    Construct with :meth:`open` (search: the KB must exist) or :meth:`create` (indexing:
    creates the schema and the KB's row as needed). ``label`` names the index in messages.
    """

    def __init__(
        self, pool: ConnectionPool[Any], settings: PostgresSettings, kb_id: int, label: str
    ) -> None:
        self.pool = pool
        self.settings = settings
        self.kb_id = kb_id
        self.label = label
        self._s = settings.db_schema
        self._local = threading.local()

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def open(cls, settings: PostgresSettings, kb: str, label: str | None = None) -> PostgresStore:
        """Open an existing KB's index for searching."""
        return cls._connect(settings, kb, label, create=False)

    @classmethod
    def create(cls, settings: PostgresSettings, kb: str, label: str | None = None) -> PostgresStore:
        """Open the KB's index for writing, creating the schema and the KB as needed."""
        return cls._connect(settings, kb, label, create=True)

    @classmethod
    def _connect(
        cls, settings: PostgresSettings, kb: str, label: str | None, *, create: bool
    ) -> PostgresStore:
        import psycopg
        from psycopg_pool import ConnectionPool

        shown = label or f"'{kb}' (PostgreSQL)"
        try:
            params = connect_kwargs(settings)
        except SettingsError as err:
            raise PostgresStoreError(str(err)) from None
        try:
            with psycopg.connect(params["conninfo"], **params["kwargs"]) as conn:
                _check_server(conn, settings)
                kb_id = _ensure_schema(conn, settings, kb, create=create, label=shown)
        except psycopg.Error as err:
            raise PostgresStoreError(
                f"connecting to the index {shown} failed: {scrub(str(err).strip(), settings)}"
            ) from None

        def configure(conn: psycopg.Connection[Any]) -> None:
            from pgvector.psycopg import register_vector

            register_vector(conn)
            conn.commit()

        pool: ConnectionPool[Any] = ConnectionPool(
            params["conninfo"],
            kwargs=params["kwargs"],
            min_size=settings.pool_min,
            max_size=settings.pool_max,
            configure=configure,
            open=False,
            name=f"groove-{kb}",
        )
        try:
            pool.open(wait=settings.pool_min > 0, timeout=float(settings.connect_timeout))
        except Exception as err:
            pool.close()
            raise PostgresStoreError(
                f"opening the connection pool of {shown} failed: {scrub(str(err), settings)}"
            ) from None
        return cls(pool, settings, kb_id, shown)

    def close(self) -> None:
        self.pool.close()

    # -- connections and transactions ------------------------------------------------------

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        """The connection of the enclosing transaction/snapshot, or one from the pool
        (its implicit transaction is committed when it goes back)."""
        pinned = getattr(self._local, "conn", None)
        if pinned is not None:
            yield pinned
            return
        with self.pool.connection() as conn:
            yield conn

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """One write transaction; writers of the same KB queue on an advisory lock."""
        if getattr(self._local, "conn", None) is not None:
            yield self._local.conn
            return
        with self.pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_WRITE, self.kb_id))
            self._local.conn = conn
            try:
                yield conn
            finally:
                self._local.conn = None

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read-only REPEATABLE READ transaction: every read inside sees the same
        committed state (a search never mixes two versions of a file)."""
        if getattr(self._local, "conn", None) is not None:
            yield
            return
        with self.pool.connection() as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            self._local.conn = conn
            try:
                yield
            finally:
                self._local.conn = None

    @contextmanager
    def run_lock(self, *, wait: bool = True) -> Iterator[bool]:
        """Hold the KB's index-run lock (session advisory lock on a dedicated
        connection) for the block; two index runs of one KB queue here. With
        ``wait=False`` yields False at once when another run holds it."""
        with self.pool.connection() as conn:
            conn.autocommit = True
            try:
                if wait:
                    conn.execute("SELECT pg_advisory_lock(%s, %s)", (LOCK_RUN, self.kb_id))
                    got = True
                else:
                    row = conn.execute(
                        "SELECT pg_try_advisory_lock(%s, %s)", (LOCK_RUN, self.kb_id)
                    ).fetchone()
                    got = bool(row and row[0])
                try:
                    yield got
                finally:
                    if got:
                        conn.execute("SELECT pg_advisory_unlock(%s, %s)", (LOCK_RUN, self.kb_id))
            finally:
                conn.autocommit = False

    # -- meta and embedder identity --------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        with self._conn() as conn:
            row = conn.execute(
                f"SELECT value FROM {self._s}.meta WHERE kb = %s AND key = %s", (self.kb_id, key)
            ).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as conn:
            conn.execute(
                f"INSERT INTO {self._s}.meta(kb, key, value) VALUES (%s, %s, %s) "
                "ON CONFLICT (kb, key) DO UPDATE SET value = excluded.value",
                (self.kb_id, key, value),
            )

    def _delete_meta(self, conn: psycopg.Connection[Any], *keys: str) -> None:
        conn.execute(
            f"DELETE FROM {self._s}.meta WHERE kb = %s AND key = ANY(%s)", (self.kb_id, list(keys))
        )

    def begin_run(self) -> None:
        """Mark the index incomplete while a run fills it from empty (as the SQLite store)."""
        with self.transaction() as conn:
            empty = (
                conn.execute(
                    f"SELECT 1 FROM {self._s}.documents WHERE kb = %s LIMIT 1", (self.kb_id,)
                ).fetchone()
                is None
            )
            if empty and self.get_meta(INCOMPLETE_KEY) is None:
                self.set_meta(INCOMPLETE_KEY, str(time.time()))

    def end_run(self) -> None:
        with self.transaction() as conn:
            self._delete_meta(conn, INCOMPLETE_KEY)
            self.set_meta(LAST_RUN_KEY, str(time.time()))

    def last_indexed(self) -> float | None:
        ended = self.get_meta(LAST_RUN_KEY)
        if ended is not None:
            return float(ended)
        with self._conn() as conn:
            row = conn.execute(
                f"SELECT max(indexed_at) FROM {self._s}.documents WHERE kb = %s", (self.kb_id,)
            ).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def incomplete(self) -> str | None:
        since = self.get_meta(INCOMPLETE_KEY)
        if since is None:
            return None
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(since)))
        docs = self.counts()["documents"]
        return (
            f"the index is incomplete: an index run started {started} has not finished (it is "
            f"still running or was interrupted), so only {docs} documents are searchable; "
            "run 'groove index' to complete it"
        )

    def embedder_identity(self) -> tuple[str, int] | None:
        identity, dim = self.get_meta("embedder"), self.get_meta("embedder_dim")
        if identity is None or dim is None:
            return None
        return identity, int(dim)

    def check_embedder(self, identity: str) -> None:
        recorded = self.embedder_identity()
        if recorded is not None and recorded[0] != identity:
            raise EmbedderMismatchError(
                f"the index {self.label} was built with embedder {recorded[0]!r} "
                f"({recorded[1]} dimensions) but the configuration uses {identity!r}: run "
                "'groove index --reembed' to re-embed it, or set [embedder] back to the one "
                "it was built with"
            )

    def bind_embedder(self, identity: str, dim: int) -> None:
        """Record the embedder and create the KB's HNSW index for its dimension."""
        self.check_embedder(identity)
        if self.embedder_identity() is not None:
            return
        dim = int(dim)
        with self.transaction() as conn:
            conn.execute(
                f"CREATE INDEX IF NOT EXISTS vectors_hnsw_{self.kb_id} ON {self._s}.vectors "
                f"USING hnsw ((embedding::vector({dim})) vector_l2_ops) "
                f"WITH (m = {self.settings.hnsw_m}, "
                f"ef_construction = {self.settings.hnsw_ef_construction}) "
                f"WHERE kb = {self.kb_id}"
            )
            self.set_meta("embedder", identity)
            self.set_meta("embedder_dim", str(dim))

    def has_vectors(self) -> bool:
        return self.get_meta("embedder_dim") is not None

    def forget_vectors(self) -> None:
        """Drop every vector of the KB and the embedder they came from."""
        with self.transaction() as conn:
            conn.execute(f"DROP INDEX IF EXISTS {self._s}.vectors_hnsw_{self.kb_id}")
            conn.execute(f"DELETE FROM {self._s}.vectors WHERE kb = %s", (self.kb_id,))
            self._delete_meta(conn, "embedder", "embedder_dim")

    def chunk_texts(self, after: int, limit: int) -> list[tuple[int, str, str]]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT id, context, content FROM {self._s}.chunks WHERE kb = %s AND id > %s "
                "ORDER BY id LIMIT %s",
                (self.kb_id, after, limit),
            ).fetchall()
        return [(int(r[0]), str(r[1]), str(r[2])) for r in rows]

    def write_vectors(self, chunk_ids: Sequence[int], vectors: np.ndarray) -> None:
        with self.transaction() as conn, conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {self._s}.vectors(chunk_id, kb, embedding) VALUES (%s, %s, %s)",
                [
                    (int(i), self.kb_id, np.asarray(v, dtype=np.float32))
                    for i, v in zip(chunk_ids, vectors, strict=True)
                ],
            )

    # -- writing ---------------------------------------------------------------------------

    def doc_states(self) -> dict[str, DocState]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT path, id, content_hash, size, mtime_ns FROM {self._s}.documents "
                "WHERE kb = %s",
                (self.kb_id,),
            ).fetchall()
        return {r[0]: DocState(int(r[1]), r[2], int(r[3]), int(r[4])) for r in rows}

    def write_documents(self, docs: Sequence[NewDocument], vectors: np.ndarray) -> None:
        """Replace these documents (and all their rows) in one transaction; ``vectors``
        holds one row per chunk, in the order of ``docs`` and their chunks."""
        now = time.time()
        row = 0
        stats = _StatsDelta()
        with self.transaction() as conn:
            for doc in docs:
                self._delete_path(conn, doc.path, stats)
                found = conn.execute(
                    f"INSERT INTO {self._s}.documents(kb, path, title, tags, content_hash, size, "
                    "mtime_ns, indexed_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                    (
                        self.kb_id,
                        _pg_text(doc.path),
                        _pg_text(doc.title),
                        _pg_text(json.dumps(list(doc.tags), ensure_ascii=False)),
                        doc.content_hash,
                        doc.size,
                        doc.mtime_ns,
                        now,
                    ),
                ).fetchone()
                assert found is not None
                doc_id = int(found[0])
                with conn.cursor() as cur:
                    cur.executemany(
                        f"INSERT INTO {self._s}.doc_tags(kb, doc_id, tag) VALUES (%s, %s, %s) "
                        "ON CONFLICT DO NOTHING",
                        [(self.kb_id, doc_id, _pg_text(_ascii_lower(t))) for t in doc.tags],
                    )
                    chunk_rows = [self._chunk_row(doc_id, c, stats) for c in doc.chunks]
                    ids: list[int] = []
                    if chunk_rows:
                        cur.executemany(_INSERT_CHUNK.format(s=self._s), chunk_rows, returning=True)
                        while True:
                            got = cur.fetchone()
                            assert got is not None
                            ids.append(int(got[0]))
                            if not cur.nextset():
                                break
                    cur.executemany(
                        f"INSERT INTO {self._s}.vectors(chunk_id, kb, embedding) "
                        "VALUES (%s, %s, %s)",
                        [
                            (cid, self.kb_id, np.asarray(vectors[row + n], dtype=np.float32))
                            for n, cid in enumerate(ids)
                        ],
                    )
                    row += len(ids)
                    cur.executemany(
                        f"INSERT INTO {self._s}.links(doc_id, kb, ordinal, kind, target, key, "
                        "line) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                        _link_rows(self.kb_id, doc_id, doc.path, doc.links),
                    )
            self._apply_stats(conn, stats)

    def _chunk_row(self, doc_id: int, chunk: Chunk, stats: _StatsDelta) -> tuple[Any, ...]:
        folded = tuple(
            lexical.fold(normalize(t)) for t in (chunk.heading, chunk.context, chunk.content)
        )
        ntok = sum(lexical.token_count(t) for t in folded)
        stats.add(folded, ntok, +1)
        return (
            self.kb_id,
            doc_id,
            chunk.ordinal,
            _pg_text(chunk.heading),
            _pg_text(json.dumps(list(chunk.heading_path), ensure_ascii=False)),
            chunk.level,
            _pg_text(chunk.context),
            _pg_text(chunk.content),
            chunk.token_count,
            chunk.byte_start,
            chunk.byte_end,
            chunk.line_start,
            chunk.line_end,
            *folded,
            ntok,
        )

    def _apply_stats(self, conn: psycopg.Connection[Any], stats: _StatsDelta) -> None:
        """Apply the batch's changes to the trigram document frequencies and the KB's row
        and token totals (sorted keys: concurrent writers of other KBs never deadlock)."""
        changed = sorted((t, d) for t, d in stats.df.items() if d)
        if changed:
            conn.execute(
                f"INSERT INTO {self._s}.trigram_df(kb, tri, df) "
                "SELECT %s, t, d FROM unnest(%s::text[], %s::int[]) AS u(t, d) ORDER BY t "
                "ON CONFLICT (kb, tri) DO UPDATE SET df = trigram_df.df + excluded.df",
                (self.kb_id, [t for t, _ in changed], [d for _, d in changed]),
            )
            if any(d < 0 for _, d in changed):
                conn.execute(
                    f"DELETE FROM {self._s}.trigram_df WHERE kb = %s AND df <= 0", (self.kb_id,)
                )
        if stats.nrow or stats.ntok:
            conn.execute(
                f"UPDATE {self._s}.kbs SET nrow = nrow + %s, ntok = ntok + %s WHERE id = %s",
                (stats.nrow, stats.ntok, self.kb_id),
            )

    def touch_documents(self, updates: Iterable[tuple[str, int, int]]) -> None:
        with self.transaction() as conn, conn.cursor() as cur:
            cur.executemany(
                f"UPDATE {self._s}.documents SET size = %s, mtime_ns = %s "
                "WHERE kb = %s AND path = %s",
                [(size, mtime, self.kb_id, path) for path, size, mtime in updates],
            )

    def delete_documents(self, paths: Iterable[str]) -> None:
        stats = _StatsDelta()
        with self.transaction() as conn:
            for path in paths:
                self._delete_path(conn, path, stats)
            self._apply_stats(conn, stats)

    def _delete_path(self, conn: psycopg.Connection[Any], path: str, stats: _StatsDelta) -> None:
        found = conn.execute(
            f"SELECT id FROM {self._s}.documents WHERE kb = %s AND path = %s",
            (self.kb_id, _pg_text(path)),
        ).fetchone()
        if found is None:
            return
        # The chunks' statistics are taken back from the folded text they held; vectors go
        # with the chunks, tags and links with the document (ON DELETE CASCADE).
        rows = conn.execute(
            f"DELETE FROM {self._s}.chunks WHERE doc_id = %s "
            "RETURNING heading_n, context_n, content_n, ntok",
            (found[0],),
        ).fetchall()
        for heading_n, context_n, content_n, ntok in rows:
            stats.add((heading_n, context_n, content_n), int(ntok), -1)
        conn.execute(f"DELETE FROM {self._s}.documents WHERE id = %s", (found[0],))

    # -- reading: the lexical leg ----------------------------------------------------------

    def fts_search(
        self,
        match_expr: str,
        weights: tuple[float, float, float],
        limit: int,
        allowed: frozenset[int] | None = None,
    ) -> list[tuple[int, float]]:
        """Ranked lexical candidates: (chunk id, bm25) best first, bm25 negative (smaller
        is better) and computed as FTS5's ``bm25(fts_chunks, *weights)`` computes it."""
        positives, negatives = self._phrases(match_expr)
        if not positives or limit <= 0 or (allowed is not None and not allowed):
            return []
        pos = [lexical.fold(p) for p in positives]
        neg = [lexical.fold(p) for p in negatives]
        any_pos = " OR ".join(f"{_TEXT} LIKE %s" for _ in pos)
        none_neg = " AND ".join("c.t NOT LIKE %s" for _ in neg) or "true"
        only = "AND c.id = ANY(%s)" if allowed is not None else ""
        sql = f"""
            WITH stats AS (
                SELECT nrow::float8 AS n, ntok::float8 / greatest(nrow, 1) AS avgdl
                FROM {self._s}.kbs WHERE id = %s),
            q AS (
                SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::bool[])
                    AS q(phrase, lik, rx, overlap)),
            cand AS MATERIALIZED (
                SELECT id, heading_n, context_n, content_n, ntok, {_TEXT} AS t
                FROM {self._s}.chunks WHERE kb = %s AND ({any_pos})),
            idf AS (
                SELECT q.*, greatest(ln((s.n - h.n + 0.5) / (h.n + 0.5)), 1e-6) AS idf
                FROM q CROSS JOIN stats s
                CROSS JOIN LATERAL (
                    SELECT count(*)::float8 AS n FROM cand WHERE cand.t LIKE q.lik) h)
            SELECT c.id, -sum(
                CASE WHEN f.f > 0
                THEN f.idf * (f.f * {lexical.K1 + 1}) /
                     (f.f + {lexical.K1} * (1 - {lexical.B} + {lexical.B} * c.ntok / s.avgdl))
                ELSE 0 END) AS score
            FROM cand c CROSS JOIN stats s
            CROSS JOIN LATERAL (
                SELECT idf.idf, CASE WHEN c.t LIKE idf.lik THEN
                    %s * {_count("c.heading_n")} + %s * {_count("c.context_n")}
                    + %s * {_count("c.content_n")}
                ELSE 0 END AS f
                FROM idf) f
            WHERE {none_neg} {only}
            GROUP BY c.id
            ORDER BY score, c.id
            LIMIT %s"""
        params: list[Any] = [
            self.kb_id,
            pos,
            [lexical.like_pattern(p) for p in pos],
            [lexical.overlap_regex(p) for p in pos],
            [lexical.self_overlapping(p) for p in pos],
            self.kb_id,
            *(lexical.like_pattern(p) for p in pos),
            *(float(w) for w in weights),
            *(lexical.like_pattern(p) for p in neg),
        ]
        if allowed is not None:
            params.append(sorted(allowed))
        params.append(limit)
        with self._conn() as conn:
            rows = conn.execute(sql, params).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]

    def fts_ids(self, expr: str) -> frozenset[int]:
        """Every chunk id an expression matches (the exclusion scan, ADR-0011)."""
        positives, negatives = self._phrases(expr)
        if not positives:
            return frozenset()
        any_pos = " OR ".join(f"{_TEXT} LIKE %s" for _ in positives)
        none_neg = "".join(f" AND {_TEXT} NOT LIKE %s" for _ in negatives)
        params = [
            self.kb_id,
            *(lexical.like_pattern(lexical.fold(p)) for p in positives),
            *(lexical.like_pattern(lexical.fold(p)) for p in negatives),
        ]
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT id FROM {self._s}.chunks WHERE kb = %s AND ({any_pos}){none_neg}", params
            ).fetchall()
        return frozenset(int(r[0]) for r in rows)

    def _phrases(self, expr: str) -> tuple[list[str], list[str]]:
        try:
            return lexical.parse_match(expr)
        except lexical.MatchSyntaxError as err:
            raise PostgresStoreError(
                f"the PostgreSQL index cannot run the lexical expression {expr!r}: {err}"
            ) from None

    def trigram_rows(self, trigrams: Iterable[str]) -> tuple[dict[str, int], int]:
        """(rows containing each trigram, rows in all), for the common-phrase rule."""
        wanted = list(dict.fromkeys(trigrams))
        with self._conn() as conn:
            found = dict(
                conn.execute(
                    f"SELECT tri, df FROM {self._s}.trigram_df WHERE kb = %s AND tri = ANY(%s)",
                    (self.kb_id, wanted),
                ).fetchall()
            )
            total = conn.execute(
                f"SELECT nrow FROM {self._s}.kbs WHERE id = %s", (self.kb_id,)
            ).fetchone()
        return {t: int(found.get(t, 0)) for t in wanted}, int(total[0]) if total else 0

    # -- reading: the vector leg and stored vectors ----------------------------------------

    def vector_search(
        self, vector: np.ndarray, k: int, allowed: frozenset[int] | None = None
    ) -> list[tuple[int, float]]:
        """Nearest chunks by L2 distance: (chunk id, distance) best first, ties by id.
        Unfiltered and widely filtered searches use the KB's HNSW index (``ef_search``
        from the settings, iterative scans for filters); a filter that allows few chunks
        is an exact scan of those."""
        bound = self.embedder_identity()
        if bound is None or k <= 0 or (allowed is not None and not allowed):
            return []
        dim = bound[1]
        query = np.asarray(vector, dtype=np.float32)
        with self._conn() as conn, conn.transaction():
            if allowed is not None and len(allowed) <= EXACT_KNN_MAX_ROWS:
                rows = conn.execute(
                    f"SELECT chunk_id, embedding <-> %s AS d FROM {self._s}.vectors "
                    "WHERE kb = %s AND chunk_id = ANY(%s) ORDER BY d, chunk_id LIMIT %s",
                    (query, self.kb_id, sorted(allowed), k),
                ).fetchall()
            else:
                ef = max(self.settings.ef_search, min(k, 1000))
                conn.execute(f"SET LOCAL hnsw.ef_search = {int(ef)}")
                only = ""
                params: list[Any] = [query]
                if allowed is not None:
                    conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
                    only = "AND chunk_id = ANY(%s)"
                    params.append(sorted(allowed))
                params.append(k)
                rows = conn.execute(
                    f"SELECT chunk_id, (embedding::vector({dim})) <-> %s AS d "
                    f"FROM {self._s}.vectors WHERE kb = {self.kb_id} {only} "
                    "ORDER BY d LIMIT %s",
                    params,
                ).fetchall()
        return sorted(((int(r[0]), float(r[1])) for r in rows), key=lambda r: (r[1], r[0]))

    def embeddings(self, chunk_ids: Sequence[int]) -> dict[int, np.ndarray]:
        if not chunk_ids:
            return {}
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT chunk_id, embedding FROM {self._s}.vectors "
                "WHERE kb = %s AND chunk_id = ANY(%s)",
                (self.kb_id, list(chunk_ids)),
            ).fetchall()
        return {int(r[0]): _as_array(r[1]) for r in rows}

    # -- reading: rows ---------------------------------------------------------------------

    def chunk_rows(self, chunk_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        if not chunk_ids:
            return {}
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT c.id, c.doc_id, d.path, d.title, d.tags, c.heading, c.heading_path, "
                "c.level, c.content, c.token_count, c.line_start, c.line_end, c.byte_start, "
                f"c.byte_end, c.ordinal, c.context FROM {self._s}.chunks c "
                f"JOIN {self._s}.documents d ON d.id = c.doc_id "
                "WHERE c.kb = %s AND c.id = ANY(%s)",
                (self.kb_id, list(chunk_ids)),
            ).fetchall()
        out: dict[int, dict[str, Any]] = {}
        for r in rows:
            item = dict(zip(_CHUNK_KEYS, r, strict=True))
            item["tags"] = tuple(json.loads(item["tags"]))
            item["heading_path"] = tuple(json.loads(item["heading_path"]))
            for key in ("chunk_id", "doc_id", "byte_start", "byte_end"):
                item[key] = int(item[key])
            out[int(r[0])] = item
        return out

    def document_chunks(self, doc_id: int) -> list[dict[str, Any]]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT id, ordinal, heading, level, content, token_count, line_start, "
                f"line_end, byte_start, byte_end FROM {self._s}.chunks "
                "WHERE kb = %s AND doc_id = %s ORDER BY ordinal",
                (self.kb_id, doc_id),
            ).fetchall()
        keys = [
            "chunk_id",
            "ordinal",
            "heading",
            "level",
            "content",
            "token_count",
            "line_start",
            "line_end",
            "byte_start",
            "byte_end",
        ]
        out = [dict(zip(keys, r, strict=True)) for r in rows]
        for item in out:
            for key in ("chunk_id", "byte_start", "byte_end"):
                item[key] = int(item[key])
        return out

    def documents(self) -> list[dict[str, Any]]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT d.id, d.path, d.title, d.tags, d.indexed_at, d.size, d.mtime_ns, "
                f"(SELECT count(*) FROM {self._s}.chunks c WHERE c.doc_id = d.id) "
                f"FROM {self._s}.documents d WHERE d.kb = %s ORDER BY d.path",
                (self.kb_id,),
            ).fetchall()
        keys = ["doc_id", "path", "title", "tags", "indexed_at", "size", "mtime_ns", "chunks"]
        out = []
        for r in rows:
            item = dict(zip(keys, r, strict=True))
            item["tags"] = tuple(json.loads(item["tags"]))
            for key in ("doc_id", "size", "mtime_ns", "chunks"):
                item[key] = int(item[key])
            out.append(item)
        return out

    def file_states(self, paths: Sequence[str]) -> dict[str, tuple[int, int]]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT path, size, mtime_ns FROM {self._s}.documents "
                "WHERE kb = %s AND path = ANY(%s)",
                (self.kb_id, list(paths)),
            ).fetchall()
        return {str(r[0]): (int(r[1]), int(r[2])) for r in rows}

    def chunk_ids_for_docs(self, doc_ids: Iterable[int]) -> frozenset[int]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT id FROM {self._s}.chunks WHERE kb = %s AND doc_id = ANY(%s)",
                (self.kb_id, list(doc_ids)),
            ).fetchall()
        return frozenset(int(r[0]) for r in rows)

    def doc_ids_with_tags(self, tags: Sequence[str]) -> frozenset[int]:
        """Documents carrying every one of ``tags`` (case-insensitive, as SQLite's NOCASE)."""
        if not tags:
            return frozenset()
        wanted = sorted({_ascii_lower(t) for t in tags})
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT doc_id FROM {self._s}.doc_tags WHERE kb = %s AND tag = ANY(%s) "
                "GROUP BY doc_id HAVING count(*) = %s",
                (self.kb_id, wanted, len(wanted)),
            ).fetchall()
        return frozenset(int(r[0]) for r in rows)

    def counts(self) -> dict[str, int]:
        with self._conn() as conn:
            row = conn.execute(
                f"SELECT (SELECT count(*) FROM {self._s}.documents WHERE kb = %s), "
                f"(SELECT count(*) FROM {self._s}.chunks WHERE kb = %s)",
                (self.kb_id, self.kb_id),
            ).fetchone()
        assert row is not None
        return {"documents": int(row[0]), "chunks": int(row[1])}

    def lexical_stats(self) -> dict[str, Any]:
        """The bm25 statistics as stored (for tests and ``doctor``): rows, tokens and the
        trigram document frequencies."""
        with self._conn() as conn:
            kb = conn.execute(
                f"SELECT nrow, ntok FROM {self._s}.kbs WHERE id = %s", (self.kb_id,)
            ).fetchone()
            df = conn.execute(
                f"SELECT tri, df FROM {self._s}.trigram_df WHERE kb = %s", (self.kb_id,)
            ).fetchall()
        assert kb is not None
        return {"nrow": int(kb[0]), "ntok": int(kb[1]), "df": {str(t): int(d) for t, d in df}}


_CHUNK_KEYS = [
    "chunk_id",
    "doc_id",
    "path",
    "title",
    "tags",
    "heading",
    "heading_path",
    "level",
    "content",
    "token_count",
    "line_start",
    "line_end",
    "byte_start",
    "byte_end",
    "ordinal",
    "context",
]

_INSERT_CHUNK = (
    "INSERT INTO {s}.chunks(kb, doc_id, ordinal, heading, heading_path, level, context, "
    "content, token_count, byte_start, byte_end, line_start, line_end, heading_n, context_n, "
    "content_n, ntok) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
    "%s) RETURNING id"
)


def _count(column: str) -> str:
    """SQL for the occurrences of ``idf.phrase`` in ``column``, overlaps included: the
    arithmetic of ``replace`` when occurrences cannot overlap, a lookahead regex when they
    can (lexical.self_overlapping)."""
    return (
        f"(CASE WHEN idf.overlap THEN regexp_count({column}, idf.rx) "
        f"ELSE (length({column}) - length(replace({column}, idf.phrase, ''))) "
        "/ length(idf.phrase) END)"
    )


class _StatsDelta:
    """Changes to the bm25 statistics within one write transaction."""

    def __init__(self) -> None:
        self.df: Counter[str] = Counter()
        self.nrow = 0
        self.ntok = 0

    def add(self, folded: Sequence[str], ntok: int, sign: int) -> None:
        for tri in lexical.trigrams(folded):
            self.df[tri] += sign
        self.nrow += sign
        self.ntok += sign * ntok


def _link_rows(
    kb: int, doc_id: int, path: str, raw: Sequence[Any]
) -> list[tuple[int, int, int, str, str, str, int]]:
    """The ``links`` rows of a document, keyed as groove_core.links keys them."""
    from groove_core import links

    rows = []
    for ordinal, link in enumerate(raw):
        key = links.link_key(path, link.kind, link.target)
        rows.append(
            (doc_id, kb, ordinal, link.kind, _pg_text(link.target), _pg_text(key), link.line)
        )
    return rows


def _check_server(conn: psycopg.Connection[Any], settings: PostgresSettings) -> None:
    """Refuse, naming the problem, a server or database the index cannot work on."""
    version = conn.info.server_version
    if version < MIN_SERVER_VERSION:
        raise PostgresStoreError(
            f"the PostgreSQL server is version {version // 10000}.{version % 10000}; groove "
            f"needs {MIN_SERVER_VERSION // 10000} or newer"
        )
    row = conn.execute(
        "SELECT pg_encoding_to_char(encoding), datcollate, datctype, datlocprovider::text, "
        "coalesce(datlocale, '') FROM pg_database WHERE datname = current_database()"
        if version >= 170000
        else "SELECT pg_encoding_to_char(encoding), datcollate, datctype, datlocprovider::text, "
        "'' FROM pg_database WHERE datname = current_database()"
    ).fetchone()
    assert row is not None
    encoding, collate, ctype, provider, locale = (str(v) for v in row)
    if encoding != "UTF8":
        raise PostgresStoreError(
            f"the database {conn.info.dbname!r} has encoding {encoding}; groove needs UTF8 "
            "(CREATE DATABASE ... ENCODING 'UTF8' with a UTF-8 locale, e.g. C.UTF-8)"
        )
    available = {
        str(r[0]): r[1]
        for r in conn.execute(
            "SELECT name, installed_version FROM pg_available_extensions "
            "WHERE name IN ('vector', 'pg_trgm')"
        ).fetchall()
    }
    hints = {
        "vector": "pgvector (Debian: postgresql-17-pgvector; managed services: enable 'vector')",
        "pg_trgm": "pg_trgm (part of PostgreSQL's contrib modules)",
    }
    for name in ("vector", "pg_trgm"):
        if name not in available:
            raise PostgresStoreError(
                f"the PostgreSQL server has no extension {name!r}: install {hints[name]}"
            )
        if available[name] is None:
            try:
                with conn.transaction():
                    conn.execute(f"CREATE EXTENSION IF NOT EXISTS {name}")
            except Exception as err:
                raise PostgresStoreError(
                    f"the extension {name!r} is not enabled in database {conn.info.dbname!r} "
                    f"and groove cannot enable it ({scrub(str(err).strip(), settings)}): ask "
                    f"an administrator to run CREATE EXTENSION {name}"
                ) from None
    probe = conn.execute("SELECT show_trgm(%s)", (TRIGRAM_PROBE,)).fetchone()
    conn.commit()
    if not probe or not probe[0]:
        shown = locale or ctype
        raise PostgresStoreError(
            f"the database {conn.info.dbname!r} uses the locale {shown!r} (provider "
            f"{_PROVIDERS.get(provider, provider)}, LC_COLLATE {collate!r}, LC_CTYPE {ctype!r}), "
            "under which pg_trgm "
            "extracts no trigrams from Japanese or other non-ASCII text; create it with a "
            "UTF-8 locale, e.g. CREATE DATABASE ... TEMPLATE template0 ENCODING 'UTF8' "
            "LOCALE_PROVIDER builtin BUILTIN_LOCALE 'C.UTF-8' (PostgreSQL 17+) or "
            "LC_CTYPE 'C.UTF-8'"
        )


_PROVIDERS = {"b": "builtin", "c": "libc", "i": "icu"}


def _ensure_schema(
    conn: psycopg.Connection[Any], settings: PostgresSettings, kb: str, *, create: bool, label: str
) -> int:
    """Create (when ``create``) or check the schema and the KB's row; the KB's id."""
    s = settings.db_schema
    with conn.transaction():
        exists = conn.execute("SELECT to_regclass(%s)", (f"{s}.info",)).fetchone()
        if exists is None or exists[0] is None:
            if not create:
                raise PostgresStoreError(
                    f"no index {label} in this database: run 'groove index' on the knowledge "
                    "base first"
                )
            conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (LOCK_SCHEMA,))
            for statement in _schema_sql(s):
                conn.execute(statement)
            conn.execute(
                f"INSERT INTO {s}.info(key, value) VALUES ('schema_version', %s) "
                "ON CONFLICT (key) DO NOTHING",
                (str(SCHEMA_VERSION),),
            )
        found = conn.execute(f"SELECT value FROM {s}.info WHERE key = 'schema_version'").fetchone()
        version = int(found[0]) if found else 0
        if version != SCHEMA_VERSION:
            newer = version > SCHEMA_VERSION
            raise PostgresStoreError(
                f"the index schema {s!r} has version {version}, "
                + (
                    f"newer than this groove-postgres ({SCHEMA_VERSION}): upgrade it"
                    if newer
                    else f"which this groove-postgres ({SCHEMA_VERSION}) cannot migrate"
                )
            )
        row = conn.execute(f"SELECT id FROM {s}.kbs WHERE name = %s", (kb,)).fetchone()
        if row is None:
            if not create:
                raise PostgresStoreError(
                    f"no index {label} in this database: run 'groove index' on the knowledge "
                    "base first"
                )
            row = conn.execute(
                f"INSERT INTO {s}.kbs(name) VALUES (%s) ON CONFLICT (name) "
                "DO UPDATE SET name = excluded.name RETURNING id",
                (kb,),
            ).fetchone()
        assert row is not None
        return int(row[0])
