"""Index size and lexical-leg speed: schema 4's contentless FTS5 tables against schema 3's,
which held their own copy of the text, on the same index.

    .venv/bin/python bench/fts_size.py KB [--rounds 5]

KB must be indexed (schema 4). The index is copied twice (SQLite's backup): one copy stays
as it is, the other gets schema 3's lexical tables back (``fts_chunks`` and ``word_chunks``
with their own text, filled from the chunks as schema 3 wrote them); both are VACUUMed, so
the sizes differ only by the tables' layout. Sizes are given per byte of the KB's Markdown.
Then the cost of re-writing some chunks' lexical rows (an edit) on each, and the time the
3 -> 4 migration takes on the schema-3 copy.

Speed: the ranked query of each lexical leg (trigram and word) over the golden queries of
bench/scale.py, on both copies, interleaved query by query, this thread's CPU time and
wall time, p50 / p95; and ``cost_ratio`` (groove_core.testing: interleaved rounds, best of
three, median) of the whole query set, schema 4 over schema 3. The ranked rows (ids and
bm25 scores) are compared on every query.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests

from scale import queries
from timing import pct

from groove_core import words
from groove_core.app import Groove
from groove_core.leg_index import IndexedChunk
from groove_core.query import match_expression, normalize, parse_query
from groove_core.sqlite import word_table
from groove_core.sqlite.lexical_legs import FTS_RANKED_SQL, TrigramIndex, WordIndex
from groove_core.sqlite.store import Store, connect, copy_index
from groove_core.testing import cost_ratio
from tests.helpers import to_schema_3

WORD_RANKED_SQL = (
    "SELECT rowid, bm25(word_chunks, ?, ?, ?) AS s FROM word_chunks "
    "WHERE word_chunks MATCH ? ORDER BY s, rowid LIMIT ?"
)


def vacuum(path: Path) -> int:
    conn = connect(path)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("VACUUM")
    conn.close()
    return path.stat().st_size


def table_bytes(path: Path) -> dict[str, int]:
    conn = connect(path)
    try:
        rows = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
    except Exception:  # dbstat is optional in SQLite builds
        rows = []
    finally:
        conn.close()
    return {str(n): int(b) for n, b in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("kb", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    app = Groove.open(args.kb)
    markdown = sum(p.stat().st_size for p in args.kb.rglob("*.md"))
    chunks = app.store.counts()["chunks"]
    fusion = app.config.search.fusion
    weights = (fusion.heading, fusion.context, fusion.content)
    trigram = [str(q.match_expr) for t in queries() if (q := parse_query(t)).match_expr]
    word = [e for t in queries() if (e := match_expression(words.query_terms([(t, False)])[0], ()))]
    with tempfile.TemporaryDirectory() as tmp:
        paths = {"schema 3": Path(tmp) / "s3.sqlite", "schema 4": Path(tmp) / "s4.sqlite"}
        for path in paths.values():
            copy_index(app.index_file, path, str(path))
        app.close()
        to_schema_3(paths["schema 3"])
        sizes = {k: vacuum(p) for k, p in paths.items()}
        tables = {k: table_bytes(p) for k, p in paths.items()}
        conns = {k: connect(p) for k, p in paths.items()}
        legs: dict[str, tuple[str, list[str]]] = {
            "trigram": (FTS_RANKED_SQL, trigram),
            "word": (WORD_RANKED_SQL, word),
        }
        print(f"{chunks:,} chunks, Markdown {markdown / 2**20:.1f} MiB")
        print("| index | file after VACUUM | bytes per Markdown byte | vs schema 3 |")
        print("|---|---|---|---|")
        for kind, size in sizes.items():
            print(
                f"| {kind} | {size / 2**20:.1f} MiB | {size / markdown:.2f} "
                f"| {size / sizes['schema 3']:.3f} |"
            )
        for kind, found in tables.items():  # only where SQLite has the dbstat table
            lexical = {n: b for n, b in found.items() if n.startswith(("fts_", "word_"))}
            if lexical:
                print(kind, {n: f"{b / 2**20:.1f} MiB" for n, b in sorted(lexical.items())})
        print("| leg | index | wall p50 / p95 ms | CPU p50 / p95 ms | CPU ratio (cost_ratio) |")
        print("|---|---|---|---|---|")
        for leg, (sql, exprs) in legs.items():
            wall: dict[str, list[float]] = {k: [] for k in conns}
            cpu: dict[str, list[float]] = {k: [] for k in conns}
            same = True
            for expr in exprs:
                results = []
                for kind, conn in conns.items():
                    w, c = time.perf_counter(), time.thread_time()
                    results.append(conn.execute(sql, (*weights, expr, 50)).fetchall())
                    wall[kind].append(time.perf_counter() - w)
                    cpu[kind].append(time.thread_time() - c)
                same = same and results[0] == results[1]

            def run(conn: Any, sql: str = sql, exprs: list[str] = exprs) -> None:
                for expr in exprs:
                    conn.execute(sql, (*weights, expr, 50)).fetchall()

            ratio = cost_ratio(
                lambda: run(conns["schema 4"]),
                lambda: run(conns["schema 3"]),
                rounds=args.rounds,
                repeat=1,
            )
            for kind in conns:
                shown = f"{ratio:.3f}" if kind == "schema 4" else "1"
                print(f"| {leg} | {kind} | {pct(wall[kind])} | {pct(cpu[kind])} | {shown} |")
            print(
                f"{leg}: {len(exprs)} queries, identical ranked rows and bm25 scores: {same}; "
                f"median CPU {statistics.median(cpu['schema 4']) * 1000:.2f} vs "
                f"{statistics.median(cpu['schema 3']) * 1000:.2f} ms"
            )
        print_update_cost(conns, args.rounds)
        for conn in conns.values():
            conn.close()
        wall_started, cpu_started = time.perf_counter(), time.process_time()
        Store.open(paths["schema 3"]).close()  # opening migrates it to schema 4
        print(
            f"migrating the schema-3 copy in place: {time.perf_counter() - wall_started:.1f} s "
            f"wall, {time.process_time() - cpu_started:.1f} s CPU"
        )


def print_update_cost(conns: dict[str, Any], rounds: int) -> None:
    """What an edit costs the lexical tables: delete and write again the rows of 500
    chunks, in a transaction that is rolled back. Schema 3 deletes by rowid (FTS5 reads
    the old text from its own copy); schema 4 computes the text again from the chunks."""
    ids = [int(r[0]) for r in conns["schema 4"].execute("SELECT id FROM chunks LIMIT 500")]

    def rows(conn: Any) -> list[tuple[int, str, str, str]]:
        found = conn.execute(
            "SELECT id, heading, context, content FROM chunks "
            "WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(ids),),
        ).fetchall()
        return [(int(i), normalize(h), normalize(c), normalize(t)) for i, h, c, t in found]

    def schema_3() -> None:
        conn = conns["schema 3"]
        conn.execute("BEGIN")
        conn.executemany("DELETE FROM fts_chunks WHERE rowid = ?", [(i,) for i in ids])
        conn.executemany("DELETE FROM word_chunks WHERE rowid = ?", [(i,) for i in ids])
        fresh = rows(conn)
        conn.executemany(
            "INSERT INTO fts_chunks(rowid, heading, context, content) VALUES (?, ?, ?, ?)", fresh
        )
        for row in fresh:
            word_table.insert_row(conn, *row)
        conn.execute("ROLLBACK")

    def schema_4() -> None:
        # Through the legs' indexes, as the store writes them (groove_core.leg_index).
        conn = conns["schema 4"]
        conn.execute("BEGIN")
        chunks = [
            IndexedChunk(int(i), int(d), "", "", h, c, t)
            for i, d, h, c, t in conn.execute(
                "SELECT id, doc_id, heading, context, content FROM chunks "
                "WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(ids),),
            )
        ]
        for index in (TrigramIndex(conn), WordIndex(conn)):
            index.delete(conn, chunks)
            index.write(conn, chunks)
        conn.execute("ROLLBACK")

    ratio = cost_ratio(schema_4, schema_3, rounds=rounds, repeat=1)
    cpu = {}
    for name, fn in (("schema 3", schema_3), ("schema 4", schema_4)):
        started = time.thread_time()
        fn()
        cpu[name] = time.thread_time() - started
    print(
        f"re-writing the lexical rows of {len(ids)} chunks: CPU {cpu['schema 3']:.2f} s "
        f"(schema 3) vs {cpu['schema 4']:.2f} s (schema 4), cost_ratio {ratio:.3f}"
    )


if __name__ == "__main__":
    main()
