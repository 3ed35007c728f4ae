"""The ``mmr`` plugin: stage 3 of the pipeline, MMR diversity (``[search.mmr]``).

Registered through the ``groove`` entry point ``mmr``. Inactive (config off and no
``--mmr``), every hook returns ``None``: no pool is requested and the hits pass through, so
the output is bit-identical to a groove without this plugin.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from groove_core.context import SearchOption
from groove_core.hookspecs import hookimpl

if TYPE_CHECKING:
    import numpy as np

    from groove_core.context import QueryContext
    from groove_core.models import SearchHit

NAME = "mmr"

#: The pool MMR chooses from: ``limit × POOL_FACTOR``, at least ``MIN_POOL`` (SPEC P4).
POOL_FACTOR = 5
MIN_POOL = 50


def is_active(ctx: QueryContext) -> bool:
    """The per-query ``mmr`` option when given, else ``[search.mmr] enabled``."""
    given = ctx.flag(NAME)
    return ctx.config.search.mmr.enabled if given is None else given


@hookimpl
def groove_search_options() -> list[SearchOption]:
    return [
        SearchOption(
            NAME,
            "bool",
            "Diversify results with MMR for this query (overrides [search.mmr] enabled).",
        )
    ]


@hookimpl
def groove_pool_size(ctx: QueryContext) -> int | None:
    if not is_active(ctx):
        return None
    return max(ctx.limit * POOL_FACTOR, MIN_POOL)


@hookimpl
def groove_diversify(ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit] | None:
    if not is_active(ctx):
        return None
    settings = ctx.config.search.mmr
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
