"""The MCP server: groove's tools for LLM agents, assembled from the enabled plugins.

Built-in tools: ``search``, ``get_document``, ``list_documents``, ``related``,
``index_status``. Plugins add parameters to ``search`` (``groove_search_options``) and tools
of their own (``groove_mcp_tools``), so the tool list always matches ``groove plugins list``.

Every response is JSON text plus the same object as structured content, kept under a size
budget (:mod:`groove_core.mcp.budget`); bad calls become MCP tool errors with a message an
LLM can act on (:mod:`groove_core.mcp.tools`). See docs/mcp.md.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from groove_core import __version__
from groove_core.app import Groove
from groove_core.mcp.budget import DEFAULT_MAX_RESPONSE_CHARS, MIN_RESPONSE_CHARS
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
    unavailable_options,
    usable_options,
)
from groove_core.mcp.threads import GrooveThread, add_plugin_tools, server_app
from groove_core.mcp.tools import Tools, as_tool_errors

if TYPE_CHECKING:
    from groove_core.context import SearchOption
    from groove_core.several import NamedKb


def _add_search(
    server: MCPServer, tools: Tools, thread: GrooveThread, options: Sequence[SearchOption]
) -> None:
    body = as_tool_errors(tools.app, "search", tools.search)
    unavailable = unavailable_options(tools.app, options)

    async def search(**kwargs: Any) -> Any:
        # Refused here, on the event loop, before queueing behind other searches.
        for name, plugin in unavailable.items():
            if kwargs.get(name) is not None:
                raise ToolError(
                    f"parameter {name!r} (plugin {plugin}) cannot be used: the server's "
                    "configuration lists no values a client may choose; omit it"
                )
        return await thread.run(body, **kwargs)

    search.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        search_parameters(tools.app, options), return_annotation=SearchResult
    )
    server.add_tool(
        search,
        name="search",
        title="Search the knowledge base",
        description=SEARCH_DESCRIPTION,
        annotations=READ_ONLY,
    )


def _add_reading_tools(server: MCPServer, tools: Tools, thread: GrooveThread) -> None:
    get_body = as_tool_errors(tools.app, "get_document", tools.get_document)
    list_body = as_tool_errors(tools.app, "list_documents", tools.list_documents)
    status_body = as_tool_errors(tools.app, "index_status", tools.index_status)

    @server.tool(
        title="Read a document", description=GET_DOCUMENT_DESCRIPTION, annotations=READ_ONLY
    )
    async def get_document(
        path: Annotated[PathArg, Field(description="KB-relative path, e.g. 'notes/a.md'")],
        start_line: Annotated[int | None, Field(ge=1, description="first line (1-based)")] = None,
        end_line: Annotated[int | None, Field(ge=1, description="last line, inclusive")] = None,
        chunk_id: Annotated[int | None, Field(ge=0, description="a search hit's chunk_id")] = None,
        neighbours: Annotated[
            int,
            Field(
                ge=0,
                le=MAX_NEIGHBOURS,
                description=("with chunk_id: chunks to include before and after it"),
            ),
        ] = 1,
    ) -> DocumentResult:
        return await thread.run(get_body, path, start_line, end_line, chunk_id, neighbours)

    @server.tool(
        title="List documents", description=LIST_DOCUMENTS_DESCRIPTION, annotations=READ_ONLY
    )
    async def list_documents(
        path_prefix: Annotated[
            PathArg | None, Field(description="only paths starting with this")
        ] = None,
        tags: TagsArg = None,
        offset: Annotated[int, Field(ge=0, description="entries to skip")] = 0,
        limit: Annotated[int, Field(ge=1, le=MAX_LIST_LIMIT, description="page size")] = 100,
    ) -> ListResult:
        return await thread.run(list_body, path_prefix, tags, offset, limit)

    related_body = as_tool_errors(tools.app, "related", tools.related)

    @server.tool(title="Links of a note", description=RELATED_DESCRIPTION, annotations=READ_ONLY)
    async def related(
        path: Annotated[PathArg, Field(description="KB-relative path, e.g. 'notes/a.md'")],
        limit: Annotated[
            int, Field(ge=1, le=MAX_RELATED_LIMIT, description="links listed per direction")
        ] = 50,
    ) -> RelatedResult:
        return await thread.run(related_body, path, limit)

    @server.tool(title="Index status", description=INDEX_STATUS_DESCRIPTION, annotations=READ_ONLY)
    async def index_status() -> StatusResult:
        return await thread.run(status_body)


def build_mcp_server(
    app: Groove | Sequence[NamedKb],
    *,
    max_response_chars: int = DEFAULT_MAX_RESPONSE_CHARS,
    readers: int | None = None,
) -> MCPServer:
    """An MCP server for ``app``'s knowledge base with the tools of every enabled plugin;
    given several named KBs, one server for all of them (see :mod:`groove_core.mcp.several`).

    ``max_response_chars`` caps the JSON text of each built-in tool's response; ``readers``
    is the number of worker threads (each with its own index connection), by default the
    storage backend's (``IndexBackend.readers``).
    """
    if max_response_chars < MIN_RESPONSE_CHARS:
        raise ValueError(
            f"max_response_chars must be at least {MIN_RESPONSE_CHARS}, got {max_response_chars}"
        )
    if not isinstance(app, Groove):
        kbs = list(app)
        if len(kbs) > 1:
            from groove_core.mcp.several import build_several_server

            return build_several_server(kbs, max_response_chars)
        app = kbs[0].app
    own = server_app(app)
    thread = GrooveThread(app.backend.readers if readers is None else readers)
    server: MCPServer = MCPServer("groove", version=__version__, instructions=INSTRUCTIONS)
    options = usable_options(own)
    tools = Tools(own, max_response_chars, [o.name for o in options])
    _add_search(server, tools, thread, options)
    _add_reading_tools(server, tools, thread)
    add_plugin_tools(own, server, thread)
    return server
