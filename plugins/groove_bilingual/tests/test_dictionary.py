"""The conversion of JMdict into the derived table: what it holds, built once and reused,
a damaged cache rebuilt, progress on stderr, a compressed source."""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest
from groove_bilingual import dictionary

from groove_core.config import ConfigError


def test_glosses_become_word_leg_keys() -> None:
    assert dictionary.gloss_key("to embed") == "emb"
    assert dictionary.gloss_key("property (programming)") == "properti"
    assert dictionary.gloss_key("a state of the art way of computing") is None  # 4 tokens: too long
    # a verb's placeholder object is no word of a query (使い方: "way to use something")
    assert dictionary.gloss_key("way to use something") == "way use"
    assert dictionary.gloss_key("to lose one's temper") == "lose temper"
    assert dictionary.gloss_key("to look after somebody") == "look"
    assert dictionary.gloss_key("something") == "someth"  # all placeholder: kept
    assert dictionary.form_term("コンポーネント") == "コン ンポ ポー ーネ ネン ント"
    assert dictionary.form_term("埋め込む") == "埋 込"
    assert dictionary.form_term("うめこむ") is None  # hiragana: no word-leg token


def test_the_table_maps_english_words_to_weighted_headwords(jmdict: Path, cache: Path) -> None:
    table = dictionary.open_dictionary(str(jmdict), progress=lambda _: None)
    found = table.english(["compon", "emb", "bread", "nosuchword"])
    assert set(found) == {"compon", "emb", "bread"}
    heads = [h for h, _, _ in found["compon"]]
    assert heads == ["コンポーネント", "構成要素"]  # the loanword first, the other unprioritised
    weights = {h: w for h, _, w in found["compon"]}
    assert weights["コンポーネント"] == dictionary.LOANWORD * dictionary.UNCOMMON
    assert weights["構成要素"] == dictionary.UNCOMMON
    assert found["emb"] == [("埋め込む", "埋 込", 1.0)]  # prioritised, first sense
    # a second sense weighs less: 1/sqrt(2)
    assert found["bread"][0][2] == pytest.approx(dictionary.UNCOMMON / 2**0.5, abs=1e-4)
    back = table.japanese(["状態", "うめこむ", "コンポーネント"])
    assert [w for w, _ in back["状態"]] == ["condit", "state"]
    assert "うめこむ" not in back  # a hiragana reading of a word written in kanji
    assert back["コンポーネント"] == [("compon", 0.5)]
    # an adjective in -的 also gives its noun, where that is a word, weighed by the noun's
    # own priority (基礎 is common, 基礎的 is not): notes write 基礎 for "basics", which
    # JMdict glosses only as 基礎的; 目的 is no 目 + 的
    basic = table.english(["basic", "purpos"])
    assert basic["basic"] == [("基礎", "基礎", 1.0), ("基礎的", "基礎 礎的", 0.5)]
    assert basic["purpos"] == [("目的", "目的", 1.0)]


def test_it_is_converted_once_with_progress_and_reused(
    jmdict: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = dictionary.open_dictionary(str(jmdict))
    err = capsys.readouterr().err
    assert "converting JMdict" in err and "converted in" in err
    assert first.path.parent == cache and first.path.name.startswith("jmdict-en-f")
    stamp = first.path.stat().st_mtime_ns
    dictionary.forget()  # a new process: the file is checked, not converted again
    second = dictionary.open_dictionary(str(jmdict))
    assert second.path == first.path and second.path.stat().st_mtime_ns == stamp
    assert capsys.readouterr().err == ""
    assert dictionary.open_dictionary(str(jmdict)) is second  # once per process


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_bytes(b"not a database"),
        lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
        lambda p: p.unlink(),
    ],
    ids=["garbage", "truncated", "removed"],
)
def test_a_damaged_cache_is_rebuilt(
    jmdict: Path, cache: Path, capsys: pytest.CaptureFixture[str], damage: object
) -> None:
    path = dictionary.open_dictionary(str(jmdict)).path
    dictionary.forget()
    damage(path)  # type: ignore[operator]
    capsys.readouterr()
    table = dictionary.open_dictionary(str(jmdict))
    assert "converting JMdict" in capsys.readouterr().err
    assert table.english(["emb"])["emb"][0][0] == "埋め込む"
    dictionary.check(path)


def test_a_compressed_source_is_unpacked_and_removed(jmdict: Path, cache: Path) -> None:
    packed = jmdict.with_name("jamdict.db.xz")
    packed.write_bytes(lzma.compress(jmdict.read_bytes()))
    lines: list[str] = []
    table = dictionary.open_dictionary(str(packed), progress=lines.append)
    assert any("unpacking" in line for line in lines)
    assert table.english(["garden"])["garden"][0][0] == "庭"
    assert not list(cache.glob(".tmp-*"))


def test_a_missing_dictionary_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no file"):
        dictionary.open_dictionary(str(tmp_path / "nope.db"))
