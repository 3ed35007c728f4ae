"""The MCP server: groove's tools for LLM agents, assembled from the enabled plugins.

Built-in tools: ``search``, ``get_document``, ``list_documents``, ``index_status``. Plugins add
parameters to ``search`` (``groove_search_options``) and tools of their own
(``groove_mcp_tools``), so the tool list always matches ``groove plugins list``.

Every response is JSON text plus the same object as structured content, kept under a size
budget in characters (``max_response_chars``) so that an agent's tool-output cap is never
blown; whatever does not fit is reported (``truncated``, ``omitted_*``), never dropped
silently. Bad calls become MCP tool errors with a message an LLM can act on.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import structlog
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from groove_core import __version__
from groove_core.kb_files import (
    DocumentError,
    changes_on_disk,
    iso_time,
    read_text,
    resolve_markdown,
)

if TYPE_CHECKING:
    from groove_core.app import Groove
    from groove_core.context import SearchOption

T = TypeVar("T")

DEFAULT_MAX_RESPONSE_CHARS = 40_000
#: Below this even one result's metadata might not fit, so truncation could not be explicit.
MIN_RESPONSE_CHARS = 2_000
MAX_LIMIT = 200
MAX_LIST_LIMIT = 1_000
MAX_NEIGHBOURS = 20

_log = structlog.get_logger("groove.mcp")

_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

INSTRUCTIONS = """\
groove searches a Markdown knowledge base (notes and documents, Japanese and English).
Start with `search`; read around a hit with `get_document(path, chunk_id=...)`; browse with
`list_documents`; check freshness with `index_status`. Responses are capped in size: when
`truncated` is true, narrow the request (lower `limit`, a line range) instead of repeating it.
"""

SEARCH_DESCRIPTION = """\
Search the knowledge base by meaning and by text at once (hybrid: vectors + full text,
fused with reciprocal rank fusion) and return the best passages (chunks), best first.
Each result has path, title, heading_path, content, score (larger is better; compare only
within one response), rank, chunk_id, line_start/line_end and match_spans (UTF-8 byte
offsets of matched text in content).

Query syntax:
- Plain words or a natural-language question, in Japanese or English.
- "quoted phrase" searches that exact text.
- -word or -"phrase" excludes results containing it (in heading, title or content).
  A query made only of exclusions is rejected.
- Full-text matching works on pieces of 3+ characters: shorter words (AI, ML, Go) count
  only for meaning-based matching unless you quote a wider span ("AI について").
  Case and full/half width are ignored.

Filters: `path` is a glob over KB-relative paths ('docs/**', '*.md', or a folder such as
'notes/ops'); `tags` keeps files carrying every listed front-matter tag.

Response: {results, low_confidence, filter_applied, truncated, omitted_results,
omitted_chars}. low_confidence=true means nothing matched strongly: rephrase, use other
words or drop filters. truncated=true means results or text were left out to stay under
the response size budget: lower `limit` or read files with get_document."""

GET_DOCUMENT_DESCRIPTION = """\
Read a Markdown file of the knowledge base for follow-up after search: the whole file,
a line range (start_line/end_line, 1-based, inclusive), or the neighbourhood of a search
hit (chunk_id from a search result, plus `neighbours` chunks on each side).
`path` is KB-relative, exactly as search and list_documents return it.
If the text exceeds the response size budget it is cut at a line boundary, truncated=true,
and next_start_line says where to continue."""

LIST_DOCUMENTS_DESCRIPTION = """\
List the indexed Markdown files: path, title, tags and number of chunks, sorted by path.
Filter by `path_prefix` (e.g. 'notes/') and `tags` (all required, case-insensitive).
Paginated: pass next_offset back as `offset` to get the next page (null at the end)."""

INDEX_STATUS_DESCRIPTION = """\
Report the state of the search index: number of documents and chunks, the embedder,
when it was last indexed, the enabled plugins, and which Markdown files were added,
modified or deleted on disk since (if any, results may be stale until 'groove index'
runs again)."""


# -- structured output schemas -----------------------------------------------------------


class ExpandedRangeOut(BaseModel):
    line_start: int
    line_end: int
    byte_start: int
    byte_end: int


class HitOut(BaseModel):
    """One search result."""

    path: str = Field(description="KB-relative path of the file")
    title: str
    heading: str
    heading_path: list[str] = Field(description="headings from the top of the file to the hit")
    level: int
    content: str = Field(description="the passage text (possibly expanded by a plugin)")
    score: float = Field(description="relevance; larger is better, comparable within a response")
    rank: int
    chunk_id: int = Field(description="pass to get_document to read around this hit")
    line_start: int
    line_end: int
    tags: list[str]
    match_spans: list[list[int]] = Field(description="[start, end) UTF-8 byte offsets in content")
    expanded_from: list[ExpandedRangeOut] | None = None
    content_truncated: bool = Field(False, description="content was cut to fit the budget")


class Truncation(BaseModel):
    truncated: bool = Field(description="true when something was left out to fit the budget")
    note: str | None = Field(None, description="what was left out and how to get it")


class SearchOut(Truncation):
    results: list[HitOut]
    low_confidence: bool = Field(description="true when nothing matched the query strongly")
    filter_applied: dict[str, Any] | None = Field(description="the active filters, or null")
    warnings: list[str] = Field(default_factory=list, description="e.g. a query cut at 32 phrases")
    omitted_results: int = Field(description="results left out to fit the budget")
    omitted_chars: int = Field(description="characters cut from the last result's content")


class DocumentOut(Truncation):
    path: str
    title: str | None = Field(description="the indexed title, or null when not indexed yet")
    tags: list[str]
    indexed: bool = Field(description="whether the file is in the search index")
    changed_since_index: bool | None = Field(description="file differs from its indexed version")
    total_lines: int
    line_start: int = Field(description="first line returned (1-based)")
    line_end: int = Field(description="last line returned, inclusive")
    content: str
    chunk_id: int | None = None
    omitted_chars: int = Field(description="characters of the requested range not returned")
    next_start_line: int | None = Field(description="where to continue reading, or null")


class DocumentEntry(BaseModel):
    path: str
    title: str
    tags: list[str]
    chunks: int


class DocumentListOut(Truncation):
    documents: list[DocumentEntry]
    total: int = Field(description="documents matching the filters, over all pages")
    offset: int
    next_offset: int | None = Field(description="offset of the next page, or null at the end")


class ChangesOut(BaseModel):
    up_to_date: bool
    added_count: int
    modified_count: int
    deleted_count: int
    added: list[str]
    modified: list[str]
    deleted: list[str]


class EmbedderOut(BaseModel):
    name: str
    identity: str | None
    dim: int | None


class StatusOut(BaseModel):
    kb: str
    index_file: str
    documents: int
    chunks: int
    embedder: EmbedderOut
    last_indexed: str | None = Field(description="ISO 8601 UTC time of the newest indexed file")
    plugins: list[str] = Field(description="enabled plugins")
    changes_on_disk: ChangesOut
    incomplete: bool = Field(False, description="an index run filling the index is unfinished")
    incomplete_note: str | None = Field(None, description="what is missing and how to finish it")


# -- the groove thread -------------------------------------------------------------------


class GrooveThread:
    """Runs every call into groove on one dedicated thread.

    The index connection (SQLite objects belong to the thread that made them) and the
    embedder are not shared across threads, while the event loop must stay free to serve
    other requests; one worker thread satisfies both. SQLite WAL still lets ``groove index``
    write from another process meanwhile.
    """

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="groove-mcp")

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        return await asyncio.wrap_future(self._pool.submit(fn, *args, **kwargs))

    def on_thread(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """An async version of a sync tool function that runs it on this thread."""
        if inspect.iscoroutinefunction(fn):
            return fn

        @functools.wraps(fn)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            return await self.run(fn, *args, **kwargs)

        return wrapper


class PluginServer:
    """The server as ``groove_mcp_tools`` sees it: the real MCPServer, except that sync tools
    a plugin registers run on the groove thread, so they may call ``app.search`` safely.
    """

    def __init__(self, server: MCPServer, thread: GrooveThread) -> None:
        self._server = server
        self._thread = thread

    def add_tool(self, fn: Callable[..., Any], name: str | None = None, **kwargs: Any) -> None:
        self._server.add_tool(self._thread.on_thread(fn), name=name or fn.__name__, **kwargs)

    def tool(self, name: str | None = None, **kwargs: Any) -> Callable[[T], T]:
        if callable(name):
            raise TypeError("use @server.tool() with parentheses")

        def decorator(fn: T) -> T:
            self.add_tool(fn, name=name, **kwargs)  # type: ignore[arg-type]
            return fn

        return decorator

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._server, attr)


def _tool_errors() -> tuple[type[BaseException], ...]:
    from groove_core.config import ConfigError
    from groove_core.embedding import EmbedderError
    from groove_core.store import StoreError

    return (DocumentError, ConfigError, EmbedderError, StoreError)


def _as_tool_errors(fn: Callable[..., T]) -> Callable[..., T]:
    """Errors the caller can act on become MCP tool errors carrying groove's message."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        from groove_core.query import QueryError

        try:
            return fn(*args, **kwargs)
        except QueryError as err:
            raise ToolError(f"invalid query: {err}") from None
        except _tool_errors() as err:
            raise ToolError(str(err)) from None

    return wrapper


# -- the size budget ---------------------------------------------------------------------


def dumps(obj: Any) -> str:
    """The JSON text a client reads: compact, non-ASCII kept (one character per kana)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _largest(n: int, fits: Callable[[int], bool]) -> int:
    """The largest k in [0, n] with fits(k), for a fits that is true up to some k."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _clip_text(text: str, fits: Callable[[str], bool]) -> str:
    return text[: _largest(len(text), lambda k: fits(text[:k]))]


def _result(payload: dict[str, Any]) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=dumps(payload))], structured_content=payload
    )


def fit_search(payload: dict[str, Any], budget: int) -> dict[str, Any]:
    """Keep the leading results that fit the budget; cut the first one's content if needed."""
    results: list[dict[str, Any]] = payload["results"]
    out = {**payload, "truncated": False, "omitted_results": 0, "omitted_chars": 0}
    if len(dumps(out)) <= budget:
        return out

    def shaped(kept: list[dict[str, Any]], chars: int) -> dict[str, Any]:
        omitted = len(results) - len(kept)
        note = (
            f"{omitted} of {len(results)} results and {chars} characters of content were left "
            "out to stay under the response size budget; lower `limit` or read the file with "
            "get_document"
        )
        return {
            **out,
            "results": kept,
            "truncated": True,
            "omitted_results": omitted,
            "omitted_chars": chars,
            "note": note,
        }

    k = _largest(len(results), lambda k: len(dumps(shaped(results[:k], 0))) <= budget)
    if k > 0 or not results:
        return shaped(results[:k], 0)
    first = results[0]
    content: str = first["content"]

    def with_content(text: str) -> dict[str, Any]:
        limit = len(text.encode("utf-8"))
        spans = [s for s in first["match_spans"] if s[1] <= limit]
        hit = {**first, "content": text, "match_spans": spans, "content_truncated": True}
        return shaped([hit], len(content) - len(text))

    clipped = _clip_text(content, lambda t: len(dumps(with_content(t))) <= budget)
    return with_content(clipped)


# -- tools -------------------------------------------------------------------------------


class _Tools:
    """The built-in tools' bodies: plain functions run on the groove thread."""

    def __init__(self, app: Groove, budget: int, option_names: Sequence[str]) -> None:
        self.app = app
        self.budget = budget
        self.option_names = tuple(option_names)

    def search(
        self, query: str, limit: int, path: str | None, tags: list[str] | None, **options: Any
    ) -> CallToolResult:
        given = {k: v for k, v in options.items() if k in self.option_names and v is not None}
        response = self.app.search(query, limit=limit, path=path, tags=tags or (), options=given)
        payload = fit_search(response.to_json(), self.budget)
        _log.info(
            "search",
            query=query,
            limit=limit,
            results=len(payload["results"]),
            truncated=payload["truncated"],
        )
        return _result(payload)

    def get_document(
        self,
        path: str,
        start_line: int | None,
        end_line: int | None,
        chunk_id: int | None,
        neighbours: int,
    ) -> CallToolResult:
        file = resolve_markdown(self.app, path)
        lines = read_text(self.app, file).splitlines(keepends=True)
        indexed = next((d for d in self.app.store.documents() if d["path"] == file.rel), None)
        if chunk_id is not None:
            if start_line is not None or end_line is not None:
                raise DocumentError("give either chunk_id or start_line/end_line, not both")
            first, last = self._chunk_lines(file.rel, indexed, chunk_id, neighbours)
        else:
            first, last = start_line or 1, end_line or max(len(lines), 1)
        first, last = self._check_range(first, last, len(lines))
        base = self._document_base(file, indexed, len(lines), chunk_id)
        return _result(self._fit_lines(base, lines, first, last))

    def _chunk_lines(
        self, rel: str, indexed: dict[str, Any] | None, chunk_id: int, neighbours: int
    ) -> tuple[int, int]:
        row = self.app.store.chunk_rows([chunk_id]).get(chunk_id)
        if row is None:
            raise DocumentError(
                f"no chunk {chunk_id} in the index (it may have been "
                "re-indexed since): run search again for fresh chunk ids"
            )
        if row["path"] != rel or indexed is None:
            raise DocumentError(f"chunk {chunk_id} belongs to {row['path']!r}, not {rel!r}")
        chunks = self.app.store.document_chunks(row["doc_id"])
        at = next(i for i, c in enumerate(chunks) if c["chunk_id"] == chunk_id)
        around = chunks[max(0, at - neighbours) : at + neighbours + 1]
        return around[0]["line_start"], around[-1]["line_end"]

    @staticmethod
    def _check_range(first: int, last: int, total: int) -> tuple[int, int]:
        if first > max(total, 1):
            raise DocumentError(f"start_line {first} is past the end of the file ({total} lines)")
        if last < first:
            raise DocumentError(f"end_line {last} is before start_line {first}")
        return first, min(last, max(total, 1))

    def _document_base(
        self, file: Any, indexed: dict[str, Any] | None, total: int, chunk_id: int | None
    ) -> dict[str, Any]:
        changed = None
        if indexed is not None:
            stat = file.path.stat()
            changed = (indexed["size"], indexed["mtime_ns"]) != (stat.st_size, stat.st_mtime_ns)
        return {
            "path": file.rel,
            "title": indexed["title"] if indexed else None,
            "tags": list(indexed["tags"]) if indexed else [],
            "indexed": indexed is not None,
            "changed_since_index": changed,
            "total_lines": total,
            "chunk_id": chunk_id,
        }

    def _fit_lines(
        self, base: dict[str, Any], lines: list[str], first: int, last: int
    ) -> dict[str, Any]:
        wanted = lines[first - 1 : last]
        full = sum(len(s) for s in wanted)

        def shaped(count: int, text: str) -> dict[str, Any]:
            shown = count if text else 0
            end = first + max(count, 1) - 1
            truncated = len(text) < full
            out = {
                **base,
                "line_start": first,
                "line_end": end,
                "content": text,
                "truncated": truncated,
                "omitted_chars": full - len(text),
                "next_start_line": first + shown if truncated else None,
            }
            if truncated:
                out["note"] = (
                    f"{full - len(text)} characters left out to stay under the "
                    "response size budget; call again with start_line="
                    f"{out['next_start_line']}"
                )
            return out

        def fits(payload: dict[str, Any]) -> bool:
            return len(dumps(payload)) <= self.budget

        k = _largest(len(wanted), lambda k: fits(shaped(k, "".join(wanted[:k]))))
        if k > 0 or not wanted:
            return shaped(k, "".join(wanted[:k]))
        # Not even the first line fits: cut it, and point back at it.
        text = _clip_text(wanted[0], lambda t: fits(shaped(0, t)))
        return shaped(0, text)

    def list_documents(
        self, path_prefix: str | None, tags: list[str] | None, offset: int, limit: int
    ) -> CallToolResult:
        prefix = (path_prefix or "").strip().removeprefix("./").lstrip("/")
        wanted = {t.lower() for t in tags or () if t}
        docs = [
            {"path": d["path"], "title": d["title"], "tags": list(d["tags"]), "chunks": d["chunks"]}
            for d in self.app.store.documents()
            if d["path"].startswith(prefix) and wanted <= {t.lower() for t in d["tags"]}
        ]
        page = docs[offset : offset + limit]

        def shaped(k: int) -> dict[str, Any]:
            end = offset + k
            out: dict[str, Any] = {
                "documents": page[:k],
                "total": len(docs),
                "offset": offset,
                "next_offset": end if end < len(docs) else None,
                "truncated": k < len(page),
            }
            if k < len(page):
                out["note"] = (
                    f"{len(page) - k} entries of this page were left out to stay "
                    "under the response size budget; continue from next_offset"
                )
            return out

        k = _largest(len(page), lambda k: len(dumps(shaped(k))) <= self.budget)
        return _result(shaped(k))

    def index_status(self) -> CallToolResult:
        store = self.app.store
        identity = store.embedder_identity()
        docs = store.documents()
        note = store.incomplete()
        index_file = self.app.index_file
        shown = (
            index_file.relative_to(self.app.kb).as_posix()
            if index_file.is_relative_to(self.app.kb)
            else str(index_file)
        )
        status = StatusOut(
            kb=str(self.app.kb.resolve()),
            index_file=shown,
            **store.counts(),
            embedder=EmbedderOut(
                name=self.app.config.embedder.name,
                identity=identity[0] if identity else None,
                dim=identity[1] if identity else None,
            ),
            last_indexed=iso_time(max((d["indexed_at"] for d in docs), default=None)),
            plugins=[i.name for i in self.app.plugins.infos if i.status == "enabled"],
            changes_on_disk=ChangesOut(**changes_on_disk(self.app)),
            incomplete=note is not None,
            incomplete_note=note,
        )
        return _result(status.model_dump(mode="json"))


# -- assembly ----------------------------------------------------------------------------

_SearchResult = Annotated[CallToolResult, SearchOut]
_DocumentResult = Annotated[CallToolResult, DocumentOut]
_ListResult = Annotated[CallToolResult, DocumentListOut]
_StatusResult = Annotated[CallToolResult, StatusOut]

_CORE_SEARCH_PARAMS = ("query", "limit", "path", "tags")
_OPTION_TYPES: dict[str, type] = {"bool": bool, "str": str, "int": int, "float": float}


def _search_parameters(app: Groove, options: Sequence[SearchOption]) -> list[inspect.Parameter]:
    kw = inspect.Parameter.KEYWORD_ONLY
    params = [
        inspect.Parameter(
            "query",
            kw,
            annotation=Annotated[
                str, Field(min_length=1, description="what to look for; see the query syntax above")
            ],
        ),
        inspect.Parameter(
            "limit",
            kw,
            default=app.config.search.default_limit,
            annotation=Annotated[
                int, Field(ge=1, le=MAX_LIMIT, description="number of results (1-200)")
            ],
        ),
        inspect.Parameter(
            "path",
            kw,
            default=None,
            annotation=Annotated[
                str | None,
                Field(description="glob over KB-relative paths, e.g. 'docs/**' or 'notes/ops'"),
            ],
        ),
        inspect.Parameter(
            "tags",
            kw,
            default=None,
            annotation=Annotated[
                list[str] | None,
                Field(description="front-matter tags every result's file must carry"),
            ],
        ),
    ]
    for option in options:
        params.append(
            inspect.Parameter(
                option.name,
                kw,
                default=None,
                annotation=Annotated[
                    _OPTION_TYPES[option.type] | None,
                    Field(
                        description=f"{option.help} (plugin {option.plugin}; omit for its default)"
                    ),
                ],
            )
        )
    return params


def _usable_options(app: Groove) -> list[SearchOption]:
    """Plugin search options that can become parameters; clashing ones are logged, skipped."""
    usable: list[SearchOption] = []
    taken = set(_CORE_SEARCH_PARAMS)
    for option in app.plugins.search_options():
        problem = None
        if option.name in taken:
            problem = "the name is already taken"
        elif not option.name.isidentifier() or option.name.startswith("_"):
            problem = "the name is not a valid parameter name"
        elif option.type not in _OPTION_TYPES:
            problem = f"unknown type {option.type!r}"
        if problem:
            _log.warning(
                "search option skipped", option=option.name, plugin=option.plugin, reason=problem
            )
            continue
        taken.add(option.name)
        usable.append(option)
    return usable


def _add_search(
    server: MCPServer, tools: _Tools, thread: GrooveThread, options: Sequence[SearchOption]
) -> None:
    body = _as_tool_errors(tools.search)

    async def search(**kwargs: Any) -> Any:
        return await thread.run(body, **kwargs)

    search.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        _search_parameters(tools.app, options), return_annotation=_SearchResult
    )
    server.add_tool(
        search,
        name="search",
        title="Search the knowledge base",
        description=SEARCH_DESCRIPTION,
        annotations=_READ_ONLY,
    )


def _add_reading_tools(server: MCPServer, tools: _Tools, thread: GrooveThread) -> None:
    get_body = _as_tool_errors(tools.get_document)
    list_body = _as_tool_errors(tools.list_documents)
    status_body = _as_tool_errors(tools.index_status)

    @server.tool(
        title="Read a document", description=GET_DOCUMENT_DESCRIPTION, annotations=_READ_ONLY
    )
    async def get_document(
        path: Annotated[str, Field(description="KB-relative path, e.g. 'notes/a.md'")],
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
    ) -> _DocumentResult:
        return await thread.run(get_body, path, start_line, end_line, chunk_id, neighbours)

    @server.tool(
        title="List documents", description=LIST_DOCUMENTS_DESCRIPTION, annotations=_READ_ONLY
    )
    async def list_documents(
        path_prefix: Annotated[
            str | None, Field(description="only paths starting with this")
        ] = None,
        tags: Annotated[
            list[str] | None, Field(description="front-matter tags, all required")
        ] = None,
        offset: Annotated[int, Field(ge=0, description="entries to skip")] = 0,
        limit: Annotated[int, Field(ge=1, le=MAX_LIST_LIMIT, description="page size")] = 100,
    ) -> _ListResult:
        return await thread.run(list_body, path_prefix, tags, offset, limit)

    @server.tool(title="Index status", description=INDEX_STATUS_DESCRIPTION, annotations=_READ_ONLY)
    async def index_status() -> _StatusResult:
        return await thread.run(status_body)


def _server_app(app: Groove) -> Groove:
    """A Groove of its own for the server, sharing config, plugins and a loaded embedder.

    Its index connection is then opened on the groove thread, whatever the caller did with
    ``app`` on other threads before.
    """
    from groove_core.app import Groove

    own = Groove(app.kb, app.config, app.plugins)
    if "embedder" in app.__dict__:
        own.__dict__["embedder"] = app.__dict__["embedder"]
    return own


def build_mcp_server(
    app: Groove, *, max_response_chars: int = DEFAULT_MAX_RESPONSE_CHARS
) -> MCPServer:
    """An MCP server for ``app``'s knowledge base with the tools of every enabled plugin.

    ``max_response_chars`` caps the JSON text of each built-in tool's response.
    """
    if max_response_chars < MIN_RESPONSE_CHARS:
        raise ValueError(
            f"max_response_chars must be at least {MIN_RESPONSE_CHARS}, got {max_response_chars}"
        )
    own = _server_app(app)
    thread = GrooveThread()
    server: MCPServer = MCPServer("groove", version=__version__, instructions=INSTRUCTIONS)
    options = _usable_options(own)
    tools = _Tools(own, max_response_chars, [o.name for o in options])
    _add_search(server, tools, thread, options)
    _add_reading_tools(server, tools, thread)
    own.plugins.pm.hook.groove_mcp_tools(server=PluginServer(server, thread), app=own)
    return server


__all__ = ["DEFAULT_MAX_RESPONSE_CHARS", "build_mcp_server", "fit_search"]
