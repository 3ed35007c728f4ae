"""One search, end to end: compile → legs → RRF → rerank → diversify → expand → highlight."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from groove_core.context import QueryContext
from groove_core.fusion import Fused, rrf
from groove_core.logs import get_logger
from groove_core.models import LegResult, SearchFilters, SearchHit, SearchResponse
from groove_core.query import QueryError, parse_query
from groove_core.weighting import weigh

if TYPE_CHECKING:
    from groove_core.embedding import Embedder
    from groove_core.plugins import Plugins
    from groove_core.storage import SearchStore
    from groove_core.store import Store

MAX_LIMIT = 200


class _Memo:
    """Embeds the query the first time a stage asks, then hands out the same vector."""

    def __init__(self, embedder: Embedder, text: str) -> None:
        self._embedder, self._text = embedder, text
        self._vector: np.ndarray | None = None

    def __call__(self) -> np.ndarray:
        if self._vector is None:
            self._vector = self._embedder.embed_query(self._text)
        return self._vector


def build_context(
    plugins: Plugins,
    store: Store,
    embedder: Embedder,
    query: str,
    *,
    limit: int,
    filters: SearchFilters,
    options: Mapping[str, Any],
) -> QueryContext:
    """Compile the query and size the pool; raises QueryError for queries that must not run."""
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise QueryError(f"limit must be an integer between 1 and {MAX_LIMIT}, got {limit!r}")
    if not query.strip():
        raise QueryError("the query is empty")
    parsed = parse_query(query)
    config = plugins.config
    ctx = QueryContext(
        query=parsed,
        limit=limit,
        leg_size=limit,
        filters=filters,
        store=store,
        config=config,
        embedder=embedder,
        options=dict(options),
        log=get_logger("groove.search"),
        plugin_settings=plugins.settings,
        _query_vector=_Memo(embedder, parsed.embed_text or parsed.text),
    )
    pool = plugins.pool_size(ctx)
    return replace(ctx, pool_size=pool, leg_size=max(pool, config.search.fusion.candidates))


def hits_for(store: SearchStore, fused: list[Fused]) -> list[SearchHit]:
    """SearchHits for fused candidates, ranked 1..n in fused order."""
    rows = store.chunk_rows([f.chunk_id for f in fused])
    hits = []
    for rank, item in enumerate((f for f in fused if f.chunk_id in rows), start=1):
        row = rows[item.chunk_id]
        hits.append(
            SearchHit(
                chunk_id=item.chunk_id,
                doc_id=row.doc_id,
                path=row.path,
                title=row.title,
                heading=row.heading,
                heading_path=row.heading_path,
                level=row.level,
                content=row.content,
                score=item.score,
                rank=rank,
                line_start=row.line_start,
                line_end=row.line_end,
                byte_start=row.byte_start,
                byte_end=row.byte_end,
                token_count=row.token_count,
                tags=row.tags,
                legs=dict(item.legs),
            )
        )
    return hits


def low_confidence(ctx: QueryContext, hits: list[SearchHit]) -> bool:
    """True when the results are probably not about the query.

    Nothing came back; or no returned hit is corroborated by two legs and even the nearest
    vector is farther than ``[search.low_confidence] max_vector_distance``. Lexical matches
    alone are weak evidence here: trigram phrases such as ``について`` match almost any
    Japanese text. The default distance (1.2) was calibrated for the default embedder on
    jsquad-ja-para: it flags 1.3% of the golden queries and 75% of off-topic ones
    (docs/retrieval-pipeline.md); other embedders need their own value.
    """
    if not hits:
        return True
    if any(len(h.legs) > 1 for h in hits):
        return False
    distances = [h.legs["vector"][1] for h in hits if "vector" in h.legs]
    if not distances:
        return not any("fts" in h.legs for h in hits)
    threshold = ctx.config.search.low_confidence.max_vector_distance
    return min(distances) > threshold


def run(ctx: QueryContext, plugins: Plugins) -> tuple[SearchResponse, list[LegResult]]:
    """Run every stage for a prepared context; also returns the legs (for --explain)."""
    legs = weigh(ctx, plugins.candidates(ctx))
    fused = rrf(legs, ctx.config.search.fusion.rrf_k, ctx.pool_size)
    hits = hits_for(ctx.store, fused)
    hits = plugins.rerank(ctx, hits)
    hits = plugins.diversify(ctx, hits)[: ctx.limit]
    hits = plugins.expand(ctx, hits)
    hits = plugins.highlight(ctx, hits)
    warnings = tuple(w.message for w in ctx.query.warnings) + tuple(ctx.notes)
    response = SearchResponse(
        results=tuple(hits),
        low_confidence=low_confidence(ctx, hits),
        filter_applied=ctx.filters.describe(),
        warnings=warnings,
    )
    return response, legs


__all__ = ["QueryError", "build_context", "run"]
