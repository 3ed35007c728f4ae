"""A third-party MCP client: the MCP Inspector's CLI mode drives ``groove serve``.

The inspector is installed by ``scripts/install-inspector.sh`` into ``.cache/inspector/``.
Listing, a search and a refused call go over stdio (the inspector starts the server); the
Japanese/English call matrix goes to one streamable-HTTP server on 127.0.0.1, so that each
call starts node only, not node and a Python server.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from groove_core.testing import make_kb, open_kb, wait_until_listening

ROOT = Path(__file__).resolve().parents[1]
INSPECTOR = ROOT / ".cache/inspector/node_modules/.bin/mcp-inspector"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "NO_PROXY": "127.0.0.1"}

FILES = {
    "notes/ja.md": (
        "# 再ランキングの評価\n\nクロスエンコーダによる再ランキングの評価について説明する。\n\n"
        "## 検索システム\n\n全文検索とベクトル検索を組み合わせたシステムである。\n"
    ),
    "guide/search.md": (
        "---\ntags: [guide]\n---\n# Searching\n\nUse quoted phrases for exact matches.\n\n"
        "## Ranking\n\nResults are fused with reciprocal rank fusion across both legs.\n"
    ),
    "ノート/索引.md": (
        "---\ntags: [日本語]\n---\n# 索引の作り方\n\n見出しごとに分割して埋め込む。\n"
    ),
}


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_kb(tmp_path_factory.mktemp("inspector") / "kb", FILES)
    open_kb(root)
    return root


def stdio_target(kb: Path) -> list[str]:
    return [sys.executable, "-m", "groove_core", "serve", "--kb", str(kb)]


@pytest.fixture(scope="module")
def http_target(kb: Path) -> Iterator[list[str]]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    args = [*stdio_target(kb), "--transport", "http", "--port", str(port)]
    proc = subprocess.Popen(args, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until_listening(proc, port)
        yield [f"http://127.0.0.1:{port}/mcp"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def inspect_call(target: list[str], method: str, *args: str) -> dict[str, Any]:
    if not INSPECTOR.exists():
        pytest.fail(
            f"the MCP Inspector is not installed at {INSPECTOR}: run scripts/install-inspector.sh"
        )
    cmd = [str(INSPECTOR), "--cli", *target, "--method", method, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=ENV, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def tool_call(target: list[str], tool: str, **arguments: str) -> dict[str, Any]:
    pairs = [f"{k}={v}" for k, v in arguments.items()]
    args = ["--tool-name", tool, *(["--tool-arg", *pairs] if pairs else [])]
    return inspect_call(target, "tools/call", *args)


def test_tools_list_over_stdio(kb: Path) -> None:
    tools = {t["name"]: t for t in inspect_call(stdio_target(kb), "tools/list")["tools"]}
    assert {"search", "get_document", "list_documents", "index_status"} <= set(tools)
    assert all(t["description"] and t["outputSchema"] for t in tools.values())


#: (tool, arguments, check on the structured result): Japanese and English arguments each.
CALLS: list[tuple[str, dict[str, str], Any]] = [
    (
        "search",
        {"query": "再ランキングの評価について", "limit": "2"},
        lambda r: r["results"][0]["path"] == "notes/ja.md" and len(r["results"]) <= 2,
    ),
    (
        "search",
        {"query": "reciprocal rank fusion", "limit": "3", "tags": '["guide"]'},
        lambda r: {h["path"] for h in r["results"]} == {"guide/search.md"},
    ),
    (
        "get_document",
        {"path": "ノート/索引.md", "start_line": "4", "end_line": "4"},
        lambda r: r["content"] == "# 索引の作り方\n" and r["tags"] == ["日本語"],
    ),
    (
        "get_document",
        {"path": "guide/search.md"},
        lambda r: r["content"] == FILES["guide/search.md"] and r["title"] == "Searching",
    ),
    (
        "list_documents",
        {"path_prefix": "ノート/"},
        lambda r: [d["path"] for d in r["documents"]] == ["ノート/索引.md"],
    ),
    (
        "list_documents",
        {"tags": '["GUIDE"]', "limit": "5"},
        lambda r: [d["path"] for d in r["documents"]] == ["guide/search.md"],
    ),
    (
        "index_status",
        {},
        lambda r: r["documents"] == 3 and r["changes_on_disk"]["up_to_date"],
    ),
]


def test_search_over_stdio(kb: Path) -> None:
    result = tool_call(stdio_target(kb), "search", query="索引の作り方", limit="1")
    assert result["structuredContent"]["results"][0]["path"] == "ノート/索引.md"


def test_tools_call_with_japanese_and_english_arguments(http_target: list[str]) -> None:
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda c: tool_call(http_target, c[0], **c[1]), CALLS))
    for (tool, arguments, check), result in zip(CALLS, results, strict=True):
        assert not result.get("isError"), (tool, arguments, result)
        structured = result["structuredContent"]
        assert json.loads(result["content"][0]["text"]) == structured
        assert check(structured), (tool, arguments, structured)


def test_a_bad_call_is_a_tool_error_not_a_crash(kb: Path) -> None:
    result = tool_call(stdio_target(kb), "get_document", path="../../../etc/passwd")
    assert result["isError"] is True
    assert "contains '..'" in result["content"][0]["text"]


def test_two_kbs_served_by_one_server(kb: Path, tmp_path: Path) -> None:
    """``serve --kb A --kb B``: one search covers both, and each hit names its KB."""
    handbook = make_kb(
        tmp_path / "handbook",
        {"team/onboarding.md": "# 索引の作り方\n\n新しいメンバー向けの索引の作り方。\n"},
    )
    open_kb(handbook).close()
    target = [*stdio_target(kb), "--kb", str(handbook)]
    result = tool_call(target, "search", query="索引の作り方", limit="5")
    hits = result["structuredContent"]["results"]
    assert {(h["kb"], h["path"]) for h in hits[:2]} == {
        (kb.name, "ノート/索引.md"),
        ("handbook", "team/onboarding.md"),
    }
