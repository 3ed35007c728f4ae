"""groove_core.testing's contract checks: built-ins pass them, broken stages fail them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from groove_core.builtins.legs import FTSLeg, VectorLeg
from groove_core.context import LegSpec, QueryContext
from groove_core.hookspecs import hookimpl
from groove_core.models import ExpandedRange, LegHit, LegResult, SearchHit
from groove_core.testing import (
    check_candidate_leg,
    check_diversify_stage,
    check_expand_stage,
    check_rerank_stage,
    make_kb,
    open_kb,
)
from tests.helpers import ReverseReranker


@pytest.fixture
def app(tmp_path: Path):  # type: ignore[no-untyped-def]
    return open_kb(make_kb(tmp_path / "kb"))


def test_builtin_legs_keep_the_leg_contract(app) -> None:  # type: ignore[no-untyped-def]
    check_candidate_leg(FTSLeg(), app)
    check_candidate_leg(VectorLeg(), app)


class DuplicateLeg:
    @hookimpl
    def groove_legs(self) -> list[LegSpec]:
        return [LegSpec("dup", "other", self.search)]

    def search(self, ctx: QueryContext) -> LegResult:
        return LegResult("dup", (LegHit(1, 0.0), LegHit(1, 0.0)))


def test_a_leg_returning_duplicates_fails(app) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(AssertionError, match="duplicate"):
        check_candidate_leg(DuplicateLeg(), app)


class Dropper:
    @hookimpl
    def groove_rerank(self, ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit]:
        return [replace(h, rank=i) for i, h in enumerate(hits[1:], start=1)]


class FirstN:
    @hookimpl
    def groove_diversify(self, ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit]:
        return hits[: ctx.limit]


class TooMany:
    @hookimpl
    def groove_diversify(self, ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit]:
        return hits[: ctx.limit + 1]


class Shout:
    @hookimpl
    def groove_expand(self, ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit]:
        rng = (ExpandedRange(1, 1, 0, 1),)
        return [replace(h, content=h.content.upper(), expanded_from=rng) for h in hits]


class Rescore:
    @hookimpl
    def groove_expand(self, ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit]:
        return [replace(h, score=0.0) for h in hits]


@pytest.mark.parametrize(
    ("check", "keeper", "breaker", "broken"),
    [
        (check_rerank_stage, ReverseReranker, Dropper, "reordering"),
        (check_diversify_stage, FirstN, TooMany, "size"),
        (check_expand_stage, Shout, Rescore, "score"),
    ],
    ids=["reranker", "diversifier", "expander"],
)
def test_stage_contract(app, check, keeper, breaker, broken) -> None:  # type: ignore[no-untyped-def]
    """A stage that keeps its kind's contract passes the check; one that breaks it fails,
    the check naming what broke."""
    check(keeper(), app)
    with pytest.raises(AssertionError, match=broken):
        check(breaker(), app)
