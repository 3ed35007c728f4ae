"""The ``prf`` plugin: query expansion by pseudo-relevance feedback, as a lexical leg.

Registered through the ``groove`` entry point ``prf``; it owns ``[search.prf]`` and the
``prf`` switch. When the stage is active, the ``prf`` leg reads the word leg's first
``passages`` hits for the query, picks up to ``terms`` expansion terms from them
(:mod:`groove_expansion.terms`) and ranks the chunks by bm25 over the query's terms plus
those, through the word leg's own index (``ctx.store.leg_index("word")``, which every
storage backend that keeps the word leg implements). RRF fuses
it with the other legs at its own weight (``[search.fusion.weights] prf``). Inactive, the
leg returns ``None`` and the output is bit-identical to a groove without this plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from groove_core import words
from groove_core.builtins.legs import common_terms, word_terms
from groove_core.config import ConfigSection
from groove_core.context import LegSpec, StageSwitch
from groove_core.hookspecs import hookimpl
from groove_core.models import LegHit, LegResult
from groove_core.query import normalize
from groove_expansion.terms import (
    MAX_PASSAGES,
    MAX_TERMS,
    choose,
    document_idf,
    feedback_weights,
)

if TYPE_CHECKING:
    from groove_core.context import QueryContext

NAME = "prf"

#: The default ``min_terms``: a query of fewer word terms is left as it is. Keyword queries
#: (three or four words) lost rank with expansion, questions gained (README, "Short queries").
MIN_QUERY_TERMS = 5


class PRFSettings(BaseModel):
    """Query expansion by pseudo-relevance feedback (plugin groove_expansion)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(
        False,
        description="add a lexical leg for the query's words plus terms taken from its "
        "top passages (needs groove-expansion)",
    )
    passages: int = Field(
        10,
        ge=1,
        le=MAX_PASSAGES,
        description=f"top word-leg passages read for expansion terms (1-{MAX_PASSAGES})",
    )
    terms: int = Field(
        10,
        ge=1,
        le=MAX_TERMS,
        description=f"expansion terms added at most, never more than the query has (1-{MAX_TERMS})",
    )
    min_terms: int = Field(
        MIN_QUERY_TERMS,
        ge=1,
        le=words.MAX_TERMS,
        description="expand only a query of at least this many word-leg terms (stemmed "
        "words without stop words, Japanese kanji/katakana pairs, a quoted phrase as one); "
        f"a shorter one is left as it is (1-{words.MAX_TERMS})",
    )


@hookimpl
def groove_config_sections() -> list[ConfigSection]:
    return [ConfigSection("search.prf", PRFSettings)]


@hookimpl
def groove_stage_switches() -> list[StageSwitch]:
    return [
        StageSwitch(
            NAME,
            "search.prf.enabled",
            "Expand the query with terms from its top passages (pseudo-relevance feedback; "
            "questions of 5 or more content words by default)",
        )
    ]


@hookimpl
def groove_legs() -> list[LegSpec]:
    return [LegSpec(NAME, "lexical", search, score="bm25")]


def search(ctx: QueryContext) -> LegResult | None:
    if not ctx.active(NAME):
        return None
    settings = ctx.settings.get(PRFSettings)
    terms, _ = word_terms(ctx)
    index = ctx.store.leg_index("word")
    if not terms or index is None:
        return LegResult(NAME, (), {"skipped": True})
    if len(terms) < settings.min_terms:
        count = f"{len(terms)} word term{'' if len(terms) == 1 else 's'}"
        reason = f"{count}, fewer than min_terms = {settings.min_terms}"
        if ctx.flag(NAME):  # asked for on this query (--prf, MCP prf=true): say why not
            ctx.note(f"query expansion (prf) not applied: {reason}")
        return LegResult(NAME, (), {"skipped": True, "reason": reason})
    # The word leg's own query: without the terms in a large share of the chunks (their
    # bm25 cost is the leg's, and they rank nothing), the rarest always kept.
    share = ctx.config.search.lexical_common_share
    common = set(common_terms(ctx.store, terms, share)) if share else set()
    kept = [t for t in terms if t not in common]
    fusion = ctx.config.search.fusion
    weights = (fusion.heading, fusion.context, fusion.content)
    allowed, excluded = ctx.allowed_ids(), ctx.excluded_ids()
    if allowed is not None:
        allowed = allowed - excluded

    def ranked(query: list[str], size: int) -> list[LegHit]:
        # Without filters the exclusions are dropped after the query: fetch that many more.
        fetch = size if allowed is not None else size + len(excluded)
        rows = index.search(query, weights, fetch, allowed)
        return [LegHit(cid, score) for cid, score in rows if cid not in excluded][:size]

    # At most as many terms added as the query has: with bm25 weighing every term alike,
    # ten added to a three-word query would outvote it (RM3 keeps half the weight on the
    # query's own terms). And within the word leg's cap on terms (its cost bound).
    count = min(settings.terms, len(terms), words.MAX_TERMS - len(kept))
    feedback = [hit.chunk_id for hit in ranked(kept, settings.passages)] if count > 0 else []
    added = [term for term, _ in _expansion(ctx, index, feedback, terms, count)]
    meta: dict[str, Any] = {"added_terms": added, "feedback": len(feedback)}
    if not added:
        # The leg would rank exactly as the word leg does: fusing it would only weigh the
        # word leg twice.
        return LegResult(NAME, (), {**meta, "skipped": True})
    expanded = kept + added
    meta["expr"] = index.expression(expanded)
    return LegResult(NAME, tuple(ranked(expanded, ctx.leg_size)), meta)


def _expansion(
    ctx: QueryContext, index: Any, feedback: list[int], terms: list[str], count: int
) -> list[tuple[str, float]]:
    """Up to ``count`` (term, weight) from the feedback passages, best first, none of them
    a token of the query (its positive or excluded words)."""
    if not feedback:
        return []
    rows = ctx.store.chunk_rows(feedback)
    texts = [
        f"{r.heading}\n{r.context}\n{r.content}" for r in (rows[i] for i in feedback if i in rows)
    ]
    passages = [words.tokens(normalize(text), drop_stop_words=True) for text in texts]
    skip = {token for term in terms for token in term.split(" ")}
    for negative in ctx.query.negatives:
        skip.update(words.tokens(normalize(negative)))
    candidates = feedback_weights(passages, skip)
    if not candidates:
        return []
    df, chunks = index.rows(list(candidates))
    return choose(candidates, document_idf(df, chunks), count)
