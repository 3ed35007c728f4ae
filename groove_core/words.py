"""The word leg's segmentation: short Japanese words found lexically.

The trigram leg cannot match a word under 3 characters, and most everyday Japanese words
are one or two kanji (状態, 型, 部屋). This module cuts text into tokens at script
boundaries (ADR-0002 keeps morphological analysis out of the core), which a backend
indexes as a second lexical table (the SQLite store's ``word_chunks``,
``groove_core.sqlite.word_table``):

* a kanji or katakana run becomes its overlapping bigrams (``状態管理`` → ``状態 態管 管理``);
  a one-character run is a unigram (``型``);
* hiragana is dropped: in running text it is particles and inflections (は, が, の, する),
  which match almost everything and carry no topic;
* every other run of letters and digits is a lower-cased word; a Latin-script word is
  analysed as Lucene's ``EnglishAnalyzer`` does: a possessive ``'s`` is dropped and the
  word is reduced by the Snowball English (Porter2) stemmer, so ``running`` finds ``run``
  and ``connections`` finds ``connected`` (ADR-0013). English stop words (``the``, ``of``)
  stay in the table, so that a quoted phrase still matches them in place, and are left out
  of a query's plain words (:func:`query_terms`), where they would match almost every row.

The tokens are joined with spaces (:func:`segment`) and indexed as they are: a term of
the word leg is one token, or tokens side by side. ``SEGMENTATION`` names this module's
rules, so that an index written by other rules is re-filled (a contentless table deletes
a row by being handed the text it was written with). Because the tokens are final, the
table's vocabulary holds exactly the tokens a query produces, which gives the document
frequencies that the lexical-coverage weighting rule needs (``groove_core.weighting``).
Why a leg and not a lower trigram floor: ``docs/adr/0012-word-leg-and-weighted-fusion.md``.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import Stemmer

from groove_core.folding import JAPANESE_CHAR

__all__ = [
    "JAPANESE_CHAR",
    "MAX_TERMS",
    "SEGMENTATION",
    "STOP_WORDS",
    "query_terms",
    "segment",
    "tokens",
]

#: The version of the segmentation rules below. Change it with any change to what
#: ``segment`` returns: deleting a row of the contentless table needs the very text the row
#: was written with, and an index whose recorded rules differ is re-filled first.
SEGMENTATION = "2"

#: Per-query cap on distinct terms; FTS5 cost is roughly linear in them (as MAX_PHRASES).
MAX_TERMS = 48

_KANJI = "\u3005-\u3007\u303b\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
# U+30FB (the middle dot ・) is punctuation, not part of a katakana word.
_KATAKANA = "\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff\uff66-\uff9f"
_HIRAGANA = "\u3041-\u309f"

_RUNS = re.compile(
    rf"([{_KANJI}]+)|([{_KATAKANA}]+)|[{_HIRAGANA}]+|([^\W_{_KANJI}{_KATAKANA}{_HIRAGANA}]+)"
)

#: The English stop list published with the Snowball stemmer (snowballstem.org), without
#: its contractions (the tokenizer splits at an apostrophe, so they never reach it). Lucene's
#: EnglishAnalyzer drops a shorter list (33 words) at index time as well; here the table
#: keeps every word, so that a quoted phrase matches in place, and only a query's plain
#: words lose them. The longer list also drops the question words (what, how, which) of a
#: natural-language query, which match almost every English row; ADR-0013 has the figures.
_STOP_TEXT = (
    "i me my myself we our ours ourselves you your yours yourself yourselves he him his "
    "himself she her hers herself it its itself they them their theirs themselves what "
    "which who whom this that these those am is are was were be been being have has had "
    "having do does did doing would should could ought cannot a an the and but if or "
    "because as until while of at by for with about against between into through during "
    "before after above below to from up down in out on off over under again further then "
    "once here there when where why how all any both each few more most other some such "
    "no nor not only own same so than too very"
)
STOP_WORDS = frozenset(_STOP_TEXT.split())

#: The same list's contractions, which the tokenizer would split at the apostrophe into a
#: stop word and a fragment (``I'd`` -> ``i``, ``d``): a fragment is a one-letter token, rare
#: in the text and so weighted high by bm25, that matches ``3-D`` or ``C. L.`` (issue #42).
#: A query's plain text loses them whole before it is tokenized.
_CONTRACTION_TEXT = (
    "i'm you're he's she's it's we're they're i've you've we've they've i'd you'd he'd "
    "she'd we'd they'd i'll you'll he'll she'll we'll they'll isn't aren't wasn't weren't "
    "hasn't haven't hadn't doesn't don't didn't won't wouldn't shan't shouldn't can't "
    "couldn't mustn't let's that's who's what's here's there's when's where's why's how's"
)
_CONTRACTIONS = re.compile(
    r"(?<![^\W_])(?:"
    + "|".join(re.escape(w).replace("'", "['\u2019]") for w in _CONTRACTION_TEXT.split())
    + r")(?![^\W_])",
    re.IGNORECASE,
)

#: Latin script up to Latin Extended-B: the words the English stemmer is meant for. Other
#: alphabets (Cyrillic, Greek) are kept whole rather than cut by English suffix rules.
_LATIN_WORD = re.compile(r"[0-9a-z\u00c0-\u024f]+")
# Lucene's EnglishPossessiveFilter: a trailing 's is part of no word (``engine's``).
_POSSESSIVE = re.compile(r"(?<=[^\W_])['\u2019]s\b", re.IGNORECASE)

# PyStemmer's objects are not thread-safe (searches run on several threads): one per thread.
# Each keeps its own cache of recent words, which makes running text cheap to stem.
_local = threading.local()


def _stemmer() -> Any:
    found = getattr(_local, "stemmer", None)
    if found is None:
        found = _local.stemmer = Stemmer.Stemmer("english")
    return found


def _word(lowered: str) -> str:
    if _LATIN_WORD.fullmatch(lowered):
        return str(_stemmer().stemWord(lowered))
    return lowered


def _bigrams(run: str) -> Iterable[str]:
    if len(run) == 1:
        return (run,)
    return (run[i : i + 2] for i in range(len(run) - 1))


def tokens(text: str, *, drop_stop_words: bool = False) -> list[str]:
    """The word tokens of NFKC-normalised ``text``, in order (repeats kept); without
    English stop words when ``drop_stop_words`` (a query's plain words)."""
    out: list[str] = []
    if drop_stop_words:
        text = _CONTRACTIONS.sub(" ", text)
    for match in _RUNS.finditer(_POSSESSIVE.sub("", text)):
        kanji, katakana, other = match.groups()
        run = kanji or katakana
        if run:
            out.extend(_bigrams(run))
        elif other:
            lowered = other.lower()
            if not (drop_stop_words and lowered in STOP_WORDS):
                out.append(_word(lowered))
    return out


# A VitePress/markdown-it-attrs heading anchor (`{#computed-properties}`). The chunker
# keeps it in ``content`` (the raw slice) but drops it from headings because the Japanese
# Vue docs carry English slugs there, which would answer a cross-lingual query lexically;
# the word leg ignores it for the same reason.
_ANCHOR = re.compile(r"\{#[^{}\n]*\}")


def segment(text: str) -> str:
    """What ``word_chunks`` stores for ``text``: its tokens joined by spaces."""
    return " ".join(tokens(_ANCHOR.sub(" ", text)))


def query_terms(parts: Sequence[tuple[str, bool]]) -> tuple[list[str], bool]:
    """(FTS5 terms, truncated): a plain part gives one term per distinct token, a quoted
    part one phrase of its tokens in order (so ``"状態管理"`` must appear contiguously); the
    first MAX_TERMS of them (the word leg keeps the most distinctive instead:
    ``groove_core.builtins.legs.word_terms``).

    English stop words are left out of plain parts and kept in quoted ones (``"state of
    the art"`` is a phrase of four tokens). A query of nothing but stop words keeps them:
    a search for ``to be or not to be`` has no other words to look up."""
    distinct = list(term_parts(parts))
    return distinct[:MAX_TERMS], len(distinct) > MAX_TERMS


def term_parts(parts: Sequence[tuple[str, bool]]) -> dict[str, int]:
    """Each distinct term of :func:`query_terms` (uncut, in order) -> the position of the
    part it first occurs in."""
    found = _terms(parts, drop_stop_words=True) or _terms(parts, drop_stop_words=False)
    out: dict[str, int] = {}
    for term, part in found:
        out.setdefault(term, part)
    return out


def _terms(parts: Sequence[tuple[str, bool]], *, drop_stop_words: bool) -> list[tuple[str, int]]:
    terms: list[tuple[str, int]] = []
    for i, (text, quoted) in enumerate(parts):
        found = tokens(text, drop_stop_words=drop_stop_words and not quoted)
        if quoted and len(found) > 1:
            terms.append((" ".join(found), i))
        else:
            terms.extend((t, i) for t in found)
    return terms


def idf(df: int, n: int) -> float:
    """bm25's IDF, floored at 0 (a term in more than half the chunks carries nothing)."""
    return max(0.0, math.log((n - df + 0.5) / (df + 0.5)))
