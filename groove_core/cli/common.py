"""What every command module shares: one voice for errors, logging to stderr, the KBs named.

The command modules (``get``, ``status``, ``kb``, ``evaluate``, ``serve``) import this
module and ``options``, not one another; ``main`` assembles them into the ``groove`` group,
so no command sits in an import cycle with another. Only click and the standard library
load at module level: ``groove --help`` builds every command and must stay fast.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

#: Exit status for a usage problem (bad query, bad option), as click uses for its own.
EXIT_USAGE = 2

#: The levels ``--log-level`` offers.
LOG_LEVELS = ("debug", "info", "warning", "error")

#: The level set explicitly (``groove serve --log-level``); None: the default, info.
_chosen_level: str | None = None


def handle_errors(func: F) -> F:
    """Turn the errors a user can fix (:class:`~groove_core.errors.GrooveError`) into one
    clear line and an exit status: 2 for a query that cannot run, as click exits for a bad
    option, 1 for the rest. Every command reports errors through this decorator."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from groove_core.errors import GrooveError
        from groove_core.query import OptionError, QueryError

        configure_logging()
        try:
            return func(*args, **kwargs)
        except QueryError as err:
            what = "" if isinstance(err, OptionError) else "invalid query: "
            click.echo(f"groove: {what}{err}", err=True)
            sys.exit(EXIT_USAGE)
        except GrooveError as err:
            click.echo(f"groove: {err}", err=True)
            sys.exit(1)
        except KeyboardInterrupt:
            click.echo("\ngroove: interrupted", err=True)
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


def configure_logging(level: str | None = None, *, server: bool = False) -> None:
    """Logs go to stderr: stdout carries results (--json) and the MCP stdio transport.

    Without ``level`` (every command, through :func:`handle_errors`) this is applied when
    something first logs, not now: structlog costs ~70–90 ms to import, which neither
    ``groove --help`` nor a quiet search should pay; and it keeps a level chosen before.
    With ``level`` (``groove serve --log-level``) it is applied at once and sticks.
    ``server`` adds timestamps and one key=value line per event, and routes the standard
    library's loggers (the MCP SDK's, uvicorn's) to stderr at the same level.
    """
    from groove_core import logs

    global _chosen_level
    if level is None:
        if _chosen_level is None:  # else what was chosen stands, format and all
            logs.configure(functools.partial(_configure_structlog, "info", server=server))
        return
    _chosen_level = level.lower()
    _configure_structlog(_chosen_level, server=server)


def _configure_structlog(level: str, *, server: bool) -> None:
    import logging

    import structlog

    numeric = logging.getLevelName(level.upper())
    if not server:
        structlog.configure(
            logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
            wrapper_class=structlog.make_filtering_bound_logger(numeric),
        )
        return
    from groove_core.logs import copy_to_stream

    structlog.configure(
        processors=[
            copy_to_stream,  # a command answered for the command line: to its stderr too
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.KeyValueRenderer(key_order=["timestamp", "level", "event"]),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    logging.basicConfig(
        level=numeric, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s"
    )


def open_app(kb: Path, config_path: Path | None) -> Any:
    """The KB's :class:`~groove_core.app.Groove`: the one a server answering for the
    command line holds (:mod:`groove_core.cli.warm`), else opened now."""
    from groove_core.cli.warm_server import held_app

    held = held_app(kb, config_path)
    if held is not None:
        return held
    from groove_core.app import Groove

    return Groove.open(kb, config_path)


def search_folders(kbs: tuple[Path, ...], all_kbs: bool) -> list[Path]:
    """The KB folders a command covers: each --kb, every registered one (--all), or the
    current folder's KB."""
    from groove_core.cli.options import KB
    from groove_core.registry import kb_names, load_registry

    if names := kb_names(tuple(str(k) for k in kbs), all_kbs):
        registry = load_registry()
        return [registry[name].path for name in names]
    return list(kbs) or [KB.convert(".", None, None)]
