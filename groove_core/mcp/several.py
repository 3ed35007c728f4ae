"""One MCP server for several knowledge bases (``groove serve --kb a --kb b`` or ``--all``).

The tools are those of a one-KB server with a ``kb`` argument: an enum of the served names,
never a path, so a client can only reach what was served. ``search`` covers every KB by
default and merges their rankings (:mod:`groove_core.several`); the reading tools need
``kb``, because the same path may exist in two KBs. Every hit carries ``kb``, and the
server's instructions list each KB's name and description.
"""

# No `from __future__ import annotations`: the tools' signatures use the local `Kb` enum,
# which the MCP SDK must evaluate.

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal, TypeVar

import structlog
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult
from pydantic import Field

from groove_core import __version__
from groove_core.mcp.budget import fit_search
from groove_core.mcp.schemas import (
    GET_DOCUMENT_DESCRIPTION,
    INDEX_STATUS_DESCRIPTION,
    INSTRUCTIONS,
    LIST_DOCUMENTS_DESCRIPTION,
    MAX_LIST_LIMIT,
    MAX_NEIGHBOURS,
    MAX_RELATED_LIMIT,
    READ_ONLY,
    RELATED_DESCRIPTION,
    SEARCH_DESCRIPTION,
    DocumentResult,
    ListResult,
    PathArg,
    RelatedResult,
    SearchResult,
    StatusResult,
    TagsArg,
    search_parameters,
    usable_options,
)
from groove_core.mcp.threads import GrooveThread, add_plugin_tools, server_app
from groove_core.mcp.tools import Tools, as_tool_errors, kb_relative, result
from groove_core.several import NamedKb, check_same_embedder, search_several

T = TypeVar("T")

_log = structlog.get_logger("groove.mcp")

SEVERAL_NOTE = """
Several knowledge bases are served; `search` covers all of them unless you pass `kb`, and
every hit says which one it came from. The other tools need `kb` (the same path may exist in
two). The knowledge bases:
"""


def instructions(kbs: Sequence[NamedKb]) -> str:
    listed = "\n".join(f"- {kb.name}: {kb.description or '(no description)'}" for kb in kbs)
    return INSTRUCTIONS + SEVERAL_NOTE + listed + "\n"


class _Several:
    """The tools' bodies over every served KB (run on the one worker thread)."""

    def __init__(self, kbs: Sequence[NamedKb], budget: int, option_names: Sequence[str]) -> None:
        self.kbs = [NamedKb(kb.name, server_app(kb.app), kb.description) for kb in kbs]
        self.budget = budget
        self.tools = {kb.name: Tools(kb.app, budget, option_names) for kb in self.kbs}
        self.option_names = tuple(option_names)

    def one(self, kb: str) -> Tools:
        # The schema's enum already refuses other names; this guards direct calls.
        if kb not in self.tools:
            raise ToolError(f"unknown kb {kb!r}: one of {', '.join(self.tools)}")
        return self.tools[kb]

    def search(
        self,
        query: str,
        limit: int,
        path: str | None,
        tags: list[str] | None,
        kb: str | None = None,
        **options: Any,
    ) -> CallToolResult:
        given = {k: v for k, v in options.items() if k in self.option_names and v is not None}
        chosen = [k for k in self.kbs if kb is None or k.name == kb]
        response = search_several(
            chosen, query, limit=limit, path=path, tags=tags or (), options=given
        )
        payload = fit_search(response.to_json(), self.budget)
        _log.info("search", query=query[:200], kb=kb, results=len(payload["results"]))
        return result(payload)


def _errors(kbs: Sequence[NamedKb], name: str, fn: Callable[..., T]) -> Callable[..., T]:
    """A one-KB server's error handling, with every served KB's folders made relative."""
    body = as_tool_errors(kbs[0].app, name, fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return body(*args, **kwargs)
        except ToolError as err:
            message = str(err)
            for kb in kbs[1:]:
                message = kb_relative(kb.app, message)
            raise ToolError(message) from None

    return wrapper


def build_several_server(kbs: Sequence[NamedKb], max_response_chars: int) -> MCPServer:
    check_same_embedder(kbs)
    # One worker: these apps' embedders are not behind the reader pool's lock (the
    # single-KB server's server_app), so several KBs are served one call at a time.
    thread = GrooveThread(1)
    server: MCPServer = MCPServer("groove", version=__version__, instructions=instructions(kbs))
    options = usable_options(kbs[0].app)
    several = _Several(kbs, max_response_chars, [o.name for o in options])
    names = tuple(kb.name for kb in several.kbs)
    _add_search(server, several, thread, options, names)
    _add_reading(server, several, thread, names)
    first = several.kbs[0]
    # A plugin's tools are registered once, for the first KB: two registrations of one
    # tool name would clash (docs/several-kbs.md).
    add_plugin_tools(first.app, server, thread)
    return server


def _add_search(
    server: MCPServer,
    several: _Several,
    thread: GrooveThread,
    options: Sequence[Any],
    names: tuple[str, ...],
) -> None:
    body = _errors(several.kbs, "search", several.search)

    async def search(**kwargs: Any) -> Any:
        return await thread.run(body, **kwargs)

    params = search_parameters(several.kbs[0].app, options)
    kb_param = inspect.Parameter(
        "kb",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            Literal[names] | None,
            Field(
                description=f"search only this knowledge base (default: all of {', '.join(names)})"
            ),
        ],
    )
    search.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [*params[:4], kb_param, *params[4:]], return_annotation=SearchResult
    )
    server.add_tool(
        search,
        name="search",
        title="Search the knowledge bases",
        description=SEARCH_DESCRIPTION + "\n\n`kb` limits the search to one knowledge base; "
        "each result's `kb` says which one it is from.",
        annotations=READ_ONLY,
    )


def _add_reading(
    server: MCPServer, several: _Several, thread: GrooveThread, names: tuple[str, ...]
) -> None:
    Kb = Annotated[Literal[names], Field(description="which knowledge base")]  # type: ignore[valid-type]
    kbs = several.kbs

    def on(kb: str, tool: str) -> Callable[..., Any]:
        return _errors(kbs, tool, getattr(several.one(kb), tool))

    @server.tool(
        title="Read a document", description=GET_DOCUMENT_DESCRIPTION, annotations=READ_ONLY
    )
    async def get_document(
        kb: Kb,
        path: Annotated[PathArg, Field(description="KB-relative path, e.g. 'notes/a.md'")],
        start_line: Annotated[int | None, Field(ge=1, description="first line (1-based)")] = None,
        end_line: Annotated[int | None, Field(ge=1, description="last line, inclusive")] = None,
        chunk_id: Annotated[int | None, Field(ge=0, description="a search hit's chunk_id")] = None,
        neighbours: Annotated[
            int,
            Field(ge=0, le=MAX_NEIGHBOURS, description="with chunk_id: chunks before and after it"),
        ] = 1,
    ) -> DocumentResult:
        body = on(kb, "get_document")
        return await thread.run(body, path, start_line, end_line, chunk_id, neighbours)

    @server.tool(
        title="List documents", description=LIST_DOCUMENTS_DESCRIPTION, annotations=READ_ONLY
    )
    async def list_documents(
        kb: Kb,
        path_prefix: Annotated[
            PathArg | None, Field(description="only paths starting with this")
        ] = None,
        tags: TagsArg = None,
        offset: Annotated[int, Field(ge=0, description="entries to skip")] = 0,
        limit: Annotated[int, Field(ge=1, le=MAX_LIST_LIMIT, description="page size")] = 100,
    ) -> ListResult:
        body = on(kb, "list_documents")
        return await thread.run(body, path_prefix, tags, offset, limit)

    @server.tool(title="Links of a note", description=RELATED_DESCRIPTION, annotations=READ_ONLY)
    async def related(
        kb: Kb,
        path: Annotated[PathArg, Field(description="KB-relative path, e.g. 'notes/a.md'")],
        limit: Annotated[
            int, Field(ge=1, le=MAX_RELATED_LIMIT, description="links listed per direction")
        ] = 50,
    ) -> RelatedResult:
        return await thread.run(on(kb, "related"), path, limit)

    @server.tool(title="Index status", description=INDEX_STATUS_DESCRIPTION, annotations=READ_ONLY)
    async def index_status(kb: Kb) -> StatusResult:
        return await thread.run(on(kb, "index_status"))
