"""FTS leg cost on the worst-case corpus (every phrase matches every row), as in the seed.

    .venv/bin/python bench/fts_cost.py

Prints the best-of-5 time of a 1-phrase and a 32-phrase OR query, and of the exclusion id
scan vs. the ranked query over the same rows, at 5k / 20k / 40k rows.
"""

from __future__ import annotations

import platform
import tempfile
import time
from pathlib import Path

from groove_core.query import parse_query
from groove_core.sqlite.lexical_legs import FTS_IDS_SQL, FTS_RANKED_SQL
from groove_core.sqlite.store import Store

WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echoes",
    "foxtrot",
    "golfer",
    "hotel",
    "india",
    "juliet",
    "kilos",
    "limas",
    "mikes",
    "novembers",
    "oscar",
    "papas",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xrays",
    "yankee",
    "zulus",
    "amber",
    "basil",
    "cedar",
    "dunes",
    "ember",
    "fjord",
]


def best_ms(store: Store, sql: str, params: tuple[object, ...]) -> float:
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        store.conn.execute(sql, params).fetchall()
        best = min(best, time.perf_counter() - started)
    return best * 1000


def main() -> None:
    one = parse_query(WORDS[0]).match_expr
    many = parse_query(" ".join(WORDS)).match_expr
    negative = parse_query("zzz -alpha").negative_expr
    print(f"machine: {platform.machine()}, {platform.processor() or platform.system()}")
    print("| rows | 1 phrase | 32-phrase OR | ratio | id scan | ranked (same rows) | ratio |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for rows in (5000, 20000, 40000):
            store = Store.create(Path(tmp) / f"{rows}.sqlite")
            body = " ".join(WORDS)
            with store.transaction():
                store.conn.executemany(
                    "INSERT INTO fts_chunks(rowid, heading, context, content) VALUES (?,?,?,?)",
                    [(i, f"h {i}", "ctx", f"{body} {i}") for i in range(1, rows + 1)],
                )
            t1 = best_ms(store, FTS_RANKED_SQL, (2.0, 1.0, 1.0, one, 50))
            t32 = best_ms(store, FTS_RANKED_SQL, (2.0, 1.0, 1.0, many, 50))
            scan = best_ms(store, FTS_IDS_SQL, (negative,))
            ranked = best_ms(store, FTS_RANKED_SQL, (2.0, 1.0, 1.0, negative, 50))
            print(
                f"| {rows:,} | {t1:.1f} ms | {t32:.1f} ms | {t32 / t1:.1f} | {scan:.2f} ms "
                f"| {ranked:.2f} ms | {scan / ranked:.2f} |"
            )
            store.close()


if __name__ == "__main__":
    main()
