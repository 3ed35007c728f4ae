"""The example plugin, tested from the outside with groove_core.testing only."""

from __future__ import annotations

from pathlib import Path

import groove_title_leg
import pytest
from click.testing import CliRunner

from groove_core.app import Groove
from groove_core.cli import build_cli
from groove_core.config import ConfigError, GrooveConfig
from groove_core.index_report import IndexProgress
from groove_core.plugins import list_plugins, make_plugin_manager
from groove_core.testing import (
    FAST_CONFIG,
    check_candidate_leg,
    check_leg_index,
    make_kb,
    open_kb,
)

NOTES = {
    "a.md": "---\ntitle: Deployment runbook\n---\n# Steps\n\nShip it carefully.\n",
    "b.md": "# Notes\n\nA deployment happened on Friday.\n",
    "c.md": "# Gardening\n\nTomatoes need sun.\n",
}


def test_it_keeps_the_candidate_leg_contract(tmp_path: Path) -> None:
    config = FAST_CONFIG + "[plugin.titles]\nenabled_by_default = true\n"
    app = open_kb(
        make_kb(tmp_path / "kb", config=config),
        entry_points=False,
        extra_plugins=[("titles", groove_title_leg)],
    )
    check_candidate_leg(groove_title_leg, app)


def test_title_matches_are_fused_when_switched_on(tmp_path: Path) -> None:
    app = open_kb(
        make_kb(tmp_path / "kb", NOTES),
        entry_points=False,
        extra_plugins=[("titles", groove_title_leg)],
    )
    _, default, _ = app.search_explained("deployment runbook")
    assert "titles" not in {leg.name for leg in default}, "off unless asked"
    response, legs, _ = app.search_explained(
        "deployment runbook", limit=3, options={"titles": True}
    )
    titles = next(leg for leg in legs if leg.name == "titles")
    assert [h.chunk_id for h in titles.hits] == [response.results[0].chunk_id]
    assert response.results[0].path == "a.md"


def test_config_can_turn_it_on_for_every_query(tmp_path: Path) -> None:
    config = FAST_CONFIG + "[plugin.titles]\nenabled_by_default = true\n"
    app = open_kb(make_kb(tmp_path / "kb", NOTES, config=config))
    _, legs, _ = app.search_explained("deployment runbook")
    assert "titles" in {leg.name for leg in legs}
    _, off, _ = app.search_explained("deployment runbook", options={"titles": False})
    assert "titles" not in {leg.name for leg in off}


def test_it_is_installed_listed_and_adds_a_search_switch() -> None:
    infos, _ = list_plugins(GrooveConfig())
    info = next(i for i in infos if i.name == "titles")
    assert (info.distribution, info.status) == ("groove-title-leg", "enabled")
    assert "groove_legs" in info.hooks
    cli = build_cli(make_plugin_manager(GrooveConfig()))
    help_text = CliRunner().invoke(cli, ["search", "--help"]).output
    assert "--titles / --no-titles" in help_text


def test_its_config_section_is_validated(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", NOTES, config=FAST_CONFIG + "[plugin.titles]\nmax_docs = 3\n")
    with pytest.raises(ConfigError, match=r"(?s)\[plugin.titles\].*max_docs"):
        open_kb(kb)


def test_its_switch_is_a_parameter_of_the_mcp_search_tool(tmp_path: Path) -> None:
    import asyncio

    from mcp import Client

    from groove_core.mcp.server import build_mcp_server

    app = open_kb(make_kb(tmp_path / "kb", NOTES))

    async def search_schema() -> dict[str, object]:
        async with Client(build_mcp_server(app)) as client:
            tools = await client.list_tools()
            return next(t for t in tools.tools if t.name == "search").input_schema

    schema = asyncio.run(search_schema())
    assert "titles" in schema["properties"]  # type: ignore[operator]


def _app(tmp_path: Path, notes: dict[str, str] | None = None) -> Groove:
    return open_kb(
        make_kb(tmp_path / "kb", NOTES if notes is None else notes),
        entry_points=False,
        extra_plugins=[("titles", groove_title_leg)],
    )


def test_its_index_keeps_the_leg_index_contract(tmp_path: Path) -> None:
    check_leg_index(_app(tmp_path), "titles")


def test_it_searches_its_own_index_and_answers_as_a_scan_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = {
        **NOTES,
        "d.md": "---\ntitle: Runbook for the deployment of Ｖｕｅ\n---\n# One\n\na\n\n# Two\n\nb\n",
        "e/f.md": "# Deployment\n\nThe deployment of the garden.\n",
    }
    app = _app(tmp_path, notes)
    assert app.store.leg_index("titles") is not None
    queries = ("deployment runbook", "vue deployment", "garden", "runbook -carefully")
    indexed = {}
    for query in queries:
        _, legs, _ = app.search_explained(query, limit=10, options={"titles": True})
        leg = next(leg for leg in legs if leg.name == "titles")
        assert leg.meta["index"] is True
        indexed[query] = [(h.chunk_id, h.raw_score) for h in leg.hits]
    assert indexed["vue deployment"][0][1] == 2.0  # NFKC: the full-width title matches
    # Without its index (a backend it has none for) the leg scans the titles: same answers.
    original = type(app.store).leg_index
    monkeypatch.setattr(
        type(app.store),
        "leg_index",
        lambda self, name: None if name == "titles" else original(self, name),
    )
    for query in queries:
        _, legs, _ = app.search_explained(query, limit=10, options={"titles": True})
        leg = next(leg for leg in legs if leg.name == "titles")
        assert leg.meta["index"] is False
        assert [(h.chunk_id, h.raw_score) for h in leg.hits] == indexed[query], query


def test_enabling_it_on_an_indexed_kb_fills_its_index_once_with_progress(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", NOTES)
    open_kb(kb, entry_points=False).close()  # indexed without the leg
    app = open_kb(kb, entry_points=False, index=False, extra_plugins=[("titles", groove_title_leg)])
    events: list[IndexProgress] = []
    report = app.index(progress=events.append)
    filling = [e for e in events if e.stage == "filling the titles leg's index"]
    assert filling and filling[-1].work_done == filling[-1].work_total == report.chunks_total
    assert report.unchanged == len(NOTES)  # no file read again
    assert app.store.leg_index("titles") is not None
    again: list[IndexProgress] = []
    app.index(progress=again.append)
    assert not [e for e in again if e.stage.startswith("filling")]  # once
    response = app.search("deployment runbook", options={"titles": True})
    assert response.results[0].path == "a.md"


def test_disabling_it_leaves_its_index_to_be_filled_again(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", NOTES)
    app = open_kb(kb, entry_points=False, extra_plugins=[("titles", groove_title_leg)])
    app.close()
    without = open_kb(kb, entry_points=False, index=False)
    (kb / "d.md").write_text("# Deployment diary\n\nNew.\n")
    without.index()  # written without the leg: its index misses this note
    without.close()
    app = open_kb(kb, entry_points=False, index=False, extra_plugins=[("titles", groove_title_leg)])
    check_leg_index(app, "titles")  # filled again on open: the new note's chunk included


def test_explain_shows_what_the_leg_reports_of_itself(tmp_path: Path) -> None:
    """--explain shows a plugin leg's own meta keys (here: whether it read its index, how
    many titles matched), in the text and in --json --explain alike."""
    import json

    kb = make_kb(tmp_path / "kb", NOTES)
    runner = CliRunner()
    cli = build_cli(make_plugin_manager(GrooveConfig()))
    assert runner.invoke(cli, ["index", str(kb)], catch_exceptions=False).exit_code == 0
    args = ["search", "deployment", "--titles", "--kb", str(kb), "--explain"]
    text = runner.invoke(cli, args, catch_exceptions=False).output
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("leg titles (lexical)"))
    assert lines[head + 1 : head + 3] == ["  index: true", "  documents: 1"]
    payload = json.loads(runner.invoke(cli, [*args, "--json"], catch_exceptions=False).output)
    titles = next(leg for leg in payload["explain"]["legs"] if leg["name"] == "titles")
    assert titles["meta"] == {"index": True, "documents": 1}
    # The built-in word leg's terms are the query's words again: not repeated.
    word = next(leg for leg in payload["explain"]["legs"] if leg["name"] == "word")
    assert "meta" not in word
