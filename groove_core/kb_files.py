"""Reading the KB's own files: safe path resolution, line ranges, freshness.

Shared by the MCP tools, ``groove get`` and ``groove status``. Everything an MCP client
names is untrusted. A path is served only when it is KB-relative, has no ``..``, resolves
(symbolic links included) to a file inside the KB root that a loader reads (Markdown, or
a type a plugin's loader claims), and lies outside the folders groove never indexes
(``.groove/``, ``.git/``, ignore patterns). A loaded file is served as its loader's text;
``report.pdf#page=12`` serves the part of it that an anchor names.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from groove_core.errors import GrooveError
from groove_core.rows import heading_at

if TYPE_CHECKING:
    from groove_core.app import Groove
    from groove_core.rows import ChunkRow, DocumentRow
    from groove_core.storage import IndexStore

#: ``changes_on_disk``'s default: the app's own store.
_APP_STORE: Any = object()

#: The ignore file in the KB root; edited in place it changes no folder's mtime.
IGNORE_FILE = ".grooveignore"

#: How many paths index_status lists per kind of change (the counts are always complete).
MAX_LISTED_CHANGES = 50

_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:")


class DocumentError(GrooveError):
    """A request for a file that must not or cannot be served; the message says why."""


@dataclass(frozen=True)
class KBFile:
    rel: str  # KB-relative POSIX path of the resolved file
    path: Path
    #: The part asked for (``page=12`` of ``report.pdf#page=12``), or None for all of it.
    fragment: str | None = None


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
    from groove_core.walk import exclusion, ignore_patterns

    if target.is_relative_to(app.index_file.resolve().parent):
        return f"{rel!r} is inside the index folder, which groove never serves"
    reason = exclusion(rel, ignore_patterns(app.kb, app.config))
    return None if reason is None else f"{rel!r} is {reason}"


#: What a missing file's error suggests to an MCP client.
MCP_MISSING = "list_documents shows the files there are"


def resolve_markdown(app: Groove, rel: str, *, missing: str = MCP_MISSING) -> KBFile:
    """The Markdown file ``rel`` names inside the KB, or DocumentError saying why not
    (``missing``: what the error for a file that is not there suggests)."""
    clean = _check_shape(rel)
    root = app.kb.resolve()
    clean, fragment = _split_fragment(root, clean)
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
    # Whether a file is there is said only of files that could be served: what else a KB
    # folder holds is none of a client's business.
    loaders = app.plugins.loaders()
    if not loaders.claims(resolved_rel):
        # An unserved file is no note whether it exists or not: said the same way.
        kinds = ", ".join(loaders.extensions)
        raise DocumentError(
            f"no note named {rel!r}{_did_you_mean(app, clean)}: only {kinds} files are "
            f"served; {missing}"
        )
    if not target.is_file():
        raise DocumentError(
            f"no file {rel!r} in the knowledge base{_did_you_mean(app, clean)}; {missing}"
        )
    return KBFile(resolved_rel, target, fragment)


def by_name(app: Groove, path: str) -> str:
    """``path``, or, when no file has that KB-relative path, the one indexed note it
    names as a wikilink would (``Canvas.md``, ``Canvas``, ``Help/Canvas``). Two notes of
    that name at the same depth are a DocumentError listing them."""
    clean = path.strip().removeprefix("./")
    try:
        if not clean or (app.kb / clean).is_file():
            return path
        base, sep, _ = clean.rpartition("#")
        if sep and (app.kb / base).is_file():
            return path  # a part of a file (report.pdf#page=12)
    except (OSError, ValueError):  # a name too long, a NUL: resolve_markdown says why
        return path
    found = notes_named(app, clean)
    suffix = PurePosixPath(clean).suffix.lower()
    if suffix and suffix != ".md":  # 'a.mdx' is not 'a.md': said missing, with it suggested
        found = [f for f in found if f.lower().endswith(suffix)]
    if not found:
        return path
    if len(found) > 1 and found[0].count("/") == found[1].count("/"):
        shown = ", ".join(found[:10]) + (f" and {len(found) - 10} more" if len(found) > 10 else "")
        raise DocumentError(f"{path!r} names {len(found)} notes: {shown}; give its path")
    return found[0]


#: Indexed documents a did-you-mean compares a missing name with, at most.
MAX_SUGGESTION_DOCUMENTS = 200_000


def _did_you_mean(app: Groove, name: str) -> str:
    """``"; did you mean 'notes/Canvas.md'?"`` for the indexed note nearest ``name`` by
    its path or its name, or ``""``."""
    import difflib

    if not app.backend.exists():
        return ""
    paths = [d.path for d in app.store.documents()[:MAX_SUGGESTION_DOCUMENTS]]
    key = name.lower()
    names: dict[str, str] = {}
    for p in paths:
        names.setdefault(p.lower(), p)
        names.setdefault(PurePosixPath(p).stem.lower(), p)
        names.setdefault(PurePosixPath(p).name.lower(), p)
    close = difflib.get_close_matches(key, list(names), n=3, cutoff=0.75)
    found = list(dict.fromkeys(names[c] for c in close))
    if not found:
        return ""
    return " (did you mean " + " or ".join(repr(f) for f in found) + "?)"


def _split_fragment(root: Path, clean: str) -> tuple[str, str | None]:
    """``report.pdf#page=12`` as the path and the part of it asked for; a file whose own
    name holds a ``#`` is read whole (the fragment syntax yields to an existing file)."""
    base, sep, fragment = clean.rpartition("#")
    if not sep or not base or not fragment:
        return clean, None
    try:
        if (root / clean).exists():
            return clean, None
    except OSError:  # a name too long: the checks that follow refuse it as before
        return clean, None
    return base, fragment


def notes_named(app: Groove, name: str) -> list[str]:
    """The indexed documents ``name`` means as a wikilink does (``Canvas``, ``Canvas.md`` or
    ``Help/Canvas``: a document whose path ends with it, any case), nearest first; empty
    when the KB has no index or no such note."""
    from groove_core.links import wiki_keys

    key = wiki_keys(name.strip().removeprefix("./"))[0] if name.strip() else ""
    if not key or not app.backend.exists():
        return []
    documents = app.store.documents()
    found = [d.path for d in documents if key in wiki_keys(d.path)]
    if not found:  # a note's title, as its front matter or first heading gives it
        title = name.strip().casefold()
        found = [d.path for d in documents if d.title.casefold() == title]
    return sorted(found, key=lambda p: (p.count("/"), p))


#: Entries an attachment lookup reads at most (one walk of the KB per ``groove links``).
MAX_ATTACHMENT_WALK = 200_000


def attachments(app: Groove, targets: Iterable[str]) -> dict[str, str]:
    """Link target -> the KB-relative file it names, for targets that are files but not
    notes (``Engelbart.jpg``, ``![[scan.pdf#page=2]]``): the file at that path in the KB,
    else, as Obsidian finds an attachment, the file of that name nearest the KB's root.
    Hidden folders and the index folder are not looked in."""
    wanted: dict[str, list[str]] = {}
    out: dict[str, str] = {}
    root = app.kb.resolve()
    for target in targets:
        name = target.split("|", 1)[0].split("#", 1)[0].strip()
        if not name or not PurePosixPath(name).suffix or ".." in PurePosixPath(name).parts:
            continue
        direct = root / name.removeprefix("/")
        if direct.is_file() and direct.resolve().is_relative_to(root):
            out[target] = direct.resolve().relative_to(root).as_posix()
        else:
            wanted.setdefault(PurePosixPath(name).name.lower(), []).append(target)
    if not wanted:
        return out
    seen = 0
    best: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        seen += len(dirs) + len(files)
        for file in files:
            if file.lower() in wanted:
                rel = (Path(folder) / file).relative_to(root).as_posix()
                old = best.get(file.lower())
                if old is None or (rel.count("/"), rel) < (old.count("/"), old):
                    best[file.lower()] = rel
        if seen > MAX_ATTACHMENT_WALK:
            break
    for name, targets_of in wanted.items():
        if name in best:
            out.update(dict.fromkeys(targets_of, best[name]))
    return out


def read_lines(app: Groove, file: KBFile) -> tuple[list[str], int, int]:
    """The file's lines as the indexer reads them (through its loader, within the
    indexer's size cap; a note without its comments, :func:`served_text`) and the first
    and last line of the part asked for (all of them without a fragment). A part keeps
    the whole document's line numbers, which its search hits give."""
    from groove_core.loaders import MARKDOWN, FragmentError, fragment_lines
    from groove_core.walk import read_source

    limit = app.config.index.max_file_bytes
    try:
        data = read_source(file.path, limit)
        if len(data) > limit:
            raise DocumentError(f"{file.rel!r} is larger than index.max_file_bytes ({limit})")
        spec, loaded = app.plugins.loaders().load(file.rel, data)
    except OSError as err:
        raise DocumentError(f"cannot read {file.rel!r}: {err.strerror}") from None
    except ValueError as err:
        raise DocumentError(f"cannot read {file.rel!r}: {err}") from None
    text = loaded.text if spec.name != MARKDOWN else served_text(app, file.rel, loaded.text)
    lines = text.splitlines(keepends=True)
    if file.fragment is None:
        return lines, 1, max(len(lines), 1)
    try:
        first, last = fragment_lines(loaded, file.fragment)
    except FragmentError as err:
        raise DocumentError(f"{file.rel!r}: {err}") from None
    return lines, first, last


def read_text(app: Groove, file: KBFile) -> str:
    """The file's text as :func:`read_lines` reads it; with a fragment, that part only."""
    lines, first, last = read_lines(app, file)
    return "".join(lines[first - 1 : last])


def lines_asked(
    file: KBFile, first: int | None, last: int | None, bounds: tuple[int, int], total: int
) -> tuple[int, int]:
    """The lines to serve of ``file`` (``bounds``: its part's, :func:`read_lines`): all of
    them unless ``first`` / ``last`` say otherwise. Within a part, a range is in the whole
    document's numbers and must start inside the part; the end is clipped to it."""
    low, high = bounds
    if file.fragment is None:
        return check_range(first or 1, max(total, 1) if last is None else last, total)
    start, end = low if first is None else first, high if last is None else last
    if not low <= start <= high:
        raise DocumentError(
            f"start_line {start} is outside {file.rel}#{file.fragment} (lines {low}-{high}): "
            "line numbers are the whole document's, as search hits give them"
        )
    if end < start:
        raise DocumentError(f"end_line {end} is before start_line {start}")
    return start, min(end, high)


def served_text(app: Groove, rel: str, text: str) -> str:
    """A note's text as it is served: without its private front-matter keys (``[index]
    private_keys``) and the comments its markup leaves out of the index
    (:func:`groove_core.dialects.comment_spans`: what the writer hid; unless ``[index]
    serve_comments`` asks for them), line numbers unchanged."""
    from groove_core.chunking import body_offset, private_key_spans
    from groove_core.dialects import comment_spans, markup_for, vault_kind, without

    index = app.config.index
    hidden = private_key_spans(text, index.private_keys)
    if not index.serve_comments:
        keep = index.obsidian_comments == "keep"
        markup = markup_for(index.dialect, rel, text, vault_kind(app.kb), keep)
        hidden += comment_spans(text, body_offset(text), markup)
    return without(text, sorted(hidden))


def indexed_document(app: Groove, rel: str) -> DocumentRow | None:
    """The index's row for the document at ``rel`` (title, tags, size, mtime...), or None."""
    return next((d for d in app.store.documents() if d.path == rel), None)


def chunk_span(app: Groove, chunk_id: int, neighbours: int = 0) -> tuple[ChunkRow, int, int]:
    """The chunk's row (path, heading path...) and the lines it covers together with
    ``neighbours`` chunks of the same document on each side."""
    row = app.store.chunk_rows([chunk_id]).get(chunk_id)
    if row is None:
        raise DocumentError(
            f"no chunk {chunk_id} in the index (it may have been "
            "re-indexed since): run search again for fresh chunk ids"
        )
    chunks = app.store.document_chunks(row.doc_id)
    at = next(i for i, c in enumerate(chunks) if c.chunk_id == chunk_id)
    around = chunks[max(0, at - neighbours) : at + neighbours + 1]
    return row, around[0].line_start, around[-1].line_end


def heading_path_at(app: Groove, doc_id: int, line: int) -> tuple[str, ...]:
    """The heading path of ``line`` in document ``doc_id``: its chunk's, or that of the
    section merged into the chunk that holds it."""
    chunks = app.store.document_chunks(doc_id)
    holding = next((c for c in chunks if c.line_start <= line <= c.line_end), None)
    if holding is None:
        return ()
    first = (holding.heading, holding.heading_path, holding.level)
    return heading_at(first, holding.sections, line)[1]


def check_range(first: int, last: int, total: int) -> tuple[int, int]:
    """``first`` and ``last`` (1-based, inclusive) within a file of ``total`` lines; the
    end is clipped to the file, a start past it is an error."""
    if first > max(total, 1):
        raise DocumentError(f"start_line {first} is past the end of the file ({total} lines)")
    if last < first:
        raise DocumentError(f"end_line {last} is before start_line {first}")
    return first, min(last, max(total, 1))


def changed_since_index(file: KBFile, indexed: DocumentRow | None) -> bool | None:
    """Whether the file differs (size or mtime) from its indexed version; None if not indexed."""
    if indexed is None:
        return None
    stat = file.path.stat()
    return bool((indexed.size, indexed.mtime_ns) != (stat.st_size, stat.st_mtime_ns))


def changes_on_disk(
    app: Groove, tracker: DiskTracker | None = None, store: IndexStore | None = _APP_STORE
) -> dict[str, Any]:
    """Markdown files added, modified (size or mtime) or deleted since they were indexed.

    With a ``tracker`` (a long-lived server), the files on disk come from its cache: a
    stat per folder and per file instead of a walk with the ignore rules each time.
    ``store``: the index to compare with (default the app's; None: no index yet, every
    file is added).
    """
    files = tracker.files(app) if tracker is not None else _walk(app)
    if store is _APP_STORE:
        store = app.store
    indexed = {} if store is None else store.doc_states()
    added, modified = [], []
    for rel, (size, mtime_ns) in files.items():
        state = indexed.get(rel)
        if state is None:
            added.append(rel)
        elif (state.size, state.mtime_ns) != (size, mtime_ns):
            modified.append(rel)
    deleted = sorted(p for p in indexed if p not in files)
    out: dict[str, Any] = {"up_to_date": not (added or modified or deleted)}
    for kind, paths in (("added", added), ("modified", modified), ("deleted", deleted)):
        out[f"{kind}_count"] = len(paths)
        out[kind] = paths[:MAX_LISTED_CHANGES]
    return out


#: (size, mtime_ns) of a file on disk, by KB-relative path.
_Files = dict[str, tuple[int, int]]


def _walk(app: Groove, folders: list[str] | None = None) -> _Files:
    """The files the indexer would index, as the indexer finds them."""
    from groove_core.walk import walk_kb

    limit = app.config.index.max_file_bytes
    skipped: list[tuple[str, str]] = []
    found: _Files = {}
    loaders = app.plugins.loaders()
    for src in walk_kb(app.kb, app.config, app.index_file, skipped, folders, loaders):
        if src.size > limit:
            continue  # the indexer skips it too: it would never stop looking "added"
        found[src.rel] = (src.size, src.mtime_ns)
    return found


def _mtime(path: str) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


class DiskTracker:
    """The KB's Markdown files for index_status, walked again only when a folder changed.

    A full walk applies the ignore rules and resolves links for every file (88 ms for
    1.1k files). Adding, deleting or renaming a file changes its folder's mtime, and an
    edit in place changes the file's own, so between walks a stat of every folder walked
    and of every file found tells the same story: the walk is repeated only when a folder
    (or the ignore file) changed, and otherwise each file's size and mtime are re-read.
    Shared by the server's worker threads, hence the lock.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._folders: dict[str, int | None] = {}
        self._paths: dict[str, str] = {}  # rel -> path to stat
        self._files: _Files = {}
        self.walks = 0  # full walks done (for tests)

    def files(self, app: Groove) -> _Files:
        with self._lock:
            if not self._folders or self._folders_changed():
                self._rewalk(app)
                return dict(self._files)
            return self._restat(app)

    def _folders_changed(self) -> bool:
        return any(_mtime(folder) != seen for folder, seen in self._folders.items())

    def _rewalk(self, app: Groove) -> None:
        folders: list[str] = []
        self._files = _walk(app, folders)
        self.walks += 1
        root = app.kb.resolve()
        self._paths = {rel: str(root / rel) for rel in self._files}
        watched = [*folders, str(root / IGNORE_FILE)]
        self._folders = {folder: _mtime(folder) for folder in watched}

    def _restat(self, app: Groove) -> _Files:
        limit = app.config.index.max_file_bytes
        out: _Files = {}
        for rel, path in self._paths.items():
            try:
                st = os.stat(path)
            except OSError:
                continue  # gone (its folder's mtime will say so on the next call too)
            if st.st_size <= limit:
                out[rel] = (st.st_size, st.st_mtime_ns)
        return out


def iso_time(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")
