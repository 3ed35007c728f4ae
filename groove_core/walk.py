"""Which files of a KB are indexed: the walk (ignore files and patterns, links, names
that are not UTF-8, what is not a regular file) and the reading of one file."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from groove_core.config import (
    DEFAULT_INDEX_DIR,
    ConfigError,
    GrooveConfig,
)
from groove_core.files import file_kind, read_regular
from groove_core.filters import GlobError, compile_glob, path_matches
from groove_core.loaders import (
    Loaders,
)

#: Folders never indexed, wherever they are.
ALWAYS_IGNORED_DIRS = frozenset({".git", "node_modules", ".hg", ".svn", "__pycache__", ".venv"})


@dataclass(frozen=True)
class SourceFile:
    rel: str  # KB-relative POSIX path
    path: Path
    size: int
    mtime_ns: int


def _ignored(rel: str, patterns: tuple[str, ...]) -> bool:
    return any(path_matches(p, rel) for p in patterns)


def read_ignore_file(kb: Path) -> tuple[str, ...]:
    """Patterns from ``<kb>/.grooveignore`` (one glob a line, ``#`` comments).

    A malformed line is a :class:`ConfigError` naming it: skipping it would index (and
    serve) the very files it was written to keep out.
    """
    try:
        text = (kb / ".grooveignore").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ()
    patterns = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            compile_glob(line)
        except GlobError as err:
            raise ConfigError(f".grooveignore line {number}: {err}") from None
        patterns.append(line)
    return tuple(patterns)


def ignore_patterns(kb: Path, config: GrooveConfig) -> tuple[str, ...]:
    """Every ignore pattern in force: ``[index] ignore`` and ``.grooveignore``."""
    return config.index.ignore + read_ignore_file(kb)


def exclusion(rel: str, patterns: tuple[str, ...]) -> str | None:
    """Why the KB-relative ``rel`` is never indexed nor served, or None.

    One rule for the indexer (a symbolic link's target) and get_document, so a link can
    never make search return what get_document refuses.
    """
    parts = PurePosixPath(rel).parts
    for part in parts[:-1]:
        if part in ALWAYS_IGNORED_DIRS or part == DEFAULT_INDEX_DIR:
            return f"inside {part}/, which groove never indexes and never serves"
    folders = ["/".join(parts[: i + 1]) + "/" for i in range(len(parts) - 1)]
    for candidate in [rel, *folders]:
        hit = next((p for p in patterns if path_matches(p, candidate)), None)
        if hit is not None:
            return f"excluded by the ignore pattern {hit!r}"
    return None


@dataclass(frozen=True)
class _Walk:
    """What every file of one walk is checked against."""

    root: Path
    index_dir: Path
    patterns: tuple[str, ...]
    extensions: tuple[str, ...]


def walk_kb(
    kb: Path,
    config: GrooveConfig,
    index_file: Path,
    skipped: list[tuple[str, str]],
    folders: list[str] | None = None,
    loaders: Loaders | None = None,
) -> Iterator[SourceFile]:
    """Regular files under ``kb`` that a loader claims (``loaders``; default the
    Markdown loader alone), never leaving it; the rest is added to ``skipped`` with the
    reason (links out of the KB or into ignored folders, loops, FIFOs and devices).
    ``folders`` receives every folder walked (index_status watches their mtimes to know
    when a walk is needed again)."""
    table = Loaders.markdown_only(config) if loaders is None else loaders
    walk = _Walk(
        kb.resolve(),
        Path(os.path.realpath(index_file)).parent,
        ignore_patterns(kb, config),
        table.extensions,
    )
    for dirpath, dirnames, filenames in os.walk(walk.root, followlinks=False):
        here = Path(dirpath)
        if folders is not None:
            folders.append(dirpath)
        for name in [d for d in dirnames if not _utf8(d)]:
            skipped.append((_shown(here / name, walk.root) + "/", NOT_UTF8))
        dirnames[:] = sorted(d for d in dirnames if _utf8(d) and _walk_into(walk, here / d))
        for name in sorted(filenames):
            if not name.lower().endswith(walk.extensions):
                continue
            path = here / name
            if not _utf8(name):
                skipped.append((_shown(path, walk.root), NOT_UTF8))
                continue
            rel = path.relative_to(walk.root).as_posix()
            if _ignored(rel, walk.patterns):
                continue
            found = _source(walk, path, rel)
            if isinstance(found, str):
                skipped.append((rel, found))
            else:
                yield found


#: Why a file or folder whose name is not valid UTF-8 is skipped: the index stores paths as
#: text, and a client could not name it back.
NOT_UTF8 = "its name is not valid UTF-8 (rename it to index it)"


def _utf8(name: str) -> bool:
    """Whether a name from the file system is valid UTF-8 (Python keeps invalid bytes as
    lone surrogates, which no text column or terminal takes)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(path: Path, root: Path) -> str:
    """A KB-relative name that can be printed: invalid bytes as ``\\xNN``."""
    rel = os.fsencode(path.relative_to(root).as_posix())
    return rel.decode("utf-8", "backslashreplace")


def _walk_into(walk: _Walk, folder: Path) -> bool:
    rel = folder.relative_to(walk.root).as_posix() + "/"
    return (
        folder.name not in ALWAYS_IGNORED_DIRS
        and Path(os.path.realpath(folder)) != walk.index_dir
        and not _ignored(rel, walk.patterns)
    )


def _source(walk: _Walk, path: Path, rel: str) -> SourceFile | str:
    """The file to index at ``path``, or why it is skipped."""
    try:
        st = path.lstat()
    except OSError as err:
        return f"cannot read: {err.strerror}"
    if stat.S_ISLNK(st.st_mode):
        refusal = _link_refusal(walk, path)
        if refusal is not None:
            return refusal
        try:
            st = path.stat()
        except OSError as err:
            return _link_error(err)
    if not stat.S_ISREG(st.st_mode):
        return f"not a regular file ({file_kind(st.st_mode)})"
    return SourceFile(rel, path, st.st_size, st.st_mtime_ns)


def _link_refusal(walk: _Walk, link: Path) -> str | None:
    """Why a symbolic link is not followed: its target must pass every rule a file does."""
    # realpath, not Path.resolve: on Python 3.11 resolve raises RuntimeError on a loop,
    # which aborted the whole run; a loop is reported by the stat that follows instead.
    target = Path(os.path.realpath(link))
    if not target.is_relative_to(walk.root):
        return "symlink pointing outside the knowledge base"
    target_rel = target.relative_to(walk.root).as_posix()
    if target.is_relative_to(walk.index_dir):
        return f"symlink to {target_rel}, inside the index folder"
    reason = exclusion(target_rel, walk.patterns)
    if reason is not None:
        return f"symlink to {target_rel}, which is {reason}"
    if not target_rel.lower().endswith(walk.extensions):
        return f"symlink to {target_rel}, which is not a Markdown file"
    return None


def _link_error(err: OSError) -> str:
    if err.errno == errno.ELOOP:
        return "symlink loop (the link leads back to itself)"
    if err.errno == errno.ENOENT:
        return "broken symlink (its target does not exist)"
    return f"cannot read: {err.strerror}"


def read_source(path: Path, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of the regular file at ``path``: a FIFO swapped in after
    the walk must not block the run (or the watcher), and the extra byte tells a file that
    grew past ``limit`` since its ``stat``."""
    return read_regular(path, limit)
