"""The contract of each stage kind, checked on a real query context: candidate legs, leg
indexes, rerank, diversify and expand stages (docs/plugins.md). Each raises AssertionError
naming what broke."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, get_args

from groove_core.app import Groove
from groove_core.context import QueryContext
from groove_core.models import LegKind, LegResult, SearchHit
from groove_core.testing.kb import SAMPLE_QUERIES, candidate_pool, query_context

if TYPE_CHECKING:
    pass


def check_candidate_leg(plugin: Any, app: Groove, queries: Sequence[str] = SAMPLE_QUERIES) -> None:
    """Each leg the plugin declares has a kind the core knows, and returns a LegResult (or
    None) of unique, existing chunk ids, at most leg_size."""
    specs = plugin.groove_legs()
    assert specs, "the plugin declares no leg"
    for spec in specs:
        assert spec.kind in get_args(LegKind), f"{spec.name}: unknown kind {spec.kind!r}"
        _check_leg(spec.search, app, queries)


def check_leg_index(app: Groove, name: str) -> None:
    """The leg index contract (docs/plugins.md, "A leg with its own index") for the index
    ``name`` on ``app``'s storage backend: after an index run, after a note is added, one
    edited and one deleted, and after a rebuild, the index holds exactly the KB's chunk
    ids; ``groove doctor`` finds it healthy. ``app``: a test's own KB (notes are written
    in it) with the leg's plugin registered."""
    kb = app.kb

    def agrees(when: str) -> None:
        store = app.store
        index = store.leg_index(name)
        assert index is not None, f"{when}: the store keeps no index {name!r}"
        every = store.chunk_ids_for_docs(d.doc_id for d in store.documents())
        held = index.chunk_ids()
        assert held == every, (
            f"{when}: the index {name!r} holds {sorted(held - every)[:5]} without a chunk and "
            f"misses {sorted(every - held)[:5]}"
        )
        assert index.check() == [], f"{when}: the index's own check failed"

    app.index()
    agrees("after an index run")
    added = kb / "leg-index-contract.md"
    added.write_text("# Contract\n\nA note the leg index check adds.\n\n## More\n\nText.\n")
    notes = sorted(p for p in kb.rglob("*.md") if p != added)
    assert len(notes) >= 2, "check_leg_index needs a KB of two notes at least"
    notes[0].write_text(notes[0].read_text(encoding="utf-8") + "\n\n## Edited\n\nMore.\n")
    app.index()
    agrees("after a note was added and one edited")
    notes[1].unlink()
    added.unlink()
    app.index()
    agrees("after two notes were deleted")
    doctor = app.doctor()
    assert doctor.healthy, doctor.problems
    app.index(rebuild=True)
    agrees("after a rebuild")


def _check_leg(search: Any, app: Groove, queries: Sequence[str]) -> None:
    for query in queries:
        ctx = query_context(app, query)
        result = search(ctx)
        if result is None:
            continue
        assert isinstance(result, LegResult), f"{query!r}: returned {type(result).__name__}"
        ids = [h.chunk_id for h in result.hits]
        assert len(ids) == len(set(ids)), f"{query!r}: duplicate chunk ids {ids}"
        assert len(ids) <= ctx.leg_size, f"{query!r}: {len(ids)} hits > leg_size {ctx.leg_size}"
        known = ctx.store.chunk_rows(ids)
        assert set(ids) <= set(known), f"{query!r}: unknown chunk ids {set(ids) - set(known)}"
        again = search(query_context(app, query))
        assert again == result, f"{query!r}: not deterministic"


def _stage_output(hook: Any, ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit] | None:
    before = list(hits)
    out = hook(ctx=ctx, hits=hits)
    assert hits == before, "the stage mutated its input list"
    return None if out is None else list(out)


def check_rerank_stage(plugin: Any, app: Groove, queries: Sequence[str] = SAMPLE_QUERIES) -> None:
    """A rerank stage returns a reordering of its input (same chunk ids), ranks 1..n,
    deterministic, and handles an empty pool."""
    for query in queries:
        ctx = query_context(app, query)
        pool = candidate_pool(app, ctx)
        out = _stage_output(plugin.groove_rerank, ctx, pool)
        if out is None:
            continue
        assert sorted(h.chunk_id for h in out) == sorted(h.chunk_id for h in pool), (
            f"{query!r}: not a reordering of the input"
        )
        assert [h.rank for h in out] == list(range(1, len(out) + 1)), f"{query!r}: ranks"
        assert _stage_output(plugin.groove_rerank, ctx, pool) == out, (
            f"{query!r}: not deterministic"
        )
    empty = _stage_output(plugin.groove_rerank, query_context(app, queries[0]), [])
    assert not empty, "an empty pool must give an empty result (or None)"


def check_diversify_stage(
    plugin: Any, app: Groove, queries: Sequence[str] = SAMPLE_QUERIES
) -> None:
    """A diversifier returns a subset of its input of size min(limit, len(pool)), ranks 1..n."""
    for query in queries:
        base = query_context(app, query, limit=2)
        # A diversifier chooses from a wider pool than it returns (wide_pool: limit x 5).
        ctx = replace(base, pool_size=max(base.pool_size, base.limit * 5))
        pool = candidate_pool(app, ctx)
        out = _stage_output(plugin.groove_diversify, ctx, pool)
        if out is None:
            continue
        ids = [h.chunk_id for h in out]
        assert set(ids) <= {h.chunk_id for h in pool}, f"{query!r}: hits not from the pool"
        assert len(ids) == len(set(ids)) == min(ctx.limit, len(pool)), f"{query!r}: size"
        assert [h.rank for h in out] == list(range(1, len(out) + 1)), f"{query!r}: ranks"


def check_expand_stage(plugin: Any, app: Groove, queries: Sequence[str] = SAMPLE_QUERIES) -> None:
    """An expander keeps order, score, rank, path and chunk id; it may only change content
    (and must then say where it came from in ``expanded_from``)."""
    for query in queries:
        ctx = query_context(app, query)
        hits = candidate_pool(app, ctx)[: ctx.limit]
        out = _stage_output(plugin.groove_expand, ctx, hits)
        if out is None:
            continue
        keys = [(h.chunk_id, h.score, h.rank, h.path) for h in hits]
        assert [(h.chunk_id, h.score, h.rank, h.path) for h in out] == keys, (
            f"{query!r}: order, score, rank or path changed"
        )
        for before, after in zip(hits, out, strict=True):
            if after.content != before.content:
                assert after.expanded_from, f"{query!r}: content changed without expanded_from"
