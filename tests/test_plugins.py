"""The plugin host: built-ins as plugins, stage hooks, conflicts, missing stages."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

from groove_core.config import ConfigError, GrooveConfig, parse_config
from groove_core.context import QueryContext, SearchOption
from groove_core.hookspecs import hookimpl
from groove_core.models import LegHit, LegResult, SearchHit
from groove_core.plugins import list_plugins, make_plugin_manager
from groove_core.testing import open_kb


def test_builtins_are_plugins() -> None:
    plugins = make_plugin_manager(GrooveConfig())
    names = {i.name: i for i in plugins.infos}
    assert {"fts", "vector", "match_spans", "embedders"} <= set(names)
    assert names["fts"].hooks == ("groove_candidates",)
    assert names["match_spans"].hooks == ("groove_highlight",)
    assert all(i.status == "enabled" for i in plugins.infos if i.builtin)


def test_disabled_builtin_is_not_registered() -> None:
    config = parse_config({"plugins": {"disabled": ["fts"]}})
    plugins = make_plugin_manager(config)
    assert plugins.implements("groove_candidates") == ["vector"]
    assert next(i for i in plugins.infos if i.name == "fts").status == "disabled"


class Reverser:
    @hookimpl
    def groove_rerank(self, ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit]:
        return [replace(h, rank=i) for i, h in enumerate(reversed(hits), start=1)]


class Passer:
    @hookimpl
    def groove_rerank(self, ctx: QueryContext, hits: list[SearchHit]) -> None:
        return None


def test_a_stage_plugin_reorders_and_a_passing_one_changes_nothing(notes_kb: Path) -> None:
    base = open_kb(notes_kb).search("rust ownership", limit=3)
    passed = open_kb(notes_kb, extra_plugins=[("passer", Passer())]).search(
        "rust ownership", limit=3
    )
    assert passed == base
    flipped = open_kb(notes_kb, extra_plugins=[("rev", Reverser())]).search(
        "rust ownership", limit=3
    )
    assert [h.chunk_id for h in flipped.results] == [h.chunk_id for h in reversed(base.results)]


def test_two_plugins_claiming_one_stage_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="groove_rerank"):
        make_plugin_manager(GrooveConfig(), extra=[("a", Reverser()), ("b", Passer())])


def test_enabling_a_missing_stage_names_the_package() -> None:
    for data, package in [
        ({"search": {"mmr": {"enabled": True}}}, "groove-mmr"),
        ({"search": {"parent_retriever": {"enabled": True}}}, "groove-parent"),
        ({"reranker": "BAAI/bge-reranker-v2-m3"}, "groove-reranker-bge"),
    ]:
        with pytest.raises(ConfigError, match=package):
            make_plugin_manager(parse_config(data), entry_points=False)


class TitleLeg:
    """A third leg: matches documents whose title contains the query text."""

    @hookimpl
    def groove_candidates(self, ctx: QueryContext) -> LegResult:
        docs = ctx.store.documents()
        wanted = [d["doc_id"] for d in docs if ctx.query.embed_text.lower() in d["title"].lower()]
        ids = sorted(ctx.store.chunk_ids_for_docs(wanted))
        return LegResult("title", tuple(LegHit(i, 1.0) for i in ids[: ctx.leg_size]))

    @hookimpl
    def groove_search_options(self) -> list[SearchOption]:
        return [SearchOption("title_boost", "bool", "boost title matches")]


def test_an_extra_candidate_leg_is_fused(notes_kb: Path) -> None:
    app = open_kb(notes_kb, extra_plugins=[("title", TitleLeg())])
    response, legs, _ = app.search_explained("rust notes", limit=3)
    assert "title" in {leg.name for leg in legs}
    assert "title" in response.results[0].legs
    options = app.plugins.search_options()
    assert options == [SearchOption("title_boost", "bool", "boost title matches", "title")]


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    boost: float = 1.0


class Configured:
    @hookimpl
    def groove_config_schema(self) -> type[BaseModel]:
        return Settings


def test_plugin_config_is_validated_by_the_plugin() -> None:
    ok = parse_config({"plugin": {"conf": {"boost": 2.5}}}, "kb/groove.toml")
    plugins = make_plugin_manager(ok, extra=[("conf", Configured())])
    assert plugins.settings["conf"] == Settings(boost=2.5)
    bad = parse_config({"plugin": {"conf": {"boots": 1}}}, "kb/groove.toml")
    with pytest.raises(ConfigError, match=r"\[plugin.conf\] in kb/groove.toml: boots"):
        make_plugin_manager(bad, extra=[("conf", Configured())])
    stray = parse_config({"plugin": {"nothere": {}}}, "kb/groove.toml")
    with pytest.raises(ConfigError, match="no plugin named 'nothere'"):
        make_plugin_manager(stray)


def test_list_plugins_reports_a_config_problem_instead_of_failing() -> None:
    infos, problem = list_plugins(parse_config({"search": {"mmr": {"enabled": True}}}))
    assert {"fts", "vector"} <= {i.name for i in infos}
    assert problem is not None and "groove-mmr" in problem
