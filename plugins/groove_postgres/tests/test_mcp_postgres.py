"""The MCP server on a Postgres KB: the tools, and searches on several reader threads at
once, each with its own store on the backend's shared pool."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from groove_postgres.testing import store_toml

from groove_core.mcp.server import build_mcp_server
from groove_core.testing import BILINGUAL, call_tools, drive_mcp, make_kb, open_kb


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    payload: dict[str, Any] = result.structured_content
    assert json.loads(result.content[0].text) == payload
    return payload


def test_tools_on_a_postgres_kb(tmp_path: Path, postgres_dsn: str) -> None:
    app = open_kb(
        make_kb(tmp_path / "notes", BILINGUAL, config=store_toml("postgres", postgres_dsn))
    )
    search, tagged, doc, listed, status, related = call_tools(
        build_mcp_server(app),
        ("search", {"query": "再ランキングの評価", "limit": 3}),
        ("search", {"query": "rust", "tags": ["lang"], "path": "notes/**"}),
        ("get_document", {"path": "guide/install.md"}),
        ("list_documents", {"path_prefix": "notes/"}),
        ("index_status", {}),
        ("search", {"query": "状態 -ウォッチャー", "limit": 5}),
    )
    assert structured(search)["results"][0]["path"] == "notes/ja.md"
    assert {h["path"] for h in structured(tagged)["results"]} == {"notes/rust.md"}
    got = structured(doc)
    assert got["indexed"] is True and got["tags"] == ["setup", "guide"]
    paths = [d["path"] for d in structured(listed)["documents"]]
    assert paths == sorted(p for p in BILINGUAL if p.startswith("notes/"))
    state = structured(status)
    assert (state["documents"], state["incomplete"]) == (len(BILINGUAL), False)
    assert state["embedder"]["identity"] == "hashing-trigram:64"
    # Named to a remote client without the server's host, user or database.
    assert state["index_file"] == "postgres, KB notes"
    assert all("ウォッチャー" not in h["content"] for h in structured(related)["results"])


def test_concurrent_searches_on_reader_threads(tmp_path: Path, postgres_dsn: str) -> None:
    app = open_kb(
        make_kb(tmp_path / "notes", BILINGUAL, config=store_toml("postgres", postgres_dsn))
    )
    expected = {q: app.search(q, limit=5).results[0].path for q in ("再ランキング", "rust", "型")}
    app.close()
    server = build_mcp_server(app, readers=4)

    async def scenario(client: Any) -> list[Any]:
        calls = [
            client.call_tool("search", {"query": q, "limit": 5}) for _ in range(8) for q in expected
        ]
        return list(await asyncio.gather(*calls))

    results = drive_mcp(server, scenario)
    queries = [q for _ in range(8) for q in expected]
    for query, result in zip(queries, results, strict=True):
        assert structured(result)["results"][0]["path"] == expected[query]
    # The readers' stores share the backend's one pool, within its size.
    pool = app.backend.db.pool  # type: ignore[attr-defined]
    assert pool.get_stats()["pool_size"] <= app.backend.settings.pool_max  # type: ignore[attr-defined]
