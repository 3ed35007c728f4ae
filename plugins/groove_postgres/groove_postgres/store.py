"""The index on PostgreSQL: schema, connect-time checks, :class:`Database` and
:class:`PostgresStore`.

The store satisfies the core's ``IndexStore`` protocol (groove_core/storage.py) with the
same answers as the SQLite store (``groove_core.sqlite.store.Store``); what differs:

* Several knowledge bases share one database: every table carries ``kb`` (a row of
  ``kbs``), every statement is scoped to this store's KB. A KB's name may have a ``live``
  row (what searches read), a ``staging`` one (a rebuild or re-embed in progress) and
  ``retired`` ones (replaced, being deleted): a rebuild swaps staging for live in one
  transaction (``groove_postgres.backend``).
* The lexical leg is a pg_trgm GIN index plus bm25 statistics kept by groove
  (``groove_postgres.lexical``); the word leg per-chunk term frequencies (``word_tf``
  postings) and a GIN index over each chunk's tokens, with its own statistics
  (``groove_postgres.wordleg``); the vector leg is pgvector HNSW (L2,
  as sqlite-vec), one partial index per KB because each KB has its own embedder dimension.
  The two lexical legs' rows are columns of the chunk row, written here with each chunk;
  their queries live in their leg indexes (``groove_postgres.legs``), which the legs
  reach through :meth:`PostgresStore.leg_index`.
* Every enabled leg's index (``groove_core.leg_index``) is bound to the store's
  :class:`~groove_postgres.legs.PostgresSite`; one with tables of its own is handed every
  document written or deleted in the document's transaction, and filled from the KB's
  chunks when it was not filled under its version (meta ``leg_index:<name>``, per KB).
* Writes take a transaction-scoped advisory lock keyed by the KB; an index run takes a
  session-scoped one keyed by the KB's name (:meth:`Database.run_lock`), so two runs queue.
* Reads and writes borrow connections from a psycopg pool that every store of one
  :class:`Database` shares, so searches on several threads run concurrently.
* Every psycopg error leaves a store as a ``StoreError`` told apart by
  ``groove_postgres.errors`` (damage, environment, neither), its message without secrets.
"""

from __future__ import annotations

import atexit
import json
import logging
import select
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from groove_core import links as core_links
from groove_core import words
from groove_core.index_report import CHUNKING_KEY, EARLIER_CHUNKING
from groove_core.leg_index import META_PREFIX, BoundIndex, IndexedChunk, LegIndex, meta_key
from groove_core.query import normalize
from groove_core.rows import (
    Allowed,
    Backlink,
    ChunkRow,
    DocumentChunkRow,
    DocumentRow,
    Links,
    Ranked,
    chunk_row,
    document_chunk_row,
    sections_text,
)
from groove_core.storage import (
    INCOMPLETE_KEY,
    LAST_RUN_KEY,
    DocState,
    NewDocument,
    StoreError,
    check_same_embedder,
    incomplete_note,
)
from groove_postgres import lexical, wordleg
from groove_postgres.errors import classify, pg_errors
from groove_postgres.legs import PostgresSite, builtin_versions, default_indexes, rows_in_chunks
from groove_postgres.lexical import SURFACE_MARK_SQL, TEXT_SQL
from groove_postgres.settings import PostgresSettings, SettingsError, connect_kwargs, scrub

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

    from groove_core.chunking import Chunk
    from groove_core.storage import IndexStore

__all__ = [
    "MIN_SERVER_VERSION",
    "SCHEMA_VERSION",
    "Database",
    "PostgresStore",
    "PostgresStoreError",
]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
#: regexp_count (overlapping phrase counts) is PostgreSQL 15+; pgvector 0.8 needs 13+.
MIN_SERVER_VERSION = 150000
#: Text whose trigrams a UTF-8 database with a usable character classification yields.
TRIGRAM_PROBE = "日本語の文章"
#: Advisory lock namespaces (the first key of pg_advisory_lock(int, int)); the second
#: key is the KB's id (writes), a hash of its name (runs) or 0/1 (schema, extensions).
LOCK_SCHEMA = 0x67727630  # 'grv0'
LOCK_RUN = 0x67727631
LOCK_WRITE = 0x67727632
#: The second key of the lock a leg index's fill holds (in the namespace LOCK_SCHEMA) while
#: it creates the index's tables: two KBs filling one leg's index do not race to create them.
LOCK_LEG_TABLES = 3
#: Chunks read per step when a leg index is filled from the chunks.
FILL_BATCH = 1_000
#: Up to this many allowed chunks, a filtered KNN is an exact scan of just those rows.
EXACT_KNN_MAX_ROWS = 20_000
#: Candidates fetched beyond k, so that a near-tie at the k-th place is ranked as SQLite
#: ranks it (PostgreSQL's distances are doubles, sqlite-vec's float32).
KNN_MARGIN = 32
#: The meta key of a build that keeps its document frequencies in memory until its end
#: (``PostgresStore.defer_statistics``): while it is set, ``trigram_df`` and ``word_df``
#: lack some of the KB's rows, and the next run recounts them before anything else.
STATS_PENDING_KEY = "df_pending"
#: The meta key of the word rules (``groove_core.words.SEGMENTATION``) the KB's word columns
#: were written under: a KB written under other rules has them rewritten on open
#: (:meth:`PostgresStore.check_word_rules`), as SQLite re-fills its word table.
WORD_RULES_KEY = "word_rules"
#: The version of the word leg's postings (``word_tf``). It is recorded with the word rules
#: (:func:`word_rules`), so that a KB written by a groove-postgres without postings, or
#: written again by one after this one filled them, has them refilled on open. Version 2
#: adds the trigram leg's surface-word postings and their vocabulary (``surface_terms``).
WORD_TF_VERSION = "2"
#: The meta key present while some of the KB's chunks may lack a vector (ADR-0015): set in
#: the transaction that writes chunks without vectors, removed by the one that stores the
#: last of them. A chunk without a vector is waiting for one only while it is set; without
#: it, ``doctor`` reports one as lost. (A meta key, not a table: the schema is unchanged.)
VECTORS_PENDING_KEY = "vectors_pending"
#: The states of a KB's row in ``kbs``.
LIVE, STAGING, RETIRED = "live", "staging", "retired"
#: A search waits for a pooled connection in slices this long (seconds); between them it
#: looks whether the server is reachable at all, so that a server that is gone is reported
#: at once instead of after the pool's whole timeout.
POOL_WAIT_SLICE = 0.25
#: How long (seconds) the pool retries a lost connection in the background before it
#: leaves reconnecting to the next request. Short: psycopg_pool's retries back off
#: exponentially, and a long chain would keep a restarted server unused for minutes.
RECONNECT_TIMEOUT = 5.0


class PostgresStoreError(StoreError):
    """The PostgreSQL index cannot be used as it is; the message says why (never a password)."""


def _documents_by_path_sql(s: str) -> str:
    """The documents by path in code point order (the order ``documents()`` pages in; the
    table's unique index is in the database's collation, which may be another)."""
    return f'CREATE INDEX IF NOT EXISTS documents_by_path ON {s}.documents (kb, path COLLATE "C")'


def _schema_sql(s: str, toast_target: int = 8160) -> list[str]:
    """The DDL, in the schema ``s`` (validated by the settings model as an identifier);
    ``toast_target``: the server's largest whole row (its page size less the headers)."""
    return [
        f"CREATE SCHEMA IF NOT EXISTS {s}",
        f"CREATE TABLE IF NOT EXISTS {s}.info (key text PRIMARY KEY, value text NOT NULL)",
        f"""CREATE TABLE IF NOT EXISTS {s}.kbs (
            id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            name text NOT NULL,
            state text NOT NULL DEFAULT 'live' CHECK (state IN ('live', 'staging', 'retired')),
            nrow bigint NOT NULL DEFAULT 0,
            ntok bigint NOT NULL DEFAULT 0,
            wtok bigint NOT NULL DEFAULT 0)""",
        f"CREATE UNIQUE INDEX IF NOT EXISTS kbs_live ON {s}.kbs(name) WHERE state = 'live'",
        f"CREATE UNIQUE INDEX IF NOT EXISTS kbs_staging ON {s}.kbs(name) WHERE state = 'staging'",
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
        _documents_by_path_sql(s),
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
            sections text NOT NULL DEFAULT '',
            heading_n text NOT NULL,
            context_n text NOT NULL,
            content_n text NOT NULL,
            ntok integer NOT NULL,
            heading_w text NOT NULL,
            context_w text NOT NULL,
            content_w text NOT NULL,
            wterms text[] NOT NULL,
            wtok integer NOT NULL) WITH (toast_tuple_target = {int(toast_target)})""",
        # What the lexical legs read stays uncompressed, and in the row up to a page: each
        # matching row is read (and was decompressed, once per reference) to check and
        # count a phrase. The displayed columns may still be compressed.
        f"ALTER TABLE {s}.chunks "
        + ", ".join(f"ALTER COLUMN {c} SET STORAGE EXTERNAL" for c in _LEXICAL_COLUMNS),
        f"CREATE INDEX IF NOT EXISTS chunks_doc ON {s}.chunks(doc_id, ordinal)",
        f"CREATE INDEX IF NOT EXISTS chunks_kb ON {s}.chunks(kb, id)",
        f"CREATE INDEX IF NOT EXISTS chunks_trgm ON {s}.chunks "
        f"USING gin (({TEXT_SQL}) gin_trgm_ops)",
        f"CREATE INDEX IF NOT EXISTS chunks_words ON {s}.chunks USING gin (wterms)",
        f"""CREATE TABLE IF NOT EXISTS {s}.vectors (
            chunk_id bigint PRIMARY KEY REFERENCES {s}.chunks(id) ON DELETE CASCADE,
            kb integer NOT NULL,
            embedding vector NOT NULL)""",
        f"""CREATE TABLE IF NOT EXISTS {s}.trigram_df (
            kb integer NOT NULL REFERENCES {s}.kbs(id) ON DELETE CASCADE,
            tri text NOT NULL,
            df integer NOT NULL,
            PRIMARY KEY (kb, tri))""",
        f"""CREATE TABLE IF NOT EXISTS {s}.word_df (
            kb integer NOT NULL REFERENCES {s}.kbs(id) ON DELETE CASCADE,
            term text NOT NULL,
            df integer NOT NULL,
            PRIMARY KEY (kb, term))""",
        _word_tf_sql(s),
        *_surface_terms_sql(s),
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


def _word_tf_sql(s: str) -> str:
    """The word leg's postings: per chunk and distinct token, its count in each column
    and the chunk's length in tokens, so that a one-token term's bm25 inputs are read
    from the index alone (``INCLUDE``: an index-only scan once autovacuum has marked the
    pages visible). No foreign keys: a check per row would cost as much as the row; the
    chunk's deletion and the KB's take their postings with them explicitly."""
    return f"""CREATE TABLE IF NOT EXISTS {s}.word_tf (
            kb integer NOT NULL,
            term text NOT NULL,
            chunk_id bigint NOT NULL,
            h integer NOT NULL,
            x integer NOT NULL,
            c integer NOT NULL,
            len integer NOT NULL,
            PRIMARY KEY (kb, term, chunk_id) INCLUDE (h, x, c, len))"""


def _surface_terms_sql(s: str) -> list[str]:
    """The distinct surface words of each KB (groove_postgres.lexical), with the pg_trgm
    index that finds those containing a phrase; a word leaves with its last chunk."""
    return [
        f"""CREATE TABLE IF NOT EXISTS {s}.surface_terms (
            kb integer NOT NULL REFERENCES {s}.kbs(id) ON DELETE CASCADE,
            term text NOT NULL,
            PRIMARY KEY (kb, term))""",
        f"CREATE INDEX IF NOT EXISTS surface_terms_trgm ON {s}.surface_terms "
        "USING gin (term gin_trgm_ops)",
    ]


#: The columns the lexical legs read in every row they match.
_LEXICAL_COLUMNS = (
    "heading_n",
    "context_n",
    "content_n",
    "heading_w",
    "context_w",
    "content_w",
    "wterms",
)

#: The lexical legs' GIN indexes (their pending lists are merged after each run).
_GIN_INDEXES = ("chunks_trgm", "chunks_words", "surface_terms_trgm")


def word_rules() -> str:
    """What :data:`WORD_RULES_KEY` records for a KB written by this code: the word rules and
    the postings' version. A groove-postgres without postings compares the value with the
    bare rules, finds it differs and rewrites the word columns (recording the bare rules),
    which in turn tells this code that the postings may be stale."""
    return f"{words.SEGMENTATION}+tf{WORD_TF_VERSION}"


def _indexed_sql(s: str) -> str:
    """Reads chunks as leg indexes receive them (``IndexedChunk``), as the SQLite store
    does (a chunk without its document would come with an empty path and title; here the
    foreign key keeps there from being one)."""
    return (
        "SELECT c.id, c.doc_id, coalesce(d.path, ''), coalesce(d.title, ''), c.heading, "
        f"c.context, c.content FROM {s}.chunks c LEFT JOIN {s}.documents d ON d.id = c.doc_id "
    )


def _indexed(rows: Iterable[Sequence[Any]]) -> list[IndexedChunk]:
    return [
        IndexedChunk(int(r[0]), int(r[1]), str(r[2]), str(r[3]), str(r[4]), str(r[5]), str(r[6]))
        for r in rows
    ]


def _cannot_write(err: BaseException | None) -> bool:
    """Whether a psycopg error says this session may not write (privileges, a read-only
    transaction or server)."""
    from psycopg import errors

    return isinstance(err, (errors.InsufficientPrivilege, errors.ReadOnlySqlTransaction))


def _ascii_lower(tag: str) -> str:
    """SQLite's NOCASE folds ASCII letters only; tags keep that rule here."""
    return tag.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _as_array(value: Any) -> np.ndarray:
    """A stored vector as float32 (pgvector's loader gives a Vector or an ndarray)."""
    to_numpy = getattr(value, "to_numpy", None)
    return np.asarray(to_numpy() if to_numpy else value, dtype=np.float32)


def _l2_float32(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    """L2 distances as sqlite-vec computes them: float32 squares summed one dimension
    after the other (``cumsum`` is sequential), then the square root, in float32."""
    diff = (vectors - query).astype(np.float32)
    squared = np.cumsum(diff * diff, axis=1, dtype=np.float32)[:, -1]
    return np.sqrt(squared).astype(np.float32).astype(np.float64)


def _pg_text(text: str) -> str:
    """PostgreSQL text cannot hold NUL: it is stored as U+FFFD."""
    return text.replace("\x00", "\ufffd")


def _tuple(text: str) -> tuple[str, ...]:
    return tuple(str(v) for v in json.loads(text))


# -- the database: checks, schema, pool, locks ---------------------------------------------------


class Database:
    """One PostgreSQL database as groove uses it with one set of settings: checked and
    given groove's schema on first use, one connection pool shared by every store opened
    on it (a store per thread), and the advisory locks of index runs."""

    def __init__(self, settings: PostgresSettings, label: str) -> None:
        self.settings = settings
        self.label = label
        self.s = settings.db_schema
        self._lock = threading.Lock()
        self._pool: ConnectionPool[Any] | None = None
        self._reach = _Reachability()
        self._checked = False
        self._closed = False
        atexit.register(_close_at_exit, weakref.ref(self))

    def error(self, err: BaseException, doing: str, outcome: str = "") -> StoreError:
        return classify(err, self.settings, self.label, doing, outcome)

    def _params(self) -> dict[str, Any]:
        try:
            return connect_kwargs(self.settings)
        except SettingsError as err:
            raise PostgresStoreError(str(err)) from None

    @contextmanager
    def direct(self, *, autocommit: bool = False) -> Iterator[psycopg.Connection[Any]]:
        """A connection of its own, outside the pool (checks, the run lock); psycopg errors
        leave it classified."""
        import psycopg

        params = self._params()
        try:
            with psycopg.connect(
                params["conninfo"], autocommit=autocommit, **params["kwargs"]
            ) as conn:
                yield conn
        except pg_errors() as err:
            raise self.error(err, "connecting to") from None

    def check(self) -> None:
        """The server, database, extensions and locale checks, once per Database."""
        if self._checked:
            return
        with self.direct() as conn:
            _check_server(conn, self.settings)
        self._checked = True

    def schema_exists(self, conn: psycopg.Connection[Any]) -> bool:
        row = conn.execute("SELECT to_regclass(%s)", (f"{self.s}.info",)).fetchone()
        return row is not None and row[0] is not None

    def ensure_schema(self) -> None:
        """Create groove's schema when missing; refuse one of another version."""
        self.check()
        with self.direct() as conn, conn.transaction():
            if not self.schema_exists(conn):
                conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (LOCK_SCHEMA,))
                # The largest row kept whole in its page: 8160 with the usual 8 kB pages.
                row = conn.execute("SHOW block_size").fetchone()
                target = (int(row[0]) if row else 8192) - 32
                for statement in _schema_sql(self.s, target):
                    conn.execute(statement)
                conn.execute(
                    f"INSERT INTO {self.s}.info(key, value) VALUES ('schema_version', %s) "
                    "ON CONFLICT (key) DO NOTHING",
                    (str(SCHEMA_VERSION),),
                )
            self._check_version(conn)

    def _check_version(self, conn: psycopg.Connection[Any]) -> None:
        found = conn.execute(
            f"SELECT value FROM {self.s}.info WHERE key = 'schema_version'"
        ).fetchone()
        version = int(found[0]) if found else 0
        if version != SCHEMA_VERSION:
            newer = version > SCHEMA_VERSION
            raise PostgresStoreError(
                f"the index schema {self.s!r} has version {version}, "
                + (
                    f"newer than this groove-postgres ({SCHEMA_VERSION}): upgrade it"
                    if newer
                    else f"which this groove-postgres ({SCHEMA_VERSION}) cannot migrate"
                )
            )

    def _add_tables(self, conn: psycopg.Connection[Any]) -> None:
        """Create the tables and indexes a schema of this version made by an earlier
        groove-postgres lacks (``word_tf``, ``surface_terms``: each KB fills its own on
        open, ``check_word_rules``; ``documents_by_path``) and the chunks' ``sections``
        column (empty in chunks written before it: their first heading names them)."""
        missing = [
            sql
            for table, sql in (
                ("word_tf", [_word_tf_sql(self.s)]),
                ("surface_terms", _surface_terms_sql(self.s)),
                ("documents_by_path", [_documents_by_path_sql(self.s)]),
            )
            if conn.execute("SELECT to_regclass(%s)", (f"{self.s}.{table}",)).fetchone() == (None,)
        ]
        has_sections = conn.execute(
            "SELECT 1 FROM information_schema.columns WHERE table_schema = %s "
            "AND table_name = 'chunks' AND column_name = 'sections'",
            (self.s,),
        ).fetchone()
        if has_sections is None:
            # chunks cut by an earlier groove-postgres say so (``chunking_note``)
            missing.append(
                [
                    f"ALTER TABLE {self.s}.chunks ADD COLUMN IF NOT EXISTS sections text "
                    "NOT NULL DEFAULT ''",
                    f"INSERT INTO {self.s}.meta(kb, key, value) SELECT DISTINCT kb, "
                    f"'{CHUNKING_KEY}', '{EARLIER_CHUNKING}' FROM {self.s}.chunks "
                    "ON CONFLICT (kb, key) DO NOTHING",
                ]
            )
        if not missing:
            return
        conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (LOCK_SCHEMA,))
        for statement in chain.from_iterable(missing):
            conn.execute(statement)

    def kb_id(self, name: str, state: str = LIVE, *, create: bool = False) -> int | None:
        """The id of KB ``name``'s row in ``state``; with ``create`` made (with the schema)
        when missing, else None when there is none."""
        if create:
            self.ensure_schema()
        else:
            self.check()
        with self.direct() as conn, conn.transaction():
            if not self.schema_exists(conn):
                return None
            self._check_version(conn)
            self._add_tables(conn)
            row = conn.execute(
                f"SELECT id FROM {self.s}.kbs WHERE name = %s AND state = %s", (name, state)
            ).fetchone()
            if row is None and create:
                conn.execute("SELECT pg_advisory_xact_lock(%s, 2)", (LOCK_SCHEMA,))
                row = conn.execute(
                    f"SELECT id FROM {self.s}.kbs WHERE name = %s AND state = %s", (name, state)
                ).fetchone()
                if row is None:
                    row = conn.execute(
                        f"INSERT INTO {self.s}.kbs(name, state) VALUES (%s, %s) RETURNING id",
                        (name, state),
                    ).fetchone()
                    assert row is not None
                    # A new KB is written under this process's rules from its first row.
                    conn.execute(
                        f"INSERT INTO {self.s}.meta(kb, key, value) VALUES (%s, %s, %s)",
                        (int(row[0]), WORD_RULES_KEY, word_rules()),
                    )
        return None if row is None else int(row[0])

    @property
    def pool(self) -> ConnectionPool[Any]:
        """The shared pool, opened on first use (after the checks)."""
        with self._lock:
            if self._pool is None:
                if self._closed:
                    raise PostgresStoreError(f"the connections to {self.label} were closed")
                self.check()
                self._pool = self._open_pool()
            return self._pool

    def _open_pool(self) -> ConnectionPool[Any]:
        from psycopg_pool import ConnectionPool

        params = self._params()

        def configure(conn: psycopg.Connection[Any]) -> None:
            from pgvector.psycopg import register_vector

            register_vector(conn)
            # Searches are short queries that run concurrently on the pool: parallel
            # workers (a Gather per GIN scan) cost more CPU than they save (~40% more per
            # search at 10k chunks, docs/benchmarks.md, issue #17).
            conn.execute("SET max_parallel_workers_per_gather = 0")
            conn.commit()

        pool: ConnectionPool[Any] = ConnectionPool(
            params["conninfo"],
            kwargs=params["kwargs"],
            min_size=self.settings.pool_min,
            max_size=self.settings.pool_max,
            configure=configure,
            connection_class=_watched_connection(self._reach),
            check=_check_idle,
            open=False,
            timeout=float(max(self.settings.connect_timeout, 30)),
            reconnect_timeout=RECONNECT_TIMEOUT,
            name="groove",
        )
        try:
            pool.open(wait=self.settings.pool_min > 0, timeout=float(self.settings.connect_timeout))
        except Exception as err:
            pool.close()
            raise PostgresStoreError(
                f"opening the connection pool of {self.label} failed: "
                f"{scrub(str(err), self.settings)}"
            ) from None
        return pool

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection of the pool for the block (committed or rolled back at its end,
        then returned), as ``pool.connection()``, except when the server cannot be reached:
        then the driver's error comes after one wait slice and one connection attempt,
        where the pool alone would keep the request waiting its whole timeout for a
        connection that cannot come."""
        pool = self.pool
        conn = self._getconn(pool)
        try:
            with conn:
                yield conn
        finally:
            pool.putconn(conn)

    def _getconn(self, pool: ConnectionPool[Any]) -> psycopg.Connection[Any]:
        from psycopg_pool import PoolTimeout

        deadline = time.monotonic() + pool.timeout
        while True:
            left = deadline - time.monotonic()
            try:
                conn: psycopg.Connection[Any] = pool.getconn(
                    timeout=max(min(POOL_WAIT_SLICE, left), 0.001)
                )
                return conn
            except PoolTimeout:
                if left <= POOL_WAIT_SLICE:
                    raise PoolTimeout(
                        f"no connection of the pool came free in {pool.timeout:.0f} s"
                    ) from None
            if self._reach.failing():
                # The pool's last attempt to connect failed: ask the server afresh, so
                # that a server back since is waited for, and one still gone reported.
                self._probe()

    def _probe(self) -> None:
        """Connect once outside the pool; raise the driver's error when that fails."""
        import psycopg

        params = self._params()
        try:
            psycopg.connect(params["conninfo"], **params["kwargs"]).close()
        except psycopg.Error as err:
            self._reach.failed()
            raise psycopg.OperationalError(str(err)) from None
        self._reach.succeeded()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    # -- index-run locks ------------------------------------------------------------------

    @contextmanager
    def run_lock(self, name: str, *, wait: bool = True) -> Iterator[bool]:
        """Hold KB ``name``'s index-run lock (a session advisory lock on a connection of
        its own, released with it even when the process is killed) for the block; two runs
        of one KB queue here, runs of other KBs do not. With ``wait=False`` yields False at
        once when another run holds it."""
        key = f"{self.s}/{name}"
        with self.direct(autocommit=True) as conn:
            if wait:
                conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (LOCK_RUN, key))
                got = True
            else:
                row = conn.execute(
                    "SELECT pg_try_advisory_lock(%s, hashtext(%s))", (LOCK_RUN, key)
                ).fetchone()
                got = bool(row and row[0])
            yield got  # the lock goes with the connection


def _check_idle(conn: psycopg.Connection[Any]) -> None:
    """Raise when an idle connection of the pool is no longer usable, before a search gets
    it: one that died with a server that went away (or restarted) since. Such a socket
    reads as ready (the server's goodbye, or its end), so only then is a round trip spent
    finding out; a live idle connection costs one poll, not a round trip per search."""
    from psycopg_pool import ConnectionPool

    if _readable(conn.fileno()):
        ConnectionPool.check_connection(conn)


def _readable(fd: int) -> bool:
    """Whether ``fd`` has something to read (or has ended), without waiting."""
    if hasattr(select, "poll"):  # not select(): it cannot watch a descriptor over 1023
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([fd], [], [], 0)[0])


class _Reachability:
    """Whether the latest attempt to connect to the server (the pool's or a probe's)
    failed; shared by the pool's threads and the searches waiting on it."""

    def __init__(self) -> None:
        self._failing = False

    def failing(self) -> bool:
        return self._failing

    def failed(self) -> None:
        self._failing = True

    def succeeded(self) -> None:
        self._failing = False


def _watched_connection(reach: _Reachability) -> type[psycopg.Connection[Any]]:
    """A connection class whose connect records its outcome in ``reach`` (the pool's
    only public door to its connection attempts, which it retries in the background)."""
    import psycopg

    class WatchedConnection(psycopg.Connection[Any]):
        @classmethod
        def connect(cls, *args: Any, **kwargs: Any) -> Any:
            try:
                conn = super().connect(*args, **kwargs)
            except psycopg.Error:
                reach.failed()
                raise
            reach.succeeded()
            return conn

    return WatchedConnection


def _close_at_exit(ref: weakref.ref[Database]) -> None:
    """Close a database's pool at exit (its connections end cleanly on the server)."""
    db = ref()
    if db is not None:
        db.close()


# -- the store --------------------------------------------------------------------------------


class PostgresStore:
    """One knowledge base's index in a PostgreSQL database, for one thread at a time.

    The backend (``groove_postgres.backend``) opens stores on its :class:`Database`;
    :meth:`open` and :meth:`create` make a store with a database of its own (closed with
    the store), for scripts and tests. ``label`` names the index in messages.
    """

    def __init__(
        self,
        db: Database,
        kb_id: int,
        kb_name: str,
        *,
        owns_db: bool = False,
        indexes: Sequence[BoundIndex] | None = None,
    ) -> None:

        self.db = db
        self.settings = db.settings
        self.kb_id = kb_id
        self.kb_name = kb_name
        self.label = db.label
        self._s = db.s
        self._owns_db = owns_db
        self._local = threading.local()
        self._identity: tuple[str, int] | None = None
        #: Set by a build that fills an empty KB: the HNSW index is built once, at the end
        #: (:meth:`build_vector_index`), not grown one inserted row at a time.
        self.defer_vector_index = False
        #: Set with it by such a build: the trigram and word document frequencies of its
        #: transactions are summed in memory and written once, at its end
        #: (:meth:`finish_statistics`), not upserted per transaction. A meta mark
        #: (:data:`STATS_PENDING_KEY`), written with the run's first rows and cleared with
        #: the totals, tells a later run that a killed one left them unwritten
        #: (:meth:`recover_statistics`).
        self.defer_statistics = False
        self._run_df: _Frequencies | None = None
        #: The site the leg indexes are bound to (``groove_postgres.legs.PostgresSite``).
        self.site = PostgresSite(self)
        #: The enabled legs' indexes (``groove_core.leg_index``), each bound to :attr:`site`;
        #: the built-in lexical legs' when the caller names none.
        self.indexes: dict[str, tuple[BoundIndex, LegIndex]] = {
            b.name: (b, b.factory(self.site))
            for b in (default_indexes() if indexes is None else indexes)
        }

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        settings: PostgresSettings,
        kb: str,
        label: str | None = None,
        indexes: Sequence[BoundIndex] | None = None,
    ) -> PostgresStore:
        """Open an existing KB's index for searching (its leg indexes brought to their
        versions first, :meth:`sync_on_open`). ``indexes``: the enabled legs' indexes
        (None: the built-in lexical legs')."""
        return cls._standalone(settings, kb, label, indexes, create=False)

    @classmethod
    def create(
        cls,
        settings: PostgresSettings,
        kb: str,
        label: str | None = None,
        indexes: Sequence[BoundIndex] | None = None,
    ) -> PostgresStore:
        """Open the KB's index for writing, creating the schema and the KB as needed."""
        return cls._standalone(settings, kb, label, indexes, create=True)

    @classmethod
    def _standalone(
        cls,
        settings: PostgresSettings,
        kb: str,
        label: str | None,
        indexes: Sequence[BoundIndex] | None,
        *,
        create: bool,
    ) -> PostgresStore:
        db = Database(settings, label or f"'{kb}' (PostgreSQL)")
        try:
            kb_id = db.kb_id(kb, create=create)
            if kb_id is None:
                raise PostgresStoreError(
                    f"no index {db.label} in this database: run 'groove index' on the "
                    "knowledge base first"
                )
            store = cls(db, kb_id, kb, owns_db=True, indexes=indexes)
            store.check_word_rules()
            store.sync_on_open()
        except BaseException:
            db.close()
            raise
        return store

    def check_word_rules(self) -> None:
        """Rewrite the word columns of every chunk, their token counts and the word
        document frequencies when the KB was written under other word rules (a groove
        before the English stemmer): a query's tokens would not match the old ones; and
        refill the word postings (``word_tf``) when those were rewritten or the KB was
        written by a groove-postgres without postings (:func:`word_rules`). The text, the
        trigram columns and the vectors stay: no re-embedding."""
        if self.get_meta(WORD_RULES_KEY) == word_rules():
            return
        with self.transaction() as conn:
            # The KB's write lock is held: another process may have done it meanwhile.
            recorded = self.get_meta(WORD_RULES_KEY)
            if recorded == word_rules():
                return
            rules, _, postings = (recorded or "").partition("+")
            if rules != words.SEGMENTATION:
                self._rewrite_word_columns(conn)
            # Postings of version 1 are the word leg's, and still right: only the surface
            # words' are added (a refill of both costs ~1.3 s per 1,000 chunks).
            self.fill_word_postings(conn, words=rules != words.SEGMENTATION or postings != "tf1")
            conn.execute(
                f"INSERT INTO {self._s}.meta(kb, key, value) VALUES (%s, %s, %s) "
                "ON CONFLICT (kb, key) DO UPDATE SET value = excluded.value",
                (self.kb_id, WORD_RULES_KEY, word_rules()),
            )

    def _rewrite_word_columns(self, conn: psycopg.Connection[Any]) -> None:
        rows = conn.execute(
            f"SELECT id, heading, context, content FROM {self._s}.chunks WHERE kb = %s",
            (self.kb_id,),
        ).fetchall()
        updates = []
        for chunk_id, *texts in rows:
            tokens = [wordleg.column_tokens(normalize(t)) for t in texts]
            terms = sorted({t for column in tokens for t in column})
            wtok = sum(len(column) for column in tokens)
            updates.append((*(wordleg.padded(c) for c in tokens), terms, wtok, chunk_id))
        with conn.cursor() as cur:
            cur.executemany(
                f"UPDATE {self._s}.chunks SET heading_w = %s, context_w = %s, "
                "content_w = %s, wterms = %s, wtok = %s WHERE id = %s",
                updates,
            )
        conn.execute(
            f"UPDATE {self._s}.kbs SET wtok = (SELECT coalesce(sum(wtok), 0) "
            f"FROM {self._s}.chunks WHERE kb = %s) WHERE id = %s",
            (self.kb_id, self.kb_id),
        )
        counted = self.counted_frequencies()["word_df"]
        conn.execute(f"DELETE FROM {self._s}.word_df WHERE kb = %s", (self.kb_id,))
        conn.execute(
            f"INSERT INTO {self._s}.word_df(kb, term, df) SELECT %s, term, df FROM ({counted}) c",
            (self.kb_id, self.kb_id),
        )

    def counted_postings(self, *, words: bool = True) -> str:
        """SQL giving the KB's postings ``(term, chunk_id, h, x, c, len)`` counted from its
        chunks, one parameter (the KB id): what a refill writes and doctor compares. The
        word leg's from the word columns (the tokens ``wordleg.column_tokens`` gave, padded;
        ``len`` the chunk's word tokens; left out when not ``words``), the trigram leg's from
        the folded columns (the surface words ``lexical.surface_words`` finds, marked;
        ``len`` its trigram tokens)."""
        split = f"'[^{lexical.SURFACE_CHARS}]+'"
        columns = " UNION ALL ".join(
            [
                f"SELECT {n} AS col, w AS term, ch.wtok AS len "
                f"FROM string_to_table(ch.{c}_w, ' ') w WHERE w <> ''"
                for n, c in ((1, "heading"), (2, "context"), (3, "content"))
                if words
            ]
            + [
                f"SELECT {n} AS col, {SURFACE_MARK_SQL} || w AS term, ch.ntok AS len "
                f"FROM regexp_split_to_table(ch.{c}_n, {split}) w WHERE length(w) >= 3"
                for n, c in ((1, "heading"), (2, "context"), (3, "content"))
            ]
        )
        return f"""SELECT t.term, ch.id AS chunk_id,
                count(*) FILTER (WHERE t.col = 1)::int AS h,
                count(*) FILTER (WHERE t.col = 2)::int AS x,
                count(*) FILTER (WHERE t.col = 3)::int AS c, t.len
            FROM {self._s}.chunks ch CROSS JOIN LATERAL ({columns}) t
            WHERE ch.kb = %s
            GROUP BY ch.id, t.term, t.len"""

    def fill_word_postings(self, conn: psycopg.Connection[Any], *, words: bool = True) -> None:
        """Replace the KB's postings (both legs', or the surface words' alone when not
        ``words``) by counts of its chunks' columns, and its surface words by those the
        postings hold, in one statement each (13 s for the word postings of 11k chunks on
        the benchmark machine): the migration of a KB written without them, and doctor's
        repair."""
        if words:
            conn.execute(f"DELETE FROM {self._s}.word_tf WHERE kb = %s", (self.kb_id,))
        else:
            conn.execute(
                f"DELETE FROM {self._s}.word_tf WHERE kb = %s "
                f"AND starts_with(term, {SURFACE_MARK_SQL})",
                (self.kb_id,),
            )
        conn.execute(
            f"INSERT INTO {self._s}.word_tf(kb, term, chunk_id, h, x, c, len) "
            f"SELECT %s, term, chunk_id, h, x, c, len "
            f"FROM ({self.counted_postings(words=words)}) p",
            (self.kb_id, self.kb_id),
        )
        conn.execute(f"DELETE FROM {self._s}.surface_terms WHERE kb = %s", (self.kb_id,))
        conn.execute(
            f"INSERT INTO {self._s}.surface_terms(kb, term) "
            f"SELECT DISTINCT %s, substr(term, 2) FROM ({self.surface_postings()}) p",
            (self.kb_id, self.kb_id),
        )

    def surface_postings(self) -> str:
        """SQL selecting the KB's surface-word postings from ``word_tf`` (those whose term
        starts with the mark; ``starts_with``, not a range, whatever the collation), one
        parameter (the KB id)."""
        return (
            f"SELECT * FROM {self._s}.word_tf WHERE kb = %s "
            f"AND starts_with(term, {SURFACE_MARK_SQL})"
        )

    @property
    def pool(self) -> ConnectionPool[Any]:
        return self.db.pool

    def close(self) -> None:
        """Release this store; the database's pool stays for the other stores unless
        this store owns it."""
        if self._owns_db:
            self.db.close()

    @property
    def in_transaction(self) -> bool:
        return getattr(self._local, "conn", None) is not None

    def _error(self, err: BaseException, doing: str) -> StoreError:
        return classify(err, self.settings, self.label, doing, suspect=True)

    # -- connections and transactions ------------------------------------------------------

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        """The connection of the enclosing transaction/snapshot, or one from the pool
        (its implicit transaction is committed when it goes back)."""
        pinned = getattr(self._local, "conn", None)
        if pinned is not None:
            yield pinned
            return
        try:
            with self.db.connection() as conn:
                yield conn
        except pg_errors() as err:
            # Chained (never shown: the CLI prints the message) so a backend can say more.
            raise self._error(err, "reading") from err

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """One write transaction; writers of the same KB queue on an advisory lock."""
        if getattr(self._local, "conn", None) is not None:
            yield self._local.conn
            return
        try:
            with self.db.connection() as conn, conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_WRITE, self.kb_id))
                self._local.conn, self._local.recorded = conn, None
                try:
                    yield conn
                finally:
                    self._local.conn = self._local.recorded = None
        except pg_errors() as err:
            raise self._error(err, "writing") from err

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read-only REPEATABLE READ transaction: every read inside sees the same
        committed state (a search never mixes two versions of a file)."""
        if getattr(self._local, "conn", None) is not None:
            yield
            return
        try:
            with self.db.connection() as conn:
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                self._local.conn, self._local.recorded = conn, None
                try:
                    yield
                finally:
                    self._local.conn = self._local.recorded = None
        except pg_errors() as err:
            # Chained (never shown: the CLI prints the message) so a backend can say more.
            raise self._error(err, "reading") from err

    @contextmanager
    def run_lock(self, *, wait: bool = True) -> Iterator[bool]:
        """This KB's index-run lock (:meth:`Database.run_lock`)."""
        with self.db.run_lock(self.kb_name, wait=wait) as got:
            yield got

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

    # -- leg indexes (groove_core.leg_index) ----------------------------------------------

    def _recorded(self) -> dict[str, str]:
        """Leg index name -> the version it was filled under (this KB's meta keys
        ``leg_index:<name>``). Read once per snapshot or transaction, where nothing else
        can change them: a search asks for several indexes in one snapshot."""
        pinned = getattr(self._local, "conn", None) is not None
        if pinned:
            cached: dict[str, str] | None = getattr(self._local, "recorded", None)
            if cached is not None:
                return cached
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT key, value FROM {self._s}.meta WHERE kb = %s AND starts_with(key, %s)",
                (self.kb_id, META_PREFIX),
            ).fetchall()
        found = {str(k)[len(META_PREFIX) :]: str(v) for k, v in rows}
        if pinned:
            self._local.recorded = found
        return found

    def _forget_recorded(self) -> None:
        if getattr(self._local, "conn", None) is not None:
            self._local.recorded = None

    def stale_leg_indexes(self) -> list[str]:
        """The enabled leg indexes not filled under their current version (the built-in
        lexical legs' too while their version is not recorded: recording it is their
        whole fill)."""
        recorded = self._recorded()
        return [n for n, (b, _) in self.indexes.items() if recorded.get(n) != b.version]

    def generic_indexes(self) -> dict[str, LegIndex]:
        """The enabled leg indexes whose rows live in tables of their own (every one but
        the built-in lexical legs', whose rows are the chunk rows), by name."""
        return {n: index for n, (_, index) in self.indexes.items() if not rows_in_chunks(index)}

    def leg_index(self, name: str) -> Any | None:
        """The leg index ``name`` bound to this store's site, for its leg's queries; None
        when this store keeps none of that name, or when it is not filled under its
        current version (until a writable open or an index run fills it). The built-in
        lexical legs' are always served: their rows are the chunk rows, complete whenever
        the chunks are (``groove_postgres.legs``), so they cost no version check. Cost:
        one meta read per snapshot for the others."""
        found = self.indexes.get(name)
        if found is None:
            return None
        bound, index = found
        if rows_in_chunks(index):
            return index
        return index if self._recorded().get(name) == bound.version else None

    def sync_leg_indexes(self, progress: Callable[[str, int, int], None] | None = None) -> None:
        """Fill every enabled leg index not filled under its current version from the
        KB's chunks, each in one transaction (the KB's write lock held: another process
        may have filled it meanwhile, and then this one does not), reporting (index,
        chunks done, chunks in all) every :data:`FILL_BATCH` chunks."""
        for name in self.stale_leg_indexes():
            with self.transaction() as conn:
                if name in self.stale_leg_indexes():
                    self._fill(conn, name, progress)

    def sync_on_open(self) -> None:
        """:meth:`sync_leg_indexes` when a store is opened, as the SQLite store's writable
        open does. A role that may not write (or a read-only server) leaves the indexes as
        they are: those not filled serve their legs nothing until an index run fills them."""
        if not self.stale_leg_indexes():
            return
        try:
            self.sync_leg_indexes()
        except StoreError as err:
            if not _cannot_write(err.__cause__):
                raise
            log.debug("not filling the leg indexes of %s: %s", self.label, err.__cause__)

    def _fill(
        self,
        conn: psycopg.Connection[Any],
        name: str,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> None:
        """Empty the leg index ``name`` of this KB's rows and write every chunk of the KB
        into it, :data:`FILL_BATCH` chunks at a time in id order, in the caller's
        transaction; then record its version. ``create`` comes first (the tables outlive
        a KB, and ``drop`` only deletes this KB's rows), under a lock that keeps another
        KB's fill from creating the same tables at once. The built-in lexical legs'
        indexes only have their version recorded: their rows are the chunk rows, written
        with every chunk, so they are complete already (no pass over the chunks)."""
        bound, index = self.indexes[name]
        if not rows_in_chunks(index):
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_SCHEMA, LOCK_LEG_TABLES))
            index.create(conn)
            index.drop(conn)
            row = conn.execute(
                f"SELECT count(*) FROM {self._s}.chunks WHERE kb = %s", (self.kb_id,)
            ).fetchone()
            total = int(row[0]) if row else 0
            after, done = 0, 0
            while True:
                batch = _indexed(
                    conn.execute(
                        _indexed_sql(self._s) + "WHERE c.kb = %s AND c.id > %s ORDER BY c.id "
                        "LIMIT %s",
                        (self.kb_id, after, FILL_BATCH),
                    ).fetchall()
                )
                if not batch:
                    break
                index.write(conn, batch)
                after = batch[-1].chunk_id
                done += len(batch)
                if progress is not None:
                    progress(name, done, total)
        conn.execute(
            f"INSERT INTO {self._s}.meta(kb, key, value) VALUES (%s, %s, %s) "
            "ON CONFLICT (kb, key) DO UPDATE SET value = excluded.value",
            (self.kb_id, meta_key(name), bound.version),
        )
        self._forget_recorded()

    def _writing(self, conn: psycopg.Connection[Any]) -> list[LegIndex]:
        """In a write transaction, before rows change: the leg indexes to write (those
        with tables of their own: the built-in legs' rows are written with the chunk).
        Each enabled one not filled under its version is filled first (deleting a row
        needs it there); an index of a leg no longer enabled is marked stale (its version
        forgotten), since it misses this write: enabling the leg again fills it once. Not
        the built-in legs' at their version, which this store writes whatever legs are
        enabled."""

        recorded = self._recorded()
        always = builtin_versions()
        gone = [n for n, v in recorded.items() if n not in self.indexes and always.get(n) != v]
        if gone:
            self._delete_meta(conn, *(meta_key(n) for n in gone))
            self._forget_recorded()
        for name, (bound, _) in self.indexes.items():
            if recorded.get(name) != bound.version:
                self._fill(conn, name)
        return list(self.generic_indexes().values())

    def drop_leg_indexes(self, conn: psycopg.Connection[Any]) -> list[str]:
        """Remove this KB's rows from every enabled leg index with tables of its own
        (before the KB's row is deleted), each in a savepoint: a failing one is logged
        and left to its tables' ``ON DELETE CASCADE``, never in the way of the deletion.
        The names of those that failed."""
        failed = []
        for name, index in self.generic_indexes().items():
            try:
                with conn.transaction():
                    index.drop(conn)
            except Exception as err:
                from psycopg.errors import UndefinedTable

                if not isinstance(err, UndefinedTable):  # never created: nothing to drop
                    log.warning("could not drop the %s leg's index rows: %s", name, err)
                    failed.append(name)
        return failed

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
            # The run's deferred frequencies leave with its mark, in this transaction.
            self._write_run_df(conn)
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
        return None if since is None else incomplete_note(since, self.counts()["documents"])

    def embedder_identity(self) -> tuple[str, int] | None:
        """The embedder the vectors came from, and their dimension. Once known it is kept:
        a KB's binding only goes away in a re-embed, which writes a new KB row."""
        if self._identity is not None:
            return self._identity
        with self._conn() as conn:
            rows = dict(
                conn.execute(
                    f"SELECT key, value FROM {self._s}.meta WHERE kb = %s "
                    "AND key IN ('embedder', 'embedder_dim')",
                    (self.kb_id,),
                ).fetchall()
            )
        if "embedder" not in rows or "embedder_dim" not in rows:
            return None
        self._identity = (str(rows["embedder"]), int(rows["embedder_dim"]))
        return self._identity

    def check_embedder(self, identity: str) -> None:
        check_same_embedder(self.label, self.embedder_identity(), identity)

    def bind_embedder(self, identity: str, dim: int) -> None:
        """Record the embedder and create the KB's HNSW index for its dimension (unless
        :attr:`defer_vector_index`: then :meth:`build_vector_index` creates it)."""
        self.check_embedder(identity)
        if self.embedder_identity() is not None:
            return
        dim = int(dim)
        with self.transaction() as conn:
            if not self.defer_vector_index:
                self._create_vector_index(conn, dim)
            self.set_meta("embedder", identity)
            self.set_meta("embedder_dim", str(dim))

    def build_vector_index(self) -> None:
        """Create the KB's HNSW index if its embedder is bound and the index is missing
        (the end of a build that deferred it, or of a run after a killed one) or invalid
        (a build that failed part way, e.g. a REINDEX CONCURRENTLY an administrator
        interrupted: PostgreSQL keeps it, unused, and IF NOT EXISTS would keep it too)."""
        bound = self.embedder_identity()
        if bound is not None:
            with self.transaction() as conn:
                if self.vector_index_state(conn) == "invalid":
                    conn.execute(f"DROP INDEX {self._s}.vectors_hnsw_{self.kb_id}")
                self._create_vector_index(conn, bound[1])

    def vector_index_state(self, conn: psycopg.Connection[Any]) -> str:
        """``"valid"``, ``"invalid"`` (PostgreSQL will not use it) or ``"missing"``."""
        row = conn.execute(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = %s",
            (self.db.s, f"vectors_hnsw_{self.kb_id}"),
        ).fetchone()
        if row is None:
            return "missing"
        return "valid" if row[0] else "invalid"

    def analyze(self) -> None:
        """Refresh the planner's statistics of the tables a search reads: after a build
        that filled a KB, the plans (which GIN scans, how many rows) come from them, and
        autovacuum may take a while to get there."""
        with self._conn() as conn:
            for table in (
                "chunks",
                "vectors",
                "documents",
                "doc_tags",
                "trigram_df",
                "word_df",
                "word_tf",
                "surface_terms",
            ):
                conn.execute(f"ANALYZE {self._s}.{table}")

    def clean_pending(self) -> None:
        """Merge what the run inserted into the lexical GIN indexes. New rows go to each
        index's pending list first (cheap writes), and every lookup scans that whole list:
        ~0.7 ms a term with a full list (4 MB), 48 -> 15 ms for the word leg of a search
        at 10k chunks (docs/benchmarks.md, issue #17). Only the indexes' owner (or a role
        with MAINTAIN) may: for another writer, autovacuum does it later."""
        for index in _GIN_INDEXES:
            try:
                with self._conn() as conn:
                    conn.execute(
                        "SELECT gin_clean_pending_list(%s::regclass)", (f"{self._s}.{index}",)
                    )
            except StoreError as err:
                from psycopg.errors import InsufficientPrivilege

                if not isinstance(err.__cause__, InsufficientPrivilege):
                    raise
                log.debug("not merging %s's pending list: %s", index, err.__cause__)

    def _create_vector_index(self, conn: psycopg.Connection[Any], dim: int) -> None:
        conn.execute(
            f"CREATE INDEX IF NOT EXISTS vectors_hnsw_{self.kb_id} ON {self._s}.vectors "
            f"USING hnsw ((embedding::vector({int(dim)})) vector_l2_ops) "
            f"WITH (m = {self.settings.hnsw_m}, "
            f"ef_construction = {self.settings.hnsw_ef_construction}) "
            f"WHERE kb = {self.kb_id}"
        )

    def is_empty(self) -> bool:
        """Whether the KB holds no chunk."""
        with self._conn() as conn:
            row = conn.execute(
                f"SELECT NOT EXISTS (SELECT 1 FROM {self._s}.chunks WHERE kb = %s)", (self.kb_id,)
            ).fetchone()
        return bool(row and row[0])

    def has_vectors(self) -> bool:
        return self.embedder_identity() is not None

    def forget_vectors(self) -> None:
        """Drop every vector of the KB and the embedder they came from; every chunk then
        waits for its new vector."""
        with self.transaction() as conn:
            conn.execute(f"DROP INDEX IF EXISTS {self._s}.vectors_hnsw_{self.kb_id}")
            conn.execute(f"DELETE FROM {self._s}.vectors WHERE kb = %s", (self.kb_id,))
            self._delete_meta(conn, "embedder", "embedder_dim")
            self.set_meta(VECTORS_PENDING_KEY, "1")
        self._identity = None

    def requeue_vectors(self, chunk_ids: Sequence[int]) -> int:
        ids = [int(i) for i in dict.fromkeys(chunk_ids)]
        if not ids:
            return 0
        with self.transaction() as conn:
            dropped = conn.execute(
                f"DELETE FROM {self._s}.vectors WHERE kb = %s AND chunk_id = ANY(%s::bigint[])",
                (self.kb_id, ids),
            ).rowcount
            if dropped > 0:  # the chunks wait for their vectors (set only when some do)
                self.set_meta(VECTORS_PENDING_KEY, "1")
        return max(dropped, 0)

    def _pending_sql(self) -> str:
        return (
            f"FROM {self._s}.chunks c WHERE c.kb = %s AND NOT EXISTS "
            f"(SELECT 1 FROM {self._s}.vectors v WHERE v.chunk_id = c.id)"
        )

    def pending_vectors(self) -> int:
        """Chunks without a vector, counted only while some may be (the meta key)."""
        if self.get_meta(VECTORS_PENDING_KEY) is None:
            return 0
        with self._conn() as conn:
            row = conn.execute(f"SELECT count(*) {self._pending_sql()}", (self.kb_id,)).fetchone()
        return int(row[0]) if row else 0

    def pending_chunks(self, after: int, limit: int) -> list[tuple[int, str, str]]:
        if self.get_meta(VECTORS_PENDING_KEY) is None:
            return []
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT c.id, c.context, c.content {self._pending_sql()} AND c.id > %s "
                "ORDER BY c.id LIMIT %s",
                (self.kb_id, after, limit),
            ).fetchall()
        return [(int(r[0]), str(r[1]), str(r[2])) for r in rows]

    def fill_vectors(self, chunks: Sequence[tuple[int, str, str]], vectors: np.ndarray) -> int:
        """Store the vectors of chunks still without one, in one transaction (writers of
        the KB queue on its advisory lock); the last one clears the KB's pending mark.

        A chunk's id names one text for good here (ids come from a sequence, never reused,
        and a rewritten document's chunks are new rows), so a chunk still in the KB under
        its id still has the text its vector was made from: the ids still waiting are read
        under the KB's write lock (no writer of the KB can delete them before the commit),
        and their vectors go in by one binary COPY, without sending the texts back."""
        if not chunks:
            return 0
        by_id = {int(c[0]): vector for c, vector in zip(chunks, vectors, strict=True)}
        with self.transaction() as conn, conn.cursor() as cur:
            waiting = sorted(
                int(r[0])
                for r in conn.execute(
                    f"SELECT c.id {self._pending_sql()} AND c.id = ANY(%s::bigint[])",
                    (self.kb_id, list(by_id)),
                ).fetchall()
            )
            if waiting:
                with cur.copy(
                    f"COPY {self._s}.vectors(chunk_id, kb, embedding) FROM STDIN (FORMAT BINARY)"
                ) as copy:
                    copy.set_types(["int8", "int4", "vector"])
                    for chunk_id in waiting:
                        vector = np.asarray(by_id[chunk_id], dtype=np.float32)
                        copy.write_row((chunk_id, self.kb_id, vector))
            stored = len(waiting)
            # The vector pass goes in id order: a chunk after this batch still waiting is
            # found at once, and only the last batch looks through the whole KB.
            last = max(int(c[0]) for c in chunks)
            after = conn.execute(
                f"SELECT EXISTS (SELECT 1 {self._pending_sql()} AND c.id > %s)",
                (self.kb_id, last),
            ).fetchone()
            if after is not None and not after[0]:
                left = conn.execute(
                    f"SELECT EXISTS (SELECT 1 {self._pending_sql()})", (self.kb_id,)
                ).fetchone()
                if left is not None and not left[0]:
                    self._delete_meta(conn, VECTORS_PENDING_KEY)
        return stored

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

    def write_documents(self, docs: Sequence[NewDocument], vectors: np.ndarray | None) -> None:
        """Replace these documents (and all their rows) in one transaction; ``vectors``
        holds one row per chunk, in the order of ``docs`` and their chunks, or is None:
        the chunks then wait for :meth:`fill_vectors` (the KB's pending mark is set).

        The chunks and vectors of the whole batch go in one binary ``COPY`` each, their
        ids drawn from the chunks' identity sequence first (in order: a document's chunk
        ids increase with their ordinals). Each chunk's row is computed as the COPY sends
        the previous ones, so the server's index inserts run alongside; row-by-row
        INSERTs cost ~3x more, in psycopg and in the server (docs/benchmarks.md, issue #17).
        """
        total = sum(len(doc.chunks) for doc in docs)
        if vectors is not None and len(vectors) != total:
            raise ValueError(f"{total} chunks but {len(vectors)} vectors")
        now = time.time()
        stats = _StatsDelta()
        deferred = self._deferring()
        with self.transaction() as conn, conn.cursor() as cur:
            generic = self._writing(conn)
            doc_ids: list[int] = []
            tags: list[tuple[int, int, str]] = []
            links: list[tuple[int, int, int, str, str, str, int]] = []
            for doc in docs:
                self._delete_path(conn, doc.path, stats, generic)
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
                doc_ids.append(doc_id)
                tags.extend((self.kb_id, doc_id, _pg_text(_ascii_lower(t))) for t in doc.tags)
                links.extend(_link_rows(self.kb_id, doc_id, doc.path, doc.links))
            cur.executemany(
                f"INSERT INTO {self._s}.doc_tags(kb, doc_id, tag) VALUES (%s, %s, %s) "
                "ON CONFLICT DO NOTHING",
                tags,
            )
            cur.executemany(
                f"INSERT INTO {self._s}.links(doc_id, kb, ordinal, kind, target, key, "
                "line) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                links,
            )
            if total:
                ids = sorted(
                    int(r[0])
                    for r in conn.execute(
                        "SELECT nextval(pg_get_serial_sequence(%s, 'id')) "
                        "FROM generate_series(1, %s)",
                        (f"{self._s}.chunks", total),
                    ).fetchall()
                )
                next_id = iter(ids)
                postings: list[tuple[int, str, int, int, int, int, int]] = []
                # The leg indexes with tables of their own get the chunks under their ids,
                # with the text as stored (what a delete hands them again).
                written: list[IndexedChunk] = []
                # COPY writes the identity column's values as given.
                with cur.copy(_COPY_CHUNKS.format(s=self._s)) as copy:
                    copy.set_types(_CHUNK_TYPES)
                    for doc, doc_id in zip(docs, doc_ids, strict=True):
                        path, title = _pg_text(doc.path), _pg_text(doc.title)
                        for chunk in doc.chunks:
                            cid = next(next_id)
                            copy.write_row(
                                (cid, *self._chunk_row(cid, doc_id, chunk, stats, postings))
                            )
                            if generic:
                                written.append(
                                    IndexedChunk(
                                        cid,
                                        doc_id,
                                        path,
                                        title,
                                        _pg_text(chunk.heading),
                                        _pg_text(chunk.context),
                                        _pg_text(chunk.content),
                                    )
                                )
                for index in generic:
                    index.write(conn, written)
                with cur.copy(
                    f"COPY {self._s}.word_tf(kb, term, chunk_id, h, x, c, len) "
                    "FROM STDIN (FORMAT BINARY)"
                ) as copy:
                    copy.set_types(["int4", "text", "int8", "int4", "int4", "int4", "int4"])
                    # In key order: consecutive inserts touch neighbouring pages of the
                    # primary key's B-tree (~20% less server time, docs/benchmarks.md).
                    # By term alone: the sort is stable and the chunk ids already ascend.
                    postings.sort(key=_TERM)
                    for posting in postings:
                        copy.write_row(posting)
                self._add_surface_terms(conn, postings)
                if vectors is None:
                    self.set_meta(VECTORS_PENDING_KEY, "1")
                else:
                    with cur.copy(
                        f"COPY {self._s}.vectors(chunk_id, kb, embedding) "
                        "FROM STDIN (FORMAT BINARY)"
                    ) as copy:
                        copy.set_types(["int8", "int4", "vector"])
                        for cid, vector in zip(ids, vectors, strict=True):
                            copy.write_row((cid, self.kb_id, np.asarray(vector, dtype=np.float32)))
            self._apply_stats(conn, stats, deferred)
        self._committed(stats, deferred)

    def _add_surface_terms(
        self, conn: psycopg.Connection[Any], postings: Sequence[tuple[Any, ...]]
    ) -> None:
        """Add the surface words of ``postings`` to the KB's vocabulary; most are there
        already (a primary-key probe each)."""
        mark = lexical.SURFACE_MARK
        found = sorted({p[1][1:] for p in postings if p[1].startswith(mark)})
        if found:
            conn.execute(
                f"INSERT INTO {self._s}.surface_terms(kb, term) "
                "SELECT %s, unnest(%b::text[]) ON CONFLICT DO NOTHING",
                (self.kb_id, found),
            )

    def _chunk_row(
        self,
        chunk_id: int,
        doc_id: int,
        chunk: Chunk,
        stats: _StatsDelta,
        postings: list[tuple[int, str, int, int, int, int, int]],
    ) -> tuple[Any, ...]:
        """The chunk's row (less its id); its word postings are appended to ``postings``."""
        normal = tuple(normalize(t) for t in (chunk.heading, chunk.context, chunk.content))
        folded = tuple(lexical.fold(t) for t in normal)
        ntok = sum(lexical.token_count(t) for t in folded)
        tokens = [wordleg.column_tokens(t) for t in normal]
        terms = sorted({t for column in tokens for t in column})
        wtok = sum(len(column) for column in tokens)
        stats.add(folded, ntok, terms, wtok, +1)
        h, x, c = (Counter(column).get for column in tokens)
        kb = self.kb_id
        postings.extend((kb, t, chunk_id, h(t, 0), x(t, 0), c(t, 0), wtok) for t in terms)
        surface = [Counter(lexical.surface_words(t)) for t in folded]
        mark = lexical.SURFACE_MARK
        postings.extend(
            (kb, mark + w, chunk_id, surface[0][w], surface[1][w], surface[2][w], ntok)
            for w in surface[0].keys() | surface[1].keys() | surface[2].keys()
        )
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
            _pg_text(sections_text(chunk.sections)),
            *folded,
            ntok,
            *(wordleg.padded(column) for column in tokens),
            terms,
            wtok,
        )

    def _deferring(self) -> bool:
        """Whether the next write's document frequencies wait for the end of the run: in a
        filling build, for a transaction of its own (summed once it has committed)."""
        return self.defer_statistics and not self.in_transaction

    def _apply_stats(
        self, conn: psycopg.Connection[Any], stats: _StatsDelta, deferred: bool = False
    ) -> None:
        """Apply the batch's changes to the KB's row and token totals and, unless
        ``deferred`` (then :meth:`_committed` sums them for the run's end, and the run's
        first transaction writes its mark), to the trigram and word document frequencies."""
        if deferred:
            if self._run_df is None:
                conn.execute(
                    f"INSERT INTO {self._s}.meta(kb, key, value) VALUES (%s, %s, %s) "
                    "ON CONFLICT (kb, key) DO NOTHING",
                    (self.kb_id, STATS_PENDING_KEY, str(time.time())),
                )
        else:
            changes = _Frequencies()
            changes.add(stats)
            self._write_df(conn, changes)
        if stats.nrow or stats.ntok or stats.wtok:
            conn.execute(
                f"UPDATE {self._s}.kbs SET nrow = nrow + %s, ntok = ntok + %s, wtok = wtok + %s "
                "WHERE id = %s",
                (stats.nrow, stats.ntok, stats.wtok, self.kb_id),
            )

    def _committed(self, stats: _StatsDelta, deferred: bool) -> None:
        """After a deferred write's commit: its frequencies join the run's (only committed
        rows count, so a failed transaction leaves the sum right)."""
        if deferred:
            if self._run_df is None:
                self._run_df = _Frequencies()
            self._run_df.add(stats)

    def _write_df(
        self, conn: psycopg.Connection[Any], changes: _Frequencies, *, bulk: bool = False
    ) -> None:
        """Add ``changes`` to the trigram and word document frequencies (sorted keys:
        concurrent writers never deadlock); rows that reach 0 are deleted. The arrays go
        in binary (``%b``): psycopg's text form of a long array costs ~5x more. With
        ``bulk`` (a filling build's totals), a table holding no row of the KB yet is
        filled by one binary COPY instead, which costs the server less than the upsert."""
        for table, column in (("trigram_df", "tri"), ("word_df", "term")):
            changed = changes.changes(table)
            if not changed:
                continue
            if bulk and self._no_rows(conn, table) and all(d > 0 for _, d in changed):
                with (
                    conn.cursor() as cur,
                    cur.copy(
                        f"COPY {self._s}.{table}(kb, {column}, df) FROM STDIN (FORMAT BINARY)"
                    ) as copy,
                ):
                    copy.set_types(["int4", "text", "int4"])
                    for key, d in changed:
                        copy.write_row((self.kb_id, key, d))
                continue
            conn.execute(
                f"INSERT INTO {self._s}.{table}(kb, {column}, df) "
                "SELECT %s, t, d FROM unnest(%b::text[], %b::int[]) AS u(t, d) ORDER BY t "
                f"ON CONFLICT (kb, {column}) DO UPDATE SET df = {table}.df + excluded.df",
                (self.kb_id, [t for t, _ in changed], [d for _, d in changed]),
            )
            if any(d < 0 for _, d in changed):
                conn.execute(
                    f"DELETE FROM {self._s}.{table} WHERE kb = %s AND {column} = ANY(%b) "
                    "AND df <= 0",
                    (self.kb_id, [t for t, d in changed if d < 0]),
                )

    def _no_rows(self, conn: psycopg.Connection[Any], table: str) -> bool:
        row = conn.execute(
            f"SELECT NOT EXISTS (SELECT 1 FROM {self._s}.{table} WHERE kb = %s)", (self.kb_id,)
        ).fetchone()
        return bool(row and row[0])

    def _write_run_df(self, conn: psycopg.Connection[Any]) -> None:
        """Write the document frequencies a filling build has summed so far and clear its
        mark, in ``conn``'s transaction (the sum is forgotten once that commits: a
        second call writes nothing twice)."""
        pending, self._run_df = self._run_df, None
        if pending is None:
            return
        try:
            self._write_df(conn, pending, bulk=True)
            self._delete_meta(conn, STATS_PENDING_KEY)
        except BaseException:
            self._run_df = pending
            raise

    def finish_statistics(self) -> None:
        """Write a filling build's deferred document frequencies (those of its committed
        transactions) and clear its mark; nothing when none are pending. The end of the
        run does it (:meth:`end_run`); a build whose work did not call it does it here."""
        if self._run_df is not None:
            with self.transaction() as conn:
                self._write_run_df(conn)

    def abandon_statistics(self) -> None:
        """Forget a failed filling build's summed frequencies and leave its mark: after an
        error, even a commit the client saw fail may have reached the server, so the sum
        is not to be trusted; the next run recounts them from the rows first."""
        self._run_df = None

    def recover_statistics(self) -> bool:
        """Recount the document frequencies from the stored folded columns and tokens when
        a filling build was killed before writing them (its mark is set); whether it did.
        A run does this before anything else."""
        if self.get_meta(STATS_PENDING_KEY) is None:
            return False
        with self.transaction() as conn:
            self.recount_frequencies(conn)
        return True

    def counted_frequencies(self) -> dict[str, str]:
        """Per table (``word_df``, ``trigram_df``): SQL giving (key, df) counted from the
        KB's rows, one parameter (the KB id). What a recount writes and doctor compares."""
        s = self._s
        return {
            "word_df": f"SELECT term, count(*) AS df FROM {s}.chunks, unnest(wterms) term "
            "WHERE kb = %s GROUP BY term",
            "trigram_df": f"""SELECT tri, count(*) AS df FROM (
                    SELECT DISTINCT c.id, substr(col, i, 3) AS tri
                    FROM {s}.chunks c
                    CROSS JOIN LATERAL unnest(ARRAY[c.heading_n, c.context_n, c.content_n]) col
                    CROSS JOIN LATERAL generate_series(1, length(col) - 2) i
                    WHERE c.kb = %s) t GROUP BY tri""",
        }

    def recount_frequencies(self, conn: psycopg.Connection[Any]) -> None:
        """Replace the KB's trigram and word document frequencies by counts of its rows,
        and clear a filling build's mark (``doctor --repair``, :meth:`recover_statistics`)."""
        kb = self.kb_id
        for table, counted in self.counted_frequencies().items():
            key = "term" if table == "word_df" else "tri"
            conn.execute(f"DELETE FROM {self._s}.{table} WHERE kb = %s", (kb,))
            conn.execute(
                f"INSERT INTO {self._s}.{table}(kb, {key}, df) "
                f"SELECT %s, {key}, df FROM ({counted}) c",
                (kb, kb),
            )
        self._delete_meta(conn, STATS_PENDING_KEY)

    def touch_documents(self, updates: Iterable[tuple[str, int, int]]) -> None:
        with self.transaction() as conn, conn.cursor() as cur:
            cur.executemany(
                f"UPDATE {self._s}.documents SET size = %s, mtime_ns = %s "
                "WHERE kb = %s AND path = %s",
                [(size, mtime, self.kb_id, _pg_text(path)) for path, size, mtime in updates],
            )

    def delete_documents(self, paths: Iterable[str]) -> None:
        stats = _StatsDelta()
        deferred = self._deferring()
        with self.transaction() as conn:
            generic = self._writing(conn)
            for path in paths:
                self._delete_path(conn, path, stats, generic)
            self._apply_stats(conn, stats, deferred)
        self._committed(stats, deferred)

    def _delete_path(
        self,
        conn: psycopg.Connection[Any],
        path: str,
        stats: _StatsDelta,
        generic: Sequence[LegIndex],
    ) -> None:
        found = conn.execute(
            f"SELECT id FROM {self._s}.documents WHERE kb = %s AND path = %s",
            (self.kb_id, _pg_text(path)),
        ).fetchone()
        if found is not None:
            self._delete_doc(conn, int(found[0]), stats, generic)

    def _delete_doc(
        self,
        conn: psycopg.Connection[Any],
        doc_id: int,
        stats: _StatsDelta,
        generic: Sequence[LegIndex],
    ) -> None:
        """Delete a document and its rows; ``generic``: the leg indexes with tables of
        their own (:meth:`_writing`), handed the document's chunks first."""
        if generic:
            chunks = _indexed(
                conn.execute(
                    _indexed_sql(self._s) + "WHERE c.doc_id = %s ORDER BY c.id", (doc_id,)
                ).fetchall()
            )
            for index in generic:
                index.delete(conn, chunks)
        # The chunks' statistics are taken back from the folded text and tokens they held;
        # vectors go with the chunks, tags and links with the document (ON DELETE CASCADE).
        rows = conn.execute(
            f"DELETE FROM {self._s}.chunks WHERE doc_id = %s "
            "RETURNING id, heading_n, context_n, content_n, ntok, wterms, wtok",
            (doc_id,),
        ).fetchall()
        for _, heading_n, context_n, content_n, ntok, terms, wtok in rows:
            stats.add((heading_n, context_n, content_n), int(ntok), terms, int(wtok), -1)
        if rows:
            # The postings' key leads with the term: the chunks' terms, and their surface
            # words, find them.
            surface = sorted(
                {w for row in rows for column in row[1:4] for w in lexical.surface_words(column)}
            )
            terms = {t for row in rows for t in row[5]}
            terms.update(lexical.SURFACE_MARK + w for w in surface)
            conn.execute(
                f"DELETE FROM {self._s}.word_tf WHERE kb = %s AND term = ANY(%b::text[]) "
                "AND chunk_id = ANY(%b::int8[])",
                (self.kb_id, sorted(terms), [int(row[0]) for row in rows]),
            )
            # A surface word no chunk holds any more leaves the vocabulary (a probe of the
            # postings' key each), so that phrase lookups do not grow with every word the
            # KB ever held.
            conn.execute(
                f"DELETE FROM {self._s}.surface_terms v WHERE v.kb = %s "
                "AND v.term = ANY(%b::text[]) AND NOT EXISTS (SELECT 1 "
                f"FROM {self._s}.word_tf t WHERE t.kb = v.kb "
                f"AND t.term = {SURFACE_MARK_SQL} || v.term)",
                (self.kb_id, surface),
            )
        conn.execute(f"DELETE FROM {self._s}.documents WHERE id = %s", (doc_id,))

    # -- reading: the vector leg and stored vectors ----------------------------------------

    def vector_search(self, vector: np.ndarray, k: int, allowed: Allowed = None) -> Ranked:
        """Nearest chunks by L2 distance: (chunk id, distance) best first, ties by id.
        Unfiltered and widely filtered searches use the KB's HNSW index (``ef_search``
        from the settings, iterative scans for filters); a filter that allows few chunks
        is an exact scan of those. The nearest ``k`` + a margin come back with their
        vectors and are ranked by :func:`_l2_float32`, the distance sqlite-vec reports, so
        near-ties fall as they do on SQLite."""
        bound = self.embedder_identity()
        if bound is None or k <= 0 or (allowed is not None and not allowed):
            return []
        dim = bound[1]
        query = np.asarray(vector, dtype=np.float32)
        wide = k + KNN_MARGIN
        with self._conn() as conn, conn.transaction():
            if allowed is not None and len(allowed) <= EXACT_KNN_MAX_ROWS:
                rows = conn.execute(
                    f"SELECT chunk_id, embedding FROM {self._s}.vectors "
                    "WHERE kb = %s AND chunk_id = ANY(%s) ORDER BY embedding <-> %s, chunk_id "
                    "LIMIT %s",
                    (self.kb_id, sorted(allowed), query, wide),
                    binary=True,
                ).fetchall()
            else:
                ef = max(self.settings.ef_search, min(wide, 1000))
                conn.execute(f"SET LOCAL hnsw.ef_search = {int(ef)}")
                only = ""
                params: list[Any] = []
                if allowed is not None:
                    conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
                    only = "AND chunk_id = ANY(%s)"
                    params.append(sorted(allowed))
                params += [query, wide]
                rows = conn.execute(
                    f"SELECT chunk_id, embedding FROM {self._s}.vectors "
                    f"WHERE kb = {self.kb_id} {only} "
                    f"ORDER BY (embedding::vector({dim})) <-> %s LIMIT %s",
                    params,
                    binary=True,
                ).fetchall()
        if not rows:
            return []
        ids = [int(r[0]) for r in rows]
        distances = _l2_float32(np.stack([_as_array(r[1]) for r in rows]), query)
        ranked = sorted(zip(distances.tolist(), ids, strict=True))[:k]
        return [(cid, float(d)) for d, cid in ranked]

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

    def chunk_rows(self, chunk_ids: Sequence[int]) -> dict[int, ChunkRow]:
        if not chunk_ids:
            return {}
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT c.id, c.doc_id, d.path, d.title, d.tags, c.heading, c.heading_path, "
                "c.level, c.content, c.token_count, c.line_start, c.line_end, c.byte_start, "
                f"c.byte_end, c.ordinal, c.context, c.sections FROM {self._s}.chunks c "
                f"JOIN {self._s}.documents d ON d.id = c.doc_id "
                "WHERE c.kb = %s AND c.id = ANY(%s)",
                (self.kb_id, list(chunk_ids)),
            ).fetchall()
        return {int(r[0]): chunk_row(r) for r in rows}

    def document_chunks(self, doc_id: int) -> list[DocumentChunkRow]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT id, ordinal, heading, heading_path, level, content, token_count, "
                f"line_start, line_end, byte_start, byte_end, sections FROM {self._s}.chunks "
                "WHERE kb = %s AND doc_id = %s ORDER BY ordinal",
                (self.kb_id, doc_id),
            ).fetchall()
        return [document_chunk_row(r) for r in rows]

    def documents(self, *, after: str | None = None, limit: int | None = None) -> list[DocumentRow]:
        """Every indexed document, by path in code point order (as SQLite's BINARY);
        ``after`` and ``limit``: one page of them."""
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be 0 or more, not {limit}")
        where, args = ('AND d.path COLLATE "C" > %s ', (after,)) if after is not None else ("", ())
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT d.id, d.path, d.title, d.tags, d.indexed_at, d.size, d.mtime_ns, "
                f"(SELECT count(*) FROM {self._s}.chunks c WHERE c.doc_id = d.id) "
                f"FROM {self._s}.documents d WHERE d.kb = %s {where}"
                'ORDER BY d.path COLLATE "C" LIMIT %s',
                (self.kb_id, *args, limit),
            ).fetchall()
        return [
            DocumentRow(
                doc_id=int(r[0]),
                path=str(r[1]),
                title=str(r[2]),
                tags=_tuple(r[3]),
                indexed_at=float(r[4]),
                size=int(r[5]),
                mtime_ns=int(r[6]),
                chunks=int(r[7]),
            )
            for r in rows
        ]

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
        """Documents carrying every one of ``tags`` (case-insensitive, as SQLite's NOCASE),
        a tag or one nested under it (``status`` is carried by ``status/active``)."""
        if not tags:
            return frozenset()
        result: frozenset[int] | None = None
        with self._conn() as conn:
            for tag in sorted({_ascii_lower(t) for t in tags}):
                rows = conn.execute(
                    f"SELECT DISTINCT doc_id FROM {self._s}.doc_tags WHERE kb = %s "
                    "AND (tag = %s OR starts_with(tag, %s))",
                    (self.kb_id, tag, f"{tag}/"),
                ).fetchall()
                ids = frozenset(int(r[0]) for r in rows)
                result = ids if result is None else result & ids
        return result or frozenset()

    def raw_links(self, doc_id: int) -> list[tuple[str, str, int]]:
        """A document's links ``(kind, target, line)`` in file order, unresolved."""
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT kind, target, line FROM {self._s}.links WHERE doc_id = %s "
                "ORDER BY ordinal",
                (doc_id,),
            ).fetchall()
        return [(str(kind), str(target), int(line)) for kind, target, line in rows]

    def links_of(self, path: str, limit: int) -> Links | None:
        """The first ``limit`` outgoing links and backlinks of the indexed document
        ``path``, resolved as groove_core.links resolves them; None when not indexed."""
        with self.snapshot(), self._conn() as conn:
            found = conn.execute(
                f"SELECT id FROM {self._s}.documents WHERE kb = %s AND path = %s",
                (self.kb_id, path),
            ).fetchone()
            if found is None:
                return None
            doc_id = int(found[0])
            total_row = conn.execute(
                f"SELECT count(*) FROM {self._s}.links WHERE doc_id = %s", (doc_id,)
            ).fetchone()
            out_total = int(total_row[0]) if total_row else 0
            rows = conn.execute(
                f"SELECT kind, target, key, line FROM {self._s}.links WHERE doc_id = %s "
                "ORDER BY ordinal LIMIT %s",
                (doc_id, limit),
            ).fetchall()
            back = conn.execute(
                f"SELECT d.path, l.kind, l.target, l.key, l.line FROM {self._s}.links l "
                f"JOIN {self._s}.documents d ON d.id = l.doc_id WHERE l.kb = %s "
                "AND ((l.kind = 'link' AND l.key = %s) OR (l.kind <> 'link' AND l.key = ANY(%s))) "
                'AND d.path <> %s ORDER BY d.path COLLATE "C", l.ordinal',
                (self.kb_id, core_links.source_key(path), core_links.wiki_keys(path), path),
            ).fetchall()
            paths = [
                str(r[0])
                for r in conn.execute(
                    f"SELECT path FROM {self._s}.documents WHERE kb = %s", (self.kb_id,)
                ).fetchall()
            ]
        markdown, wiki = core_links.resolver(paths)
        outgoing = tuple(core_links.resolved(rows, markdown, wiki))
        backlinks = [
            Backlink(path=str(src), kind=str(kind), target=str(target), line=int(line))
            for src, kind, target, key, line in back
            if kind == "link" or wiki.get(str(key)) == path
        ]
        return Links(outgoing, out_total, tuple(backlinks[:limit]), len(backlinks))

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
        """The bm25 statistics as stored (for tests and ``doctor``): rows, trigram and
        word tokens, and the trigram and word document frequencies."""
        with self._conn() as conn:
            kb = conn.execute(
                f"SELECT nrow, ntok, wtok FROM {self._s}.kbs WHERE id = %s", (self.kb_id,)
            ).fetchone()
            df = conn.execute(
                f"SELECT tri, df FROM {self._s}.trigram_df WHERE kb = %s", (self.kb_id,)
            ).fetchall()
            wdf = conn.execute(
                f"SELECT term, df FROM {self._s}.word_df WHERE kb = %s", (self.kb_id,)
            ).fetchall()
        assert kb is not None
        return {
            "nrow": int(kb[0]),
            "ntok": int(kb[1]),
            "wtok": int(kb[2]),
            "df": {str(t): int(d) for t, d in df},
            "wdf": {str(t): int(d) for t, d in wdf},
        }


#: The chunk columns a write sends, and their types for a binary COPY.
_CHUNK_COLUMNS = (
    ("id", "int8"),
    ("kb", "int4"),
    ("doc_id", "int8"),
    ("ordinal", "int4"),
    ("heading", "text"),
    ("heading_path", "text"),
    ("level", "int4"),
    ("context", "text"),
    ("content", "text"),
    ("token_count", "int4"),
    ("byte_start", "int8"),
    ("byte_end", "int8"),
    ("line_start", "int4"),
    ("line_end", "int4"),
    ("sections", "text"),
    ("heading_n", "text"),
    ("context_n", "text"),
    ("content_n", "text"),
    ("ntok", "int4"),
    ("heading_w", "text"),
    ("context_w", "text"),
    ("content_w", "text"),
    ("wterms", "text[]"),
    ("wtok", "int4"),
)
_CHUNK_TYPES = [t for _, t in _CHUNK_COLUMNS]
#: A word posting's term (its sort key within one KB's write).
_TERM = itemgetter(1)
_COPY_CHUNKS = (
    "COPY {s}.chunks(" + ", ".join(c for c, _ in _CHUNK_COLUMNS) + ") FROM STDIN (FORMAT BINARY)"
)


class _StatsDelta:
    """Changes to the bm25 statistics within one write transaction: the totals, and the
    trigram sets and word terms of the chunks written (``+``) and deleted (``-``), counted
    into :class:`_Frequencies` where they are applied."""

    def __init__(self) -> None:
        self.trigrams: dict[int, list[set[str]]] = {1: [], -1: []}
        self.terms: dict[int, list[Iterable[str]]] = {1: [], -1: []}
        self.nrow = 0
        self.ntok = 0
        self.wtok = 0

    def add(
        self, folded: Sequence[str], ntok: int, terms: Iterable[str], wtok: int, sign: int
    ) -> None:
        """One chunk written (``sign`` 1) or deleted (-1); ``terms`` are its distinct terms."""
        self.trigrams[sign].append(lexical.trigrams(folded))
        self.terms[sign].append(terms)
        self.nrow += sign
        self.ntok += sign * ntok
        self.wtok += sign * wtok


class _Frequencies:
    """Changes to the trigram and word document frequencies (of one transaction, or summed
    over a filling build's): rows added and removed are counted apart, each by
    ``Counter.update`` over the chunks' sets (in C), and combined when written."""

    def __init__(self) -> None:
        self.counts: dict[str, dict[int, Counter[str]]] = {
            "trigram_df": {1: Counter(), -1: Counter()},
            "word_df": {1: Counter(), -1: Counter()},
        }

    def add(self, stats: _StatsDelta) -> None:
        for sign in (1, -1):
            self.counts["trigram_df"][sign].update(chain.from_iterable(stats.trigrams[sign]))
            self.counts["word_df"][sign].update(chain.from_iterable(stats.terms[sign]))

    def changes(self, table: str) -> list[tuple[str, int]]:
        """``table``'s (key, change) pairs, changed keys only, sorted (the order every
        writer takes the rows' locks in: concurrent writers never deadlock)."""
        plus, minus = self.counts[table][1], self.counts[table][-1]
        if not minus:
            return sorted(plus.items())
        keys = sorted(plus.keys() | minus.keys())
        return [(k, d) for k in keys if (d := plus[k] - minus[k])]


def _link_rows(
    kb: int, doc_id: int, path: str, raw: Sequence[Any]
) -> list[tuple[int, int, int, str, str, str, int]]:
    """The ``links`` rows of a document, keyed as groove_core.links keys them."""
    rows = []
    for ordinal, link in enumerate(raw):
        key = core_links.link_key(path, link.kind, link.target)
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
                    # Two first runs at once would both try: one waits, then finds it.
                    conn.execute("SELECT pg_advisory_xact_lock(%s, 1)", (LOCK_SCHEMA,))
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


def _satisfies_index_store(store: PostgresStore) -> IndexStore:
    """Never called: mypy checks here that the store implements the core's protocols."""
    return store
