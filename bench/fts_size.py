"""Index size: today's FTS5 table (its own copy of the text) against an external-content and a
contentless one, on the same rows. Measures only; the schema is unchanged.

    .venv/bin/python bench/fts_size.py KB [--rows 20000]

Reads the first ROWS rows of KB's index (``fts_chunks``: heading, context, content, already
NFKC-normalised) and builds three tables into fresh files:

* ``content``: today's table, ``tokenize = 'trigram remove_diacritics 1'``;
* ``external``: ``content = 'src'`` over a plain table holding the same text (in groove that
  table would be ``chunks``; its size is reported apart, since the index already holds it);
* ``contentless``: ``content = ''``, ``contentless_delete = 1`` (SQLite >= 3.43), so that
  rows can still be deleted by rowid without their old text.

For each: bytes on disk (after VACUUM; for ``external`` the file holds the source table
too, so the FTS index alone is about the ``contentless`` figure), whether
``highlight()`` works, and the ranked query's wall and CPU time over the golden queries of
bench/scale.py, the three tables interleaved query by query.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import queries
from timing import pct

from groove_core.app import Groove
from groove_core.query import parse_query
from groove_core.store import connect

TOKENIZE = "tokenize = 'trigram remove_diacritics 1'"
VARIANTS = {
    "content": f"CREATE VIRTUAL TABLE fts USING fts5(heading, context, content, {TOKENIZE})",
    "external": (
        "CREATE TABLE src (id INTEGER PRIMARY KEY, heading TEXT, context TEXT, content TEXT);"
        "CREATE VIRTUAL TABLE fts USING fts5(heading, context, content, "
        f"content = 'src', content_rowid = 'id', {TOKENIZE})"
    ),
    "contentless": (
        "CREATE VIRTUAL TABLE fts USING fts5(heading, context, content, content = '', "
        f"contentless_delete = 1, {TOKENIZE})"
    ),
}
RANKED = (
    "SELECT rowid, bm25(fts, 2.0, 1.0, 1.0) AS s FROM fts WHERE fts MATCH ? "
    "ORDER BY s, rowid LIMIT 50"
)


def build(path: Path, kind: str, rows: list[tuple[Any, ...]]) -> Any:
    conn = connect(path)
    conn.executescript(VARIANTS[kind])
    with conn:
        if kind == "external":
            conn.executemany("INSERT INTO src VALUES (?, ?, ?, ?)", rows)
        conn.executemany("INSERT INTO fts(rowid, heading, context, content) VALUES (?,?,?,?)", rows)
    conn.execute("VACUUM")
    return conn


def can_highlight(conn: Any, expr: str) -> str:
    try:
        row = conn.execute(
            "SELECT highlight(fts, 2, '[', ']') FROM fts WHERE fts MATCH ? LIMIT 1", (expr,)
        ).fetchone()
    except Exception as err:  # the contentless table refuses: that is the finding
        return f"no ({str(err)[:60]})"
    return "yes" if row and row[0] and "[" in row[0] else f"no ({row!r:.40})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("kb", type=Path)
    parser.add_argument("--rows", type=int, default=20_000)
    args = parser.parse_args()
    source = connect(Groove.open(args.kb).index_file)
    rows = source.execute(
        "SELECT rowid, heading, context, content FROM fts_chunks ORDER BY rowid LIMIT ?",
        (args.rows,),
    ).fetchall()
    raw = sum(len(str(c).encode()) for r in rows for c in r[1:])
    texts = [str(q.match_expr) for t in queries() if (q := parse_query(t)).match_expr]
    with tempfile.TemporaryDirectory() as tmp:
        conns = {k: build(Path(tmp) / f"{k}.sqlite", k, rows) for k in VARIANTS}
        sizes = {k: (Path(tmp) / f"{k}.sqlite").stat().st_size for k in VARIANTS}
        wall: dict[str, list[float]] = {k: [] for k in VARIANTS}
        cpu: dict[str, list[float]] = {k: [] for k in VARIANTS}
        same = True
        for expr in texts:
            results = []
            for kind, conn in conns.items():
                w, c = time.perf_counter(), time.thread_time()
                results.append(conn.execute(RANKED, (expr,)).fetchall())
                wall[kind].append(time.perf_counter() - w)
                cpu[kind].append(time.thread_time() - c)
            same = same and all(r == results[0] for r in results)
        print(f"{len(rows):,} rows, text {raw / 2**20:.1f} MiB; {len(texts)} queries")
        probe = next(e for e in texts if conns["content"].execute(RANKED, (e,)).fetchone())
        print("| table | file | vs today | highlight() | wall p50 / p95 ms | CPU p50 / p95 ms |")
        print("|---|---|---|---|---|---|")
        for kind, conn in conns.items():
            print(
                f"| {kind} | {sizes[kind] / 2**20:.1f} MiB | {sizes[kind] / sizes['content']:.2f} "
                f"| {can_highlight(conn, probe)} | {pct(wall[kind])} | {pct(cpu[kind])} |"
            )
        print(f"identical ranked results on every query: {same}")
        for conn in conns.values():
            conn.close()


if __name__ == "__main__":
    main()
