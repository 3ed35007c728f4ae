"""The word leg: short Japanese words found lexically, its table, weights and rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from groove_core import words
from groove_core.cli import build_cli
from groove_core.config import parse_config
from groove_core.fusion import rrf
from groove_core.models import LegHit, LegResult
from groove_core.query import normalize
from groove_core.store import SCHEMA_VERSION, Store, check_consistency
from groove_core.testing import FAST_CONFIG, make_kb, open_kb
from groove_core.weighting import Features, cjk_share, leg_weights, query_script

NOTES = {
    "state.md": "# 状態\n\nアプリの状態を管理する方法。\n",
    "room.md": "# 部屋\n\n彼は友人の部屋に同居した。\n",
    "types.md": "# 型\n\n型の注釈を書く。\n",
    "english.md": "# Pipelines\n\nBuilding data pipelines with queues.\n",
    "hub.md": "# Hub\n\nstate management, rooms, types and pipelines: an English hub page.\n",
    "vue.md": "# 算出\n\nVue の computed プロパティで値を算出し、テンプレートに表示する。\n",
}


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    return make_kb(tmp_path / "kb", NOTES, config=FAST_CONFIG)


def test_tokens_bigrams_unigrams_and_stems() -> None:
    assert words.tokens("康成は誰の部屋に同居したか") == ["康成", "誰", "部屋", "同居"]
    assert words.tokens("状態管理") == ["状態", "態管", "管理"]
    assert words.tokens("データ型") == ["デー", "ータ", "型"]
    assert words.tokens("ML Pipelines, queries and class") == [
        "ml",
        "pipeline",
        "query",
        "and",
        "class",
    ]
    assert words.tokens("については") == []  # hiragana only: nothing topical


def test_segment_ignores_heading_anchors() -> None:
    assert words.segment("算出プロパティ {#computed-properties}") == "算出 プロ ロパ パテ ティ"


def test_query_terms_quote_phrases_and_cap() -> None:
    terms, truncated = words.query_terms([("状態 管理", False), ("状態管理", True)])
    assert terms == ["状態", "管理", "状態 態管 管理"]
    assert not truncated
    many = " ".join(f"{chr(0x4E00 + i)}{chr(0x4E00 + i)}" for i in range(words.MAX_TERMS + 5))
    terms, truncated = words.query_terms([(many, False)])
    assert len(terms) == words.MAX_TERMS and truncated
    assert words.match_expr(['a"b', "c"]) == '"a""b" OR "c"'
    assert words.match_expr([]) is None


def test_two_character_words_are_found(kb: Path) -> None:
    app = open_kb(kb, entry_points=False)
    response, legs, _ = app.search_explained("状態 管理")
    by_name = {leg.name: leg for leg in legs}
    # The trigram leg has nothing to match; the word leg finds the page.
    assert by_name["fts"].meta.get("skipped") or not by_name["fts"].hits
    assert [app.store.chunk_rows([h.chunk_id])[h.chunk_id].path for h in by_name["word"].hits][
        :1
    ] == ["state.md"]
    assert response.results[0].path == "state.md"
    assert "word" in response.results[0].legs


def test_word_leg_honours_exclusions_and_filters(kb: Path) -> None:
    app = open_kb(kb, entry_points=False)
    _, legs, ctx = app.search_explained("部屋 状態 -同居した")
    word = next(leg for leg in legs if leg.name == "word")
    excluded = ctx.excluded_ids()
    assert excluded  # the trigram scan found 同居した
    assert not excluded & {h.chunk_id for h in word.hits}
    _, legs, _ = app.search_explained("部屋 状態", path="room.md")
    word = next(leg for leg in legs if leg.name == "word")
    paths = {app.store.chunk_rows([h.chunk_id])[h.chunk_id].path for h in word.hits}
    assert paths == {"room.md"}


def test_disabling_the_word_leg_is_the_seed_pipeline(kb: Path) -> None:
    (kb / "groove.toml").write_text(FAST_CONFIG + '[plugins]\ndisabled = ["word"]\n')
    app = open_kb(kb, entry_points=False)
    _, legs, _ = app.search_explained("state management")
    assert {leg.name for leg in legs} == {"fts", "vector"}
    assert all(leg.meta["weight"] == 1.0 and not leg.meta["weight_reasons"] for leg in legs)


def test_table_is_written_deleted_and_checked_by_doctor(kb: Path) -> None:
    app = open_kb(kb, entry_points=False)
    conn = app.store.conn
    chunks = {r[0] for r in conn.execute("SELECT id FROM chunks")}
    assert words.row_ids(conn) == chunks
    (kb / "types.md").unlink()
    app.index()
    conn = app.store.conn
    chunks = {r[0] for r in conn.execute("SELECT id FROM chunks")}
    assert words.row_ids(conn) == chunks
    victim = min(chunks)
    heading, context, content = conn.execute(
        "SELECT heading, context, content FROM chunks WHERE id = ?", (victim,)
    ).fetchone()
    words.delete_rows(conn, [(victim, normalize(heading), normalize(context), normalize(content))])
    found = check_consistency(app.store)
    assert found.chunks_without_word == {victim} and not found.ok
    app.close()
    runner = CliRunner()
    result = runner.invoke(build_cli(None), ["doctor", str(kb)])
    assert result.exit_code == 1 and "1 chunks without a word-leg row" in result.output
    result = runner.invoke(build_cli(None), ["doctor", str(kb), "--repair"])
    assert result.exit_code == 0, result.output
    assert open_kb(kb, entry_points=False, index=False).doctor().healthy


def test_schema_1_index_migrates_in_place(kb: Path) -> None:
    app = open_kb(kb, entry_points=False)
    conn = app.store.conn
    conn.execute("DROP TABLE word_vocab")
    conn.execute("DROP TABLE word_chunks")
    app.store.set_meta("schema_version", "1")
    app.close()
    store = Store.create(app.index_file)
    assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
    chunks = {r[0] for r in store.conn.execute("SELECT id FROM chunks")}
    assert words.row_ids(store.conn) == chunks
    assert check_consistency(store).ok
    df = words.document_frequencies(store.conn, ["部屋", "状態", "無い"])
    assert df == {"部屋": 1, "状態": 1, "無い": 0}
    store.close()


def test_weighted_rrf_and_zero_weight() -> None:
    a = LegResult("a", (LegHit(1, 0.0), LegHit(2, 0.0)), {"weight": 2.0})
    b = LegResult("b", (LegHit(2, 0.0), LegHit(1, 0.0)), {"weight": 0.5})
    fused = rrf([a, b], 60.0, 10)
    assert [f.chunk_id for f in fused] == [1, 2]
    assert fused[0].score == pytest.approx(2 / 61 + 0.5 / 62)
    zero = LegResult("z", (LegHit(3, 0.0),), {"weight": 0.0})
    assert [f.chunk_id for f in rrf([a, zero], 60.0, 10)] == [1, 2]


def test_rules_cross_script_and_coverage() -> None:
    fusion = parse_config({}).search.fusion
    names = ["fts", "word", "vector"]
    cross = Features("other", "ja", None, True)  # an English query, Japanese matches
    weights = leg_weights(cross, names, fusion)
    assert weights["fts"][0] == weights["word"][0] == fusion.cross_script_lexical
    assert weights["vector"] == (1.0, ())
    covered = Features("ja", "ja", 0.8, True)
    weights = leg_weights(covered, names, fusion)
    assert weights["vector"][0] == fusion.coverage_vector
    assert weights["fts"] == (1.0, ())
    # Without the word leg the rules are off: the seed pipeline's plain RRF.
    assert leg_weights(Features("other", "ja", 0.9, False), names, fusion)["fts"] == (1.0, ())
    configured = parse_config({"search": {"fusion": {"weights": {"vector": 0.5}}}}).search.fusion
    assert leg_weights(Features(None, None, None, True), names, configured)["vector"][0] == 0.5


def test_script_detection() -> None:
    assert query_script("Vue の computed とは") == "ja"
    assert query_script("how do computed properties work") == "other"
    assert query_script("2024 ?") is None
    assert cjk_share("状態 state") == pytest.approx(2 / 7)


def test_explain_shows_the_word_leg_and_weights(kb: Path) -> None:
    open_kb(kb, entry_points=False).close()
    result = CliRunner().invoke(build_cli(None), ["search", "--kb", str(kb), "状態", "--explain"])
    assert result.exit_code == 0, result.output
    assert "leg word: 1 candidates  weight 1" in result.output
    assert 'expr: "状態"' in result.output
    result = CliRunner().invoke(
        build_cli(None), ["search", "--kb", str(kb), "computed", "--explain"]
    )
    assert result.exit_code == 0, result.output
    # An English word found only inside Japanese text: a stray match, lexical legs left out.
    assert "query other vs matches ja: x0" in result.output
    result = CliRunner().invoke(
        build_cli(None), ["search", "--kb", str(kb), "state management pipelines", "--explain"]
    )
    assert result.exit_code == 0, result.output
    # The same mostly-Japanese notes, but this English query matches English notes: a
    # bilingual knowledge base keeps its lexical legs for them.
    assert "vs matches" not in result.output
    assert "leg fts: 2 candidates  weight 1" in result.output
