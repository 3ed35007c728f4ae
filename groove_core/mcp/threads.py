"""Where the tools run: worker threads, each with its own index connection.

Also the embedder the workers share (behind a lock), and the server and the knowledge base
as a plugin's ``groove_mcp_tools`` sees them.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import numpy as np
    from mcp.server.mcpserver import MCPServer

    from groove_core.app import Groove
    from groove_core.config import GrooveConfig, Settings
    from groove_core.embedding import Embedder
    from groove_core.mcp.tool_app import ToolApp
    from groove_core.models import SearchResponse
    from groove_core.storage import SearchStore

T = TypeVar("T")


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
    a plugin registers run on the worker threads, so they may call ``app.search`` safely.
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


class ServedApp:
    """The served knowledge base as a plugin's tools see it (:class:`ToolApp`): the server's
    own Groove behind the few members a tool needs, nothing else of it reachable."""

    __slots__ = ("_app",)

    def __init__(self, app: Groove) -> None:
        self._app = app

    @property
    def kb(self) -> Path:
        return self._app.kb

    @property
    def config(self) -> GrooveConfig:
        return self._app.config

    @property
    def store(self) -> SearchStore:
        return self._app.store

    @property
    def settings(self) -> Settings:
        return self._app.plugins.settings

    def search(
        self,
        query: str,
        *,
        limit: int | None = None,
        path: str | None = None,
        tags: Sequence[str] = (),
        options: Mapping[str, Any] | None = None,
    ) -> SearchResponse:
        return self._app.search(query, limit=limit, path=path, tags=tags, options=options)


def add_plugin_tools(app: Groove, server: MCPServer, thread: GrooveThread) -> None:
    """Every enabled plugin's own tools (``groove_mcp_tools``), run on ``thread``."""
    tool_app: ToolApp = ServedApp(app)
    app.plugins.pm.hook.groove_mcp_tools(server=PluginServer(server, thread), app=tool_app)


def server_app(app: Groove) -> Groove:
    """A Groove of its own for the server, sharing config, plugins and the embedder (behind
    a lock, so that workers never race to build or load it).

    Its index connections are then opened on the worker threads, whatever the caller did
    with ``app`` on other threads before.
    """
    from groove_core.app import Groove

    own = Groove(app.kb, app.config, app.plugins)
    own.__dict__["embedder"] = LockedEmbedder(lambda: app.embedder)
    return own
