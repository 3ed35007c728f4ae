"""``groove get``: read a document, a line range or a chunk from the command line.

The twin of the MCP tool ``get_document``: the same confinement (``kb_files``), the same
decoding, the same line numbers; without the response budget, since a terminal or a pipe
takes the whole text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from groove_core.cli.common import handle_errors, open_app
from groove_core.cli.options import config_option, defaulted, kb_option
from groove_core.cli.terminal import dumps, printable, printable_text, style

if TYPE_CHECKING:
    from groove_core.app import Groove

#: ``#42`` or ``chunk:42``: a chunk id, as ``search --json`` and MCP search give it.
_CHUNK = re.compile(r"^(?:#|chunk:)(\d+)$")
#: ``PATH:START``, ``PATH:START-END`` or ``PATH:START-`` (to the end of the file).
_RANGE = re.compile(r"^(?P<path>.+?):(?P<start>\d+)(?:-(?P<end>\d+)?)?$")


#: What a missing file's error suggests on the command line (MCP's names its own tool).
CLI_MISSING = "give a path as search prints it, or a note's name ('groove get Canvas')"


@dataclass(frozen=True)
class Target:
    """What ``groove get`` was asked for: a chunk, or a path with an optional line range."""

    path: str | None = None
    start: int | None = None
    end: int | None = None
    chunk_id: int | None = None


def parse_target(text: str, kb: Path) -> Target:
    """``#ID`` / ``chunk:ID``, or ``PATH[:START[-END]]``; a file whose own name ends in
    ``:digits`` is read whole (the range syntax yields to an existing file)."""
    chunk = _CHUNK.match(text)
    if chunk:
        return Target(chunk_id=int(chunk.group(1)))
    found = _RANGE.match(text)
    if found is None or (kb / text).is_file():
        return Target(path=text)
    start = int(found.group("start"))
    end = found.group("end")
    if start < 1:
        raise click.BadParameter(f"line numbers start at 1, not {start}", param_hint="TARGET")
    has_dash = text.endswith("-") or end is not None
    return Target(
        path=found.group("path"),
        start=start,
        end=int(end) if end is not None else (None if has_dash else start),
    )


@click.command("get")
@click.argument("target", required=False)
@kb_option
@config_option
@defaulted(
    "--neighbours",
    click.IntRange(0, 20),
    0,
    "With a chunk id: chunks to include before and after it.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the document (and its range) as JSON.")
@handle_errors
def get_cmd(
    target: str | None, kb: Path, config_path: Path | None, neighbours: int, as_json: bool
) -> None:
    """Print a document, a line range or a chunk, with its heading path.

    \b
    TARGET is one of
      notes/a.md           the whole file (KB-relative, as search prints it)
      notes/a.md:12        line 12
      notes/a.md:12-40     lines 12 to 40 (notes/a.md:12- to the end)
      report.pdf#page=12   one part of a file a plugin's loader reads (its anchor)
      '#42' or chunk:42    chunk 42 (the chunk_id of search --json); quote '#42' in a
                           shell, where an unquoted # starts a comment
    """
    if not target:
        # The usual cause: an unquoted #42, which the shell read as a comment.
        raise click.UsageError(
            "give a TARGET: a path (notes/a.md, notes/a.md:12-40) or a chunk id, "
            "quoted ('#42') or written chunk:42"
        )
    _get(target, kb, config_path, neighbours, as_json)


def _get(target: str, kb: Path, config_path: Path | None, neighbours: int, as_json: bool) -> None:
    app = open_app(kb, config_path)
    payload = read_target(app, by_name(app, parse_target(target, app.kb)), neighbours)
    if as_json:
        click.echo(dumps(payload, sort_keys=True))
        return
    where = printable(" > ".join(payload["heading_path"]) or payload["title"] or "")
    header = f"{printable(payload['path'])}:{payload['line_start']}-{payload['line_end']}"
    click.echo(style(header, bold=True) + (f"  {where}" if where else ""))
    if payload["changed_since_index"]:
        click.echo(
            style(
                "(the file changed since it was indexed: run 'groove index'; chunk lines "
                "may have moved)",
                dim=True,
            ),
            err=True,
        )
    click.echo(printable_text(payload["content"]))


def by_name(app: Groove, target: Target) -> Target:
    """``target`` with a note's name (``Canvas.md``, ``Canvas``) read as the one indexed
    document so named (:func:`groove_core.kb_files.by_name`)."""
    from groove_core.kb_files import by_name as note_path

    return target if target.path is None else replace(target, path=note_path(app, target.path))


def read_target(app: Groove, target: Target, neighbours: int) -> dict[str, Any]:
    """The document's fields and the requested lines, as ``get_document`` names them."""
    from groove_core.kb_files import (
        changed_since_index,
        chunk_span,
        heading_path_at,
        indexed_document,
        lines_asked,
        read_lines,
        resolve_markdown,
    )

    heading_path: tuple[str, ...] = ()
    first: int | None
    last: int | None
    if target.chunk_id is not None:
        row, first, last = chunk_span(app, target.chunk_id, neighbours)
        path, heading_path = row.path, row.heading_path
    else:
        assert target.path is not None
        path, first, last = target.path, target.start, target.end
    file = resolve_markdown(app, path, missing=CLI_MISSING)
    lines, low, high = read_lines(app, file)
    first, last = lines_asked(file, first, last, (low, high), len(lines))
    indexed = indexed_document(app, file.rel) if app.backend.exists() else None
    if indexed is not None and target.chunk_id is None and target.start is not None:
        heading_path = heading_path_at(app, indexed.doc_id, first)
    return {
        "path": file.rel,
        "title": indexed.title if indexed else None,
        "tags": list(indexed.tags) if indexed else [],
        "indexed": indexed is not None,
        "changed_since_index": changed_since_index(file, indexed),
        "total_lines": len(lines),
        "line_start": first,
        "line_end": last,
        "chunk_id": target.chunk_id,
        "heading_path": list(heading_path),
        "content": "".join(lines[first - 1 : last]),
    }
