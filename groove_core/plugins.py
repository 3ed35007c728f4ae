"""Plugin discovery and the typed facade over ``pm.hook``.

Built-in features (the FTS and vector legs, match_spans, the embedders) are plugins like
any other. Third-party plugins come from the ``groove`` entry-point group; the entry-point
name is the plugin's name in ``[plugins] disabled`` and in ``groove plugins list``.
A disabled plugin is blocked before discovery, so its module is never imported.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

import pluggy
from pydantic import BaseModel, ValidationError

from groove_core import hookspecs
from groove_core.config import ConfigError, GrooveConfig, validation_problems
from groove_core.embedding import EmbedderError, EmbedderSpec

if TYPE_CHECKING:
    from groove_core.context import QueryContext, SearchOption
    from groove_core.embedding import Embedder
    from groove_core.models import LegResult, SearchHit

ENTRY_POINT_GROUP = "groove"

#: Stages the seed configures in groove.toml: the hook, the distribution providing it, the
#: setting, and how to install it. The plugins are not on PyPI: the command installs one
#: from a groove checkout (its root as the current folder).
_STAGE_PACKAGES = {
    "mmr": (
        "groove_diversify",
        "groove-mmr",
        "[search.mmr] enabled = true",
        "pip install ./plugins/groove_mmr",
    ),
    "parent": (
        "groove_expand",
        "groove-parent",
        "[search.parent_retriever] enabled = true",
        "pip install ./plugins/groove_parent",
    ),
    "reranker": (
        "groove_rerank",
        "groove-reranker-bge",
        "reranker = ...",
        "pip install ./plugins/groove_reranker_bge torch==2.13.0",
    ),
}

Status = Literal["enabled", "disabled", "failed"]


@dataclass(frozen=True)
class PluginInfo:
    """One row of ``groove plugins list``."""

    name: str
    distribution: str
    version: str
    hooks: tuple[str, ...]
    status: Status
    reason: str = ""
    builtin: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "hooks": list(self.hooks),
            "status": self.status,
            "reason": self.reason,
            "builtin": self.builtin,
        }


@dataclass
class Plugins:
    """The loaded plugin set for one configuration, with typed hook calls."""

    pm: pluggy.PluginManager
    config: GrooveConfig
    infos: list[PluginInfo] = field(default_factory=list)
    settings: dict[str, BaseModel] = field(default_factory=dict)

    # -- contribution hooks ------------------------------------------------------------

    def embedder_specs(self) -> dict[str, EmbedderSpec]:
        return {name: spec for name, (spec, _plugin) in self._embedder_owners().items()}

    def _embedder_owners(self) -> dict[str, tuple[EmbedderSpec, str]]:
        """Each embedder name, its spec and the plugin contributing it (the first one, in
        pluggy's call order, when two use one name)."""
        owners: dict[str, tuple[EmbedderSpec, str]] = {}
        for impl in reversed(self.pm.hook.groove_embedders.get_hookimpls()):
            for spec in cast("list[EmbedderSpec]", impl.function() or []):
                owners.setdefault(spec.name, (spec, impl.plugin_name))
        return owners

    def make_embedder(self) -> Embedder:
        owners = self._embedder_owners()
        name = self.config.embedder.name
        if name not in owners:
            known = ", ".join(sorted(owners)) or "none"
            raise EmbedderError(
                f"unknown embedder {name!r} in [embedder] name (available: {known})"
            )
        spec, plugin = owners[name]
        if spec.configured_factory is not None:
            return spec.configured_factory(self.config.embedder, self.settings.get(plugin))
        return spec.factory(self.config.embedder)

    def search_options(self) -> list[SearchOption]:
        options: list[SearchOption] = []
        for impl in self.pm.hook.groove_search_options.get_hookimpls():
            contributed = cast("list[SearchOption] | None", impl.function())
            for option in contributed or []:
                options.append(_with_plugin(option, impl.plugin_name))
        return options

    def candidates(self, ctx: QueryContext) -> list[LegResult]:
        return [r for r in self.pm.hook.groove_candidates(ctx=ctx) if r is not None]

    def pool_size(self, ctx: QueryContext) -> int:
        requests = [n for n in self.pm.hook.groove_pool_size(ctx=ctx) if n is not None]
        return int(max([ctx.limit, *requests]))

    # -- stage hooks (identity default here, in the caller) ----------------------------

    def rerank(self, ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit]:
        out = self.pm.hook.groove_rerank(ctx=ctx, hits=hits)
        return hits if out is None else list(out)

    def diversify(self, ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit]:
        out = self.pm.hook.groove_diversify(ctx=ctx, hits=hits)
        return hits if out is None else list(out)

    def expand(self, ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit]:
        out = self.pm.hook.groove_expand(ctx=ctx, hits=hits)
        return hits if out is None else list(out)

    def highlight(self, ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit]:
        out = self.pm.hook.groove_highlight(ctx=ctx, hits=hits)
        return hits if out is None else list(out)

    def implements(self, hook: str) -> list[str]:
        """Names of the registered plugins implementing ``hook``."""
        return [impl.plugin_name for impl in getattr(self.pm.hook, hook).get_hookimpls()]


def _with_plugin(option: SearchOption, plugin: str) -> SearchOption:
    from dataclasses import replace

    return option if option.plugin else replace(option, plugin=plugin)


def _hooks_of(pm: pluggy.PluginManager, plugin: object) -> tuple[str, ...]:
    callers = pm.get_hookcallers(plugin) or []
    return tuple(sorted(c.name for c in callers))


def make_plugin_manager(
    config: GrooveConfig,
    *,
    extra: Sequence[tuple[str, object]] = (),
    entry_points: bool = True,
    validate: bool = True,
) -> Plugins:
    """Build a fresh plugin set: built-ins, ``extra`` (tests), then installed plugins.

    Raises ConfigError when the configuration cannot be honoured (a stage enabled whose
    plugin is missing, two plugins claiming one stage, an invalid plugin section).
    """
    from groove_core import __version__
    from groove_core.builtins import default_plugins

    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for name in config.plugins.disabled:
        pm.set_blocked(name)
    plugins = Plugins(pm, config)

    for name, plugin in [*default_plugins(), *extra]:
        builtin = (name, plugin) not in extra
        dist = "groove-core" if builtin else "(registered in process)"
        if pm.is_blocked(name):
            plugins.infos.append(PluginInfo(name, dist, __version__, (), "disabled", "", builtin))
            continue
        pm.register(plugin, name=name)
        hooks = _hooks_of(pm, plugin)
        plugins.infos.append(PluginInfo(name, dist, __version__, hooks, "enabled", "", builtin))

    if entry_points:
        _load_entry_points(plugins)
    if validate:
        _validate(plugins)
    return plugins


def _load_entry_points(plugins: Plugins) -> None:
    pm = plugins.pm
    for ep in sorted(
        importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name
    ):
        dist = ep.dist.name if ep.dist is not None else "?"
        version = ep.dist.version if ep.dist is not None else "?"
        if pm.is_blocked(ep.name):
            plugins.infos.append(PluginInfo(ep.name, dist, version, (), "disabled"))
            continue
        if pm.has_plugin(ep.name):
            reason = f"name {ep.name!r} is already taken by another plugin"
            plugins.infos.append(PluginInfo(ep.name, dist, version, (), "failed", reason))
            continue
        try:
            plugin = ep.load()
            pm.register(plugin, name=ep.name)
        except Exception as err:  # a broken plugin must not take groove down with it
            reason = f"{type(err).__name__}: {err}"
            plugins.infos.append(PluginInfo(ep.name, dist, version, (), "failed", reason))
            continue
        hooks = _hooks_of(pm, plugin)
        plugins.infos.append(PluginInfo(ep.name, dist, version, hooks, "enabled"))


def _validate(plugins: Plugins) -> None:
    _validate_plugin_settings(plugins)
    _check_stage_conflicts(plugins)
    _check_required_stages(plugins)


def _validate_plugin_settings(plugins: Plugins) -> None:
    config, source = plugins.config, plugins.config.source or "groove.toml"
    for impl in plugins.pm.hook.groove_config_schema.get_hookimpls():
        model = cast("type[BaseModel] | None", impl.function())
        if model is None:
            continue
        name = impl.plugin_name
        try:
            plugins.settings[name] = model.model_validate(config.plugin.get(name, {}))
        except ValidationError as err:
            problems = "; ".join(validation_problems(err))
            raise ConfigError(f"invalid [plugin.{name}] in {source}: {problems}") from None
    known = {info.name for info in plugins.infos}
    for name in config.plugin:
        if name not in known:
            raise ConfigError(f"[plugin.{name}] in {source}: no plugin named {name!r} is installed")


def _check_stage_conflicts(plugins: Plugins) -> None:
    for hook in hookspecs.STAGE_HOOKS:
        names = plugins.implements(hook)
        if len(names) > 1:
            raise ConfigError(
                f"plugins {', '.join(sorted(names))} all implement the stage {hook}; "
                "only one may be enabled: add the others to [plugins] disabled"
            )


def _check_required_stages(plugins: Plugins) -> None:
    config = plugins.config
    wanted = {
        "mmr": config.search.mmr.enabled,
        "parent": config.search.parent_retriever.enabled,
        "reranker": config.reranker is not None,
    }
    for stage, on in wanted.items():
        hook, package, setting, install = _STAGE_PACKAGES[stage]
        if on and not plugins.implements(hook):
            raise ConfigError(
                f"{setting} in {config.source or 'the configuration'} needs the plugin "
                f"{package}, which is not installed or is disabled: take it out of [plugins] "
                f"disabled, or install it from a groove checkout: {install}"
            )


def list_plugins(config: GrooveConfig) -> tuple[list[PluginInfo], str | None]:
    """Every plugin groove knows of (including disabled and failed ones), and the
    configuration problem that would stop a search, if any: listing must still work then.
    """
    plugins = make_plugin_manager(config, validate=False)
    try:
        _validate(plugins)
    except ConfigError as err:
        return plugins.infos, str(err)
    return plugins.infos, None


__all__ = [
    "EmbedderError",
    "PluginInfo",
    "Plugins",
    "list_plugins",
    "make_plugin_manager",
]
