"""Warm search latency: in process (``app.search``) vs through MCP over stdio.

Usage::

    .venv/bin/python bench/mcp_latency.py [--collection DIR] [--queries N] [--limit K]

The collection (default: jsquad-ja-para from evaldata/) is read where it
is; its index goes to ``--index-dir`` (default ``<temp dir>/groove-bench-<name>``) through a
generated groove.toml with ``[index] path``, so nothing is written into the collection and
a second run reuses the index. The default embedder is used (USE multilingual, as served).
Each path is warmed up first; the figures are per-call wall times over the same queries,
the three paths interleaved query by query (other jobs on the machine slow all alike).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_COLLECTION = ROOT / "evaldata" / "jsquad-ja-para"
WARMUP = 10


def summary(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    return {
        "calls": len(ms),
        "median_ms": round(statistics.median(ms), 2),
        "p90_ms": round(ms[int(len(ms) * 0.9) - 1], 2),
        "mean_ms": round(statistics.fmean(ms), 2),
    }


def load_queries(collection: Path, count: int) -> list[str]:
    lines = (collection / "golden.jsonl").read_text(encoding="utf-8").splitlines()
    queries = [json.loads(line)["query"] for line in lines if line.strip()]
    return (queries * (count // len(queries) + 1))[:count]


def prepare(collection: Path, index_dir: Path) -> Path:
    """A groove.toml outside the collection pointing the index at ``index_dir``; index."""
    from groove_core.app import Groove

    index_dir.mkdir(parents=True, exist_ok=True)
    config = index_dir / "groove.toml"
    config.write_text(f'[index]\npath = "{index_dir / "index.sqlite"}"\n', encoding="utf-8")
    app = Groove.open(collection, config)
    started = time.perf_counter()
    report = app.index()
    print(
        f"index: {report.documents_total} documents, {report.chunks_total} chunks, "
        f"{report.chunks_embedded} embedded in {time.perf_counter() - started:.1f} s",
        file=sys.stderr,
    )
    app.close()
    return config


async def _call(client: Any, query: str, limit: int) -> None:
    result = await client.call_tool("search", {"query": query, "limit": limit})
    if result.is_error:
        raise RuntimeError(f"search failed for {query!r}: {result.content}")


async def measure(
    collection: Path, config: Path, queries: list[str], limit: int
) -> dict[str, list[float]]:
    """Per-call times of both paths, interleaved query by query so that a change in machine
    load (other jobs) hits both alike.

    The MCP server runs in its own process (``groove serve`` over stdio), as clients run it;
    an in-memory server inside this process would share numpy's thread pool with the
    in-process searches and slow both, which is not what a deployment sees.
    """
    from mcp import Client, StdioServerParameters

    from groove_core.app import Groove

    app = Groove.open(collection, config)
    args = ["-m", "groove_core", "serve", "--kb", str(collection), "--config", str(config)]
    params = StdioServerParameters(
        command=sys.executable, args=[*args, "--log-level", "warning"], env=dict(os.environ)
    )
    times: dict[str, list[float]] = {"in_process": [], "mcp_stdio": []}
    async with Client(params) as stdio:
        for n, query in enumerate(queries[:WARMUP] + queries):
            started = time.perf_counter()
            app.search(query, limit=limit)
            in_process = time.perf_counter()
            await _call(stdio, query, limit)
            done = time.perf_counter()
            if n >= WARMUP:
                times["in_process"].append(in_process - started)
                times["mcp_stdio"].append(done - in_process)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--collection", type=Path, default=DEFAULT_COLLECTION)
    parser.add_argument("--index-dir", type=Path, default=None)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--limit", type=int, default=10)
    args = parser.parse_args()
    from groove_core.cli.common import configure_logging

    configure_logging(
        "warning", server=True
    )  # per-search log lines would cost time and flood the output
    collection: Path = args.collection.resolve()
    index_dir = args.index_dir or Path(tempfile.gettempdir()) / f"groove-bench-{collection.name}"
    config = prepare(collection, index_dir)
    queries = load_queries(collection, args.queries)
    times = asyncio.run(measure(collection, config, queries, args.limit))
    results = {name: summary(values) for name, values in times.items()}
    overhead = results["mcp_stdio"]["median_ms"] - results["in_process"]["median_ms"]
    print(f"{'path':<15}{'calls':>7}{'median ms':>11}{'p90 ms':>9}{'mean ms':>9}")
    for name, row in results.items():
        print(
            f"{name:<15}{row['calls']:>7}{row['median_ms']:>11}{row['p90_ms']:>9}{row['mean_ms']:>9}"
        )
    print(f"stdio overhead (median): {overhead:.2f} ms")
    print(json.dumps({"collection": collection.name, "limit": args.limit, **results}))


if __name__ == "__main__":
    main()
