"""Run golden queries through the pipeline (stage 1 or every stage) and score them.

Both stages are measured on the same thing a user receives: the top ``limit`` chunks
(10 by default), collapsed to documents. Stage 1 is the fused RRF list before rerank,
diversify and expand; ``full`` is the response of every enabled stage. Measuring both at
the same depth keeps them comparable: a diversifier's gain (more distinct documents in 10 chunks)
would vanish if stage 1 were scored on a deeper list.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from groove_core.embedding import WrappedEmbedder
from groove_core.evaluation.golden import ResolvedQuery
from groove_core.evaluation.metrics import (
    METRIC_NAMES,
    RankedDoc,
    documents_in_order,
    first_relevant_rank,
    query_metrics,
)

if TYPE_CHECKING:
    from groove_core.config import GrooveConfig
    from groove_core.embedding import Embedder
    from groove_core.models import LegResult
    from groove_core.pipeline import Searcher
    from groove_core.plugins import Plugins
    from groove_core.storage import IndexStore

Stage = Literal["candidates", "full"]
Progress = Callable[[int], None]


class CachedEmbedder(WrappedEmbedder):
    """Wraps an embedder so that each distinct query is embedded once per eval command.

    Embedding is the cost of a query (FTS and KNN take milliseconds); ablation and tuning
    re-run the same queries many times, so the vectors are kept by text.
    """

    def __init__(self, inner: Embedder) -> None:
        self._inner = inner
        self._cache: dict[str, np.ndarray] = {}

    @property
    def inner(self) -> Embedder:
        return self._inner

    def embed_query(self, text: str) -> np.ndarray:
        if text not in self._cache:
            self._cache[text] = self._inner.embed_query(text)
        return self._cache[text]


@dataclass(frozen=True)
class QueryOutcome:
    """What one golden query got: its ranked documents, metrics, or why it failed."""

    key: str
    query: str
    docs: tuple[RankedDoc, ...]
    metrics: dict[str, float]
    first_rank: int | None
    relevant: int
    error: str | None = None
    missing: tuple[str, ...] = ()


@dataclass
class Outcomes:
    """Every query's outcome for one configuration."""

    items: list[QueryOutcome] = field(default_factory=list)

    def values(self, metric: str) -> list[float]:
        return [o.metrics[metric] for o in self.items]

    @property
    def errors(self) -> list[QueryOutcome]:
        return [o for o in self.items if o.error is not None]


def score(query: ResolvedQuery, hits: Sequence[tuple[str, float]]) -> QueryOutcome:
    """Score one query's chunk list (path, score), best first."""
    docs = tuple(documents_in_order(hits))
    golden = query.golden
    if not query.grades:
        # No expected document is in the index: a miss the report names (not a crash).
        zeros = dict.fromkeys(METRIC_NAMES, 0.0)
        return QueryOutcome(golden.key, golden.query, docs, zeros, None, 0, None, query.missing)
    return QueryOutcome(
        golden.key,
        golden.query,
        docs,
        query_metrics(docs, query.grades),
        first_relevant_rank(docs, query.grades),
        len(query.grades),
        None,
        query.missing,
    )


def failed(query: ResolvedQuery, error: str) -> QueryOutcome:
    """A query the query language rejects: counted as a miss, reported by the caller."""
    zeros = dict.fromkeys(METRIC_NAMES, 0.0)
    golden = query.golden
    return QueryOutcome(golden.key, golden.query, (), zeros, None, len(query.grades), error)


@dataclass
class GoldenSearcher:
    """One configuration's view of an index for scoring: a core :class:`Searcher`, and
    chunk paths remembered across queries."""

    searcher: Searcher
    _paths: dict[int, str] = field(default_factory=dict)

    @property
    def config(self) -> GrooveConfig:
        return self.searcher.config

    def paths(self, chunk_ids: Sequence[int]) -> dict[int, str]:
        """Chunk id -> document path, remembered across queries."""
        wanted = [c for c in chunk_ids if c not in self._paths]
        if wanted:
            for cid, row in self.searcher.store.chunk_rows(wanted).items():
                self._paths[cid] = row.path
        return {c: self._paths[c] for c in chunk_ids if c in self._paths}

    @property
    def plugins(self) -> Plugins:
        return self.searcher.plugins

    def fused(self, legs: Sequence[LegResult], k: float, limit: int) -> list[tuple[str, float]]:
        """``legs`` fused as the configuration says (RRF with ``k``, or scores) and cut to
        ``limit`` chunks, as (path, score)."""
        from groove_core.fusion import fuse, leg_scales

        method = self.config.search.fusion.method
        fused = fuse(legs, method, k, limit, leg_scales(self.plugins.leg_specs()))
        paths = self.paths([f.chunk_id for f in fused])
        return [(paths[f.chunk_id], f.score) for f in fused if f.chunk_id in paths]

    def candidates(self, query: str, limit: int) -> list[tuple[str, float]]:
        """Stage 1: the fused list before any optional stage, top ``limit`` chunks."""
        ctx = self.searcher.context(query, limit=limit)
        return self.fused(self.searcher.candidates(ctx), self.config.search.fusion.rrf_k, limit)

    def full(self, query: str, limit: int) -> list[tuple[str, float]]:
        """Every enabled stage: exactly what ``groove search`` returns."""
        response = self.searcher.search(query, limit=limit)
        return [(h.path, h.score) for h in response.results]


def run_golden(
    searcher: GoldenSearcher,
    queries: Sequence[ResolvedQuery],
    *,
    stage: Stage,
    limit: int,
    progress: Progress | None = None,
) -> Outcomes:
    """Run every query verbatim (exclusion syntax included) and score it."""
    from groove_core.query import QueryError

    search = searcher.candidates if stage == "candidates" else searcher.full
    out = Outcomes()
    for query in queries:
        try:
            hits = search(query.golden.query, limit)
        except QueryError as err:
            out.items.append(failed(query, str(err)))
        else:
            out.items.append(score(query, hits))
        if progress is not None:
            progress(1)
    return out


def make_searcher(config: GrooveConfig, store: IndexStore, embedder: Embedder) -> GoldenSearcher:
    """A searcher for ``config`` (e.g. one leg disabled) over an already open index."""
    from groove_core.pipeline import Searcher
    from groove_core.plugins import make_plugin_manager

    return GoldenSearcher(Searcher(make_plugin_manager(config), store, embedder))


def with_changes(config: GrooveConfig, changes: dict[str, Any]) -> GrooveConfig:
    """A copy of ``config`` with dotted keys replaced (``{"search.fusion.rrf_k": 30}``),
    validated like the file itself so a bad value is a ConfigError, not a silent typo."""
    from groove_core.config import parse_config, set_dotted

    data = config.to_data()
    for dotted, value in changes.items():
        set_dotted(data, dotted, value)
    return parse_config(data, config.source or "<eval>")
