"""The transliteration step: English words matched with the katakana words the notes use
(``reactivity`` -> リアクティビティー, ``composable`` -> コンポーザブル), inside real searches
over tiny KBs with the fixture dictionary (which has neither word)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from groove_bilingual import transliteration
from groove_bilingual.transliteration import (
    EnglishTable,
    KatakanaTable,
    covering,
    english_keys,
    katakana_key,
    transliterable,
)

from groove_core.app import Groove
from groove_core.models import LegResult
from groove_core.query import normalize
from groove_core.testing import FAST_CONFIG, make_kb, open_kb

NOTES = {
    "reactivity.md": "# リアクティビティーの基礎\n\nリアクティビティーは状態の変化を追跡します。\n",
    "composables.md": "# コンポーザブル\n\nコンポーザブルはロジックを再利用する関数です。\n",
    "slots.md": "# スロット\n\n親から子へテンプレートを渡すスロット。\n",
    "garden.md": "# 庭の手入れ\n\nトマトには日光と水が必要です。\n",
}


def _app(tmp_path: Path, jmdict: Path, extra: str = "") -> Groove:
    config = f'{FAST_CONFIG}[search.bilingual]\ndictionary = "{jmdict}"\n{extra}'
    return open_kb(make_kb(tmp_path / "kb", NOTES, config=config))


def _leg(app: Groove, query: str, **args: Any) -> LegResult:
    _, legs, _ = app.search_explained(query, **args)
    return next(leg for leg in legs if leg.name == "bilingual")


def _paths(app: Groove, leg: LegResult) -> list[str]:
    rows = app.store.chunk_rows([hit.chunk_id for hit in leg.hits])
    return list(dict.fromkeys(rows[hit.chunk_id].path for hit in leg.hits))


@pytest.mark.parametrize(
    ("english", "katakana"),
    [
        ("reactivity", "リアクティビティー"),
        ("composable", "コンポーザブル"),
        ("component", "コンポーネント"),
        ("hydration", "ハイドレーション"),
        ("server", "サーバー"),
        ("slots", "スロット"),  # a plural: its singular
        ("TransitionGroup", "トランジショングループ"),  # a Pascal-case name: its words
    ],
)
def test_an_english_word_and_its_katakana_share_a_consonant_key(
    english: str, katakana: str
) -> None:
    assert katakana_key(katakana) in english_keys(english)


def test_identifiers_and_acronyms_are_not_transliterated() -> None:
    assert transliterable("reactivity") and transliterable("Teleport")
    assert not transliterable("markRaw")  # camel case: an API name, written in Latin
    assert not transliterable("jsx") and not transliterable("SSR") and not transliterable("h2")


def test_the_table_matches_by_sound_and_vowels() -> None:
    table = KatakanaTable.build(
        ["リアクティビティー と リアクティビティ", "コンポーザブル", "タイムアウト", "ホスト"]
    )
    assert covering(table.matches("reactivity")) == [("リアクティビティ", 1.0)]
    assert table.matches("composable") == [("コンポーザブル", 1.0)]
    # same consonants (H S T), vowels that disagree: no match
    assert table.matches("faster") == []
    assert table.matches("garden") == [] and table.matches("zyxwv") == []
    # a three-class key (J P N / S P N) needs every vowel to agree: ス is no "ja"
    assert KatakanaTable.build(["スペイン"]).matches("Japan") == []
    assert KatakanaTable.build(["スロット"]).matches("slot") == [("スロット", 1.0)]
    # a word opening with a vowel opens as katakana may write it: "using" is no イージング
    opening = KatakanaTable.build(
        ["イージング", "ユーティリティ", "アップデート", "オートコンプリート"]
    )
    assert opening.matches("using") == [] and opening.matches("easing") == [("イージング", 1.0)]
    assert [w for w, _ in opening.matches("utility")] == ["ユーティリティ"]
    assert [w for w, _ in opening.matches("update")] == ["アップデート"]
    assert [w for w, _ in opening.matches("autocomplete")] == ["オートコンプリート"]


def test_the_english_table_matches_a_katakana_word_back() -> None:
    table = EnglishTable.build(
        ["Reactivity in depth: how reactivity works", "Hydration mismatch", "markRaw and SSR"]
    )
    assert table.matches("リアクティビティー") == [("reactivity", 1.0)]
    assert table.matches("ハイドレーション") == [("hydration", 1.0)]
    assert table.df["reactivity"] == 1  # chunks, not occurrences
    # identifiers and acronyms are not words to sound out; a short key matches nothing
    assert "markraw" not in table.df and "ssr" not in table.df
    assert table.matches("デプス") == [("depth", 1.0)]  # in "depth:"
    assert table.matches("スペイン") == [] and table.matches("ティー") == []


def test_the_table_reads_katakana_as_the_queries_normalise_it() -> None:
    # half-width, squared and combining-mark katakana become their full-width words (NFKC),
    # as a query's do; a chunk without them is read as it is (normalising every chunk cost
    # half of the build at 99,000 chunks)
    table = KatakanaTable.build(["ｺﾝﾎﾟｰﾈﾝﾄ の ㌀", "コンポーネント（部品）", "カ\u3099ード"])
    assert table.df == {"コンポーネント": 2, "アパート": 1, "ガード": 1}


def test_every_character_nfkc_turns_into_katakana_is_normalised() -> None:
    # the table skips NFKC for a chunk without such characters: none may be missed
    import sys
    import unicodedata

    from groove_bilingual.transliteration import _KATAKANA_WORD, _TO_KATAKANA

    missed = []
    for code in range(sys.maxunicode + 1):
        c = chr(code)
        if not unicodedata.decomposition(c) and c not in "\u3099\u309a":
            continue
        for text in ("カ" + c + "ド", "カ" + c, c + "ド", "ア" + c + "ア"):
            if _KATAKANA_WORD.findall(normalize(text)) != _KATAKANA_WORD.findall(text):
                if not _TO_KATAKANA.search(text):
                    missed.append(f"U+{code:04X}")
                break
    assert missed == []


def test_the_table_counts_the_chunks_holding_a_katakana_word() -> None:
    table = KatakanaTable.build(["ソースコード と ケース", "コース料理", "コースター と コース"])
    # the word index's bound for コース is its rarest pair's (ース: three chunks)
    # inside コース (two chunks) and コースター (one, already counted: the sum is a bound),
    # never inside ソース or ケース
    assert table.holding("コース") == 3
    assert table.holding("ソース") == 1 and table.holding("ポータル") == 0
    assert table.holding("ース") is None  # shorter than a word of the table
    assert table.holding("状態") is None  # not katakana


def test_reactivity_finds_the_note_that_writes_it_in_katakana(tmp_path: Path, jmdict: Path) -> None:
    app = _app(tmp_path, jmdict)
    leg = _leg(app, "reactivity")
    assert _paths(app, leg) == ["reactivity.md"]
    assert leg.meta["transliterated"] == ["reactivity: リアクティビティー 1"]
    assert leg.meta["translations"][0].startswith("reactiv: リアクティビティー 1 (df ")
    assert app.search("reactivity", limit=3).results[0].path == "reactivity.md"
    composable = _leg(app, "Composables")
    assert _paths(app, composable) == ["composables.md"]
    assert composable.meta["transliterated"] == ["Composables: コンポーザブル 0.95"]


def test_an_unrelated_word_matches_nothing(tmp_path: Path, jmdict: Path) -> None:
    app = _app(tmp_path, jmdict)
    leg = _leg(app, "zyxwv quantum")
    assert leg.hits == () and "transliterated" not in leg.meta
    assert leg.meta["skipped"] is True


def test_it_can_be_turned_off_or_kept_to_words_the_dictionary_lacks(
    tmp_path: Path, jmdict: Path
) -> None:
    off = _app(tmp_path / "off", jmdict, "transliterations = 0\n")
    leg = _leg(off, "reactivity")
    assert leg.hits == () and "transliterated" not in leg.meta
    # the fixture dictionary translates "state" (状態): with transliterate_all off it is
    # not transliterated, "slots" (not in the dictionary) is
    lacking = _app(tmp_path / "lacking", jmdict, "transliterate_all = false\n")
    assert _leg(lacking, "state slots").meta["transliterated"] == ["slots: スロット 0.95"]


def test_the_table_is_built_once_per_index_state(
    tmp_path: Path, jmdict: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _app(tmp_path, jmdict)
    built: list[int] = []
    real = KatakanaTable.build.__func__  # type: ignore[attr-defined]

    def counting(cls: type[KatakanaTable], texts: Any) -> KatakanaTable:
        table: KatakanaTable = real(cls, texts)
        built.append(table.chunks)
        return table

    monkeypatch.setattr(KatakanaTable, "build", classmethod(counting))
    transliteration._tables.clear()
    for query in ("reactivity", "composable", "slots", "reactivity"):
        _leg(app, query)
    assert built == [len(NOTES)]  # one chunk per note, read once
    # a word is searched through at most `transliterations` katakana words
    assert _leg(app, "reactivity").meta["searched"] <= 2


def test_an_edit_that_keeps_the_chunk_count_is_seen_by_a_long_lived_app(
    tmp_path: Path, jmdict: Path
) -> None:
    app = _app(tmp_path, jmdict)  # as a server keeps one open across index runs
    assert _paths(app, _leg(app, "hydration")) == []
    (tmp_path / "kb" / "garden.md").write_text(
        "# ハイドレーション\n\nハイドレーションはサーバーの描画を引き継ぎます。\n", encoding="utf-8"
    )
    app.index()  # the same number of chunks as before
    assert _paths(app, _leg(app, "hydration")) == ["garden.md"]


def test_a_word_past_the_longest_key_is_matched_by_nothing_and_costs_little() -> None:
    # a word's one-edit neighbours cost its key's length squared: one 16,000-letter word
    # took 100 MB; no loanword's key is that long
    from groove_core.testing import cost_ratio

    table = KatakanaTable.build(["コンポーネント と " + "コンポ" * 500])
    assert table.matches("component") == [("コンポーネント", 1.0)]
    long = "kompozabul" * 1_600
    assert table.matches(long) == []
    ratio = cost_ratio(lambda: table.matches(long), lambda: table.matches("kompozabul" * 200))
    assert ratio < 24, ratio
    # the English table of a note holding such a word: 6 s at 80,000 letters
    note = "component " + "kompozabul" * 8_000
    assert EnglishTable.build([note]).df == {"component": 1}
    ratio = cost_ratio(
        lambda: EnglishTable.build([note]),
        lambda: EnglishTable.build(["component " + "kompozabul" * 1_000]),
    )
    assert ratio < 24, ratio
