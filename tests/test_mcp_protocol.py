"""Every MCP protocol revision groove serves, over stdio and streamable HTTP (with the
bearer token), each driven by a client speaking exactly that revision (issue #30).

The handshake revisions are driven with raw JSON-RPC (the SDK's client offers only the
newest); the stateless one (2026-07-28) with the SDK's client pinned to it. A revision
that stops working fails its own test.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from groove_core.mcp import PROTOCOL_REVISIONS
from groove_core.testing import open_kb
from tests.helpers import stdio_exchange
from tests.test_mcp_http import ENV, TOKEN, serve

HANDSHAKE = [r for r in PROTOCOL_REVISIONS if r in HANDSHAKE_PROTOCOL_VERSIONS]
MODERN = [r for r in PROTOCOL_REVISIONS if r in MODERN_PROTOCOL_VERSIONS]
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SEARCH = {"name": "search", "arguments": {"query": "再ランキングの評価", "limit": 2}}


def test_groove_serves_every_revision_the_sdk_knows() -> None:
    """A new SDK with a new revision fails here until groove's list (and so the matrix
    below) includes it; a revision groove lists that the SDK dropped fails too."""
    assert set(PROTOCOL_REVISIONS) == {*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS}
    assert HANDSHAKE and MODERN


def _message(id_: int | None, method: str, params: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if id_ is not None:
        message["id"] = id_
    return message


def _init(revision: str) -> dict[str, Any]:
    info = {"name": "matrix", "version": "0"}
    return _message(1, "initialize", {"protocolVersion": revision, "capabilities": {},
                                      "clientInfo": info})  # fmt: skip


def _check_session(revision: str, answers: dict[int, dict[str, Any]]) -> None:
    init = answers[1]["result"]
    assert init["protocolVersion"] == revision
    assert {"tools", "resources", "prompts"} <= set(init["capabilities"])
    tools = {t["name"] for t in answers[2]["result"]["tools"]}
    assert {"search", "get_document", "index_status"} <= tools
    hits = answers[3]["result"]["structuredContent"]["results"]
    assert hits[0]["path"] == "notes/ja.md"
    [content] = answers[4]["result"]["contents"]
    assert content["uri"] == "groove://kb/notes/ja.md" and "再ランキング" in content["text"]


def _session_calls() -> list[dict[str, Any]]:
    return [
        _message(2, "tools/list", {}),
        _message(3, "tools/call", SEARCH),
        _message(4, "resources/read", {"uri": "groove://kb/notes/ja.md"}),
    ]


# -- stdio -------------------------------------------------------------------------------


@pytest.mark.parametrize("revision", HANDSHAKE)
def test_stdio_handshake_revision(notes_kb: Path, revision: str) -> None:
    open_kb(notes_kb)
    lines = [_init(revision), _message(None, "notifications/initialized", {}), *_session_calls()]
    answers, _ = stdio_exchange(notes_kb, lines, 4)
    _check_session(revision, {a["id"]: a for a in answers})


@pytest.mark.parametrize("revision", MODERN)
def test_stdio_stateless_revision(notes_kb: Path, revision: str) -> None:
    open_kb(notes_kb)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "groove_core", "serve", "--kb", str(notes_kb)], env=ENV
    )

    async def scenario() -> tuple[str, Any, Any]:
        async with Client(params, mode=revision) as client:
            hit = await client.call_tool("search", SEARCH["arguments"])
            read = await client.read_resource("groove://kb/notes/ja.md")
            return client.protocol_version, hit, read

    version, hit, read = asyncio.run(asyncio.wait_for(scenario(), timeout=60))
    assert version == revision
    assert hit.structured_content["results"][0]["path"] == "notes/ja.md"
    assert "再ランキング" in read.contents[0].text


# -- streamable HTTP, with the bearer token -----------------------------------------------


@pytest.fixture(scope="module")
def http_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from groove_core.testing import make_kb
    from tests.conftest import NOTES

    folder = tmp_path_factory.mktemp("matrix")
    kb = make_kb(folder / "kb", NOTES)
    open_kb(kb)
    (folder / "token").write_text(TOKEN, encoding="utf-8")
    with serve(kb, "--token-file", str(folder / "token")) as (port, _):
        yield f"http://127.0.0.1:{port}/mcp"


def _answer(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC answer in a JSON body or in an event stream's data line."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        return dict(json.loads(data[-1]))
    return dict(response.json())


@pytest.mark.parametrize("revision", HANDSHAKE)
def test_http_handshake_revision(http_url: str, revision: str) -> None:
    headers = {**AUTH, "Accept": "application/json, text/event-stream"}
    with httpx2.Client(timeout=30) as http:
        assert (
            http.post(
                http_url, json=_init(revision), headers={"Accept": headers["Accept"]}
            ).status_code
            == 401
        )
        first = http.post(http_url, json=_init(revision), headers=headers)
        assert first.status_code == 200, first.text
        answers = {1: _answer(first)}
        session = {
            "mcp-session-id": first.headers["mcp-session-id"],
            "mcp-protocol-version": revision,
        }
        done = http.post(
            http_url,
            json=_message(None, "notifications/initialized", {}),
            headers={**headers, **session},
        )
        assert done.status_code == 202, done.text
        for call in _session_calls():
            answers[call["id"]] = _answer(
                http.post(http_url, json=call, headers={**headers, **session})
            )
    _check_session(revision, answers)


@pytest.mark.parametrize("revision", MODERN)
def test_http_stateless_revision(http_url: str, revision: str) -> None:
    async def scenario(headers: dict[str, str]) -> tuple[str, Any]:
        http = httpx2.AsyncClient(headers=headers, timeout=30)
        async with Client(
            streamable_http_client(http_url, http_client=http), mode=revision
        ) as client:
            return client.protocol_version, await client.call_tool("search", SEARCH["arguments"])

    version, hit = asyncio.run(asyncio.wait_for(scenario(AUTH), timeout=60))
    assert version == revision
    assert hit.structured_content["results"][0]["path"] == "notes/ja.md"
    with pytest.raises(Exception):  # noqa: B017 - refused at the door, whatever the SDK raises
        asyncio.run(asyncio.wait_for(scenario({}), timeout=60))
