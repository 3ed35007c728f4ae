"""Links between notes: found by the chunker, stored by the backend, resolved when read.

A link is stored as written (``target``) with a ``key`` it is matched by: for a Markdown
link the KB-relative path it points to, without a Markdown extension, ``/index`` or a
fragment (``guide/a.md#x``, ``./a``, ``/guide/a/`` all give ``guide/a``); for a wikilink
or an embed its note name, lower-cased (``[[Notes/Idea#H|x]]`` gives ``notes/idea``).
Resolution happens when the links are read, against the documents indexed then: a link
written before its target was indexed resolves as soon as the target is, with no
bookkeeping at write time, and a link to nothing stays listed with ``path`` null.
A wikilink resolves as Obsidian resolves it: to the note whose path ends with its name.

A backend writes a document's links in the document's own transaction, so a kill leaves
them exactly as old or as new as its chunks; the SQLite store's table and SQL are in
``groove_core.sqlite.link_table``.
"""

from __future__ import annotations

import posixpath
import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from groove_core.rows import OutgoingLink

__all__ = [
    "MAX_LINKS_PER_DOCUMENT",
    "RawLink",
    "extract_links",
    "resolved",
]

#: Links recorded per document; more are dropped (a generated index page can hold
#: thousands, and every one costs a row).
MAX_LINKS_PER_DOCUMENT = 2_000


@dataclass(frozen=True)
class RawLink:
    """A link as the chunker found it: ``kind`` is ``link``, ``wikilink`` or ``embed``."""

    kind: str
    target: str
    line: int  # 1-based line of the file


_INLINE = re.compile(
    r"(!?)\[[^\[\]\n]{0,500}\]\(\s*<?([^()\s<>]{1,1000})>?(?:\s+\"[^\"\n]*\")?\s*\)"
)
_REFERENCE = re.compile(r"^ {0,3}\[[^\[\]\n]{1,500}\]:[ \t]*<?([^\s<>]{1,1000})>?", re.MULTILINE)
_WIKILINK = re.compile(r"(!?)\[\[([^\[\]\n|#^]{1,500}+)[^\[\]\n]{0,500}\]\]")
#: A Dendron link, alias first: ``[[alias|note.name#anchor]]``, ``[[dendron://vault/note]]``.
_ALIAS_FIRST = re.compile(r"(!?)\[\[(?:[^\[\]\n|]{0,500}\|)?([^\[\]\n|]{1,500})\]\]")
_DENDRON_VAULT = re.compile(r"^dendron://[^/\n]*/")
_LINE_BREAK = re.compile(r"\r\n?|\n")
_SCHEME = re.compile(r"^[A-Za-z][\w+.-]*:|^//")
_NOTE_SUFFIXES = (".md", ".mdx", ".markdown", ".html")


def extract_links(
    text: str,
    start: int,
    code: Sequence[tuple[int, int]],
    *,
    wikilinks: bool,
    alias_first: bool = False,
) -> tuple[RawLink, ...]:
    """Local links of ``text[start:]`` outside ``code`` (character ranges), in file order.

    Images, URLs with a scheme and same-page anchors are not links between notes.
    ``alias_first``: wikilinks are Dendron's, ``[[alias|target]]``.
    """
    found: list[tuple[int, str, str]] = []
    starts = [s for s, _ in code]
    for pos, kind, target in _candidates(text, start, wikilinks, alias_first):
        if not _in_code(pos, starts, code) and (kind != "link" or _local(target)):
            found.append((pos, kind, target))
    found.sort(key=lambda item: item[0])
    if not found:
        return ()
    line_starts = [0, *(m.end() for m in _LINE_BREAK.finditer(text))]
    return tuple(
        RawLink(kind, target, bisect_right(line_starts, pos))
        for pos, kind, target in found[:MAX_LINKS_PER_DOCUMENT]
    )


def _candidates(
    text: str, start: int, wikilinks: bool, alias_first: bool
) -> Iterable[tuple[int, str, str]]:
    for m in _INLINE.finditer(text, start):
        if not m.group(1):
            yield m.start(), "link", m.group(2)
    for m in _REFERENCE.finditer(text, start):
        yield m.start(), "link", m.group(1)
    if wikilinks and alias_first:
        for m in _ALIAS_FIRST.finditer(text, start):
            target = _DENDRON_VAULT.sub("", re.split(r"[#^]", m.group(2), maxsplit=1)[0])
            if target.strip():
                yield m.start(), "embed" if m.group(1) else "wikilink", target.strip()
    elif wikilinks:
        for m in _WIKILINK.finditer(text, start):
            yield m.start(), "embed" if m.group(1) else "wikilink", m.group(2).strip()


def _in_code(pos: int, starts: list[int], code: Sequence[tuple[int, int]]) -> bool:
    i = bisect_right(starts, pos) - 1
    return i >= 0 and pos < code[i][1]


def _local(target: str) -> bool:
    return not (_SCHEME.match(target) or target.startswith("#"))


def _strip_note_suffix(path: str) -> str:
    lower = path.lower()
    for suffix in _NOTE_SUFFIXES:
        if lower.endswith(suffix):
            return path[: -len(suffix)]
    return path


def link_key(source: str, kind: str, target: str) -> str:
    """The key ``target``, written in the document ``source``, is matched by."""
    if kind != "link":
        return _strip_note_suffix(target.strip().strip("/")).lower()
    path = unquote(re.split(r"[#?]", target, maxsplit=1)[0])
    if not path:
        return source_key(source)  # a query or fragment only: the page itself
    joined = (
        path.lstrip("/")
        if path.startswith("/")
        else posixpath.join(posixpath.dirname(source), path)
    )
    normal = posixpath.normpath(joined) if joined else "."
    key = _strip_note_suffix(normal.rstrip("/"))
    if key == "." or key == "index":
        return ""
    return key.removesuffix("/index")


def source_key(path: str) -> str:
    """The key Markdown links to the document ``path`` carry."""
    key = _strip_note_suffix(path)
    return "" if key == "index" else key.removesuffix("/index")


def wiki_keys(path: str) -> list[str]:
    """The keys wikilinks to ``path`` may carry: its name, and each longer path suffix."""
    parts = _strip_note_suffix(path).lower().split("/")
    return ["/".join(parts[i:]) for i in range(len(parts))]


def resolver(paths: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
    """(Markdown key -> path, wikilink key -> path) over the indexed documents ``paths``;
    when two documents share a key the shorter path wins, as Obsidian prefers the nearer
    note. Every storage backend resolves links with it."""
    markdown: dict[str, str] = {}
    wiki: dict[str, str] = {}
    for path in sorted(paths, key=_nearer):
        markdown.setdefault(source_key(path), path)
        for key in wiki_keys(path):
            wiki.setdefault(key, path)
    return markdown, wiki


def _nearer(path: str) -> tuple[int, str]:
    return path.count("/"), path


def resolved(
    rows: Iterable[Sequence[Any]], markdown: dict[str, str], wiki: dict[str, str]
) -> list[OutgoingLink]:
    """Stored (kind, target, key, line) link rows as outgoing links, each with the indexed
    path it resolves to (``resolver``'s maps), or None."""
    return [
        OutgoingLink(
            target=str(target),
            kind=str(kind),
            path=(markdown if kind == "link" else wiki).get(str(key)),
            line=int(line),
        )
        for kind, target, key, line in rows
    ]
