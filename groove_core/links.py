"""Links between notes: found by the chunker, stored in ``links``, resolved when read.

A link is stored as written (``target``) with a ``key`` it is matched by: for a Markdown
link the KB-relative path it points to, without a Markdown extension, ``/index`` or a
fragment (``guide/a.md#x``, ``./a``, ``/guide/a/`` all give ``guide/a``); for a wikilink
or an embed its note name, lower-cased (``[[Notes/Idea#H|x]]`` gives ``notes/idea``).
Resolution happens when the links are read, against the documents indexed then: a link
written before its target was indexed resolves as soon as the target is, with no
bookkeeping at write time, and a link to nothing stays listed with ``path`` null.
A wikilink resolves as Obsidian resolves it: to the note whose path ends with its name.

The rows of a document are written in the document's own transaction (``Store``), so a
kill leaves a document's links exactly as old or as new as its chunks.
"""

from __future__ import annotations

import json
import posixpath
import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from groove_core.rows import Backlink, OutgoingLink

__all__ = [
    "LINKS_SCHEMA",
    "MAX_LINKS_PER_DOCUMENT",
    "RawLink",
    "backlinks",
    "delete_rows",
    "extract_links",
    "insert_rows",
    "migrate_add_links_table",
    "outgoing",
    "resolved",
]

#: Links recorded per document; more are dropped (a generated index page can hold
#: thousands, and every one costs a row).
MAX_LINKS_PER_DOCUMENT = 2_000

LINKS_SCHEMA = """
CREATE TABLE IF NOT EXISTS links (
    doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    kind TEXT NOT NULL,
    target TEXT NOT NULL,
    key TEXT NOT NULL,
    line INTEGER NOT NULL,
    PRIMARY KEY (doc_id, ordinal)
);
CREATE INDEX IF NOT EXISTS links_key ON links(key);
"""


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
_WIKILINK = re.compile(r"(!?)\[\[([^\[\]\n|#^]{1,500})[^\[\]\n]{0,500}\]\]")
_LINE_BREAK = re.compile(r"\r\n?|\n")
_SCHEME = re.compile(r"^[A-Za-z][\w+.-]*:|^//")
_NOTE_SUFFIXES = (".md", ".mdx", ".markdown", ".html")


def extract_links(
    text: str, start: int, code: Sequence[tuple[int, int]], *, wikilinks: bool
) -> tuple[RawLink, ...]:
    """Local links of ``text[start:]`` outside ``code`` (character ranges), in file order.

    Images, URLs with a scheme and same-page anchors are not links between notes.
    """
    found: list[tuple[int, str, str]] = []
    starts = [s for s, _ in code]
    for pos, kind, target in _candidates(text, start, wikilinks):
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


def _candidates(text: str, start: int, wikilinks: bool) -> Iterable[tuple[int, str, str]]:
    for m in _INLINE.finditer(text, start):
        if not m.group(1):
            yield m.start(), "link", m.group(2)
    for m in _REFERENCE.finditer(text, start):
        yield m.start(), "link", m.group(1)
    if wikilinks:
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


# -- SQL, all of it for links ---------------------------------------------------------------


def insert_rows(conn: Any, doc_id: int, path: str, links: Sequence[RawLink]) -> None:
    conn.executemany(
        "INSERT INTO links(doc_id, ordinal, kind, target, key, line) VALUES (?, ?, ?, ?, ?, ?)",
        [
            (doc_id, n, link.kind, link.target, link_key(path, link.kind, link.target), link.line)
            for n, link in enumerate(links)
        ],
    )


def delete_rows(conn: Any, doc_id: int) -> None:
    conn.execute("DELETE FROM links WHERE doc_id = ?", (doc_id,))


def _resolver(conn: Any) -> tuple[dict[str, str], dict[str, str]]:
    """:func:`resolver` over the documents of a SQLite index."""
    return resolver(str(r[0]) for r in conn.execute("SELECT path FROM documents"))


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


def outgoing(conn: Any, doc_id: int, limit: int) -> tuple[list[OutgoingLink], int]:
    """(the first ``limit`` links of a document in file order, how many it has)."""
    total = int(
        conn.execute("SELECT count(*) FROM links WHERE doc_id = ?", (doc_id,)).fetchone()[0]
    )
    rows = conn.execute(
        "SELECT kind, target, key, line FROM links WHERE doc_id = ? ORDER BY ordinal LIMIT ?",
        (doc_id, limit),
    ).fetchall()
    if not rows:
        return [], total
    return resolved(rows, *_resolver(conn)), total


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


_BACKLINKS_WHERE = (
    "FROM links l JOIN documents d ON d.id = l.doc_id "
    "WHERE (l.kind = 'link' AND l.key = ?) "
    "OR (l.kind != 'link' AND l.key IN (SELECT value FROM json_each(?)))"
)


def backlinks(conn: Any, path: str, limit: int) -> tuple[list[Backlink], int]:
    """(the first ``limit`` links into ``path`` from other documents, how many there are).

    A wikilink counts only where it resolves to ``path``: ``[[idea]]`` is a backlink of the
    nearest ``idea.md``, not of every note so named.
    """
    keys = json.dumps(wiki_keys(path))
    rows = conn.execute(
        f"SELECT d.path, l.kind, l.target, l.key, l.line {_BACKLINKS_WHERE} "
        "AND d.path != ? ORDER BY d.path, l.ordinal",
        (source_key(path), keys, path),
    )
    _, wiki = _resolver(conn)
    found = [
        Backlink(path=str(src), kind=str(kind), target=str(target), line=int(line))
        for src, kind, target, key, line in rows
        if kind == "link" or wiki.get(str(key)) == path
    ]
    return found[:limit], len(found)


def migrate_add_links_table(conn: Any) -> None:
    """Schema 2 -> 3: the links table. It starts empty: the links of documents indexed
    before appear when those files are next indexed (``groove index --rebuild`` for all)."""
    for statement in LINKS_SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)
