"""The MCP server in process (``mcp.Client(server)``): tools, errors, safety, the size budget,
plugins, and searching while another process indexes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, TypeVar

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult

from groove_core.app import Groove
from groove_core.context import LegSpec, QueryContext, SearchOption
from groove_core.hookspecs import hookimpl
from groove_core.mcp.budget import fit_search
from groove_core.mcp.server import build_mcp_server
from groove_core.plugins import list_plugins
from groove_core.testing import call_tools, drive_mcp, make_kb, open_kb
from groove_core.tool_app import ToolApp

T = TypeVar("T")

CORE_TOOLS = {"search", "get_document", "list_documents", "index_status", "related"}


def ok(result: CallToolResult) -> dict[str, Any]:
    """The structured payload of a successful call, checked against its JSON text."""
    assert not result.is_error, result.content
    text = result.content[0].text  # type: ignore[union-attr]
    assert json.loads(text) == result.structured_content
    assert result.structured_content is not None
    return result.structured_content


def error_text(result: CallToolResult) -> str:
    assert result.is_error, result.structured_content
    return result.content[0].text  # type: ignore[union-attr]


def tool_schemas(server: MCPServer) -> dict[str, Any]:
    async def scenario(client: Client) -> dict[str, Any]:
        return {t.name: t for t in (await client.list_tools()).tools}

    return drive_mcp(server, scenario)


# -- the tools ---------------------------------------------------------------------------


def test_tools_have_descriptions_and_typed_schemas(notes_kb: Path) -> None:
    tools = tool_schemas(build_mcp_server(open_kb(notes_kb)))
    assert set(tools) >= CORE_TOOLS
    for name in CORE_TOOLS:
        assert len(tools[name].description) > 100, name
        assert tools[name].output_schema["type"] == "object", name
    search = tools["search"]
    props = search.input_schema["properties"]
    assert search.input_schema["required"] == ["query"]
    assert props["limit"]["type"] == "integer" and props["limit"]["minimum"] == 1
    for word in ('"quoted phrase"', "-word", "3+ characters", "low_confidence", "truncated"):
        assert word in search.description
    assert {"results", "low_confidence", "filter_applied", "truncated"} <= set(
        search.output_schema["properties"]
    )


@pytest.mark.parametrize(
    ("query", "path"),
    [("reciprocal rank fusion", "guide/search.md"), ("再ランキングの評価について", "notes/ja.md")],
)
def test_search_returns_the_same_results_as_the_app(notes_kb: Path, query: str, path: str) -> None:
    app = open_kb(notes_kb)
    [result] = call_tools(build_mcp_server(app), ("search", {"query": query, "limit": 3}))
    payload = ok(result)
    expected = app.search(query, limit=3).to_json()
    assert payload["results"] == expected["results"]
    assert payload["results"][0]["path"] == path
    assert payload["truncated"] is False
    assert payload["omitted_results"] == 0


def test_search_filters_reach_the_pipeline(notes_kb: Path) -> None:
    server = build_mcp_server(open_kb(notes_kb))
    by_path, by_tag = call_tools(
        server,
        ("search", {"query": "rust ownership search", "path": "guide/**"}),
        ("search", {"query": "python", "tags": ["SETUP"]}),
    )
    assert {h["path"] for h in ok(by_path)["results"]} <= {"guide/install.md", "guide/search.md"}
    assert ok(by_path)["filter_applied"] == {"path": "guide/**"}
    assert {h["path"] for h in ok(by_tag)["results"]} == {"guide/install.md"}


def test_get_document_whole_range_and_chunk_neighbourhood(notes_kb: Path) -> None:
    app = open_kb(notes_kb)
    hit = app.search("所有権 Ownership rules", limit=5, path="notes/rust.md").results[0]
    whole, lines, around = call_tools(
        build_mcp_server(app),
        ("get_document", {"path": "notes/ja.md"}),
        ("get_document", {"path": "notes/ja.md", "start_line": 5, "end_line": 5}),
        ("get_document", {"path": "notes/rust.md", "chunk_id": hit.chunk_id, "neighbours": 0}),
    )
    text = (notes_kb / "notes/ja.md").read_text(encoding="utf-8")
    doc = ok(whole)
    assert doc["content"] == text
    assert (doc["title"], doc["indexed"], doc["changed_since_index"]) == (
        "再ランキングの評価",
        True,
        False,
    )
    assert ok(lines)["content"] == text.splitlines(keepends=True)[4]
    chunk = ok(around)
    assert (chunk["line_start"], chunk["line_end"]) == (hit.line_start, hit.line_end)
    assert hit.heading in chunk["content"]


def test_get_document_serves_files_not_indexed_yet_and_flags_edits(notes_kb: Path) -> None:
    server = build_mcp_server(open_kb(notes_kb))
    (notes_kb / "notes/new.md").write_text("# 新規\n\nまだ索引にない。\n", encoding="utf-8")
    with (notes_kb / "notes/rust.md").open("a", encoding="utf-8") as f:
        f.write("\nedited after indexing\n")
    new, edited = call_tools(
        server,
        ("get_document", {"path": "./notes/new.md"}),
        ("get_document", {"path": "notes/rust.md"}),
    )
    assert (ok(new)["indexed"], ok(new)["title"], ok(new)["path"]) == (False, None, "notes/new.md")
    assert ok(edited)["changed_since_index"] is True
    assert ok(edited)["content"].endswith("edited after indexing\n")


def test_list_documents_filters_and_pages(notes_kb: Path) -> None:
    server = build_mcp_server(open_kb(notes_kb))
    first, second, tagged, japanese = call_tools(
        server,
        ("list_documents", {"limit": 3}),
        ("list_documents", {"limit": 3, "offset": 3}),
        ("list_documents", {"tags": ["Lang"]}),
        ("list_documents", {"path_prefix": "notes/ja"}),
    )
    page1, page2 = ok(first), ok(second)
    paths = [d["path"] for d in page1["documents"] + page2["documents"]]
    assert paths == sorted(["guide/install.md", "guide/search.md", "notes/ja.md", "notes/rust.md"])
    assert (page1["next_offset"], page2["next_offset"], page1["total"]) == (3, None, 4)
    assert [d["path"] for d in ok(tagged)["documents"]] == ["notes/rust.md"]
    assert ok(japanese)["documents"][0]["title"] == "再ランキングの評価"


def test_index_status_reports_changes_on_disk(notes_kb: Path) -> None:
    app = open_kb(notes_kb)
    server = build_mcp_server(app)
    [fresh] = call_tools(server, ("index_status", {}))
    status = ok(fresh)
    assert (status["documents"], status["embedder"]["name"]) == (4, "hashing")
    assert status["changes_on_disk"]["up_to_date"] is True
    assert status["last_indexed"] is not None
    (notes_kb / "notes/new.md").write_text("# 新しいノート\n", encoding="utf-8")
    (notes_kb / "guide/search.md").write_text("# Searching\n\nchanged\n", encoding="utf-8")
    (notes_kb / "notes/rust.md").unlink()
    changes = ok(call_tools(server, ("index_status", {}))[0])["changes_on_disk"]
    assert changes["up_to_date"] is False
    assert (changes["added"], changes["modified"], changes["deleted"]) == (
        ["notes/new.md"],
        ["guide/search.md"],
        ["notes/rust.md"],
    )


# -- bad calls ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"query": "-rust"}, "invalid query"),
        ({"query": "rust", "limit": -1}, "invalid argument for search: 'limit' must be at least 1"),
        ({"query": "rust", "limit": 0}, "'limit' must be at least 1"),
        ({"query": "rust", "limit": "ten"}, "'limit' must be a whole number"),
        ({"query": 42}, "'query' must be a string"),
        ({"query": ""}, "at least 1 character"),
        ({"query": "rust", "tags": "setup"}, "'tags' must be a list"),
        ({"query": "rust", "lmit": 3}, "search takes no argument 'lmit'; its arguments: query,"),
        ({"limit": 3}, "query"),
    ],
)
def test_bad_search_calls_are_tool_errors_and_the_server_keeps_serving(
    notes_kb: Path, args: dict[str, Any], message: str
) -> None:
    bad, good = call_tools(
        build_mcp_server(open_kb(notes_kb)), ("search", args), ("search", {"query": "rust"})
    )
    assert message in error_text(bad)
    assert "pydantic" not in error_text(bad) and "\n" not in error_text(bad)
    assert ok(good)["results"]


def _hostile_kb(tmp_path: Path) -> Path:
    kb = make_kb(
        tmp_path / "kb",
        {
            "notes/a.md": "# A\n\ninside\n",
            "notes/plain.txt": "not markdown\n",
            ".git/notes.md": "# in git\n",
            "private/secret.md": "# ignored by config\n",
        },
        config='[embedder]\nname = "hashing"\n[index]\nignore = ["private/"]\n',
    )
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# outside the KB\n", encoding="utf-8")
    (kb / "notes/link-out.md").symlink_to(outside / "secret.md")
    (kb / "notes/dir-out").symlink_to(outside, target_is_directory=True)
    (kb / "notes/link-in.md").symlink_to(kb / "notes/a.md")
    return kb


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../outside/secret.md", "contains '..'"),
        ("notes/../../outside/secret.md", "contains '..'"),
        ("notes/../notes/a.md", "contains '..'"),
        ("/etc/passwd", "absolute path"),
        ("C:\\Windows\\win.ini", "absolute path"),
        ("~/notes.md", "absolute path"),
        ("notes\\a.md", "separator"),
        ("notes/link-out.md", "outside the knowledge base"),
        ("notes/dir-out/secret.md", "outside the knowledge base"),
        (".groove/index.sqlite", "never serves"),
        (".git/notes.md", "never serves"),
        ("private/secret.md", "ignore pattern"),
        ("notes/plain.txt", "files are served"),
        ("notes/missing.md", "no file"),
        ("", "path is empty"),
        # Encoded and look-alike variants are names, never decoded into a way out.
        ("%2e%2e/outside/secret.md", "no file"),
        ("..%2Foutside%2Fsecret.md", "no file"),
        ("\uff0e\uff0e/outside/secret.md", "no file"),
        ("notes/\u2024\u2024/outside/secret.md", "no file"),
        ("notes/a.md\x00.txt", "NUL"),
    ],
)
def test_get_document_never_reads_outside_the_kb(tmp_path: Path, path: str, message: str) -> None:
    kb = _hostile_kb(tmp_path)
    bad, good = call_tools(
        build_mcp_server(open_kb(kb)),
        ("get_document", {"path": path}),
        ("get_document", {"path": "notes/link-in.md"}),
    )
    text = error_text(bad)
    assert message in text
    assert "outside the KB" not in text
    assert ok(good)["path"] == "notes/a.md"


def test_an_absolute_path_into_the_kb_is_refused_too(notes_kb: Path) -> None:
    [bad] = call_tools(
        build_mcp_server(open_kb(notes_kb)),
        ("get_document", {"path": str((notes_kb / "notes/ja.md").resolve())}),
    )
    assert "absolute path" in error_text(bad)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"path": "notes/ja.md", "start_line": 4, "end_line": 2}, "before start_line"),
        ({"path": "notes/ja.md", "start_line": 500}, "past the end"),
        ({"path": "notes/ja.md", "start_line": 0}, "'start_line' must be at least 1"),
        ({"path": "notes/ja.md", "chunk_id": 99999}, "no chunk 99999"),
        ({"path": "notes/ja.md", "chunk_id": 1, "start_line": 1}, "not both"),
        ({"path": "notes/ja.md", "neighbours": -1}, "'neighbours' must be at least 0"),
    ],
)
def test_bad_get_document_calls(notes_kb: Path, args: dict[str, Any], message: str) -> None:
    [bad] = call_tools(build_mcp_server(open_kb(notes_kb)), ("get_document", args))
    assert message in error_text(bad)


def test_a_chunk_of_another_file_is_refused(notes_kb: Path) -> None:
    app = open_kb(notes_kb)
    other = app.search("rust ownership", limit=1, path="notes/rust.md").results[0]
    [bad] = call_tools(
        build_mcp_server(app), ("get_document", {"path": "notes/ja.md", "chunk_id": other.chunk_id})
    )
    assert "belongs to 'notes/rust.md'" in error_text(bad)


def test_no_index_is_a_clear_tool_error(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", {"a.md": "# A\n"})
    [bad] = call_tools(
        build_mcp_server(open_kb(kb, index=False)), ("search", {"query": "anything"})
    )
    assert "run 'groove index'" in error_text(bad)


# -- the size budget ---------------------------------------------------------------------


def _long_kb(tmp_path: Path) -> Path:
    section = "Retrieval with reciprocal rank fusion keeps both legs useful. " * 12
    files = {
        f"docs/d{i:02}.md": f"# Doc {i}\n\n## Fusion {i}\n\n{section}\n\n## More {i}\n\n{section}\n"
        for i in range(12)
    }
    return make_kb(tmp_path / "kb", files)


def test_search_truncation_is_explicit_and_keeps_the_best_results(tmp_path: Path) -> None:
    app = open_kb(_long_kb(tmp_path))
    [result] = call_tools(
        build_mcp_server(app, max_response_chars=3000),
        ("search", {"query": "reciprocal rank fusion", "limit": 20}),
    )
    payload = ok(result)
    assert len(result.content[0].text) <= 3000  # type: ignore[union-attr]
    full = app.search("reciprocal rank fusion", limit=20).to_json()["results"]
    kept = payload["results"]
    assert payload["truncated"] is True
    assert 0 < len(kept) < len(full)
    assert kept == full[: len(kept)]
    assert payload["omitted_results"] == len(full) - len(kept)
    assert str(payload["omitted_results"]) in payload["note"]


def test_one_hit_larger_than_the_budget_is_cut_and_says_so() -> None:
    content = "長い本文。" * 2000 + "match"
    tail = len(content.encode())
    hit = {"path": "a.md", "content": content, "match_spans": [[0, 3], [tail - 5, tail]]}
    payload = {"results": [hit], "low_confidence": False, "filter_applied": None}
    out = fit_search(payload, 2000)
    [kept] = out["results"]
    assert len(json.dumps(out, ensure_ascii=False, separators=(",", ":"))) <= 2000
    assert kept["content_truncated"] is True
    assert content.startswith(kept["content"]) and len(kept["content"]) > 1000
    assert out["omitted_chars"] == len(content) - len(kept["content"])
    assert kept["match_spans"] == [[0, 3]]
    assert (out["truncated"], out["omitted_results"]) == (True, 0)


def test_get_document_pages_through_a_file_larger_than_the_budget(tmp_path: Path) -> None:
    body = "".join(f"{i}行目: 検索システムの説明 line {i}\n" for i in range(1, 400))
    kb = make_kb(tmp_path / "kb", {"big.md": "# 大きな文書\n\n" + body})
    server = build_mcp_server(open_kb(kb), max_response_chars=2500)

    async def scenario(client: Client) -> list[dict[str, Any]]:
        pages, start = [], 1
        while start is not None:
            page = ok(
                await client.call_tool("get_document", {"path": "big.md", "start_line": start})
            )
            pages.append(page)
            start = page["next_start_line"]
        return pages

    pages = drive_mcp(server, scenario)
    assert len(pages) > 3
    assert all(p["truncated"] and p["omitted_chars"] > 0 for p in pages[:-1])
    assert "".join(p["content"] for p in pages) == (kb / "big.md").read_text(encoding="utf-8")


def test_list_documents_truncates_a_page_to_the_budget(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", {f"n/{i:03}.md": f"# ノート {i}\n\ntext\n" for i in range(120)})
    [result] = call_tools(
        build_mcp_server(open_kb(kb), max_response_chars=2000), ("list_documents", {"limit": 120})
    )
    page = ok(result)
    assert page["truncated"] is True
    assert 0 < len(page["documents"]) < 120
    assert page["next_offset"] == len(page["documents"])


def test_the_budget_has_a_floor_and_the_cli_agrees(notes_kb: Path) -> None:
    from groove_core.cli import serve

    with pytest.raises(ValueError, match="at least 2000"):
        build_mcp_server(open_kb(notes_kb), max_response_chars=500)
    option = next(p for p in serve.serve_cmd.params if p.name == "max_response_chars")
    assert option.default == 40_000
    assert getattr(option.type, "min", None) == 2000


# -- plugins -----------------------------------------------------------------------------


class EchoPlugin:
    """A test plugin: one search switch, one tool of its own; remembers the options it saw."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.app: Any = None

    @hookimpl
    def groove_search_options(self) -> list[SearchOption]:
        return [SearchOption("echo_level", "int", "How loud the echo is.")]

    @hookimpl
    def groove_legs(self) -> list[LegSpec]:
        return [LegSpec("echo", "other", self.search)]

    def search(self, ctx: QueryContext) -> None:
        self.seen.append(dict(ctx.options))

    @hookimpl
    def groove_mcp_tools(self, server: Any, app: ToolApp) -> None:
        self.app = app

        @server.tool(description="Count the indexed documents under a path prefix.")
        def count_documents(prefix: str = "") -> int:
            # A sync tool: it runs on a worker thread, so the store is usable.
            return sum(1 for d in app.store.documents() if d.path.startswith(prefix))

        @server.tool(description="The first hit's path.")
        def first_hit(query: str) -> str:
            return app.search(query, limit=1).results[0].path


def test_a_plugin_adds_a_search_parameter_and_a_tool(notes_kb: Path) -> None:
    echo = EchoPlugin()
    app = open_kb(notes_kb, extra_plugins=[("echo", echo)], entry_points=False)
    server = build_mcp_server(app)
    tools = tool_schemas(server)
    assert set(tools) == {*CORE_TOOLS, "count_documents", "first_hit"}
    param = tools["search"].input_schema["properties"]["echo_level"]
    assert "How loud the echo is." in param["description"]
    plain, loud, bad, counted = call_tools(
        server,
        ("search", {"query": "rust"}),
        ("search", {"query": "rust", "echo_level": 3}),
        ("search", {"query": "rust", "echo_level": "loud"}),
        ("count_documents", {"prefix": "notes/"}),
    )
    ok(plain), ok(loud)
    assert echo.seen == [{}, {"echo_level": 3}]
    assert "'echo_level' must be a whole number" in error_text(bad)
    assert not counted.is_error
    assert counted.structured_content == {"result": 2}
    [hit] = call_tools(server, ("first_hit", {"query": "rust ownership"}))
    assert hit.structured_content == {"result": "notes/rust.md"}


def test_a_plugins_tools_see_the_knowledge_base_not_the_application(notes_kb: Path) -> None:
    """groove_mcp_tools gets a ToolApp: root, config, settings, search, store; no more."""
    echo = EchoPlugin()
    app = open_kb(notes_kb, extra_plugins=[("echo", echo)], entry_points=False)
    build_mcp_server(app)
    given = echo.app
    assert given.kb == app.kb
    assert given.config is app.config
    assert given.settings is app.plugins.settings
    for member in ("plugins", "index", "doctor", "embedder", "close"):
        assert not hasattr(given, member), member


def test_a_disabled_plugin_contributes_nothing(notes_kb: Path) -> None:
    config = '[embedder]\nname = "hashing"\n[plugins]\ndisabled = ["echo"]\n'
    (notes_kb / "groove.toml").write_text(config, encoding="utf-8")
    app = open_kb(notes_kb, extra_plugins=[("echo", EchoPlugin())], entry_points=False)
    tools = tool_schemas(build_mcp_server(app))
    assert set(tools) == CORE_TOOLS
    assert "echo_level" not in tools["search"].input_schema["properties"]


def test_the_tool_list_agrees_with_groove_plugins_list(notes_kb: Path) -> None:
    """With the installed plugins: every enabled plugin's search options are parameters,
    but for those a client cannot use with this configuration (the reranker's, with no
    model configured): those are refused by name, with why."""
    app = Groove.open(notes_kb)
    infos, problem = list_plugins(app.config)
    assert problem is None
    enabled = {i.name for i in infos if i.status == "enabled"}
    unusable = {"rerank", "reranker"} & {o.name for o in app.plugins.search_options()}
    expected = {o.name for o in app.plugins.search_options() if o.plugin in enabled} - unusable
    server = build_mcp_server(app)
    params = set(tool_schemas(server)["search"].input_schema["properties"])
    assert params == {"query", "limit", "path", "tags", *expected}
    for name in unusable:
        [refused] = call_tools(server, ("search", {"query": "rust", name: True}))
        assert refused.is_error and f"argument {name!r} of search cannot be used" in (
            error_text(refused)
        )


# -- concurrent indexing -----------------------------------------------------------------


def test_searches_succeed_while_another_process_indexes(notes_kb: Path) -> None:
    kb = notes_kb
    # Three chunks a note (no merging of its small sections): an index run long enough
    # for searches to overlap it.
    config = '[embedder]\nname = "hashing"\nbatch_size = 4\n[index]\nmin_section_tokens = 0\n'
    (kb / "groove.toml").write_text(config, encoding="utf-8")
    app = open_kb(kb)
    for i in range(240):
        (kb / f"bulk/n{i:03}.md").parent.mkdir(exist_ok=True)
        (kb / f"bulk/n{i:03}.md").write_text(
            f"# 追加ノート {i}\n\n## 概要\n\nバルク索引のテスト文書 {i}.\n\n## 詳細\n\nmore {i}\n",
            encoding="utf-8",
        )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "groove_core", "index", str(kb), "--json"]

    async def scenario(client: Client) -> tuple[list[int], int]:
        counts, searches = [], 0
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            while proc.poll() is None:
                ok(await client.call_tool("search", {"query": "バルク索引のテスト reciprocal"}))
                status = ok(await client.call_tool("index_status", {}))
                counts.append(status["documents"])
                searches += 1
        finally:
            _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
        final = ok(await client.call_tool("search", {"query": "バルク索引のテスト文書 239"}))
        assert any(h["path"].startswith("bulk/") for h in final["results"])
        return counts, searches

    counts, searches = drive_mcp(build_mcp_server(app), scenario)
    assert searches >= 3
    assert any(4 < n < 244 for n in counts), f"no search overlapped the index run: {counts}"


def test_index_status_names_no_machine_path(notes_kb: Path) -> None:
    status = ok(call_tools(build_mcp_server(open_kb(notes_kb)), ("index_status", {}))[0])
    assert status["kb"] == notes_kb.name
    assert status["index_file"] == ".groove/index.sqlite"
    assert str(notes_kb.parent) not in json.dumps(status)
