"""The ``postgres`` storage backend: the core's contract (groove_core/backend.py,
docs/storage-backends.md) over :class:`groove_postgres.store.PostgresStore`.

* ``update`` runs under the KB's index-run lock (a session advisory lock: two ``groove
  index`` runs of one KB queue, and a killed run's lock goes with its connection); each
  batch of files is one transaction.
* ``rebuild`` writes a ``staging`` row of the KB (every table is keyed by it) and, when
  complete, swaps it for the ``live`` one in one transaction; the replaced rows are
  deleted afterwards. A kill leaves the old index serving and a staging row that the next
  run (or ``tidy``) removes. ``reembed`` copies the live rows to staging, re-embeds, swaps.
  A leg index with tables of its own is written along in a rebuild, filled from the
  copied chunks in a re-embed, and loses a removed KB row's rows with it.
* ``diagnose`` checks in SQL what must agree (vectors, lexical and word rows, the bm25
  statistics, an unfinished run), and each leg index with tables of its own (its chunk
  ids against the chunks, its own check); it repairs in place: statistics are recounted,
  a disagreeing leg index is filled again, documents whose rows disagree are forgotten so
  the index run that follows writes them again.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

from groove_core.backend import BackendContext, BuildMode, Diagnosis
from groove_core.storage import (
    INCOMPLETE_KEY,
    EmbedderMismatchError,
    IndexDamagedError,
    IndexEnvironmentError,
    StoreError,
    semantic_note,
)
from groove_postgres.errors import classify, pg_errors
from groove_postgres.settings import PostgresSettings, redact

if TYPE_CHECKING:
    import psycopg

    from groove_core.index_report import IndexReport
    from groove_core.leg_index import BoundIndex
    from groove_core.storage import IndexStore
    from groove_postgres.store import Database, PostgresStore

__all__ = ["NAME", "PostgresBackend", "factory"]

log = logging.getLogger(__name__)

NAME = "postgres"
#: What a failed rebuild or re-embed leaves behind, said in every message about one.
_UNTOUCHED = "The existing index was left as it was."
_INTACT = "Every file indexed before this point is intact."


class PostgresBackend:
    """One KB's index in a PostgreSQL database: the rows keyed by the KB's name."""

    name = NAME

    def __init__(
        self,
        settings: PostgresSettings,
        kb: str,
        leg_indexes: tuple[BoundIndex, ...] | None = None,
    ) -> None:
        self.settings = settings
        self.kb = kb
        #: The enabled legs' indexes (None: the built-in lexical legs', as a bare store).
        self.leg_indexes = leg_indexes
        self.label = f"postgres db {_dbname(settings)}, KB {kb}"
        # No host and no user: over MCP this is shown to remote clients.
        self.public_label = f"postgres, KB {kb}"
        # Searches run side by side on the pool's connections (docs/storage-backends.md).
        self.readers = settings.pool_max
        self._db: Database | None = None

    @property
    def schema_version(self) -> int:
        from groove_postgres.store import SCHEMA_VERSION

        return SCHEMA_VERSION

    def size_bytes(self) -> None:
        """Unknown: the KBs of a database share its tables and indexes."""
        return None

    @property
    def db(self) -> Database:
        """The database with its shared pool, made on first use (one per backend)."""
        if self._db is None:
            try:
                from groove_postgres.store import Database
            except ImportError as err:
                raise StoreError(
                    f"the postgres backend cannot load {err.name or 'its driver'}: install "
                    "groove-postgres with its dependencies (psycopg 3, psycopg-pool, "
                    f"pgvector) to use the index at dsn {redact(self.settings.dsn)!r}"
                ) from None
            self._db = Database(self.settings, self.label)
        return self._db

    def close(self) -> None:
        if self._db is not None:
            self._db.close()

    # -- the contract ------------------------------------------------------------------------

    def exists(self) -> bool:
        return self.db.kb_id(self.kb) is not None

    def open(self) -> PostgresStore:
        kb_id = self.db.kb_id(self.kb)
        if kb_id is None:
            raise StoreError(
                f"no index {self.label} in this database: run 'groove index' on the knowledge "
                "base first"
            )
        store = self._store(kb_id)
        try:
            store.check_word_rules()
            store.sync_on_open()
        except BaseException:
            store.close()
            raise
        return store

    def _store(self, kb_id: int) -> PostgresStore:
        """A store of the KB row ``kb_id`` with the enabled legs' indexes."""
        from groove_postgres.store import PostgresStore

        return PostgresStore(self.db, kb_id, self.kb, indexes=self.leg_indexes)

    def current(self, store: IndexStore) -> bool:
        """Whether ``store`` still reads the live rows (one indexed lookup)."""
        from groove_postgres.store import PostgresStore

        if not isinstance(store, PostgresStore):
            return True
        try:
            with self.db.connection() as conn:
                row = conn.execute(
                    f"SELECT id FROM {self.db.s}.kbs WHERE name = %s AND state = 'live'",
                    (self.kb,),
                ).fetchone()
        except (pg_errors()[0], StoreError):
            return True  # the next statement reports the server's state, in its words
        return row is not None and int(row[0]) == store.kb_id

    def errors(self) -> tuple[type[BaseException], ...]:
        return pg_errors()

    def classify(
        self, err: BaseException, doing: str, outcome: str = "", *, suspect: bool = False
    ) -> StoreError:
        return classify(err, self.settings, self.label, doing, outcome, suspect=suspect)

    # -- building ------------------------------------------------------------------------------

    def build(self, work: Callable[[IndexStore], IndexReport], mode: BuildMode) -> IndexReport:
        from groove_postgres.store import LIVE, PostgresStore

        if mode == "reembed" and not self.exists():
            mode = "rebuild"  # nothing to copy: a re-embed of nothing is a fresh build
        db = self.db
        with db.run_lock(self.kb):
            live = db.kb_id(self.kb, LIVE, create=mode == "update")
            if live is not None:
                # Before anything else: a killed filling build's frequencies are recounted.
                PostgresStore(db, live, self.kb).recover_statistics()
                PostgresStore(db, live, self.kb).check_word_rules()
            if mode == "update":
                assert live is not None
                # The indexer fills the leg indexes not filled yet first (with progress).
                store = self._store(live)
                # A first index fills an empty KB: its HNSW index is built at the end, its
                # document frequencies written once (docs/benchmarks.md, issue #17).
                store.defer_vector_index = store.defer_statistics = store.is_empty()
                return self._run(work, store, _INTACT)
            return self._rebuild(work, copy=mode == "reembed")

    def _run(
        self, work: Callable[[IndexStore], IndexReport], store: PostgresStore, outcome: str
    ) -> IndexReport:
        try:
            try:
                report = work(store)
            except Exception:
                # The rows written so far stay (an update run) and get their HNSW index; a
                # rebuild's staging rows are dropped anyway. A filling build's document
                # frequencies are left to the next run, which recounts them first (its
                # mark stays), as after an interruption; until then the KB reads as
                # incomplete, and the vector leg scans exactly where the index is missing.
                store.abandon_statistics()
                if outcome == _INTACT:
                    with suppress(StoreError):
                        store.build_vector_index()
                raise
            store.finish_statistics()  # end_run wrote them: this is for a work without it
            # Every run ends with the KB's HNSW index in place: built here once when the
            # run deferred it (docs/benchmarks.md, issue #17), or after a killed run.
            store.build_vector_index()
            try:
                store.clean_pending()
            except StoreError as err:  # an optimisation: the run itself is complete
                log.warning("could not merge the GIN indexes' pending lists: %s", err)
            if store.defer_vector_index:
                store.analyze()  # the KB was filled: plans need fresh statistics
            return report
        except EmbedderMismatchError:
            raise
        except StoreError as err:
            cause = err.__cause__
            if isinstance(cause, pg_errors()):
                raise self.classify(cause, "writing", outcome, suspect=True) from None
            if outcome in str(err):
                raise
            raise type(err)(f"{err} {outcome}") from None
        finally:
            store.close()

    def _rebuild(self, work: Callable[[IndexStore], IndexReport], *, copy: bool) -> IndexReport:
        from groove_postgres.store import LIVE, STAGING

        db = self.db
        try:
            self._drop(STAGING)  # what a killed run left (this run holds the lock)
            staging = db.kb_id(self.kb, STAGING, create=True)
            assert staging is not None
            if copy:
                live = db.kb_id(self.kb, LIVE)
                assert live is not None
                self._copy(live, staging)
            # A copy's leg indexes with tables of their own are filled from its chunks by
            # the indexer's first step (their versions were not copied, _copy).
            target = self._store(staging)
            # Built once, before the swap (_run); the statistics written once, at the end.
            target.defer_vector_index = target.defer_statistics = True
            report = self._run(work, target, _UNTOUCHED)
            self._swap(staging)
        except StoreError as err:
            with suppress(StoreError):
                self._drop(STAGING)
            if _UNTOUCHED in str(err):
                raise
            raise type(err)(f"{err} {_UNTOUCHED}") from None
        except BaseException:
            with suppress(StoreError):
                self._drop(STAGING)
            raise
        with suppress(StoreError):
            self._drop("retired")  # the replaced rows; a failure leaves them to tidy()
        return report

    @contextmanager
    def _write(self, doing: str) -> Iterator[psycopg.Connection[Any]]:
        """A transaction on the pool, psycopg errors classified."""
        try:
            with self.db.connection() as conn, conn.transaction():
                yield conn
        except pg_errors() as err:
            raise self.classify(err, doing) from None

    def _swap(self, staging: int) -> None:
        """Put the staging rows in place of the live ones in one transaction: a search
        reads either the old index or the new one, whole."""
        from groove_postgres.store import LOCK_SCHEMA

        s = self.db.s
        with self._write("swapping in the rebuilt index of") as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s, 2)", (LOCK_SCHEMA,))
            conn.execute(
                f"UPDATE {s}.kbs SET state = 'retired' WHERE name = %s AND state = 'live'",
                (self.kb,),
            )
            conn.execute(f"UPDATE {s}.kbs SET state = 'live' WHERE id = %s", (staging,))

    def _drop(self, state: str) -> None:
        """Delete the KB's rows in ``state`` (``staging`` or ``retired``) and their HNSW
        indexes, one KB row per transaction."""
        s = self.db.s
        with self._write("removing the unfinished index of") as conn:
            if not self.db.schema_exists(conn):
                return
            ids = [
                int(r[0])
                for r in conn.execute(
                    f"SELECT id FROM {s}.kbs WHERE name = %s AND state = %s", (self.kb, state)
                ).fetchall()
            ]
        for kb_id in ids:
            with self._write("removing the unfinished index of") as conn:
                # The leg indexes' rows of the KB row, for those whose tables do not
                # cascade from kbs (only the enabled legs' are known here).
                self._store(kb_id).drop_leg_indexes(conn)
                conn.execute(f"DROP INDEX IF EXISTS {s}.vectors_hnsw_{kb_id}")
                # The word postings have no foreign key (groove_postgres.store._word_tf_sql).
                conn.execute(f"DELETE FROM {s}.word_tf WHERE kb = %s", (kb_id,))
                conn.execute(f"DELETE FROM {s}.kbs WHERE id = %s", (kb_id,))

    def _copy(self, live: int, staging: int) -> None:
        """Copy the live rows (not the vectors, which a re-embed replaces) to staging, in
        one transaction; chunk ids are new and keep their order. The built-in lexical legs'
        rows come along (they are the chunk rows, the postings and the statistics), and so
        their recorded versions; a leg index with tables of its own is not copied (groove
        knows no more of its rows than its methods), nor its version: the indexer fills it
        from the staging chunks before anything else, so a version is never recorded
        without the rows."""
        from groove_core.leg_index import META_PREFIX, meta_key
        from groove_postgres.legs import builtin_versions

        builtin = [meta_key(n) for n in builtin_versions()]
        s = self.db.s
        chunk_columns = (
            "ordinal, heading, heading_path, level, context, content, token_count, byte_start, "
            "byte_end, line_start, line_end, sections, heading_n, context_n, content_n, ntok, "
            "heading_w, context_w, content_w, wterms, wtok"
        )
        with self._write("copying") as conn:
            conn.execute(
                "CREATE TEMP TABLE doc_map (old bigint PRIMARY KEY, new bigint) ON COMMIT DROP"
            )
            conn.execute(
                f"""WITH src AS (SELECT * FROM {s}.documents WHERE kb = %s),
                ins AS (
                    INSERT INTO {s}.documents(kb, path, title, tags, content_hash, size,
                        mtime_ns, indexed_at)
                    SELECT %s, path, title, tags, content_hash, size, mtime_ns, indexed_at
                    FROM src ORDER BY id RETURNING id, path)
                INSERT INTO doc_map SELECT src.id, ins.id FROM src JOIN ins USING (path)""",
                (live, staging),
            )
            conn.execute(
                f"INSERT INTO {s}.chunks(kb, doc_id, {chunk_columns}) "
                f"SELECT %s, m.new, {chunk_columns} FROM {s}.chunks c "
                "JOIN doc_map m ON m.old = c.doc_id WHERE c.kb = %s ORDER BY c.id",
                (staging, live),
            )
            conn.execute(
                f"INSERT INTO {s}.doc_tags(kb, doc_id, tag) SELECT %s, m.new, t.tag "
                f"FROM {s}.doc_tags t JOIN doc_map m ON m.old = t.doc_id",
                (staging,),
            )
            conn.execute(
                f"INSERT INTO {s}.links(doc_id, kb, ordinal, kind, target, key, line) "
                f"SELECT m.new, %s, ordinal, kind, target, key, line FROM {s}.links l "
                "JOIN doc_map m ON m.old = l.doc_id",
                (staging,),
            )
            for table, column in (("trigram_df", "tri"), ("word_df", "term")):
                conn.execute(
                    f"INSERT INTO {s}.{table}(kb, {column}, df) "
                    f"SELECT %s, {column}, df FROM {s}.{table} WHERE kb = %s",
                    (staging, live),
                )
            conn.execute(
                f"INSERT INTO {s}.surface_terms(kb, term) "
                f"SELECT %s, term FROM {s}.surface_terms WHERE kb = %s",
                (staging, live),
            )
            # The word postings, under the copies' ids (a chunk is its document's ordinal).
            conn.execute(
                f"INSERT INTO {s}.word_tf(kb, term, chunk_id, h, x, c, len) "
                f"SELECT %s, w.term, n.id, w.h, w.x, w.c, w.len FROM {s}.word_tf w "
                f"JOIN {s}.chunks o ON o.id = w.chunk_id JOIN doc_map m ON m.old = o.doc_id "
                f"JOIN {s}.chunks n ON n.doc_id = m.new AND n.ordinal = o.ordinal "
                "WHERE w.kb = %s",
                (staging, live),
            )
            conn.execute(
                # The copied word columns were written under the live KB's word rules,
                # so its record replaces the one the new staging row was created with.
                f"INSERT INTO {s}.meta(kb, key, value) SELECT %s, key, value FROM {s}.meta "
                "WHERE kb = %s AND key NOT IN ('embedder', 'embedder_dim') "
                "AND (NOT starts_with(key, %s) OR key = ANY(%s)) "
                "ON CONFLICT (kb, key) DO UPDATE SET value = excluded.value",
                (staging, live, META_PREFIX, builtin),
            )
            conn.execute(
                f"UPDATE {s}.kbs t SET nrow = f.nrow, ntok = f.ntok, wtok = f.wtok "
                f"FROM {s}.kbs f WHERE t.id = %s AND f.id = %s",
                (staging, live),
            )

    def tidy(self, *, strict: bool) -> None:
        """Remove a killed rebuild's staging rows and any replaced rows left behind,
        unless another run holds the KB's lock (its staging rows are in use)."""
        from groove_postgres.store import STAGING

        try:
            with self.db.run_lock(self.kb, wait=False) as got:
                if got:
                    self._drop(STAGING)
                    self._drop("retired")
        except StoreError:
            if strict:
                raise

    # -- checking ----------------------------------------------------------------------------

    def diagnose(self, *, repair: bool) -> Diagnosis:
        """The agreements between documents, chunks, vectors, lexical and word rows and the
        bm25 statistics, and an unfinished run; ``repair`` recounts the statistics and
        forgets the documents whose rows disagree (the index run that follows re-adds
        them)."""
        result = Diagnosis()
        store = result.open_index(self.open, missing=lambda err: "run 'groove index'" in str(err))
        if store is None:
            return result
        try:
            found = _check(store)
            result.problems.extend(found.describe())
            incomplete = store.incomplete()
            result.problems.extend([incomplete] if incomplete else [])
            waiting = store.pending_vectors()
            if waiting:
                result.notes.append(semantic_note(waiting, store.counts()["chunks"]))
            for name in found.stale_legs:
                result.notes.append(
                    f"the {name} leg's index is not filled yet (a leg enabled since the last "
                    "write, or new rules): the leg finds nothing until 'groove index' fills it"
                )
            if repair and (not found.ok or found.pending):
                # Only while no run holds the KB's lock: a running build may write its
                # pending frequencies at its end (a recount meanwhile would count its rows
                # twice), and its rows are not a state to repair.
                with self.db.run_lock(self.kb, wait=False) as idle:
                    if idle:
                        result.reindexed = _repair(store, found)
                    else:
                        result.environment.append(
                            "an index run of this KB is under way: run 'groove doctor "
                            "--repair' again once it has ended"
                        )
        except IndexEnvironmentError as err:
            result.environment.append(str(err))
        except IndexDamagedError as err:
            result.problems.append(str(err))
            result.rebuild = True
        except StoreError as err:
            result.problems.append(str(err))
        finally:
            store.close()
        return result


class _Found:
    """What :func:`_check` found: chunk ids per disagreement, and the statistics' state."""

    def __init__(self) -> None:
        self.chunks: dict[str, list[int]] = {}
        self.stats: list[str] = []
        #: Per leg index with tables of its own: its rows without a chunk, the chunks
        #: without its rows, and what its own check found.
        self.legs: dict[str, tuple[frozenset[int], frozenset[int], list[str]]] = {}
        #: Enabled leg indexes not filled under their version: a note, not damage.
        self.stale_legs: list[str] = []
        #: What the index run that follows a repair fixes by itself (a missing HNSW index).
        self.unbuilt: list[str] = []
        #: A killed filling build left the document frequencies unwritten (its mark).
        self.pending = False

    @property
    def legs_to_fill(self) -> list[str]:
        """The leg indexes whose rows disagree with the chunks, or whose own check failed:
        a repair fills them again from the chunks."""
        return [n for n, (orphans, missing, bad) in self.legs.items() if orphans or missing or bad]

    @property
    def ok(self) -> bool:
        return not self.stats and not any(self.chunks.values()) and not self.legs_to_fill

    def damaged_chunks(self) -> list[int]:
        return sorted({c for ids in self.chunks.values() for c in ids})

    def describe(self) -> list[str]:
        out = [f"{len(ids)} {label}" for label, ids in self.chunks.items() if ids]
        for name, (orphans, missing, bad) in self.legs.items():
            if orphans:
                out.append(f"{len(orphans)} rows of the {name} leg's index without a chunk")
            if missing:
                out.append(f"{len(missing)} chunks without a row in the {name} leg's index")
            out += [f"the {name} leg's index: {problem}" for problem in bad]
        return out + self.stats + self.unbuilt


def _ids(conn: psycopg.Connection[Any], sql: str, params: tuple[Any, ...]) -> list[int]:
    return [int(r[0]) for r in conn.execute(sql, params).fetchall()]


def _padded_tokens(column: str) -> str:
    """SQL: the tokens in a padded word column (each token has two spaces)."""
    return f"(length({column}) - length(replace({column}, ' ', ''))) / 2"


def _check(store: PostgresStore) -> _Found:
    from groove_postgres.store import STATS_PENDING_KEY, VECTORS_PENDING_KEY

    s, kb = store.db.s, store.kb_id
    found = _Found()
    identity = store.embedder_identity()
    with store.snapshot(), store._conn() as conn:
        hnsw = f"vectors_hnsw_{kb}"
        state = store.vector_index_state(conn) if identity is not None else "valid"
        if state == "missing":
            found.unbuilt.append(
                f"the KB's vector index ({hnsw}) is missing: the vector leg reads every "
                "vector until 'groove index' (or doctor --repair) builds it (a first index "
                "still running builds it at its end)"
            )
        elif state == "invalid":
            found.unbuilt.append(
                f"the KB's vector index ({hnsw}) is invalid (a build of it failed part way): "
                "PostgreSQL does not use it, so the vector leg reads every vector until "
                "doctor --repair (or 'groove index') rebuilds it"
            )
        if identity is not None and store.get_meta(VECTORS_PENDING_KEY) is None:
            # While the KB's pending mark is set, a chunk without a vector is waiting for
            # the vector pass (ADR-0015), not lost: diagnose reports how many as a note.
            found.chunks["chunks without a vector"] = _ids(
                conn,
                f"SELECT c.id FROM {s}.chunks c LEFT JOIN {s}.vectors v ON v.chunk_id = c.id "
                "WHERE c.kb = %s AND v.chunk_id IS NULL",
                (kb,),
            )
            found.chunks["vectors of another dimension"] = _ids(
                conn,
                f"SELECT chunk_id FROM {s}.vectors WHERE kb = %s AND vector_dims(embedding) <> %s",
                (kb, identity[1]),
            )
        _check_legs(store, conn, found)
        found.chunks["rows of another KB under this KB's documents"] = _ids(
            conn,
            f"SELECT c.id FROM {s}.chunks c JOIN {s}.documents d ON d.id = c.doc_id "
            f"LEFT JOIN {s}.vectors v ON v.chunk_id = c.id "
            "WHERE d.kb = %s AND (c.kb <> d.kb OR v.kb <> d.kb)",
            (kb,),
        )
        trigram_tokens = " + ".join(
            f"greatest(length({c}) - 2, 0)" for c in ("heading_n", "context_n", "content_n")
        )
        found.chunks["chunks without their lexical (trigram) text"] = _ids(
            conn,
            f"SELECT id FROM {s}.chunks WHERE kb = %s AND (ntok <> {trigram_tokens} "
            "OR (content_n = '' AND content <> ''))",
            (kb,),
        )
        word_tokens = " + ".join(_padded_tokens(c) for c in ("heading_w", "context_w", "content_w"))
        found.chunks["chunks without their word-leg rows"] = _ids(
            conn,
            f"SELECT id FROM {s}.chunks WHERE kb = %s AND (wtok <> {word_tokens} "
            "OR (wtok > 0) <> (cardinality(wterms) > 0))",
            (kb,),
        )
        totals = conn.execute(
            f"SELECT k.nrow, k.ntok, k.wtok, count(c.id), coalesce(sum(c.ntok), 0), "
            f"coalesce(sum(c.wtok), 0) FROM {s}.kbs k LEFT JOIN {s}.chunks c ON c.kb = k.id "
            "WHERE k.id = %s GROUP BY k.id",
            (kb,),
        ).fetchone()
        assert totals is not None
        for label, kept, counted in zip(
            ("rows", "trigram tokens", "word tokens"), totals[:3], totals[3:], strict=True
        ):
            if int(kept) != int(counted):
                found.stats.append(
                    f"the bm25 statistics disagree with the rows: {kept} {label} recorded, "
                    f"{counted} in the chunks"
                )
        wrong = conn.execute(
            f"""WITH r AS ({store.counted_postings()}),
                     k AS (SELECT term, chunk_id, h, x, c, len FROM {s}.word_tf WHERE kb = %s)
                SELECT count(DISTINCT coalesce(r.chunk_id, k.chunk_id))
                FROM r FULL JOIN k USING (term, chunk_id)
                WHERE (r.h, r.x, r.c, r.len) IS DISTINCT FROM (k.h, k.x, k.c, k.len)""",
            (kb, kb),
        ).fetchone()
        if wrong and int(wrong[0]):
            found.stats.append(
                "the lexical legs' term frequencies (postings) disagree with the rows for "
                f"{int(wrong[0])} chunks"
            )
        lost = conn.execute(
            f"""SELECT count(DISTINCT p.term) FROM ({store.surface_postings()}) p
                WHERE NOT EXISTS (SELECT 1 FROM {s}.surface_terms v
                                  WHERE v.kb = p.kb AND v.term = substr(p.term, 2))""",
            (kb,),
        ).fetchone()
        if lost and int(lost[0]):
            found.stats.append(
                f"the lexical leg's vocabulary lacks {int(lost[0])} words its postings hold"
            )
        if store.get_meta(STATS_PENDING_KEY) is not None:
            # Not compared: the next run (or --repair) recounts them; the KB is marked
            # incomplete meanwhile.
            found.pending = True
            return found
        counted = store.counted_frequencies()
        for table, key, leg, unit in (
            ("word_df", "term", "word leg's", "terms"),
            ("trigram_df", "tri", "lexical leg's", "trigrams"),
        ):
            wrong = conn.execute(
                f"""WITH r AS ({counted[table]}),
                         k AS (SELECT {key}, df FROM {s}.{table} WHERE kb = %s)
                    SELECT count(*) FROM r FULL JOIN k USING ({key})
                    WHERE r.df IS DISTINCT FROM k.df""",
                (kb, kb),
            ).fetchone()
            if wrong and int(wrong[0]):
                found.stats.append(
                    f"the {leg} document frequencies disagree with the rows for "
                    f"{int(wrong[0])} {unit}"
                )
    return found


def _check_legs(store: PostgresStore, conn: psycopg.Connection[Any], found: _Found) -> None:
    """Each enabled leg index with tables of its own, filled under its version: its chunk
    ids against the KB's chunks, and its own check (the built-in legs' rows are the chunk
    rows, checked by the SQL of :func:`_check`)."""
    stale = set(store.stale_leg_indexes())
    generic = store.generic_indexes()
    found.stale_legs = [n for n in store.indexes if n in stale and n in generic]
    current = {n: index for n, index in generic.items() if n not in stale}
    if not current:
        return
    chunks = frozenset(
        _ids(conn, f"SELECT id FROM {store.db.s}.chunks WHERE kb = %s", (store.kb_id,))
    )
    for name, index in current.items():
        held = frozenset(int(i) for i in index.chunk_ids())
        found.legs[name] = (held - chunks, chunks - held, list(index.check()))


def _repair(store: PostgresStore, found: _Found) -> list[str]:
    """Fill again the leg indexes that disagree with the chunks, forget the documents
    whose rows disagree and recount the statistics, in one transaction; the paths
    forgotten."""
    from groove_postgres.store import _StatsDelta

    s, kb = store.db.s, store.kb_id
    damaged = found.damaged_chunks()
    with store.transaction() as conn:
        # First: deleting a document below hands its chunks to every leg index.
        for name in found.legs_to_fill:
            store._fill(conn, name)
        generic = store._writing(conn)
        rows = conn.execute(
            f"SELECT DISTINCT d.id, d.path FROM {s}.documents d JOIN {s}.chunks c "
            "ON c.doc_id = d.id WHERE d.kb = %s AND c.id = ANY(%s)",
            (kb, damaged),
        ).fetchall()
        if rows:
            # Forgotten documents are missing until the index run that follows re-adds them.
            store.set_meta(INCOMPLETE_KEY, str(time.time()))
        stats = _StatsDelta()
        for doc_id, _ in rows:
            store._delete_doc(conn, int(doc_id), stats, generic)
        conn.execute(
            f"UPDATE {s}.kbs k SET nrow = c.n, ntok = c.t, wtok = c.w FROM (SELECT count(*) AS n, "
            "coalesce(sum(ntok), 0) AS t, coalesce(sum(wtok), 0) AS w "
            f"FROM {s}.chunks WHERE kb = %s) c WHERE k.id = %s",
            (kb, kb),
        )
        store.recount_frequencies(conn)
        store.fill_word_postings(conn)
    return sorted(str(path) for _, path in rows)


def _dbname(settings: PostgresSettings) -> str:
    """The database the DSN names (as libpq would pick it), for messages."""
    params: dict[str, Any] = {}
    with suppress(Exception):
        from psycopg.conninfo import conninfo_to_dict

        params = dict(conninfo_to_dict(settings.dsn))
    return str(
        params.get("dbname")
        or os.environ.get("PGDATABASE")
        or params.get("service")
        or params.get("user")
        or os.environ.get("PGUSER")
        or "postgres"
    )


def factory(ctx: BackendContext) -> PostgresBackend:
    """The backend of ``ctx``'s KB: ``[store]`` settings, the KB key defaulting to the
    KB's name."""
    settings = ctx.settings.get(PostgresSettings)
    return PostgresBackend(settings, settings.kb or ctx.kb_name, ctx.leg_indexes.get(NAME))
