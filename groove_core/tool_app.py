"""What a plugin's MCP tools may use: the ``app`` that ``groove_mcp_tools`` receives.

Narrow on purpose: a tool reads the knowledge base and searches it; it does not rebuild the
plugin set, index, or reach the server's internals. Only typing at import time, so that
``groove_core.hookspecs`` can name it without importing the application (docs/plugins.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol, Unpack

if TYPE_CHECKING:
    from groove_core.config import GrooveConfig, Settings
    from groove_core.models import SearchResponse
    from groove_core.search_request import SearchArgs, SearchRequest
    from groove_core.storage import SearchStore


class ToolApp(Protocol):
    """The served knowledge base, as a plugin's MCP tool sees it.

    Use it from synchronous tools only: they run on the server's worker threads, where
    :attr:`store` is that thread's own index connection. Several tools may run at once.
    """

    @property
    def kb(self) -> Path:
        """The knowledge base's root folder."""
        ...

    @property
    def config(self) -> GrooveConfig:
        """The knowledge base's configuration (groove.toml)."""
        ...

    @property
    def store(self) -> SearchStore:
        """This worker thread's open index (its own SQLite connection)."""
        ...

    @property
    def settings(self) -> Settings:
        """The validated configuration, the plugins' sections included: a tool reads its
        own with ``app.settings.get(MySection)``, as a stage does with ``ctx.settings``."""
        ...

    def search(self, query: str | SearchRequest, **args: Unpack[SearchArgs]) -> SearchResponse:
        """A search, exactly as the ``search`` tool and ``groove search`` run it: keyword
        arguments ``limit``, ``path``, ``tags`` and ``options`` (:class:`SearchArgs`), or a
        :class:`~groove_core.search_request.SearchRequest`."""
        ...
