"""``groove serve`` as a real process: MCP over stdio and over streamable HTTP (127.0.0.1)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from groove_core.testing import open_kb, wait_until_listening
from tests.helpers import stdio_exchange

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "NO_PROXY": "127.0.0.1"}


def serve_args(kb: Path, *extra: str) -> list[str]:
    return ["-m", "groove_core", "serve", "--kb", str(kb), *extra]


def test_stdio_client_lists_and_calls_tools(notes_kb: Path) -> None:
    open_kb(notes_kb)
    params = StdioServerParameters(command=sys.executable, args=serve_args(notes_kb), env=ENV)

    async def scenario() -> tuple[set[str], Any, Any, Any]:
        async with Client(params) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            ja = await client.call_tool("search", {"query": "再ランキングの評価", "limit": 2})
            bad = await client.call_tool("get_document", {"path": "../../etc/passwd"})
            en = await client.call_tool("search", {"query": "reciprocal rank fusion", "limit": 2})
            return names, ja, bad, en

    names, ja, bad, en = asyncio.run(scenario())
    assert {"search", "get_document", "list_documents", "index_status"} <= names
    assert ja.structured_content["results"][0]["path"] == "notes/ja.md"
    assert bad.is_error and "contains '..'" in bad.content[0].text
    assert en.structured_content["results"][0]["path"] == "guide/search.md"


def _rpc(id_: int | None, method: str, params: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if id_ is not None:
        message["id"] = id_
    return message


def test_stdout_carries_only_protocol_messages_and_logs_go_to_stderr(notes_kb: Path) -> None:
    # Enough text that ten hits overflow the smallest budget.
    long = "".join(
        f"## 書き方 {i}\n\n" + "ノートの書き方を一つずつ見ていく。" * 12 + "\n\n" for i in range(8)
    )
    (notes_kb / "notes" / "steps.md").write_text("# 手順\n\n" + long, encoding="utf-8")
    open_kb(notes_kb)
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    }
    call = {"name": "search", "arguments": {"query": "検索システム"}}
    messages, err = stdio_exchange(
        notes_kb,
        [
            _rpc(1, "initialize", init),
            _rpc(None, "notifications/initialized", {}),
            _rpc(2, "tools/call", call),
        ],
        2,
        "--max-response-chars",
        "2000",
    )
    assert [m["id"] for m in messages] == [1, 2]
    result = messages[1]["result"]
    assert result["structuredContent"]["results"][0]["path"] == "notes/ja.md"
    # The budget given on the command line reaches the server, and truncation is explicit.
    assert len(result["content"][0]["text"]) <= 2000
    assert result["structuredContent"]["truncated"] is True
    assert b"event='search'" in err


def test_serve_refuses_a_bad_configuration_clearly(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "groove.toml").write_text("[search]\nlimt = 3\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, *serve_args(kb)], env=ENV, capture_output=True, timeout=30, text=True
    )
    assert proc.returncode == 1
    assert "unknown key 'search.limt'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize(
    ("level", "shown", "hidden"),
    [
        ("debug", ["level='warning'", "event='serving'"], []),
        ("warning", ["level='warning'"], ["event='serving'"]),
        ("error", [], ["level='warning'", "event='serving'"]),
    ],
)
def test_serve_honours_the_log_level(
    tmp_path: Path, level: str, shown: list[str], hidden: list[str]
) -> None:
    """--log-level holds for the whole run (it was once reset to info as the KB opened)."""
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "groove.toml").write_text('[embedder]\nname = "hashing"\n', encoding="utf-8")
    proc = subprocess.run(  # not indexed: a warning, then the info line "serving"
        [sys.executable, *serve_args(kb, "--log-level", level)],
        env=ENV,
        stdin=subprocess.DEVNULL,  # end of input: the stdio server stops
        capture_output=True,
        timeout=60,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    for text in shown:
        assert text in proc.stderr
    for text in hidden:
        assert text not in proc.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def http_server(notes_kb: Path) -> Iterator[str]:
    open_kb(notes_kb)
    port = _free_port()
    args = serve_args(notes_kb, "--transport", "http", "--host", "127.0.0.1", "--port", str(port))
    proc = subprocess.Popen(
        [sys.executable, *args], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        wait_until_listening(proc, port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_concurrent_http_clients_all_succeed(http_server: str) -> None:
    queries = ["reciprocal rank fusion", "再ランキングの評価", "rust -async", "全文検索"]

    async def one_client(n: int) -> list[bool]:
        async with Client(http_server) as client:
            outcomes = []
            for i in range(10):
                query = queries[(n + i) % len(queries)]
                result = await client.call_tool("search", {"query": query, "limit": 3})
                outcomes.append(not result.is_error and bool(result.structured_content["results"]))
            return outcomes

    async def scenario() -> list[list[bool]]:
        return list(await asyncio.gather(*(one_client(n) for n in range(4))))

    outcomes = asyncio.run(scenario())
    assert [len(o) for o in outcomes] == [10] * 4
    assert all(all(o) for o in outcomes)
