"""The ``reranker`` plugin: stage 2 of the pipeline, cross-encoder reranking
(docs/retrieval-pipeline.md, stage 2).

Registered through the ``groove`` entry point ``reranker``. Which model runs comes from the
top-level ``reranker`` key it owns (obeying ``rerank_by_default``) or, for one query, from
``--reranker MODEL`` / the MCP ``reranker`` parameter (applied unconditionally);
``--rerank/--no-rerank`` switches the configured model on or off for a query. Over MCP the
``reranker`` parameter only takes the models groove.toml lists (:func:`mcp_models`): an
agent must never make the server load, or download, a model of its choosing.

Inactive, every hook returns ``None``: no pool is requested and the hits pass through, so
the output is bit-identical to a groove without this plugin. This module imports no torch:
the model libraries load in ``backends`` when a rerank first runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from groove_core.config import ConfigSection
from groove_core.context import POOL_FACTOR, SearchOption, StageSwitch, wide_pool
from groove_core.hookspecs import hookimpl
from groove_core.query import OptionError
from groove_reranker_bge.backends import ModelKey, get_model, resolve_backend
from groove_reranker_bge.budget import Scored, score_within_budget
from groove_reranker_bge.settings import RerankerKeys, RerankerSettings

if TYPE_CHECKING:
    from groove_core.config import Settings
    from groove_core.context import QueryContext
    from groove_core.models import SearchHit

NAME = "reranker"
#: The per-query switch for the model configured in groove.toml.
SWITCH = "rerank"

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
            raise OptionError(
                f"option {NAME!r} names a model to rerank with but {SWITCH!r} is false: "
                "give one or the other"
            )
        return named
    keys = ctx.settings.get(RerankerKeys)
    configured = keys.reranker
    if configured is None:
        if switch:
            raise OptionError(
                f'option {SWITCH!r} needs a model: set reranker = "MODEL" in groove.toml, '
                "or name one for the query (--reranker MODEL)"
            )
        return None
    on = keys.rerank_by_default if switch is None else switch
    return configured if on else None


def _named_model(ctx: QueryContext) -> str | None:
    given: Any = ctx.options.get(NAME)
    if given is None:
        return None
    if not isinstance(given, str) or not given.strip():
        raise OptionError(f"option {NAME!r} must be a model name or path, got {given!r}")
    return given.strip()


# -- pool size ---------------------------------------------------------------------------


def pool_size(limit: int, *, diversified: bool, expanded: bool) -> int:
    """How many fused candidates the reranker sees (docs/retrieval-pipeline.md).

    A diversifier on (the ``mmr`` stage): ``wide_pool(limit)``, so diversity has room to
    choose. Otherwise: ``limit`` when the parent retriever (``parent``) is on, or ``limit ×
    POOL_FACTOR`` when the reranker is the only optional stage on (the seed's pre-v0.7.0
    overfetch). The parent retriever never widens the pool.
    """
    if diversified:
        return wide_pool(limit)
    if expanded:
        return limit
    return limit * POOL_FACTOR


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


def _rerank(ctx: QueryContext, model_name: str, hits: list[SearchHit]) -> Scored:
    settings = ctx.settings.get(RerankerSettings)
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
def groove_config_sections() -> list[ConfigSection]:
    return [ConfigSection("", RerankerKeys), ConfigSection(f"plugin.{NAME}", RerankerSettings)]


@hookimpl
def groove_stage_switches() -> list[StageSwitch]:
    return [
        StageSwitch(
            SWITCH,
            "rerank_by_default",
            "Rerank with the model configured in groove.toml for this query",
            requires="reranker",
            decide=lambda ctx: active_model(ctx) is not None,
        )
    ]


def mcp_models(settings: Settings) -> list[str]:
    """The models an MCP client may name: the top-level ``reranker``, then
    ``[plugin.reranker] models``, in that order, without repeats."""
    configured = settings.get(RerankerKeys).reranker
    listed = settings.get(RerankerSettings).models
    named = [configured, *listed] if configured else list(listed)
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
            agent_help="Rerank this query's results with this model",
        ),
    ]


@hookimpl
def groove_pool_size(ctx: QueryContext) -> int | None:
    if not ctx.active(SWITCH):
        return None
    return pool_size(ctx.limit, diversified=ctx.active("mmr"), expanded=ctx.active("parent"))


@hookimpl
def groove_rerank(ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit] | None:
    model_name = active_model(ctx)
    if model_name is None:
        return None
    if not hits:
        return []
    return reorder(hits, _rerank(ctx, model_name, hits).scores)
