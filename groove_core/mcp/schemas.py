"""The MCP tools' contract: argument limits, descriptions, output schemas, parameters.

Every limit is checked by the tool schema before any work: a client can send megabytes of
JSON (and over stdio nothing else stops it), while real paths, globs and tags are short.
Plugins' search options become ``search`` parameters here (``groove_search_options``).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal

import structlog
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, Field

from groove_core.config import MAX_LIMIT
from groove_core.query import MAX_INPUT_CHARS

if TYPE_CHECKING:
    from groove_core.app import Groove
    from groove_core.context import SearchOption

MAX_LIST_LIMIT = 1_000
MAX_NEIGHBOURS = 20
#: Links listed per direction by related (and, at most, by get_document).
MAX_RELATED_LIMIT = 500
DOCUMENT_LINKS = 20
#: Argument sizes (see the module docstring).
MAX_PATH_CHARS = 1_024
MAX_TAGS = 32
MAX_TAG_CHARS = 200
MAX_OPTION_CHARS = 1_024

_log = structlog.get_logger("groove.mcp")

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

INSTRUCTIONS = """\
groove searches a Markdown knowledge base (notes and documents, Japanese and English).
Start with `search`; read around a hit with `get_document(chunk_id=...)`; browse with
`list_documents`; check freshness with `index_status`. Responses are capped in size: when
`truncated` is true, narrow the request (lower `limit`, a line range) instead of repeating it.
"""

SEARCH_DESCRIPTION = """\
Search the knowledge base by meaning and by text at once and return the best passages,
best first.

Query: plain words or a question, in Japanese or English; "quoted phrase" for exact text;
-word or -"phrase" to exclude (not alone). Text matching needs 3+ characters: shorter
words (AI, Go) match by meaning only unless quoted with more ("AI について"). Case and
full/half width are ignored.

Returns {results, low_confidence, filter_applied, warnings, truncated, note,
omitted_results, omitted_chars}. Each result: path, title, heading, heading_path, content,
score (larger is better, within one response), rank, chunk_id (for get_document),
line_start, line_end, tags, match_spans ([start, end) UTF-8 byte offsets of matched text
in content). low_confidence: nothing matched strongly; rephrase or drop filters.
truncated: results or text were left out to fit the size budget; lower `limit` or read
with get_document."""

GET_DOCUMENT_DESCRIPTION = """\
Read a file of the knowledge base: all of it, a line range (start_line/end_line, 1-based,
inclusive), or the passages around a search hit (chunk_id, plus `neighbours` on each side).

Returns {path, title, tags, indexed, changed_since_index, total_lines, line_start,
line_end, content, chunk_id, links (first outgoing links and backlinks), truncated,
omitted_chars, next_start_line}. Text over the size budget is cut at a line boundary:
continue from next_start_line."""

LIST_DOCUMENTS_DESCRIPTION = """\
List the indexed files, sorted by path, optionally under `path_prefix` and carrying every
one of `tags`. Returns {documents: [{path, title, tags, chunks}], total, offset,
next_offset}; pass next_offset back as `offset` for the next page (null at the end)."""

RELATED_DESCRIPTION = """\
The links of a note: those it makes (Markdown links and [[wikilinks]]) and its backlinks.
Returns {path, title, outgoing: [{target, kind, path, line}], outgoing_total, backlinks,
backlinks_total, truncated}; an outgoing link's path is where it resolves (null: nothing
indexed matches), a backlink's path is the note linking here."""

INDEX_STATUS_DESCRIPTION = """\
The state of the index. Returns {kb (the served name), documents, chunks, embedder,
last_indexed (ISO 8601 UTC), plugins, changes_on_disk (files added, modified or deleted
since: results may be stale until they are indexed), incomplete, incomplete_note,
vectors_pending, semantic_note (how much is embedded while some is not), indexing (while
the server re-indexes changed files: "indexing 42% | ... | ETA 20s"; call again to wait)}."""


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
    kb: str = Field(
        description="the name the knowledge base is served under (its registered name, "
        "else [kb] name, else its folder's name)"
    )
    index_file: str
    documents: int
    chunks: int
    embedder: EmbedderOut
    last_indexed: str | None = Field(
        description="ISO 8601 UTC time the index was last brought up to date"
    )
    plugins: list[str] = Field(description="enabled plugins")
    changes_on_disk: ChangesOut
    incomplete: bool = Field(False, description="an index run filling the index is unfinished")
    incomplete_note: str | None = Field(None, description="what is missing and how to finish it")
    vectors_pending: int = Field(
        0, description="chunks not embedded yet: the vector leg cannot find them, words can"
    )
    semantic_note: str | None = Field(
        None, description="how much of the KB is embedded, while some is not"
    )
    indexing: str | None = Field(
        None, description="a re-index this server is running (serve --watch): its progress"
    )


SearchResult = Annotated[CallToolResult, SearchOut]
DocumentResult = Annotated[CallToolResult, DocumentOut]
RelatedResult = Annotated[CallToolResult, RelatedOut]
ListResult = Annotated[CallToolResult, DocumentListOut]
StatusResult = Annotated[CallToolResult, StatusOut]

CORE_SEARCH_PARAMS = ("query", "limit", "path", "tags")
_OPTION_TYPES: dict[str, type] = {"bool": bool, "str": str, "int": int, "float": float}


PathArg = Annotated[str, Field(max_length=MAX_PATH_CHARS)]
TagsArg = Annotated[
    list[Annotated[str, Field(max_length=MAX_TAG_CHARS)]] | None,
    Field(max_length=MAX_TAGS, description="front-matter tags, all required (case-insensitive)"),
]


def search_parameters(app: Groove, options: Sequence[SearchOption]) -> list[inspect.Parameter]:
    kw = inspect.Parameter.KEYWORD_ONLY
    params = [
        inspect.Parameter(
            "query",
            kw,
            annotation=Annotated[
                str,
                Field(
                    min_length=1,
                    max_length=MAX_INPUT_CHARS,
                    description="what to look for (see the query forms above)",
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
                PathArg | None,
                Field(description="glob over KB-relative paths, e.g. 'docs/**' or 'notes/ops'"),
            ],
        ),
        inspect.Parameter("tags", kw, default=None, annotation=TagsArg),
    ]
    for option in options:
        params.append(
            inspect.Parameter(option.name, kw, default=None, annotation=_option_type(app, option))
        )
    return params


def _params(*specs: tuple[str, Any, Any]) -> tuple[inspect.Parameter, ...]:
    """Keyword-only parameters from (name, annotation, default) triples."""
    kw = inspect.Parameter.KEYWORD_ONLY
    return tuple(
        inspect.Parameter(name, kw, annotation=annotation, default=default)
        for name, annotation, default in specs
    )


_REL_PATH = Annotated[
    PathArg, Field(description="KB-relative path ('notes/a.md') or a note's name ('a')")
]

#: The reading tools' parameters (a served KB's ``kb`` is put first when several are).
GET_DOCUMENT_PARAMS = _params(
    (
        "path",
        Annotated[
            PathArg | None,
            Field(description="KB-relative path ('notes/a.md') or a note's name; or chunk_id"),
        ],
        None,
    ),
    ("start_line", Annotated[int | None, Field(ge=1, description="first line (1-based)")], None),
    ("end_line", Annotated[int | None, Field(ge=1, description="last line, inclusive")], None),
    ("chunk_id", Annotated[int | None, Field(ge=0, description="a search hit's chunk_id")], None),
    (
        "neighbours",
        Annotated[
            int,
            Field(
                ge=0,
                le=MAX_NEIGHBOURS,
                description="with chunk_id: chunks to include before and after it",
            ),
        ],
        1,
    ),
)
LIST_DOCUMENTS_PARAMS = _params(
    (
        "path_prefix",
        Annotated[PathArg | None, Field(description="only paths starting with this")],
        None,
    ),
    ("tags", TagsArg, None),
    ("offset", Annotated[int, Field(ge=0, description="entries to skip")], 0),
    ("limit", Annotated[int, Field(ge=1, le=MAX_LIST_LIMIT, description="page size")], 100),
)
RELATED_PARAMS = _params(
    ("path", _REL_PATH, inspect.Parameter.empty),
    (
        "limit",
        Annotated[int, Field(ge=1, le=MAX_RELATED_LIMIT, description="links listed per direction")],
        50,
    ),
)


def kb_parameter(names: Sequence[str], *, required: bool) -> inspect.Parameter:
    """The ``kb`` argument of a server for several KBs: an enum of the served names, never
    a path, so a client can only reach what was served."""
    choice: Any = Literal[tuple(names)]
    if required:
        annotation: Any = Annotated[choice, Field(description="which knowledge base")]
        return inspect.Parameter("kb", inspect.Parameter.KEYWORD_ONLY, annotation=annotation)
    annotation = Annotated[
        choice | None,
        Field(description=f"search only this knowledge base (default: all of {', '.join(names)})"),
    ]
    return inspect.Parameter(
        "kb", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation
    )


def unavailable_options(app: Groove) -> dict[str, str]:
    """Plugin options a client cannot use with this configuration, not offered in the
    schema: name -> why (said to a client that sends one anyway)."""
    settings = app.plugins.settings
    why: dict[str, str] = {}
    for o in app.plugins.search_options():
        if o.choices is not None and not o.choices(settings):
            why[o.name] = f"the server lists no values for it (plugin {o.plugin})"
        elif o.requires is not None and settings.value(o.requires) is None:
            why[o.name] = f"the server has not set up what it needs (plugin {o.plugin})"
    return why


def _option_type(app: Groove, option: SearchOption) -> Any:
    """A plugin option's parameter type: its values bounded, or listed where it has choices;
    its description in an agent's terms (what it does, and its default)."""
    text = option.agent_help or option.help
    if option.setting is not None:
        text += f" (default: {'on' if app.plugins.settings.value(option.setting) else 'off'})"
    if option.choices is None:
        kind: Any = _OPTION_TYPES[option.type]
        if kind is str:
            kind = Annotated[str, Field(max_length=MAX_OPTION_CHARS)]
        return Annotated[kind | None, Field(description=text)]
    allowed = tuple(option.choices(app.plugins.settings))
    listed = f"{text}. One of: {', '.join(allowed)}"
    return Annotated[Literal[allowed] | None, Field(description=listed)]


def usable_options(app: Groove) -> list[SearchOption]:
    """Plugin search options that can become parameters: not those a client cannot use
    (:func:`unavailable_options`); clashing ones are logged, skipped."""
    usable: list[SearchOption] = []
    taken = set(CORE_SEARCH_PARAMS)
    unavailable = unavailable_options(app)
    for option in app.plugins.search_options():
        if option.name in unavailable:
            continue
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
