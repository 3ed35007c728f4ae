"""One eval command's state: the KB, its index, the golden set, and the variants to run.

The store and the (caching) embedder are opened once and shared by every variant, so an
ablation or a tuning grid embeds each query exactly once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from groove_core.evaluation.golden import (
    GoldenError,
    GoldenSet,
    ResolvedQuery,
    load_golden,
    resolve,
)
from groove_core.evaluation.metrics import DEFAULT_SEED, METRIC_NAMES, Estimate, bootstrap
from groove_core.evaluation.runner import (
    CachedEmbedder,
    GoldenSearcher,
    Outcomes,
    Progress,
    Stage,
    make_searcher,
    run_golden,
    with_changes,
)

if TYPE_CHECKING:
    from groove_core.app import Groove
    from groove_core.config import ConfigSection, GrooveConfig

DEFAULT_GOLDEN = "golden.jsonl"


def summarize(outcomes: Outcomes, seed: int = DEFAULT_SEED) -> dict[str, Estimate]:
    """Mean and 95% interval of every metric (a distinct seed stream per metric)."""
    return {m: bootstrap(outcomes.values(m), seed=seed + i) for i, m in enumerate(METRIC_NAMES)}


@dataclass
class Variant:
    """A named configuration measured at a stage (an ablation row)."""

    name: str
    config: GrooveConfig
    stage: Stage
    note: str = ""


@dataclass
class EvalSession:
    app: Groove
    golden: GoldenSet
    queries: list[ResolvedQuery]
    embedder: CachedEmbedder
    _searchers: dict[str, GoldenSearcher] = field(default_factory=dict)

    @classmethod
    def open(cls, kb: Path, config_path: Path | None, golden_path: Path | None) -> EvalSession:
        from groove_core.app import Groove

        app = Groove.open(kb, config_path)
        golden = load_golden(golden_path or _default_golden(kb))
        indexed = frozenset(app.store.doc_states())
        queries = resolve(golden, kb, indexed)
        if not any(q.grades for q in queries):
            sample = next(iter(golden.queries[0].grades))
            raise GoldenError(
                f"none of the expected documents in {golden.path} is in the index of {kb} "
                f"(e.g. {sample!r}); is --kb the right folder, and is it indexed?"
            )
        return cls(app, golden, queries, CachedEmbedder(app.embedder))

    @property
    def config(self) -> GrooveConfig:
        return self.app.config

    def searcher(self, config: GrooveConfig | None = None) -> GoldenSearcher:
        """A searcher per distinct configuration, over the shared store and embedder."""
        import json

        from groove_core.pipeline import Searcher

        config = config or self.config
        key = json.dumps(config.to_data(), sort_keys=True, default=str)
        if key not in self._searchers:
            if config is self.config:
                inner = Searcher(self.app.plugins, self.app.store, self.embedder)
                self._searchers[key] = GoldenSearcher(inner)
            else:
                self._searchers[key] = make_searcher(config, self.app.store, self.embedder)
        return self._searchers[key]

    def run(
        self,
        config: GrooveConfig | None = None,
        *,
        stage: Stage,
        limit: int,
        progress: Progress | None = None,
    ) -> Outcomes:
        searcher = self.searcher(config)
        return run_golden(searcher, self.queries, stage=stage, limit=limit, progress=progress)

    def missing(self) -> list[tuple[str, str]]:
        """(query key, expected path) pairs that are not in the index."""
        return [(q.golden.key, m) for q in self.queries for m in q.missing]


def _default_golden(kb: Path) -> Path:
    path = kb / DEFAULT_GOLDEN
    if not path.exists():
        raise GoldenError(f"no golden file given and {path} does not exist: use --golden FILE")
    return path


# -- ablation ----------------------------------------------------------------------------


def ablation_variants(session: EvalSession) -> list[Variant]:
    """Lexical only, vector only, hybrid (stage 1), then hybrid plus each optional stage.

    "Lexical only" disables every plugin providing a leg of another kind, "vector only"
    every plugin providing a leg that is not a vector leg (by the kinds their
    ``groove_legs`` declare: a plugin's leg joins the row of its kind); both rows are
    there when legs of both kinds are. The optional stages are those the enabled plugins
    switch (``groove_stage_switches``).
    A stage that is off in groove.toml gets a row with it switched on (marked), so
    ``--ablate`` also answers "would this stage help here?". A stage that needs a setting
    groove.toml leaves unset (e.g. a model) gets no row.
    """
    config, plugins = session.config, session.app.plugins
    disabled = list(config.plugins.disabled)
    rows: list[Variant] = []
    specs = plugins.leg_specs()
    if {"lexical", "vector"} <= {s.kind for s in specs}:
        for name, kind in (("lexical only", "lexical"), ("vector only", "vector")):
            others = dict.fromkeys(s.plugin for s in specs if s.kind != kind)
            owned = [s for s in plugins.settings.sections if s.plugin in others]
            rows.append(_leg_variant(name, config, [*disabled, *others], owned))
    rows.append(Variant("hybrid (stage 1)", config, "candidates"))
    switches = plugins.stage_switches()
    all_off = {s.setting: False for s in switches}
    on_count = 0
    for switch in switches:
        needs = switch.requires
        if needs is not None and plugins.settings.value(needs) is None:
            continue
        on = plugins.default_on(switch)
        on_count += on
        changes = {**all_off, switch.setting: True}
        note = "" if on else "off in groove.toml: switched on, its other settings as configured"
        rows.append(
            Variant(f"hybrid + {switch.plugin}", with_changes(config, changes), "full", note)
        )
    if on_count > 1:
        rows.append(Variant("full pipeline (as configured)", config, "full"))
    return rows


def _leg_variant(
    name: str, config: GrooveConfig, disabled: Sequence[str], owned: Sequence[ConfigSection]
) -> Variant:
    """``config`` with ``disabled`` plugins, and without the keys of theirs groove.toml
    sets (``owned``: their sections): a section no enabled plugin provides is an error."""
    dropped = {key for section in owned for key in section.owned_keys()}
    kept = {k: v for k, v in config.unclaimed.items() if k not in dropped}
    trimmed = config.model_copy(update={"unclaimed": kept})
    return Variant(name, with_changes(trimmed, {"plugins.disabled": list(disabled)}), "candidates")
