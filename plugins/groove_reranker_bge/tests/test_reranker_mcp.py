"""The reranker through the MCP ``search`` tool, in process (``mcp.Client(server)``).

Over MCP a client may only pick among the models groove.toml lists; the CLI (the user at
the terminal, who writes groove.toml anyway) may still name any model
(test_reranker_plugin.py::test_cli_*).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from groove_reranker_bge.backends import loaded_keys
from mcp import Client

from groove_core.mcp.server import build_mcp_server
from groove_core.testing import FAST_CONFIG, make_kb, open_kb

QUERY = "ranking results"


def _session(server: Any, calls: list[dict[str, Any]]) -> tuple[dict[str, Any], list[Any]]:
    async def main() -> tuple[dict[str, Any], list[Any]]:
        async with Client(server) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            results = [await client.call_tool("search", args) for args in calls]
            return tools["search"].input_schema["properties"], results

    return asyncio.run(main())


def _config(model: Path, *alternatives: str) -> str:
    listed = ", ".join(f'"{m}"' for m in alternatives)
    return f'reranker = "{model}"\n{FAST_CONFIG}[plugin.reranker]\nmodels = [{listed}]\n'


def test_a_client_picks_only_among_the_configured_models(tmp_path: Path, tiny_model: Path) -> None:
    other = tmp_path / "other-model"
    app = open_kb(make_kb(tmp_path / "kb", config=_config(tiny_model, str(other))))
    expected = app.search(QUERY, limit=3, options={"reranker": str(tiny_model)})
    held = loaded_keys()
    started = time.perf_counter()
    props, (named, arbitrary, switch) = _session(
        build_mcp_server(app),
        [
            {"query": QUERY, "limit": 3, "reranker": str(tiny_model)},
            # An existing folder that is no model: the old server spent seconds loading it,
            # and with the hub reachable any name an agent chose would be downloaded.
            {"query": QUERY, "reranker": str(tmp_path)},
            {"query": QUERY, "rerank": True},
        ],
    )
    assert props["reranker"]["enum"] == [str(tiny_model), str(other)]
    assert "boolean" in str(props["rerank"])

    assert not named.is_error, named.content
    got = [(h["chunk_id"], h["score"]) for h in named.structured_content["results"]]
    assert got == [(h.chunk_id, h.score) for h in expected.results]

    assert arbitrary.is_error
    assert str(tiny_model) in arbitrary.content[0].text  # it names what may be chosen
    assert loaded_keys() == held  # refused before anything was loaded
    assert not switch.is_error, switch.content
    assert time.perf_counter() - started < 60


def test_without_configured_models_the_parameter_is_refused(
    tmp_path: Path, tiny_model: Path
) -> None:
    app = open_kb(make_kb(tmp_path / "kb", config=FAST_CONFIG))
    props, (named, switch) = _session(
        build_mcp_server(app),
        [{"query": QUERY, "reranker": str(tiny_model)}, {"query": QUERY, "rerank": True}],
    )
    # Neither is offered; a client that sends one anyway is told why.
    assert "reranker" not in props and "rerank" not in props
    assert (
        named.is_error
        and "argument 'reranker' of search cannot be used: the server "
        "lists no values for it (plugin reranker)"
        in named.content[0].text
    )
    assert switch.is_error and "argument 'rerank' of search cannot be used" in (
        switch.content[0].text
    )
