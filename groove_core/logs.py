"""structlog, imported the first time something is logged.

Importing structlog costs ~70–90 ms (it pulls in rich when rich is installed), and a
command-line search usually logs nothing: loggers here are proxies that import it on first
use, and a configuration asked for before then (:func:`configure`) is applied at that
moment — unless something else configured structlog in between (``groove serve`` does,
eagerly), which then wins.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

_pending: Callable[[], None] | None = None


def configure(apply: Callable[[], None]) -> None:
    """Run ``apply`` (which calls ``structlog.configure``) now if structlog is already
    imported, else when the first proxy logs."""
    global _pending
    if "structlog" in sys.modules:
        _pending = None
        apply()
    else:
        _pending = apply


def _structlog() -> Any:
    global _pending
    import structlog

    if _pending is not None:
        apply, _pending = _pending, None
        if not structlog.is_configured():
            apply()
    return structlog


class LazyLogger:
    """Stands in for ``structlog.get_logger(name)`` until a method of it is used."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: Any = None

    def __getattr__(self, attr: str) -> Any:
        if self._logger is None:
            self._logger = _structlog().get_logger(self._name)
        return getattr(self._logger, attr)


def get_logger(name: str) -> Any:
    """A logger for ``name`` that imports structlog only when it first logs."""
    return LazyLogger(name)
