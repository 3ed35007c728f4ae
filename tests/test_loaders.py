"""The loader hook: a plugin's loader makes a file type a note for the indexer, ``watch``,
``get``/``get_document`` and ``plugins list``; the built-in Markdown loader goes through the
same table, and an index of notes records what it always did."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from groove_core.app import Groove
from groove_core.cli.get import Target, read_target
from groove_core.config import Settings
from groove_core.hookspecs import hookimpl
from groove_core.kb_files import DocumentError, resolve_markdown
from groove_core.loaders import Anchor, Loaded, LoadError, LoaderSpec
from groove_core.mcp.server import build_mcp_server
from groove_core.plugins import list_plugins
from groove_core.testing import call_tools, make_kb, open_kb
from groove_core.watch import Watcher

#: A "paged text" file: plain text whose pages a form feed separates; it starts "PAGED".
MAGIC = b"PAGED\n"


class PagedText:
    """A real loader of a toy format: each page becomes a section, its start an anchor."""

    def __init__(self, version: str = "1") -> None:
        self.version = version
        self.loads = 0

    def load(self, data: bytes, rel: str, settings: Settings) -> Loaded:
        self.loads += 1
        body = data[len(MAGIC) :].decode("utf-8")
        if body.startswith("LOCKED"):
            raise LoadError("encrypted paged text")
        if body.startswith("BOOM"):
            raise RuntimeError("the library fell over\nwith a second line")
        lines: list[str] = [f"# {Path(rel).stem}\n", "\n"]
        anchors = []
        for number, page in enumerate(body.split("\f"), start=1):
            anchors.append(Anchor(len(lines) + 1, f"page={number}"))
            lines += [f"## Page {number}\n", "\n", page.strip() + "\n", "\n"]
        return Loaded("".join(lines), tuple(anchors), ("one page was blank",))

    @hookimpl
    def groove_loaders(self) -> list[LoaderSpec]:
        return [
            LoaderSpec(
                "paged",
                self.version,
                (".ptxt",),
                self.load,
                sniff=lambda head: head.startswith(MAGIC),
                description="paged text",
            )
        ]


def paged(*pages: str) -> bytes:
    return MAGIC + "\f".join(pages).encode()


FILES: dict[str, str | bytes] = {
    "note.md": "# Note\n\nA note about gardens.\n",
    "report.ptxt": paged("Intro about compost heaps.", "The zebra crossing rule."),
}


def _app(kb: Path, loader: PagedText | None = None, index: bool = True) -> Groove:
    return open_kb(kb, extra_plugins=[("paged", loader or PagedText())], index=index)


def _refusal(serve: Callable[[], object], what: str) -> str:
    """The message of the DocumentError with which ``serve`` refuses ``what``; a failure
    naming ``what`` when it is served instead."""
    try:
        serve()
    except DocumentError as err:
        return str(err)
    raise AssertionError(f"{what} was served")


def test_a_loaded_file_is_indexed_searched_and_served_by_page(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", FILES)
    app = _app(kb)
    top = app.search("zebra crossing", limit=1).results[0]
    assert top.path == "report.ptxt"
    assert "Page 2" in top.heading_path
    whole = read_target(app, Target(path="report.ptxt"), 0)
    assert whole["indexed"] and whole["title"] == "report"
    assert "compost" in whole["content"] and "zebra" in whole["content"]
    page = read_target(app, Target(path="report.ptxt#page=2"), 0)
    assert page["path"] == "report.ptxt"
    assert page["content"].startswith("## Page 2") and "compost" not in page["content"]
    (result,) = call_tools(build_mcp_server(app), ("get_document", {"path": "report.ptxt#page=1"}))
    served = json.loads(result.content[0].text)
    assert "compost" in served["content"] and "zebra" not in served["content"]


def test_a_part_keeps_the_line_numbers_its_hits_give(tmp_path: Path) -> None:
    """``report#page=2`` is served in the whole document's line numbers, as the search hit
    on it says them (issue #44: they were counted from the page)."""
    app = _app(make_kb(tmp_path / "kb", FILES))
    hit = app.search("zebra crossing", limit=1).results[0]
    page = read_target(app, Target(path="report.ptxt#page=2"), 0)
    assert page["line_start"] <= hit.line_start <= hit.line_end <= page["line_end"]
    whole = read_target(app, Target(path="report.ptxt"), 0)["content"].splitlines(True)
    assert page["content"] == "".join(whole[page["line_start"] - 1 : page["line_end"]])
    (lines,) = call_tools(
        build_mcp_server(app),
        ("get_document", {"path": "report.ptxt#page=2", "start_line": hit.line_start}),
    )
    served = json.loads(lines.content[0].text)
    assert served["line_start"] == hit.line_start and "zebra" in served["content"]
    outside = _refusal(
        lambda: read_target(app, Target(path="report.ptxt#page=2", start=1), 0), "line 1"
    )
    assert "outside report.ptxt#page=2" in outside and "whole document's" in outside


def test_a_page_the_file_lacks_is_one_clear_error(tmp_path: Path) -> None:
    app = _app(make_kb(tmp_path / "kb", FILES))
    refused = _refusal(lambda: read_target(app, Target(path="report.ptxt#page=9"), 0), "page 9")
    assert refused == "'report.ptxt': no part 'page=9' in this file (it has: page=1 to page=2)"


def test_without_the_plugin_the_type_is_neither_indexed_nor_served(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", FILES)
    app = open_kb(kb, entry_points=False)  # the built-ins alone
    assert {d.path for d in app.store.documents()} == {"note.md"}
    refused = _refusal(lambda: resolve_markdown(app, "report.ptxt"), "an unclaimed type")
    assert "no note named" in refused and "files are served" in refused


def test_markdown_keeps_its_plain_content_hash_and_loaded_files_record_the_loader(
    tmp_path: Path,
) -> None:
    kb = make_kb(tmp_path / "kb", FILES)
    app = _app(kb)
    states = app.store.doc_states()
    note = hashlib.sha256((kb / "note.md").read_bytes()).hexdigest()
    report = hashlib.sha256((kb / "report.ptxt").read_bytes()).hexdigest()
    assert states["note.md"].content_hash == note
    assert states["report.ptxt"].content_hash == f"paged/1:{report}"


def test_a_new_loader_version_reads_its_files_again(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", FILES)
    _app(kb).close()
    same = PagedText("1")
    report = _app(kb, same, index=False).index()
    assert (report.changed, same.loads) == (0, 0)  # size and mtime alone: not even read
    newer = PagedText("2")
    report = _app(kb, newer, index=False).index()
    assert (report.changed, report.unchanged, newer.loads) == (1, 1, 1)


def test_files_a_loader_refuses_are_skipped_with_its_reason(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {
        **FILES,
        "locked.ptxt": paged("LOCKED"),
        "broken.ptxt": paged("BOOM"),
        "impostor.ptxt": b"%PDF-1.7 not paged text",
    }
    kb = make_kb(tmp_path / "kb", files)
    report = _app(kb, index=False).index()
    reasons = dict(report.skipped)
    assert reasons == {
        "locked.ptxt": "encrypted paged text",
        "broken.ptxt": "paged loader failed: RuntimeError: the library fell over",
        "impostor.ptxt": "not a PTXT file by its content (checked by: paged)",
    }
    assert ("report.ptxt", "one page was blank") in report.warnings
    assert report.documents_total == 2


def test_ignore_rules_and_links_apply_to_loaded_files(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {**FILES, "drafts/old.ptxt": paged("draft words")}
    kb = make_kb(tmp_path / "kb", files)
    (kb / ".grooveignore").write_text("drafts/\n", encoding="utf-8")
    app = _app(kb)
    assert {d.path for d in app.store.documents()} == {"note.md", "report.ptxt"}
    refused = _refusal(lambda: resolve_markdown(app, "drafts/old.ptxt"), "an ignored file")
    assert "excluded by the ignore pattern 'drafts/'" in refused


def test_the_watcher_sees_loaded_files(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", FILES)
    watcher = Watcher(_app(kb, index=False), interval=0.05, debounce=0.05)
    assert set(watcher.snapshot()) == {"note.md", "report.ptxt"}


def test_plugins_list_names_each_loader_and_the_types_it_claims(tmp_path: Path) -> None:
    from groove_core.plugins import PluginInfo, make_plugin_manager

    app = _app(make_kb(tmp_path / "kb", FILES), index=False)
    infos, problem = list_plugins(app.config)
    assert problem is None
    markdown = next(i for i in infos if i.name == "markdown")
    assert markdown.loaders == ("markdown/1: .md, .markdown, .mdx",)
    plugins = make_plugin_manager(app.config, extra=[("paged", PagedText())])
    described = plugins.loaders().describe()
    assert ("paged", "paged/1", (".ptxt",)) in described
    row: dict[str, Any] = PluginInfo("x", "d", "1", (), "enabled", loaders=("a/1: .a",)).to_json()
    assert row["loaders"] == ["a/1: .a"]


def test_groove_plugins_list_prints_the_loaders(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from groove_core.cli import build_cli

    kb = make_kb(tmp_path / "kb", FILES)
    result = CliRunner().invoke(build_cli(None), ["plugins", "list", "--kb", str(kb)])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if line.startswith("markdown "))
    assert row.endswith("hooks: loaders  loaders: markdown/1: .md, .markdown, .mdx")
    listed = CliRunner().invoke(build_cli(None), ["plugins", "list", "--kb", str(kb), "--json"])
    rows = {p["name"]: p for p in json.loads(listed.output)["plugins"]}
    assert rows["markdown"]["loaders"] == ["markdown/1: .md, .markdown, .mdx"]


def test_doctor_repairs_a_loaded_file_as_it_repairs_a_note(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", FILES)
    app = _app(kb)
    conn = app.store.conn
    victim = conn.execute(
        "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id "
        "WHERE d.path = 'report.ptxt' ORDER BY c.id LIMIT 1"
    ).fetchone()[0]
    conn.execute("DELETE FROM vec_chunks WHERE chunk_id = ?", (victim,))
    app.close()
    found = app.doctor()
    assert not found.healthy
    repaired = app.doctor(repair=True)
    assert repaired.repaired and repaired.reindexed == ["report.ptxt"]
    assert app.doctor().healthy
    assert app.search("zebra crossing", limit=1).results[0].path == "report.ptxt"


def test_a_fragment_on_a_name_too_long_is_refused_in_one_line(tmp_path: Path) -> None:
    app = _app(make_kb(tmp_path / "kb", FILES), index=False)
    refused = _refusal(lambda: resolve_markdown(app, "a" * 300 + ".ptxt#page=1"), "a long name")
    assert "no note named" in refused and "files are served" in refused
