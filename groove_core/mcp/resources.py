"""Each served KB's documents as MCP resources, the prompts, and change notifications.

A document is ``groove://<kb>/<path>`` (the served name, the KB-relative path,
percent-encoded as URIs are). ``resources/list`` pages through the indexed documents;
``resources/read`` reads a file with the confinement, ignore rules and size caps of
``get_document`` and its response budget: text past it is cut at a line boundary, with a
last line saying where ``get_document`` goes on. While ``serve --watch`` re-indexes, each
changed document is announced to clients listening for it (``subscriptions/listen``, the
2026-07-28 revision) and an added or removed one changes the list.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

import structlog
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.server.mcpserver.prompts import Prompt
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated, ServerEvent
from mcp_types import Resource, ResourceTemplate

from groove_core.kb_files import DocumentError, read_text, resolve_markdown

if TYPE_CHECKING:
    from groove_core.mcp.threads import WorkerPool
    from groove_core.multi_kb import NamedKb

_log = structlog.get_logger("groove.mcp")

SCHEME = "groove"
#: Documents per ``resources/list`` page.
PAGE_SIZE = 200
MIME = "text/markdown"


def document_uri(kb: str, path: str) -> str:
    return f"{SCHEME}://{quote(kb, safe='')}/{quote(path, safe='/')}"


@dataclass(frozen=True)
class DocumentSource:
    """The served KBs' documents, read on the worker pool (the index connections live
    on its threads)."""

    kbs: Sequence[NamedKb]
    pool: WorkerPool
    budget: int

    def templates(self) -> list[ResourceTemplate]:
        return [
            ResourceTemplate(
                name=f"{kb.name} document",
                uri_template=f"{SCHEME}://{quote(kb.name, safe='')}/{{+path}}",
                description=(
                    f"A file of the knowledge base {kb.name!r} by its KB-relative path "
                    "(as search returns it)"
                ),
                mime_type=MIME,
            )
            for kb in self.kbs
        ]

    async def page(self, cursor: str | None) -> tuple[list[Resource], str | None]:
        position = _position(cursor, len(self.kbs))
        return await self.pool.run(self._page, *position)

    def _page(self, first: int, after: str | None) -> tuple[list[Resource], str | None]:
        """Up to PAGE_SIZE documents from the ``first`` KB on, after the path ``after`` in
        it: each KB's documents by path, read a page at a time (the cursor holds the last
        path listed, so a document added or removed meanwhile shifts nothing)."""
        listed: list[Resource] = []
        for number in range(first, len(self.kbs)):
            kb = self.kbs[number]
            wanted = PAGE_SIZE - len(listed)
            # one more than fits: whether this KB goes on after the page
            docs = kb.app.store.documents(after=after, limit=wanted + 1)
            listed.extend(
                Resource(
                    name=doc.path,
                    title=doc.title or None,
                    uri=document_uri(kb.name, doc.path),
                    mime_type=MIME,
                )
                for doc in docs[:wanted]
            )
            if len(docs) > wanted:
                return listed, _cursor(number, docs[wanted - 1].path)
            after = None
            if len(listed) == PAGE_SIZE and number + 1 < len(self.kbs):
                return listed, _cursor(number + 1, None)
        return listed, None

    async def read(self, uri: str) -> str:
        kb, path = self._parse(uri)
        return await self.pool.run(self._read, kb, path)

    def _parse(self, uri: str) -> tuple[NamedKb, str]:
        prefix = f"{SCHEME}://"
        if not uri.startswith(prefix) or len(uri) > 4096:
            raise ResourceNotFoundError(f"not a groove document: {uri[:200]!r}")
        name, _, path = uri[len(prefix) :].partition("/")
        for kb in self.kbs:
            if kb.name == unquote(name):
                return kb, unquote(path)
        served = ", ".join(repr(kb.name) for kb in self.kbs)
        raise ResourceNotFoundError(f"no knowledge base {unquote(name)!r} is served ({served})")

    def _read(self, kb: NamedKb, path: str) -> str:
        from groove_core.mcp.tools import kb_relative

        try:
            file = resolve_markdown(kb.app, path)
            text = read_text(kb.app, file)
        except DocumentError as err:
            raise ResourceNotFoundError(kb_relative(kb.app, str(err))) from None
        except OSError as err:
            raise ResourceError(f"cannot read {path!r}: {err.strerror or err}") from None
        return fit_text(text, self.budget, file.rel)


def fit_text(text: str, budget: int, rel: str) -> str:
    """``text`` cut at a line boundary to stay within ``budget`` characters, with a last
    line saying where to go on (never a silent cut)."""
    if len(text) <= budget:
        return text
    kept, size = [], 0
    reserve = 200  # the closing line
    for line in text.splitlines(keepends=True):
        if size + len(line) > budget - reserve:
            break
        kept.append(line)
        size += len(line)
    if not kept:  # one line longer than the budget: its beginning
        kept, size = [text[: budget - reserve]], budget - reserve
    following = len(kept) + 1
    return "".join(kept) + (
        f"\n[groove: {len(text) - size} more characters left out to fit the response size "
        f"budget; read on with get_document(path={rel!r}, start_line={following})]\n"
    )


#: The longest cursor taken: a KB's number and a path (paths are bounded by the file system).
MAX_CURSOR = 16_384


def _storable(path: str) -> bool:
    """Whether ``path`` could be a stored path: UTF-8 text without NUL (a lone surrogate
    or a NUL fails in the database, not as a refused cursor)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in path


def _cursor(kb: int, after: str | None) -> str:
    """Where the next page starts: the ``kb``-th served KB, after the path ``after``."""
    return base64.urlsafe_b64encode(json.dumps([kb, after], ensure_ascii=False).encode()).decode()


def _position(cursor: str | None, kbs: int) -> tuple[int, str | None]:
    if not cursor:
        return 0, None
    if len(cursor) <= MAX_CURSOR:
        try:
            held = json.loads(base64.urlsafe_b64decode(cursor.encode()).decode())
        except (binascii.Error, UnicodeDecodeError, ValueError, RecursionError):
            held = None
        if (
            isinstance(held, list)
            and len(held) == 2
            and type(held[0]) is int
            and 0 <= held[0] < kbs
            and (held[1] is None or (isinstance(held[1], str) and _storable(held[1])))
        ):
            return held[0], held[1]
    raise ResourceError("invalid cursor: pass back the nextCursor of the previous page")


class WatchBus:
    """The server's subscription bus, published to from a watcher thread.

    Listeners (the ``subscriptions/listen`` streams) live on the server's event loop; a
    re-index happens on the watcher's thread, so an event is handed to the loop the
    listeners subscribed on.
    """

    def __init__(self) -> None:
        self._listeners: dict[object, Callable[[ServerEvent], None]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    async def publish(self, event: ServerEvent) -> None:
        self._deliver(event)
        await asyncio.sleep(0)

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        token = object()
        with self._lock:
            self._loop = asyncio.get_running_loop()
            self._listeners[token] = listener

        def unsubscribe() -> None:
            with self._lock:
                self._listeners.pop(token, None)

        return unsubscribe

    def publish_from_thread(self, events: Iterable[ServerEvent]) -> None:
        with self._lock:
            loop = self._loop if self._listeners else None
        if loop is None or loop.is_closed():
            return  # nobody listens
        for event in events:
            loop.call_soon_threadsafe(self._deliver, event)

    def _deliver(self, event: ServerEvent) -> None:
        with self._lock:
            listeners = list(self._listeners.values())
        for listener in listeners:
            try:
                listener(event)
            except Exception:  # one bad stream must not starve the others
                _log.exception("subscription listener failed")


def change_events(
    kb: str, added: Iterable[str], modified: Iterable[str], removed: Iterable[str]
) -> list[ServerEvent]:
    """What clients hear when a re-index changed these documents."""
    added, removed = list(added), list(removed)
    events: list[ServerEvent] = [
        ResourceUpdated(uri=document_uri(kb, path))
        for path in sorted({*added, *modified, *removed})
    ]
    if added or removed:
        events.append(ResourcesListChanged())
    return events


ANSWER_PROMPT = """\
Answer this question from my notes: {question}

Use the groove tools: `search` first (rephrase and search again when results are
low_confidence), then `get_document` with a hit's chunk_id to read around it. Answer only
from what you read, and cite each claim with its path and line (path:line_start). If the
notes do not answer it, say so instead of guessing."""

EXPLORE_PROMPT = """\
Summarise what my notes say about: {topic}

Search with `search` (try the words the notes would use, in Japanese and English), follow
the most relevant notes' links with `related`, and list the main points with the path of
each source. Point out notes that disagree or look out of date."""


def add_prompts(server: MCPServer) -> None:
    """Two prompts that show an agent how to use the tools on the user's notes."""

    def answer_from_notes(question: str) -> str:
        return ANSWER_PROMPT.format(question=question[:2000])

    def explore_topic(topic: str) -> str:
        return EXPLORE_PROMPT.format(topic=topic[:500])

    server.add_prompt(
        Prompt.from_function(
            answer_from_notes,
            title="Answer from my notes",
            description="Answer a question from the knowledge base, citing the notes used",
        )
    )
    server.add_prompt(
        Prompt.from_function(
            explore_topic,
            title="What do my notes say about...",
            description="Gather what the knowledge base says about a topic, with sources",
        )
    )
