"""The ``reranker`` plugin: stage 2 of the pipeline, cross-encoder reranking (SPEC P4).

Registered through the ``groove`` entry point ``reranker``. Which model runs comes from the
core's top-level ``reranker`` key (obeying ``rerank_by_default``) or, for one query, from
``--reranker MODEL`` / the MCP ``reranker`` parameter (applied unconditionally);
``--rerank/--no-rerank`` switches the configured model on or off for a query. Over MCP the
``reranker`` parameter only takes the models groove.toml lists (:func:`mcp_models`): an
agent must never make the server load, or download, a model of its choosing.

Inactive, every hook returns ``None``: no pool is requested and the hits pass through, so
the output is bit-identical to a groove without this plugin. This module imports no torch:
the model libraries load in ``backends`` when a rerank first runs.
"""

from __future__ import annotations

import functools
import importlib.metadata
import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from groove_core.context import SearchOption
from groove_core.hookspecs import hookimpl
from groove_core.query import QueryError
from groove_reranker_bge.backends import ModelKey, get_model, resolve_backend
from groove_reranker_bge.budget import Scored, score_within_budget
from groove_reranker_bge.settings import RerankerSettings

if TYPE_CHECKING:
    from pydantic import BaseModel

    from groove_core.config import GrooveConfig
    from groove_core.context import QueryContext
    from groove_core.models import SearchHit

NAME = "reranker"
#: The per-query switch for the model configured in groove.toml.
SWITCH = "rerank"

#: SPEC P4 pool sizes: ``limit × POOL_FACTOR``, at least ``MMR_MIN_POOL`` with MMR on.
POOL_FACTOR = 5
MMR_MIN_POOL = 50

#: The other optional stages whose state decides the pool: (plugin name, config switch).
_STAGE_SWITCHES: dict[str, Callable[[GrooveConfig], bool]] = {
    "mmr": lambda config: config.search.mmr.enabled,
    "parent": lambda config: config.search.parent_retriever.enabled,
}


# -- activation --------------------------------------------------------------------------


def active_model(ctx: QueryContext) -> str | None:
    """The model to rerank this query with, or None.

    A model named for the query applies unconditionally; the configured model obeys the
    ``rerank`` option when given, else ``rerank_by_default``.
    """
    named = _named_model(ctx)
    switch = ctx.flag(SWITCH)
    if named is not None:
        if switch is False:
            raise QueryError(
                f"option {NAME!r} names a model to rerank with but {SWITCH!r} is false: "
                "give one or the other"
            )
        return named
    configured = ctx.config.reranker
    if configured is None:
        if switch:
            raise QueryError(
                f'option {SWITCH!r} needs a model: set reranker = "MODEL" in groove.toml, '
                "or name one for the query (--reranker MODEL)"
            )
        return None
    on = ctx.config.rerank_by_default if switch is None else switch
    return configured if on else None


def _named_model(ctx: QueryContext) -> str | None:
    given: Any = ctx.options.get(NAME)
    if given is None:
        return None
    if not isinstance(given, str) or not given.strip():
        raise QueryError(f"option {NAME!r} must be a model name or path, got {given!r}")
    return given.strip()


# -- pool size ---------------------------------------------------------------------------


def pool_size(limit: int, *, mmr: bool, parent: bool) -> int:
    """How many fused candidates the reranker sees (SPEC P4).

    MMR on: ``limit × 5``, at least 50, so diversity has room to choose. MMR off: ``limit``
    when the parent retriever is on, or ``limit × 5`` when the reranker is the only
    optional stage on (the seed's pre-v0.7.0 overfetch). The parent retriever never widens
    the pool.
    """
    if mmr:
        return max(limit * POOL_FACTOR, MMR_MIN_POOL)
    if parent:
        return limit
    return limit * POOL_FACTOR


def stage_on(ctx: QueryContext, name: str) -> bool:
    """Whether the optional stage ``name`` runs for this query, decided as that plugin
    does (its per-query option, else its config switch) — and only when it is loaded."""
    if name in ctx.config.plugins.disabled or name not in _installed_plugins():
        return False
    given = ctx.flag(name)
    return bool(_STAGE_SWITCHES[name](ctx.config)) if given is None else given


@functools.cache
def _installed_plugins() -> frozenset[str]:
    return frozenset(ep.name for ep in importlib.metadata.entry_points(group="groove"))


# -- reranking ---------------------------------------------------------------------------


def passage_text(hit: SearchHit) -> str:
    """What the cross-encoder reads for a hit: the same text the embedder saw at indexing
    (title and heading path, then the content), so a terse chunk keeps its topic."""
    parts: list[str] = []
    for part in (hit.title, *hit.heading_path):
        if part and (not parts or parts[-1] != part):
            parts.append(part)
    context = " > ".join(parts)
    return f"{context}\n{hit.content}" if context else hit.content


def reorder(hits: Sequence[SearchHit], scores: Sequence[float]) -> list[SearchHit]:
    """The scored prefix of ``hits`` by descending score, then the unscored rest in their
    original (RRF) order, ranks renumbered from 1.

    Scored hits carry the reranker's raw score. Unscored hits (a budget ran out) carry the
    lowest score given, so ``score`` never rises down the list and MMR's min-max scaling
    sees them as no better than the weakest scored hit; with nothing scored at all, the
    RRF scores stay.
    """
    order = sorted(range(len(scores)), key=lambda i: (-_sortable(scores[i]), i))
    floor = min(scores, key=_sortable) if scores else None
    out = [replace(hits[i], score=scores[i]) for i in order]
    out += [h if floor is None else replace(h, score=floor) for h in hits[len(scores) :]]
    return [replace(h, rank=rank) for rank, h in enumerate(out, start=1)]


def _sortable(score: float) -> float:
    """NaN sorts last instead of scrambling the order."""
    return -math.inf if math.isnan(score) else score


def _settings(ctx: QueryContext) -> RerankerSettings:
    settings = ctx.plugin_config(NAME)
    return settings if isinstance(settings, RerankerSettings) else RerankerSettings()


def _rerank(ctx: QueryContext, model_name: str, hits: list[SearchHit]) -> Scored:
    settings = _settings(ctx)
    model = get_model(
        ModelKey(
            model=model_name,
            backend=resolve_backend(settings.backend),
            max_length=settings.max_length,
            device=settings.device,
            trust_remote_code=model_name in settings.trust_remote_code,
            url=settings.url or "",
            api_style=settings.api_style,
            api_key_env=settings.api_key_env,
            timeout=settings.timeout,
        )
    )
    query = ctx.query.embed_text or ctx.query.text
    scored = score_within_budget(
        model.score,
        [(query, passage_text(h)) for h in hits],
        batch_size=settings.batch_size,
        budget_ms=settings.rerank_budget_ms,
        prior_ms_per_item=model.ms_per_pair,
    )
    if scored.ms_per_item is not None:
        model.ms_per_pair = scored.ms_per_item
    if not scored.complete:
        message = (
            f"rerank_budget_ms = {settings.rerank_budget_ms:g} let the reranker score "
            f"{len(scored.scores)} of {scored.total} candidates; the rest keep their RRF "
            "order after them"
        )
        ctx.note(message)
        ctx.log.warning(
            "reranker_budget_exceeded",
            message=message,
            model=model_name,
            scored=len(scored.scores),
            candidates=scored.total,
            elapsed_ms=round(scored.elapsed_ms, 1),
        )
    return scored


# -- hooks -------------------------------------------------------------------------------


@hookimpl
def groove_config_schema() -> type[BaseModel]:
    return RerankerSettings


def mcp_models(config: GrooveConfig) -> list[str]:
    """The models an MCP client may name: the top-level ``reranker``, then
    ``[plugin.reranker] models``, in that order, without repeats."""
    raw = config.plugin.get(NAME, {})
    listed = RerankerSettings.model_validate(raw).models if isinstance(raw, dict) else ()
    named = [config.reranker, *listed] if config.reranker else list(listed)
    return list(dict.fromkeys(m.strip() for m in named if m and m.strip()))


@hookimpl
def groove_search_options() -> list[SearchOption]:
    return [
        SearchOption(
            NAME,
            "str",
            "Rerank this query with this cross-encoder (hub name or local directory), "
            "whatever rerank_by_default says. Over MCP: one of the models groove.toml lists.",
            choices=mcp_models,
        ),
        SearchOption(
            SWITCH,
            "bool",
            "Rerank with the model configured in groove.toml for this query "
            "(overrides rerank_by_default).",
        ),
    ]


@hookimpl
def groove_pool_size(ctx: QueryContext) -> int | None:
    if active_model(ctx) is None:
        return None
    return pool_size(ctx.limit, mmr=stage_on(ctx, "mmr"), parent=stage_on(ctx, "parent"))


@hookimpl
def groove_rerank(ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit] | None:
    model_name = active_model(ctx)
    if model_name is None:
        return None
    if not hits:
        return []
    return reorder(hits, _rerank(ctx, model_name, hits).scores)
