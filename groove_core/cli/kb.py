"""``groove kb``: register knowledge bases by name, list them, remove them.

Only click at module level (``groove --help`` imports this); the registry is light too.
"""

from __future__ import annotations

from pathlib import Path

import click

from groove_core.cli.common import handle_errors
from groove_core.cli.terminal import dumps, printable


@click.group("kb")
def kb_group() -> None:
    """Named knowledge bases: 'groove search --kb NAME', '--all' (see docs/several-kbs.md)."""


def _configured(folder: Path) -> tuple[str | None, str]:
    """``[kb] name`` and ``description`` of the folder's groove.toml (None, "" without)."""
    from groove_core.config import load_config

    config = load_config(folder)
    return config.kb.name, config.kb.description


@kb_group.command("add")
@click.argument("name")
@click.argument("path", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--description",
    default=None,
    help="What it holds, in a sentence (default: [kb] description of its groove.toml).",
)
@handle_errors
def kb_add(name: str, path: Path, description: str | None) -> None:
    """Register the knowledge base in folder PATH as NAME."""
    from groove_core.registry import add_kb

    text = description if description is not None else _configured(path)[1]
    entry = add_kb(name, path, text)
    click.echo(f"registered {entry.name}: {printable(str(entry.path))}")


@kb_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@handle_errors
def kb_list(as_json: bool) -> None:
    """Every registered knowledge base: name, folder, whether indexed, description."""
    from groove_core.registry import has_index, load_registry, registry_path

    entries = sorted(load_registry().values(), key=lambda e: e.name)
    rows = [{**e.to_json(), "indexed": has_index(e.path)} for e in entries]
    if as_json:
        click.echo(dumps({"registry": str(registry_path()), "kbs": rows}))
        return
    if not rows:
        click.echo("no knowledge base is registered (see 'groove kb add NAME PATH')")
    for row in rows:
        state = "" if row["indexed"] else "  (not indexed)"
        line = f"{row['name']:<16} {row['path']}{state}"
        click.echo(printable(line))
        if description := str(row["description"]):
            click.echo("    " + printable(description))


@kb_group.command("remove")
@click.argument("name")
@handle_errors
def kb_remove(name: str) -> None:
    """Forget the name NAME (the folder and its index are left as they are)."""
    from groove_core.registry import remove_kb

    entry = remove_kb(name)
    click.echo(f"removed {entry.name} (its folder and index are untouched)")
