"""Options every command that works on a knowledge base shares (click and the light
registry only: imported by ``groove --help``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

KB_HELP = (
    "Knowledge base: a name registered with 'groove kb add', or a folder (the one holding "
    "groove.toml). A subfolder of an indexed KB means that KB."
)


class KbParam(click.ParamType[Path]):
    """A registered KB name or a folder, as the folder it means (see groove_core.registry)."""

    name = "kb"

    def __init__(self, *, discover: bool = True) -> None:
        self.discover = discover

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        from groove_core.config import ConfigError
        from groove_core.registry import resolve_kb

        if isinstance(value, Path):
            value = str(value)
        try:
            return resolve_kb(value, discover=self.discover)
        except ConfigError as err:
            self.fail(str(err), param, ctx)


KB = KbParam()
#: For ``groove index KB``: a subfolder is not silently taken for the KB above it.
KB_EXACT = KbParam(discover=False)

kb_option = click.option("--kb", type=KB, default=".", show_default=True, help=KB_HELP)
#: Commands that work on several KBs at once: --kb repeated, or --all registered ones.
kbs_option = click.option(
    "--kb", "kbs", type=KB, multiple=True, help=KB_HELP + " Repeat to use several."
)
all_option = click.option(
    "--all", "all_kbs", is_flag=True, help="Every knowledge base registered with 'groove kb add'."
)
config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Configuration file (default: <kb>/groove.toml).",
)
