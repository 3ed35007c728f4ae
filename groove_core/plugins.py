"""Plugin discovery and the typed facade over ``pm.hook``.

Built-in features (the FTS and vector legs, match_spans, the embedders) are plugins like
any other. Third-party plugins come from the ``groove`` entry-point group; the entry-point
name is the plugin's name in ``[plugins] disabled`` and in ``groove plugins list``.
A disabled plugin is blocked before discovery, so its module is never imported.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, cast

import pluggy

from groove_core import hookspecs
from groove_core.config import ConfigError, ConfigSection, GrooveConfig, Settings, resolve_settings
from groove_core.embedding import EmbedderError, EmbedderSpec

if TYPE_CHECKING:
    from groove_core.backend import BackendSpec
    from groove_core.context import LegSpec, QueryContext, SearchOption, StageSwitch
    from groove_core.embedding import Embedder
    from groove_core.loaders import Loaders, LoaderSpec
    from groove_core.models import LegResult, SearchHit

ENTRY_POINT_GROUP = "groove"

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
    #: Stage switches it declares (``groove_stage_switches``), and whether all of them are
    #: off unless a query or groove.toml turns them on.
    stages: tuple[str, ...] = ()
    off_by_default: bool = False
    #: The embedder names it contributes (``groove_embedders``): what ``[embedder] name``
    #: may say.
    embedders: tuple[str, ...] = ()
    #: The file loaders it contributes (``groove_loaders``), each as
    #: ``name/version: .ext, ...`` (the types it claims under this configuration).
    loaders: tuple[str, ...] = ()

    @property
    def status_text(self) -> str:
        """The status as ``groove plugins list`` words it."""
        if self.status == "enabled" and self.off_by_default:
            return "installed, off by default"
        return self.status

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "hooks": list(self.hooks),
            "status": self.status,
            "reason": self.reason,
            "builtin": self.builtin,
            "stages": list(self.stages),
            "off_by_default": self.off_by_default,
            "embedders": list(self.embedders),
            "loaders": list(self.loaders),
        }


@dataclass
class Plugins:
    """The loaded plugin set for one configuration, with typed hook calls."""

    pm: pluggy.PluginManager
    config: GrooveConfig
    infos: list[PluginInfo] = field(default_factory=list)
    #: Whether every plugin is a built-in or installed one (none registered by a program
    #: in its process): another process can then make the same set from the configuration
    #: alone, as the indexer's embedding child does (groove_core.embed_worker).
    installed_only: bool = False
    settings: Settings = field(init=False)
    _switches: list[StageSwitch] | None = field(default=None, init=False, repr=False)
    _legs: list[LegSpec] | None = field(default=None, init=False, repr=False)
    _loaders: Loaders | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.settings = Settings(self.config)

    # -- contribution hooks ------------------------------------------------------------

    def embedder_specs(self) -> dict[str, EmbedderSpec]:
        """Embedders by name (the first plugin, in pluggy's call order, wins a name)."""
        found: dict[str, EmbedderSpec] = {}
        for impl in reversed(self.pm.hook.groove_embedders.get_hookimpls()):
            for spec in cast("list[EmbedderSpec]", impl.function() or []):
                found.setdefault(spec.name, spec)
        return found

    def backend_specs(self) -> dict[str, BackendSpec]:
        """Storage backends by name (the first plugin, in pluggy's call order, wins a name)."""
        found: dict[str, BackendSpec] = {}
        for impl in reversed(self.pm.hook.groove_storage_backends.get_hookimpls()):
            for spec in cast("list[BackendSpec] | None", impl.function()) or []:
                found.setdefault(spec.name, replace(spec, plugin=impl.plugin_name))
        return found

    def make_embedder(self) -> Embedder:
        specs = self.embedder_specs()
        name = self.config.embedder.name
        if name not in specs:
            known = ", ".join(sorted(specs)) or "none"
            raise EmbedderError(
                f"unknown embedder {name!r} in [embedder] name (available: {known})"
            )
        return specs[name].factory(self.config.embedder, self.settings)

    def search_options(self) -> list[SearchOption]:
        """Every per-query option, by plugin in registration order: a plugin's stage
        switches, then the options it adds."""
        from groove_core.context import SearchOption

        options = [
            SearchOption(
                s.name, "bool", s.help, plugin=s.plugin, setting=s.setting, requires=s.requires
            )
            for s in self.stage_switches()
        ]
        for impl in self.pm.hook.groove_search_options.get_hookimpls():
            contributed = cast("list[SearchOption] | None", impl.function())
            for option in contributed or []:
                options.append(_with_plugin(option, impl.plugin_name))
        order = {name: i for i, (name, _) in enumerate(self.pm.list_name_plugin())}
        return sorted(options, key=lambda o: order.get(o.plugin, len(order)))

    def stage_switches(self) -> list[StageSwitch]:
        """The optional stages' switches, each with the plugin that declared it (collected
        once: every query reads them)."""
        if self._switches is None:
            found: list[StageSwitch] = []
            for impl in self.pm.hook.groove_stage_switches.get_hookimpls():
                for switch in cast("list[StageSwitch] | None", impl.function()) or []:
                    found.append(replace(switch, plugin=impl.plugin_name))
            self._switches = found
        return list(self._switches)

    def default_on(self, switch: StageSwitch) -> bool:
        """Whether the stage runs when a query does not say (groove.toml's answer)."""
        needs = switch.requires
        return bool(self.settings.value(switch.setting)) and (
            needs is None or self.settings.value(needs) is not None
        )

    def active_stages(self, ctx: QueryContext) -> frozenset[str]:
        """The optional stages that run for ``ctx``: each switch's ``decide``, else the
        query's option, else groove.toml (raises QueryError for a stage that cannot run)."""
        from groove_core.query import OptionError

        active = set()
        for switch in self.stage_switches():
            if switch.decide is not None:
                on = switch.decide(ctx)
            else:
                given = ctx.flag(switch.name)
                on = self.default_on(switch) if given is None else given
                needs = switch.requires
                if on and needs is not None and self.settings.value(needs) is None:
                    raise OptionError(
                        f"option {switch.name!r} needs {self.settings.describe(needs)} "
                        "set in groove.toml"
                    )
            if on:
                active.add(switch.name)
        return frozenset(active)

    def leg_specs(self) -> list[LegSpec]:
        """Every candidate leg, in pluggy's call order (which fusion's float sums follow),
        each with the plugin that declared it (collected once: every query reads them)."""
        if self._legs is None:
            found: list[LegSpec] = []
            for impl in reversed(self.pm.hook.groove_legs.get_hookimpls()):
                for spec in cast("list[LegSpec] | None", impl.function()) or []:
                    found.append(replace(spec, plugin=impl.plugin_name))
            self._legs = found
        return list(self._legs)

    def loader_specs(self) -> list[LoaderSpec]:
        """Every file loader, in plugin registration order (the built-in Markdown one
        first), each with the plugin that declared it."""
        from groove_core.loaders import with_plugin

        found: list[LoaderSpec] = []
        for impl in self.pm.hook.groove_loaders.get_hookimpls():
            for spec in cast("list[LoaderSpec] | None", impl.function()) or []:
                found.append(with_plugin(spec, impl.plugin_name))
        return found

    def loaders(self) -> Loaders:
        """The loaders in force, with the types each claims under this configuration
        (collected once: every walk of the KB asks)."""
        from groove_core.loaders import build_loaders

        if self._loaders is None:
            self._loaders = build_loaders(self.loader_specs(), self.settings)
        return self._loaders

    def leg_weight(self, name: str | None) -> float:
        """The weight leg ``name``'s spec declares (1.0 for no such leg)."""
        return next((s.weight for s in self.leg_specs() if s.name == name), 1.0)

    def terms_leg(self) -> str | None:
        """The name of the first lexical leg that reports the query's terms, if any."""
        return next(
            (s.name for s in self.leg_specs() if s.kind == "lexical" and s.reports_terms), None
        )

    def candidates(
        self, ctx: QueryContext, kinds: Collection[str] | None = None
    ) -> list[LegResult]:
        """Every leg's result for ``ctx`` (only the legs of ``kinds`` when given), named
        and kinded after its spec."""
        found = []
        for spec in self.leg_specs():
            if kinds is not None and spec.kind not in kinds:
                continue
            result = spec.search(ctx)
            if result is not None:
                found.append(
                    replace(result, name=spec.name, kind=spec.kind, default_weight=spec.weight)
                )
        return found

    def pool_size(self, ctx: QueryContext) -> int:
        requests = [n for n in self.pm.hook.groove_pool_size(ctx=ctx) if n is not None]
        return int(max([ctx.limit, *requests]))

    # -- stage hooks (identity default here, in the caller) ----------------------------

    def _stage(self, hook: str, ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit]:
        out = getattr(self.pm.hook, hook)(ctx=ctx, hits=hits)
        return hits if out is None else list(out)

    def rerank(self, ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit]:
        return self._stage("groove_rerank", ctx, hits)

    def diversify(self, ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit]:
        return self._stage("groove_diversify", ctx, hits)

    def expand(self, ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit]:
        return self._stage("groove_expand", ctx, hits)

    def highlight(self, ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit]:
        return self._stage("groove_highlight", ctx, hits)

    def implements(self, hook: str) -> list[str]:
        """Names of the registered plugins implementing ``hook``."""
        return [impl.plugin_name for impl in getattr(self.pm.hook, hook).get_hookimpls()]


def _with_plugin(option: SearchOption, plugin: str) -> SearchOption:
    return option if option.plugin else replace(option, plugin=plugin)


def _hooks_of(pm: pluggy.PluginManager, plugin: object) -> tuple[str, ...]:
    callers = pm.get_hookcallers(plugin) or []
    return tuple(sorted(c.name for c in callers))


def _register(pm: pluggy.PluginManager, plugin: object, name: str) -> tuple[str, ...]:
    """Register ``plugin`` and return its hooks; a hook groove's contract does not have
    (``groove_reranks`` for ``groove_rerank``) unregisters it again and raises, so that a
    misspelling fails the plugin instead of leaving it enabled and silently unused."""
    pm.register(plugin, name=name)
    callers = pm.get_hookcallers(plugin) or []
    unknown = sorted(c.name for c in callers if not c.has_spec())
    if unknown:
        pm.unregister(plugin)
        raise _UnknownHookError(
            f"unknown hook {', '.join(unknown)}: no hook of that name in groove's contract "
            "(groove_core.hookspecs); misspelt?"
        )
    return _hooks_of(pm, plugin)


class _UnknownHookError(Exception):
    pass


def _default_plugins() -> list[tuple[str, object]]:
    """(name, plugin) pairs registered on every plugin manager unless disabled by name:
    groove's own features, registered like any third-party plugin."""
    from groove_core.builtins import embedders, highlight, legs, markdown
    from groove_core.sqlite import backend as sqlite

    return [
        ("fts", legs.FTSLeg()),
        ("vector", legs.VectorLeg()),
        ("word", legs.WordLeg()),
        ("match_spans", highlight.MatchSpans()),
        ("embedders", embedders),
        ("markdown", markdown),
        ("sqlite", sqlite),
    ]


def make_plugin_manager(
    config: GrooveConfig,
    *,
    extra: Sequence[tuple[str, object]] = (),
    entry_points: bool = True,
    validate: bool = True,
) -> Plugins:
    """Build a fresh plugin set: built-ins, ``extra`` (tests), then installed plugins.

    Raises ConfigError when the configuration cannot be honoured (a key no enabled plugin
    claims, an invalid plugin section, two plugins claiming one stage, an unknown name in
    ``[plugins] disabled``).
    """
    from groove_core import __version__

    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for name in config.plugins.disabled:
        pm.set_blocked(name)
    plugins = Plugins(pm, config, installed_only=entry_points and not extra)

    for name, plugin in [*_default_plugins(), *extra]:
        builtin = (name, plugin) not in extra
        dist = "groove-core" if builtin else "(registered in process)"
        if pm.is_blocked(name):
            plugins.infos.append(PluginInfo(name, dist, __version__, (), "disabled", "", builtin))
            continue
        try:
            hooks = _register(pm, plugin, name)
        except _UnknownHookError as err:
            plugins.infos.append(
                PluginInfo(name, dist, __version__, (), "failed", str(err), builtin)
            )
            continue
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
            hooks = _register(pm, ep.load(), ep.name)
        except _UnknownHookError as err:
            plugins.infos.append(PluginInfo(ep.name, dist, version, (), "failed", str(err)))
            continue
        except Exception as err:  # a broken plugin must not take groove down with it
            reason = f"{type(err).__name__}: {err}"
            plugins.infos.append(PluginInfo(ep.name, dist, version, (), "failed", reason))
            continue
        plugins.infos.append(PluginInfo(ep.name, dist, version, hooks, "enabled"))


def _validate(plugins: Plugins) -> None:
    _check_disabled_names(plugins)
    _resolve_settings(plugins)
    _check_stage_conflicts(plugins)
    _mark_stages(plugins)


def _check_disabled_names(plugins: Plugins) -> None:
    known = {info.name for info in plugins.infos}
    unknown = [name for name in plugins.config.plugins.disabled if name not in known]
    if unknown:
        # Installed entry points count even when not loaded (``entry_points=False``); read
        # only here, so that a start-up scans the metadata once.
        known |= {ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
        unknown = [name for name in unknown if name not in known]
    if unknown:
        names = ", ".join(repr(n) for n in unknown)
        raise ConfigError(
            f"[plugins] disabled in {plugins.config.source or 'groove.toml'} names {names}, "
            f"which groove knows no plugin by (known: {', '.join(sorted(known))})"
        )


def _resolve_settings(plugins: Plugins) -> None:
    sections: list[ConfigSection] = []
    for impl in plugins.pm.hook.groove_config_sections.get_hookimpls():
        for section in cast("list[ConfigSection] | None", impl.function()) or []:
            sections.append(replace(section, plugin=impl.plugin_name))
    names = [info.name for info in plugins.infos]
    off = [f"{i.name} ({i.distribution})" for i in plugins.infos if i.status == "disabled"]
    plugins.settings = resolve_settings(plugins.config, sections, names, off)


def _mark_stages(plugins: Plugins) -> None:
    """Note on each plugin's row the stages it switches, and whether they start off; a
    switch whose setting no section defines is the plugin's bug, said as such."""
    by_plugin: dict[str, list[StageSwitch]] = {}
    for switch in plugins.stage_switches():
        for key in (switch.setting, switch.requires):
            try:
                if key is not None:
                    plugins.settings.value(key)
            except KeyError:
                raise ConfigError(
                    f"the plugin {switch.plugin} switches its stage {switch.name!r} by the "
                    f"setting {key!r}, which neither groove nor any plugin section defines "
                    "(a bug of the plugin: disable it in [plugins] disabled)"
                ) from None
        by_plugin.setdefault(switch.plugin, []).append(switch)
    for i, info in enumerate(plugins.infos):
        switches = by_plugin.get(info.name) if info.status == "enabled" else None
        if switches:
            off = not any(plugins.default_on(s) for s in switches)
            stages = tuple(s.name for s in switches)
            plugins.infos[i] = replace(info, stages=stages, off_by_default=off)


def _check_stage_conflicts(plugins: Plugins) -> None:
    for hook in hookspecs.STAGE_HOOKS:
        names = plugins.implements(hook)
        if len(names) > 1:
            raise ConfigError(
                f"plugins {', '.join(sorted(names))} all implement the stage {hook}; "
                "only one may be enabled: add the others to [plugins] disabled"
            )


def list_plugins(
    config: GrooveConfig, *, extra: Sequence[tuple[str, object]] = ()
) -> tuple[list[PluginInfo], str | None]:
    """Every plugin groove knows of (including disabled and failed ones), and the
    configuration problem that would stop a search, if any: listing must still work then.
    ``extra``: plugins registered in process (tests), as ``make_plugin_manager`` takes them.
    """
    plugins = make_plugin_manager(config, extra=extra, validate=False)
    _mark_embedders(plugins)
    try:
        _validate(plugins)
    except ConfigError as err:
        return plugins.infos, str(err)
    _mark_loaders(plugins)
    return plugins.infos, None


def _mark_embedders(plugins: Plugins) -> None:
    """Note on each plugin's row the embedder names it contributes (names only: no model
    is built or imported)."""
    names: dict[str, list[str]] = {}
    for impl in plugins.pm.hook.groove_embedders.get_hookimpls():
        try:
            specs = cast("list[EmbedderSpec]", impl.function() or [])
        except Exception as err:  # listing must work even beside a broken plugin
            names[impl.plugin_name] = [f"(failed: {type(err).__name__}: {err})"]
            continue
        names[impl.plugin_name] = [spec.name for spec in specs]
    for i, info in enumerate(plugins.infos):
        if names.get(info.name):
            plugins.infos[i] = replace(info, embedders=tuple(names[info.name]))


def _mark_loaders(plugins: Plugins) -> None:
    """Note on each plugin's row the loaders it contributes and the types they claim."""
    names: dict[str, list[str]] = {}
    try:
        claimed = plugins.loaders().claimed
    except Exception as err:  # listing must work even beside a broken plugin
        for impl in plugins.pm.hook.groove_loaders.get_hookimpls():
            names[impl.plugin_name] = [f"(failed: {type(err).__name__}: {err})"]
        claimed = ()
    for claim in claimed:
        types = ", ".join(claim.extensions) or "no file types"
        names.setdefault(claim.spec.plugin, []).append(f"{claim.spec.identity}: {types}")
    for i, info in enumerate(plugins.infos):
        if names.get(info.name):
            plugins.infos[i] = replace(info, loaders=tuple(names[info.name]))


__all__ = [
    "EmbedderError",
    "PluginInfo",
    "Plugins",
    "list_plugins",
    "make_plugin_manager",
]
