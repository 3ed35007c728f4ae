"""Where the tools run: worker threads, each with its own index connection.

Also the embedder the workers share (behind a lock), and the server and the knowledge base
as a plugin's ``groove_mcp_tools`` sees them.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

from groove_core.embedding import WrappedEmbedder
from groove_core.mcp.defaults import DEFAULT_READERS
from groove_core.mcp.schemas import kb_parameter

if TYPE_CHECKING:
    import numpy as np
    from mcp.server.mcpserver import MCPServer

    from groove_core.app import Groove
    from groove_core.config import GrooveConfig, Settings
    from groove_core.embedding import Embedder
    from groove_core.models import SearchResponse
    from groove_core.multi_kb import NamedKb
    from groove_core.search_request import SearchArgs, SearchRequest
    from groove_core.storage import SearchStore
    from groove_core.tool_app import ToolApp

T = TypeVar("T")


class WorkerPool:
    """Runs every call into groove on a small pool of worker threads, for every served KB.

    Each worker opens its own index connection to each KB it serves (``Groove.store`` is
    per thread: SQLite objects belong to the thread that made them), so searches run in
    parallel, each in one
    read transaction of its own (WAL gives every connection its own snapshot, and lets
    ``groove index`` write from another process meanwhile). The event loop stays free to
    serve other requests. The embedder is shared, behind a lock (:class:`LockedEmbedder`).
    ``workers=1`` runs one call at a time.
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


class LockedEmbedder(WrappedEmbedder):
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

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        inner = self.inner
        with self._call_lock:
            return inner.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        inner = self.inner
        with self._call_lock:
            return inner.embed_query(text)


@dataclass(frozen=True)
class _PluginTool:
    fn: Callable[..., Any]
    name: str
    options: dict[str, Any]


class PluginServer:
    """The server as ``groove_mcp_tools`` sees it: the real MCPServer, except that the tools
    a plugin adds are collected, to be registered once for every KB that has them
    (:func:`add_plugin_tools`); sync ones run on the worker pool, so they may call
    ``app.search`` safely.
    """

    def __init__(self, server: MCPServer, found: list[_PluginTool]) -> None:
        self._server = server
        self._found = found

    def add_tool(self, fn: Callable[..., Any], name: str | None = None, **kwargs: Any) -> None:
        self._found.append(_PluginTool(fn, name or fn.__name__, kwargs))

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

    def search(self, query: str | SearchRequest, **args: Unpack[SearchArgs]) -> SearchResponse:
        return self._app.search(query, **args)


def add_plugin_tools(kbs: Sequence[NamedKb], server: MCPServer, pool: WorkerPool) -> None:
    """Every enabled plugin's own tools (``groove_mcp_tools``) on every served KB, each
    registered once, run on ``pool``. With several KBs a tool takes a ``kb`` argument
    listing the KBs whose plugins add it, and each call runs that KB's own tool.

    A plugin whose hook fails (:func:`plugin_tools`) adds none of its tools and is logged,
    one warning line: the server starts with the built-in tools and the other plugins'."""
    by_name: dict[str, dict[str, _PluginTool]] = {}
    for kb in kbs:
        for tool in plugin_tools(kb, server):
            by_name.setdefault(tool.name, {})[kb.name] = tool
    for name, per_kb in by_name.items():
        first = next(iter(per_kb.values()))
        if len(kbs) == 1:
            server.add_tool(pool.on_thread(first.fn), name=name, **first.options)
        else:
            options = {"description": inspect.getdoc(first.fn), **first.options}
            server.add_tool(_on_each_kb(name, per_kb, pool), name=name, **options)


def plugin_tools(kb: NamedKb, server: MCPServer) -> list[_PluginTool]:
    """The tools ``kb``'s plugins add, each plugin's ``groove_mcp_tools`` called as pluggy
    would (in its order, with the arguments it names) and guarded
    (:meth:`~groove_core.plugins.Plugins.calling`). A plugin that fails adds none of its
    tools (not those it added before failing either): the server starts without them and
    logs the failure, one line naming the plugin, its distribution and the hook. Its
    tools are absent from the list a client reads, which changes no other tool's answer;
    stopping the server instead would take every tool from an agent whose client seldom
    shows why. A hook some plugin wraps is called through pluggy, a failure leaving out
    all its implementations and blamed on the one it came from
    (:func:`~groove_core.plugins.blame`)."""
    from groove_core.errors import GrooveError
    from groove_core.plugins import PluginError, blame

    hook = "groove_mcp_tools"
    plugins = kb.app.plugins
    tool_app: ToolApp = ServedApp(kb.app)
    caller = plugins.pm.hook.groove_mcp_tools
    impls = list(reversed(caller.get_hookimpls()))
    runs: list[tuple[str | None, Any]] = [(impl.plugin_name, impl) for impl in impls]
    if any(impl.hookwrapper or impl.wrapper for impl in impls):
        runs = [(None, None)]  # through pluggy: blamed on whichever failed
    tools: list[_PluginTool] = []
    for plugin, impl in runs:
        found: list[_PluginTool] = []
        args = {"server": PluginServer(server, found), "app": tool_app}
        guard = plugins.calling(plugin, hook) if plugin else plugins.calling_through(impls, hook)
        try:
            with guard:
                if impl is None:
                    caller(**args)
                else:
                    impl.function(*[args[name] for name in impl.argnames])
        except GrooveError as err:  # a PluginError names the plugin and the hook
            why = err if isinstance(err, PluginError) else f"failed in {hook}: {err}"
            who = plugin or blame(impls, err)
            _log().warning("plugin tools left out", kb=kb.name, plugin=who, error=str(why))
            continue
        tools.extend(found)
    return tools


def _log() -> Any:
    import structlog

    return structlog.get_logger("groove.mcp")


def _on_each_kb(name: str, per_kb: dict[str, _PluginTool], pool: WorkerPool) -> Callable[..., Any]:
    """One tool for the KBs in ``per_kb``: the first one's parameters after a ``kb``
    argument, each call run by that KB's own function."""
    from groove_core.config import ConfigError

    first = next(iter(per_kb.values()))
    signature = inspect.signature(first.fn, eval_str=True)
    if "kb" in signature.parameters:
        raise ConfigError(
            f"the plugin tool {name!r} has a parameter 'kb' of its own, which a server "
            "for several knowledge bases adds to every tool: serve one KB at a time"
        )
    runs = {kb_name: pool.on_thread(tool.fn) for kb_name, tool in per_kb.items()}

    async def call(**kwargs: Any) -> Any:
        return await runs[kwargs.pop("kb")](**kwargs)

    keyword = inspect.Parameter.KEYWORD_ONLY
    params = [
        kb_parameter(tuple(per_kb), required=True),
        *(p.replace(kind=keyword) for p in signature.parameters.values()),
    ]
    return named_tool(call, first.fn.__name__, params, signature.return_annotation)


def named_tool(
    fn: Callable[..., Awaitable[Any]],
    name: str,
    params: Sequence[inspect.Parameter],
    output: Any,
) -> Callable[..., Awaitable[Any]]:
    """``fn`` (called with keyword arguments) as the MCP SDK reads a tool: named ``name``,
    with these parameters and this output, from which its schemas are built."""

    async def tool(**kwargs: Any) -> Any:
        return await fn(**kwargs)

    empty = inspect.Parameter.empty
    tool.__name__ = tool.__qualname__ = name
    tool.__signature__ = inspect.Signature(params, return_annotation=output)  # type: ignore[attr-defined]
    tool.__annotations__ = {p.name: p.annotation for p in params if p.annotation is not empty}
    if output is not empty:
        tool.__annotations__["return"] = output
    return tool


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
