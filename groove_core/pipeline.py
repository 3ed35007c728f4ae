"""One search, end to end: compile → legs → RRF → rerank → diversify → expand → highlight."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Unpack

import numpy as np

from groove_core.config import MAX_LIMIT, ConfigError
from groove_core.context import QueryContext
from groove_core.embedding import checked_vectors, embedding_input
from groove_core.fusion import Fused, fuse, leg_scales
from groove_core.logs import get_logger
from groove_core.models import LegResult, SearchHit, SearchResponse
from groove_core.query import OptionError, QueryError, parse_query
from groove_core.query_store import QueryStore
from groove_core.search_request import SearchArgs, SearchRequest
from groove_core.storage import semantic_note
from groove_core.weighting import leg_kinds, weigh

if TYPE_CHECKING:
    from pathlib import Path

    from groove_core.config import GrooveConfig
    from groove_core.embedding import Embedder
    from groove_core.plugins import Plugins
    from groove_core.storage import IndexStore, SearchStore


class _Memo:
    """Embeds the query the first time a stage asks, then hands out the same vector."""

    def __init__(self, embedder: Embedder, text: str) -> None:
        self._embedder, self._text = embedder, text
        self._vector: np.ndarray | None = None

    def __call__(self) -> np.ndarray:
        if self._vector is None:
            embedder = self._embedder
            vector = embedder.embed_query(embedding_input(self._text, query=True))
            shape = (1, embedder.dim)
            checked = checked_vectors(np.reshape(vector, (1, -1)), *shape, embedder.identity)
            self._vector = checked[0]
        return self._vector


class Searcher:
    """One search end to end, for a plugin set over an open index and an embedder.

    ``context`` compiles a query, decides the active optional stages and sizes the pool;
    ``candidates`` runs and weighs the legs; ``pool`` fuses them into the hits stage 2
    receives; ``run`` runs every stage and builds the response, with stale hits marked and
    a partial index named when a KB folder is given. The CLI, the MCP server, evaluation,
    the test helpers and the benchmarks all search through this one object.
    """

    def __init__(
        self, plugins: Plugins, store: IndexStore, embedder: Embedder, *, kb: Path | None = None
    ) -> None:
        self.plugins, self.store, self.embedder, self.kb = plugins, store, embedder, kb

    @property
    def config(self) -> GrooveConfig:
        return self.plugins.config

    def context(self, query: str | SearchRequest, **args: Unpack[SearchArgs]) -> QueryContext:
        """Compile the query and size the pool; raises QueryError for queries that must
        not run. ``limit`` defaults to ``[search] default_limit``."""
        request = SearchRequest.of(query, **args)
        config, limit = self.config, request.limit
        limit = config.search.default_limit if limit is None else limit
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
            raise OptionError(f"limit must be an integer between 1 and {MAX_LIMIT}, got {limit!r}")
        if not request.query.strip():
            raise QueryError("the query is empty")
        parsed = parse_query(request.query, rarity=self._rarity)
        ctx = QueryContext(
            query=parsed,
            limit=limit,
            leg_size=limit,
            filters=request.filters,
            store=QueryStore(self.store),
            config=config,
            embedder=self.embedder,
            options=dict(request.options),
            log=get_logger("groove.search"),
            settings=self.plugins.settings,
            _query_vector=_Memo(self.embedder, parsed.embed_text or parsed.text),
            lexicons=self.plugins.lexicons(),
            exclusion=self.plugins.exclusion_scan(),
        )
        ctx = replace(ctx, active_stages=self.plugins.active_stages(ctx))
        pool = self.plugins.pool_size(ctx)
        return replace(ctx, pool_size=pool, leg_size=max(pool, config.search.fusion.candidates))

    def _rarity(self, phrases: Sequence[str]) -> list[int | None]:
        """Chunks holding each phrase's rarest word, by the lexicon of the first leg that
        reports terms (``LegSpec.lexicon``: the word leg's vocabulary); asked only for a
        query with more phrases than the cap. None for every phrase without such a leg."""
        lexicon = self.plugins.terms_lexicon()
        if lexicon is None:
            return [None] * len(phrases)
        split = [lexicon.tokens(p) for p in phrases]
        counts, _ = lexicon.rows(self.store, [t for found in split for t in found])
        return [min((counts[t] for t in found if counts.get(t)), default=None) for found in split]

    def candidates(self, ctx: QueryContext) -> list[LegResult]:
        """Every leg's list, weighed for fusion (docs/retrieval-pipeline.md, "Fusion")."""
        return weigh(ctx, self.plugins.candidates(ctx))

    def fuse(self, ctx: QueryContext, legs: list[LegResult], size: int) -> list[Fused]:
        fusion = ctx.config.search.fusion
        return fuse(legs, fusion.method, fusion.rrf_k, size, leg_scales(self.plugins.leg_specs()))

    def pool(self, ctx: QueryContext, legs: list[LegResult] | None = None) -> list[SearchHit]:
        """The fused pool, as hits: what the rerank stage receives."""
        legs = self.candidates(ctx) if legs is None else legs
        return hits_for(ctx.store, self.fuse(ctx, legs, ctx.pool_size))

    def run(self, ctx: QueryContext) -> tuple[SearchResponse, list[LegResult]]:
        """Run every stage for a prepared context; also returns the legs (for --explain)."""
        plugins = self.plugins
        legs = self.candidates(ctx)
        hits = plugins.rerank(ctx, self.pool(ctx, legs))
        hits = plugins.diversify(ctx, hits)[: ctx.limit]
        hits = plugins.expand(ctx, hits)
        hits = [hit.named_by_matches() for hit in plugins.highlight(ctx, hits)]
        warnings = tuple(w.message for w in ctx.query.warnings) + tuple(ctx.notes)
        unmatched = unmatched_filter(ctx)
        response = SearchResponse(
            results=tuple(hits),
            low_confidence=low_confidence(ctx, hits, legs),
            filter_applied=ctx.filters.describe(),
            warnings=(unmatched, *warnings) if unmatched else warnings,
        )
        return self._annotate(response), legs

    def search(self, query: str | SearchRequest, **args: Unpack[SearchArgs]) -> SearchResponse:
        """``run(context(query, ...))``'s response."""
        return self.run(self.context(query, **args))[0]

    def _annotate(self, response: SearchResponse) -> SearchResponse:
        """Stale hits, and a warning when the index is known to be partial (with a KB):
        documents missing, or chunks the vector leg could not see (ADR-0015)."""
        if self.kb is None:
            return response
        response = replace(response, results=tuple(self._mark_stale(response.results)))
        partial = [self.store.incomplete()]
        pending = self.store.pending_vectors()
        if pending:
            partial.append(semantic_note(pending, self.store.counts()["chunks"]))
        notes = tuple(note for note in partial if note is not None)
        return replace(response, warnings=(*response.warnings, *notes)) if notes else response

    def _mark_stale(self, hits: tuple[SearchHit, ...]) -> list[SearchHit]:
        """Flag hits whose file changed on disk after indexing (one stat per hit)."""
        assert self.kb is not None
        recorded = self.store.file_states([h.path for h in hits])
        out = []
        for hit in hits:
            try:
                st = (self.kb / hit.path).stat()
                now: tuple[int, int] | None = (st.st_size, st.st_mtime_ns)
            except OSError:
                now = None
            out.append(replace(hit, stale=True) if now != recorded.get(hit.path) else hit)
        return out


#: What a hit takes from its chunk's row as it is; the fusion gives the rest.
_FROM_ROW = (
    "doc_id",
    "path",
    "title",
    "heading",
    "heading_path",
    "level",
    "content",
    "line_start",
    "line_end",
    "byte_start",
    "byte_end",
    "token_count",
    "tags",
    "sections",
)


def hits_for(store: SearchStore, fused: list[Fused]) -> list[SearchHit]:
    """SearchHits for fused candidates, ranked 1..n in fused order."""
    rows = store.chunk_rows([f.chunk_id for f in fused])
    hits = []
    for rank, item in enumerate((f for f in fused if f.chunk_id in rows), start=1):
        row = rows[item.chunk_id]
        copied = {name: getattr(row, name) for name in _FROM_ROW}
        hits.append(
            SearchHit(
                chunk_id=item.chunk_id, score=item.score, rank=rank, legs=dict(item.legs), **copied
            )
        )
    return hits


def low_confidence(ctx: QueryContext, hits: list[SearchHit], legs: Sequence[LegResult]) -> bool:
    """True when the results are probably not about the query.

    Nothing came back; or no returned hit is corroborated (found by two legs or more,
    ranking ``[search.low_confidence] corroborated_rank`` or better in each, or
    ``bridged_rank`` when one of them translates) and even the nearest vector (of any
    vector leg) is farther than ``max_vector_distance`` (``max_cross_script_distance``
    for a query a translating leg answered: distances between languages run larger).
    Lexical matches alone are weak evidence here: trigram phrases such as ``について``
    match almost any Japanese text, and a stray word match in the tenth place corroborates
    nothing. Without a vector hit, a hit of a lexical leg is enough. The defaults were
    calibrated for the default embedder on jsquad-ja-para and the Vue docs (English and
    Japanese questions, off-topic ones): docs/retrieval-pipeline.md; other embedders need
    their own values. The rule reads the legs' kinds and ``bridges_scripts``, never names.
    """
    if not hits:
        return True
    rules = ctx.config.search.low_confidence
    kinds = leg_kinds(legs)
    bridging = {leg.name for leg in legs if leg.bridges_scripts}
    for hit in hits:
        if len(hit.legs) > 1:
            best = rules.bridged_rank if bridging & hit.legs.keys() else rules.corroborated_rank
            if all(rank <= best for rank, _ in hit.legs.values()):
                return False
    distances = [
        raw for h in hits for leg, (_, raw) in h.legs.items() if kinds.get(leg) == "vector"
    ]
    if not distances:
        return not any(kinds.get(leg) == "lexical" for h in hits for leg in h.legs)
    translated = any(leg.hits for leg in legs if leg.bridges_scripts)
    threshold = rules.max_cross_script_distance if translated else rules.max_vector_distance
    return min(distances) > threshold


#: How the warning for a filter that no indexed document passes starts.
UNMATCHED_FILTER = "no indexed document matches the filter"


def unmatched_filter(ctx: QueryContext) -> str | None:
    """The warning for filters that no indexed document passes, or None: then the empty
    result says nothing about the query, and the response says so (docs/retrieval-
    pipeline.md, low_confidence). Reads the filter set the legs already computed."""
    filters = ctx.filters
    if not filters.active or ctx.allowed_ids():
        return None
    named = [f"path {filters.path!r}"] if filters.path is not None else []
    named += [f"tag {tag!r}" for tag in filters.tags]
    return f"{UNMATCHED_FILTER} {' and '.join(named)}"


__all__ = ["QueryError", "Searcher", "check_flags", "hits_for", "low_confidence"]


def check_flags(plugins: Plugins, options: Mapping[str, Any]) -> None:
    """Refuse a command-line flag no enabled plugin of this KB provides. The command line
    offers the flags of every installed plugin, so the flag of a stage whose plugin is in
    ``[plugins] disabled`` would otherwise run without the stage and say nothing. (A
    program calling the core may pass options of its own; only flags are checked.)"""
    known = {option.name for option in plugins.search_options()}
    unknown = sorted(name for name in options if name not in known)
    if not unknown:
        return
    off = plugins.config.plugins.disabled
    why = (
        f" ([plugins] disabled in {plugins.config.source or 'groove.toml'}: {', '.join(off)})"
        if off
        else ""
    )
    names = ", ".join(f"--{name.replace('_', '-')}" for name in unknown)
    raise ConfigError(f"{names}: no enabled plugin provides this option{why}")
