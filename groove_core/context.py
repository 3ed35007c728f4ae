"""The one frozen object every stage of a query receives."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import numpy as np
    import structlog
    from pydantic import BaseModel

    from groove_core.config import GrooveConfig
    from groove_core.embedding import Embedder
    from groove_core.models import SearchFilters
    from groove_core.query import ParsedQuery
    from groove_core.storage import SearchStore


@dataclass(frozen=True)
class SearchOption:
    """A per-query switch a plugin adds to the CLI and the MCP ``search`` tool."""

    name: str  # snake_case; CLI flag --name (dashes), MCP parameter name
    type: Literal["bool", "str", "int", "float"]
    help: str
    plugin: str = ""
    # The values a remote caller (an MCP client) may give, read from the configuration; None
    # lets it give any value of the type. The CLI is not restricted: the user at the terminal
    # is the one who writes groove.toml anyway. E.g. a model name, so that an agent can pick
    # among the configured models but never make the server load (or download) another.
    choices: Callable[[GrooveConfig], Sequence[str]] | None = None


@dataclass(frozen=True)
class QueryContext:
    """Everything a stage may read about the query being run. Never mutated, except
    through :meth:`note`, the one channel from stages back to the response."""

    query: ParsedQuery
    limit: int
    leg_size: int
    filters: SearchFilters
    store: SearchStore  # the index, read-only (groove_core.storage)
    config: GrooveConfig
    embedder: Embedder
    options: Mapping[str, Any]
    log: structlog.typing.FilteringBoundLogger
    plugin_settings: Mapping[str, BaseModel] = field(default_factory=dict)
    pool_size: int = 0
    # Response-level notes stages add (e.g. "reranked only the first 12 of 50 candidates
    # within the time budget"); they reach the response's ``warnings``.
    notes: list[str] = field(default_factory=list, compare=False)
    # Lazily computed, shared by the legs (the vector leg and e.g. MMR reuse it).
    _query_vector: Callable[[], np.ndarray] | None = None

    def note(self, message: str) -> None:
        """Tell the user something about this query's results (shown with the results)."""
        self.notes.append(message)

    def flag(self, name: str) -> bool | None:
        """The per-query boolean option ``name`` (see ``groove_search_options``), or None
        when the caller did not give it, so the stage falls back to its config.

        Raises QueryError for a value that is not true/false (an MCP client can send any
        JSON), so every stage rejects bad switches with the same message.
        """
        from groove_core.query import QueryError

        given = self.options.get(name)
        if given is not None and not isinstance(given, bool):
            raise QueryError(f"option {name!r} must be true or false, got {given!r}")
        return given

    def plugin_config(self, name: str) -> BaseModel | None:
        """The validated ``[plugin.<name>]`` section, or None when the plugin declares none."""
        return self.plugin_settings.get(name)

    def query_vector(self) -> np.ndarray:
        """The embedding of ``query.embed_text`` (computed once per query)."""
        assert self._query_vector is not None
        return self._query_vector()

    @functools.cached_property
    def _excluded(self) -> frozenset[int]:
        expr = self.query.negative_expr
        return frozenset() if expr is None else self.store.fts_ids(expr)

    @functools.cached_property
    def _allowed(self) -> frozenset[int] | None:
        from groove_core.filters import allowed_chunk_ids

        return allowed_chunk_ids(self.store, self.filters)

    def allowed_ids(self) -> frozenset[int] | None:
        """Chunk ids the filters allow, or None without filters (computed once per query)."""
        return self._allowed

    def excluded_ids(self) -> frozenset[int]:
        """Chunk ids the query's exclusions match in FTS5 (empty without exclusions).

        Run at most once per query, and only when there are negatives (ADR-0011).
        """
        return self._excluded
