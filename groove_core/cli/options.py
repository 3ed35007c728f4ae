"""Options every command that works on a knowledge base shares (click and the light
registry only: imported by ``groove --help``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

F = TypeVar("F", bound=Callable[..., Any])

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

    def shell_complete(
        self, ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[CompletionItem]:
        """Registered names starting with what was typed, then folders (shell completion,
        docs/getting-started.md)."""
        from click.shell_completion import CompletionItem

        from groove_core.config import ConfigError
        from groove_core.registry import load_registry

        try:
            names = sorted(n for n in load_registry() if n.startswith(incomplete))
        except ConfigError:  # a broken registry must not break completion
            names = []
        return [CompletionItem(n) for n in names] + [CompletionItem(incomplete, type="dir")]


KB = KbParam()
#: For ``groove index KB``: a subfolder is not silently taken for the KB above it.
KB_EXACT = KbParam(discover=False)

kb_option = click.option("--kb", type=KB, default=".", show_default=True, help=KB_HELP)


def defaulted(name: str, kind: Any, default: Any, help_text: str) -> Callable[[F], F]:
    """A ``--name`` option whose default ``--help`` shows: most options of the commands are
    one, and spelling ``show_default`` out every time hid what differs between them."""
    return click.option(name, type=kind, default=default, show_default=True, help=help_text)


def kb_argument(*, exact: bool = False) -> Callable[[F], F]:
    """An optional ``[KB]`` argument and ``--kb``, either one: the commands that took a
    positional KB keep it, and take ``--kb`` like every other command. The command gets
    both (``kb`` and ``kb_opt``) and calls :func:`one_kb`. ``exact``: a subfolder of an
    indexed KB is not taken for that KB (``groove index``)."""
    kb_type = KB_EXACT if exact else KB
    text = KB_HELP if not exact else KB_HELP.split(" A subfolder")[0]

    def decorate(func: F) -> F:
        func = click.option(
            "--kb", "kb_opt", type=kb_type, default=None, help=text + " Same as KB."
        )(func)
        return click.argument("kb", metavar="[KB]", type=kb_type, required=False)(func)

    return decorate


def one_kb(argument: Path | None, option: Path | None) -> Path | None:
    """The KB given as the argument or with --kb (None when neither); both is an error
    unless they name the same folder."""
    if argument is not None and option is not None and argument != option:
        raise click.UsageError("give the knowledge base once: as the KB argument or with --kb")
    return argument if argument is not None else option


#: Commands that work on several KBs at once: --kb repeated, or --all registered ones.
kbs_option = click.option(
    "--kb", "kbs", type=KB, multiple=True, help=KB_HELP + " Repeat to use several."
)
all_option = click.option(
    "--all", "all_kbs", is_flag=True, help="Every knowledge base registered with 'groove kb add'."
)


def file_option(name: str, dest: str, help_text: str) -> Callable[[F], F]:
    """An optional ``--name FILE`` (a file, never a folder), given to the command as
    ``dest``: a Path, or None when the option is left out."""
    return click.option(
        name, dest, type=click.Path(dir_okay=False, path_type=Path), default=None, help=help_text
    )


config_option = file_option(
    "--config", "config_path", "Configuration file (default: <kb>/groove.toml)."
)
