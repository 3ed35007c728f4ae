"""The lexical legs at scale: today's trigram expression against the common-phrase rule
and against a time budget, query by query, on one index.

    .venv/bin/python bench/fts_scale.py KB [--shares 0.02 0.05 0.1] [--budget-ms 100]

KB must already be indexed; the FTS cost does not depend on the embedder, so a synthetic
KB (bench/corpus.py) indexed with ``[embedder] name = "hashing"`` will do. Queries: the
first 100 golden queries of jsquad-ja-para and of xquad-en-para, as bench/scale.py uses.
For each query the variants run interleaved (so machine load hits them alike), each in its
own read transaction; wall and CPU time (this thread's) are recorded. Prints p50/p95 per
variant, the rows the dropped phrases would have matched, and the overlap of each
variant's top 50 with today's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import queries
from timing import pct

from groove_core import words
from groove_core.app import Groove
from groove_core.builtins.legs import common_phrases, common_terms
from groove_core.query import match_expression, parse_query
from groove_core.sqlite import word_table
from groove_core.sqlite.lexical_legs import FTS_RANKED_SQL
from groove_core.sqlite.store import Store

WEIGHTS = (2.0, 1.0, 1.0)
LEG_SIZE = 50


def timed(fn: Callable[[], list[int]]) -> tuple[float, float, list[int]]:
    wall, cpu = time.perf_counter(), time.thread_time()
    out = fn()
    return time.perf_counter() - wall, time.thread_time() - cpu, out


def ranked(store: Store, expr: str) -> list[int]:
    return [int(r[0]) for r in store.conn.execute(FTS_RANKED_SQL, (*WEIGHTS, expr, LEG_SIZE))]


def budgeted(store: Store, expr: str, budget_s: float) -> list[int]:
    """Today's query, abandoned at the budget (FTS5 ranks only after matching every row,
    so an interrupted query has no best-so-far: the leg then returns nothing)."""
    deadline = time.perf_counter() + budget_s
    store.conn.set_progress_handler(lambda: int(time.perf_counter() > deadline), 1000)
    try:
        return ranked(store, expr)
    except Exception:  # interrupted: sqlite3.OperationalError from pysqlite3
        return []
    finally:
        store.conn.set_progress_handler(None, 0)


def pruned(store: Store, text: str, share: float) -> list[int]:
    q = parse_query(text)
    if q.match_expr is None:
        return []
    common = common_phrases(store, q.positives, share)
    kept = [p for p in q.positives if p not in common]
    return ranked(store, match_expression(kept, q.negatives))


def word_leg(store: Store, text: str, share: float = 0.0) -> list[int]:
    terms, _ = words.query_terms(parse_query(text).positive_parts)
    common = common_terms(store, terms, share) if share and terms else []
    kept = [t for t in terms if t not in common]
    if not kept:
        return []
    expr = match_expression(kept, ())
    return [cid for cid, _ in word_table.search(store.conn, expr, WEIGHTS, LEG_SIZE, None)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("kb", type=Path)
    parser.add_argument("--shares", type=float, nargs="+", default=[0.02, 0.05, 0.1])
    parser.add_argument("--budget-ms", type=float, default=100.0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    app = Groove.open(args.kb)
    store = Store.open(app.index_file)
    texts = [q for q in queries() if parse_query(q).match_expr is not None]
    variants: dict[str, Callable[[str], list[int]]] = {
        "today": lambda t: ranked(store, str(parse_query(t).match_expr)),
        f"budget {args.budget_ms:g} ms": lambda t: budgeted(
            store, str(parse_query(t).match_expr), args.budget_ms / 1000
        ),
        **{f"common > {s:g}": (lambda t, s=s: pruned(store, t, s)) for s in args.shares},
        "word leg": lambda t: word_leg(store, t),
        **{f"word, common > {s:g}": (lambda t, s=s: word_leg(store, t, s)) for s in args.shares},
    }
    # Warm the page cache and the trigram-count cache the way a long-lived server is warm.
    for text in texts:
        for name in variants:
            if "common" in name:
                variants[name](text)
    wall: dict[str, list[float]] = {n: [] for n in variants}
    cpu: dict[str, list[float]] = {n: [] for n in variants}
    overlap: dict[str, list[float]] = {n: [] for n in variants}
    for text in texts:
        base: list[int] = []
        for name, fn in variants.items():
            with store.snapshot():
                w, c, ids = timed(lambda fn=fn, text=text: fn(text))
            wall[name].append(w)
            cpu[name].append(c)
            if name in ("today", "word leg"):
                base = ids
            elif base:
                overlap[name].append(len(set(ids) & set(base)) / len(base))
    chunks = store.counts()
    print(f"{chunks}, {len(texts)} queries")
    print("| variant | wall p50 / p95 ms | CPU p50 / p95 ms | top-50 overlap with today |")
    print("|---|---|---|---|")
    for name in variants:
        ov = f"{statistics.mean(overlap[name]):.2f}" if overlap[name] else "—"
        print(f"| {name} | {pct(wall[name])} | {pct(cpu[name])} | {ov} |")
    if args.json:
        args.json.write_text(json.dumps({"wall": wall, "cpu": cpu}), encoding="utf-8")


if __name__ == "__main__":
    main()
