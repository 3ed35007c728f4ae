"""The bilingual leg inside real searches over tiny KBs, with the fixture dictionary: it
finds a Japanese note from an English query (and back), stays off on same-script queries,
shows its translations in --explain, and a word the dictionary lacks costs nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from groove_bilingual import plugin

from groove_core.app import Groove
from groove_core.cli import build_cli
from groove_core.config import parse_config
from groove_core.models import LegResult
from groove_core.plugins import make_plugin_manager
from groove_core.testing import FAST_CONFIG, check_candidate_leg, installed_plugin, make_kb, open_kb

JAPANESE = {
    "embed.md": "# 画像の埋め込み\n\nノートに画像を埋め込む方法を説明します。\n",
    "state.md": "# 状態管理\n\nアプリの状態を一か所で管理します。\n",
    "component.md": "# コンポーネント\n\nコンポーネントは再利用できる部品です。\n",
    "garden.md": "# 庭の手入れ\n\nトマトには日光と水が必要です。\n",
    "train.md": "# 夜行列車\n\n列車は十時に駅を出発します。\n",
}
ENGLISH = {
    "state.md": "# Managing state\n\nKeep the application state in one place.\n",
    "garden.md": "# Garden care\n\nTomatoes need sun and water.\n",
    "train.md": "# Night train\n\nThe train leaves the station at ten.\n",
}


def _kb(tmp_path: Path, notes: dict[str, str], jmdict: Path, extra: str = "") -> Path:
    config = f'{FAST_CONFIG}[search.bilingual]\ndictionary = "{jmdict}"\n{extra}'
    return make_kb(tmp_path / "kb", notes, config=config)


def _legs(app: Groove, query: str, **args: Any) -> dict[str, LegResult]:
    _, legs, _ = app.search_explained(query, **args)
    return {leg.name: leg for leg in legs}


def _paths(app: Groove, leg: LegResult) -> list[str]:
    rows = app.store.chunk_rows([hit.chunk_id for hit in leg.hits])
    return list(dict.fromkeys(rows[hit.chunk_id].path for hit in leg.hits))


def test_the_plugin_is_discovered_through_its_entry_point() -> None:
    info = installed_plugin("bilingual")
    assert (info.distribution, info.status) == ("groove-bilingual", "enabled")
    assert info.hooks == ("groove_config_sections", "groove_legs", "groove_stage_switches")
    assert (info.stages, info.off_by_default) == (("bilingual",), False)
    # the JMdict data it derives is CC BY-SA: groove plugins list says so
    assert info.licence == "Apache-2.0 AND CC-BY-SA-4.0"


def test_an_english_query_finds_a_japanese_note_by_a_dictionary_word(
    tmp_path: Path, jmdict: Path
) -> None:
    app = open_kb(_kb(tmp_path, JAPANESE, jmdict))
    leg = _legs(app, "how to embed images")["bilingual"]
    assert _paths(app, leg) == ["embed.md"]
    assert leg.kind == plugin.KIND and leg.hits[0].raw_score < 0  # bm25's scale
    response = app.search("how to embed images", limit=3)
    assert response.results[0].path == "embed.md"
    state = _legs(app, "state")["bilingual"]
    assert _paths(app, state) == ["state.md"]


def test_explain_shows_each_words_translations_and_weights(tmp_path: Path, jmdict: Path) -> None:
    app = open_kb(_kb(tmp_path, JAPANESE, jmdict))
    leg = _legs(app, "component state")["bilingual"]
    assert leg.meta["translations"] == [
        "compon: コンポーネント 1 (df 1)",
        "state: 状態 1 (df 1)",
    ]
    assert leg.meta["notes_japanese"] == 1.0
    result = CliRunner().invoke(
        build_cli(make_plugin_manager(parse_config({}), validate=False)),
        ["search", "component state", "--explain", "--kb", str(app.kb)],
    )
    assert result.exit_code == 0, result.output
    assert "leg bilingual (lexical)" in result.output
    assert "translations: " in result.output and "コンポーネント 1 (df 1)" in result.output
    as_json = CliRunner().invoke(
        build_cli(make_plugin_manager(parse_config({}), validate=False)),
        ["search", "component state", "--explain", "--json", "--kb", str(app.kb)],
    )
    assert "コンポーネント" in as_json.output and json.loads(as_json.output)


def test_a_headword_the_kb_never_uses_costs_nothing(tmp_path: Path, jmdict: Path) -> None:
    # 構成要素 (component) and 宇宙船 (spaceship) are in the dictionary, not in the notes
    app = open_kb(_kb(tmp_path, JAPANESE, jmdict))
    leg = _legs(app, "component spaceship")["bilingual"]
    assert leg.meta["translations"] == ["compon: コンポーネント 1 (df 1)"]
    assert leg.meta["untranslated"] == ["spaceship"]
    assert leg.meta["searched"] == 1


def test_it_is_a_lexical_leg_the_cross_script_rule_leaves_alone(
    tmp_path: Path, jmdict: Path
) -> None:
    # "API" is written in Latin letters in a Japanese note: the word leg matches it there,
    # and the cross-script rule (exact matches included) sets the word and trigram legs
    # aside; the bilingual leg, which bridges scripts by design, keeps its weight.
    notes = {**JAPANESE, "api.md": "# API の使い方\n\nAPI でデータを取得します。\n"}
    strict = "[search.fusion]\ncross_script_exact = 0.0\n"
    app = open_kb(_kb(tmp_path, notes, jmdict, strict))
    legs = _legs(app, "api state")
    leg = legs["bilingual"]
    assert (leg.kind, leg.bridges_scripts) == ("lexical", True)
    assert "state.md" in _paths(app, leg)
    assert (leg.meta["weight"], leg.meta["weight_reasons"]) == (1.0, ())
    assert legs["word"].hits and legs["word"].meta["weight"] == 0.0
    assert "state.md" in [r.path for r in app.search("api state", limit=3).results]


def test_a_katakana_headword_is_counted_by_its_own_chunks(tmp_path: Path, jmdict: Path) -> None:
    # コース (course) is in no note, but its pairs コー and ース are in many (ソースコード,
    # ケース): counted by its rarest pair, it was chosen and searched for nothing
    notes = {
        **JAPANESE,
        "source.md": "# ソースコード\n\nソースコードのケースを説明します。\n",
        "case.md": "# ケース\n\nコードのケースとソース。\n",
    }
    app = open_kb(_kb(tmp_path, notes, jmdict))
    leg = _legs(app, "component course")["bilingual"]
    assert leg.meta["translations"] == ["compon: コンポーネント 1 (df 1)"]
    assert leg.meta["untranslated"] == ["cours"]


def test_a_word_the_dictionary_lacks_costs_nothing(tmp_path: Path, jmdict: Path) -> None:
    app = open_kb(_kb(tmp_path, JAPANESE, jmdict))
    plain = _legs(app, "embed")["bilingual"]
    more = _legs(app, "embed zyxwv")["bilingual"]
    assert more.meta["untranslated"] == ["zyxwv"]
    assert more.hits == plain.hits and more.meta["searched"] == plain.meta["searched"] == 1


def test_it_does_not_run_on_a_same_script_query(tmp_path: Path, jmdict: Path) -> None:
    app = open_kb(_kb(tmp_path, JAPANESE, jmdict))
    assert "bilingual" not in _legs(app, "状態管理")
    english = open_kb(_kb(tmp_path / "en", ENGLISH, jmdict))
    assert "bilingual" not in _legs(english, "state")
    # and the search is the one a groove without the plugin gives
    without = Groove.open(
        make_kb(
            tmp_path / "en2", ENGLISH, config=FAST_CONFIG + "[plugins]\ndisabled = ['bilingual']\n"
        )
    )
    without.index()
    assert [r.path for r in english.search("state").results] == [
        r.path for r in without.search("state").results
    ]


def test_a_japanese_query_finds_an_english_note(tmp_path: Path, jmdict: Path) -> None:
    app = open_kb(_kb(tmp_path, ENGLISH, jmdict))
    leg = _legs(app, "状態の管理")["bilingual"]
    assert _paths(app, leg)[0] == "state.md"
    assert leg.meta["translations"][0].startswith("状態: ")


def test_a_japanese_querys_latin_words_are_searched_in_english_notes(
    tmp_path: Path, jmdict: Path
) -> None:
    # A Japanese question naming an API: the word leg matches `markRaw` but is set aside
    # (a Japanese query over English notes); the leg searches it as it is, with the
    # translations of its Japanese words.
    notes = {
        **ENGLISH,
        "raw.md": "# Opting out\n\nmarkRaw() keeps an object out of the proxies.\n",
        "more.md": "# State and more state\n\nState, state everywhere: the state of things.\n",
    }
    app = open_kb(_kb(tmp_path, notes, jmdict))
    leg = _legs(app, "状態から markRaw で外すには")["bilingual"]
    assert _paths(app, leg)[0] == "raw.md"
    assert any(t.startswith("markraw: markraw 1") for t in leg.meta["translations"])
    off = open_kb(_kb(tmp_path / "off", notes, jmdict, "own_words = 0\n"))
    leg = _legs(off, "状態から markRaw で外すには")["bilingual"]
    assert "raw.md" not in _paths(off, leg)


def test_a_name_of_code_is_searched_as_it_is_written(tmp_path: Path, jmdict: Path) -> None:
    # `v-if` is the word leg's `v` alone (`if` is a stop word): in a Japanese query over
    # English notes it is searched as the phrase `v if` too, which the note that writes
    # `v-if` holds and the one that has `v` and `if` apart does not.
    notes = {
        **ENGLISH,
        "if.md": "# Conditional rendering\n\nThe v-if directive renders a block conditionally.\n",
        "show.md": "# Showing\n\nA v-show element is shown if the value is true; v stays.\n",
    }
    app = open_kb(_kb(tmp_path, notes, jmdict))
    leg = _legs(app, "v-if の使い方")["bilingual"]
    assert _paths(app, leg)[0] == "if.md"
    assert "v-if: v-if 1 (df 2)" in leg.meta["translations"]
    # In an English query over Japanese notes, a name joined by dots is one too (`app.use`);
    # a word joined by hyphens is mostly English there (`built-in`) and stays as it was.
    japanese = {
        **JAPANESE,
        "use.md": "# プラグイン\n\napp.use() でプラグインを登録します。\n",
        "apart.md": "# アプリ\n\nこの app の関数 use を呼びます。\n",
    }
    ja_app = open_kb(_kb(tmp_path / "ja", japanese, jmdict))
    leg = _legs(ja_app, "register with app.use")["bilingual"]
    assert _paths(ja_app, leg)[0] == "use.md"
    assert leg.meta["translations"][-1] == "app.use: app.use 1 (df 2)"
    leg = _legs(ja_app, "built-in component")["bilingual"]
    assert not any(t.startswith("built-in") for t in leg.meta["translations"])


def test_a_katakana_word_the_dictionary_lacks_is_sounded_out_in_english_notes(
    tmp_path: Path, jmdict: Path
) -> None:
    notes = {**ENGLISH, "reactivity.md": "# Reactivity\n\nHow reactivity tracks a change.\n"}
    app = open_kb(_kb(tmp_path, notes, jmdict))
    leg = _legs(app, "リアクティビティーの仕組み")["bilingual"]
    assert _paths(app, leg) == ["reactivity.md"]
    assert leg.meta["transliterated"] == ["リアクティビティー: reactivity 1"]
    off = open_kb(_kb(tmp_path / "off", notes, jmdict, "transliterations = 0\n"))
    assert not _legs(off, "リアクティビティーの仕組み")["bilingual"].hits


def test_a_katakana_word_is_not_read_as_the_words_inside_it() -> None:
    found = {"バリ", "データー", "コンポーネント", "ツリー", "状態", "ミュー", "ハンドラ"}
    found |= {"データ型", "ー", "クリック"}
    # バリデーター is no バリ and データー, ミューテーション no ミュー; a compound of whole
    # loanwords is cut, a final ー may be missing from the dictionary's spelling
    assert plugin._longest(["バリデーター", "ミューテーション"], found) == (
        [],
        ["バリデーター", "ミューテーション"],
    )
    assert plugin._longest(["コンポーネントツリー", "状態"], found)[0] == [
        "コンポーネント",
        "ツリー",
        "状態",
    ]
    assert plugin._longest(["クリックハンドラー"], found) == (["クリック", "ハンドラ"], [])
    assert plugin._longest(["データ型の状態"], found) == (["データ型", "状態"], [])


def test_the_switch_turns_it_off_per_query_and_by_default(tmp_path: Path, jmdict: Path) -> None:
    app = open_kb(_kb(tmp_path, JAPANESE, jmdict))
    assert "bilingual" not in _legs(app, "embed", options={"bilingual": False})
    off = open_kb(_kb(tmp_path / "off", JAPANESE, jmdict, "enabled = false\n"))
    assert "bilingual" not in _legs(off, "embed")
    assert "bilingual" in _legs(off, "embed", options={"bilingual": True})


def test_it_keeps_the_candidate_leg_contract(tmp_path: Path, jmdict: Path) -> None:
    app = open_kb(_kb(tmp_path, JAPANESE, jmdict))
    check_candidate_leg(plugin, app)


def test_filters_and_exclusions_apply(tmp_path: Path, jmdict: Path) -> None:
    notes = {**JAPANESE, "more/state.md": "# 状態遷移\n\n状態が変わる。\n"}
    app = open_kb(_kb(tmp_path, notes, jmdict))
    both = _paths(app, _legs(app, "state")["bilingual"])
    assert set(both) == {"state.md", "more/state.md"}
    only = _paths(app, _legs(app, "state", path="more/")["bilingual"])
    assert only == ["more/state.md"]


def test_a_translation_holding_a_chosen_one_takes_no_place() -> None:
    # 基本的 is searched as 基本 本的: every chunk it finds, 基本 finds too
    options = [("基本", "基本", 1.0), ("基本的", "基本 本的", 1.0), ("基礎", "基礎", 0.9)]
    df = {"基本": 10, "本的": 8, "基礎": 5}
    chosen = plugin.choose({"basic": options}, df, 100, 2)
    assert [c.shown for c in chosen["basic"]] == ["基本", "基礎"]


def test_a_run_of_words_translated_as_one_stands_for_its_words(
    tmp_path: Path, jmdict: Path
) -> None:
    notes = {**JAPANESE, "botanic.md": "# 植物園\n\n温室には熱帯の花があります。\n"}
    app = open_kb(_kb(tmp_path, notes, jmdict))
    leg = _legs(app, "botanical garden")["bilingual"]
    # garden alone (庭) is not searched again: the run's translation holds it
    assert leg.meta["translations"] == ["botan garden: 植物園 1 (df 1)"]
    assert leg.meta["inside_runs"] == ["garden"]
    assert "garden" not in leg.meta.get("untranslated", [])  # translated, through the run
    assert _paths(app, leg) == ["botanic.md"]
    assert "inside_runs" not in _legs(app, "garden care")["bilingual"].meta


def test_a_run_given_only_in_a_late_sense_leaves_its_words_alone() -> None:
    run = plugin.Choice("熟す", "熟", 0.5 / 3**0.5, 2)  # "to be in common use", 3rd sense
    word = plugin.Choice("使用", "使用", 1.0, 40)
    chosen = {"common use": [run], "use": [word], "common": [word]}
    assert plugin.phrases_first(chosen) == chosen
    strong = {**chosen, "common use": [plugin.Choice("常用", "常用", 1.0, 3)]}
    assert list(plugin.phrases_first(strong)) == ["common use"]


def test_reading_a_long_japanese_query_costs_in_proportion_to_its_length() -> None:
    # A query holds up to 16,000 characters; a cut that looked at every katakana word for
    # every position took 6 s for one such query over English notes (quadratic).
    from groove_core.testing import cost_ratio

    found = {"データ型", "コンポーネント", "状態"}
    text = "バリデーターの状態とコンポーネントのデータ型の"
    short, long = [text * 60], [text * 480]  # 8 times as long
    assert plugin._longest(long, found)[0] == ["状態", "コンポーネント", "データ型"]
    assert (
        cost_ratio(lambda: plugin._longest(long, found), lambda: plugin._longest(short, found)) < 24
    )


def test_reading_a_querys_names_of_code_costs_in_proportion_to_its_length() -> None:
    from groove_core.testing import cost_ratio

    assert plugin.code_words("v-if と app.use、built-in", hyphens=False) == {"app.use": "app use"}
    assert plugin.code_words("v-if と app.use", hyphens=True) == {
        "v-if": "v if",
        "app.use": "app use",
    }
    assert plugin.code_words("std::vector, app.use().", hyphens=False) == {
        "std::vector": "std vector",
        "app.use": "app use",
    }
    assert plugin.code_words("naïve.js, a.bé", hyphens=False) == {}  # no cut inside a word
    # one word of 16,000 letters, and a name of 8,000 tokens, are no names (a pattern that
    # let two letter runs share a word took 5 s for 1,000 letters)
    for text in ("a" * 2000, "a." * 1000, "ab-" * 700):
        short, long = text, text * 8
        assert plugin.code_words(long, hyphens=True) == {}
        assert (
            cost_ratio(
                lambda long=long: plugin.code_words(long, hyphens=True),
                lambda short=short: plugin.code_words(short, hyphens=True),
            )
            < 24
        )


def test_cutting_a_katakana_word_is_linear_and_never_recursion_deep() -> None:
    # every cut tried in turn was exponential: テレビゲーム repeated, then a letter no word
    # holds, took 10 s at 133 characters; a found word repeated 1,000 times recursed past
    # Python's limit and failed the whole search
    from groove_core.testing import cost_ratio

    found = {"テレビ", "ゲーム", "テレビゲーム"}
    assert plugin._katakana_pieces("テレビゲームテレビー", found) == ["テレビゲーム", "テレビ"]
    assert plugin._katakana_pieces("テレビ" * 5_000, found) == ["テレビ"] * 5_000
    short, long = "テレビゲーム" * 20 + "ヅ", "テレビゲーム" * 160 + "ヅ"
    assert plugin._katakana_pieces(long, found) == []
    ratio = cost_ratio(
        lambda: plugin._katakana_pieces(long, found), lambda: plugin._katakana_pieces(short, found)
    )
    assert ratio < 24, ratio


def test_a_huge_query_reads_a_bounded_part_of_itself(tmp_path: Path, jmdict: Path) -> None:
    # a quoted phrase of thousands of words is one term, and a kanji run of 16,000
    # characters gives eight forms a character: the leg reads as much as it can search
    japanese = open_kb(_kb(tmp_path / "ja", JAPANESE, jmdict))
    phrase = '"' + " ".join(f"word{i}" for i in range(2_000)) + '"'
    _, _, ctx = japanese.search_explained(phrase)
    assert len(plugin.english_units(ctx)) <= 3 * 48
    english = open_kb(_kb(tmp_path / "en", ENGLISH, jmdict))
    _, _, ctx = english.search_explained("状態管理" * 4_000)
    forms = plugin.japanese_forms(ctx)
    assert forms and len(forms) <= 8 * plugin.MAX_JAPANESE_READ
