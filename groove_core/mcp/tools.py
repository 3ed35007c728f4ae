"""The built-in tools' bodies, run on the worker threads, and their errors.

Bad calls become MCP tool errors with a message an LLM can act on, in the client's terms
(KB-relative paths, never the server's folders).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import structlog
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent

from groove_core.filters import GlobError
from groove_core.kb_files import (
    DiskTracker,
    DocumentError,
    by_name,
    changed_since_index,
    check_range,
    chunk_span,
    indexed_document,
    lines_asked,
    read_lines,
    resolve_markdown,
)
from groove_core.mcp.budget import (
    FIELD_SHARE,
    RELATED_NOTE,
    cap_fields,
    clip_text,
    clipped_note,
    dumps,
    fit_links,
    fit_search,
    fit_status,
    largest,
)
from groove_core.mcp.schemas import DOCUMENT_LINKS, ChangesOut, EmbedderOut, StatusOut
from groove_core.query import OptionError, QueryError

if TYPE_CHECKING:
    from groove_core.app import Groove
    from groove_core.multi_kb import NamedKb
    from groove_core.rows import DocumentRow

T = TypeVar("T")

_log = structlog.get_logger("groove.mcp")


def result(payload: dict[str, Any]) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=dumps(payload))], structured_content=payload
    )


def _tool_errors() -> tuple[type[BaseException], ...]:
    from groove_core.config import ConfigError
    from groove_core.embedding import EmbedderError
    from groove_core.storage import StoreError

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


def as_tool_errors(app: Groove, name: str, fn: Callable[..., T]) -> Callable[..., T]:
    """Every failure becomes an MCP tool error whose text says what was wrong, in the
    client's terms (KB-relative paths); never a bare "Error executing tool" from the SDK."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except GlobError as err:  # a QueryError, but about the path argument, not the query
            message = f"invalid argument: {err}"
        except OptionError as err:
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
        except app.backend.errors() as err:
            # The tools' statements are groove's own: an error that is not the environment's
            # means a damaged index, which doctor --repair rebuilds.
            message = str(app.backend.classify(err, f"running {name}", suspect=True))
        except Exception as err:
            _log.exception("tool failed", tool=name)
            message = (
                f"{name} failed inside groove ({type(err).__name__}); the server's log has "
                "the details. Other calls still work"
            )
        raise ToolError(kb_relative(app, message)) from None

    return wrapper


class Tools:
    """One served KB's built-in tool bodies: plain functions run on the worker pool."""

    def __init__(
        self,
        kb: NamedKb,
        budget: int,
        option_names: Sequence[str],
        activity: Callable[[], str | None] | None = None,
    ) -> None:
        self.app = kb.app
        #: The progress line of a re-index this server runs (serve --watch), if any.
        self.activity = activity or (lambda: None)
        self.name = kb.name  # what index_status calls the KB: the name it is served under
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
        return result(payload)

    def get_document(
        self,
        path: str | None,
        start_line: int | None,
        end_line: int | None,
        chunk_id: int | None,
        neighbours: int,
    ) -> CallToolResult:
        if path is None:
            if chunk_id is None:
                raise DocumentError("give path (a note's path or name), or a hit's chunk_id")
            path = chunk_span(self.app, chunk_id, 0)[0].path
        file = resolve_markdown(self.app, by_name(self.app, path))
        if file.fragment is not None and chunk_id is not None:
            # A chunk's lines count from the top of the file, a part's from its own start.
            raise DocumentError(
                f"give either a part of the file ({path!r}) or chunk_id, not both: "
                f"the chunk's lines are the whole file's (path={file.rel!r})"
            )
        lines, low, high = read_lines(self.app, file)
        indexed = indexed_document(self.app, file.rel)
        if chunk_id is not None:
            if start_line is not None or end_line is not None:
                raise DocumentError("give either chunk_id or start_line/end_line, not both")
            first, last = self._chunk_lines(file.rel, indexed, chunk_id, neighbours)
            first, last = check_range(first, last, len(lines))
        else:
            first, last = lines_asked(file, start_line, end_line, (low, high), len(lines))
        base = self._document_base(file, indexed, len(lines), chunk_id)
        found = self.app.store.links_of(file.rel, DOCUMENT_LINKS) if indexed else None
        if found is not None:
            # A share of the budget, so the links never crowd out the text asked for.
            base["links"], _ = fit_links(
                found.to_json(), lambda p: len(dumps(p)) <= self.budget // 8
            )
        return result(self._fit_lines(base, lines, first, last))

    def related(self, path: str, limit: int) -> CallToolResult:
        file = resolve_markdown(self.app, by_name(self.app, path))
        indexed = next((d for d in self.app.store.documents() if d.path == file.rel), None)
        found = self.app.store.links_of(file.rel, limit) if indexed else None
        if indexed is None or found is None:
            raise DocumentError(f"{file.rel!r} is not indexed yet: run 'groove index' first")
        head = cap_fields({"path": file.rel, "title": indexed.title}, ("title",), 1000)
        note = {"truncated": True, "note": RELATED_NOTE}
        payload, cut = fit_links(
            {**head, **found.to_json()}, lambda p: len(dumps({**p, **note})) <= self.budget
        )
        payload.update(note if cut else {"truncated": False})
        return result(payload)

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
                    n for n in (out.get("note"), clipped_note(1, "document")) if n
                )
            return out

        def fits(payload: dict[str, Any]) -> bool:
            return len(dumps(payload)) <= self.budget

        k = largest(len(wanted), lambda k: fits(shaped(k, "".join(wanted[:k]))))
        if k > 0 or not wanted:
            return shaped(k, "".join(wanted[:k]))
        # Not even the first line fits: show its beginning.
        return shaped(0, clip_text(wanted[0], lambda t: fits(shaped(0, t))))

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

        k = largest(len(page), lambda k: len(dumps(shaped(k))) <= self.budget)
        # An entry that fits in no page is stepped over, so that paging always moves on.
        return result(shaped(k, skipped=1 if k == 0 and page else 0))

    @staticmethod
    def _page_notes(page: list[dict[str, Any]], k: int, skipped: int, offset: int) -> list[str]:
        notes = []
        if clipped := sum("clipped_fields" in d for d in page[:k]):
            notes.append(clipped_note(clipped, "entries"))
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
        from groove_core.status import index_facts

        store = self.app.store
        with store.snapshot():
            facts = index_facts(self.app, store, self.disk)
        embedder = facts["embedder"]
        status = StatusOut(
            kb=self.name,
            index_file=self.app.backend.public_label,
            documents=facts["documents"],
            chunks=facts["chunks"],
            embedder=EmbedderOut(
                name=embedder["name"], identity=embedder["identity"], dim=embedder["dim"]
            ),
            last_indexed=facts["last_indexed"],
            plugins=[i.name for i in self.app.plugins.infos if i.status == "enabled"],
            changes_on_disk=ChangesOut(**facts["changes_on_disk"]),
            incomplete=facts["incomplete"],
            incomplete_note=facts["incomplete_note"],
            vectors_pending=facts["vectors_pending"],
            semantic_note=facts["semantic_note"],
            indexing=self.activity(),
        )
        return result(fit_status(status.model_dump(mode="json"), self.budget))
