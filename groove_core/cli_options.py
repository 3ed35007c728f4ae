"""Options every command that works on a knowledge base shares (click only: imported by
``groove --help``)."""

from __future__ import annotations

from pathlib import Path

import click

kb_option = click.option(
    "--kb",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    show_default=True,
    help="Knowledge base folder (the one holding groove.toml).",
)
config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Configuration file (default: <kb>/groove.toml).",
)
