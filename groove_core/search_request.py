"""A search request: the query and what shapes it, passed as one value from the front-ends
(the CLI, the MCP tools, a plugin's tools, several KBs) through the core to the pipeline.

:class:`SearchArgs` spells the keyword form once; every convenience entry point
(``Groove.search``, ``Searcher.context``, a plugin tool's ``app.search``) takes it and
builds the request with :meth:`SearchRequest.of`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack

from groove_core.models import SearchFilters


class SearchArgs(TypedDict, total=False):
    """A search's keyword arguments besides the query."""

    limit: int | None  # results wanted; None: ``[search] default_limit``
    path: str | None  # glob over KB-relative paths
    tags: Sequence[str]  # front-matter tags, all required
    options: Mapping[str, Any] | None  # per-query plugin options (``groove_search_options``)


@dataclass(frozen=True)
class SearchRequest:
    """One search: the query text, the results wanted, the filters and the options."""

    query: str
    limit: int | None = None
    filters: SearchFilters = field(default_factory=SearchFilters)
    options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, query: str | SearchRequest, **args: Unpack[SearchArgs]) -> SearchRequest:
        """A request from the keyword form (a request given is returned as it is)."""
        if isinstance(query, SearchRequest):
            if args:
                raise TypeError("give either a SearchRequest or keyword arguments, not both")
            return query
        tags = tuple(t for t in args.get("tags") or () if t)
        filters = SearchFilters(path=args.get("path") or None, tags=tags)
        return cls(query, args.get("limit"), filters, dict(args.get("options") or {}))
