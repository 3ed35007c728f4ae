"""The lexical helpers' counting rules, checked against a brute-force count (no server)."""

from __future__ import annotations

import itertools
import re
from collections import Counter

from groove_postgres import lexical, wordleg


def occurrences(text: str, phrase: str) -> int:
    """Every start of ``phrase`` in ``text``, overlaps included (what trigram positions count)."""
    return sum(text.startswith(phrase, i) for i in range(len(text)))


def counted(text: str, phrase: str, witnesses: list[str]) -> int:
    """What the store's SQL counts: ``replace`` arithmetic unless a witness is present,
    then the lookahead regex (groove_postgres.store._count_literal)."""
    if not any(w in text for w in witnesses):
        return (len(text) - len(text.replace(phrase, ""))) // len(phrase)
    return len(re.findall(lexical.overlap_regex(phrase), text))


def test_witnesses_name_each_way_a_phrase_overlaps_itself() -> None:
    assert lexical.overlap_witnesses("abc") == []
    assert lexical.overlap_witnesses("nation") == ["nationation"]
    assert lexical.overlap_witnesses("anana") == ["ananana"]  # "anananana" holds it
    assert lexical.overlap_witnesses("aaa") == ["aaaa"]
    assert lexical.overlap_witnesses("abcab") == ["abcabcab"]


def test_the_count_equals_every_occurrence_on_all_short_texts() -> None:
    # Every text of up to 7 letters over {a, b} and every phrase of 3-4 letters: the
    # cheap path is taken only where it is exact.
    texts = ["".join(t) for n in range(8) for t in itertools.product("ab", repeat=n)]
    phrases = ["".join(p) for n in (3, 4) for p in itertools.product("ab", repeat=n)]
    cheap = 0
    for phrase in phrases:
        witnesses = lexical.overlap_witnesses(phrase)
        for text in texts:
            assert counted(text, phrase, witnesses) == occurrences(text, phrase), (text, phrase)
            cheap += not any(w in text for w in witnesses)
    assert cheap > len(texts) * len(phrases) // 2  # the regex is the exception


def test_word_phrases_overlap_by_whole_tokens_only() -> None:
    assert wordleg.overlap_witnesses(["x"]) == []
    assert wordleg.overlap_witnesses(["a", "b"]) == []
    assert wordleg.overlap_witnesses(["a", "a"]) == [wordleg.padded(["a", "a", "a"])]
    column = wordleg.padded(["a", "a", "a", "b", "a", "a"])
    phrase = wordleg.padded(["a", "a"])
    witnesses = wordleg.overlap_witnesses(["a", "a"])
    assert counted(column, phrase, witnesses) == occurrences(column, phrase) == 3


def test_a_latin_phrase_counts_as_the_sum_over_its_surface_words() -> None:
    """A phrase of SURFACE_CHARS occurs only inside surface words: its count in a column is
    each surface word's count times its occurrences in the word (what the store's SQL sums).
    Checked on every text of up to 7 characters over {a, b, o, space, 日}."""
    alphabet = "ab o日"
    texts = ["".join(t) for n in range(8) for t in itertools.product(alphabet, repeat=n)]
    phrases = ["".join(p) for n in (3, 4) for p in itertools.product("abo", repeat=n)]
    for phrase in phrases:
        assert lexical.surface_phrase(phrase)
        for text in texts:
            words = Counter(lexical.surface_words(text))
            summed = sum(n * occurrences(word, phrase) for word, n in words.items())
            assert summed == occurrences(text, phrase), (text, phrase)
    assert lexical.surface_words("a1b2c3 the-cat's no 東京abc") == ["a1b2c3", "the", "cat", "abc"]
    for other in ("ab", "a b", "c++", "日本語", "Abc", "naïve", "a-b"):
        assert not lexical.surface_phrase(other), other
