"""The plugin boundary: the core names no optional stage, and a third-party stage gets
exactly what the first-party ones use (its own config keys, a switch, the active set)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import BaseModel, ConfigDict, Field

from groove_core.config import ConfigError, ConfigSection, parse_config
from groove_core.context import QueryContext, StageSwitch
from groove_core.hookspecs import hookimpl
from groove_core.models import SearchHit
from groove_core.plugins import list_plugins, make_plugin_manager
from groove_core.query import QueryError
from groove_core.testing import FAST_CONFIG, SECTION_CHUNKS, make_kb, open_kb

CORE = Path(__file__).resolve().parents[1] / "groove_core"

#: What the optional first-party stages are called, and their settings.
_NAMED = re.compile(
    r"mmr|parent.retriever|rerank_by_default|reranker|groove.(mmr|parent)\b|\bparent\b['\"]",
    re.IGNORECASE,
)


def test_no_module_of_the_core_names_an_optional_stage() -> None:
    found = []
    for path in sorted(CORE.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _NAMED.search(line):
                found.append(f"{path.relative_to(CORE.parent)}:{number}: {line.strip()}")
    assert not found, "the core names optional stages:\n" + "\n".join(found)


def test_the_grep_would_see_a_stage_named_in_the_core() -> None:
    # The pattern above must catch what the core used to hold.
    for line in (
        "config.search.mmr.enabled",
        "reranker: str | None",
        '"parent": (',
        "rerank_by_default",
    ):
        assert _NAMED.search(line), line


class DedupeSettings(BaseModel):
    """A stage a stranger could write: drop a second chunk of a document."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(False, description="drop repeated documents")
    keep: int = Field(1, ge=1, description="chunks kept per document")


class SwitchedStage:
    """A third-party stage's settings, registered in process: the section
    ``[search.NAME]`` (:class:`DedupeSettings`) and the switch ``NAME`` on its ``enabled``."""

    def __init__(self, name: str, help_text: str) -> None:
        self.name = name
        self.help_text = help_text

    @hookimpl
    def groove_config_sections(self) -> list[ConfigSection]:
        return [ConfigSection(f"search.{self.name}", DedupeSettings)]

    @hookimpl
    def groove_stage_switches(self) -> list[StageSwitch]:
        return [StageSwitch(self.name, f"search.{self.name}.enabled", self.help_text)]


class Dedupe(SwitchedStage):
    """A third-party diversify stage, registered in process: only public mechanisms."""

    seen_active: ClassVar[list[frozenset[str]]] = []

    def __init__(self) -> None:
        super().__init__("dedupe", "Drop repeated documents")

    @hookimpl
    def groove_pool_size(self, ctx: QueryContext) -> int | None:
        self.seen_active.append(ctx.active_stages)
        return ctx.limit * 3 if ctx.active("dedupe") else None

    @hookimpl
    def groove_diversify(self, ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit] | None:
        if not ctx.active("dedupe"):
            return None
        keep = ctx.settings.get(DedupeSettings).keep
        counts: dict[int, int] = {}
        out = []
        for hit in hits:
            counts[hit.doc_id] = counts.get(hit.doc_id, 0) + 1
            if counts[hit.doc_id] <= keep:
                out.append(replace(hit, rank=len(out) + 1))
        return out[: ctx.limit]


NOTES = {
    "kettle.md": "# Kettle\n\nDescale the kettle.\n\n## Again\n\nDescale the kettle once more.\n"
    "\n## More\n\nThe kettle descale routine.\n",
    "tea.md": "# Tea\n\nBrew tea with water from the kettle.\n",
}


def _app(tmp_path: Path, extra: str = "", plugin: object | None = None):  # type: ignore[no-untyped-def]
    kb = make_kb(tmp_path / "kb", NOTES, config=SECTION_CHUNKS + extra)  # kettle: 3 chunks
    return open_kb(kb, extra_plugins=[("dedupe", plugin or Dedupe())], entry_points=False)


def test_a_third_party_stage_owns_its_section_and_switch(tmp_path: Path) -> None:
    app = _app(tmp_path, "[search.dedupe]\nkeep = 1\n")
    assert app.plugins.settings.value("search.dedupe.keep") == 1
    assert app.plugins.settings.value("search.fusion.rrf_k") == 60.0
    option = next(o for o in app.plugins.search_options() if o.name == "dedupe")
    assert (option.type, option.plugin) == ("bool", "dedupe")
    assert option.setting == "search.dedupe.enabled"

    off, _, ctx = app.search_explained("kettle descale", limit=3)
    assert ctx.active_stages == frozenset() and ctx.pool_size == 3
    on, _, ctx = app.search_explained("kettle descale", limit=3, options={"dedupe": True})
    assert ctx.active_stages == {"dedupe"} and ctx.pool_size == 9
    assert len({h.doc_id for h in on.results}) == len(on.results)
    assert len({h.doc_id for h in off.results}) < len(off.results)


def test_the_active_set_is_decided_before_the_pool_is_sized(tmp_path: Path) -> None:
    Dedupe.seen_active.clear()
    app = _app(tmp_path, "[search.dedupe]\nenabled = true\n")
    app.search("kettle", limit=2)
    assert Dedupe.seen_active == [frozenset({"dedupe"})]
    with pytest.raises(QueryError, match="'dedupe' must be true or false"):
        app.search("kettle", options={"dedupe": "yes"})


def test_a_bad_value_in_a_plugin_section_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"invalid \[search\.dedupe\] .*search\.dedupe\.keep"):
        _app(tmp_path, "[search.dedupe]\nkeep = 0\n")
    with pytest.raises(ConfigError, match=r"unknown key 'search\.dedupe\.kept'"):
        _app(tmp_path, "[search.dedupe]\nkept = 2\n")


def test_a_section_no_plugin_claims_is_one_clear_error() -> None:
    config = parse_config({"search": {"dedupe": {"enabled": True}, "defualt_limit": 3}}, "t.toml")
    with pytest.raises(ConfigError) as caught:
        make_plugin_manager(config, entry_points=False)
    message = str(caught.value)
    assert "invalid configuration in t.toml" in message
    assert "[search.dedupe]: no enabled plugin provides this section" in message
    assert "unknown key 'search.defualt_limit'" in message
    assert "pip install ./plugins/NAME" in message


def test_two_owners_of_one_key_are_an_error() -> None:
    class Rival:
        @hookimpl
        def groove_config_sections(self) -> list[ConfigSection]:
            return [ConfigSection("search.dedupe", DedupeSettings)]

    class Squatter:
        @hookimpl
        def groove_config_sections(self) -> list[ConfigSection]:
            return [ConfigSection("search", DedupeSettings)]

    class CoreKey(BaseModel):
        default_limit: int = 3

    class Usurper:
        @hookimpl
        def groove_config_sections(self) -> list[ConfigSection]:
            return [ConfigSection("search", CoreKey)]

    config = parse_config({})
    with pytest.raises(ConfigError, match=r"the plugin rival claims 'search\.dedupe'"):
        make_plugin_manager(
            config, extra=[("dedupe", Dedupe()), ("rival", Rival())], entry_points=False
        )
    # A plugin may add keys to a core table, but not take one of the core's.
    plugins = make_plugin_manager(config, extra=[("squatter", Squatter())], entry_points=False)
    assert plugins.settings.value("search.keep") == 1
    with pytest.raises(ConfigError, match=r"'search\.default_limit'.*groove itself"):
        make_plugin_manager(config, extra=[("usurper", Usurper())], entry_points=False)


def test_a_misspelt_hook_fails_the_plugin_instead_of_enabling_it() -> None:
    class Misspelt:
        @hookimpl
        def groove_reranks(self, ctx: QueryContext, hits: list[SearchHit]) -> None:
            return None

    plugins = make_plugin_manager(
        parse_config({}), extra=[("typo", Misspelt())], entry_points=False
    )
    info = next(i for i in plugins.infos if i.name == "typo")
    assert info.status == "failed"
    assert "unknown hook groove_reranks" in info.reason
    assert not plugins.pm.has_plugin("typo")


def test_a_misspelt_name_in_plugins_disabled_is_an_error() -> None:
    config = parse_config({"plugins": {"disabled": ["vectr"]}}, "t.toml")
    with pytest.raises(ConfigError, match=r"\[plugins\] disabled in t.toml names 'vectr'"):
        make_plugin_manager(config, entry_points=False)
    infos, problem = list_plugins(config)
    assert infos and problem is not None and "'vectr'" in problem


def test_plugins_list_says_a_stage_is_off_by_default(tmp_path: Path) -> None:
    app = _app(tmp_path)
    info = next(i for i in app.plugins.infos if i.name == "dedupe")
    assert (info.stages, info.off_by_default) == (("dedupe",), True)
    assert info.status_text == "installed, off by default"
    on = _app(tmp_path / "on", "[search.dedupe]\nenabled = true\n")
    info = next(i for i in on.plugins.infos if i.name == "dedupe")
    assert (info.off_by_default, info.status_text) == (False, "enabled")


def test_ablation_reads_the_same_switches(tmp_path: Path) -> None:
    from groove_core.evaluation.session import ablation_variants

    app = _app(tmp_path)

    class Session:  # what ablation_variants reads of an EvalSession
        config = app.config

    Session.app = app  # type: ignore[attr-defined]
    rows = {v.name: v for v in ablation_variants(Session)}  # type: ignore[arg-type]
    assert "hybrid + dedupe" in rows
    variant = rows["hybrid + dedupe"]
    assert variant.note == "off in groove.toml: switched on, its other settings as configured"
    assert variant.config.to_data()["search"]["dedupe"] == {"enabled": True}


def test_ablation_variants_never_share_their_sections(tmp_path: Path) -> None:
    """With a second switched stage (boost), each variant switches on its own section."""
    from groove_core.evaluation.session import ablation_variants

    extra = "[search.dedupe]\nenabled = false\nkeep = 2\n[search.boost]\nenabled = false\n"
    kb = make_kb(tmp_path / "kb", NOTES, config=FAST_CONFIG + extra)
    second = SwitchedStage("boost", "Boost")
    app = open_kb(kb, extra_plugins=[("dedupe", Dedupe()), ("boost", second)], entry_points=False)

    class Session:
        config = app.config

    Session.app = app  # type: ignore[attr-defined]
    rows = {v.name: v for v in ablation_variants(Session)}  # type: ignore[arg-type]
    dedupe = rows["hybrid + dedupe"].config.to_data()["search"]
    boost = rows["hybrid + boost"].config.to_data()["search"]
    assert (dedupe["dedupe"], dedupe["boost"]) == ({"enabled": True, "keep": 2}, {"enabled": False})
    assert (boost["dedupe"], boost["boost"]) == ({"enabled": False, "keep": 2}, {"enabled": True})
    assert app.config.unclaimed["search.dedupe"] == {"enabled": False, "keep": 2}


def test_a_switch_on_an_undefined_setting_is_the_plugins_error() -> None:
    class Broken:
        @hookimpl
        def groove_stage_switches(self) -> list[StageSwitch]:
            return [StageSwitch("ghost", "search.ghost.enabled", "Nothing")]

    with pytest.raises(ConfigError, match=r"the plugin broken switches its stage 'ghost'"):
        make_plugin_manager(parse_config({}), extra=[("broken", Broken())], entry_points=False)
    infos, problem = list_plugins(parse_config({}))
    assert problem is None and infos


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("embedder.name", "which groove itself defines"),
        ("plugin.other", r"a plugin's own table is \[plugin\.grabby\]"),
        ("plugin", r"a plugin's own table is \[plugin\.grabby\]"),
    ],
)
def test_a_plugin_cannot_claim_what_is_not_its_own(path: str, problem: str) -> None:
    class Grabby:
        @hookimpl
        def groove_config_sections(self) -> list[ConfigSection]:
            return [ConfigSection(path, DedupeSettings)]

    with pytest.raises(ConfigError, match=problem):
        make_plugin_manager(parse_config({}), extra=[("grabby", Grabby())], entry_points=False)
