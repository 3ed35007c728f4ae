"""English words the dictionary lacks, matched with the katakana words the notes use.

Technical Japanese writes a borrowed term in katakana (``reactivity`` -> ``リアクティビティー``,
``composable`` -> ``コンポーザブル``), and JMdict lacks most of them. Both sides are reduced to
a *consonant key*: the word's consonants in ten sound classes, vowels, glides and length
marks out, repeats collapsed, so that the vowels katakana inserts between consonants
(``ku``, ``ru``) and the ones English spells but does not say agree:

* katakana, per character: ``カ`` K, ``ガ`` G, ``サ ザ シ ジ チ ツ`` S, ``タ テ ト`` T,
  ``ダ デ ド`` D, ``ナ マ ン`` N, ``ハ フ`` H, ``バ ヴ`` B, ``パ`` P, ``ラ`` R; vowels,
  ``ヤ ユ ヨ ワ`` (large or small), ``ッ`` and ``ー`` add nothing
  (``リアクティビティー`` -> ``RKTBT``);
* English, by rules of its spelling: ``c`` K (S before e, i, y), ``g`` G (also S before e,
  i, y), ``ch`` S (also K), ``sh th s z j`` S, ``ti si ci`` before a vowel S (``-tion``),
  ``ph f h`` H, ``v b`` B, ``l r`` R, ``m n`` N, ``x`` KS, ``ck q`` K; an ``r`` before a
  consonant or at the end is silent, as katakana writes it (``server`` -> ``サーバー``);
  vowels, ``w`` and ``y`` add nothing (``reactivity`` -> ``RKTBT``).

An English word matches the KB's katakana words whose key is its key (its vowels agreeing
with theirs, and its opening vowel with their first kana: ``using`` is no ``イージング``), or one
edit away when the key has at least :data:`FUZZY_FROM` classes; a key under :data:`MIN_KEY`
classes matches nothing (too many words share it). The table of the KB's katakana words
(each with the chunks that hold it) is read once per state of the index, a page of chunks at
a time through the storage contract (both backends), and kept per index. The reverse,
:class:`EnglishTable`, reads the KB's English words the same way for a Japanese query's
katakana words that the dictionary lacks (``リアクティビティー`` -> ``reactivity``).
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from groove_bilingual.index_state import PerIndexState
from groove_core.query import normalize

#: A katakana word of the notes: a run of katakana and long-vowel marks, at least this long.
MIN_LENGTH = 3
#: Classes a key needs to match anything; from FUZZY_FROM, one edit is allowed.
MIN_KEY = 3
#: The longest key a word is matched by (``incomprehensibilities``: 12 classes): a longer
#: run is no loanword, and its one-edit neighbours cost its length squared (a note or a
#: query of one 16,000-letter word took 100 MB).
MAX_KEY = 24
#: The longest English word sounded out: a longer one is no loanword (and spelling out its
#: sounds costs its length squared: a note of one 80,000-letter word took 6 s).
MAX_LETTERS = 64
FUZZY_FROM = 6
#: Similarity of a key one edit away (an exact key: up to 1).
FUZZY = 0.7
#: An exact key's vowels: below this share agreeing it is no match (a key of MIN_KEY
#: classes, which many words share, needs every vowel to agree: `Japan` is no `スペイン`);
#: their share of the similarity (all agreeing: 1; none comparable, 0.5 agreeing:
#: 1 - VOWEL_SHARE / 2).
MIN_VOWELS = 0.5
VOWEL_SHARE = 0.25
#: Keys tried per English word (the spelling's ambiguous letters), at most.
MAX_VARIANTS = 8

_KATAKANA_WORD = re.compile(f"[\u30a1-\u30fa\u30fc]{{{MIN_LENGTH},}}")
#: A word of the notes in Latin letters, as written (an identifier is left out later).
_ENGLISH_WORD = re.compile("[A-Za-z]{3,}")
_LATIN = re.compile("[a-z]+")

_CLASSES = {
    "K": "カキクケコヵヶ",
    "G": "ガギグゲゴ",
    "S": "サシスセソザジズゼゾチツヂヅ",
    "T": "タテト",
    "D": "ダデド",
    "N": "ナニヌネノマミムメモン",
    "H": "ハヒフヘホ",
    "B": "バビブベボヴ",
    "P": "パピプペポ",
    "R": "ラリルレロ",
}
_KANA_CLASS = {kana: cls for cls, kanas in _CLASSES.items() for kana in kanas}
_VOWELS = frozenset("aeiouy")
_KANA_VOWELS = frozenset("アイウエオヤユヨワァィゥェォャュョヮ")
_PLAIN = {
    "b": "B",
    "v": "B",
    "d": "D",
    "f": "H",
    "h": "H",
    "j": "S",
    "k": "K",
    "q": "K",
    "l": "R",
    "m": "N",
    "n": "N",
    "p": "P",
    "s": "S",
    "z": "S",
    "t": "T",
}


#: A sound: its class and the vowel spoken after it ("" for none), e.g. ("T", "i").
Sound = tuple[str, str]

_KANA_VOWEL = dict(
    zip(
        "アイウエオカキクケコガギグゲゴサシスセソザジズゼゾタチツテトダヂヅデドナニヌネノ"
        "ハヒフヘホバビブベボパピプペポマミムメモラリルレロヴヵヶ",
        "aiueoaiueoaiueoaiueoaiueoaiueoaiueoaiueoaiueoaiueoaiueoaiueoaiueouae",
        strict=True,
    )
)
_SMALL_VOWEL = dict(zip("ァィゥェォャュョ", "aiueoauo", strict=True))
#: The katakana vowels an English vowel letter after a consonant is written with.
_ALLOWED = {
    "a": "ae",
    "e": "eia",
    "i": "ia",
    "o": "oau",
    "u": "ua",
    "y": "ia",
}


def _collapse(sounds: list[Sound]) -> list[Sound]:
    """Repeats of a class as one sound (``ッ``, ``ss``, ``サス``), with the first vowel."""
    out: list[Sound] = []
    for cls, vowel in sounds:
        if out and out[-1][0] == cls:
            if not out[-1][1]:
                out[-1] = (cls, vowel)
            continue
        out.append((cls, vowel))
    return out


def katakana_sounds(word: str) -> list[Sound]:
    """A katakana word's sounds: each consonant's class and vowel (``ティ`` T i)."""
    out: list[Sound] = []
    for c in word:
        cls = _KANA_CLASS.get(c)
        if cls is not None:
            out.append((cls, "" if c == "ン" else _KANA_VOWEL.get(c, "")))
        elif c in _SMALL_VOWEL and out:
            out[-1] = (out[-1][0], _SMALL_VOWEL[c])
    return _collapse(out)


def katakana_key(word: str) -> str:
    """The consonant key of a katakana word (``コンポーザブル`` -> ``KNPSBR``)."""
    return "".join(cls for cls, _ in katakana_sounds(word))


def _units(word: str) -> list[tuple[tuple[str, ...], str]]:
    """The word's letters left to right as (the classes they may sound as, '' silent, and
    the vowel letter they are, if one)."""
    out: list[tuple[tuple[str, ...], str]] = []
    n, i = len(word), 0

    def at(j: int) -> str:
        return word[j] if 0 <= j < n else ""

    while i < n:
        c, nxt = word[i], at(i + 1)
        if c in _VOWELS:
            # a final e is silent (store, module), so is any vowel after a silent letter
            silent = c == "e" and i == n - 1 and n > 3
            out.append((("",), "" if silent else c))
            i += 1
        elif c == "w":
            out.append((("",), ""))
            i += 1
        elif word.startswith("tch", i):
            out.append((("S",), ""))
            i += 3
        elif c == "c" and nxt == "h":
            out.append((("S", "K"), ""))
            i += 2
        elif c in "st" and nxt == "h":
            out.append((("S",), ""))
            i += 2
        elif c == "p" and nxt == "h":
            out.append((("H",), ""))
            i += 2
        elif c == "g" and nxt == "h":
            out.append((("G",) if i == 0 else ("",), ""))
            i += 2
        elif c == "c" and nxt == "k":
            out.append((("K",), ""))
            i += 2
        elif c in "tsc" and nxt == "i" and at(i + 2) in ("a", "o", "u") and i > 0:
            out.append((("S",), ""))  # -tion, -sion, -cial: the i is part of the sound
            i += 2
        elif c == "c":
            out.append((("S",) if nxt in ("e", "i", "y") else ("K",), ""))
            i += 1
        elif c == "g":
            out.append((("G", "S") if nxt in ("e", "i", "y") else ("G",), ""))
            i += 1
        elif c == "x":
            out.append((("K",), ""))
            out.append((("S",), ""))
            i += 1
        elif c == "r":
            # silent before a consonant, at the end, or before a final e (store, feature)
            rest = word[i + 1 :].lstrip("r")
            spoken = bool(rest) and rest[0] in _VOWELS and rest != "e"
            out.append((("R",) if spoken else ("",), ""))
            i += 1 + (len(word[i + 1 :]) - len(rest))
        else:
            out.append(((_PLAIN.get(c, ""),), ""))
            i += 1
    return out


def singular(word: str) -> str | None:
    """``slots`` -> ``slot``: katakana writes a borrowed noun in the singular."""
    if len(word) > 4 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return None


def transliterable(word: str) -> bool:
    """Whether ``word`` (as the query wrote it) may be a loanword: Latin letters with a
    vowel, not a camel-case identifier (``markRaw``, ``h2``) nor an acronym (``jsx``,
    ``SSR``); a Pascal-case name is its words run together (``TransitionGroup``, which
    katakana writes トランジショングループ)."""
    if not word.isascii() or not word.isalpha() or not any(c in "aeiouy" for c in word):
        return False
    return word.islower() or (word[0].isupper() and not word.isupper())


def english_sounds(word: str) -> list[list[Sound]]:
    """The sounds an English word may have (its ambiguous letters, and a plural's singular,
    give several spellings), the likeliest first; empty for anything but a Latin word."""
    word = word.lower()
    if len(word) > MAX_LETTERS or not _LATIN.fullmatch(word):
        return []
    found: dict[str, list[Sound]] = {}
    for form in filter(None, (word, singular(word))):
        variants: list[list[Sound]] = [[]]
        for options, vowel in _units(form):
            if vowel:
                for sounds in variants:  # the first vowel after a consonant is its vowel
                    if sounds and not sounds[-1][1] and sounds[-1][0]:
                        sounds[-1] = (sounds[-1][0], vowel)
                continue
            variants = [
                [*sounds, (cls, "")] if cls else list(sounds)
                for sounds in variants
                for cls in options
            ][:MAX_VARIANTS]
        for sounds in variants:
            clean = _collapse(sounds)
            found.setdefault("".join(cls for cls, _ in clean), clean)
    return list(found.values())[:MAX_VARIANTS]


def english_keys(word: str) -> list[str]:
    """The consonant keys of :func:`english_sounds` (``reactivity`` -> ``RKTBT``)."""
    return ["".join(cls for cls, _ in sounds) for sounds in english_sounds(word)]


def vowels_agree(english: list[Sound], katakana: list[Sound]) -> float:
    """The share of the vowels both spell (aligned sound by sound) that katakana writes as
    the English letter may sound (``a``: ア or エ); when none can be compared, 0.5 for a
    long key and 0 for a short one (under FUZZY_FROM classes: too many words share it)."""
    compared = agreed = 0
    for (_, ev), (_, kv) in zip(english, katakana, strict=False):
        if ev and kv:
            compared += 1
            agreed += kv in _ALLOWED[ev]
    if compared:
        return agreed / compared
    return 0.5 if len(english) >= FUZZY_FROM else 0.0


def _opens_with_vowel(word: str) -> bool:
    """Whether a word starts with a vowel sound (a glide counts: ``yield`` ユ, ``watch`` ウ)."""
    return word[:1].lower() in "aeiouwy" or word[:1] in _KANA_VOWELS


#: The katakana an English word's opening vowel (or glide) may be written with
#: (``user`` ユーザー, ``update`` アップデート, ``auto`` オート, ``euro`` ユーロ, ``one``
#: ワン; ``using`` is no イージング).
_OPENING = {
    "a": "アエオ",
    "e": "エイユ",
    "i": "イア",
    "o": "オアウワ",
    "u": "アユウ",
    "w": "ウワ",
    "y": "ヤユヨイ",
}


def _opening_agrees(english: str, katakana: str) -> bool:
    """Whether a word opening with a vowel sound opens as katakana may write it."""
    return katakana[:1] in _OPENING.get(english[:1].lower(), katakana[:1])


def _distance_at_most_one(a: str, b: str) -> bool:
    if a == b:
        return True
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b, strict=True)) == 1
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:i] + long_[i + 1 :] == short for i in range(len(long_)))


def _deletions(key: str) -> set[str]:
    return {key[:i] + key[i + 1 :] for i in range(len(key))}


@dataclass
class KatakanaTable:
    """The KB's katakana words by consonant key, each with the chunks holding it."""

    df: dict[str, int] = field(default_factory=dict)
    by_key: dict[str, list[str]] = field(default_factory=dict)
    #: a key less one class -> the keys (of FUZZY_FROM - 1 classes or more) it comes from
    near: dict[str, list[str]] = field(default_factory=dict)
    chunks: int = 0
    seconds: float = 0.0
    #: a katakana pair -> the words holding it, made on the first ``holding`` call
    _by_pair: dict[str, list[str]] | None = field(default=None, repr=False)

    @classmethod
    def build(cls, texts: Iterable[str]) -> KatakanaTable:
        started = time.process_time()
        df, chunks = _counted(texts, lambda text: _KATAKANA_WORD.findall(_for_katakana(text)))
        by_key: dict[str, list[str]] = defaultdict(list)
        for found in df:
            key = katakana_key(found)
            if MIN_KEY <= len(key) <= MAX_KEY:
                by_key[key].append(found)
        near = _near_index(by_key)
        return cls(dict(df), dict(by_key), near, chunks, time.process_time() - started)

    def holding(self, form: str) -> int | None:
        """About how many chunks hold the katakana ``form`` inside one of their katakana
        words (the sum over those words, so a chunk with two of them counts twice); None
        for a form this table cannot count (not katakana, or shorter than its words).

        The word index counts a multi-token form only by its rarest token (``コース`` by
        ``ース``, which ``ソース`` and ``ケース`` hold too); this count is the form's own."""
        if not countable(form):
            return None
        if self._by_pair is None:
            pairs: dict[str, list[str]] = defaultdict(list)
            for found in self.df:
                for pair in {found[i : i + 2] for i in range(len(found) - 1)}:
                    pairs[pair].append(found)
            self._by_pair = dict(pairs)
        by_pair = self._by_pair
        lists = [by_pair.get(form[i : i + 2], []) for i in range(len(form) - 1)]
        fewest = min(lists, key=len)
        return sum(self.df[w] for w in fewest if form in w)

    def matches(self, word: str) -> list[tuple[str, float]]:
        """(katakana word, similarity 0-1) the English ``word`` (as the query wrote it) may
        be written as in the KB, best first (ties: the more chunks, then the word)."""
        if not transliterable(word):
            return []
        scores: dict[str, float] = {}
        opens = _opens_with_vowel(word)
        for rank, sounds in enumerate(english_sounds(word)):
            key = "".join(cls for cls, _ in sounds)
            if not MIN_KEY <= len(key) <= MAX_KEY:
                continue
            first = 1.0 - 0.05 * rank  # a later spelling of the word is a little less likely
            for found in self.by_key.get(key, ()):
                score = _exact(sounds, katakana_sounds(found), first)
                if score:
                    scores[found] = max(scores.get(found, 0.0), score)
            for other in _near_keys(key, self.by_key, self.near):
                for found in self.by_key[other]:
                    scores[found] = max(scores.get(found, 0.0), FUZZY * first)
        kept = [
            (w, round(s, 3))
            for w, s in scores.items()
            if _opens_with_vowel(w) == opens and (not opens or _opening_agrees(word, w))
        ]
        return sorted(kept, key=lambda x: (-x[1], -self.df[x[0]], x[0]))


#: What NFKC turns into katakana or joins to it: half-width katakana, (spacing) voiced
#: sound marks, circled and squared katakana, the koto ligature and three enclosed ones
#: (every code point checked: tests/test_transliteration.py).
_TO_KATAKANA = re.compile(
    "[\uff61-\uff9f\u3099-\u309c\u32d0-\u32fe\u3300-\u3357\u30ff\U0001f201\U0001f202\U0001f213]"
)


def _for_katakana(text: str) -> str:
    """``text`` as its katakana words are read: NFKC-normalised where that changes them
    (a text without such characters is read as it is: normalising every chunk of 99,000
    cost half of the table's build, 1.9 s)."""
    return normalize(text) if _TO_KATAKANA.search(text) else text


def _english_words(text: str) -> list[str]:
    """A text's words to sound out, lower-cased: not an identifier nor an acronym."""
    return [
        w.lower()
        for w in _ENGLISH_WORD.findall(text)
        if len(w) <= MAX_LETTERS and transliterable(w)
    ]


def _counted(
    texts: Iterable[str], words_in: Callable[[str], Iterable[str]]
) -> tuple[dict[str, int], int]:
    """(each word -> the texts holding it, how many texts): a table's chunk counts."""
    df: dict[str, int] = defaultdict(int)
    chunks = 0
    for text in texts:
        chunks += 1
        for word in set(words_in(text)):
            df[word] += 1
    return df, chunks


def _exact(english: list[Sound], katakana: list[Sound], first: float) -> float:
    """The similarity of an English spelling and a katakana word of the same key (0: their
    vowels disagree; a key of MIN_KEY classes, which many words share, needs every vowel)."""
    agree = vowels_agree(english, katakana)
    if agree < (MIN_VOWELS if len(english) > MIN_KEY else 1.0):
        return 0.0
    return first * (1 - VOWEL_SHARE + VOWEL_SHARE * agree)


def _near_keys(key: str, by_key: Mapping[str, object], near: Mapping[str, list[str]]) -> set[str]:
    """The keys of ``by_key`` one edit away from ``key`` (from FUZZY_FROM classes)."""
    if len(key) < FUZZY_FROM:
        return set()
    keys = set(near.get(key, ()))
    for shorter in _deletions(key):
        if shorter in by_key:
            keys.add(shorter)
        keys.update(near.get(shorter, ()))
    return {other for other in keys if other != key and _distance_at_most_one(key, other)}


def _near_index(keys: Iterable[str]) -> dict[str, list[str]]:
    """A key less one class -> the keys (of FUZZY_FROM - 1 classes or more) it comes from."""
    near: dict[str, list[str]] = defaultdict(list)
    for key in keys:
        if len(key) >= FUZZY_FROM - 1:
            for shorter in _deletions(key):
                near[shorter].append(key)
    return dict(near)


@dataclass
class EnglishTable:
    """The KB's English words by consonant key (each of their spellings'), each with the
    chunks holding it: the reverse of :class:`KatakanaTable`, for a Japanese query's
    katakana words that the dictionary lacks (``リアクティビティー`` -> ``reactivity``)."""

    df: dict[str, int] = field(default_factory=dict)
    #: key -> (word, which of its spellings gives that key)
    by_key: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    near: dict[str, list[str]] = field(default_factory=dict)
    chunks: int = 0
    seconds: float = 0.0

    @classmethod
    def build(cls, texts: Iterable[str]) -> EnglishTable:
        started = time.process_time()
        df, chunks = _counted(texts, _english_words)
        by_key: dict[str, list[tuple[str, int]]] = defaultdict(list)
        for word in df:
            for rank, key in enumerate(english_keys(word)):
                if MIN_KEY <= len(key) <= MAX_KEY:
                    by_key[key].append((word, rank))
        near = _near_index(by_key)
        return cls(dict(df), dict(by_key), near, chunks, time.process_time() - started)

    def matches(self, katakana: str) -> list[tuple[str, float]]:
        """(English word, similarity 0-1) the KB may write the katakana word as, best first
        (ties: the more chunks, then the word)."""
        sounds = katakana_sounds(katakana)
        key = "".join(cls for cls, _ in sounds)
        if not MIN_KEY <= len(key) <= MAX_KEY:
            return []
        scores: dict[str, float] = {}
        for word, rank in self.by_key.get(key, ()):
            score = _exact(english_sounds(word)[rank], sounds, 1.0 - 0.05 * rank)
            if score:
                scores[word] = max(scores.get(word, 0.0), score)
        for other in _near_keys(key, self.by_key, self.near):
            for word, rank in self.by_key[other]:
                scores[word] = max(scores.get(word, 0.0), FUZZY * (1.0 - 0.05 * rank))
        opens = _opens_with_vowel(katakana)
        kept = [
            (w, round(s, 3))
            for w, s in scores.items()
            if _opens_with_vowel(w) == opens and (not opens or _opening_agrees(w, katakana))
        ]
        return sorted(kept, key=lambda x: (-x[1], -self.df[x[0]], x[0]))


def countable(form: str) -> bool:
    """Whether ``form`` is a katakana word as the table keeps them (at least MIN_LENGTH)."""
    return _KATAKANA_WORD.fullmatch(form) is not None


def covering(found: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """Without the words that hold another of ``found`` (``リアクティビティー`` holds
    ``リアクティビティ``): a phrase search for the shorter finds the longer too."""
    words = [w for w, _ in found]
    return [(w, s) for w, s in found if not any(o != w and o in w for o in words)]


_tables: PerIndexState[KatakanaTable] = PerIndexState()


#: Chunks read per page when the table is built.
PAGE = 2000


def chunk_texts(store: Any) -> Iterable[str]:
    """Every chunk's text (its context: title and heading path; and content), a page at a
    time through the storage contract (``SearchStore.chunk_texts``: both backends)."""
    after = 0
    while page := store.chunk_texts(after, PAGE):
        for _, context, content in page:
            yield f"{context} {content}"
        after = page[-1][0]


_english_tables: PerIndexState[EnglishTable] = PerIndexState()


def english_table(store: Any, index: Any, total: int) -> EnglishTable:
    """The KB's English-word table, built once per state of the index, on the first
    Japanese query with a katakana word the dictionary lacks."""
    return _english_tables.get(store, index, total, lambda: EnglishTable.build(chunk_texts(store)))


def katakana_table(store: Any, index: Any, total: int) -> KatakanaTable:
    """The KB's katakana table, built once per state of the index
    (:class:`~groove_bilingual.index_state.PerIndexState`)."""
    return _tables.get(store, index, total, lambda: KatakanaTable.build(chunk_texts(store)))
