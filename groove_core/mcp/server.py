"""The MCP server: groove's tools for LLM agents, for one knowledge base or several.

Built-in tools: ``search``, ``get_document``, ``list_documents``, ``related``,
``index_status``. Plugins add parameters to ``search`` (``groove_search_options``) and tools
of their own (``groove_mcp_tools``), so the tool list always matches ``groove plugins list``.

Each tool is registered once. With several KBs (``groove serve --kb a --kb b`` or ``--all``)
every tool takes a ``kb`` argument: an enum of the served names, never a path, so a client
can only reach what was served. ``search`` covers every KB by default and merges their
rankings (:mod:`groove_core.multi_kb`); the other tools need ``kb``, because the same path
may exist in two KBs. Every KB is served by the same worker pool, and every KB gets its
plugins' tools.

Every response is JSON text plus the same object as structured content, kept under a size
budget (:mod:`groove_core.mcp.budget`); bad calls become MCP tool errors with a message an
LLM can act on (:mod:`groove_core.mcp.tools`). See docs/mcp.md.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import structlog
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult

from groove_core import __version__
from groove_core.app import Groove
from groove_core.mcp.budget import DEFAULT_MAX_RESPONSE_CHARS, MIN_RESPONSE_CHARS, fit_search
from groove_core.mcp.protocol import GrooveServer
from groove_core.mcp.resources import DocumentSource, WatchBus, add_prompts
from groove_core.mcp.schemas import (
    GET_DOCUMENT_DESCRIPTION,
    GET_DOCUMENT_PARAMS,
    INDEX_STATUS_DESCRIPTION,
    INSTRUCTIONS,
    LIST_DOCUMENTS_DESCRIPTION,
    LIST_DOCUMENTS_PARAMS,
    READ_ONLY,
    RELATED_DESCRIPTION,
    RELATED_PARAMS,
    SEARCH_DESCRIPTION,
    DocumentResult,
    ListResult,
    RelatedResult,
    SearchResult,
    StatusResult,
    kb_parameter,
    search_parameters,
    unavailable_options,
    usable_options,
)
from groove_core.mcp.threads import WorkerPool, add_plugin_tools, named_tool, server_app
from groove_core.mcp.tools import Tools, as_tool_errors, kb_relative, result
from groove_core.multi_kb import NamedKb, check_same_embedder, search_kbs
from groove_core.search_request import SearchRequest

T = TypeVar("T")

_log = structlog.get_logger("groove.mcp")

MULTI_KB_NOTE = """
Several knowledge bases are served; `search` covers all of them unless you pass `kb`, and
every hit says which one it came from. The other tools need `kb` (the same path may exist in
two). The knowledge bases:
"""


def instructions(kbs: Sequence[NamedKb]) -> str:
    """The server's instructions; with several KBs, each one's name and description."""
    if len(kbs) == 1:
        return INSTRUCTIONS
    listed = "\n".join(f"- {kb.name}: {kb.description or '(no description)'}" for kb in kbs)
    return INSTRUCTIONS + MULTI_KB_NOTE + listed + "\n"


class ServedKbs:
    """The tools' bodies for every served KB (plain functions, run on the worker pool),
    each call routed to its KB's :class:`Tools`."""

    def __init__(
        self,
        kbs: Sequence[NamedKb],
        budget: int,
        option_names: Sequence[str],
        activity: Mapping[str, Callable[[], str | None]] | None = None,
    ) -> None:
        self.kbs = list(kbs)
        self.names = tuple(kb.name for kb in kbs)
        self.budget = budget
        self.option_names = tuple(option_names)
        self.tools = {
            kb.name: Tools(kb, budget, option_names, (activity or {}).get(kb.name)) for kb in kbs
        }

    @property
    def multi_kb(self) -> bool:
        return len(self.kbs) > 1

    def body(self, tool: str, kb: str | None) -> Callable[..., CallToolResult]:
        """``tool``'s body on ``kb`` (the only KB when one is served), errors in the
        client's terms."""
        if kb is None:
            return self.errors(tool, getattr(self.tools[self.names[0]], tool))
        tools = self.tools[self.served(kb)]
        return self.errors(tool, getattr(tools, tool), tools.app)

    def served(self, kb: str) -> str:
        """``kb``, a served name; the schema's enum already refuses others, this guards
        direct calls."""
        if kb not in self.tools:
            raise ToolError(f"unknown kb {kb!r}: one of {', '.join(map(repr, self.names))}")
        return kb

    def errors(
        self, tool: str, fn: Callable[..., T], app: Groove | None = None
    ) -> Callable[..., T]:
        """A tool's error handling, with every served KB's folders made relative."""
        body = as_tool_errors(app or self.kbs[0].app, tool, fn)
        if not self.multi_kb:
            return body

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> T:
            try:
                return body(*args, **kwargs)
            except ToolError as err:
                message = str(err)
                for kb in self.kbs:
                    message = kb_relative(kb.app, message)
                raise ToolError(message) from None

        return wrapper

    def search_kbs(
        self, query: str, limit: int, path: str | None, tags: list[str] | None, **options: Any
    ) -> CallToolResult:
        """``search`` over several KBs: every one, or the one ``kb`` names; each hit says
        which KB it is from."""
        kb = options.pop("kb", None)
        if kb is not None:
            self.served(kb)
        given = {k: v for k, v in options.items() if k in self.option_names and v is not None}
        chosen = [k for k in self.kbs if kb is None or k.name == kb]
        request = SearchRequest.of(query, limit=limit, path=path, tags=tags or (), options=given)
        payload = fit_search(search_kbs(chosen, request).to_json(), self.budget)
        _log.info("search", query=query[:200], kb=kb, results=len(payload["results"]))
        return result(payload)


def build_mcp_server(
    app: Groove | Sequence[NamedKb],
    *,
    max_response_chars: int = DEFAULT_MAX_RESPONSE_CHARS,
    readers: int | None = None,
    bus: WatchBus | None = None,
    activity: Mapping[str, Callable[[], str | None]] | None = None,
) -> MCPServer:
    """An MCP server for ``app``'s knowledge base, or for several named KBs, with the tools
    of every enabled plugin.

    ``max_response_chars`` caps the JSON text of each built-in tool's response; ``readers``
    is the number of worker threads (each with its own index connection to each KB), by
    default the storage backend's (``IndexBackend.readers``; with several KBs the smallest).
    ``bus`` carries change notifications to listening clients (``serve --watch`` publishes
    on it, :func:`groove_core.mcp.resources.change_events`); ``activity`` maps a served
    KB's name to the progress line of the re-index running for it (``index_status``).
    """
    if max_response_chars < MIN_RESPONSE_CHARS:
        raise ValueError(
            f"max_response_chars must be at least {MIN_RESPONSE_CHARS}, got {max_response_chars}"
        )
    given = [NamedKb.of(app)] if isinstance(app, Groove) else list(app)
    if not given:
        raise ValueError("no knowledge base to serve")
    if len(given) > 1:
        check_same_embedder(given)
    kbs = [NamedKb(kb.name, server_app(kb.app), kb.description) for kb in given]
    pool = WorkerPool(min(kb.app.backend.readers for kb in kbs) if readers is None else readers)
    server = GrooveServer(
        "groove",
        version=__version__,
        instructions=instructions(kbs),
        refused={"search": unavailable_options(kbs[0].app)},
        subscriptions=bus,
    )
    options = usable_options(kbs[0].app)
    served = ServedKbs(kbs, max_response_chars, [o.name for o in options], activity)
    _add_search(server, served, pool, options)
    _add_reading_tools(server, served, pool)
    add_plugin_tools(kbs, server, pool)
    server.documents = DocumentSource(kbs, pool, max_response_chars)
    add_prompts(server)
    return server


def _add_search(
    server: MCPServer, served: ServedKbs, pool: WorkerPool, options: Sequence[Any]
) -> None:
    app = served.kbs[0].app
    if served.multi_kb:
        body = served.errors("search", served.search_kbs)
    else:
        body = served.body("search", None)

    async def search(**kwargs: Any) -> Any:
        return await pool.run(body, **kwargs)

    params = search_parameters(app, options)
    title, description = "Search the knowledge base", SEARCH_DESCRIPTION
    if served.multi_kb:
        params = [*params[:4], kb_parameter(served.names, required=False), *params[4:]]
        title = "Search the knowledge bases"
        description += (
            "\n\n`kb` limits the search to one knowledge base; each result's `kb` says which "
            "one it is from."
        )
    search.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        params, return_annotation=SearchResult
    )
    server.add_tool(
        search, name="search", title=title, description=description, annotations=READ_ONLY
    )


#: The reading tools: name, title, description, parameters, output.
_READING_TOOLS: tuple[tuple[str, str, str, Sequence[inspect.Parameter], Any], ...] = (
    ("get_document", "Read a document", GET_DOCUMENT_DESCRIPTION, GET_DOCUMENT_PARAMS,
     DocumentResult),
    ("list_documents", "List documents", LIST_DOCUMENTS_DESCRIPTION, LIST_DOCUMENTS_PARAMS,
     ListResult),
    ("related", "Links of a note", RELATED_DESCRIPTION, RELATED_PARAMS, RelatedResult),
    ("index_status", "Index status", INDEX_STATUS_DESCRIPTION, (), StatusResult),
)  # fmt: skip


def _add_reading_tools(server: MCPServer, served: ServedKbs, pool: WorkerPool) -> None:
    kb_param = [kb_parameter(served.names, required=True)] if served.multi_kb else []
    for name, title, description, params, output in _READING_TOOLS:
        tool = named_tool(_reading(served, pool, name), name, [*kb_param, *params], output)
        server.add_tool(
            tool, name=name, title=title, description=description, annotations=READ_ONLY
        )


def _reading(served: ServedKbs, pool: WorkerPool, tool: str) -> Callable[..., Any]:
    async def call(**kwargs: Any) -> Any:
        body = served.body(tool, kwargs.pop("kb", None))
        return await pool.run(body, **kwargs)

    return call
