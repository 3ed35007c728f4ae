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
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import structlog
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from groove_core import __version__
from groove_core.app import Groove
from groove_core.filters import GlobError
from groove_core.kb_files import (
    DiskTracker,
    DocumentError,
    changed_since_index,
    changes_on_disk,
    check_range,
    chunk_span,
    indexed_document,
    iso_time,
    read_text,
    resolve_markdown,
)
from groove_core.query import MAX_QUERY_CHARS, QueryError
from groove_core.store import classify_error, sqlite_errors

if TYPE_CHECKING:
    import numpy as np

    from groove_core.context import SearchOption
    from groove_core.embedding import Embedder
    from groove_core.rows import DocumentRow
    from groove_core.several import NamedKb

T = TypeVar("T")

DEFAULT_MAX_RESPONSE_CHARS = 40_000
#: Below this even one result's metadata might not fit, so truncation could not be explicit.
MIN_RESPONSE_CHARS = 2_000
MAX_LIMIT = 200
MAX_LIST_LIMIT = 1_000
MAX_NEIGHBOURS = 20
#: Links listed per direction by related (and, at most, by get_document).
MAX_RELATED_LIMIT = 500
DOCUMENT_LINKS = 20
#: Argument sizes, checked by the tool schema before any work: a client can send megabytes
#: of JSON (and over stdio nothing else stops it), while real paths, globs and tags are short.
MAX_PATH_CHARS = 1_024
MAX_TAGS = 32
MAX_TAG_CHARS = 200
MAX_OPTION_CHARS = 1_024
#: Each descriptive field of a result (title, heading, heading path, tags, warnings...) gets
#: at most this fraction of the budget, so that no one field can crowd out the content: a
#: file with 300,000 front-matter tags once made a 2.9 MB response against a 40k budget.
FIELD_SHARE = 16

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

RELATED_DESCRIPTION = """\
The neighbourhood of a note: the links it makes (Markdown links and [[wikilinks]], each
with the KB-relative `path` it resolves to, or null when nothing indexed matches) and its
backlinks (the documents linking to it, with the line of each link). Use it to follow a
note's context after search or get_document. Both lists are capped by `limit` and by the
response size budget; the totals say how many there are."""

INDEX_STATUS_DESCRIPTION = """\
Report the state of the search index: number of documents and chunks, the embedder,
when it was last indexed, the enabled plugins, and which Markdown files were added,
modified or deleted on disk since (if any, results may be stale until 'groove index'
runs again)."""


# -- structured output schemas -----------------------------------------------------------


_CLIPPED = "fields cut short to fit the response size budget (present only when some were)"


class ExpandedRangeOut(BaseModel):
    line_start: int
    line_end: int
    byte_start: int
    byte_end: int


class HitOut(BaseModel):
    """One search result."""

    kb: str | None = Field(None, description="the knowledge base it is from (several served)")
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
    clipped_fields: list[str] | None = Field(None, description=_CLIPPED)


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


class LinkOut(BaseModel):
    target: str = Field(description="the link as written in the source document")
    kind: str = Field(description="link (Markdown), wikilink or embed")
    path: str | None = Field(
        description="outgoing: where it resolves (null: unresolved); backlink: the source"
    )
    line: int = Field(description="line of the link in the source document")


class LinksOut(BaseModel):
    outgoing: list[LinkOut]
    outgoing_total: int
    backlinks: list[LinkOut]
    backlinks_total: int


class RelatedOut(Truncation, LinksOut):
    path: str
    title: str


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
    links: LinksOut | None = Field(
        None, description="the first outgoing links and backlinks (all of them: related)"
    )
    clipped_fields: list[str] | None = Field(None, description=_CLIPPED)
    omitted_chars: int = Field(description="characters of the requested range not returned")
    next_start_line: int | None = Field(description="where to continue reading, or null")


class DocumentEntry(BaseModel):
    path: str
    title: str
    tags: list[str]
    chunks: int
    clipped_fields: list[str] | None = Field(None, description=_CLIPPED)


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
    truncated: bool = Field(False, description="true when lists were cut to fit the budget")
    note: str | None = Field(None, description="what was left out")
    kb: str = Field(description="the knowledge base's name ([kb] name, or its folder's name)")
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


#: Worker threads of the server, each with its own index connection. SQLite releases the
#: GIL while a statement runs and numpy while it multiplies, so on a 2-core machine a few
#: searches really do run at once; more workers than that only queue inside the process.
#: Two, not more, by default: each connection of an index over 5,000 chunks keeps its own
#: in-memory vector matrix (about 216 MiB at 100k chunks), not yet shared between them.
DEFAULT_READERS = 2


class GrooveThread:
    """Runs every call into groove on a small pool of worker threads.

    Each worker opens its own index connection (``Groove.store`` is per thread: SQLite
    objects belong to the thread that made them), so searches run in parallel, each in one
    read transaction of its own (WAL gives every connection its own snapshot, and lets
    ``groove index`` write from another process meanwhile). The event loop stays free to
    serve other requests. The embedder is shared, behind a lock (:class:`LockedEmbedder`).
    ``workers=1`` is the old single-thread behaviour.
    """

    def __init__(self, workers: int = DEFAULT_READERS) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.workers = workers
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="groove-mcp")

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        return await asyncio.wrap_future(self._pool.submit(fn, *args, **kwargs))

    def on_thread(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """An async version of a sync tool function that runs it on a worker thread."""
        if inspect.iscoroutinefunction(fn):
            return fn

        @functools.wraps(fn)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            return await self.run(fn, *args, **kwargs)

        return wrapper


class LockedEmbedder:
    """An embedder shared by the worker threads, one call at a time.

    The embedder protocol promises nothing about threads: a plugin's model may keep
    per-call state, load itself lazily on first use (two threads would load it twice), or
    hold a client session. A query embedding is a few milliseconds of a search's time, so
    serialising it costs little, while the SQLite legs still overlap. The embedder itself
    is built on first use (``make`` may raise, e.g. an unknown embedder name, and that is a
    tool error, not a server that fails to start).
    """

    def __init__(self, make: Callable[[], Embedder]) -> None:
        self._make = make
        self._inner: Embedder | None = None
        self._build_lock = threading.Lock()
        self._call_lock = threading.Lock()

    @property
    def inner(self) -> Embedder:
        with self._build_lock:
            if self._inner is None:
                self._inner = self._make()
            return self._inner

    @property
    def identity(self) -> str:
        return self.inner.identity

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        inner = self.inner
        with self._call_lock:
            return inner.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        inner = self.inner
        with self._call_lock:
            return inner.embed_query(text)


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


def _path_forms(app: Groove) -> list[tuple[str, str]]:
    """(absolute spelling, what a client sees instead), longest first.

    A client knows the knowledge base only by KB-relative paths; the server's own folders
    are none of its business, and over HTTP they tell a stranger how the machine is laid out.
    """
    index, kb = app.index_file, app.kb
    shown_index = (
        index.resolve().relative_to(kb.resolve()).as_posix()
        if index.resolve().is_relative_to(kb.resolve())
        else f"the index file {index.name}"
    )
    forms = {str(p): shown_index for p in (index.absolute(), index.resolve())}
    for root in (kb.absolute(), kb.resolve()):
        forms.setdefault(f"{root}/", "")
        forms.setdefault(str(root), "the knowledge base")
    return sorted(forms.items(), key=lambda item: -len(item[0]))


def kb_relative(app: Groove, message: str) -> str:
    """``message`` with every absolute path of the KB and its index made KB-relative."""
    for absolute, shown in _path_forms(app):
        message = message.replace(absolute, shown)
    return message


def _as_tool_errors(app: Groove, name: str, fn: Callable[..., T]) -> Callable[..., T]:
    """Every failure becomes an MCP tool error whose text says what was wrong, in the
    client's terms (KB-relative paths); never a bare "Error executing tool" from the SDK."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except GlobError as err:  # a QueryError, but about the path argument, not the query
            message = f"invalid argument: {err}"
        except QueryError as err:
            message = f"invalid query: {err}"
        except _tool_errors() as err:
            message = str(err)
        except (ValueError, re.error) as err:
            # A malformed glob or another argument groove could not use.
            message = f"invalid argument: {err}"
        except OSError as err:
            message = f"cannot read the knowledge base: {err.strerror or err}"
        except sqlite_errors() as err:
            # The tools' statements are groove's own: an error that is not the environment's
            # means a damaged index, which doctor --repair rebuilds.
            message = str(classify_error(err, app.index_label, f"running {name}", suspect=True))
        except Exception as err:
            _log.exception("tool failed", tool=name)
            message = (
                f"{name} failed inside groove ({type(err).__name__}); the server's log has "
                "the details. Other calls still work"
            )
        raise ToolError(kb_relative(app, message)) from None

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


#: The descriptive fields of a search hit that FIELD_SHARE bounds (content has its own rule).
HIT_FIELDS = ("title", "heading", "heading_path", "tags", "expanded_from")
#: The same for a whole search response.
SEARCH_FIELDS = ("warnings", "filter_applied")


def _cap(value: Any, limit: int) -> Any:
    """``value`` within ``limit`` characters of JSON text: a string shortened, a list
    shortened by whole items from its end, each value of a mapping capped alike."""
    if len(dumps(value)) <= limit:
        return value
    if isinstance(value, str):
        return _clip_text(value, lambda t: len(dumps(t)) <= limit)
    if isinstance(value, list):
        return value[: _largest(len(value), lambda k: len(dumps(value[:k])) <= limit)]
    if isinstance(value, dict):
        return {key: _cap(item, limit) for key, item in value.items()}
    return value


def cap_fields(obj: dict[str, Any], fields: Sequence[str], limit: int) -> dict[str, Any]:
    """``obj`` with each of ``fields`` capped at ``limit`` characters; the names of those
    that were cut are listed in ``clipped_fields``, so that no cut is silent."""
    out = dict(obj)
    clipped = []
    for field in fields:
        value = out.get(field)
        if value is not None and len(dumps(value)) > limit:
            out[field] = _cap(value, limit)
            clipped.append(field)
    if clipped:
        out["clipped_fields"] = clipped
    return out


def _clipped_note(count: int, what: str) -> str:
    return (
        f"descriptive fields of {count} {what} were cut short to stay under the response size "
        "budget (see clipped_fields)"
    )


def fit_search(payload: dict[str, Any], budget: int) -> dict[str, Any]:
    """Keep the leading results that fit the budget; cut the first one's content if needed.

    Titles, headings, tags and the other descriptive fields are first capped at a share of
    the budget each, so whatever a file's front matter holds, results still fit.
    """
    share = budget // FIELD_SHARE
    results = [cap_fields(h, HIT_FIELDS, share) for h in payload["results"]]
    capped = cap_fields(payload, SEARCH_FIELDS, share)
    notes = (
        [f"{', '.join(capped.pop('clipped_fields'))} cut short"]
        if "clipped_fields" in capped
        else []
    )
    if clipped := sum("clipped_fields" in h for h in results):
        notes.append(_clipped_note(clipped, "results"))
    out = {**capped, "results": results, "truncated": bool(notes)}
    out.update(omitted_results=0, omitted_chars=0)
    if notes:
        out["note"] = "; ".join(notes)
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
            "note": "; ".join([note, *notes]),
        }

    def fits(candidate: dict[str, Any]) -> bool:
        return len(dumps(candidate)) <= budget

    k = _largest(len(results), lambda k: fits(shaped(results[:k], 0)))
    if k > 0 or not results:
        return shaped(results[:k], 0)
    first = results[0]
    content: str = first["content"]

    def with_content(text: str) -> dict[str, Any]:
        limit = len(text.encode("utf-8"))
        spans = [s for s in first["match_spans"] if s[1] <= limit]
        hit = {**first, "content": text, "match_spans": spans, "content_truncated": True}
        return shaped([hit], len(content) - len(text))

    if not fits(with_content("")):
        return shaped([], 0)  # not even its path fits: say so rather than exceed the budget
    return with_content(_clip_text(content, lambda t: fits(with_content(t))))


_RELATED_NOTE = (
    "links were left out to stay under the response size budget; the totals say how many there are"
)


def fit_links(
    payload: dict[str, Any], fits: Callable[[dict[str, Any]], bool]
) -> tuple[dict[str, Any], bool]:
    """``payload`` with its ``outgoing`` and ``backlinks`` cut to the largest common length
    that ``fits``; True when something was cut."""
    longest = max(len(payload["outgoing"]), len(payload["backlinks"]))

    def shaped(k: int) -> dict[str, Any]:
        return {
            **payload,
            "outgoing": payload["outgoing"][:k],
            "backlinks": payload["backlinks"][:k],
        }

    k = _largest(longest, lambda k: fits(shaped(k)))
    return shaped(k), k < longest


def fit_status(payload: dict[str, Any], budget: int) -> dict[str, Any]:
    """index_status within the budget: the lists of changed files are capped (their counts
    stay complete, so a reader sees how many are not listed)."""
    changes = cap_fields(payload["changes_on_disk"], ("added", "modified", "deleted"), budget // 8)
    clipped = changes.pop("clipped_fields", None)
    out = {**payload, "changes_on_disk": changes, "truncated": bool(clipped)}
    if clipped:
        out["note"] = (
            f"the lists {', '.join(clipped)} were cut to stay under the response size budget; "
            "the *_count fields are complete"
        )
    return out


# -- tools -------------------------------------------------------------------------------


class _Tools:
    """The built-in tools' bodies: plain functions run on the worker threads."""

    def __init__(self, app: Groove, budget: int, option_names: Sequence[str]) -> None:
        self.app = app
        self.budget = budget
        self.option_names = tuple(option_names)
        self.disk = DiskTracker()

    def search(
        self, query: str, limit: int, path: str | None, tags: list[str] | None, **options: Any
    ) -> CallToolResult:
        given = {k: v for k, v in options.items() if k in self.option_names and v is not None}
        response = self.app.search(query, limit=limit, path=path, tags=tags or (), options=given)
        payload = fit_search(response.to_json(), self.budget)
        _log.info(
            "search",
            query=query[:200],
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
        indexed = indexed_document(self.app, file.rel)
        if chunk_id is not None:
            if start_line is not None or end_line is not None:
                raise DocumentError("give either chunk_id or start_line/end_line, not both")
            first, last = self._chunk_lines(file.rel, indexed, chunk_id, neighbours)
        else:
            first, last = start_line or 1, end_line or max(len(lines), 1)
        first, last = check_range(first, last, len(lines))
        base = self._document_base(file, indexed, len(lines), chunk_id)
        found = self.app.store.links_of(file.rel, DOCUMENT_LINKS) if indexed else None
        if found is not None:
            # A share of the budget, so the links never crowd out the text asked for.
            base["links"], _ = fit_links(
                found.to_json(), lambda p: len(dumps(p)) <= self.budget // 8
            )
        return _result(self._fit_lines(base, lines, first, last))

    def related(self, path: str, limit: int) -> CallToolResult:
        file = resolve_markdown(self.app, path)
        indexed = next((d for d in self.app.store.documents() if d.path == file.rel), None)
        found = self.app.store.links_of(file.rel, limit) if indexed else None
        if indexed is None or found is None:
            raise DocumentError(f"{file.rel!r} is not indexed yet: run 'groove index' first")
        head = cap_fields({"path": file.rel, "title": indexed.title}, ("title",), 1000)
        note = {"truncated": True, "note": _RELATED_NOTE}
        payload, cut = fit_links(
            {**head, **found.to_json()}, lambda p: len(dumps({**p, **note})) <= self.budget
        )
        payload.update(note if cut else {"truncated": False})
        return _result(payload)

    def _chunk_lines(
        self, rel: str, indexed: DocumentRow | None, chunk_id: int, neighbours: int
    ) -> tuple[int, int]:
        row, first, last = chunk_span(self.app, chunk_id, neighbours)
        if row.path != rel or indexed is None:
            raise DocumentError(f"chunk {chunk_id} belongs to {row.path!r}, not {rel!r}")
        return first, last

    def _document_base(
        self, file: Any, indexed: DocumentRow | None, total: int, chunk_id: int | None
    ) -> dict[str, Any]:
        changed = changed_since_index(file, indexed)
        base = {
            "path": file.rel,
            "title": indexed.title if indexed else None,
            "tags": list(indexed.tags) if indexed else [],
            "indexed": indexed is not None,
            "changed_since_index": changed,
            "total_lines": total,
            "chunk_id": chunk_id,
        }
        return cap_fields(base, ("title", "tags"), self.budget // FIELD_SHARE)

    def _fit_lines(
        self, base: dict[str, Any], lines: list[str], first: int, last: int
    ) -> dict[str, Any]:
        wanted = lines[first - 1 : last]
        full = sum(len(s) for s in wanted)

        def shaped(count: int, text: str) -> dict[str, Any]:
            end = first + max(count, 1) - 1
            truncated = len(text) < full
            # A line cut short (count 0) is skipped: pointing back at it would have a
            # client paging through the file ask for the same line forever.
            after = first + max(count, 1)
            out = {
                **base,
                "line_start": first,
                "line_end": end,
                "content": text,
                "truncated": truncated,
                "omitted_chars": full - len(text),
                "next_start_line": after if truncated and after <= last else None,
            }
            if truncated:
                out["note"] = self._lines_note(first, count, full - len(text), after, last)
            if "clipped_fields" in base:
                out["truncated"] = True
                out["note"] = "; ".join(
                    n for n in (out.get("note"), _clipped_note(1, "document")) if n
                )
            return out

        def fits(payload: dict[str, Any]) -> bool:
            return len(dumps(payload)) <= self.budget

        k = _largest(len(wanted), lambda k: fits(shaped(k, "".join(wanted[:k]))))
        if k > 0 or not wanted:
            return shaped(k, "".join(wanted[:k]))
        # Not even the first line fits: show its beginning.
        return shaped(0, _clip_text(wanted[0], lambda t: fits(shaped(0, t))))

    @staticmethod
    def _lines_note(first: int, count: int, omitted: int, after: int, last: int) -> str:
        cut = (
            f"line {first} alone is longer than the response size budget: only its beginning "
            "is shown. "
            if count == 0
            else ""
        )
        more = f"call again with start_line={after}" if after <= last else "nothing follows"
        return f"{cut}{omitted} characters left out to stay under the budget; {more}"

    def list_documents(
        self, path_prefix: str | None, tags: list[str] | None, offset: int, limit: int
    ) -> CallToolResult:
        prefix = (path_prefix or "").strip().removeprefix("./").lstrip("/")
        wanted = {t.lower() for t in tags or () if t}
        docs = [
            d
            for d in self.app.store.documents()
            if d.path.startswith(prefix) and wanted <= {t.lower() for t in d.tags}
        ]
        share = self.budget // FIELD_SHARE
        page = [
            cap_fields(
                {
                    "path": d.path,
                    "title": d.title,
                    "tags": list(d.tags),
                    "chunks": d.chunks,
                },
                ("title", "tags"),
                share,
            )
            for d in docs[offset : offset + limit]
        ]

        def shaped(k: int, skipped: int = 0) -> dict[str, Any]:
            end = offset + k + skipped
            notes = self._page_notes(page, k, skipped, offset)
            out: dict[str, Any] = {
                "documents": page[:k],
                "total": len(docs),
                "offset": offset,
                "next_offset": end if end < len(docs) else None,
                "truncated": bool(notes),
            }
            if notes:
                out["note"] = "; ".join(notes)
            return out

        k = _largest(len(page), lambda k: len(dumps(shaped(k))) <= self.budget)
        # An entry that fits in no page is stepped over, so that paging always moves on.
        return _result(shaped(k, skipped=1 if k == 0 and page else 0))

    @staticmethod
    def _page_notes(page: list[dict[str, Any]], k: int, skipped: int, offset: int) -> list[str]:
        notes = []
        if clipped := sum("clipped_fields" in d for d in page[:k]):
            notes.append(_clipped_note(clipped, "entries"))
        if skipped:
            notes.append(
                f"the entry at offset {offset} does not fit the response size budget even "
                "with its title and tags cut, and was left out; continue from next_offset"
            )
        elif k < len(page):
            notes.append(
                f"{len(page) - k} entries of this page were left out to stay under the "
                "response size budget; continue from next_offset"
            )
        return notes

    def index_status(self) -> CallToolResult:
        store = self.app.store
        identity = store.embedder_identity()
        docs = store.documents()
        note = store.incomplete()
        index_file = self.app.index_file
        # Names, never machine paths: over HTTP these tell a stranger how the disk is laid out.
        shown = (
            index_file.relative_to(self.app.kb).as_posix()
            if index_file.is_relative_to(self.app.kb)
            else f"the index file {index_file.name} (outside the knowledge base)"
        )
        status = StatusOut(
            kb=self.app.config.kb.name or self.app.kb.resolve().name,
            index_file=shown,
            **store.counts(),
            embedder=EmbedderOut(
                name=self.app.config.embedder.name,
                identity=identity[0] if identity else None,
                dim=identity[1] if identity else None,
            ),
            last_indexed=iso_time(max((d.indexed_at for d in docs), default=None)),
            plugins=[i.name for i in self.app.plugins.infos if i.status == "enabled"],
            changes_on_disk=ChangesOut(**changes_on_disk(self.app, self.disk)),
            incomplete=note is not None,
            incomplete_note=note,
        )
        return _result(fit_status(status.model_dump(mode="json"), self.budget))


# -- assembly ----------------------------------------------------------------------------

_SearchResult = Annotated[CallToolResult, SearchOut]
_DocumentResult = Annotated[CallToolResult, DocumentOut]
_RelatedResult = Annotated[CallToolResult, RelatedOut]
_ListResult = Annotated[CallToolResult, DocumentListOut]
_StatusResult = Annotated[CallToolResult, StatusOut]

_CORE_SEARCH_PARAMS = ("query", "limit", "path", "tags")
_OPTION_TYPES: dict[str, type] = {"bool": bool, "str": str, "int": int, "float": float}


_Path = Annotated[str, Field(max_length=MAX_PATH_CHARS)]
_Tags = Annotated[
    list[Annotated[str, Field(max_length=MAX_TAG_CHARS)]] | None,
    Field(max_length=MAX_TAGS, description="front-matter tags, all required (case-insensitive)"),
]


def _search_parameters(app: Groove, options: Sequence[SearchOption]) -> list[inspect.Parameter]:
    kw = inspect.Parameter.KEYWORD_ONLY
    params = [
        inspect.Parameter(
            "query",
            kw,
            annotation=Annotated[
                str,
                Field(
                    min_length=1,
                    max_length=MAX_QUERY_CHARS,
                    description="what to look for; see the query syntax above",
                ),
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
                _Path | None,
                Field(description="glob over KB-relative paths, e.g. 'docs/**' or 'notes/ops'"),
            ],
        ),
        inspect.Parameter("tags", kw, default=None, annotation=_Tags),
    ]
    for option in options:
        params.append(
            inspect.Parameter(option.name, kw, default=None, annotation=_option_type(app, option))
        )
    return params


_NONE = "The server's configuration lists no values, so a client cannot use it"


def _unavailable(app: Groove, options: Sequence[SearchOption]) -> dict[str, str]:
    """Options with choices of which the configuration lists none: name -> plugin."""
    return {
        o.name: o.plugin
        for o in options
        if o.choices is not None and not o.choices(app.plugins.settings)
    }


def _option_type(app: Groove, option: SearchOption) -> Any:
    """A plugin option's parameter type: its values bounded, or listed where it has choices."""
    help_text = f"{option.help} (plugin {option.plugin}; omit for its default)"
    if option.choices is None:
        kind: Any = _OPTION_TYPES[option.type]
        if kind is str:
            kind = Annotated[str, Field(max_length=MAX_OPTION_CHARS)]
        return Annotated[kind | None, Field(description=help_text)]
    allowed = tuple(option.choices(app.plugins.settings))
    if not allowed:
        # Nothing to choose from: the parameter stays, so that a client that sends it is
        # told why it cannot (see _unavailable) rather than silently ignored.
        return Annotated[
            str | None, Field(max_length=MAX_OPTION_CHARS, description=f"{help_text}. {_NONE}")
        ]
    listed = ", ".join(allowed)
    return Annotated[
        Literal[allowed] | None,
        Field(description=f"{help_text}. One of: {listed}"),
    ]


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
    body = _as_tool_errors(tools.app, "search", tools.search)
    unavailable = _unavailable(tools.app, options)

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
    get_body = _as_tool_errors(tools.app, "get_document", tools.get_document)
    list_body = _as_tool_errors(tools.app, "list_documents", tools.list_documents)
    status_body = _as_tool_errors(tools.app, "index_status", tools.index_status)

    @server.tool(
        title="Read a document", description=GET_DOCUMENT_DESCRIPTION, annotations=_READ_ONLY
    )
    async def get_document(
        path: Annotated[_Path, Field(description="KB-relative path, e.g. 'notes/a.md'")],
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
            _Path | None, Field(description="only paths starting with this")
        ] = None,
        tags: _Tags = None,
        offset: Annotated[int, Field(ge=0, description="entries to skip")] = 0,
        limit: Annotated[int, Field(ge=1, le=MAX_LIST_LIMIT, description="page size")] = 100,
    ) -> _ListResult:
        return await thread.run(list_body, path_prefix, tags, offset, limit)

    related_body = _as_tool_errors(tools.app, "related", tools.related)

    @server.tool(title="Links of a note", description=RELATED_DESCRIPTION, annotations=_READ_ONLY)
    async def related(
        path: Annotated[_Path, Field(description="KB-relative path, e.g. 'notes/a.md'")],
        limit: Annotated[
            int, Field(ge=1, le=MAX_RELATED_LIMIT, description="links listed per direction")
        ] = 50,
    ) -> _RelatedResult:
        return await thread.run(related_body, path, limit)

    @server.tool(title="Index status", description=INDEX_STATUS_DESCRIPTION, annotations=_READ_ONLY)
    async def index_status() -> _StatusResult:
        return await thread.run(status_body)


def _server_app(app: Groove) -> Groove:
    """A Groove of its own for the server, sharing config, plugins and the embedder (behind
    a lock, so that workers never race to build or load it).

    Its index connections are then opened on the worker threads, whatever the caller did
    with ``app`` on other threads before.
    """
    from groove_core.app import Groove

    own = Groove(app.kb, app.config, app.plugins)
    own.__dict__["embedder"] = LockedEmbedder(lambda: app.embedder)
    return own


def build_mcp_server(
    app: Groove | Sequence[NamedKb],
    *,
    max_response_chars: int = DEFAULT_MAX_RESPONSE_CHARS,
    readers: int = DEFAULT_READERS,
) -> MCPServer:
    """An MCP server for ``app``'s knowledge base with the tools of every enabled plugin;
    given several named KBs, one server for all of them (see :mod:`groove_core.several_mcp`).

    ``max_response_chars`` caps the JSON text of each built-in tool's response; ``readers``
    is the number of worker threads (each with its own index connection).
    """
    if max_response_chars < MIN_RESPONSE_CHARS:
        raise ValueError(
            f"max_response_chars must be at least {MIN_RESPONSE_CHARS}, got {max_response_chars}"
        )
    if not isinstance(app, Groove):
        kbs = list(app)
        if len(kbs) > 1:
            from groove_core.several_mcp import build_several_server

            return build_several_server(kbs, max_response_chars)
        app = kbs[0].app
    own = _server_app(app)
    thread = GrooveThread(readers)
    server: MCPServer = MCPServer("groove", version=__version__, instructions=INSTRUCTIONS)
    options = _usable_options(own)
    tools = _Tools(own, max_response_chars, [o.name for o in options])
    _add_search(server, tools, thread, options)
    _add_reading_tools(server, tools, thread)
    own.plugins.pm.hook.groove_mcp_tools(server=PluginServer(server, thread), app=own)
    return server


__all__ = [
    "DEFAULT_MAX_RESPONSE_CHARS",
    "DEFAULT_READERS",
    "GrooveThread",
    "LockedEmbedder",
    "build_mcp_server",
    "fit_search",
]
