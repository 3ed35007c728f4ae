"""The example plugin, tested from the outside with groove_core.testing only."""

from __future__ import annotations

from pathlib import Path

import groove_title_leg
import pytest
from click.testing import CliRunner

from groove_core.cli import build_cli
from groove_core.config import ConfigError, GrooveConfig
from groove_core.plugins import list_plugins, make_plugin_manager
from groove_core.testing import FAST_CONFIG, check_candidate_leg, make_kb, open_kb

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
