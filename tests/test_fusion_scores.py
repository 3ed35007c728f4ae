"""The score-based fusion (``[search.fusion] method = "scores"``) and leg score scales."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from groove_core.context import LegSpec
from groove_core.fusion import by_scores, fuse, leg_scales, rrf
from groove_core.models import LegHit, LegResult


def leg(name: str, hits: list[tuple[int, float]], weight: float = 1.0, **kw: object) -> LegResult:
    return LegResult(
        name,
        tuple(LegHit(c, s) for c, s in hits),
        {"weight": weight},
        **kw,  # type: ignore[arg-type]
    )


def _search(_ctx: object) -> None:
    return None


def test_undeclared_scales_follow_the_kind() -> None:
    specs = [
        LegSpec("v", "vector", _search),
        LegSpec("x", "lexical", _search),
        LegSpec("o", "other", _search),
        LegSpec("b", "lexical", _search, score="bm25"),
    ]
    assert leg_scales(specs) == {"v": "distance", "x": "rank", "o": "rank", "b": "bm25"}


def test_a_bm25_gap_counts_where_rrf_sees_only_ranks() -> None:
    # The lexical leg's first hit is far ahead of its second; the vector leg finds the
    # second a little nearer than the first. RRF calls it a tie broken by chunk id; the
    # scores see the bm25 gap.
    lexical = leg("word", [(1, -12.0), (2, -3.0)])
    vector = leg("vector", [(2, 0.60), (1, 0.62)])
    scales = {"word": "bm25", "vector": "distance"}
    by_rank = rrf([lexical, vector], 60.0, 10)
    assert by_rank[0].score == pytest.approx(by_rank[1].score)
    scored = by_scores([lexical, vector], 60.0, 10, scales)  # type: ignore[arg-type]
    assert [f.chunk_id for f in scored] == [1, 2]
    # word: 12/12 and 3/12; vector: the cosine from the floor -1, over the best's
    cos = [1 - 0.60**2 / 2, 1 - 0.62**2 / 2]
    assert scored[0].score == pytest.approx(1.0 + (cos[1] + 1) / (cos[0] + 1))
    assert scored[1].score == pytest.approx(0.25 + 1.0)


def test_weights_scale_each_leg_and_zero_leaves_it_out() -> None:
    a = leg("a", [(1, -5.0), (2, -4.0)], weight=2.0)
    b = leg("b", [(3, -9.0)], weight=0.0)
    out = by_scores([a, b], 60.0, 10, {"a": "bm25", "b": "bm25"})
    assert [(f.chunk_id, f.score) for f in out] == [(1, 2.0), (2, pytest.approx(1.6))]
    assert all("b" not in f.legs for f in out)


def test_rank_scale_is_rrf_share_with_the_first_one() -> None:
    a = leg("a", [(7, 123.0), (8, 0.5)])
    out = by_scores([a], 60.0, 10, {})
    assert out[0].score == pytest.approx(1.0)
    assert out[1].score == pytest.approx(61 / 62)


def test_similarity_scale_and_degenerate_values() -> None:
    sim = by_scores([leg("t", [(1, 3.0), (2, 1.0)])], 60.0, 10, {"t": "similarity"})
    assert [f.score for f in sim] == [pytest.approx(1.0), pytest.approx(1 / 3)]
    # every bm25 score 0 (a tiny corpus): no best to divide by, the order still counts
    flat = by_scores([leg("w", [(1, 0.0), (2, 0.0)])], 60.0, 10, {"w": "bm25"})
    assert [f.score for f in flat] == [1.0, pytest.approx(61 / 62)]
    # a value past the best's floor side stays within [0, 1]
    odd = by_scores([leg("w", [(1, -2.0), (2, 1.0)])], 60.0, 10, {"w": "bm25"})
    assert [f.score for f in odd] == [1.0, 0.0]
    assert all(math.isfinite(f.score) for f in odd)


def test_fuse_dispatches_and_rrf_is_unchanged() -> None:
    legs = [leg("word", [(1, -3.0), (2, -1.0)], 2.0), leg("vector", [(2, 0.5), (3, 0.7)])]
    plain = rrf(legs, 60.0, 10)
    assert [(f.chunk_id, f.score) for f in fuse(legs, "rrf", 60.0, 10)] == [
        (f.chunk_id, f.score) for f in plain
    ]
    # bit for bit as before the score fusion existed: weight / (k + rank)
    assert plain[0].score == 2.0 / 62 + 1.0 / 61
    scored = fuse(legs, "scores", 60.0, 10, {"word": "bm25", "vector": "distance"})
    assert [f.chunk_id for f in scored] == [1, 2, 3]
    assert scored[0].legs == {"word": (1, -3.0)}


def test_a_kb_searched_with_the_score_fusion(tmp_path: Path) -> None:
    from groove_core.testing import FAST_CONFIG, make_kb, open_kb

    notes = {
        "a.md": "# Rank fusion\n\nReciprocal rank fusion merges lexical and vector rankings.\n",
        "b.md": "# Vectors\n\nNearest neighbours of an embedding find related passages.\n",
        "c.md": "# Cooking\n\nBoil the pasta for nine minutes.\n",
    }
    config = FAST_CONFIG + '\n[search.fusion]\nmethod = "scores"\n'
    app = open_kb(make_kb(tmp_path / "kb", notes, config=config))
    assert app.config.search.fusion.method == "scores"
    results = app.search("reciprocal rank fusion", limit=3).results
    assert results[0].path == "a.md"
    # every leg gives its first hit a share of 1 times its weight: the score is a sum of
    # shares, at most the legs' weights (word 2, trigram 1, vector 1)
    assert 0 < results[0].score <= 4.0
    assert [h.score for h in results] == sorted((h.score for h in results), reverse=True)


def test_an_unknown_fusion_method_is_a_config_error(tmp_path: Path) -> None:
    from groove_core.config import ConfigError, load_config
    from groove_core.testing import FAST_CONFIG, make_kb

    kb = make_kb(
        tmp_path / "kb",
        {"a.md": "# A\n"},
        config=FAST_CONFIG + '\n[search.fusion]\nmethod = "borda"\n',
    )
    with pytest.raises(ConfigError, match="method"):
        load_config(kb)


def test_scores_on_another_convention_fall_back_to_the_order() -> None:
    # a plugin declaring bm25 but returning positive scores (rank_bm25's convention):
    # every value is below the floor, so the leg is ranked by order, not flooded with 1s
    positive = leg("p", [(1, 9.0), (2, 5.0), (3, 1.0)])
    out = by_scores([positive], 60.0, 10, {"p": "bm25"})
    assert [f.chunk_id for f in out] == [1, 2, 3]
    assert [f.score for f in out] == [1.0, pytest.approx(61 / 62), pytest.approx(61 / 63)]


def test_values_that_are_not_numbers_do_not_cancel_a_leg() -> None:
    inf = float("inf")
    nan = float("nan")
    # -inf bm25 first (an infinite best): the finite values are measured on their own
    out = by_scores([leg("w", [(1, -inf), (2, -4.0), (3, -2.0)])], 60.0, 10, {"w": "bm25"})
    assert {f.chunk_id: f.score for f in out} == {1: 0.0, 2: 1.0, 3: 0.5}
    out = by_scores([leg("w", [(1, nan), (2, -4.0)])], 60.0, 10, {"w": "bm25"})
    assert {f.chunk_id: f.score for f in out} == {1: 0.0, 2: 1.0}
    out = by_scores([leg("s", [(1, nan), (2, inf)])], 60.0, 10, {"s": "similarity"})
    assert [f.score for f in out] == [1.0, pytest.approx(61 / 62)]
    assert all(math.isfinite(f.score) for f in out)


def test_a_leg_spec_refuses_an_unknown_score_scale() -> None:
    with pytest.raises(ValueError, match="score must be one of bm25, distance"):
        LegSpec("x", "lexical", _search, score="cosine")  # type: ignore[arg-type]


def test_a_plugin_leg_with_an_unknown_scale_is_one_line_naming_it(tmp_path: Path) -> None:
    from groove_core.config import ConfigError
    from groove_core.hookspecs import hookimpl
    from groove_core.testing import FAST_CONFIG, make_kb, open_kb

    class Typo:
        @hookimpl
        def groove_legs(self) -> list[LegSpec]:
            return [LegSpec("t", "lexical", _search, score="cosine")]  # type: ignore[arg-type]

    kb = make_kb(tmp_path / "kb", {"a.md": "# A\n\nalpha\n"}, config=FAST_CONFIG)
    with pytest.raises(ConfigError, match=r"the plugin 'typo'.*groove_legs.*score must be"):
        open_kb(kb, extra_plugins=[("typo", Typo())])
