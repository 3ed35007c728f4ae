"""The word leg: short Japanese words found lexically, its table, weights and rules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from groove_core import words
from groove_core.builtins.legs import word_version
from groove_core.cli import build_cli
from groove_core.config import parse_config
from groove_core.fusion import rrf
from groove_core.leg_index import meta_key
from groove_core.models import LegHit, LegKind, LegResult
from groove_core.query import normalize
from groove_core.sqlite import word_table
from groove_core.sqlite.store import (
    SCHEMA_VERSION,
    VECTORS_VERSION_KEY,
    Store,
    check_consistency,
)
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
        "pipelin",
        "queri",
        "and",
        "class",
    ]
    assert words.tokens("については") == []  # hiragana only: nothing topical


def test_english_words_are_stemmed_as_lucene_englishanalyzer_does() -> None:
    stem = words.tokens
    assert stem("running") == stem("run") == stem("runs") == ["run"]
    assert stem("connections") == stem("connected") == stem("connect") == ["connect"]
    # A possessive 's is no word of its own, curly apostrophe or straight.
    assert (
        stem("the engine's thrust")
        == stem("the engine\u2019s thrust")
        == ["the", "engin", "thrust"]
    )
    assert stem("engines' flows") == ["engin", "flow"]
    # Japanese, other alphabets and code-like words are not cut by English rules.
    assert stem("状態管理のテスト") == ["状態", "態管", "管理", "テス", "スト"]
    assert stem("Привет GPT4o") == ["привет", "gpt4o"]


def test_stop_words_leave_queries_but_not_phrases() -> None:
    terms, _ = words.query_terms([("the state of the art", False)])
    assert terms == ["state", "art"]
    # A quoted phrase keeps them, in place: the table keeps them too.
    terms, _ = words.query_terms([("state of the art", True)])
    assert terms == ["state of the art"]
    assert "of" in words.segment("state of the art").split()
    # A query of nothing but stop words still looks them up.
    terms, _ = words.query_terms([("to be or not to be", False)])
    assert terms == ["to", "be", "or", "not"]
    # Japanese is untouched by the English stop list.
    terms, _ = words.query_terms([("状態 の 管理", False)])
    assert terms == ["状態", "管理"]


def test_english_queries_find_inflected_forms(tmp_path: Path) -> None:
    kb = make_kb(
        tmp_path / "kb",
        {
            "engine.md": "# Engines\n\nThe engine's connections were running hot.\n",
            "other.md": "# Other\n\nA note about the state of the art in gardening.\n",
        },
        config=FAST_CONFIG,
    )
    app = open_kb(kb, entry_points=False)
    for query in ("run connect", "connection", "engine"):
        _, legs, _ = app.search_explained(query)
        word = next(leg for leg in legs if leg.name == "word")
        paths = [app.store.chunk_rows([h.chunk_id])[h.chunk_id].path for h in word.hits]
        assert paths == ["engine.md"], query
    # Stop words would match both notes; left out, the query's one topical word decides.
    _, legs, _ = app.search_explained("the art of the")
    word = next(leg for leg in legs if leg.name == "word")
    assert word.meta["terms"] == ["art"]
    app.close()


def test_segment_ignores_heading_anchors() -> None:
    assert words.segment("算出プロパティ {#computed-properties}") == "算出 プロ ロパ パテ ティ"


def test_query_terms_quote_phrases_and_cap() -> None:
    terms, truncated = words.query_terms([("状態 管理", False), ("状態管理", True)])
    assert terms == ["状態", "管理", "状態 態管 管理"]
    assert not truncated
    many = " ".join(f"{chr(0x4E00 + i)}{chr(0x4E00 + i)}" for i in range(words.MAX_TERMS + 5))
    terms, truncated = words.query_terms([(many, False)])
    assert len(terms) == words.MAX_TERMS and truncated


def _filler(count: int) -> list[str]:
    """``count`` distinct made-up words that the stemmer leaves as they are."""
    letters = "bcdfghjklm"
    return [f"zq{letters[i // 10]}{letters[i % 10]}x" for i in range(count)]


def test_a_long_request_keeps_its_rarest_terms(tmp_path: Path) -> None:
    # Past the word leg's term cap, a request's rarest words are kept, wherever they stand:
    # its first words are rarely its point (issue #42). Every filler word is in two notes,
    # "glider" in one, and it comes last.
    filler = _filler(words.MAX_TERMS + 12)
    kb = make_kb(
        tmp_path / "kb",
        {
            "a.md": "# A\n\n" + " ".join(filler) + "\n",
            "b.md": "# B\n\n" + " ".join(filler) + "\n",
            "glider.md": "# Flight\n\nThe glider lands on a short strip.\n",
        },
        config=FAST_CONFIG,
    )
    app = open_kb(kb, entry_points=False)
    _, legs, ctx = app.search_explained(" ".join([*filler, "glider"]))
    word = next(leg for leg in legs if leg.name == "word")
    assert len(word.meta["terms"]) == words.MAX_TERMS
    assert "glider" in word.meta["terms"]
    assert filler[-1] not in word.meta["terms"]
    paths = [app.store.chunk_rows([h.chunk_id])[h.chunk_id].path for h in word.hits]
    assert "glider.md" in paths
    assert any(f"only the {words.MAX_TERMS} most distinctive" in n for n in ctx.notes)
    app.close()


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
    assert word_table.row_ids(conn) == chunks
    (kb / "types.md").unlink()
    app.index()
    conn = app.store.conn
    chunks = {r[0] for r in conn.execute("SELECT id FROM chunks")}
    assert word_table.row_ids(conn) == chunks
    victim = min(chunks)
    heading, context, content = conn.execute(
        "SELECT heading, context, content FROM chunks WHERE id = ?", (victim,)
    ).fetchone()
    word_table.delete_rows(
        conn, [(victim, normalize(heading), normalize(context), normalize(content))]
    )
    found = check_consistency(app.store)
    assert found.chunks_without_leg["word"] == {victim} and not found.ok
    app.close()
    runner = CliRunner()
    result = runner.invoke(build_cli(None), ["doctor", str(kb)])
    assert result.exit_code == 1
    assert "1 chunks without a row in the word leg's index" in result.output
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
    store = Store.open(app.index_file)  # migrated, then the word leg's index filled
    assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
    chunks = {r[0] for r in store.conn.execute("SELECT id FROM chunks")}
    assert word_table.row_ids(store.conn) == chunks
    assert check_consistency(store).ok
    df = word_table.document_frequencies(store.conn, ["部屋", "状態", "無い"])
    assert df == {"部屋": 1, "状態": 1, "無い": 0}
    store.close()


def test_an_index_under_the_plural_only_rules_is_refilled_on_open(tmp_path: Path) -> None:
    """An index written before the English stemmer: opening it (for a search, not only an
    index run) re-fills the word table from the stored chunks; the vectors are kept."""
    files = {**NOTES, "engine.md": "# Engines\n\nThe engine's connections were running hot.\n"}
    kb = make_kb(tmp_path / "kb", files, config=FAST_CONFIG)
    app = open_kb(kb, entry_points=False)
    conn = app.store.conn
    fresh_vocab = conn.execute("SELECT term, doc, cnt FROM word_vocab ORDER BY term").fetchall()
    vectors = conn.execute("SELECT chunk_id, embedding FROM vec_chunks ORDER BY 1").fetchall()
    version = app.store.get_meta(VECTORS_VERSION_KEY)
    with app.store.transaction():  # the rows as the plural-only rules wrote them
        rows = conn.execute("SELECT id, heading, context, content FROM chunks").fetchall()
        conn.execute("INSERT INTO word_chunks(word_chunks) VALUES ('delete-all')")
        conn.executemany(
            "INSERT INTO word_chunks(rowid, heading, context, content) VALUES (?, ?, ?, ?)",
            [
                (i, *(" ".join(re.findall(r"\w+", normalize(t).lower())) for t in f))
                for i, *f in rows
            ],
        )
        app.store.set_meta(
            meta_key("word"), word_version().replace(f"words {words.SEGMENTATION}", "words 1")
        )
    assert not word_table.search(conn, '"run"', (2.0, 1.0, 1.0), 10)
    app.close()

    app = open_kb(kb, entry_points=False, index=False)
    conn = app.store.conn
    assert app.store.get_meta(meta_key("word")) == word_version()
    assert conn.execute("SELECT term, doc, cnt FROM word_vocab ORDER BY term").fetchall() == (
        fresh_vocab
    )
    assert conn.execute("SELECT chunk_id, embedding FROM vec_chunks ORDER BY 1").fetchall() == (
        vectors
    )
    assert app.store.get_meta(VECTORS_VERSION_KEY) == version  # no re-embedding, no reload
    assert check_consistency(app.store).ok
    response = app.search("running connection")
    assert response.results[0].path == "engine.md"
    app.close()


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
    names: dict[str, LegKind] = {"fts": "lexical", "word": "lexical", "vector": "vector"}
    cross = Features("other", "ja", None, "word")  # an English query, Japanese matches
    weights = leg_weights(cross, names, fusion)
    assert weights["fts"][0] == weights["word"][0] == fusion.cross_script_lexical
    assert weights["vector"] == (1.0, ())
    covered = Features("ja", "ja", 0.8, "word")
    weights = leg_weights(covered, names, fusion)
    assert weights["vector"][0] == fusion.coverage_vector
    assert weights["fts"] == (1.0, ())
    # Without a lexical leg reporting terms the rules are off: the seed pipeline's plain RRF.
    assert leg_weights(Features("other", "ja", 0.9, None), names, fusion)["fts"] == (1.0, ())
    configured = parse_config({"search": {"fusion": {"weights": {"vector": 0.5}}}}).search.fusion
    assert leg_weights(Features(None, None, None, "word"), names, configured)["vector"][0] == 0.5


def test_an_exact_match_in_another_script_keeps_its_lexical_legs(tmp_path: Path) -> None:
    """A Latin identifier that occurs only inside Japanese notes is an exact match, not a
    stray one: the lexical legs keep their weight and the note that holds it comes first."""
    notes = {
        "runbooks/deploy.md": "# デプロイ\n\n本番へは kubectl apply でマニフェストを反映する。\n",
        **{f"notes/n{i}.md": f"# メモ{i}\n\n{body}\n" for i, body in enumerate(FILLER)},
    }
    kb = make_kb(tmp_path / "kb", notes, config=FAST_CONFIG)
    app = open_kb(kb, entry_points=False)
    response = app.search("kubectl")
    assert response.results[0].path == "runbooks/deploy.md"
    result = CliRunner().invoke(
        build_cli(None), ["search", "--kb", str(kb), "kubectl", "--explain"]
    )
    assert result.exit_code == 0, result.output
    assert "vs matches" not in result.output
    assert "leg word (lexical): 1 candidates  weight 2" in result.output
    app.close()
    # the same features, through the rule alone: a partial cover stays cross-script
    fusion = parse_config({}).search.fusion
    legs = {"fts": "lexical", "word": "lexical", "vector": "vector"}
    exact = leg_weights(Features("other", "ja", 1.0, "word", True, 1), legs, fusion)
    assert exact["fts"][0] == exact["word"][0] == fusion.cross_script_exact == 1.0
    # not exact: a partial cover, a word in many chunks (an English title used across
    # Japanese pages), a hit the vector leg does not rank near the query
    for stray in (
        Features("other", "ja", 0.6, "word", True, 1),
        Features("other", "ja", 1.0, "word", True, 12),
        Features("other", "ja", 1.0, "word", False, 1),
    ):
        assert leg_weights(stray, legs, fusion)["word"][0] == fusion.cross_script_lexical


FILLER = (
    "クラスタの監視にはダッシュボードを使う。",
    "障害が起きたら当番に電話する。",
    "ログは七日間保存される。",
    "証明書の更新は毎月一日に行う。",
    "デプロイの前にレビューを受ける。",
    "コンテナのイメージは社内レジストリに置く。",
    "バックアップは夜間に取得する。",
)


def test_script_detection() -> None:
    assert query_script("Vue の computed とは") == "ja"
    assert query_script("how do computed properties work") == "other"
    assert query_script("2024 ?") is None
    assert cjk_share("状態 state") == pytest.approx(2 / 7)


def test_explain_shows_the_word_leg_and_weights(kb: Path) -> None:
    open_kb(kb, entry_points=False).close()
    result = CliRunner().invoke(build_cli(None), ["search", "--kb", str(kb), "状態", "--explain"])
    assert result.exit_code == 0, result.output
    assert "leg word (lexical): 1 candidates  weight 2" in result.output
    assert 'expr: "状態"' in result.output
    result = CliRunner().invoke(
        build_cli(None), ["search", "--kb", str(kb), "computed values template", "--explain"]
    )
    assert result.exit_code == 0, result.output
    # English words of which some occur inside Japanese text: a stray match, lexical legs
    # left out.
    assert "query other vs matches ja: x0" in result.output
    result = CliRunner().invoke(
        build_cli(None), ["search", "--kb", str(kb), "state management pipelines", "--explain"]
    )
    assert result.exit_code == 0, result.output
    # The same mostly-Japanese notes, but this English query matches English notes: a
    # bilingual knowledge base keeps its lexical legs for them.
    assert "vs matches" not in result.output
    assert "leg fts (lexical): 2 candidates  weight 1" in result.output


def test_query_drops_the_snowball_contractions_whole() -> None:
    # "I'd" would leave the fragment "d", rare in the text, matching "3-D" (issue #42).
    assert words.tokens("I'd like 3-D images", drop_stop_words=True) == ["like", "3", "d", "imag"]
    assert words.tokens("We DON\u2019T want it", drop_stop_words=True) == ["want"]
    # the text keeps them: a quoted phrase still matches in place
    assert words.tokens("I'd like") == ["i", "d", "like"]
    # a query of nothing but stop words keeps them
    assert words.query_terms([("I'd", False)]) == (["i", "d"], False)
