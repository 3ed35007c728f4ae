"""The built-in storage backend: one SQLite file per KB (FTS5 trigram, sqlite-vec).

A rebuild or a re-embed writes ``index.sqlite.new`` beside the live file and renames it
into place when complete, so a killed run changes nothing (docs/reliability.md); errors
are told apart by SQLite's result codes (damage, or the environment: no space, read-only,
permissions).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from groove_core.backend import BackendContext, BackendSpec, BuildMode, Diagnosis
from groove_core.hookspecs import hookimpl

if TYPE_CHECKING:
    from pathlib import Path

    from groove_core.index_report import IndexReport
    from groove_core.leg_index import BoundIndex, LegIndexImpl
    from groove_core.sqlite.store import Consistency, Store
    from groove_core.storage import IndexStore, StoreError

NAME = "sqlite"
#: What a failed rebuild or re-embed leaves behind, said in every message about one.
_UNTOUCHED = "The existing index was left as it was."


class SqliteBackend:
    """One KB's index in one SQLite file (``[index] path``, by default .groove/index.sqlite)."""

    name = NAME
    #: Each reader connection holds its own copy of the vector matrix (~216 MiB at 100k
    #: chunks), and two readers already keep both cores of a laptop busy (docs/benchmarks.md).
    readers = 2

    def __init__(
        self,
        path: Path,
        label: str,
        public_label: str | None = None,
        kb_name: str = "",
        leg_indexes: tuple[BoundIndex, ...] | None = None,
    ) -> None:
        self.path, self.label, self.kb_name = path, label, kb_name
        self.public_label = public_label or f"the index file {path.name}"
        #: The enabled legs' indexes (None: the built-in lexical legs', as a bare store).
        self.leg_indexes = leg_indexes

    @property
    def schema_version(self) -> int:
        from groove_core.sqlite.store import SCHEMA_VERSION

        return SCHEMA_VERSION

    def exists(self) -> bool:
        return self.path.exists()

    def size_bytes(self) -> int:
        """The file and its write-ahead log (which holds the latest writes until a
        checkpoint folds them into the file)."""
        total = 0
        for path in (self.path, self.path.with_name(self.path.name + "-wal")):
            with contextlib.suppress(OSError):  # no WAL: nothing written since the checkpoint
                total += path.stat().st_size
        return total

    def open(self) -> Store:
        from groove_core.sqlite.store import Store
        from groove_core.storage import StoreError

        if not self.path.exists() and self.kb_name:
            # the KB's name, not its folder: this message reaches MCP clients too
            raise StoreError(
                f"no index at {self.label} for the knowledge base {self.kb_name!r}: run "
                "'groove index' on it first"
            )
        return Store.open(self.path, self.label, self.leg_indexes)

    def current(self, store: IndexStore) -> bool:
        from groove_core.sqlite.store import Store

        return not (isinstance(store, Store) and store.replaced())

    def errors(self) -> tuple[type[BaseException], ...]:
        from groove_core.sqlite.store import sqlite_errors

        return sqlite_errors()

    def classify(
        self, err: BaseException, doing: str, outcome: str = "", *, suspect: bool = False
    ) -> StoreError:
        from groove_core.sqlite.store import classify_error

        return classify_error(err, self.label, doing, outcome, suspect=suspect)

    # -- building ----------------------------------------------------------------------

    def build(self, work: Callable[[IndexStore], IndexReport], mode: BuildMode) -> IndexReport:
        if mode == "reembed" and not self.exists():
            mode = "rebuild"  # nothing to copy: a re-embed of nothing is a fresh build
        if mode == "update":
            return self._build_into(self.path, work, None)
        return self._rebuild(work, copy=mode == "reembed")

    def _build_into(
        self, target: Path, work: Callable[[IndexStore], IndexReport], outcome: str | None
    ) -> IndexReport:
        """Run ``work`` on ``target``; ``outcome`` (for a staging file) says what a failure
        leaves behind, and makes the file whole on its own when done."""
        from groove_core.sqlite.store import Store, sqlite_errors

        store = Store.create(target, self.label, self.leg_indexes)
        try:
            report = work(store)
            if outcome is not None:
                store.seal()
            return report
        except sqlite_errors() as err:
            # The batch in flight was rolled back: every file written before it is intact.
            intact = "Every file indexed before this point is intact."
            raise self.classify(err, "writing", outcome or intact) from None
        finally:
            store.close()

    def _rebuild(self, work: Callable[[IndexStore], IndexReport], *, copy: bool) -> IndexReport:
        """Build into the staging file and swap it in; ``copy``: start from a copy of the
        index (to re-embed it), instead of from empty."""
        from groove_core.sqlite.store import copy_index, staging_path, swap_in
        from groove_core.storage import StoreError

        staging = staging_path(self.path)
        try:
            if copy:
                copy_index(self.path, staging, self.label)
            report = self._build_into(staging, work, _UNTOUCHED)
            swap_in(staging, self.path, self.label)
        except StoreError as err:
            self.tidy(strict=False)
            if _UNTOUCHED in str(err):
                raise
            # e.g. the disk filled while the new file's schema was being created: say that
            # the old index is untouched, whichever step failed.
            raise type(err)(f"{err} {_UNTOUCHED}") from None
        except BaseException:
            self.tidy(strict=False)
            raise
        return report

    def tidy(self, *, strict: bool) -> None:
        from groove_core.sqlite.store import remove_index_files, staging_path
        from groove_core.storage import StoreError

        try:
            remove_index_files(staging_path(self.path), self.label + ".new")
        except StoreError:
            if strict:
                raise

    # -- checking ----------------------------------------------------------------------

    def diagnose(self, *, repair: bool) -> Diagnosis:
        """SQLite's integrity check, each leg index's own, the one-to-one agreements between
        documents, chunks, leg index rows and vectors, and an unfinished index run;
        ``repair`` fills a disagreeing leg index again and re-indexes the documents whose
        vectors disagree (a damaged file needs a rebuild instead)."""
        from groove_core.sqlite.store import (
            Store,
            check_consistency,
            error_kind,
            repair_rows,
            sqlite_errors,
        )
        from groove_core.storage import semantic_note

        result = Diagnosis()
        store = result.open_index(
            lambda: Store.open(self.path, self.label, self.leg_indexes),
            missing=lambda _: not self.path.exists(),
        )
        if store is None:
            return result
        try:
            found = check_consistency(store)
            result.problems.extend(_describe(found))
            result.environment.extend(found.environment)
            result.skipped.extend(found.skipped)
            result.rebuild = bool(found.integrity)
            incomplete = None if result.rebuild else store.incomplete()
            result.problems.extend([incomplete] if incomplete else [])
            for name in found.stale_legs:
                result.notes.append(
                    f"the {name} leg's index is not filled yet (a leg enabled since the last "
                    "write, or new rules): the leg finds nothing until 'groove index' fills it"
                )
            if found.pending and not result.rebuild:
                result.notes.append(semantic_note(found.pending, store.counts()["chunks"]))
            if repair and not found.integrity and not found.ok and not found.environment:
                result.reindexed = repair_rows(store, found)
        except sqlite_errors() as err:
            found_by = result.environment if error_kind(err) == "environment" else result.problems
            found_by.append(str(self.classify(err, "repairing")))
        finally:
            store.close()
        return result


def _describe(found: Consistency) -> list[str]:
    problems = [f"SQLite integrity: {msg}" for msg in found.integrity]
    legs: list[tuple[str, frozenset[int]]] = []
    for name, ids in found.leg_orphans.items():
        legs.append((f"rows of the {name} leg's index without a chunk", ids))
    for name, ids in found.chunks_without_leg.items():
        legs.append((f"chunks without a row in the {name} leg's index", ids))
    for label, ids in [
        *legs,
        ("vectors without a chunk", found.vec_orphans),
        ("chunks without a vector", found.chunks_without_vec),
        ("chunks without a document", found.chunks_without_doc),
        ("links of documents no longer indexed", found.link_orphans),
        ("chunks whose vector holds NaN or infinity", found.unusable_vectors),
        ("chunks marked as waiting for a vector that no longer exist", found.pending_orphans),
        ("chunks both holding a vector and marked as waiting for one", found.pending_with_vec),
    ]:
        if ids:
            problems.append(f"{len(ids)} {label}")
    return problems


def _factory(ctx: BackendContext) -> SqliteBackend:
    path = ctx.index_file
    if path.is_relative_to(ctx.kb):
        label = public = path.relative_to(ctx.kb).as_posix()
    else:
        # Over HTTP a machine path tells a stranger how the disk is laid out.
        label, public = str(path), f"the index file {path.name} (outside the knowledge base)"
    name = ctx.display_name or ctx.kb_name
    return SqliteBackend(path, label, public, name, ctx.leg_indexes.get(NAME))


@hookimpl
def groove_storage_backends() -> list[BackendSpec]:
    return [BackendSpec(NAME, _factory, "one SQLite file per KB (the default)")]


@hookimpl
def groove_leg_indexes() -> list[LegIndexImpl]:
    """The built-in lexical legs' indexes in the SQLite file: FTS5 tables
    (groove_core/sqlite/lexical_legs.py)."""
    from groove_core.leg_index import LegIndexImpl
    from groove_core.sqlite.lexical_legs import TrigramIndex, WordIndex

    return [LegIndexImpl("fts", NAME, TrigramIndex), LegIndexImpl("word", NAME, WordIndex)]


def _satisfies_index_store(store: Store) -> IndexStore:
    """Never called: mypy checks here that the SQLite store implements the protocols the
    search reads and the indexer writes through (docs/storage-backends.md)."""
    return store
