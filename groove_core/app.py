"""The application facade the CLI and the MCP server share: one KB, its config, its plugins."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from groove_core.config import ConfigError, GrooveConfig, index_path, load_config
from groove_core.models import SearchFilters, SearchResponse
from groove_core.plugins import Plugins, make_plugin_manager

if TYPE_CHECKING:
    from groove_core.embedding import Embedder
    from groove_core.indexer import IndexReport, ProgressFn
    from groove_core.models import LegResult
    from groove_core.store import Consistency, Store


class Groove:
    """A knowledge base ready to index and search. Cheap to build; heavy parts are lazy."""

    def __init__(self, kb: Path, config: GrooveConfig, plugins: Plugins) -> None:
        self.kb = kb
        self.config = config
        self.plugins = plugins

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

    @cached_property
    def store(self) -> Store:
        from groove_core.store import Store

        store = Store.open(self.index_file)
        store.check_embedder(self.embedder.identity)
        return store

    def close(self) -> None:
        if "store" in self.__dict__:
            self.store.close()
            del self.__dict__["store"]

    # -- indexing --------------------------------------------------------------------------

    def index(self, *, rebuild: bool = False, progress: ProgressFn | None = None) -> IndexReport:
        from groove_core.indexer import Indexer
        from groove_core.store import Store

        self.close()
        if rebuild:
            remove_index(self.index_file)
        from groove_core.store import StoreError, sqlite_errors

        store = Store.create(self.index_file)
        try:
            return Indexer(self.kb, self.config, store, self.embedder, progress).run()
        except sqlite_errors() as err:
            # Disk full, a read-only file, I/O errors: the batch in flight was rolled back,
            # so the index holds every file written before it, consistently.
            raise StoreError(
                f"writing the index {self.index_file} failed: {err}. Every file indexed "
                "before this point is intact; fix the cause (free disk space, permissions) "
                "and run 'groove index' again, or 'groove doctor' to check it"
            ) from None
        finally:
            store.close()

    def doctor(self, *, repair: bool = False) -> DoctorResult:
        """Check the index (SQLite integrity and the one-to-one agreements between
        documents, chunks, FTS rows and vectors); with ``repair``, fix what is wrong by
        re-indexing the affected documents, or rebuilding when the file itself is damaged."""
        from groove_core.store import Store, StoreError, check_consistency, repair_rows

        self.close()
        result = DoctorResult()
        found = None
        try:
            store = Store.open(self.index_file)
        except StoreError as err:
            if not self.index_file.exists():
                raise
            result.problems.append(str(err))
        else:
            try:
                found = check_consistency(store)
                result.problems.extend(_describe(found))
                if repair and found.integrity == () and not found.ok:
                    result.reindexed = repair_rows(store, found)
            finally:
                store.close()
        if repair and result.problems:
            result.rebuilt = found is None or bool(found.integrity)
            result.report = self.index(rebuild=result.rebuilt)
        return result

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
    ) -> tuple[SearchResponse, list[LegResult], Any]:
        """The response, each leg's output, and the query context (for --explain)."""
        from groove_core.pipeline import build_context, run

        filters = SearchFilters(path=path or None, tags=tuple(t for t in tags if t))
        with self.store.snapshot():
            ctx = build_context(
                self.plugins,
                self.store,
                self.embedder,
                query,
                limit=self.config.search.default_limit if limit is None else limit,
                filters=filters,
                options=options or {},
            )
            response, legs = run(ctx, self.plugins)
            return self._mark_stale(response), legs, ctx

    def _mark_stale(self, response: SearchResponse) -> SearchResponse:
        """Flag hits whose file changed on disk after indexing (one stat per hit)."""
        recorded = self.store.file_states([h.path for h in response.results])
        results = []
        for hit in response.results:
            try:
                st = (self.kb / hit.path).stat()
                now: tuple[int, int] | None = (st.st_size, st.st_mtime_ns)
            except OSError:
                now = None
            stale = now != recorded.get(hit.path)
            results.append(replace(hit, stale=True) if stale else hit)
        return replace(response, results=tuple(results))


@dataclass
class DoctorResult:
    """What ``groove doctor`` found and, with ``repair``, what it did about it."""

    problems: list[str] = field(default_factory=list)
    rebuilt: bool = False
    reindexed: list[str] = field(default_factory=list)
    report: IndexReport | None = None

    @property
    def healthy(self) -> bool:
        return not self.problems


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
    ]:
        if ids:
            problems.append(f"{len(ids)} {label}")
    return problems


def remove_index(path: Path) -> None:
    """Delete an index file and its WAL companions (``--rebuild``)."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        target = Path(f"{path}{suffix}")
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            os.unlink(target)
