"""The ``links`` table of the SQLite index and all of its SQL: each document's links as
the chunker found them, with the key each is matched by (``groove_core.links``), resolved
against the indexed documents when read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from groove_core.links import RawLink, link_key, resolved, resolver, source_key, wiki_keys
from groove_core.rows import Backlink, OutgoingLink

__all__ = [
    "LINKS_SCHEMA",
    "backlinks",
    "delete_rows",
    "insert_rows",
    "migrate_add_links_table",
    "outgoing",
]

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
