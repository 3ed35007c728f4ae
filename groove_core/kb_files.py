"""Reading the KB's own files for the MCP server: safe path resolution, line ranges, freshness.

Everything an MCP client names is untrusted. A path is served only when it is KB-relative,
has no ``..``, resolves (symbolic links included) to a Markdown file inside the KB root, and
lies outside the folders groove never indexes (``.groove/``, ``.git/``, ignore patterns).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from groove_core.app import Groove
    from groove_core.store import Store

#: ``changes_on_disk``'s default: the app's own store.
_APP_STORE: Any = object()

#: How many paths index_status lists per kind of change (the counts are always complete).
MAX_LISTED_CHANGES = 50

_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:")


class DocumentError(Exception):
    """A request for a file that must not or cannot be served; the message says why."""


@dataclass(frozen=True)
class KBFile:
    rel: str  # KB-relative POSIX path of the resolved file
    path: Path


def _check_shape(rel: str) -> str:
    """Reject what is not a plain KB-relative path before touching the file system."""
    if not rel.strip():
        raise DocumentError("path is empty: give a KB-relative path such as 'notes/a.md'")
    if "\x00" in rel:
        raise DocumentError("path contains a NUL character")
    if rel.startswith(("/", "\\", "~")) or _WINDOWS_DRIVE.match(rel):
        raise DocumentError(
            f"absolute path {rel!r} refused: give a path relative to the knowledge base, "
            "as search and list_documents return them"
        )
    if "\\" in rel:
        raise DocumentError(f"path {rel!r} contains '\\': use '/' as the separator")
    if ".." in PurePosixPath(rel).parts:
        raise DocumentError(
            f"path {rel!r} contains '..': only files inside the knowledge base can be read"
        )
    return rel.strip().removeprefix("./")


def _refusal(app: Groove, rel: str, target: Path) -> str | None:
    """Why a file inside the KB is still not served (an excluded folder), or None."""
    from groove_core.indexer import exclusion, ignore_patterns

    if target.is_relative_to(app.index_file.resolve().parent):
        return f"{rel!r} is inside the index folder, which groove never serves"
    reason = exclusion(rel, ignore_patterns(app.kb, app.config))
    return None if reason is None else f"{rel!r} is {reason}"


def resolve_markdown(app: Groove, rel: str) -> KBFile:
    """The Markdown file ``rel`` names inside the KB, or DocumentError saying why not."""
    clean = _check_shape(rel)
    root = app.kb.resolve()
    target = (root / clean).resolve()
    if not target.is_relative_to(root):
        raise DocumentError(
            f"path {rel!r} leads outside the knowledge base (through a symbolic link): refused"
        )
    resolved_rel = target.relative_to(root).as_posix()
    for name in dict.fromkeys([clean, resolved_rel]):
        reason = _refusal(app, name, target)
        if reason is not None:
            raise DocumentError(reason)
    extensions = app.config.index.indexed_extensions()
    if not resolved_rel.lower().endswith(extensions):
        raise DocumentError(
            f"{rel!r} is not a Markdown file: only {', '.join(extensions)} files can be read"
        )
    if not target.is_file():
        raise DocumentError(
            f"no file {rel!r} in the knowledge base; list_documents shows the files there are"
        )
    return KBFile(resolved_rel, target)


def read_text(app: Groove, file: KBFile) -> str:
    """The file's text, decoded as the indexer decodes it, within the indexer's size cap."""
    from groove_core.indexer import decode_markdown, read_source

    limit = app.config.index.max_file_bytes
    try:
        data = read_source(file.path, limit)
        if len(data) > limit:
            raise DocumentError(f"{file.rel!r} is larger than index.max_file_bytes ({limit})")
        return decode_markdown(data)
    except OSError as err:
        raise DocumentError(f"cannot read {file.rel!r}: {err.strerror}") from None
    except ValueError as err:
        raise DocumentError(f"cannot read {file.rel!r}: {err}") from None


def indexed_document(app: Groove, rel: str) -> dict[str, Any] | None:
    """The index's row for the document at ``rel`` (title, tags, size, mtime...), or None."""
    return next((d for d in app.store.documents() if d["path"] == rel), None)


def chunk_span(app: Groove, chunk_id: int, neighbours: int = 0) -> tuple[dict[str, Any], int, int]:
    """The chunk's row (path, heading path...) and the lines it covers together with
    ``neighbours`` chunks of the same document on each side."""
    row = app.store.chunk_rows([chunk_id]).get(chunk_id)
    if row is None:
        raise DocumentError(
            f"no chunk {chunk_id} in the index (it may have been "
            "re-indexed since): run search again for fresh chunk ids"
        )
    chunks = app.store.document_chunks(row["doc_id"])
    at = next(i for i, c in enumerate(chunks) if c["chunk_id"] == chunk_id)
    around = chunks[max(0, at - neighbours) : at + neighbours + 1]
    return row, around[0]["line_start"], around[-1]["line_end"]


def heading_path_at(app: Groove, doc_id: int, line: int) -> tuple[str, ...]:
    """The heading path of the chunk of document ``doc_id`` that holds ``line``."""
    chunks = app.store.document_chunks(doc_id)
    holding = [c for c in chunks if c["line_start"] <= line <= c["line_end"]]
    if not holding:
        return ()
    row = app.store.chunk_rows([holding[0]["chunk_id"]]).get(holding[0]["chunk_id"])
    return tuple(row["heading_path"]) if row else ()


def check_range(first: int, last: int, total: int) -> tuple[int, int]:
    """``first`` and ``last`` (1-based, inclusive) within a file of ``total`` lines; the
    end is clipped to the file, a start past it is an error."""
    if first > max(total, 1):
        raise DocumentError(f"start_line {first} is past the end of the file ({total} lines)")
    if last < first:
        raise DocumentError(f"end_line {last} is before start_line {first}")
    return first, min(last, max(total, 1))


def changed_since_index(file: KBFile, indexed: dict[str, Any] | None) -> bool | None:
    """Whether the file differs (size or mtime) from its indexed version; None if not indexed."""
    if indexed is None:
        return None
    stat = file.path.stat()
    return bool((indexed["size"], indexed["mtime_ns"]) != (stat.st_size, stat.st_mtime_ns))


def changes_on_disk(app: Groove, store: Store | None = _APP_STORE) -> dict[str, Any]:
    """Markdown files added, modified (size or mtime) or deleted since they were indexed.

    ``store``: the index to compare with (default the app's; None: no index yet, every
    file is added)."""
    from groove_core.indexer import walk_kb

    if store is _APP_STORE:
        store = app.store
    indexed = {} if store is None else store.doc_states()
    limit = app.config.index.max_file_bytes
    skipped: list[tuple[str, str]] = []
    added, modified, seen = [], [], set()
    for src in walk_kb(app.kb, app.config, app.index_file, skipped):
        if src.size > limit:
            continue  # the indexer skips it too: it would never stop looking "added"
        seen.add(src.rel)
        state = indexed.get(src.rel)
        if state is None:
            added.append(src.rel)
        elif (state.size, state.mtime_ns) != (src.size, src.mtime_ns):
            modified.append(src.rel)
    deleted = sorted(p for p in indexed if p not in seen)
    out: dict[str, Any] = {"up_to_date": not (added or modified or deleted)}
    for kind, paths in (("added", added), ("modified", modified), ("deleted", deleted)):
        out[f"{kind}_count"] = len(paths)
        out[kind] = paths[:MAX_LISTED_CHANGES]
    return out


def iso_time(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")
