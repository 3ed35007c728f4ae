"""The plugin host: built-ins as plugins, stage hooks, conflicts, missing stages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from pydantic import BaseModel, ConfigDict

from groove_core.cli import build_cli
from groove_core.config import ConfigError, ConfigSection, GrooveConfig, parse_config
from groove_core.context import LegSpec, QueryContext, SearchOption
from groove_core.embedding import EmbedderError, EmbedderSpec
from groove_core.hookspecs import hookimpl
from groove_core.models import LegHit, LegResult, SearchHit, Span
from groove_core.plugins import list_plugins, make_plugin_manager
from groove_core.query import QueryError
from groove_core.testing import FAST_CONFIG, make_kb, open_kb, query_context
from tests.helpers import HelloCommand, ReverseReranker, raised_in_one_line


def test_builtins_are_plugins() -> None:
    plugins = make_plugin_manager(GrooveConfig())
    names = {i.name: i for i in plugins.infos}
    assert {"fts", "vector", "match_spans", "embedders"} <= set(names)
    assert names["fts"].hooks == ("groove_legs",)
    assert names["match_spans"].hooks == ("groove_highlight",)
    assert all(i.status == "enabled" for i in plugins.infos if i.builtin)


def test_disabled_builtin_is_not_registered() -> None:
    config = parse_config({"plugins": {"disabled": ["fts"]}})
    plugins = make_plugin_manager(config)
    legs = plugins.implements("groove_legs")
    assert "fts" not in legs and "vector" in legs
    assert next(i for i in plugins.infos if i.name == "fts").status == "disabled"


class Passer:
    @hookimpl
    def groove_rerank(self, ctx: QueryContext, hits: list[SearchHit]) -> None:
        return None


def test_a_stage_plugin_reorders_and_a_passing_one_changes_nothing(notes_kb: Path) -> None:
    # entry_points=False: an installed reranker plugin would claim the same stage.
    base = open_kb(notes_kb, entry_points=False).search("rust ownership", limit=3)
    passed = open_kb(notes_kb, entry_points=False, extra_plugins=[("passer", Passer())])
    assert passed.search("rust ownership", limit=3) == base
    flipped = open_kb(
        notes_kb, entry_points=False, extra_plugins=[("rev", ReverseReranker())]
    ).search("rust ownership", limit=3)
    assert [h.chunk_id for h in flipped.results] == [h.chunk_id for h in reversed(base.results)]


def test_two_plugins_claiming_one_stage_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="groove_rerank"):
        make_plugin_manager(GrooveConfig(), extra=[("a", ReverseReranker()), ("b", Passer())])


def test_a_stage_setting_without_its_plugin_is_a_clear_error() -> None:
    for data, problem in [
        ({"search": {"mmr": {"enabled": True}}}, r"\[search\.mmr\]: no enabled plugin"),
        ({"search": {"parent_retriever": {}}}, r"\[search\.parent_retriever\]: no enabled"),
        ({"reranker": "BAAI/bge-reranker-v2-m3"}, "unknown key 'reranker': neither groove"),
    ]:
        with pytest.raises(ConfigError, match=problem):
            make_plugin_manager(parse_config(data), entry_points=False)


class TitleLeg:
    """A third leg: matches documents whose title contains the query text."""

    @hookimpl
    def groove_legs(self) -> list[LegSpec]:
        return [LegSpec("title", "other", self.search)]

    def search(self, ctx: QueryContext) -> LegResult:
        docs = ctx.store.documents()
        wanted = [d.doc_id for d in docs if ctx.query.embed_text.lower() in d.title.lower()]
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
    options = [o for o in app.plugins.search_options() if o.plugin == "title"]
    assert options == [SearchOption("title_boost", "bool", "boost title matches", "title")]


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    boost: float = 1.0


class Configured:
    @hookimpl
    def groove_config_sections(self) -> list[ConfigSection]:
        return [ConfigSection("plugin.conf", Settings)]


def test_plugin_config_is_validated_by_the_plugin() -> None:
    ok = parse_config({"plugin": {"conf": {"boost": 2.5}}}, "kb/groove.toml")
    plugins = make_plugin_manager(ok, extra=[("conf", Configured())])
    assert plugins.settings.get(Settings) == Settings(boost=2.5)
    bad = parse_config({"plugin": {"conf": {"boots": 1}}}, "kb/groove.toml")
    problem = r"\[plugin.conf\] in kb/groove.toml: unknown key 'plugin\.conf\.boots'"
    with pytest.raises(ConfigError, match=problem):
        make_plugin_manager(bad, extra=[("conf", Configured())])
    stray = parse_config({"plugin": {"nothere": {}}}, "kb/groove.toml")
    with pytest.raises(ConfigError, match="no plugin named 'nothere'"):
        make_plugin_manager(stray)


class OldSchema:
    @hookimpl
    def groove_config_schema(self) -> type[BaseModel]:
        return Settings


def test_the_one_config_hook_is_groove_config_sections() -> None:
    # The removed second hook fails its plugin by name instead of being silently unused.
    plugins = make_plugin_manager(GrooveConfig(), extra=[("old", OldSchema())])
    info = next(i for i in plugins.infos if i.name == "old")
    assert info.status == "failed"
    assert "unknown hook groove_config_schema" in info.reason


def test_list_plugins_reports_a_config_problem_instead_of_failing() -> None:
    # Disabled by name: whether or not groove-mmr is installed, the stage has no plugin.
    config = parse_config({"search": {"mmr": {"enabled": True}}, "plugins": {"disabled": ["mmr"]}})
    infos, problem = list_plugins(config)
    assert {"fts", "vector"} <= {i.name for i in infos}
    assert problem is not None and "groove-mmr" in problem


def test_a_plugin_adds_a_cli_command() -> None:
    plugins = make_plugin_manager(GrooveConfig(), extra=[("hello", HelloCommand())])
    result = CliRunner().invoke(build_cli(plugins), ["hello"])
    assert result.output == "hello from a plugin\n"


class Constant:
    identity = "constant:1"
    dim = 8

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.ones((len(texts), 8), dtype=np.float32) / np.sqrt(8)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


class ConstantEmbedder:
    @hookimpl
    def groove_embedders(self) -> list[EmbedderSpec]:
        return [EmbedderSpec("constant", lambda cfg, s: Constant(), "every text is the same")]


def test_a_plugin_embedder_is_chosen_by_name(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", config='[embedder]\nname = "constant"\n')
    app = open_kb(kb, extra_plugins=[("const", ConstantEmbedder())])
    assert app.embedder.identity == "constant:1"
    assert app.store.embedder_identity() == ("constant:1", 8)
    unknown = make_kb(tmp_path / "kb2", config='[embedder]\nname = "nope"\n')
    with pytest.raises(EmbedderError, match=r"unknown embedder 'nope'.*constant"):
        _ = open_kb(unknown, extra_plugins=[("const", ConstantEmbedder())]).embedder


class Stars:
    @hookimpl
    def groove_highlight(self, ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit]:
        return [replace(h, match_spans=(Span(0, 1),)) for h in hits]


def test_the_highlighter_can_be_replaced_once_the_builtin_is_disabled(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="groove_highlight"):
        make_plugin_manager(GrooveConfig(), extra=[("stars", Stars())])
    config = FAST_CONFIG + '[plugins]\ndisabled = ["match_spans"]\n'
    app = open_kb(make_kb(tmp_path / "kb", config=config), extra_plugins=[("stars", Stars())])
    assert all(h.match_spans == (Span(0, 1),) for h in app.search("ranking").results)


class WidePool:
    @hookimpl
    def groove_pool_size(self, ctx: QueryContext) -> int | None:
        return 40 if ctx.options.get("wide") else None


def test_pool_size_requests_widen_the_pool_only_when_asked(tmp_path: Path) -> None:
    app = open_kb(make_kb(tmp_path / "kb"), extra_plugins=[("wide", WidePool())])
    assert query_context(app, "ranking", limit=3).pool_size == 3
    assert query_context(app, "ranking", limit=3, options={"wide": True}).pool_size == 40
    assert query_context(app, "ranking", limit=50, options={"wide": True}).pool_size == 50


class Noter:
    @hookimpl
    def groove_expand(self, ctx: QueryContext, hits: list[SearchHit]) -> None:
        ctx.note("expanded nothing today")


def test_a_stage_note_reaches_the_response_warnings(notes_kb: Path) -> None:
    app = open_kb(notes_kb, entry_points=False, extra_plugins=[("noter", Noter())])
    payload = app.search("ranking", limit=2).to_json()
    assert payload["warnings"] == ["expanded nothing today"]
    assert "warnings" not in open_kb(notes_kb, entry_points=False).search("ranking").to_json()


def test_flag_reads_a_boolean_switch_and_rejects_anything_else(tmp_path: Path) -> None:
    app = open_kb(make_kb(tmp_path / "kb"), entry_points=False)
    assert query_context(app, "ranking").flag("wide") is None
    assert query_context(app, "ranking", options={"wide": False}).flag("wide") is False
    with pytest.raises(QueryError, match="'wide' must be true or false"):
        query_context(app, "ranking", options={"wide": "yes"}).flag("wide")


# -- a plugin's mistakes are one line naming it (issue #46) -----------------------------------


def _plugin_error() -> type[Exception]:
    """groove_core.plugins.PluginError (looked up when used: these tests name what older code
    lacked, and fail there for what it did instead)."""
    import groove_core.plugins as plugins_module

    found: type[Exception] = getattr(plugins_module, "PluginError", ConfigError)
    return found


class OneArgumentEmbedder:
    """The mistake of the report: a factory that takes one argument instead of two."""

    @hookimpl
    def groove_embedders(self) -> list[EmbedderSpec]:
        return [EmbedderSpec("broken", lambda config: Constant())]  # type: ignore[arg-type,misc]


def test_an_embedder_factory_with_the_wrong_arguments_is_one_line(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", config='[embedder]\nname = "broken"\n')
    app = open_kb(kb, index=False, extra_plugins=[("oops", OneArgumentEmbedder())])
    message = str(raised_in_one_line(_plugin_error(), app.index))
    assert message.startswith(
        "the plugin 'oops' (registered in process) failed in groove_embedders: the factory "
        "of embedder 'broken': TypeError: "
    )
    assert "takes 1 positional argument but 2 were given" in message
    assert "[plugins] disabled = ['oops']" in message


BROKEN_PLUGIN = """
from groove_core.embedding import EmbedderSpec
from groove_core.hookspecs import hookimpl


@hookimpl
def groove_embedders():
    return [EmbedderSpec("broken", lambda config: None)]
"""


def test_an_installed_plugins_mistake_stops_groove_index_with_one_line(tmp_path: Path) -> None:
    """The report's repro, with a plugin installed as a distribution: `groove index`
    ended with a TypeError traceback from plugins.make_embedder."""
    import os
    import subprocess
    import sys

    site = tmp_path / "site"
    record = site / "broken_embedder-1.0.dist-info"
    record.mkdir(parents=True)
    (site / "broken_embedder.py").write_text(BROKEN_PLUGIN, encoding="utf-8")
    (record / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: broken-embedder\nVersion: 1.0\n", encoding="utf-8"
    )
    (record / "entry_points.txt").write_text("[groove]\nbroken = broken_embedder\n", "utf-8")
    kb = make_kb(tmp_path / "kb", config='[embedder]\nname = "broken"\n')
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    done = subprocess.run(
        [sys.executable, "-m", "groove_core", "index", str(kb)],
        env={**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        "groove: the plugin 'broken' (distribution broken-embedder 1.0) failed in "
        "groove_embedders: the factory of embedder 'broken': TypeError: "
    )


class DeliberateEmbedderError:
    @hookimpl
    def groove_embedders(self) -> list[EmbedderSpec]:
        def refuse(config: Any, settings: Any) -> Constant:
            raise EmbedderError("the model server at localhost:1 does not answer")

        return [EmbedderSpec("refuses", refuse)]


def test_a_plugins_own_error_passes_as_it_is(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", config='[embedder]\nname = "refuses"\n')
    app = open_kb(kb, index=False, extra_plugins=[("server", DeliberateEmbedderError())])
    with pytest.raises(EmbedderError) as caught:
        app.index()
    assert str(caught.value) == "the model server at localhost:1 does not answer"


class FailingLeg:
    @hookimpl
    def groove_legs(self) -> list[LegSpec]:
        return [LegSpec("flaky", "other", self.search)]

    def search(self, ctx: QueryContext) -> LegResult:
        return ctx.no_such_attribute  # type: ignore[attr-defined,no-any-return]


class FailingReranker:
    @hookimpl
    def groove_rerank(self, ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit]:
        raise ValueError("scores and hits differ in length\nsecond line")


class FailingPool:
    @hookimpl
    def groove_pool_size(self, ctx: QueryContext) -> int:
        return int("wide")


class NotAList:
    @hookimpl
    def groove_legs(self) -> LegSpec:
        return LegSpec("single", "other", lambda ctx: None)


@pytest.mark.parametrize(
    ("plugin", "hook", "detail"),
    [
        (FailingLeg(), "groove_legs: the search of leg 'flaky'", "AttributeError: "),
        (FailingReranker(), "groove_rerank", "ValueError: scores and hits differ in length ("),
        (FailingPool(), "groove_pool_size", "ValueError: invalid literal"),
    ],
)
def test_a_plugin_failing_in_a_search_hook_is_one_line_naming_it(
    notes_kb: Path, plugin: object, hook: str, detail: str
) -> None:
    """A search does not go on without the part that failed (its results, or an
    evaluation's, would silently not be the ones asked for): it stops with one line."""
    app = open_kb(notes_kb, entry_points=False, extra_plugins=[("flawed", plugin)])
    with pytest.raises(_plugin_error()) as caught:
        app.search("rust ownership", limit=3)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"the plugin 'flawed' (registered in process) failed in {hook}: ")
    assert detail in message


def test_a_plugin_failing_to_declare_its_legs_stops_indexing_with_one_line(
    notes_kb: Path,
) -> None:
    """The legs name the indexes the index holds: with a plugin's declaration broken,
    neither indexing nor a search can know them, and both stop with one line naming it."""
    with pytest.raises(_plugin_error()) as caught:
        open_kb(notes_kb, entry_points=False, extra_plugins=[("flawed", NotAList())])
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("the plugin 'flawed' (registered in process) failed in groove_legs: ")
    assert "TypeError: returned LegSpec, not a list" in message


class DatabaseTroubleLeg:
    @hookimpl
    def groove_legs(self) -> list[LegSpec]:
        return [LegSpec("disk", "other", self.search)]

    def search(self, ctx: QueryContext) -> LegResult:
        import pysqlite3.dbapi2 as sqlite3

        raise sqlite3.DatabaseError("database disk image is malformed")


def test_the_index_trouble_a_plugin_meets_is_still_named_as_the_indexs(notes_kb: Path) -> None:
    """A database error in a plugin's query is the index's (damage, the environment):
    it passes to the code that says so, not blamed on the plugin."""
    from groove_core.storage import StoreError

    app = open_kb(notes_kb, entry_points=False, extra_plugins=[("disk", DatabaseTroubleLeg())])
    with pytest.raises(StoreError, match="is damaged") as caught:
        app.search("rust ownership")
    assert "the plugin 'disk'" not in str(caught.value)


class BrokenLoaders:
    @hookimpl
    def groove_loaders(self) -> list[Any]:
        raise AttributeError("module 'pdfium' has no attribute 'PdfDocument'")


def test_a_loaders_hook_that_fails_stops_the_run_and_keeps_the_index(notes_kb: Path) -> None:
    """Indexing on without a plugin's loaders would remove their files from the index as
    deleted: the run stops with one line instead, the index as it was."""
    app = open_kb(notes_kb)
    before = app.store.counts()
    broken = open_kb(notes_kb, index=False, extra_plugins=[("docs", BrokenLoaders())])
    with pytest.raises(_plugin_error(), match=r"^the plugin 'docs' \(registered in process\) "
                       r"failed in groove_loaders: AttributeError: module 'pdfium'"):  # fmt: skip
        broken.index()
    assert open_kb(notes_kb, index=False).store.counts() == before


class OddBackend:
    @hookimpl
    def groove_storage_backends(self) -> list[Any]:
        from groove_core.backend import BackendSpec

        return [BackendSpec("odd", lambda: None)]  # type: ignore[arg-type,misc]


def test_a_storage_backend_factory_with_the_wrong_arguments_is_one_line(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", config=FAST_CONFIG + '[store]\nbackend = "odd"\n')
    app = open_kb(kb, index=False, extra_plugins=[("odd", OddBackend())])
    with pytest.raises(_plugin_error(), match="failed in groove_storage_backends: the factory "
                       "of backend 'odd': TypeError: "):  # fmt: skip
        app.index()


class BrokenSections:
    @hookimpl
    def groove_config_sections(self) -> list[ConfigSection]:
        raise KeyError("boost")


def test_plugins_list_names_a_plugin_whose_config_hook_fails() -> None:
    infos, problem = list_plugins(GrooveConfig(), extra=[("sections", BrokenSections())])
    assert {"fts", "sections"} <= {i.name for i in infos}
    assert problem is not None
    assert "the plugin 'sections'" in problem and "groove_config_sections: KeyError" in problem


def test_a_plugins_licence_is_read_from_its_metadata() -> None:
    import email.message

    from groove_core.plugins import MAX_LICENCE, _licence

    class Dist:
        def __init__(self, **fields: str) -> None:
            self.metadata = email.message.Message()
            for key, value in fields.items():
                self.metadata[key.replace("_", "-")] = value

    assert _licence(Dist(License_Expression="MIT AND CC-BY-4.0", License="ignored")) == (
        "MIT AND CC-BY-4.0"
    )
    assert _licence(Dist(License="BSD\nthe whole text\nof it")) == "BSD"  # its first line
    assert _licence(Dist(License="x" * 500)) == "x" * MAX_LICENCE
    assert _licence(Dist()) == "" and _licence(None) == ""
