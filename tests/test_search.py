"""End-to-end search over a small KB with the deterministic hashing embedder."""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from groove_core.models import LegHit, LegKind, LegResult, SearchHit
from groove_core.pipeline import low_confidence
from groove_core.query import QueryError
from groove_core.testing import SECTION_CHUNKS, open_kb


def test_search_returns_the_p8_wrapper(notes_kb: Path) -> None:
    app = open_kb(notes_kb)
    payload = app.search("reciprocal rank fusion", limit=3).to_json()
    assert set(payload) == {"results", "low_confidence", "filter_applied"}
    top = payload["results"][0]
    assert top["path"] == "guide/search.md"
    assert top["heading"] == "Ranking"
    assert top["rank"] == 1
    assert top["score"] > 0
    assert payload["low_confidence"] is False
    assert payload["filter_applied"] is None
    for key in ("path", "heading", "content", "score", "rank", "chunk_id", "match_spans"):
        assert key in top


def test_match_spans_are_byte_offsets_into_the_returned_content(notes_kb: Path) -> None:
    app = open_kb(notes_kb)
    for query, phrases in [
        ("Reciprocal rank", {"reciprocal", "rank"}),
        ("再ランキング", {"再ランキング", "ランキング"}),
    ]:
        hit = app.search(query, limit=1).results[0]
        data = hit.content.encode("utf-8")
        assert hit.match_spans
        assert {data[s.start : s.end].decode().lower() for s in hit.match_spans} <= phrases


def test_japanese_query_uses_the_lexical_legs(notes_kb: Path) -> None:
    app = open_kb(notes_kb)
    response, legs, _ = app.search_explained("再ランキングの評価について", limit=3)
    assert response.results[0].path == "notes/ja.md"
    by_name = {leg.name: leg for leg in legs}
    assert by_name["word"].hits, "the Japanese words must reach the word leg"
    # The trigram leg leaves Japanese phrases to the word leg (issue #27) ...
    left = ["再ランキング", "ランキング", "の評価", "について"]
    assert by_name["fts"].meta["left_to_word"] == left
    assert not by_name["fts"].hits
    # ... but a quoted one is searched verbatim there.
    response, legs, _ = app.search_explained('"再ランキング" の評価', limit=3)
    fts = next(leg for leg in legs if leg.name == "fts")
    assert fts.hits and response.results[0].path == "notes/ja.md"
    assert fts.meta["left_to_word"] == ["の評価"]


def test_the_trigram_leg_keeps_what_the_word_leg_cannot_look_up(notes_kb: Path) -> None:
    app = open_kb(notes_kb)
    # Hiragana only: the word leg has no term, so the trigram leg takes every phrase.
    _, legs, _ = app.search_explained("について", limit=3)
    by_name = {leg.name: leg for leg in legs}
    assert by_name["word"].meta.get("skipped")
    assert "left_to_word" not in by_name["fts"].meta and by_name["fts"].hits
    # A hiragana word typed apart stays too: the word leg has no token for it.
    _, legs, _ = app.search_explained("について 再ランキング", limit=3)
    fts = next(leg for leg in legs if leg.name == "fts")
    assert "再ランキング" in fts.meta["left_to_word"] and fts.meta["expr"] == '"について"'
    # A Latin word inside a Japanese question stays in the trigram leg.
    _, legs, _ = app.search_explained("Reciprocal の評価", limit=3)
    fts = next(leg for leg in legs if leg.name == "fts")
    assert fts.meta["left_to_word"] == ["の評価"] and fts.hits
    # With the word leg weighted 0 (out of fusion), the trigram leg takes them back.
    toml = notes_kb / "groove.toml"
    toml.write_text(toml.read_text("utf-8") + "\n[search.fusion.weights]\nword = 0\n", "utf-8")
    _, legs, _ = open_kb(notes_kb).search_explained("再ランキングの評価", limit=3)
    fts = next(leg for leg in legs if leg.name == "fts")
    assert "left_to_word" not in fts.meta and fts.hits


def test_the_trigram_leg_leaves_english_stop_words_out(notes_kb: Path) -> None:
    app = open_kb(notes_kb)
    _, legs, _ = app.search_explained("what does reciprocal rank fusion", limit=3)
    fts = next(leg for leg in legs if leg.name == "fts")
    assert fts.meta["stop_words_dropped"] == ["what", "does"] and fts.hits
    assert '"what"' not in fts.meta["expr"] and '"reciprocal"' in fts.meta["expr"]
    # A stop word beside Japanese words is still left out: the leg has nothing to search.
    _, legs, _ = app.search_explained("what 再ランキング", limit=3)
    fts = next(leg for leg in legs if leg.name == "fts")
    assert fts.meta["skipped"] and fts.meta["stop_words_dropped"] == ["what"] and not fts.hits
    # Quoted, a stop word is searched; a query of nothing else keeps its words.
    for query in ('"what" reciprocal', "what does"):
        _, legs, _ = app.search_explained(query, limit=3)
        fts = next(leg for leg in legs if leg.name == "fts")
        assert "stop_words_dropped" not in fts.meta


def test_exclusions_agree_across_both_legs(notes_kb: Path) -> None:
    merged = open_kb(notes_kb)
    # The one-line Ownership section shares the async paragraph's chunk: both go.
    assert all("async" not in h.content.lower() for h in merged.search("rust -async").results)
    merged.close()
    (notes_kb / "groove.toml").write_text(SECTION_CHUNKS, encoding="utf-8")
    app = open_kb(notes_kb, index=False)
    app.index(rebuild=True)
    results = app.search("rust -async", limit=10).results
    assert results
    assert all("async" not in h.content.lower() for h in results)
    assert any(h.heading == "Ownership" for h in results)


def test_exclusion_only_query_is_rejected(notes_kb: Path) -> None:
    app = open_kb(notes_kb)
    with pytest.raises(QueryError):
        app.search("-rust")


@pytest.mark.parametrize("limit", [0, -1, 1000])
def test_bad_limit_is_a_query_error(notes_kb: Path, limit: int) -> None:
    app = open_kb(notes_kb)
    with pytest.raises(QueryError, match="limit"):
        app.search("rust", limit=limit)


def test_path_filter_applies_inside_the_legs(notes_kb: Path) -> None:
    app = open_kb(notes_kb)
    response = app.search("rust ownership search", limit=5, path="guide/**")
    assert response.results
    assert {h.path for h in response.results} <= {"guide/install.md", "guide/search.md"}
    assert response.filter_applied == {"path": "guide/**"}


def test_tag_filter_is_case_insensitive_and_conjunctive(notes_kb: Path) -> None:
    app = open_kb(notes_kb)
    assert {h.path for h in app.search("python", limit=5, tags=["SETUP"]).results} == {
        "guide/install.md"
    }
    assert app.search("python", limit=5, tags=["setup", "lang"]).results == ()
    none = app.search("python", limit=5, tags=["setup", "lang"])
    assert none.low_confidence is True
    assert none.filter_applied == {"tags": ["setup", "lang"]}


def test_short_query_runs_vector_only(notes_kb: Path) -> None:
    app = open_kb(notes_kb)
    response, legs, ctx = app.search_explained("ja", limit=2)
    assert ctx.query.fts_skipped
    assert next(leg for leg in legs if leg.name == "fts").hits == ()
    assert len(response.results) == 2


def test_limit_is_honoured_and_ranks_are_dense(notes_kb: Path) -> None:
    app = open_kb(notes_kb)
    results = app.search("search", limit=4).results
    assert [h.rank for h in results] == list(range(1, len(results) + 1))
    assert len(results) == 4
    assert [h.score for h in results] == sorted((h.score for h in results), reverse=True)


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '""',
        "AND OR NOT",
        "heading:foo",
        "(((",
        "*",
        "NEAR(a b)",
        "\x00abc",
        "🙂🙂🙂",
        "a" * 5000,
    ],
)
def test_odd_queries_never_raise_from_sqlite(notes_kb: Path, query: str) -> None:
    app = open_kb(notes_kb)
    with contextlib.suppress(QueryError):
        app.search(query, limit=3)


def test_low_confidence_when_nothing_matches_lexically_and_vectors_are_far(
    notes_kb: Path,
) -> None:
    app = open_kb(notes_kb)
    assert app.search("zzqqxxvvkk", limit=3).low_confidence is True


def _hit(legs: dict[str, tuple[int, float]]) -> SearchHit:
    return SearchHit(1, 1, "a.md", "A", "A", ("A",), 1, "text", 0.1, 1, 1, 1, 0, 4, 1, legs=legs)


@pytest.mark.parametrize(
    ("legs", "expected"),
    [
        ([], True),  # nothing came back
        ([{"fts": (1, -3.0), "vector": (4, 1.5)}], False),  # corroborated by both legs
        ([{"fts": (7, -3.0), "vector": (9, 1.3)}], True),  # two stray matches corroborate nothing
        ([{"fts": (7, -3.0), "vector": (9, 1.1)}], False),  # ... but the vector is near
        ([{"vector": (1, 0.9)}], False),  # a near vector alone is enough
        ([{"vector": (1, 1.3)}, {"fts": (1, -2.0)}], True),  # far vector, uncorroborated
        ([{"fts": (1, -2.0)}], False),  # lexical-only pipeline (vector leg disabled)
        ([{"word": (1, -2.0)}], False),  # any lexical leg, not only the trigram one
        ([{"other": (1, 5.0)}], True),  # a leg of kind "other" alone is no evidence
        # a query the translating leg answered: its corroboration counts nearer the top,
        # and the vector distance has a threshold of its own
        ([{"bilingual": (2, -9.0), "vector": (1, 1.3)}], False),
        ([{"bilingual": (4, -3.0), "vector": (5, 1.27)}], True),
        ([{"bilingual": (4, -3.0), "vector": (5, 1.22)}], False),
    ],
)
def test_low_confidence_rule(
    notes_kb: Path, legs: list[dict[str, tuple[int, float]]], expected: bool
) -> None:
    app = open_kb(notes_kb, index=False)
    ctx = SimpleNamespace(config=app.config)
    kinds: dict[str, LegKind] = {
        "fts": "lexical",
        "word": "lexical",
        "vector": "vector",
        "other": "other",
        "bilingual": "lexical",
    }
    found = {name for hit in legs for name in hit}
    results = [
        LegResult(
            name,
            hits=(LegHit(1, 0.0),) if name in found else (),
            kind=kind,
            bridges_scripts=name == "bilingual",
        )
        for name, kind in kinds.items()
    ]
    assert low_confidence(ctx, [_hit(x) for x in legs], results) is expected  # type: ignore[arg-type]


@pytest.mark.parametrize("query", ["reciprocal rank fusion", "再ランキングの評価について"])
def test_a_search_reads_each_chunk_row_once(
    notes_kb: Path, monkeypatch: pytest.MonkeyPatch, query: str
) -> None:
    """The fusion rules and the pool's hits read the same chunks' rows: once per query."""
    app = open_kb(notes_kb)
    store_type = type(app.store)
    real = store_type.chunk_rows
    asked: list[int] = []

    def counted(self: object, chunk_ids: list[int]) -> object:
        asked.extend(chunk_ids)
        return real(self, chunk_ids)  # type: ignore[arg-type]

    monkeypatch.setattr(store_type, "chunk_rows", counted)
    response = app.search(query, limit=3)
    assert response.results
    assert asked and len(asked) == len(set(asked))
