"""The reranker through the MCP ``search`` tool, in process (``mcp.Client(server)``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from mcp import Client

from groove_core.mcp_server import build_mcp_server
from groove_core.testing import FAST_CONFIG, make_kb, open_kb

QUERY = "ranking results"


def _session(server: Any, calls: list[dict[str, Any]]) -> tuple[dict[str, Any], list[Any]]:
    async def main() -> tuple[dict[str, Any], list[Any]]:
        async with Client(server) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            results = [await client.call_tool("search", args) for args in calls]
            return tools["search"].input_schema["properties"], results

    return asyncio.run(main())


def test_search_takes_reranker_and_rerank_parameters(tmp_path: Path, tiny_model: Path) -> None:
    app = open_kb(make_kb(tmp_path / "kb", config=FAST_CONFIG))
    expected = app.search(QUERY, limit=3, options={"reranker": str(tiny_model)})
    props, (named, bad, switch) = _session(
        build_mcp_server(app),
        [
            {"query": QUERY, "limit": 3, "reranker": str(tiny_model)},
            {"query": QUERY, "reranker": str(tmp_path / "missing")},
            {"query": QUERY, "rerank": True},
        ],
    )
    assert "string" in str(props["reranker"]) and "boolean" in str(props["rerank"])

    assert not named.is_error, named.content
    got = [(h["chunk_id"], h["score"]) for h in named.structured_content["results"]]
    assert got == [(h.chunk_id, h.score) for h in expected.results]

    assert bad.is_error
    assert (
        "reranker model directory" in bad.content[0].text
        and "does not exist" in bad.content[0].text
    )
    assert switch.is_error and "needs a model" in switch.content[0].text
