"""Several MCP searches at once: each on its own worker thread and SQLite connection, inside
its own read transaction; and index_status answering from a cache of the files on disk."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult

from groove_core.context import LegSpec, QueryContext
from groove_core.hookspecs import hookimpl
from groove_core.kb_files import DiskTracker, changes_on_disk
from groove_core.mcp.server import build_mcp_server
from groove_core.mcp.threads import LockedEmbedder
from groove_core.models import LegResult
from groove_core.testing import make_kb, open_kb


class Rendezvous:
    """A leg that waits, inside the search's read transaction, until ``parties`` searches
    are there at the same moment: it returns only if they truly overlap."""

    def __init__(self, parties: int, timeout: float) -> None:
        self.barrier = threading.Barrier(parties, timeout=timeout)
        self.inside: list[tuple[int, int, bool]] = []

    @hookimpl
    def groove_legs(self) -> list[LegSpec]:
        return [LegSpec("rendezvous", "other", self.search)]

    def search(self, ctx: QueryContext) -> LegResult | None:
        conn = ctx.store.conn
        self.inside.append((threading.get_ident(), id(conn), conn.in_transaction))
        self.barrier.wait()
        return LegResult("rendezvous", ())


def _searches(server: MCPServer, queries: list[str]) -> list[CallToolResult]:
    async def main() -> list[CallToolResult]:
        async with Client(server) as client:
            calls = [client.call_tool("search", {"query": q, "limit": 3}) for q in queries]
            return list(await asyncio.gather(*calls))

    return asyncio.run(main())


def test_searches_overlap_on_separate_connections_each_in_its_own_snapshot(
    notes_kb: Path,
) -> None:
    leg = Rendezvous(parties=3, timeout=20)
    app = open_kb(notes_kb, extra_plugins=[("rendezvous", leg)], entry_points=False)
    server = build_mcp_server(app, readers=3)
    results = _searches(server, ["ranking results", "rust ownership", "再ランキングの評価"])
    assert [r.is_error for r in results] == [False, False, False]
    threads = {t for t, _, _ in leg.inside}
    connections = {c for _, c, _ in leg.inside}
    assert len(threads) == 3 and len(connections) == 3
    assert all(in_transaction for _, _, in_transaction in leg.inside)


def test_one_reader_cannot_overlap_so_the_rendezvous_fails(notes_kb: Path) -> None:
    # The test above can fail: with a single worker the second search never starts while
    # the first waits, so the barrier times out and both searches report an error.
    leg = Rendezvous(parties=2, timeout=1.5)
    app = open_kb(notes_kb, extra_plugins=[("rendezvous", leg)], entry_points=False)
    server = build_mcp_server(app, readers=1)
    results = _searches(server, ["ranking results", "rust ownership"])
    assert all(r.is_error for r in results)
    assert len({t for t, _, _ in leg.inside}) == 1


class CountingEmbedder:
    """An embedder that notices two calls at once (the lock must prevent it)."""

    def __init__(self) -> None:
        self.active = 0
        self.overlaps = 0
        self.calls = 0

    identity = "counting:4"
    dim = 4

    def embed_documents(self, texts: Any) -> Any:
        import numpy as np

        self.active += 1
        self.calls += 1
        if self.active > 1:
            self.overlaps += 1
        time.sleep(0.002)
        self.active -= 1
        return np.ones((len(texts), 4), dtype=np.float32)

    def embed_query(self, text: str) -> Any:
        return self.embed_documents([text])[0]


def test_the_shared_embedder_is_built_once_and_called_one_at_a_time() -> None:
    built: list[CountingEmbedder] = []

    def make() -> CountingEmbedder:
        time.sleep(0.05)  # a slow load: threads arriving meanwhile must wait, not load again
        built.append(CountingEmbedder())
        return built[-1]

    locked = LockedEmbedder(make)
    workers = [
        threading.Thread(target=lambda: [locked.embed_query("q") for _ in range(20)])
        for _ in range(4)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(built) == 1
    assert built[0].calls == 80 and built[0].overlaps == 0
    assert locked.identity == "counting:4" and locked.dim == 4


# -- index_status ---------------------------------------------------------------------------


def _status(server: MCPServer) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        async with Client(server) as client:
            result = await client.call_tool("index_status", {})
            assert not result.is_error, result.content
            assert result.structured_content is not None
            return result.structured_content

    return asyncio.run(main())


def _bump(path: Path, text: str) -> None:
    """Rewrite in place with a later mtime (a coarse clock must not hide the edit)."""
    before = path.stat().st_mtime_ns
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before + 2_000_000_000, before + 2_000_000_000))


def test_index_status_answers_through_the_tracker(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb")
    server = build_mcp_server(open_kb(kb))
    assert _status(server)["changes_on_disk"]["up_to_date"] is True
    (kb / "notes" / "new.md").write_text("# New\n", encoding="utf-8")
    assert _status(server)["changes_on_disk"]["added"] == ["notes/new.md"]


def test_the_tracker_walks_only_when_a_folder_changed(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb")
    app = open_kb(kb)
    tracker = DiskTracker()
    assert changes_on_disk(app, tracker)["up_to_date"] is True
    assert changes_on_disk(app, tracker)["up_to_date"] is True
    assert tracker.walks == 1

    # An edit in place changes no folder: found by the stat of the file, without a walk.
    _bump(kb / "notes" / "rust.md", "# Rust\n\nedited\n")
    changes = changes_on_disk(app, tracker)
    assert changes["modified"] == ["notes/rust.md"] and tracker.walks == 1

    # A new file changes its folder: walked again.
    (kb / "notes" / "new.md").write_text("# New\n", encoding="utf-8")
    changes = changes_on_disk(app, tracker)
    assert changes["added"] == ["notes/new.md"] and tracker.walks == 2

    # A deleted file; then a rule edited into an existing .grooveignore.
    (kb / "guide" / "search.md").unlink()
    changes = changes_on_disk(app, tracker)
    assert changes["deleted"] == ["guide/search.md"] and tracker.walks == 3
    (kb / ".grooveignore").write_text("# none yet\n", encoding="utf-8")
    changes_on_disk(app, tracker)
    walks = tracker.walks
    _bump(kb / ".grooveignore", "notes/new.md\n")
    changes = changes_on_disk(app, tracker)
    assert changes["added"] == [] and tracker.walks == walks + 1
    # The cached answer is the walk's answer.
    assert changes == changes_on_disk(app)


@pytest.mark.parametrize("readers", [0, -1])
def test_readers_must_be_positive(notes_kb: Path, readers: int) -> None:
    app = open_kb(notes_kb, index=False)
    with pytest.raises(ValueError, match="workers must be at least 1"):
        build_mcp_server(app, readers=readers)


def test_serve_help_names_the_reader_default() -> None:
    from groove_core.cli import serve
    from groove_core.mcp.defaults import DEFAULT_READERS

    option = next(p for p in serve.serve_cmd.params if p.name == "readers")
    assert f"({DEFAULT_READERS} for SQLite" in (option.help or "")
