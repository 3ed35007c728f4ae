"""The application facade the CLI and the MCP server share: one KB, its config, its plugins."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from groove_core.config import ConfigError, GrooveConfig, index_path, load_config
from groove_core.models import SearchFilters, SearchResponse
from groove_core.plugins import Plugins, make_plugin_manager

if TYPE_CHECKING:
    from groove_core.context import QueryContext
    from groove_core.embedding import Embedder
    from groove_core.indexer import IndexReport, ProgressFn
    from groove_core.models import LegResult
    from groove_core.pipeline import Searcher
    from groove_core.store import Consistency, Store


class Groove:
    """A knowledge base ready to index and search. Cheap to build; heavy parts are lazy."""

    def __init__(self, kb: Path, config: GrooveConfig, plugins: Plugins) -> None:
        self.kb = kb
        self.config = config
        self.plugins = plugins
        # One index connection per thread: SQLite objects belong to the thread that made
        # them, and the MCP server searches on several threads at once (WAL lets each
        # connection read its own snapshot while another process writes).
        self._local = threading.local()

    @classmethod
    def open(
        cls,
        kb: Path | str = ".",
        config_path: Path | None = None,
        *,
        extra_plugins: Sequence[tuple[str, object]] = (),
        entry_points: bool = True,
    ) -> Groove:
        kb = Path(kb).expanduser()
        if not kb.is_dir():
            raise ConfigError(f"knowledge base folder {kb} does not exist or is not a folder")
        config = load_config(kb, config_path)
        plugins = make_plugin_manager(config, extra=extra_plugins, entry_points=entry_points)
        return cls(kb, config, plugins)

    @property
    def index_file(self) -> Path:
        return index_path(self.kb, self.config)

    @cached_property
    def embedder(self) -> Embedder:
        return self.plugins.make_embedder()

    @property
    def index_label(self) -> str:
        """The index file as messages name it: KB-relative when it lies inside the KB."""
        path = self.index_file
        return path.relative_to(self.kb).as_posix() if path.is_relative_to(self.kb) else str(path)

    @property
    def store(self) -> Store:
        """This thread's open index, reopened when the file was replaced since (``index
        --rebuild`` or a doctor rebuild in another process): one stat per access. Never
        inside a read transaction, so one search always reads one file."""
        current: Store | None = getattr(self._local, "store", None)
        if current is not None and not current.conn.in_transaction and current.replaced():
            import structlog  # ~70 ms to import; only a long-lived server gets here

            structlog.get_logger("groove").info("index replaced: reopening", index=self.index_label)
            self.close()
            current = None
        if current is None:
            current = self._open_store()
            self._local.store = current
        return current

    def _open_store(self) -> Store:
        from groove_core.store import Store

        store = Store.open(self.index_file, self.index_label)
        try:
            store.check_embedder(self.embedder.identity)
        except BaseException:
            store.close()
            raise
        return store

    def close(self) -> None:
        """Close this thread's connection (other threads' close with their threads)."""
        store = getattr(self._local, "store", None)
        self._local.store = None
        if store is not None:
            store.close()

    # -- indexing --------------------------------------------------------------------------

    def index(
        self,
        *,
        rebuild: bool = False,
        reembed: bool = False,
        progress: ProgressFn | None = None,
    ) -> IndexReport:
        """Index the KB incrementally. ``rebuild`` builds a new index beside the old one
        and ``reembed`` re-embeds a copy of it with the configured embedder (after a change
        of embedder); either swaps the new file in only when complete, so a failed or
        killed run changes nothing and the old index serves searches meanwhile."""
        if rebuild and reembed:
            raise ConfigError("--rebuild and --reembed exclude each other: give one")
        self.close()
        self._discard_staging(strict=rebuild or reembed)
        if rebuild or (reembed and not self.index_file.exists()):
            return self._rebuild(progress)
        if reembed:
            return self._rebuild(progress, copy=True)
        return self._index_into(self.index_file, progress)

    def _index_into(
        self,
        target: Path,
        progress: ProgressFn | None,
        outcome: str | None = None,
        *,
        reembed: bool = False,
    ) -> IndexReport:
        """Run the indexer into ``target``; ``outcome`` (for a staging file) says what a
        failure leaves behind, and makes the file whole on its own when done. ``reembed``
        first replaces every stored vector with the configured embedder's."""
        from groove_core.indexer import Indexer
        from groove_core.indexer import reembed as reembed_chunks
        from groove_core.store import Store, classify_error, sqlite_errors

        store = Store.create(target, self.index_label)
        try:
            embedded, started = 0, time.perf_counter()
            if reembed:
                batch = self.config.embedder.batch_size
                embedded = reembed_chunks(store, self.embedder, batch, progress)
            spent = time.perf_counter() - started
            report = Indexer(self.kb, self.config, store, self.embedder, progress).run()
            report.chunks_embedded += embedded
            report.seconds += spent
            report.embed_seconds += spent
            if outcome is not None:
                store.seal()
            return report
        except sqlite_errors() as err:
            # The batch in flight was rolled back: every file written before it is intact.
            intact = "Every file indexed before this point is intact."
            raise classify_error(err, self.index_label, "writing", outcome or intact) from None
        finally:
            store.close()

    def _rebuild(self, progress: ProgressFn | None, *, copy: bool = False) -> IndexReport:
        """Build into the staging file and swap it in; ``copy``: start from a copy of the
        index and re-embed it, instead of from empty."""
        from groove_core.store import StoreError, copy_index, staging_path, swap_in

        staging = staging_path(self.index_file)
        outcome = "The existing index was left as it was."
        try:
            if copy:
                copy_index(self.index_file, staging, self.index_label)
            report = self._index_into(staging, progress, outcome, reembed=copy)
            swap_in(staging, self.index_file, self.index_label)
        except StoreError as err:
            self._discard_staging(strict=False)
            if outcome in str(err):
                raise
            # e.g. the disk filled while the new file's schema was being created: say that
            # the old index is untouched, whichever step failed.
            raise type(err)(f"{err} {outcome}") from None
        except BaseException:
            self._discard_staging(strict=False)
            raise
        return report

    def _discard_staging(self, *, strict: bool) -> None:
        """Remove a staging file left by a killed or failed rebuild: a rebuild always
        starts afresh (``strict``: it must), other runs only tidy up."""
        from groove_core.store import StoreError, remove_index_files, staging_path

        try:
            remove_index_files(staging_path(self.index_file), self.index_label + ".new")
        except StoreError:
            if strict:
                raise

    def doctor(self, *, repair: bool = False) -> DoctorResult:
        """Check the index (SQLite integrity, the one-to-one agreements between documents,
        chunks, FTS rows and vectors, an unfinished index run); with ``repair``, fix what is
        wrong by re-indexing the affected documents, or rebuilding when the file itself is
        damaged. Environment problems (no space, read-only, permissions) are reported as
        such and never repaired by deleting or rebuilding the index."""
        from groove_core.store import StoreError

        self.close()
        self._discard_staging(strict=False)
        result = DoctorResult()
        self._diagnose(result, repair)
        if repair and result.problems and not result.environment:
            try:
                result.report = self.index(rebuild=result.rebuilt)
            except StoreError as err:
                result.environment.append(str(err))
            else:
                result.repaired = True
        return result

    def _diagnose(self, result: DoctorResult, repair: bool) -> None:
        from groove_core.store import (
            IndexEnvironmentError,
            Store,
            StoreError,
            check_consistency,
            classify_error,
            error_kind,
            repair_rows,
            sqlite_errors,
        )

        try:
            store = Store.open(self.index_file, self.index_label)
        except IndexEnvironmentError as err:
            result.environment.append(str(err))
            return
        except StoreError as err:
            if not self.index_file.exists():
                raise
            result.problems.append(str(err))
            result.rebuilt = True
            return
        try:
            found = check_consistency(store)
            result.problems.extend(_describe(found))
            result.environment.extend(found.environment)
            result.rebuilt = bool(found.integrity)
            incomplete = None if result.rebuilt else store.incomplete()
            result.problems.extend([incomplete] if incomplete else [])
            if repair and not found.integrity and not found.ok and not found.environment:
                result.reindexed = repair_rows(store, found)
        except sqlite_errors() as err:
            found_by = result.environment if error_kind(err) == "environment" else result.problems
            found_by.append(str(classify_error(err, self.index_label, "repairing")))
        finally:
            store.close()

    # -- searching -------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        limit: int | None = None,
        path: str | None = None,
        tags: Sequence[str] = (),
        options: Mapping[str, Any] | None = None,
    ) -> SearchResponse:
        return self.search_explained(query, limit=limit, path=path, tags=tags, options=options)[0]

    def search_explained(
        self,
        query: str,
        *,
        limit: int | None = None,
        path: str | None = None,
        tags: Sequence[str] = (),
        options: Mapping[str, Any] | None = None,
    ) -> tuple[SearchResponse, list[LegResult], QueryContext]:
        """The response, each leg's output, and the query context (for --explain)."""
        from groove_core.store import classify_error, sqlite_errors

        filters = SearchFilters(path=path or None, tags=tuple(t for t in tags if t))
        searcher = self.searcher()
        try:
            with searcher.store.snapshot():
                ctx = searcher.context(query, limit=limit, filters=filters, options=options)
                response, legs = searcher.run(ctx)
                return response, legs, ctx
        except sqlite_errors() as err:
            raise classify_error(err, self.index_label, "searching", suspect=True) from None

    def searcher(self) -> Searcher:
        """A :class:`Searcher` over this thread's index (stale hits marked against the KB)."""
        from groove_core.pipeline import Searcher

        return Searcher(self.plugins, self.store, self.embedder, kb=self.kb)


@dataclass
class DoctorResult:
    """What ``groove doctor`` found and, with ``repair``, what it did about it."""

    problems: list[str] = field(default_factory=list)  # what is wrong with the index
    #: What is wrong around it (no space, read-only, permissions): not damage, not repaired.
    environment: list[str] = field(default_factory=list)
    rebuilt: bool = False  # the file is damaged: (to be) rebuilt beside and swapped in
    reindexed: list[str] = field(default_factory=list)
    repaired: bool = False
    report: IndexReport | None = None

    @property
    def healthy(self) -> bool:
        return not self.problems and not self.environment


def _describe(found: Consistency) -> list[str]:
    problems = [f"SQLite integrity: {msg}" for msg in found.integrity]
    for label, ids in [
        ("FTS rows without a chunk", found.fts_orphans),
        ("vectors without a chunk", found.vec_orphans),
        ("chunks without an FTS row", found.chunks_without_fts),
        ("chunks without a vector", found.chunks_without_vec),
        ("chunks without a document", found.chunks_without_doc),
        ("word-leg rows without a chunk", found.word_orphans),
        ("chunks without a word-leg row", found.chunks_without_word),
        ("links of documents no longer indexed", found.link_orphans),
    ]:
        if ids:
            problems.append(f"{len(ids)} {label}")
    return problems
