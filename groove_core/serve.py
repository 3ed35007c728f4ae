"""Placeholder: replaced by the MCP server work (issue 4)."""

from __future__ import annotations

import click


@click.command("serve")
def serve_cmd() -> None:
    """Serve the knowledge base over MCP (not built yet)."""
    raise click.ClickException("groove serve is not built yet")
