"""Named knowledge bases, subfolder discovery, and searching and serving several KBs.

The registry is a real file in a temporary config folder (``GROOVE_CONFIG_HOME``); the
commands run through the real CLI; MCP goes through the SDK's real client.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from groove_core.cli import build_cli
from groove_core.config import ConfigError
from groove_core.hookspecs import hookimpl
from groove_core.mcp.server import build_mcp_server
from groove_core.multi_kb import NamedKb, open_kbs, search_kbs
from groove_core.registry import CONFIG_HOME_ENV, load_registry, registry_path
from groove_core.testing import FAST_CONFIG, call_tools, drive_mcp, make_kb, open_kb
from groove_core.tool_app import ToolApp

NOTES = {
    "notes/rust.md": "# Rust\n\nOwnership rules prevent data races in async runtimes.\n",
    "notes/python.md": "# Python\n\nInstall Python with a virtual environment.\n",
}
HANDBOOK = {
    "guide/search.md": "# Searching\n\nResults are fused with reciprocal rank fusion.\n",
    "notes/rust.md": "# Onboarding\n\n新しいメンバーの受け入れ手順について説明する。\n",
}


@pytest.fixture(autouse=True)
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "config"
    monkeypatch.setenv(CONFIG_HOME_ENV, str(home))
    return home


@pytest.fixture(scope="module")
def two_kbs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("several")
    a = make_kb(root / "notes", NOTES)
    b = make_kb(
        root / "handbook",
        HANDBOOK,
        config=FAST_CONFIG + '\n[kb]\nname = "handbook"\ndescription = "The team handbook"\n',
    )
    open_kb(a).close()
    open_kb(b).close()
    return a, b


def groove(*args: str) -> Any:
    return CliRunner().invoke(build_cli(None), list(args), catch_exceptions=False)


# -- the registry ------------------------------------------------------------------------


def test_add_list_remove(two_kbs: tuple[Path, Path], config_home: Path) -> None:
    a, b = two_kbs
    assert groove("kb", "add", "notes", str(a), "--description", "My notes").exit_code == 0
    assert groove("kb", "add", "hb", str(b)).exit_code == 0
    assert registry_path() == config_home / "kbs.json"
    listed = json.loads(groove("kb", "list", "--json").output)["kbs"]
    assert [(k["name"], k["description"], k["indexed"]) for k in listed] == [
        ("hb", "The team handbook", True),  # from [kb] description of its groove.toml
        ("notes", "My notes", True),
    ]
    assert groove("kb", "list").output.splitlines()[0].startswith("hb ")
    assert groove("kb", "remove", "hb").exit_code == 0
    assert list(load_registry()) == ["notes"]
    assert not list(config_home.glob(".kbs.*"))  # the temporary file was renamed in place


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("kb", "add", "../x", "."), "invalid knowledge base name"),
        (("kb", "add", "x", "/no/such/folder"), "does not exist or is not a folder"),
        (("kb", "remove", "nobody"), "no knowledge base named 'nobody'"),
        (("search", "x", "--all"), "no knowledge base is registered"),
    ],
)
def test_registry_errors_are_one_clear_line(args: tuple[str, ...], message: str) -> None:
    result = CliRunner().invoke(build_cli(None), list(args))
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


def test_adding_a_taken_name_is_refused(two_kbs: tuple[Path, Path]) -> None:
    a, b = two_kbs
    groove("kb", "add", "notes", str(a))
    result = CliRunner().invoke(build_cli(None), ["kb", "add", "notes", str(b)])
    assert result.exit_code == 1
    assert "already registered" in result.output
    assert load_registry()["notes"].path == a.resolve()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "cannot read the registry"),
        ("[" * 200_000, "nested too deeply"),  # json recurses: once a RecursionError
        ('{"kbs": {"../x": {"path": "/"}}}', "invalid knowledge base name"),
        ('{"kbs": {"a": {"path": "/", "description": "' + "d" * 600 + '"}}}', "too long"),
    ],
    ids=["not-json", "deep", "bad-name", "long-description"],
)
def test_a_damaged_registry_is_reported(config_home: Path, text: str, message: str) -> None:
    config_home.mkdir()
    (config_home / "kbs.json").write_text(text, encoding="utf-8")
    result = CliRunner().invoke(build_cli(None), ["kb", "list"])
    assert result.exit_code == 1, result.output
    assert message in result.output


@pytest.mark.parametrize("args", [("kb", "list"), ("kb", "add", "x", ".")])
def test_a_fifo_at_the_registry_path_is_an_error_not_a_hang(
    config_home: Path, tmp_path: Path, args: tuple[str, ...]
) -> None:
    config_home.mkdir()
    os.mkfifo(config_home / "kbs.json")
    # A subprocess with a timeout: the bug this guards against blocks the reading process.
    env = {**os.environ, CONFIG_HOME_ENV: str(config_home)}
    result = subprocess.run(
        [sys.executable, "-m", "groove_core", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=30,
    )
    assert result.returncode == 1
    assert result.stderr.strip().endswith(
        "is not a regular file (a FIFO): remove it, and 'groove kb add' writes a new one"
    )
    assert len(result.stderr.strip().splitlines()) == 1
    assert (config_home / "kbs.json").is_fifo()  # left for the user to look at


def test_a_held_registry_lock_is_waited_for_then_named(
    two_kbs: tuple[Path, Path], config_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = two_kbs
    monkeypatch.setattr("groove_core.registry.LOCK_WAIT_SECONDS", 0.3, raising=False)
    config_home.mkdir()
    with open(config_home / "kbs.json.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        result = CliRunner().invoke(build_cli(None), ["kb", "add", "notes", str(a)])
    assert result.exit_code == 1
    assert "locked by another groove command" in result.output
    assert "notes" not in load_registry()
    assert groove("kb", "add", "notes", str(a)).exit_code == 0  # released: it goes through


def test_kb_accepts_a_registered_name(two_kbs: tuple[Path, Path]) -> None:
    a, _ = two_kbs
    groove("kb", "add", "notes", str(a))
    out = json.loads(groove("search", "ownership data races", "--kb", "notes", "--json").output)
    assert out["results"][0]["path"] == "notes/rust.md"
    assert "kb" not in out["results"][0]  # one KB: the output is as before


# -- subfolders --------------------------------------------------------------------------


def test_a_command_in_a_subfolder_uses_the_kb_above(
    two_kbs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = two_kbs
    monkeypatch.chdir(a / "notes")
    out = groove("search", "ownership data races", "--json").output
    assert json.loads(out)["results"][0]["path"] == "notes/rust.md"
    assert not (a / "notes" / ".groove").exists()  # no second, nested index


def test_indexing_a_subfolder_is_refused_naming_the_kb(two_kbs: tuple[Path, Path]) -> None:
    a, _ = two_kbs
    result = CliRunner().invoke(build_cli(None), ["index", str(a / "notes")])
    assert result.exit_code == 1
    assert f"inside the indexed knowledge base {a.resolve()}" in result.output
    assert not (a / "notes" / ".groove").exists()


# -- searching several -------------------------------------------------------------------


def test_search_several_names_each_hit_kb(two_kbs: tuple[Path, Path]) -> None:
    a, b = two_kbs
    groove("kb", "add", "notes", str(a))
    out = groove("search", "rank fusion ownership", "--kb", "notes", "--kb", str(b), "--json")
    hits = json.loads(out.output)["results"]
    assert {h["kb"] for h in hits} == {"notes", "handbook"}
    assert [h["rank"] for h in hits] == list(range(1, len(hits) + 1))
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    groove("kb", "add", "hb", str(b))
    human = groove("search", "reciprocal rank fusion", "--all").output
    assert "[hb] guide/search.md" in human  # the registered name, over [kb] name
    assert "[notes] notes/" in human


def test_the_merge_ranks_as_one_index_would(two_kbs: tuple[Path, Path], tmp_path: Path) -> None:
    """The same files in one KB and in two: the same documents come first."""
    a, b = two_kbs
    both = make_kb(
        tmp_path / "both",
        {**{f"a/{k}": v for k, v in NOTES.items()}, **{f"b/{k}": v for k, v in HANDBOOK.items()}},
    )
    one = open_kb(both)
    kbs = open_kbs([a, b])
    for query in ("reciprocal rank fusion", "受け入れ手順", "virtual environment python"):
        merged = search_kbs(kbs, query, limit=1).results[0]
        single = one.search(query, limit=1).results[0]
        prefix = "a/" if merged.kb == "notes" else "b/"
        assert prefix + merged.hit.path == single.path, query


def test_merged_scores_are_on_one_kbs_scale(two_kbs: tuple[Path, Path], tmp_path: Path) -> None:
    """A hit holding every leg's best of all KBs scores as its KB alone scores it, so that
    --min-score means the same with one KB or several (issue #44's walk, finding 7); a KB
    fusing by RRF makes the merge RRF's."""
    a, b = two_kbs
    kbs = open_kbs([a, b])
    alone = open_kb(b, index=False)
    query = "reciprocal rank fusion"
    merged = search_kbs(kbs, query, limit=3).results
    single = alone.search(query, limit=1).results[0]
    assert (merged[0].kb, merged[0].hit.path) == ("handbook", single.path)
    assert merged[0].hit.score == pytest.approx(single.score)
    assert merged[0].hit.score > 1.0  # RRF's scores stay under 0.1
    rrf = make_kb(tmp_path / "rrf", NOTES, config=FAST_CONFIG + '[search.fusion]\nmethod = "rrf"\n')
    open_kb(rrf).close()
    mixed = search_kbs(open_kbs([rrf, b]), query, limit=3).results
    assert mixed[0].hit.path == single.path and mixed[0].hit.score < 0.1


def test_kbs_with_different_embedders_are_not_searched_together(
    two_kbs: tuple[Path, Path],
) -> None:
    """The KBs of the embedder most use (the first one's on a tie) are searched; each
    other is named in a warning, not a failure of the whole search (issue #44)."""
    from groove_core.embedding import HashingEmbedder

    kbs = open_kbs(list(two_kbs))
    kbs[1].app.__dict__["embedder"] = HashingEmbedder(dim=32)  # another identity
    found = search_kbs(kbs, "rank fusion")
    assert found.results and {h.kb for h in found.results} == {kbs[0].name}
    [warning] = [w for w in found.warnings if "not searched" in w]
    assert warning.startswith(f"{kbs[1].name}: not searched: it uses another embedder")
    assert "--reembed" in warning
    with pytest.raises(ConfigError, match="must use the same embedder"):
        build_mcp_server(kbs)


def test_a_kb_without_an_index_is_left_out_with_a_warning(
    two_kbs: tuple[Path, Path], tmp_path: Path
) -> None:
    fresh = make_kb(tmp_path / "fresh", NOTES)  # never indexed
    a, b = two_kbs
    result = CliRunner().invoke(
        build_cli(None), ["search", "rank fusion", "--kb", str(a), "--kb", str(b), "--kb",
                          str(fresh), "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["results"] and {h["kb"] for h in payload["results"]} <= {"notes", "handbook"}
    assert any(w.startswith("fresh: not searched: no index") for w in payload["warnings"])
    # Nothing at all to search is still an error, naming each KB and why.
    alone = open_kbs([fresh])
    with pytest.raises(ConfigError, match="no knowledge base could be searched: fresh: "):
        search_kbs(alone, "rank fusion")


def test_two_kbs_with_one_name_are_refused(two_kbs: tuple[Path, Path], tmp_path: Path) -> None:
    _, b = two_kbs
    twin = make_kb(tmp_path / "handbook", NOTES)
    with pytest.raises(ConfigError, match="both called 'handbook'"):
        open_kbs([b, twin])


# -- serving several ---------------------------------------------------------------------


def test_mcp_serves_two_kbs(two_kbs: tuple[Path, Path]) -> None:
    kbs = open_kbs(list(two_kbs))
    server = build_mcp_server(kbs)

    async def scenario(client: Any) -> Any:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        return tools, client.server_info if hasattr(client, "server_info") else None

    tools, _ = drive_mcp(server, scenario)
    schema = tools["search"].input_schema
    assert "kb" not in schema.get("required", [])
    assert json.dumps(schema["properties"]["kb"]).count("handbook") >= 1
    assert "kb" in tools["get_document"].input_schema["required"]
    assert "kb" in tools["list_documents"].input_schema["required"]
    everywhere, only_notes, doc, listing, bad, no_kb = call_tools(
        server,
        ("search", {"query": "rank fusion ownership", "limit": 5}),
        ("search", {"query": "rank fusion ownership", "kb": "notes"}),
        ("get_document", {"kb": "handbook", "path": "notes/rust.md"}),
        ("list_documents", {"kb": "notes"}),
        ("get_document", {"kb": str(two_kbs[0]), "path": "notes/rust.md"}),
        ("list_documents", {}),
    )
    hits = everywhere.structured_content["results"]
    assert {h["kb"] for h in hits} == {"notes", "handbook"}
    assert {h["kb"] for h in only_notes.structured_content["results"]} == {"notes"}
    assert "受け入れ" in doc.structured_content["content"]  # the handbook's file of that path
    assert [d["path"] for d in listing.structured_content["documents"]] == sorted(NOTES)
    assert bad.is_error and no_kb.is_error  # a path is not a served name; kb is required
    assert "'notes' or 'handbook'" in bad.content[0].text  # the error names what is served


def test_the_instructions_list_each_kb(two_kbs: tuple[Path, Path]) -> None:
    from groove_core.mcp.server import instructions

    text = instructions(open_kbs(list(two_kbs)))
    assert "- handbook: The team handbook" in text
    assert "- notes: (no description)" in text


class MeetingPlugin:
    """A plugin tool per KB: it counts the KB's documents, and meets a call on another KB
    at a barrier, which only two calls running at once get past."""

    def __init__(self, barrier: threading.Barrier) -> None:
        self.barrier = barrier

    @hookimpl
    def groove_mcp_tools(self, server: Any, app: ToolApp) -> None:
        @server.tool(description="Count the indexed documents under a path prefix.")
        def count_documents(prefix: str = "") -> int:
            return sum(1 for d in app.store.documents() if d.path.startswith(prefix))

        @server.tool(description="Wait for a call on another knowledge base.")
        def meet() -> str:
            self.barrier.wait()
            return app.kb.name


def _with_plugin(two_kbs: tuple[Path, Path], barrier: threading.Barrier) -> list[NamedKb]:
    kbs = []
    for folder in two_kbs:
        app = open_kb(folder, extra_plugins=[("meeting", MeetingPlugin(barrier))], index=False)
        kbs.append(NamedKb.of(app))
    return kbs


def test_plugin_tools_serve_every_kb(two_kbs: tuple[Path, Path]) -> None:
    server = build_mcp_server(_with_plugin(two_kbs, threading.Barrier(2, timeout=10)))

    async def scenario(client: Any) -> Any:
        return {t.name: t for t in (await client.list_tools()).tools}

    tools = drive_mcp(server, scenario)
    schema = tools["count_documents"].input_schema
    assert schema["required"] == ["kb"]
    assert schema["properties"]["kb"]["enum"] == ["notes", "handbook"]
    assert "prefix" in schema["properties"]
    notes, handbook, guide = call_tools(
        server,
        ("count_documents", {"kb": "notes"}),
        ("count_documents", {"kb": "handbook"}),
        ("count_documents", {"kb": "handbook", "prefix": "guide/"}),
    )
    assert notes.structured_content == {"result": len(NOTES)}
    assert handbook.structured_content == {"result": len(HANDBOOK)}
    assert guide.structured_content == {"result": 1}  # the second KB's own store


@pytest.mark.parametrize("readers", [None, 1])
def test_the_worker_pool_serves_every_kb(two_kbs: tuple[Path, Path], readers: int | None) -> None:
    """Two calls on two KBs run at once on the pool's workers; one worker runs one."""
    barrier = threading.Barrier(2, timeout=3)
    server = build_mcp_server(_with_plugin(two_kbs, barrier), readers=readers)

    async def scenario(client: Any) -> list[Any]:
        calls = [client.call_tool("meet", {"kb": kb}) for kb in ("notes", "handbook")]
        return list(await asyncio.gather(*calls))

    results = drive_mcp(server, scenario)
    if readers is None:  # the backend's default: two workers for SQLite
        assert [r.structured_content["result"] for r in results] == ["notes", "handbook"]
    else:
        assert all(r.is_error for r in results)  # the barrier broke: one call at a time


def test_index_status_names_the_kb_as_served(two_kbs: tuple[Path, Path]) -> None:
    a, b = two_kbs
    groove("kb", "add", "mine", str(a))
    notes, handbook = call_tools(
        build_mcp_server(open_kbs([a, b])),
        ("index_status", {"kb": "mine"}),
        ("index_status", {"kb": "handbook"}),
    )
    assert notes.structured_content["kb"] == "mine"  # the registered name, as served
    assert handbook.structured_content["kb"] == "handbook"
    [alone] = call_tools(build_mcp_server(open_kb(a, index=False)), ("index_status", {}))
    assert alone.structured_content["kb"] == "mine"
    assert alone.structured_content["documents"] == len(NOTES)


def test_cli_output_modes_work_across_kbs(two_kbs: tuple[Path, Path]) -> None:
    a, b = two_kbs
    both = ("--kb", str(a), "--kb", str(b))
    files = json.loads(groove("search", "rank fusion ownership", *both, "--files", "--json").output)
    assert {(f["kb"], f["path"]) for f in files["files"]} >= {
        ("notes", "notes/rust.md"),
        ("handbook", "guide/search.md"),
    }
    lines = groove("search", "rank fusion ownership", *both, "--files").output.splitlines()
    assert lines and all(Path(line).is_file() for line in lines)  # each KB's own file
    assert {str(a / "notes/rust.md"), str(b / "guide/search.md")} <= set(lines)
    out = json.loads(groove("search", "rank fusion", *both, "--explain", "--json").output)
    assert [e["kb"] for e in out["explain"]] == ["notes", "handbook"]
    assert all(e["legs"] and "ranks" in e for e in out["explain"])
    text = groove("search", "rank fusion", *both, "--explain").output
    assert "kb notes:" in text and "kb handbook:" in text
    full = groove("search", "reciprocal rank fusion", *both, "--full", "--limit", "1").output
    assert "Results are fused with reciprocal rank fusion." in full
    scored = json.loads(groove("search", "rank fusion", *both, "--json").output)["results"]
    cut = scored[0]["score"]
    kept = json.loads(
        groove("search", "rank fusion", *both, "--json", "--min-score", str(cut)).output
    )["results"]
    assert kept and all(h["score"] >= cut for h in kept) and len(kept) < len(scored)


def test_a_kb_inside_another_is_reported_and_its_files_listed_once(tmp_path: Path) -> None:
    """A parent folder registered beside a KB inside it: the parent's index holds the child's
    files too. Each passage is listed once, under the child's name, and the overlap is said."""
    parent = make_kb(tmp_path / "vault", {"top.md": "# Top\n\nGardening with tomatoes.\n"})
    child = make_kb(parent / "rust", {"rust.md": "# Rust\n\nRust ownership rules.\n"})
    open_kb(child).close()
    open_kb(parent).close()  # indexes child/rust.md as well
    groove("kb", "add", "child", str(child))
    groove("kb", "add", "parent", str(parent))
    out = groove("search", "rust ownership rules", "--all", "--json")
    assert out.exit_code == 0, out.output
    payload = json.loads(out.output)
    found = [(h["kb"], h["path"]) for h in payload["results"]]
    assert ("child", "rust.md") in found
    assert ("parent", "rust/rust.md") not in found
    assert len(found) == len(set(found))
    assert any("contains 'child'" in w for w in payload["warnings"])


# -- KBs named by their registered names (issue #44, item 4) ------------------------------


def test_status_doctor_and_warnings_name_a_kb_by_its_registered_name(tmp_path: Path) -> None:
    en = make_kb(tmp_path / "en", NOTES)
    vault = make_kb(tmp_path / "vault", HANDBOOK)  # never indexed
    open_kb(en).close()
    assert groove("kb", "add", "obs-en", str(en)).exit_code == 0
    assert groove("kb", "add", "obs-all", str(vault)).exit_code == 0
    status = groove("status", "--kb", "obs-en", "--kb", "obs-all").output
    assert f"knowledge base: obs-en ({en.resolve()})" in status
    assert f"knowledge base: obs-all ({vault.resolve()})" in status
    as_json = json.loads(groove("status", "obs-en", "--json").output)
    assert (as_json["name"], as_json["kb"]) == ("obs-en", str(en.resolve()))
    doctor = CliRunner().invoke(build_cli(None), ["doctor", "obs-all"])
    assert doctor.exit_code == 1
    assert f"the knowledge base 'obs-all' ({vault.resolve()}) has no index yet" in doctor.output
    assert "run 'groove index obs-all' first" in doctor.output
    found = json.loads(groove("search", "rust", "--all", "--json").output)
    [warning] = [w for w in found["warnings"] if "not searched" in w]
    assert warning.startswith("obs-all: not searched: no index at ")
    assert "for the knowledge base 'obs-all'" in warning
