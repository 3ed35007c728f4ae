"""The two built-in candidate legs: lexical (FTS5 trigram, bm25) and vector (sqlite-vec)."""

from __future__ import annotations

from groove_core.context import QueryContext
from groove_core.hookspecs import hookimpl
from groove_core.models import LegHit, LegResult


class FTSLeg:
    """bm25 over heading / context / content with the configured column weights."""

    @hookimpl
    def groove_candidates(self, ctx: QueryContext) -> LegResult | None:
        expr = ctx.query.match_expr
        if ctx.query.fts_skipped or expr is None:
            return LegResult("fts", (), {"skipped": True})
        fusion = ctx.config.search.fusion
        weights = (fusion.heading, fusion.context, fusion.content)
        rows = ctx.store.fts_search(expr, weights, ctx.leg_size, ctx.allowed_ids())
        return LegResult("fts", tuple(LegHit(cid, score) for cid, score in rows))


class VectorLeg:
    """KNN over the stored chunk embeddings (L2), agreeing with FTS on exclusions."""

    @hookimpl
    def groove_candidates(self, ctx: QueryContext) -> LegResult | None:
        excluded = ctx.excluded_ids()
        allowed = ctx.allowed_ids()
        if allowed is not None:
            allowed = allowed - excluded
            k = ctx.leg_size
        else:
            # Over-fetch by the excluded count so that dropping them still fills the leg.
            k = ctx.leg_size + len(excluded)
        rows = ctx.store.vector_search(ctx.query_vector(), k, allowed)
        kept = [LegHit(cid, dist) for cid, dist in rows if cid not in excluded]
        return LegResult("vector", tuple(kept[: ctx.leg_size]))
