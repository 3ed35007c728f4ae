"""``groove serve``: the knowledge base over MCP, on stdio (default) or streamable HTTP.

Only click is imported at module level so that ``groove --help`` stays fast; the MCP SDK,
the index and the embedder load when the command runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from groove_core.cli_options import config_option, kb_option

#: Mirror groove_core.mcp_server's constants without importing the MCP SDK (a test pins them).
DEFAULT_MAX_RESPONSE_CHARS = 40_000
MIN_RESPONSE_CHARS = 2_000


def configure_logging(level: str) -> None:
    """Send every log line to stderr: on stdio, stdout carries nothing but MCP messages."""
    import logging

    import structlog

    numeric = logging.getLevelName(level.upper())
    structlog.configure(
        processors=[
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


@click.command("serve")
@kb_option
@config_option
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio for a client that starts groove itself; http for streamable HTTP.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP: address to bind.")
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=8765,
    show_default=True,
    help="HTTP: port to listen on (the endpoint is /mcp).",
)
@click.option(
    "--max-response-chars",
    type=click.IntRange(MIN_RESPONSE_CHARS),
    default=DEFAULT_MAX_RESPONSE_CHARS,
    show_default=True,
    help="Size budget of each tool response, in characters; what does not fit is reported "
    "as truncated.",
)
@click.option(
    "--watch",
    is_flag=True,
    help="Keep the index current while serving (re-index on file changes, debounced).",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
    help="Logging to stderr.",
)
def serve_cmd(
    kb: Path,
    config_path: Path | None,
    transport: str,
    host: str,
    port: int,
    max_response_chars: int,
    watch: bool,
    log_level: str,
) -> None:
    """Serve the knowledge base to LLM agents over MCP (tools: search, get_document,
    list_documents, index_status, and those plugins add). See docs/mcp.md.
    """
    from groove_core.cli import handle_errors

    configure_logging(log_level)
    handle_errors(_serve)(kb, config_path, transport, host, port, max_response_chars, watch)


def _serve(
    kb: Path,
    config_path: Path | None,
    transport: str,
    host: str,
    port: int,
    max_chars: int,
    watch: bool,
) -> None:
    import structlog

    from groove_core.app import Groove
    from groove_core.mcp_server import build_mcp_server

    log = structlog.get_logger("groove.serve")
    app = Groove.open(kb, config_path)
    if watch:
        from groove_core.watch import Watcher

        # Its own connection on its own thread; searches keep reading through WAL.
        Watcher(app).start()
    elif not app.index_file.exists():
        log.warning("no index yet: tools will fail until 'groove index' runs", kb=str(kb))
    server = build_mcp_server(app, max_response_chars=max_chars)
    log.info("serving", kb=str(kb), transport=transport, max_response_chars=max_chars)
    if transport == "stdio":
        server.run("stdio")
    else:
        log.info("listening", url=f"http://{host}:{port}/mcp")
        server.run("streamable-http", host=host, port=port)
