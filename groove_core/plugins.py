"""Plugin discovery and the typed facade over ``pm.hook``.

Built-in features (the FTS and vector legs, match_spans, the embedders) are plugins like
any other. Third-party plugins come from the ``groove`` entry-point group; the entry-point
name is the plugin's name in ``[plugins] disabled`` and in ``groove plugins list``.
A disabled plugin is blocked before discovery, so its module is never imported.

Every call into a plugin's code goes through :meth:`Plugins.calling`: an error a plugin
raises on purpose (a :class:`~groove_core.errors.GrooveError`, whose message is the whole
story) passes as it is; anything else (a ``TypeError`` of a factory that takes the wrong
arguments, an ``AttributeError``) becomes a :class:`PluginError`, one line naming the
plugin, its distribution and the hook, never a traceback. Such an error stops the command:
a plugin's part that fails cannot be left out silently (an index run without a loader's
file types would remove their files from the index; a search or an evaluation without a
stage would not be the one asked for). A loader failing on one file is that file's skip
reason instead (:meth:`groove_core.loaders.Loaders.load`): the others are indexed.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import inspect
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, cast

import pluggy

from groove_core import hookspecs
from groove_core.config import ConfigError, ConfigSection, GrooveConfig, Settings, resolve_settings
from groove_core.embedding import EmbedderError, EmbedderSpec, WrappedEmbedder
from groove_core.errors import GrooveError

if TYPE_CHECKING:
    import numpy as np

    from groove_core.backend import BackendSpec
    from groove_core.context import (
        ExclusionScan,
        LegSpec,
        Lexicon,
        QueryContext,
        SearchOption,
        StageSwitch,
    )
    from groove_core.embedding import Embedder
    from groove_core.leg_index import BoundIndex
    from groove_core.loaders import Loaders, LoaderSpec
    from groove_core.models import LegResult, SearchHit

ENTRY_POINT_GROUP = "groove"


class _GuardedIndex:
    """A plugin's leg index whose methods fail as one line naming the plugin."""

    def __init__(self, index: Any, plugins: Plugins, plugin: str, what: str) -> None:
        self._index, self._plugins, self._plugin, self._what = index, plugins, plugin, what

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._index, name)
        if not callable(value):
            return value
        return self._plugins._guarded(value, self._plugin, f"{self._what}: {name}")


class PluginError(ConfigError):
    """A plugin's code failed where groove called it, unexpectedly (not an error of its
    own with a message for the user): the message names the plugin, its distribution and
    the hook, and says how to disable it. A configuration error, since disabling the
    plugin (``[plugins] disabled``) is what the user can do: every front-end shows it as
    its one line (an MCP tool's error included)."""


Status = Literal["enabled", "disabled", "failed"]
#: The distribution of a plugin a program registered in its process (tests), in brackets.
IN_PROCESS = "registered in process"


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
    #: Its distribution's licence, as its metadata says it (``License-Expression``, else
    #: the first line of ``License``): a plugin that ships or derives data under a licence
    #: of its own names it there (``Apache-2.0 AND CC-BY-SA-4.0``).
    licence: str = ""

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
            "licence": self.licence,
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
    #: The plugin that contributed each embedder name (:meth:`embedder_specs`).
    _embedder_plugins: dict[str, str] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.settings = Settings(self.config)

    # -- calling plugin code -------------------------------------------------------------

    @contextlib.contextmanager
    def calling(self, plugin: str, hook: str) -> Iterator[None]:
        """Around a call into ``plugin``'s code for ``hook`` (the hook, or what of its
        contribution is called: ``groove_legs: the search of leg 'title'``): an
        unexpected exception becomes a :class:`PluginError`. Passed as they are: a
        GrooveError; a database error (the index's, which the caller names as damage or
        the environment); anything from groove's own built-in plugins (groove's bugs keep
        their traceback where the front-end logs one)."""
        try:
            yield
        except GrooveError:
            raise
        except Exception as err:
            if _database_error(err) or self._builtin(plugin):
                raise
            raise self.failure(plugin, hook, err) from err

    @contextlib.contextmanager
    def calling_through(self, impls: Sequence[Any], hook: str) -> Iterator[None]:
        """Around a call of ``hook`` through pluggy (some plugin wraps it: ``impls``, its
        implementations): a failure is :meth:`calling`'s, blamed on the implementation it
        came from (:func:`blame`), not on all of them."""
        try:
            yield
        except Exception as err:
            with self.calling(blame(impls, err), hook):
                raise

    def _builtin(self, plugin: str) -> bool:
        return any(i.builtin for i in self.infos if i.name == plugin)

    def failure(self, plugin: str, hook: str, err: BaseException) -> PluginError:
        """The one-line error of ``plugin`` failing with ``err`` in ``hook``."""
        info = next((i for i in self.infos if i.name == plugin), None)
        if info is None or info.distribution == f"({IN_PROCESS})":
            where = "registered in process"
        elif info.builtin:
            where = f"built into {info.distribution} {info.version}"
        else:
            where = f"distribution {info.distribution} {info.version}"
        lines = str(err).strip().splitlines()
        detail = f"{type(err).__name__}: {lines[0][:300]}" if lines else type(err).__name__
        return PluginError(
            f"the plugin {plugin!r} ({where}) failed in {hook}: {detail} (a bug of the "
            f"plugin: update it, or disable it with [plugins] disabled = [{plugin!r}])"
        )

    def _contributions(self, hook: str) -> Iterator[tuple[str, list[Any]]]:
        """(plugin, what it returned) for each implementation of the contribution hook
        ``hook``, in registration order; a result that is not a list is that plugin's
        failure too."""
        for impl in getattr(self.pm.hook, hook).get_hookimpls():
            with self.calling(impl.plugin_name, hook):
                found = impl.function()
                if found is not None and not isinstance(found, (list, tuple)):
                    raise TypeError(f"returned {type(found).__name__}, not a list")
            yield impl.plugin_name, list(found or [])

    def _guarded(self, fn: Callable[..., Any], plugin: str, hook: str) -> Callable[..., Any]:
        """``fn`` (a plugin's callable) with its unexpected failures as :class:`PluginError`."""

        def call(*args: Any, **kwargs: Any) -> Any:
            with self.calling(plugin, hook):
                return fn(*args, **kwargs)

        return call

    # -- contribution hooks ------------------------------------------------------------

    def embedder_specs(self) -> dict[str, EmbedderSpec]:
        """Embedders by name (the first plugin, in pluggy's call order, wins a name)."""
        found: dict[str, EmbedderSpec] = {}
        for plugin, specs in reversed(list(self._contributions("groove_embedders"))):
            for spec in cast("list[EmbedderSpec]", specs):
                if spec.name not in found:
                    found[spec.name] = spec
                    self._embedder_plugins[spec.name] = plugin
        return found

    def backend_specs(self) -> dict[str, BackendSpec]:
        """Storage backends by name (the first plugin, in pluggy's call order, wins a name),
        each factory guarded (:meth:`calling`)."""
        found: dict[str, BackendSpec] = {}
        for plugin, specs in reversed(list(self._contributions("groove_storage_backends"))):
            for spec in cast("list[BackendSpec]", specs):
                if spec.name in found:
                    continue
                hook = f"groove_storage_backends: the factory of backend {spec.name!r}"
                factory = self._guarded(spec.factory, plugin, hook)
                found[spec.name] = replace(spec, plugin=plugin, factory=factory)
        return found

    def make_embedder(self) -> Embedder:
        specs = self.embedder_specs()
        name = self.config.embedder.name
        if name not in specs:
            known = ", ".join(sorted(specs)) or "none"
            raise EmbedderError(
                f"unknown embedder {name!r} in [embedder] name (available: {known})"
            )
        plugin = self._embedder_plugins[name]
        hook = f"groove_embedders: the factory of embedder {name!r}"
        with self.calling(plugin, hook):
            embedder = specs[name].factory(self.config.embedder, self.settings)
        if self._builtin(plugin):
            return embedder
        return _GuardedEmbedder(embedder, self, plugin, name)

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
        for plugin, contributed in self._contributions("groove_search_options"):
            for option in cast("list[SearchOption]", contributed):
                options.append(_with_plugin(option, plugin))
        order = {name: i for i, (name, _) in enumerate(self.pm.list_name_plugin())}
        return sorted(options, key=lambda o: order.get(o.plugin, len(order)))

    def stage_switches(self) -> list[StageSwitch]:
        """The optional stages' switches, each with the plugin that declared it (collected
        once: every query reads them)."""
        if self._switches is None:
            found: list[StageSwitch] = []
            for plugin, switches in self._contributions("groove_stage_switches"):
                for switch in cast("list[StageSwitch]", switches):
                    found.append(replace(switch, plugin=plugin))
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
                hook = f"groove_stage_switches: the decision of stage {switch.name!r}"
                with self.calling(switch.plugin, hook):
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
            for plugin, specs in reversed(list(self._contributions("groove_legs"))):
                for spec in cast("list[LegSpec]", specs):
                    found.append(replace(spec, plugin=plugin))
            self._legs = found
        return list(self._legs)

    def lexicons(self) -> dict[str, Lexicon]:
        """Each leg's :class:`~groove_core.context.Lexicon`, by leg name."""
        return {s.name: s.lexicon for s in self.leg_specs() if s.lexicon is not None}

    def terms_lexicon(self) -> Lexicon | None:
        """The lexicon of the first leg that reports terms and declares one."""
        return next(
            (s.lexicon for s in self.leg_specs() if s.reports_terms and s.lexicon is not None),
            None,
        )

    def exclusion_scan(self) -> ExclusionScan | None:
        """The exclusion scan of the first leg that declares one (``LegSpec.excludes``)."""
        for spec in self.leg_specs():
            if spec.excludes is not None:
                if self._builtin(spec.plugin):
                    return spec.excludes
                hook = f"groove_legs: the exclusion scan of leg {spec.name!r}"
                return cast("ExclusionScan", self._guarded(spec.excludes, spec.plugin, hook))
        return None

    def leg_indexes(self, backend: str) -> tuple[BoundIndex, ...]:
        """The enabled legs' indexes ``backend`` can keep (``groove_core.leg_index``), each
        factory guarded (:meth:`calling`): a failing one is one line naming its plugin."""
        from groove_core.leg_index import LegIndexImpl, resolve

        specs = []
        for leg in self.leg_specs():
            if leg.index is not None:
                specs.append(replace(leg.index, plugin=leg.plugin))
        impls = []
        for plugin, found in self._contributions("groove_leg_indexes"):
            for impl in cast("list[LegIndexImpl]", found):
                impls.append(replace(impl, plugin=plugin))
        return tuple(
            bound
            if self._builtin(bound.plugin)
            else replace(bound, factory=self._guarded_index(bound, backend))
            for bound in resolve(specs, impls, backend)
        )

    def _guarded_index(self, bound: BoundIndex, backend: str) -> Callable[[Any], Any]:
        """``bound``'s factory, and every method of the index it makes, with unexpected
        failures as :class:`PluginError` (a plugin's index is called while indexing too)."""
        what = f"the index {bound.name!r} on the {backend!r} backend"
        factory = self._guarded(bound.factory, bound.plugin, what)

        def make(site: Any) -> Any:
            return _GuardedIndex(factory(site), self, bound.plugin, what)

        return make

    def loader_specs(self) -> list[LoaderSpec]:
        """Every file loader, in plugin registration order (the built-in Markdown one
        first), each with the plugin that declared it."""
        from groove_core.loaders import with_plugin

        found: list[LoaderSpec] = []
        for plugin, specs in self._contributions("groove_loaders"):
            for spec in cast("list[LoaderSpec]", specs):
                found.append(with_plugin(spec, plugin))
        return found

    def loaders(self) -> Loaders:
        """The loaders in force, with the types each claims under this configuration
        (collected once: every walk of the KB asks)."""
        from groove_core.loaders import build_loaders

        if self._loaders is None:
            self._loaders = build_loaders(self.loader_specs(), self.settings, self.calling)
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
            with self.calling(spec.plugin, f"groove_legs: the search of leg {spec.name!r}"):
                result = spec.search(ctx)
            if result is not None:
                found.append(
                    replace(
                        result,
                        name=spec.name,
                        kind=spec.kind,
                        default_weight=spec.weight,
                        bridges_scripts=spec.bridges_scripts,
                    )
                )
        return found

    def pool_size(self, ctx: QueryContext) -> int:
        requests = []
        for plugin, n in self._each("groove_pool_size", ctx=ctx):
            if n is not None:
                with self.calling(plugin, "groove_pool_size"):
                    requests.append(int(n))
        return int(max([ctx.limit, *requests]))

    # -- stage hooks (identity default here, in the caller) ----------------------------

    def _stage(self, hook: str, ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit]:
        # Firstresult hooks, each implemented by one plugin at most (_check_stage_conflicts).
        for plugin, out in self._each(hook, ctx=ctx, hits=hits):
            if out is not None:
                with self.calling(plugin, hook):
                    return list(out)
        return hits

    def _each(self, hook: str, **kwargs: Any) -> Iterator[tuple[str, Any]]:
        """(plugin, answer) for each implementation of ``hook``, called as pluggy would
        (in its order, each given the arguments it names), each call guarded. A hook
        some plugin wraps (a ``wrapper`` implementation) is called through pluggy, any
        failure blamed on all its implementations."""
        caller = getattr(self.pm.hook, hook)
        impls = list(reversed(caller.get_hookimpls()))
        if any(impl.hookwrapper or impl.wrapper for impl in impls):
            with self.calling_through(impls, hook):
                answers = caller(**kwargs)
            # What comes out went through the outermost wrapper: its plugin answers for it.
            outer = _outermost(impls)
            first = caller.spec is not None and caller.spec.opts.get("firstresult")
            yield from ((outer, answer) for answer in ([answers] if first else answers))
            return
        for impl in impls:
            with self.calling(impl.plugin_name, hook):
                answer = impl.function(*[kwargs[name] for name in impl.argnames])
            yield impl.plugin_name, answer

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


def blame(impls: Sequence[Any], err: BaseException) -> str:
    """The plugin of the implementation (among pluggy's ``impls`` of one hook) that
    ``err`` came from: the innermost frame of its traceback that runs one of their
    functions (a wrapper that passes an inner failure on is not the one that failed);
    where none does (pluggy refused a wrapper), the outermost wrapper's. A
    :class:`PluginError` is traced by the error it was made from."""
    codes: dict[Any, str] = {}
    for impl in impls:
        code = getattr(inspect.unwrap(impl.function), "__code__", None)
        if code is not None:
            codes.setdefault(code, impl.plugin_name)
    seen: BaseException | None = err
    while seen is not None:  # a PluginError made of it: the error it was made from
        found = None
        tb = seen.__traceback__
        while tb is not None:
            found = codes.get(tb.tb_frame.f_code, found)
            tb = tb.tb_next
        if found is not None:
            return found
        seen = seen.__cause__
    return _outermost(impls)


def _outermost(impls: Sequence[Any]) -> str:
    """The plugin of the first wrapper pluggy calls among ``impls`` (in calling order),
    else of the first implementation."""
    wrappers = [i for i in impls if i.hookwrapper or i.wrapper]
    return str((wrappers or list(impls))[0].plugin_name)


def _database_error(err: BaseException) -> bool:
    """Whether ``err`` is a database driver's error (PEP 249 names its classes alike:
    sqlite3's, psycopg's): the index's trouble met in a plugin's query, not the plugin's."""
    return any(c.__name__ in ("DatabaseError", "InterfaceError") for c in type(err).__mro__)


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
        dist = "groove-core" if builtin else f"({IN_PROCESS})"
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
        # the row as it starts: what a failure or success below changes is said with it
        row = PluginInfo(ep.name, dist, version, (), "disabled", licence=_licence(ep.dist))
        if pm.is_blocked(ep.name):
            plugins.infos.append(row)
            continue
        if pm.has_plugin(ep.name):
            reason = f"name {ep.name!r} is already taken by another plugin"
            plugins.infos.append(replace(row, status="failed", reason=reason))
            continue
        try:
            hooks = _register(pm, ep.load(), ep.name)
        except _UnknownHookError as err:
            plugins.infos.append(replace(row, status="failed", reason=str(err)))
            continue
        except Exception as err:  # a broken plugin must not take groove down with it
            reason = f"{type(err).__name__}: {err}"
            plugins.infos.append(replace(row, status="failed", reason=reason))
            continue
        plugins.infos.append(replace(row, hooks=hooks, status="enabled"))


#: The longest licence text ``groove plugins list`` shows (metadata is the plugin's say).
MAX_LICENCE = 80


def _licence(dist: importlib.metadata.Distribution | None) -> str:
    """A distribution's licence from its metadata: its SPDX ``License-Expression``, else
    the first line of its free-text ``License``; "" when it says none."""
    if dist is None:
        return ""
    meta = dist.metadata
    found = meta.get_all("License-Expression") or meta.get_all("License") or [""]
    lines = str(found[0]).strip().splitlines()
    return lines[0][:MAX_LICENCE] if lines else ""


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
    for plugin, found in plugins._contributions("groove_config_sections"):
        for section in cast("list[ConfigSection]", found):
            sections.append(replace(section, plugin=plugin))
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
    except ConfigError as err:  # PluginError too
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
    "PluginError",
    "PluginInfo",
    "Plugins",
    "list_plugins",
    "make_plugin_manager",
]


class _GuardedEmbedder(WrappedEmbedder):
    """A plugin's embedder whose query embedding fails as one line naming the plugin, its
    distribution and the call (:meth:`Plugins.calling`), as an :class:`EmbedderError`: a
    query is embedded inside the vector leg, where the failure read as a traceback. An
    index run names the texts and chunk a failing batch held itself (groove_core.indexer)."""

    def __init__(self, inner: Embedder, plugins: Plugins, plugin: str, name: str) -> None:
        self._inner = inner
        self._plugins = plugins
        self._plugin = plugin
        self._name = name

    @property
    def inner(self) -> Embedder:
        return self._inner

    def embed_query(self, text: str) -> np.ndarray:
        hook = f"groove_embedders: the embed_query of embedder {self._name!r}"
        try:
            with self._plugins.calling(self._plugin, hook):
                return self._inner.embed_query(text)
        except PluginError as err:
            raise EmbedderError(str(err)) from err.__cause__
