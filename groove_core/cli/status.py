"""``groove status``: the state of a knowledge base's index, for people and scripts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from groove_core.cli.common import handle_errors, open_app, search_folders
from groove_core.cli.options import KB, all_option, config_option, kbs_option
from groove_core.cli.terminal import dumps, printable


@click.command("status")
@click.argument("kb_arg", metavar="[KB]", required=False, type=KB)
@kbs_option
@all_option
@config_option
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@handle_errors
def status_cmd(
    kb_arg: Path | None,
    kbs: tuple[Path, ...],
    all_kbs: bool,
    config_path: Path | None,
    as_json: bool,
) -> None:
    """Show what the index holds and how far it lags the files.

    Documents, chunks, embedder, index size (file and WAL), the last index run, files
    added, modified or deleted since, whether an index run was interrupted, and how much
    of the KB is embedded yet (searchable by meaning, not only by its words).

    KB (or --kb, repeatable, or --all registered ones) is a registered name or a folder
    (default: the current folder, or the indexed KB above it). Reads the index only: no
    model is loaded and nothing is written. With several KBs, --json prints a list.
    """
    # The KB argument is one more --kb (with --all, one too many: an error).
    given = kbs if kb_arg is None else tuple(dict.fromkeys((kb_arg, *kbs)))

    _status(search_folders(given, all_kbs), config_path, as_json)


def _status(folders: list[Path], config_path: Path | None, as_json: bool) -> None:
    from groove_core.status import kb_status

    statuses = [kb_status(open_app(kb, config_path)) for kb in folders]
    if as_json:
        click.echo(dumps(statuses[0] if len(statuses) == 1 else statuses, sort_keys=True))
        return
    for i, status in enumerate(statuses):
        if i:
            click.echo("")
        for line in human_lines(status):
            click.echo(line)


def human_lines(status: dict[str, Any]) -> list[str]:
    """The status as ``label: value`` lines, every string from the index made printable."""
    lines = [f"knowledge base: {printable(status['name'])} ({printable(status['kb'])})"]
    if not status["indexed"]:
        lines.append(f"index:          none yet ({printable(status['index_file'])} does not exist)")
    else:
        size = status["index_bytes"]
        shown = f" ({human_size(size)})" if size is not None else ""
        lines.append(f"index:          {printable(status['index_file'])}{shown}")
    lines.append(f"documents:      {status['documents']}")
    lines.append(f"chunks:         {status['chunks']}")
    lines.append(f"embedder:       {_embedder_line(status['embedder'])}")
    lines.append(f"last indexed:   {status['last_indexed'] or 'never'}")
    lines.append(f"changed since:  {_changes_line(status['changes_on_disk'])}")
    if status["incomplete"]:
        lines.append(f"interrupted:    {printable(status['incomplete_note'])}")
    else:
        lines.append("interrupted:    no")
    if status["semantic_note"]:
        lines.append(f"vectors:        {printable(status['semantic_note'])}")
    elif status["indexed"]:
        lines.append("vectors:        every chunk embedded")
    if status["chunking_note"]:
        lines.append(f"chunking:       {printable(status['chunking_note'])}")
    if status["embedding_note"]:
        lines.append(f"embedded text:  {printable(status['embedding_note'])}")
    return lines


def _embedder_line(embedder: dict[str, Any]) -> str:
    name = printable(embedder["name"])
    if embedder["identity"] is None:
        return f"{name} (nothing embedded yet)"
    if embedder["configured_identity"] is None:
        return f"{name} cannot be made (see 'groove plugins list'); the index holds " + (
            f"{printable(embedder['identity'])}, {embedder['dim']} dimensions"
        )
    line = f"{name}: {printable(embedder['identity'])}, {embedder['dim']} dimensions"
    if embedder["matches"] is False:
        configured = printable(str(embedder["configured_identity"]))
        line += (
            f" (the configuration now gives {configured}: run 'groove index --reembed' "
            "before searching)"
        )
    return line


def _changes_line(changes: dict[str, Any]) -> str:
    if changes["up_to_date"]:
        return "none (the index is up to date)"
    counts = ", ".join(f"{changes[f'{k}_count']} {k}" for k in ("added", "modified", "deleted"))
    return f"{counts} (run 'groove index' to update)"


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
