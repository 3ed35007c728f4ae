"""A lexical leg that bridges scripts (``LegSpec(bridges_scripts=True)``: a translating leg)
is outside the cross-script rule: its weight is not multiplied by ``cross_script_lexical``
and its hits do not tell the script of the matches. Without the flag, the same leg is
weighed as any lexical leg whose matches are in another script than the query: x0.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from groove_core.config import parse_config
from groove_core.context import LegSpec, QueryContext
from groove_core.hookspecs import hookimpl
from groove_core.models import LegHit, LegKind, LegResult
from groove_core.testing import FAST_CONFIG, make_kb, open_kb
from groove_core.weighting import Features, leg_bridges, leg_weights, match_script

NOTES = {
    "docker.md": (
        "---\ntitle: Docker の使い方\n---\n# Docker の使い方\n\n"
        "コンテナを起動する手順を説明します。イメージを作成してから実行します。\n"
    ),
    "garden.md": "---\ntitle: 庭の手入れ\n---\n# 庭の手入れ\n\nトマトには日光と水が必要です。\n",
    "train.md": "---\ntitle: 夜行列車\n---\n# 夜行列車\n\n列車は十時に駅を出発します。\n",
}
ENGLISH = {"en/garden.md": "---\ntitle: Gardening\n---\n# Gardening\n\nTomatoes need sun.\n"}
# An exact match (the query's one word in one note) keeps the lexical legs: left out here,
# so the rule applies to "docker" as to any English word found in Japanese notes.
STRICT = FAST_CONFIG + "[search.fusion]\ncross_script_exact = 0.0\n"
REASON = "query other vs matches ja, exact match: x0"


class Bridge:
    """A translating leg: every Japanese note, on FTS5's bm25 scale."""

    def __init__(self, bridges: bool) -> None:
        self.bridges = bridges

    @hookimpl
    def groove_legs(self) -> list[LegSpec]:
        return [
            LegSpec("bridge", "lexical", self.search, score="bm25", bridges_scripts=self.bridges)
        ]

    def search(self, ctx: QueryContext) -> LegResult:
        docs = [d.doc_id for d in ctx.store.documents() if not d.path.startswith("en/")]
        ids = sorted(ctx.store.chunk_ids_for_docs(docs))[: ctx.leg_size]
        return LegResult("bridge", tuple(LegHit(i, -1.0 - n) for n, i in enumerate(ids)))


def _legs(
    tmp_path: Path, bridges: bool, query: str, notes: dict[str, str] = NOTES
) -> dict[str, LegResult]:
    kb = make_kb(tmp_path / f"kb-{bridges}", notes, config=STRICT)
    app = open_kb(kb, extra_plugins=[("bridge", Bridge(bridges))], entry_points=False)
    try:
        _, legs, _ = app.search_explained(query)
    finally:
        app.close()
    return {leg.name: leg for leg in legs}


def test_a_bridging_leg_keeps_its_weight_on_a_cross_script_query(tmp_path: Path) -> None:
    legs = _legs(tmp_path, True, "docker")
    bridge = legs["bridge"]
    assert bridge.kind == "lexical" and bridge.bridges_scripts and bridge.hits
    assert (bridge.meta["weight"], bridge.meta["weight_reasons"]) == (1.0, ())
    # the rule still applies to the other lexical legs, for the same stated reason
    for name in ("fts", "word"):
        assert legs[name].meta["weight"] == 0.0
        assert legs[name].meta["weight_reasons"] == (REASON,)
    assert legs["vector"].meta["weight"] == 1.0


def test_without_the_flag_the_same_leg_is_left_out(tmp_path: Path) -> None:
    legs = _legs(tmp_path, False, "docker")
    assert not legs["bridge"].bridges_scripts
    assert legs["bridge"].meta["weight"] == 0.0
    assert legs["bridge"].meta["weight_reasons"] == (REASON,)


def test_a_bridging_legs_hits_do_not_tell_the_script_of_the_matches(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", {**NOTES, **ENGLISH}, config=STRICT)
    app = open_kb(kb, entry_points=False)
    try:
        rows = {
            d.path: sorted(app.store.chunk_ids_for_docs([d.doc_id])) for d in app.store.documents()
        }
        japanese = tuple(LegHit(i, -1.0) for p, ids in rows.items() if p in NOTES for i in ids)
        english = tuple(LegHit(i, -1.0) for i in rows["en/garden.md"])
        bridge = LegResult("bridge", japanese, kind="lexical", bridges_scripts=True)
        plain = LegResult("bridge", japanese, kind="lexical")
        word = LegResult("word", english, kind="lexical")
        # alone, a bridging leg's matches say nothing; beside an English match, the script
        # is the English match's; the same hits from a plain lexical leg are Japanese
        assert match_script(app.store, [bridge]) is None
        assert match_script(app.store, [word, bridge]) == "other"
        assert match_script(app.store, [plain]) == "ja"
    finally:
        app.close()


def test_leg_weights_reads_the_bridging_legs_by_name() -> None:
    fusion = parse_config({}).search.fusion
    cross = Features("other", "ja", 0.5, "word")
    kinds: dict[str, LegKind] = {"word": "lexical", "bridge": "lexical", "vector": "vector"}
    weights = leg_weights(cross, kinds, fusion, {"word": 2.0}, {"bridge"})
    assert weights["bridge"] == (1.0, ())
    assert weights["word"][0] == 0.0 and weights["vector"][0] == 1.0
    # without the names (a caller of the former signature), every lexical leg is weighed
    assert leg_weights(cross, kinds, fusion)["bridge"][0] == 0.0
    legs = [LegResult("bridge", (), bridges_scripts=True), LegResult("word", ())]
    assert leg_bridges(legs) == {"bridge"}


def test_only_a_lexical_leg_may_bridge_scripts() -> None:
    with pytest.raises(ValueError, match="bridges_scripts"):
        LegSpec("b", "other", lambda ctx: None, bridges_scripts=True)
