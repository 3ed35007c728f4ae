"""structlog, imported the first time something is logged.

Importing structlog costs ~70–90 ms (it pulls in rich when rich is installed), and a
command-line search usually logs nothing: loggers here are proxies that import it on first
use, and a configuration asked for before then (:func:`configure`) is applied at that
moment — unless something else configured structlog in between (``groove serve`` does,
eagerly), which then wins.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, TextIO

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


# -- a command answered by a server: its log lines go to the command line ---------------

_captured = threading.local()


@contextlib.contextmanager
def to_stream(stream: TextIO, *, stdout_tty: bool = False) -> Iterator[None]:
    """While a server runs one command for the command line (``groove_core.cli.warm``),
    the warnings and errors this thread logs are also written to ``stream`` (the command's
    stderr, sent back to the client), rendered as the command alone renders them: a
    plugin's warning reaches the terminal as it would without a server. Info lines are the
    server's own (``index replaced: reopening``), and other threads (MCP searches, the
    watcher) are not captured. ``stdout_tty``: whether the client's stdout is a terminal,
    which decides colour for structlog alone (with ``NO_COLOR`` and ``FORCE_COLOR``)."""
    before = getattr(_captured, "sink", None)
    _captured.sink = (stream, stdout_tty)
    try:
        yield
    finally:
        _captured.sink = before


#: The log methods copied to a command's stderr: what a command alone shows that a
#: long-running process does not log for itself.
COPIED = frozenset({"warning", "warn", "error", "exception", "critical", "fatal"})


def copy_to_stream(logger: Any, method: str, event: Any) -> Any:
    """A structlog processor, first in a server's chain: a copy of the event to the stream
    :func:`to_stream` set for this thread, if any; the event goes on unchanged."""
    sink = getattr(_captured, "sink", None)
    if sink is not None and method in COPIED:
        stream, stdout_tty = sink
        # The copy must never cost the command or the server's own line.
        with contextlib.suppress(Exception):
            line = dict(event)
            for step in _as_alone(stdout_tty):
                line = step(logger, method, line)
            stream.write(f"{line}\n")
    return event


def _as_alone(stdout_tty: bool) -> list[Any]:
    """structlog's default processors, as a command alone logs through them; colour as
    structlog decides it there: not with ``NO_COLOR`` set, else with ``FORCE_COLOR`` set or
    stdout a terminal (the client's, not this server's)."""
    import structlog

    colors = not os.environ.get("NO_COLOR") and (bool(os.environ.get("FORCE_COLOR")) or stdout_tty)
    return [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.StackInfoRenderer(),
        structlog.dev.set_exc_info,
        structlog.processors.TimeStamper(fmt="%Y-%m-%d %H:%M:%S", utc=False),
        structlog.dev.ConsoleRenderer(colors=colors, force_colors=colors),
    ]
