"""The index: one SQLite file (pysqlite3 + sqlite-vec), its schema, and all of its SQL.

Tables: ``documents`` (one row per Markdown file), ``doc_tags``, ``chunks``, ``vec_chunks``
(vec0, L2, chunk_id = chunk id), ``pending_vectors``, ``links`` (links between notes, in
``link_table``) and each enabled leg's own index (``groove_core.leg_index``): the built-in
trigram and word legs' FTS5 tables ``fts_chunks`` and ``word_chunks`` live in
``lexical_legs``. Every file is replaced in one transaction, leg indexes included, so a
crash or a kill leaves each document either fully old or fully new; WAL lets searches run
while an index run writes.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from groove_core.builtins.legs import word_version
from groove_core.index_report import CHUNKING_KEY, EARLIER_CHUNKING
from groove_core.leg_index import META_PREFIX, BoundIndex, IndexedChunk, LegIndex, meta_key
from groove_core.rows import (
    Allowed,
    ChunkRow,
    DocumentChunkRow,
    DocumentRow,
    Links,
    Ranked,
    chunk_row,
    document_chunk_row,
    sections_text,
)
from groove_core.sqlite import link_table
from groove_core.sqlite.lexical_legs import DEFAULT_INDEXES
from groove_core.storage import (
    INCOMPLETE_KEY,
    LAST_RUN_KEY,
    DocState,
    IndexDamagedError,
    IndexEnvironmentError,
    NewDocument,
    StoreError,
    check_same_embedder,
    incomplete_note,
)

if TYPE_CHECKING:
    from groove_core.chunking import Chunk

SCHEMA_VERSION = 7

#: Chunks written without a vector yet (ADR-0015): ``groove index`` writes every changed
#: file's chunks and lexical rows first, then embeds these in batches. A chunk either has
#: a vector or a row here, never both and never neither, so ``groove doctor`` still tells a
#: lost vector from one not embedded yet. Explicit rows, not "chunks absent from
#: vec_chunks": vec0 is a virtual table outside foreign keys, and its shadow tables can be
#: damaged on their own.
PENDING_SCHEMA = """
CREATE TABLE IF NOT EXISTS pending_vectors (chunk_id INTEGER PRIMARY KEY);
"""

_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '[]',
    content_hash TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    indexed_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS doc_tags (
    doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    tag TEXT NOT NULL COLLATE NOCASE,
    PRIMARY KEY (doc_id, tag)
);
CREATE INDEX IF NOT EXISTS doc_tags_tag ON doc_tags(tag);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,
    doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    heading TEXT NOT NULL,
    heading_path TEXT NOT NULL,
    level INTEGER NOT NULL,
    context TEXT NOT NULL,
    content TEXT NOT NULL,
    token_count INTEGER,
    byte_start INTEGER NOT NULL,
    byte_end INTEGER NOT NULL,
    line_start INTEGER NOT NULL,
    line_end INTEGER NOT NULL,
    sections TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id, ordinal);
"""
    + link_table.LINKS_SCHEMA
    + PENDING_SCHEMA
)

#: Meta key of schemas 4 and 5: the rules the (then built-in) lexical tables' text was
#: written under; schema 6 records each leg index's version instead (``leg_index``).
LEXICAL_RULES_KEY = "lexical_rules"
#: Meta key: a random token, new with every change to the vectors (in the same
#: transaction). Equal tokens mean equal vectors, so the in-memory matrix is shared by every
#: Store of a process that reads the same index and token (:class:`_SharedMatrices`).
VECTORS_VERSION_KEY = "vectors_version"

# sqlite-vec caps k for a KNN query.
VEC_MAX_K = 4096
#: From this many vectors on, a long-lived Store answers KNN from an in-memory matrix:
#: numpy's BLAS scans 100k x 512 floats ~6x faster than vec0's brute force (see
#: docs/benchmarks.md), at the price of holding the vectors in memory (2 KiB per chunk).
MATRIX_MIN_ROWS = 5_000


#: Primary SQLite result codes (sqlite3.h) that mean the file is damaged ...
_DAMAGE_CODES = {11: "SQLITE_CORRUPT", 26: "SQLITE_NOTADB"}
#: ... and those that mean the environment stands in the way, with what to tell the user.
_ENVIRONMENT_CODES = {
    3: "permission denied",
    5: "the index is locked by another process",
    6: "the index is locked by another process",
    8: "the index file or its folder is read-only",
    10: "a disk I/O error",
    13: "no space left on the disk",
    14: "the index file cannot be opened (check the permissions of it and its folder)",
    23: "access denied",
}


#: SQLite's own text for those codes (sqlite3_errstr): sqlite-vec re-raises a failed write
#: as a plain SQLITE_ERROR whose message quotes it ("Could not create ... shadow table:
#: database or disk is full"), so the text is the only trace of the cause.
_CODE_TEXTS = {
    "database disk image is malformed": 11,
    "file is not a database": 26,
    "database or disk is full": 13,
    "attempt to write a readonly database": 8,
    "disk I/O error": 10,
    "unable to open database file": 14,
}


def _primary_code(err: BaseException) -> int | None:
    code = getattr(err, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF != 1:  # 1: SQLITE_ERROR, says nothing
        # Extended codes (e.g. SQLITE_READONLY_DBMOVED) carry the primary one in the low byte.
        return code & 0xFF
    text = str(err)
    return next((c for t, c in _CODE_TEXTS.items() if t in text), None)


def error_kind(err: BaseException) -> str | None:
    """'damaged', 'environment' or None (neither: a bug or a bad statement)."""
    code = _primary_code(err)
    if code in _DAMAGE_CODES:
        return "damaged"
    if code in _ENVIRONMENT_CODES:
        return "environment"
    return None


def classify_error(
    err: BaseException, label: str, doing: str, outcome: str = "", *, suspect: bool = False
) -> StoreError:
    """A StoreError for a database error met while ``doing`` something with the index
    ``label``, of the class that says whether the file or its surroundings are at fault.
    ``outcome`` tells the user what state the failure left the index in. ``suspect``: the
    statements were groove's own, fixed ones, so an error that is not the environment's
    means the file is damaged (sqlite-vec reports unreadable shadow tables as plain
    errors, e.g. "vectors blob read error")."""
    kind = error_kind(err) or ("damaged" if suspect else None)
    tail = f" {outcome}" if outcome else ""
    if kind == "damaged":
        return IndexDamagedError(
            f"the index {label} is damaged ({err}).{tail} Run 'groove doctor --repair' to "
            "rebuild it from the knowledge base"
        )
    if kind == "environment":
        cause = _ENVIRONMENT_CODES[_primary_code(err) or 0]
        return IndexEnvironmentError(
            f"{doing} the index {label} failed: {cause} ({err}). The cause is the "
            f"environment, not the index file.{tail} Fix the cause and try again"
        )
    return StoreError(f"{doing} the index {label} failed: {err}.{tail}")


class _VectorMatrix:
    """Every stored vector in one float32 matrix, for exact KNN by BLAS."""

    def __init__(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        self.ids = ids
        self.vectors = vectors
        self.norms = np.einsum("ij,ij->i", vectors, vectors)

    def rows(self, chunk_ids: Sequence[int]) -> dict[int, np.ndarray]:
        """The vectors of these chunks (ids come from the scan in rowid order: sorted)."""
        wanted = np.asarray(chunk_ids, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.ids, wanted), len(self.ids) - 1)
        found = self.ids[at] == wanted
        return {int(c): self.vectors[i] for c, i, ok in zip(wanted, at, found, strict=True) if ok}

    def nearest(self, query: np.ndarray, k: int, allowed: frozenset[int] | None) -> Ranked:
        # |v - q|^2 = |v|^2 - 2 v.q + |q|^2, the same L2 distance vec0 reports.
        squared = self.norms - 2.0 * (self.vectors @ query) + float(query @ query)
        if allowed is not None:
            keep = np.isin(self.ids, np.fromiter(allowed, dtype=np.int64, count=len(allowed)))
            squared = np.where(keep, squared, np.inf)
        k = min(k, len(self.ids))
        if k == 0:
            return []
        # The expansion above loses a little precision to cancellation: take a margin of
        # candidates, then rank them by directly computed distances.
        wide = min(len(self.ids), k + 16)
        top = np.argpartition(squared, wide - 1)[:wide]
        top = top[np.isfinite(squared[top])]
        exact = np.linalg.norm(self.vectors[top] - query, axis=1)
        order = np.lexsort((self.ids[top], exact))[:k]
        return [(int(self.ids[top[i]]), float(exact[i])) for i in order]


class _SharedMatrices:
    """One vector matrix per index file and vectors version, shared by the Stores of a
    process: each reader thread of ``groove serve`` has its own connection, and each
    used to hold its own copy (~216 MiB at 100k chunks, docs/benchmarks.md). Entries are
    weak: a matrix lives while a Store uses it. Loading is serialised per file, so readers
    that meet a new version together load it once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[str, weakref.ref[_VectorMatrix]]] = {}
        self._loading: dict[str, threading.Lock] = {}

    def _lookup(self, key: str, token: str) -> _VectorMatrix | None:
        entry = self._entries.get(key)
        return entry[1]() if entry is not None and entry[0] == token else None

    def get(self, key: str, token: str, load: Callable[[], _VectorMatrix]) -> _VectorMatrix:
        with self._lock:
            found = self._lookup(key, token)
            if found is not None:
                return found
            loading = self._loading.setdefault(key, threading.Lock())
        with loading:
            with self._lock:
                found = self._lookup(key, token)
            if found is not None:
                return found
            matrix = load()
            with self._lock:
                self._entries[key] = (token, weakref.ref(matrix))
            return matrix


_MATRICES = _SharedMatrices()


#: Chunks read per step when a leg index is filled from the chunks.
FILL_BATCH = 1_000

#: Reads chunks as leg indexes receive them (``IndexedChunk``); a chunk without a document
#: (the doctor's "homeless" chunk, deleted by a repair) comes with an empty path and title.
_INDEXED_SQL = (
    "SELECT c.id, c.doc_id, coalesce(d.path, ''), coalesce(d.title, ''), c.heading, "
    "c.context, c.content FROM chunks c LEFT JOIN documents d ON d.id = c.doc_id "
)


def _indexed(rows: Iterable[Sequence[Any]]) -> list[IndexedChunk]:
    return [
        IndexedChunk(int(r[0]), int(r[1]), str(r[2]), str(r[3]), str(r[4]), str(r[5]), str(r[6]))
        for r in rows
    ]


def indexed_chunks(conn: Any, chunk_ids: Iterable[int]) -> list[IndexedChunk]:
    """These chunks as leg indexes receive them, by id; a chunk without a document (the
    doctor's "homeless" chunk) comes with an empty path and title."""
    rows = conn.execute(
        "SELECT c.id, c.doc_id, coalesce(d.path, ''), coalesce(d.title, ''), c.heading, "
        "c.context, c.content FROM chunks c LEFT JOIN documents d ON d.id = c.doc_id "
        "WHERE c.id IN (SELECT value FROM json_each(?)) ORDER BY c.id",
        (json.dumps(sorted(int(i) for i in chunk_ids)),),
    )
    return _indexed(rows)


def _set_meta(conn: Any, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def _new_vectors_version(conn: Any) -> None:
    _set_meta(conn, VECTORS_VERSION_KEY, uuid.uuid4().hex)


def migrate_contentless_lexical(conn: Any) -> None:
    """Schema 3 → 4: the trigram and word tables became contentless. Dropped here; schema
    6's leg-index versioning creates and fills them again from the chunks on the first
    writable open (no re-embedding). One transaction, as every migration step."""
    for table in ("word_vocab", "word_chunks", "fts_chunks"):
        conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute("DELETE FROM meta WHERE key IN (?, ?)", (meta_key("fts"), meta_key("word")))
    _new_vectors_version(conn)


def migrate_add_pending_vectors(conn: Any) -> None:
    """Schema 4 → 5: the table of chunks waiting for a vector (empty: every chunk of an
    older index was written with its vector)."""
    for statement in PENDING_SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)


def migrate_leg_indexes(conn: Any) -> None:
    """Schema 5 → 6: the lexical tables become the built-in legs' indexes, each with the
    version it was written under. Tables written under this groove's rules keep their rows;
    others are filled again on the first writable open."""
    recorded = conn.execute("SELECT value FROM meta WHERE key = ?", (LEXICAL_RULES_KEY,)).fetchone()
    rules = None if recorded is None else str(recorded[0])
    # schema 5's value read as the word index's version does (unicode and words); the
    # trigram index's text depended on the unicode part alone
    if rules == word_version():
        for bound in DEFAULT_INDEXES:
            _set_meta(conn, meta_key(bound.name), bound.version)
    conn.execute("DELETE FROM meta WHERE key = ?", (LEXICAL_RULES_KEY,))


def connect(path: Path | str, *, read_only: bool = False, immutable: bool = False) -> Any:
    """A pysqlite3 connection with sqlite-vec loaded and a busy timeout. ``read_only``
    opens the file with ``mode=ro``; ``immutable`` also tells SQLite that nothing changes
    it, so it takes no locks and needs no ``-shm`` file (see :func:`_connect_read_only`)."""
    # The stdlib sqlite3 of many Pythons cannot load extensions; pysqlite3 can.
    import pysqlite3.dbapi2 as sqlite3
    import sqlite_vec

    if read_only:
        # A URI, percent-encoded by as_uri, so no character of the path is read as a parameter.
        query = "?mode=ro&immutable=1" if immutable else "?mode=ro"
        uri = Path(os.path.abspath(path)).as_uri() + query
        conn = sqlite3.connect(uri, uri=True, timeout=30.0, isolation_level=None)
    else:
        conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None)
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.enable_load_extension(False)
    conn.execute("PRAGMA busy_timeout = 30000")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


#: How long opening waits for another process's hold on a new index (e.g. two `groove
#: index` runs started together, one creating the schema): the busy timeout's length.
_WAL_WAIT_SECONDS = 30.0


def _enter_wal(conn: Any) -> None:
    """Put the connection in WAL mode, waiting while another process holds the file.

    Switching the journal mode takes an exclusive lock, and SQLite answers SQLITE_BUSY at
    once instead of calling the busy handler: of two index runs started together on a new
    KB, one in about thirty failed with "database is locked" (a CI run hit it).
    """
    deadline = time.monotonic() + _WAL_WAIT_SECONDS
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite_errors() as err:
            if error_kind(err) != "environment" or "locked" not in str(err):
                raise
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def writable(path: Path) -> bool:
    """Whether this process may write the index file and create its companions (``-wal``,
    ``-shm``) beside it. False on a read-only mount for root too: ``access`` answers EROFS
    there whatever the permission bits say."""
    if not os.access(path.parent, os.W_OK):
        return False
    return not path.exists() or os.access(path, os.W_OK)


def _read_only_reason(path: Path) -> str:
    try:
        on_read_only_mount = bool(os.statvfs(path.parent).f_flag & os.ST_RDONLY)
    except (AttributeError, OSError):  # no statvfs (Windows), or the folder is gone
        on_read_only_mount = False
    if on_read_only_mount:
        return "it is on a read-only file system"
    return "the index file or its folder is not writable"


def _connect_read_only(path: Path, label: str) -> Any:
    """A read-only connection to an index that cannot be written (a read-only mount, a
    file or folder without write permission), for searching, status and doctor.

    Opening it as usual fails there: switching to WAL mode writes the file, and even a
    reader of a WAL-mode file creates the ``-shm`` file beside it. SQLite reads a WAL-mode
    file without one only as ``immutable``, which is exact when there is no write-ahead
    log with writes in it (a finished index run folds it into the file and removes it).
    """
    conn = connect(path, read_only=True)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite_errors() as err:
        conn.close()
        if _primary_code(err) != 14:  # SQLITE_CANTOPEN: no -shm, and none can be made
            raise
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise IndexEnvironmentError(
            f"cannot read the index {label}: {_read_only_reason(path)}, and its write-ahead "
            f"log ({wal.name}) holds writes that SQLite reads only with a -shm file beside "
            "it. Open it once where it is writable (any groove search folds them in)"
        )
    conn = connect(path, read_only=True, immutable=True)
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return conn


def sqlite_errors() -> tuple[type[BaseException], ...]:
    """The database errors of the SQLite module groove uses (imported lazily)."""
    import pysqlite3.dbapi2 as sqlite3

    return (sqlite3.DatabaseError,)


def file_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of a file, or None when it is missing: a replaced file differs."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


#: SQLite's companion files of an index (WAL mode, and a rollback journal left by a crash).
COMPANION_SUFFIXES = ("-wal", "-shm", "-journal")


def staging_path(path: Path) -> Path:
    """Where a rebuild is built, beside the index (same file system: the swap is a rename)."""
    return path.with_name(path.name + ".new")


def copy_index(source: Path, target: Path, label: str) -> None:
    """Copy the index at ``source`` to ``target`` with SQLite's online backup: a
    consistent snapshot, taken while searches (and even an index run) go on."""
    src = connect(source)
    try:
        dst = connect(target)
        try:
            src.backup(dst)
        finally:
            dst.close()
    except sqlite_errors() as err:
        raise classify_error(err, label, "copying") from None
    finally:
        src.close()


def remove_index_files(path: Path, label: str) -> None:
    """Delete an index file and its companions (a leftover or abandoned staging file)."""
    for suffix in ("", *COMPANION_SUFFIXES):
        try:
            Path(f"{path}{suffix}").unlink()
        except (FileNotFoundError, NotADirectoryError):
            pass
        except OSError as err:
            raise IndexEnvironmentError(
                f"cannot remove the unfinished index {label}{suffix}: {err.strerror}"
            ) from None


def swap_in(staging: Path, path: Path, label: str) -> None:
    """Put the finished index at ``staging`` in place of ``path`` in one rename.

    The old file's WAL and shared-memory files are removed first: SQLite finds them by
    name, and frames of the old database applied to the new one would corrupt it. A
    process that still has the old file open keeps reading it (its descriptors outlive
    the names) until it notices the swap and reopens (:meth:`Store.replaced`).
    """
    try:
        for suffix in COMPANION_SUFFIXES:
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        os.replace(staging, path)
    except OSError as err:
        raise IndexEnvironmentError(
            f"cannot put the rebuilt index in place of {label}: {err.strerror} (a read-only "
            "file or folder?). The existing index was left as it was"
        ) from None


class Store:
    """The index file. Construct with :meth:`open` (search) or :meth:`create` (indexing).

    ``label`` names the file in messages (the KB-relative path, from the app).
    """

    def __init__(
        self,
        conn: Any,
        path: Path,
        label: str | None = None,
        indexes: Sequence[BoundIndex] | None = None,
    ) -> None:
        self.conn = conn
        self.path = path
        self.label = label or str(path)
        self.identity: tuple[int, int] | None = None
        #: Opened read-only, because the file or its folder cannot be written.
        self.read_only = False
        self._matrix: _VectorMatrix | None = None
        self._matrix_data_version: int | None = None  # this connection's, when checked
        self._matrix_key = os.path.abspath(path)
        self._knn_calls = 0
        #: The enabled legs' indexes (``groove_core.leg_index``), each bound to this
        #: connection; the built-in lexical legs' when the caller names none.
        self.indexes: dict[str, tuple[BoundIndex, LegIndex]] = {
            b.name: (b, b.factory(conn)) for b in (DEFAULT_INDEXES if indexes is None else indexes)
        }
        # The names of those filled under their current version, valid for one
        # PRAGMA data_version (another connection may fill or retire one).
        self._current: frozenset[str] = frozenset()
        self._current_version: int | None = None

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def open(
        cls, path: Path, label: str | None = None, indexes: Sequence[BoundIndex] | None = None
    ) -> Store:
        """Open an existing index for searching: read-only when it cannot be written. A
        writable one has its leg indexes brought to their versions first (filled from the
        chunks where a leg was enabled since, or its rules changed)."""
        shown = label or str(path)
        if not path.exists():
            raise StoreError(f"no index at {shown}: run 'groove index' on the knowledge base first")
        store = cls._connect(path, shown, read_only=not writable(path), indexes=indexes)
        try:
            store._check_schema(allow_empty=False)
            if not store.read_only:
                try:
                    store.sync_leg_indexes()
                except sqlite_errors() as err:
                    raise classify_error(
                        err, shown, "filling a leg's index", "The leg index was left as it was."
                    ) from None
        except BaseException:
            store.close()
            raise
        return store

    @classmethod
    def create(
        cls, path: Path, label: str | None = None, indexes: Sequence[BoundIndex] | None = None
    ) -> Store:
        """Open the index for writing, creating and migrating it as needed."""
        shown = label or str(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise IndexEnvironmentError(
                f"cannot create the index folder of {shown}: {err.strerror}"
            ) from None
        if not writable(path):
            still = "; searching it still works" if path.exists() else ""
            raise IndexEnvironmentError(
                f"cannot write the index {shown}: {_read_only_reason(path)}. The cause is "
                f"the environment, not the index file{still}"
            )
        store = cls._connect(path, shown, indexes=indexes)
        store._check_schema(allow_empty=True)
        return store

    @classmethod
    def _connect(
        cls,
        path: Path,
        label: str,
        *,
        read_only: bool = False,
        indexes: Sequence[BoundIndex] | None = None,
    ) -> Store:
        # The identity is taken before connecting: if the file is replaced in between, the
        # next replaced() check reopens once more than needed, never once too few.
        identity = file_identity(path)
        try:
            if read_only:
                conn = _connect_read_only(path, label)
            else:
                conn = connect(path)
                _enter_wal(conn)
                conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite_errors() as err:
            raise classify_error(err, label, "opening") from None
        store = cls(conn, path, label, indexes)
        store.identity = identity
        store.read_only = read_only
        return store

    def replaced(self) -> bool:
        """True when the file at :attr:`path` is no longer the one this store opened
        (``index --rebuild`` or a doctor rebuild swapped a new file in)."""
        now = file_identity(self.path)
        return now is not None and now != self.identity

    @property
    def in_transaction(self) -> bool:
        return bool(self.conn.in_transaction)

    def close(self) -> None:
        self.conn.close()

    def seal(self) -> None:
        """Checkpoint and leave WAL mode, so that the file is whole on its own (no -wal or
        -shm to carry along) before it is renamed into place; the next open returns to WAL."""
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.conn.execute("PRAGMA journal_mode = DELETE")

    def _check_schema(self, *, allow_empty: bool) -> None:
        try:
            has_meta = self.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
            ).fetchone()
            if not has_meta:
                if not allow_empty:
                    empty = not self.conn.execute("SELECT 1 FROM sqlite_master").fetchone()
                    if empty:
                        raise StoreError(
                            f"the index {self.label} is empty: run 'groove index' (or wait for "
                            "the index run that is creating it)"
                        )
                    raise StoreError(f"{self.label} is not a groove index (no meta table)")
                with self.transaction():
                    self._create_schema()
                return
            version = int(self.get_meta("schema_version") or 0)
        except sqlite_errors() as err:
            raise classify_error(err, self.label, "reading") from None
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the index {self.label} has schema version {version}, newer than this groove "
                f"({SCHEMA_VERSION}); upgrade groove or rebuild with 'groove index --rebuild'"
            )
        if version < SCHEMA_VERSION and self.read_only:
            raise IndexEnvironmentError(
                f"the index {self.label} has schema version {version} and this groove reads "
                f"version {SCHEMA_VERSION}: the upgrade writes the file, and "
                f"{_read_only_reason(self.path)}. Run any groove command on it once where "
                "it is writable"
            )
        if version < SCHEMA_VERSION:
            try:
                self._migrate(version)
            except sqlite_errors() as err:
                raise classify_error(
                    err,
                    self.label,
                    "upgrading",
                    "Each completed upgrade step was kept and the failed one rolled back.",
                ) from None

    def _create_schema(self) -> None:
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                self.conn.execute(statement)
        self.set_meta("schema_version", str(SCHEMA_VERSION))
        _new_vectors_version(self.conn)
        for name in self.indexes:  # empty: created and recorded at their versions
            self._fill(name)

    def _migrate(self, version: int) -> None:
        """Forward migrations, one version at a time, each in its own transaction."""
        while version < SCHEMA_VERSION:
            step = MIGRATIONS.get(version)
            if step is None:
                raise StoreError(
                    f"the index {self.label} has schema version {version}, which this groove "
                    "cannot migrate; run 'groove index --rebuild'"
                )
            with self.transaction():
                # Another connection (a second reader thread, another process) may have
                # run this step while this one waited for the write lock.
                current = int(self.get_meta("schema_version") or 0)
                if current != version:
                    version = current
                    continue
                step(self.conn)
                version += 1
                self.set_meta("schema_version", str(version))

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read transaction: every statement inside sees the same committed state, so
        a search running while an index run commits never mixes two versions of a file."""
        if self.conn.in_transaction:
            yield
            return
        self.conn.execute("BEGIN")
        try:
            yield
        finally:
            self.conn.execute("COMMIT")

    # -- meta and embedder identity --------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        _set_meta(self.conn, key, value)

    # -- leg indexes (groove_core.leg_index) ----------------------------------------------

    def _recorded(self) -> dict[str, str]:
        rows = self.conn.execute(
            "SELECT key, value FROM meta WHERE key >= ? AND key < ?",
            (META_PREFIX, META_PREFIX[:-1] + chr(ord(META_PREFIX[-1]) + 1)),
        )
        return {str(k)[len(META_PREFIX) :]: str(v) for k, v in rows}

    def stale_leg_indexes(self) -> list[str]:
        """The enabled leg indexes not filled under their current version."""
        recorded = self._recorded()
        return [n for n, (b, _) in self.indexes.items() if recorded.get(n) != b.version]

    def leg_index(self, name: str) -> Any | None:
        """The leg index ``name``, bound to this connection, for its leg's queries; None
        when this store keeps none of that name, or when it is not filled under its
        current version (a read-only index until a writable open fills it)."""
        found = self.indexes.get(name)
        if found is None:
            return None
        version = int(self.conn.execute("PRAGMA data_version").fetchone()[0])
        if version != self._current_version:
            recorded = self._recorded()
            self._current = frozenset(
                n for n, (b, _) in self.indexes.items() if recorded.get(n) == b.version
            )
            self._current_version = version
        return found[1] if name in self._current else None

    def sync_leg_indexes(self, progress: Callable[[str, int, int], None] | None = None) -> None:
        """Fill every enabled leg index not filled under its current version from the
        chunks, each in one transaction, reporting (index, chunks done, chunks in all)."""
        for name in self.stale_leg_indexes():
            with self.transaction():
                # another connection may have filled it while this one waited for the lock
                if name in self.stale_leg_indexes():
                    self._fill(name, progress)

    def _fill(self, name: str, progress: Callable[[str, int, int], None] | None = None) -> None:
        """Empty the leg index ``name`` and write every chunk into it (in the caller's
        transaction); 35 s for the two lexical tables at 111k chunks (docs/benchmarks.md)."""
        bound, index = self.indexes[name]
        index.drop(self.conn)
        index.create(self.conn)
        total = int(self.conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
        after, done = 0, 0
        while True:
            batch = _indexed(
                self.conn.execute(
                    _INDEXED_SQL + "WHERE c.id > ? ORDER BY c.id LIMIT ?", (after, FILL_BATCH)
                )
            )
            if not batch:
                break
            index.write(self.conn, batch)
            after = batch[-1].chunk_id
            done += len(batch)
            if progress is not None:
                progress(name, done, total)
        self.set_meta(meta_key(name), bound.version)

    def _writing(self) -> list[LegIndex]:
        """In a write transaction, before rows change: the leg indexes to write. Each
        enabled one not filled under its version is filled first (deleting a row needs the
        text it was written with); an index of a leg no longer enabled is marked stale,
        since it misses this write (enabling the leg again fills it once)."""
        recorded = self._recorded()
        for name in recorded:
            if name not in self.indexes:
                self.conn.execute("DELETE FROM meta WHERE key = ?", (meta_key(name),))
        for name, (bound, _) in self.indexes.items():
            if recorded.get(name) != bound.version:
                self._fill(name)
        return [index for _, index in self.indexes.values()]

    # -- the incomplete-run marker ---------------------------------------------------------

    def begin_run(self) -> None:
        """Mark the index incomplete while a run fills it from empty (a first index, a
        rebuild): a kill part-way then leaves a marked, partial index instead of one that
        looks whole. A run over a complete index only updates whole files, so it leaves
        no mark; a run over a marked one keeps the mark until it completes."""
        with self.transaction():
            empty = self.conn.execute("SELECT 1 FROM documents LIMIT 1").fetchone() is None
            if empty and self.get_meta(INCOMPLETE_KEY) is None:
                self.set_meta(INCOMPLETE_KEY, str(time.time()))

    def end_run(self) -> None:
        """Clear the mark once every file has been written, and note when that was."""
        with self.transaction():
            self.conn.execute("DELETE FROM meta WHERE key = ?", (INCOMPLETE_KEY,))
            self.set_meta(LAST_RUN_KEY, str(time.time()))

    def last_indexed(self) -> float | None:
        """When the index was last brought up to date: the end of the last complete run,
        or (for an index written before that was recorded) its newest document."""
        ended = self.get_meta(LAST_RUN_KEY)
        if ended is not None:
            return float(ended)
        row = self.conn.execute("SELECT max(indexed_at) FROM documents").fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def incomplete(self) -> str | None:
        """A sentence for users when an index run that fills this index has not finished."""
        since = self.get_meta(INCOMPLETE_KEY)
        return None if since is None else incomplete_note(since, self.counts()["documents"])

    def embedder_identity(self) -> tuple[str, int] | None:
        identity, dim = self.get_meta("embedder"), self.get_meta("embedder_dim")
        if identity is None or dim is None:
            return None
        return identity, int(dim)

    def check_embedder(self, identity: str) -> None:
        """Refuse to mix vectors of two embedders in one index, or to search one
        embedder's vectors with another's query vectors."""
        check_same_embedder(self.label, self.embedder_identity(), identity)

    def bind_embedder(self, identity: str, dim: int) -> None:
        """Record the embedder and create ``vec_chunks`` for its dimension (first run)."""
        self.check_embedder(identity)
        if self.embedder_identity() is not None:
            return
        with self.transaction():
            self.conn.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS vec_chunks USING vec0("
                f"chunk_id INTEGER PRIMARY KEY, embedding float[{int(dim)}])"
            )
            self.set_meta("embedder", identity)
            self.set_meta("embedder_dim", str(int(dim)))
            _new_vectors_version(self.conn)

    def forget_vectors(self) -> None:
        """Drop every vector and the embedder they came from (the first step of a
        re-embed, on a copy of the index): chunks, FTS and word rows stay, and every chunk
        waits for its new vector (:meth:`pending_chunks`)."""
        with self.transaction():
            self.conn.execute("DROP TABLE IF EXISTS vec_chunks")
            self.conn.execute("DELETE FROM meta WHERE key IN ('embedder', 'embedder_dim')")
            self.conn.execute("INSERT OR IGNORE INTO pending_vectors SELECT id FROM chunks")
            _new_vectors_version(self.conn)
        self._matrix = None

    def requeue_vectors(self, chunk_ids: Sequence[int]) -> int:
        ids = [(int(i),) for i in dict.fromkeys(chunk_ids)]
        if not ids:
            return 0
        dropped = 0
        with self.transaction():
            if self.has_vectors():
                # chunks with a vector are those not waiting for one (ADR-0015)
                dropped = int(
                    self.conn.execute(
                        "SELECT count(*) FROM chunks WHERE id IN (SELECT value FROM json_each(?)) "
                        "AND id NOT IN (SELECT chunk_id FROM pending_vectors)",
                        (json.dumps([i for (i,) in ids]),),
                    ).fetchone()[0]
                )
                self.conn.executemany("DELETE FROM vec_chunks WHERE chunk_id = ?", ids)
            self.conn.executemany(
                "INSERT OR IGNORE INTO pending_vectors(chunk_id) "
                "SELECT id FROM chunks WHERE id = ?",
                ids,
            )
            _new_vectors_version(self.conn)
        self._matrix = None
        return dropped

    def pending_vectors(self) -> int:
        """How many chunks have no vector yet (ADR-0015). Cost: a count of those only."""
        return int(self.conn.execute("SELECT count(*) FROM pending_vectors").fetchone()[0])

    def pending_chunks(self, after: int, limit: int) -> list[tuple[int, str, str]]:
        """(id, context, content) of up to ``limit`` chunks without a vector, with ids
        above ``after``, by id."""
        rows = self.conn.execute(
            "SELECT c.id, c.context, c.content FROM pending_vectors p "
            "JOIN chunks c ON c.id = p.chunk_id WHERE p.chunk_id > ? ORDER BY p.chunk_id LIMIT ?",
            (after, limit),
        )
        return [(int(r[0]), str(r[1]), str(r[2])) for r in rows]

    def fill_vectors(self, chunks: Sequence[tuple[int, str, str]], vectors: np.ndarray) -> int:
        """Store the vectors of chunks read by :meth:`pending_chunks`, in one transaction:
        only of those still waiting with the same text, since another run may have embedded
        or rewritten one meanwhile (and a rewritten chunk may get the same id). Returns
        how many were stored."""
        if not chunks:
            return 0
        with self.transaction():
            ids = json.dumps([c[0] for c in chunks])
            current = {
                int(r[0]): (str(r[1]), str(r[2]))
                for r in self.conn.execute(
                    "SELECT c.id, c.context, c.content FROM pending_vectors p "
                    "JOIN chunks c ON c.id = p.chunk_id "
                    "WHERE p.chunk_id IN (SELECT value FROM json_each(?))",
                    (ids,),
                )
            }
            rows = [
                (int(i), np.ascontiguousarray(v, dtype=np.float32).tobytes())
                for (i, context, content), v in zip(chunks, vectors, strict=True)
                if current.get(int(i)) == (context, content)
            ]
            if rows:
                _new_vectors_version(self.conn)
                self.conn.executemany(
                    "INSERT INTO vec_chunks(chunk_id, embedding) VALUES (?, ?)", rows
                )
                self.conn.executemany(
                    "DELETE FROM pending_vectors WHERE chunk_id = ?", [(r[0],) for r in rows]
                )
        return len(rows)

    def chunk_texts(self, after: int, limit: int) -> list[tuple[int, str, str]]:
        """(id, context, content) of up to ``limit`` chunks with ids above ``after``."""
        rows = self.conn.execute(
            "SELECT id, context, content FROM chunks WHERE id > ? ORDER BY id LIMIT ?",
            (after, limit),
        )
        return [(int(r[0]), str(r[1]), str(r[2])) for r in rows]

    def write_vectors(self, chunk_ids: Sequence[int], vectors: np.ndarray) -> None:
        """Store the vectors of existing chunks, in one transaction."""
        with self.transaction():
            _new_vectors_version(self.conn)
            self.conn.executemany(
                "INSERT INTO vec_chunks(chunk_id, embedding) VALUES (?, ?)",
                [
                    (int(i), np.ascontiguousarray(v, dtype=np.float32).tobytes())
                    for i, v in zip(chunk_ids, vectors, strict=True)
                ],
            )
            self.conn.executemany(
                "DELETE FROM pending_vectors WHERE chunk_id = ?", [(int(i),) for i in chunk_ids]
            )

    # -- writing ---------------------------------------------------------------------------

    def doc_states(self) -> dict[str, DocState]:
        rows = self.conn.execute("SELECT path, id, content_hash, size, mtime_ns FROM documents")
        return {r[0]: DocState(r[1], r[2], r[3], r[4]) for r in rows}

    def write_documents(self, docs: Sequence[NewDocument], vectors: np.ndarray | None) -> None:
        """Replace these documents (and all their rows) in one transaction.

        ``vectors`` holds one row per chunk, in the order of ``docs`` and their chunks;
        None writes the chunks without vectors, waiting for :meth:`fill_vectors`.
        """
        now = time.time()
        row = 0
        with self.transaction():
            indexes = self._writing()
            _new_vectors_version(self.conn)
            for doc in docs:
                self._delete_path(doc.path, indexes)
                cur = self.conn.execute(
                    "INSERT INTO documents(path, title, tags, content_hash, size, mtime_ns, "
                    "indexed_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        doc.path,
                        doc.title,
                        json.dumps(list(doc.tags), ensure_ascii=False),
                        doc.content_hash,
                        doc.size,
                        doc.mtime_ns,
                        now,
                    ),
                )
                doc_id = int(cur.lastrowid)
                self.conn.executemany(
                    "INSERT OR IGNORE INTO doc_tags(doc_id, tag) VALUES (?, ?)",
                    [(doc_id, t) for t in doc.tags],
                )
                written = []
                for chunk in doc.chunks:
                    chunk_id = self._insert_chunk(
                        doc_id, chunk, None if vectors is None else vectors[row]
                    )
                    written.append(
                        IndexedChunk(
                            chunk_id,
                            doc_id,
                            doc.path,
                            doc.title,
                            chunk.heading,
                            chunk.context,
                            chunk.content,
                        )
                    )
                    row += 1
                for index in indexes:
                    index.write(self.conn, written)
                link_table.insert_rows(self.conn, doc_id, doc.path, doc.links)

    def _insert_chunk(self, doc_id: int, chunk: Chunk, vector: np.ndarray | None) -> int:
        cur = self.conn.execute(
            "INSERT INTO chunks(doc_id, ordinal, heading, heading_path, level, context, "
            "content, token_count, byte_start, byte_end, line_start, line_end, sections) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                doc_id,
                chunk.ordinal,
                chunk.heading,
                json.dumps(list(chunk.heading_path), ensure_ascii=False),
                chunk.level,
                chunk.context,
                chunk.content,
                chunk.token_count,
                chunk.byte_start,
                chunk.byte_end,
                chunk.line_start,
                chunk.line_end,
                sections_text(chunk.sections),
            ),
        )
        chunk_id = int(cur.lastrowid)
        if vector is None:
            self.conn.execute("INSERT INTO pending_vectors(chunk_id) VALUES (?)", (chunk_id,))
            return chunk_id
        self.conn.execute(
            "INSERT INTO vec_chunks(chunk_id, embedding) VALUES (?, ?)",
            (chunk_id, np.ascontiguousarray(vector, dtype=np.float32).tobytes()),
        )
        return chunk_id

    def touch_documents(self, updates: Iterable[tuple[str, int, int]]) -> None:
        """Record a new size/mtime for files whose content hash did not change."""
        with self.transaction():
            self.conn.executemany(
                "UPDATE documents SET size = ?, mtime_ns = ? WHERE path = ?",
                [(size, mtime, path) for path, size, mtime in updates],
            )

    def delete_documents(self, paths: Iterable[str]) -> None:
        with self.transaction():
            indexes = self._writing()
            _new_vectors_version(self.conn)
            for path in paths:
                self._delete_path(path, indexes)

    def _delete_path(self, path: str, indexes: Sequence[LegIndex]) -> None:
        row = self.conn.execute("SELECT id FROM documents WHERE path = ?", (path,)).fetchone()
        if row is None:
            return
        chunks = _indexed(self.conn.execute(_INDEXED_SQL + "WHERE c.doc_id = ?", row))
        ids = [c.chunk_id for c in chunks]
        for index in indexes:
            index.delete(self.conn, chunks)
        if self.has_vectors():
            self.conn.executemany("DELETE FROM vec_chunks WHERE chunk_id = ?", [(i,) for i in ids])
        self.conn.executemany("DELETE FROM pending_vectors WHERE chunk_id = ?", [(i,) for i in ids])
        self.conn.execute("DELETE FROM chunks WHERE doc_id = ?", row)
        link_table.delete_rows(self.conn, int(row[0]))
        self.conn.execute("DELETE FROM doc_tags WHERE doc_id = ?", row)
        self.conn.execute("DELETE FROM documents WHERE id = ?", row)

    def has_vectors(self) -> bool:
        return (
            self.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'vec_chunks'").fetchone()
            is not None
        )

    # -- reading ---------------------------------------------------------------------------

    def vector_search(self, vector: np.ndarray, k: int, allowed: Allowed = None) -> Ranked:
        """Nearest chunks by L2 distance: (chunk id, distance) best first, ties by id."""
        if not self.has_vectors() or k <= 0:
            return []
        matrix = self._vector_matrix()
        if matrix is not None:
            return matrix.nearest(np.asarray(vector, dtype=np.float32), k, allowed)
        blob = np.ascontiguousarray(vector, dtype=np.float32).tobytes()
        k = min(k, VEC_MAX_K)
        if allowed is None:
            rows = self.conn.execute(
                "SELECT chunk_id, distance FROM vec_chunks WHERE embedding MATCH ? AND k = ? "
                "ORDER BY distance",
                (blob, k),
            )
        else:
            rows = self.conn.execute(
                "SELECT chunk_id, distance FROM vec_chunks WHERE embedding MATCH ? AND k = ? "
                "AND chunk_id IN (SELECT value FROM json_each(?)) ORDER BY distance",
                (blob, k, json.dumps(sorted(allowed))),
            )
        # vec0 allows ordering by distance only; ties are broken by id here, as the matrix does.
        # A vector with NaN in it (stored before vectors were checked) has no distance: it is
        # left out, as the matrix leaves it out, and doctor reports it.
        found = [(int(r[0]), float(r[1])) for r in rows if r[1] is not None]
        return sorted(((i, d) for i, d in found if math.isfinite(d)), key=lambda r: (r[1], r[0]))

    def _vector_matrix(self) -> _VectorMatrix | None:
        """The in-memory matrix for large indexes; None for small ones. Checked again when
        another connection has committed since (``PRAGMA data_version``), and then taken
        from the process's shared matrices when its vectors version is the same."""
        self._knn_calls += 1
        version = int(self.conn.execute("PRAGMA data_version").fetchone()[0])
        if self._matrix is not None and self._matrix_data_version == version:
            return self._matrix
        if self._matrix is None and self._knn_calls < 2:
            # A one-shot process (a CLI search) is served faster by vec0 than by loading
            # every vector first; the matrix pays off from a process's second search on.
            return None
        with self.snapshot():  # the version token and the vectors from one state
            rows = int(self.conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
            if rows < MATRIX_MIN_ROWS:
                matrix = None
            else:
                token = self.get_meta(VECTORS_VERSION_KEY)
                if token is None:  # cannot be shared safely: this Store's own copy
                    matrix = self._load_matrix()
                else:
                    matrix = _MATRICES.get(self._matrix_key, token, self._load_matrix)
        self._matrix = matrix
        self._matrix_data_version = version
        return matrix

    def _load_matrix(self) -> _VectorMatrix:
        ids: list[int] = []
        blobs: list[bytes] = []
        for chunk_id, blob in self.conn.execute("SELECT chunk_id, embedding FROM vec_chunks"):
            ids.append(int(chunk_id))
            blobs.append(blob)
        vectors = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(ids), -1)
        return _VectorMatrix(np.asarray(ids, dtype=np.int64), vectors)

    def embeddings(self, chunk_ids: Sequence[int]) -> dict[int, np.ndarray]:
        """Stored vectors of these chunks (for a diversifier, say; nothing is re-embedded)."""
        if not chunk_ids or not self.has_vectors():
            return {}
        if self._matrix is not None:
            version = int(self.conn.execute("PRAGMA data_version").fetchone()[0])
            if self._matrix_data_version == version:
                return self._matrix.rows(chunk_ids)
        rows = self.conn.execute(
            "SELECT chunk_id, embedding FROM vec_chunks "
            "WHERE chunk_id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(chunk_ids)),),
        )
        return {int(r[0]): np.frombuffer(r[1], dtype=np.float32) for r in rows}

    def chunk_rows(self, chunk_ids: Sequence[int]) -> dict[int, ChunkRow]:
        """Chunk and document fields of these chunks, by id (unknown ids are left out)."""
        if not chunk_ids:
            return {}
        rows = self.conn.execute(
            "SELECT c.id, c.doc_id, d.path, d.title, d.tags, c.heading, c.heading_path, "
            "c.level, c.content, c.token_count, c.line_start, c.line_end, c.byte_start, "
            "c.byte_end, c.ordinal, c.context, c.sections "
            "FROM chunks c JOIN documents d ON d.id = c.doc_id "
            "WHERE c.id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(chunk_ids)),),
        )
        return {int(r[0]): chunk_row(r) for r in rows}

    def document_chunks(self, doc_id: int) -> list[DocumentChunkRow]:
        """All chunks of one document in order (for expansion stages)."""
        rows = self.conn.execute(
            "SELECT id, ordinal, heading, heading_path, level, content, token_count, "
            "line_start, line_end, byte_start, byte_end, sections FROM chunks WHERE doc_id = ? "
            "ORDER BY ordinal",
            (doc_id,),
        )
        return [document_chunk_row(r) for r in rows]

    def documents(self, *, after: str | None = None, limit: int | None = None) -> list[DocumentRow]:
        """Every indexed document, by path (``after`` and ``limit``: one page of them)."""
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be 0 or more, not {limit}")
        where, args = ("WHERE d.path > ? ", (after,)) if after is not None else ("", ())
        rows = self.conn.execute(
            "SELECT d.id, d.path, d.title, d.tags, d.indexed_at, d.size, d.mtime_ns, "
            "(SELECT count(*) FROM chunks c WHERE c.doc_id = d.id) FROM documents d "
            f"{where}ORDER BY d.path LIMIT ?",
            (*args, -1 if limit is None else limit),
        )
        return [
            DocumentRow(
                doc_id=int(r[0]),
                path=str(r[1]),
                title=str(r[2]),
                tags=tuple(json.loads(r[3])),
                indexed_at=float(r[4]),
                size=int(r[5]),
                mtime_ns=int(r[6]),
                chunks=int(r[7]),
            )
            for r in rows
        ]

    def file_states(self, paths: Sequence[str]) -> dict[str, tuple[int, int]]:
        """(size, mtime_ns) recorded for these documents when they were indexed."""
        rows = self.conn.execute(
            "SELECT path, size, mtime_ns FROM documents "
            "WHERE path IN (SELECT value FROM json_each(?))",
            (json.dumps(list(paths)),),
        )
        return {str(r[0]): (int(r[1]), int(r[2])) for r in rows}

    def chunk_ids_for_docs(self, doc_ids: Iterable[int]) -> frozenset[int]:
        rows = self.conn.execute(
            "SELECT id FROM chunks WHERE doc_id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(doc_ids)),),
        )
        return frozenset(int(r[0]) for r in rows)

    def doc_ids_with_tags(self, tags: Sequence[str]) -> frozenset[int]:
        """Documents carrying every one of ``tags`` (case-insensitive), a tag or one nested
        under it (``status`` is carried by a note tagged ``status/active``, as in Obsidian)."""
        result: frozenset[int] | None = None
        for tag in tags:
            # "/" + 1 is "0": the range holds every "tag/..." and the NOCASE index serves it
            ids = frozenset(
                int(r[0])
                for r in self.conn.execute(
                    "SELECT doc_id FROM doc_tags WHERE tag = ? OR (tag > ? AND tag < ?)",
                    (tag, f"{tag}/", f"{tag}0"),
                )
            )
            result = ids if result is None else result & ids
        return result or frozenset()

    def links_of(self, path: str, limit: int) -> Links | None:
        """The first ``limit`` outgoing links and backlinks of the indexed document
        ``path``, with their totals; None when ``path`` is not indexed."""
        row = self.conn.execute("SELECT id FROM documents WHERE path = ?", (path,)).fetchone()
        if row is None:
            return None
        with self.snapshot():
            out, out_total = link_table.outgoing(self.conn, int(row[0]), limit)
            back, back_total = link_table.backlinks(self.conn, path, limit)
        return Links(tuple(out), out_total, tuple(back), back_total)

    def raw_links(self, doc_id: int) -> list[tuple[str, str, int]]:
        rows = self.conn.execute(
            "SELECT kind, target, line FROM links WHERE doc_id = ? ORDER BY ordinal", (doc_id,)
        )
        return [(str(kind), str(target), int(line)) for kind, target, line in rows]

    def counts(self) -> dict[str, int]:
        docs = self.conn.execute("SELECT count(*) FROM documents").fetchone()[0]
        chunks = self.conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        return {"documents": int(docs), "chunks": int(chunks)}


@dataclass(frozen=True)
class Consistency:
    """What ``groove doctor`` found: SQLite's own checks and the one-to-one agreements."""

    integrity: tuple[str, ...]  # damage: integrity_check / leg index checks / read errors
    vec_orphans: frozenset[int]  # vectors without a chunk
    chunks_without_vec: frozenset[int]
    chunks_without_doc: frozenset[int]
    #: What the environment kept doctor from checking (e.g. a read-only file); not damage.
    environment: tuple[str, ...] = ()
    #: Per leg index: its rows without a chunk, and chunks without its rows.
    leg_orphans: Mapping[str, frozenset[int]] = field(default_factory=dict)
    chunks_without_leg: Mapping[str, frozenset[int]] = field(default_factory=dict)
    #: Enabled leg indexes not filled under their current version (the next writable
    #: open or index run fills them): a note, not damage.
    stale_legs: tuple[str, ...] = ()
    link_orphans: frozenset[int] = frozenset()  # document ids in links without a document
    #: Chunks whose vector holds NaN or infinity: no query has a distance to them.
    unusable_vectors: frozenset[int] = frozenset()
    #: Checks not run because they write and the index was opened read-only.
    skipped: tuple[str, ...] = ()
    #: Chunks waiting for their vector (ADR-0015): not a problem, the next run embeds them.
    pending: int = 0
    pending_orphans: frozenset[int] = frozenset()  # pending marks without a chunk
    pending_with_vec: frozenset[int] = frozenset()  # chunks both pending and embedded

    @property
    def legs_to_fill(self) -> list[str]:
        """The leg indexes whose rows disagree with the chunks."""
        names = {**self.leg_orphans, **self.chunks_without_leg}
        return [n for n in names if self.leg_orphans.get(n) or self.chunks_without_leg.get(n)]

    @property
    def ok(self) -> bool:
        return not (
            self.integrity
            or self.vec_orphans
            or self.chunks_without_vec
            or self.chunks_without_doc
            or self.legs_to_fill
            or self.link_orphans
            or self.unusable_vectors
            or self.pending_orphans
            or self.pending_with_vec
        )


def check_consistency(store: Store) -> Consistency:
    """Run SQLite's integrity checks, each leg index's own check, and compare documents,
    chunks, leg index rows and vectors.

    Never raises for a database error: damage (corrupt pages make statements fail as well
    as integrity_check report) lands in ``integrity``; an environment that stops a check
    (a read-only file) lands in ``environment`` and is not mistaken for damage.
    """
    conn = store.conn
    problems: list[str] = []
    environment: list[str] = []
    empty: frozenset[int] = frozenset()
    stale = store.stale_leg_indexes()
    current = [(n, idx) for n, (_, idx) in store.indexes.items() if n not in stale]
    skipped = (
        tuple(
            f"the {name} leg index's own check: it is issued as a write, and the index is read-only"
            for name, _ in current
        )
        if store.read_only
        else ()
    )
    orphans: dict[str, frozenset[int]] = {}
    missing: dict[str, frozenset[int]] = {}
    try:
        problems += [str(r[0]) for r in conn.execute("PRAGMA integrity_check") if r[0] != "ok"]
        for _, index in () if store.read_only else current:
            try:
                problems += index.check()
            except sqlite_errors() as err:
                bucket = environment if error_kind(err) == "environment" else problems
                bucket.append(f"a leg index's own check failed: {err}")
        chunks = _ids(conn, "SELECT id FROM chunks")
        for name, index in current:
            held = index.chunk_ids()
            orphans[name], missing[name] = held - chunks, chunks - held
        vec = _ids(conn, "SELECT chunk_id FROM vec_chunks") if store.has_vectors() else empty
        pending = _ids(conn, "SELECT chunk_id FROM pending_vectors")
        homeless = _ids(
            conn, "SELECT id FROM chunks WHERE doc_id NOT IN (SELECT id FROM documents)"
        )
        link_orphans = _ids(
            conn, "SELECT DISTINCT doc_id FROM links WHERE doc_id NOT IN (SELECT id FROM documents)"
        )
        unusable = _unusable_vectors(conn) if store.has_vectors() else empty
    except sqlite_errors() as err:
        bucket = environment if error_kind(err) == "environment" else problems
        bucket.append(f"reading the index failed: {err}")
        return Consistency(
            tuple(problems), empty, empty, empty, tuple(environment), skipped=skipped
        )
    return Consistency(
        integrity=tuple(problems),
        vec_orphans=vec - chunks,
        chunks_without_vec=chunks - vec - pending,
        chunks_without_doc=homeless,
        environment=tuple(environment),
        leg_orphans=orphans,
        chunks_without_leg=missing,
        stale_legs=tuple(stale),
        link_orphans=link_orphans,
        unusable_vectors=unusable,
        skipped=skipped,
        pending=len(pending & chunks),
        pending_orphans=pending - chunks,
        pending_with_vec=pending & vec,
    )


def _unusable_vectors(conn: Any, batch: int = 4096) -> frozenset[int]:
    """Chunks whose stored vector is not all finite numbers, read a batch at a time."""
    found: list[int] = []
    rows = conn.execute("SELECT chunk_id, embedding FROM vec_chunks")
    while part := rows.fetchmany(batch):
        ids = np.fromiter((int(r[0]) for r in part), dtype=np.int64, count=len(part))
        matrix = np.frombuffer(b"".join(bytes(r[1]) for r in part), dtype=np.float32)
        finite = np.isfinite(matrix.reshape(len(part), -1)).all(axis=1)
        found += ids[~finite].tolist()
    return frozenset(found)


def _ids(conn: Any, sql: str) -> frozenset[int]:
    return frozenset(int(r[0]) for r in conn.execute(sql))


def repair_rows(store: Store, found: Consistency) -> list[str]:
    """Fill again the leg indexes whose rows disagree with the chunks, drop orphan rows,
    and forget documents whose vectors are wrong, so the next index run re-embeds exactly
    those documents. Returns the paths it forgot."""
    damaged = found.chunks_without_vec | found.unusable_vectors | found.pending_with_vec
    with store.transaction():
        # Forgotten documents are missing until the index run that follows re-adds them.
        store.set_meta(INCOMPLETE_KEY, str(time.time()))
        _new_vectors_version(store.conn)
        # Contentless rows cannot be deleted one by one without their text (an orphan has
        # no chunk to compute it from): such an index is written again from the chunks,
        # after which every chunk's rows exist and are deleted as usual below.
        for name in found.legs_to_fill:
            store._fill(name)
        indexes = store._writing()
        paths = [
            str(r[0])
            for r in store.conn.execute(
                "SELECT DISTINCT d.path FROM documents d JOIN chunks c ON c.doc_id = d.id "
                "WHERE c.id IN (SELECT value FROM json_each(?))",
                (json.dumps(sorted(damaged)),),
            )
        ]
        for path in paths:
            store._delete_path(path, indexes)
        homeless = indexed_chunks(store.conn, found.chunks_without_doc)
        for index in indexes:
            index.delete(store.conn, homeless)
        if store.has_vectors():
            store.conn.executemany(
                "DELETE FROM vec_chunks WHERE chunk_id = ?",
                [(i,) for i in found.vec_orphans | found.chunks_without_doc],
            )
        store.conn.executemany(
            "DELETE FROM chunks WHERE id = ?", [(i,) for i in found.chunks_without_doc]
        )
        for doc_id in found.link_orphans:
            link_table.delete_rows(store.conn, doc_id)
        store.conn.executemany(
            "DELETE FROM pending_vectors WHERE chunk_id = ?", [(i,) for i in found.pending_orphans]
        )
    return sorted(paths)


def migrate_add_sections(conn: Any) -> None:
    """Schema 6 → 7: the headings of the sections merged into a chunk (empty for the
    chunks already written, which were never merged unless ``min_section_tokens`` was set:
    those keep naming their first heading until the file is indexed again)."""
    columns = {str(r[1]) for r in conn.execute("PRAGMA table_info(chunks)")}
    if "sections" not in columns:  # an index made by this schema's text and marked older
        conn.execute("ALTER TABLE chunks ADD COLUMN sections TEXT NOT NULL DEFAULT ''")
    if conn.execute("SELECT 1 FROM chunks LIMIT 1").fetchone():
        _set_meta(conn, CHUNKING_KEY, EARLIER_CHUNKING)


def _no_step(conn: Any) -> None:
    """Schema 1 → 2 added the word table; schema 6 creates it as a leg index."""


#: version -> function that upgrades a connection from that version to the next one.
MIGRATIONS: dict[int, Callable[[Any], None]] = {
    # 1 -> 2: the word leg's table (schema 6: created and filled as a leg index).
    1: _no_step,
    # 2 -> 3: links between notes (filled as files are indexed again).
    2: link_table.migrate_add_links_table,
    # 3 -> 4: contentless trigram and word tables (schema 6 fills them from the chunks).
    3: migrate_contentless_lexical,
    # 4 -> 5: chunks written without a vector yet, embedded by a later pass (ADR-0015).
    4: migrate_add_pending_vectors,
    # 5 -> 6: the lexical tables become the built-in legs' indexes (ADR-0020).
    5: migrate_leg_indexes,
    # 6 -> 7: merged chunks keep each section's heading.
    6: migrate_add_sections,
}
