"""The built-in candidate legs: lexical (FTS5 trigram, bm25), word (FTS5 over script-boundary
tokens, bm25; see groove_core.words) and vector (sqlite-vec)."""

from __future__ import annotations

from groove_core import words
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


class WordLeg:
    """bm25 over the word table: finds the one- and two-character Japanese words (状態, 型)
    that the trigram leg cannot, and English words stemmed for plurals.

    Exclusions are the same chunk ids the other legs drop (ADR-0011), filters are applied
    inside the query, and the leg reports its expression for ``--explain``.
    """

    @hookimpl
    def groove_candidates(self, ctx: QueryContext) -> LegResult | None:
        terms, truncated = words.query_terms(ctx.query.positive_parts)
        expr = words.match_expr(terms)
        if expr is None:
            # e.g. a query of hiragana only: nothing this leg can look up.
            return LegResult("word", (), {"skipped": True})
        if truncated:
            ctx.note(f"the word leg used only the first {words.MAX_TERMS} distinct terms")
        excluded = ctx.excluded_ids()
        allowed = ctx.allowed_ids()
        if allowed is not None:
            allowed = allowed - excluded
            k = ctx.leg_size
        else:
            k = ctx.leg_size + len(excluded)
        fusion = ctx.config.search.fusion
        weights = (fusion.heading, fusion.context, fusion.content)
        rows = words.search(ctx.store.conn, expr, weights, k, allowed)
        kept = [LegHit(cid, score) for cid, score in rows if cid not in excluded]
        return LegResult("word", tuple(kept[: ctx.leg_size]), {"expr": expr, "terms": terms})
