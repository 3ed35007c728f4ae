"""Placeholder: replaced by the eval work (issue 7)."""

from __future__ import annotations

import click


@click.command("eval")
def eval_cmd() -> None:
    """Measure retrieval quality (not built yet)."""
    raise click.ClickException("groove eval is not built yet")


@click.command("tune")
def tune_cmd() -> None:
    """Tune fusion knobs (not built yet)."""
    raise click.ClickException("groove tune is not built yet")
