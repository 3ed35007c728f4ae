"""The ``mmr`` plugin: stage 3 of the pipeline, MMR diversity (``[search.mmr]``).

Registered through the ``groove`` entry point ``mmr``; it owns ``[search.mmr]`` and the
``mmr`` switch. Inactive (config off and no ``--mmr``), every hook returns ``None``: no
pool is requested and the hits pass through, so the output is bit-identical to a groove
without this plugin.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from groove_core.config import ConfigSection
from groove_core.context import StageSwitch, wide_pool
from groove_core.hookspecs import hookimpl

if TYPE_CHECKING:
    import numpy as np

    from groove_core.context import QueryContext
    from groove_core.models import SearchHit

NAME = "mmr"


class MMRSettings(BaseModel):
    """MMR diversity (plugin groove_mmr)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    enabled: bool = Field(False, description="diversify the top results (needs groove-mmr)")
    lambda_: float = Field(
        0.7,
        alias="lambda",
        ge=0.0,
        le=1.0,
        description="relevance vs. diversity: 1.0 is pure relevance (MMR off, but slower)",
    )
    same_doc_penalty: float = Field(
        0.0, ge=0.0, description="extra penalty for a second chunk of an already picked document"
    )


@hookimpl
def groove_config_sections() -> list[ConfigSection]:
    return [ConfigSection("search.mmr", MMRSettings)]


@hookimpl
def groove_stage_switches() -> list[StageSwitch]:
    return [StageSwitch(NAME, "search.mmr.enabled", "Diversify results with MMR for this query")]


@hookimpl
def groove_pool_size(ctx: QueryContext) -> int | None:
    return wide_pool(ctx.limit) if ctx.active(NAME) else None


@hookimpl
def groove_diversify(ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit] | None:
    if not ctx.active(NAME):
        return None
    settings = ctx.settings.get(MMRSettings)
    if settings.lambda_ == 1.0 and settings.same_doc_penalty == 0.0:
        # With λ = 1 and no same-doc penalty the gain is the relevance alone: the order of
        # MMR off, paid for with a wider pool and an embedding read. Say so, keep going.
        ctx.log.warning(
            "mmr_lambda_is_one",
            message="[search.mmr] lambda = 1.0 makes MMR equivalent to MMR off, only slower: "
            "set enabled = false, or lower lambda to diversify",
        )
    if not hits:
        return []
    # numpy only when MMR runs: every groove start loads this plugin.
    from groove_mmr.mmr import normalize_scores, select

    picked = select(
        normalize_scores([h.score for h in hits]),
        _vectors(ctx, hits),
        [h.doc_id for h in hits],
        ctx.limit,
        lambda_=settings.lambda_,
        same_doc_penalty=settings.same_doc_penalty,
    )
    return [replace(hits[i], rank=rank) for rank, i in enumerate(picked, start=1)]


def _vectors(ctx: QueryContext, hits: list[SearchHit]) -> np.ndarray:
    """Stored embeddings of the hits, read from the index (never re-embedded).

    A chunk without a stored vector gets a zero row: similar to nothing, so it is judged by
    its relevance alone.
    """
    import numpy as np

    from groove_mmr.mmr import unit_rows

    stored = ctx.store.embeddings([h.chunk_id for h in hits])
    dim = next((len(v) for v in stored.values()), 0)
    rows = np.zeros((len(hits), dim), dtype=np.float64)
    for i, hit in enumerate(hits):
        vector = stored.get(hit.chunk_id)
        if vector is not None:
            rows[i] = vector
    return unit_rows(rows)
