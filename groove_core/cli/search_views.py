"""The shapes ``groove search`` can give its hits besides the snippet list: whole chunks
(``--full``), one line per file (``--files``), and hits above a fused score
(``--min-score``), for one KB or several."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from groove_core.cli.terminal import printable, printable_text

#: With --files, hits fetched per file wanted: files often hold several of the best hits.
HITS_PER_FILE = 5


def hits_to_fetch(limit: int, files: bool, max_limit: int) -> int:
    """How many hits to ask the pipeline for: with --files, ``limit`` counts files."""
    return min(limit * HITS_PER_FILE, max_limit) if files else limit


def above(payload: dict[str, Any], min_score: float | None) -> dict[str, Any]:
    """``payload`` without the hits whose fused score is below ``min_score``; ranks are
    kept, so a hit is numbered as it would be without the threshold."""
    if min_score is None:
        return payload
    return {**payload, "results": [h for h in payload["results"] if h["score"] >= min_score]}


def by_file(payload: dict[str, Any], limit: int) -> dict[str, Any]:
    """``payload`` with ``files`` instead of ``results``: the first ``limit`` files in the
    order of their best hit, each with that hit's rank and score and its number of hits
    (and, with several KBs, its KB)."""
    files: dict[tuple[str | None, str], dict[str, Any]] = {}
    for hit in payload["results"]:
        key = (hit.get("kb"), hit["path"])
        entry = files.get(key)
        if entry is None:
            files[key] = {
                **({"kb": hit["kb"]} if "kb" in hit else {}),
                "path": hit["path"],
                "title": hit["title"],
                "rank": hit["rank"],
                "score": hit["score"],
                "hits": 1,
                "stale": hit.get("stale", False),
            }
        else:
            entry["hits"] += 1
    out = {k: v for k, v in payload.items() if k != "results"}
    return {**out, "files": list(files.values())[:limit]}


def print_files(payload: dict[str, Any], folders: Mapping[str, Path]) -> None:
    """One path a line, best first: for pipes (``xargs``) and for reading. KB-relative for
    one KB; with several (``folders``: each KB's folder by name), the same relative path may
    be in two, so each is the file's path in its KB's folder."""
    for entry in payload["files"]:
        path = entry["path"] if "kb" not in entry else str(folders[entry["kb"]] / entry["path"])
        click.echo(printable(path))
    if not payload["files"]:
        click.echo("no results", err=True)
    for warning in payload.get("warnings", []):  # stderr: stdout stays a list of paths
        click.echo(f"({printable(warning)})", err=True)


def filter_matched_nothing(payload: dict[str, Any]) -> bool:
    """No results because no indexed document passes the path or tag filter: the warning
    says so, and a "low confidence" note would send the user rephrasing the query."""
    from groove_core.pipeline import UNMATCHED_FILTER

    return not payload["results"] and any(
        UNMATCHED_FILTER in warning for warning in payload.get("warnings", ())
    )


def full_text(content: str) -> str:
    """A chunk's whole text, its own lines kept, indented under the hit's header."""
    return "\n".join(f"    {line}" if line else "" for line in printable_text(content).split("\n"))
