"""Bounded load test: concurrent MCP clients search while index runs write.

    .venv/bin/python bench/load.py KB [--clients 4] [--seconds 30]

Starts `groove serve --transport http` on 127.0.0.1 (a free port) for KB, which must
already be indexed; runs CLIENTS MCP clients that search the KB's golden queries in a loop
for SECONDS; meanwhile a writer appends to a few files and runs `groove index` again and
again. Prints requests, errors, p50/p95 latency, and how many index runs overlapped.
Traffic never leaves the loopback interface; every loop is bounded in time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from mcp import Client

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def golden_queries(kb: Path) -> list[str]:
    for name in ("golden.jsonl", "golden-all.jsonl"):
        path = kb / name
        if path.exists():
            lines = path.read_text(encoding="utf-8").splitlines()
            return [json.loads(line)["query"] for line in lines if line.strip()]
    return ["search", "検索", "index", "設定"]


async def client_loop(
    url: str, queries: list[str], offset: int, until: float, latencies: list[float]
) -> list[str]:
    errors: list[str] = []
    async with Client(url) as client:
        i = offset
        while time.monotonic() < until:
            started = time.perf_counter()
            try:
                result = await client.call_tool("search", {"query": queries[i % len(queries)]})
                if result.is_error:
                    errors.append(str(result.content)[:200])
            except Exception as err:  # counted, reported, never fatal to the run
                errors.append(f"{type(err).__name__}: {err}")
            latencies.append(time.perf_counter() - started)
            i += 7
    return errors


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def writer(kb: Path, until: float) -> int:
    """Append to a handful of files and re-index, until time is up; returns the runs."""
    files = sorted(kb.rglob("*.md"))[:5]
    runs = 0
    while time.monotonic() < until:
        for path in files:
            with path.open("a", encoding="utf-8") as f:
                f.write(f"\nload-test edit {runs}\n")
        subprocess.run(
            [sys.executable, "-m", "groove_core", "index", str(kb)],
            env=ENV,
            capture_output=True,
            check=True,
        )
        runs += 1
    return runs


def start_http_server(kb: Path, readers: int | None) -> tuple[subprocess.Popen[bytes], str]:
    """``groove serve --transport http`` on a free loopback port: the process and its MCP
    URL (the caller terminates it)."""
    port = free_port()
    command = ["serve", "--kb", str(kb), "--transport", "http", "--port", str(port)]
    if readers is not None:
        command += ["--readers", str(readers)]
    server = subprocess.Popen(
        [sys.executable, "-m", "groove_core", *command, "--log-level", "warning"],
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return server, f"http://127.0.0.1:{port}/mcp"


async def main_async(kb: Path, clients: int, seconds: float, readers: int | None = None) -> None:
    server, url = start_http_server(kb, readers)
    try:
        for _ in range(100):
            try:
                async with Client(url) as client:
                    await client.call_tool("search", {"query": "warm up"})
                break
            except Exception:
                await asyncio.sleep(0.2)
        queries = golden_queries(kb)
        latencies: list[float] = []
        cpu_before = cpu_seconds(server.pid)
        until = time.monotonic() + seconds
        write = asyncio.to_thread(writer, kb, until)
        loops = [client_loop(url, queries, n, until, latencies) for n in range(clients)]
        runs, *results = await asyncio.gather(write, *loops)
        server_cpu = cpu_seconds(server.pid) - cpu_before
    finally:
        server.terminate()
        server.wait(timeout=30)
    errors = [e for result in results for e in result]
    ordered = sorted(latencies)
    print(
        json.dumps(
            {
                "clients": clients,
                "readers": readers,
                "seconds": seconds,
                "requests": len(latencies),
                "errors": len(errors),
                "error_samples": errors[:3],
                "index_runs_during_load": runs,
                "p50_ms": round(statistics.median(ordered) * 1000, 1),
                "p95_ms": round(ordered[int(len(ordered) * 0.95)] * 1000, 1),
                "requests_per_s": round(len(latencies) / seconds, 1),
                "server_cpu_s": round(server_cpu, 1),
                "server_cpu_ms_per_request": round(server_cpu * 1000 / max(len(latencies), 1), 1),
                "load_average": [round(x, 1) for x in os.getloadavg()],
            },
            indent=2,
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("kb", type=Path)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--readers", type=int, default=None, help="serve --readers (default)")
    args = parser.parse_args()
    asyncio.run(main_async(args.kb, args.clients, args.seconds, args.readers))


if __name__ == "__main__":
    main()
