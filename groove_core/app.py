"""The application facade the CLI and the MCP server share: one KB, its config, its plugins."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from groove_core.config import ConfigError, GrooveConfig, index_path, load_config
from groove_core.models import SearchResponse
from groove_core.plugins import Plugins, make_plugin_manager
from groove_core.search_request import SearchArgs, SearchRequest

if TYPE_CHECKING:
    from groove_core.backend import BuildMode, IndexBackend
    from groove_core.context import QueryContext
    from groove_core.embedding import Embedder
    from groove_core.index_report import IndexReport, ProgressFn
    from groove_core.models import LegResult
    from groove_core.pipeline import Searcher
    from groove_core.storage import IndexStore


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
            raise ConfigError(_no_folder(kb))
        config = load_config(kb, config_path)
        plugins = make_plugin_manager(config, extra=extra_plugins, entry_points=entry_points)
        return cls(kb, config, plugins)

    @property
    def plugins_installed(self) -> bool:
        """Whether a child process can build this KB's embedder from its configuration
        alone (every plugin is a built-in or installed one)."""
        return self.plugins.installed_only

    @property
    def own_name(self) -> str:
        """The name the KB gives itself (``[kb] name``, else its folder's name). Results
        and the MCP tools name a KB by its registered name first
        (:meth:`groove_core.multi_kb.NamedKb.of`); a storage backend keys the KB's rows by
        this one, which registering the KB under another name must not change."""
        return self.config.kb.name or self.kb.resolve().name or "kb"

    @cached_property
    def public_name(self) -> str:
        """The name results, messages and the MCP tools give the KB: its registered name,
        else :attr:`own_name` (:meth:`groove_core.multi_kb.NamedKb.of`)."""
        from groove_core.config import ConfigError
        from groove_core.registry import registered_entry

        try:
            entry = registered_entry(self.kb)
        except ConfigError:  # a damaged registry is said where it is read for itself
            entry = None
        return entry.name if entry else self.own_name

    @property
    def index_file(self) -> Path:
        return index_path(self.kb, self.config)

    @cached_property
    def embedder(self) -> Embedder:
        return self.plugins.make_embedder()

    @property
    def index_label(self) -> str:
        """The index as messages name it (for SQLite, the file, KB-relative when inside)."""
        return self.backend.label

    @cached_property
    def backend(self) -> IndexBackend:
        """The storage backend ``[store] backend`` names (docs/storage-backends.md)."""
        return self._make_backend(self.config.store.backend)

    def _make_backend(self, name: str, asked_by: str | None = None) -> IndexBackend:
        from groove_core.backend import BackendContext

        specs = self.plugins.backend_specs()
        if name not in specs:
            known = ", ".join(sorted(specs)) or "none"
            where = f"[store] backend = {name!r} in {self.config.source or 'groove.toml'}"
            raise ConfigError(
                f"{asked_by or where}: no enabled plugin provides the storage backend "
                f"{name!r} (available: {known}; `groove plugins list` shows the installed "
                "plugins)"
            )
        ctx = BackendContext(
            self.kb,
            self.config,
            self.plugins.settings,
            self.own_name,
            self.index_file,
            {name: self.plugins.leg_indexes(name)},
            self.public_name,
        )
        return specs[name].factory(ctx)

    @property
    def store(self) -> IndexStore:
        """This thread's open index, reopened when it was replaced since (``index
        --rebuild`` or a doctor rebuild in another process): one stat per access for
        SQLite. Never inside a read transaction, so one search always reads one index."""
        current: IndexStore | None = getattr(self._local, "store", None)
        if current is not None and not current.in_transaction and not self.backend.current(current):
            import structlog  # ~70 ms to import; only a long-lived server gets here

            structlog.get_logger("groove").info("index replaced: reopening", index=self.index_label)
            self.close()
            current = None
        if current is None:
            current = self._open_store()
            self._local.store = current
        return current

    def _open_store(self) -> IndexStore:
        store = self.backend.open()
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
        copy_from: str | None = None,
        progress: ProgressFn | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> IndexReport:
        """Index the KB incrementally. ``rebuild`` builds a new index beside the old one
        and ``reembed`` re-embeds a copy of it with the configured embedder (after a change
        of embedder), ``copy_from`` copies the KB's index in another backend (vectors
        included); each swaps the new one in only when complete, so a failed or killed
        run changes nothing and the old index serves searches meanwhile. An update writes
        every changed file searchable first and embeds it after (ADR-0015); ``stop``, asked
        between batches of that vector pass, ends it early, leaving the rest to the next
        run."""
        if sum([rebuild, reembed, copy_from is not None]) > 1:
            raise ConfigError("--rebuild, --reembed and --copy-from exclude each other: give one")
        self.close()
        self.backend.tidy(strict=rebuild or reembed or copy_from is not None)
        if copy_from is not None:
            return self._copy_from(copy_from, progress)
        mode: BuildMode = "rebuild" if rebuild else "reembed" if reembed else "update"
        return self.backend.build(
            lambda store: self._run_indexer(store, mode, progress, stop), mode
        )

    def _copy_from(self, name: str, progress: ProgressFn | None) -> IndexReport:
        """Rebuild this KB's index from its index in the backend ``name`` (vectors copied,
        not re-embedded), then bring it up to date with the files as usual."""
        from groove_core.transfer import copy_documents

        if name == self.config.store.backend:
            raise ConfigError(f"--copy-from {name}: that is the configured backend already")
        source_backend = self._make_backend(name, f"--copy-from {name}")
        if not source_backend.exists():
            raise ConfigError(
                f"--copy-from {name}: the KB has no index there ({source_backend.label})"
            )

        def work(target: IndexStore) -> IndexReport:
            started = time.perf_counter()
            source = source_backend.open()
            try:
                with source.snapshot():
                    copied = copy_documents(source, target)
            finally:
                source.close()
            report = self._run_indexer(target, "update", progress)
            report.copied = copied
            report.seconds = time.perf_counter() - started
            return report

        return self.backend.build(work, "rebuild")

    def _run_indexer(
        self,
        store: IndexStore,
        mode: BuildMode,
        progress: ProgressFn | None,
        stop: Callable[[], bool] | None = None,
    ) -> IndexReport:
        """The indexer over an open, writable index; a re-embed first replaces every stored
        vector with the configured embedder's."""
        from groove_core.embed_worker import run_embedder
        from groove_core.indexer import Indexer
        from groove_core.vector_pass import reembed as reembed_chunks

        embedded, started = 0, time.perf_counter()
        warnings: list[tuple[str, str]] = []
        if mode == "reembed":
            batch = self.config.embedder.batch_size
            with run_embedder(
                self.config,
                self.embedder,
                allowed=self.plugins_installed,
                work_bytes=0,
                waiting=lambda: store.counts()["chunks"],
                warnings=warnings,
            ) as embedder:
                embedded = reembed_chunks(
                    store, embedder, batch, progress, name=self.config.embedder.name
                )
        spent = time.perf_counter() - started
        loaders = self.plugins.loaders()
        report = Indexer(
            self.kb,
            self.config,
            store,
            self.embedder,
            progress,
            stop,
            loaders,
            own_process=self.plugins_installed,
        ).run()
        report.chunks_embedded += embedded
        report.warnings[:0] = warnings
        report.seconds += spent
        report.embed_seconds += spent
        return report

    def doctor(self, *, repair: bool = False) -> DoctorResult:
        """Check the index (for SQLite: integrity, the one-to-one agreements between
        documents, chunks, FTS rows and vectors, an unfinished index run); with ``repair``,
        fix what is wrong by re-indexing the affected documents, or rebuilding when the
        index itself is damaged. Environment problems (no space, read-only, permissions)
        are reported as such and never repaired by deleting or rebuilding the index."""
        from groove_core.storage import StoreError

        self.close()
        self.backend.tidy(strict=False)
        if not self.backend.exists():
            name = self.public_name
            given = name if name != self.own_name else str(self.kb)  # a registered name
            raise StoreError(
                f"the knowledge base {name!r} ({self.kb}) has no index yet "
                f"({self.index_label}): run 'groove index {given}' first"
            )
        found = self.backend.diagnose(repair=repair)
        result = DoctorResult(
            found.problems,
            found.environment,
            found.rebuild,
            found.reindexed,
            skipped=found.skipped,
            notes=found.notes,
        )
        if repair and result.problems and not result.environment:
            try:
                result.report = self.index(rebuild=result.rebuilt)
            except StoreError as err:
                result.environment.append(str(err))
            else:
                result.repaired = True
        return result

    # -- searching -------------------------------------------------------------------------

    def search(self, query: str | SearchRequest, **args: Unpack[SearchArgs]) -> SearchResponse:
        return self.search_explained(query, **args)[0]

    def search_explained(
        self, query: str | SearchRequest, **args: Unpack[SearchArgs]
    ) -> tuple[SearchResponse, list[LegResult], QueryContext]:
        """The response, each leg's output, and the query context (for --explain)."""
        request = SearchRequest.of(query, **args)
        searcher = self.searcher()
        try:
            with searcher.store.snapshot():
                ctx = searcher.context(request)
                response, legs = searcher.run(ctx)
                return response, legs, ctx
        except self.backend.errors() as err:
            raise self.backend.classify(err, "searching", suspect=True) from None

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
    rebuilt: bool = False  # the index is damaged: (to be) rebuilt beside and swapped in
    reindexed: list[str] = field(default_factory=list)
    repaired: bool = False
    report: IndexReport | None = None
    #: Checks left out because they write and the index is read-only (not a problem).
    skipped: list[str] = field(default_factory=list)
    #: What is not a problem but worth knowing (chunks still waiting for a vector).
    notes: list[str] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not self.problems and not self.environment


def _no_folder(kb: Path) -> str:
    """Why ``kb`` names no knowledge base: a word that is neither a registered name nor a
    folder gets the registered names, the likelier thing a user meant."""
    from groove_core.registry import is_plain_name, load_registry

    message = f"knowledge base folder {kb} does not exist or is not a folder"
    if not is_plain_name(str(kb)):
        return message
    try:
        names = sorted(load_registry())
    except ConfigError:
        return message
    known = f"registered: {', '.join(names)}" if names else "none is registered"
    return f"no knowledge base named {str(kb)!r} ({known}) and no folder {kb}"
