"""The ``bilingual`` plugin: a candidate leg that translates the query's words with JMdict.

Registered through the ``groove`` entry point ``bilingual``; it owns ``[search.bilingual]``
and the ``bilingual`` switch. The leg runs only when the query is written in another
script than the knowledge base's notes (an English question over Japanese notes, or a
Japanese one over English notes): the query's script is read as the core's cross-script
rule reads it (``groove_core.weighting.query_script``), the notes' from the share of
documents whose title is Japanese (computed once per index state). Each query word (or a
run of two or three, ``computed property``) is looked up in the derived JMdict table
(:mod:`groove_bilingual.dictionary`); of its headwords, those the KB never uses are
dropped (they cost nothing), the best ``translations`` by dictionary weight times the
KB's use of them are kept, and each is searched through the word leg's index
(``ctx.store.leg_index("word")``, which both storage backends keep). A chunk's score is
the sum over the query's words of its best translation's bm25, times that translation's
weight relative to the word's best: a word found through any of its translations counts
once. Inactive, or on a same-script query, the leg returns ``None`` and the output is
bit-identical to a groove without this plugin.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from groove_bilingual.index_state import PerIndexState
from groove_core import words
from groove_core.config import ConfigSection
from groove_core.context import LegSpec, StageSwitch
from groove_core.hookspecs import hookimpl
from groove_core.models import LegHit, LegResult
from groove_core.query import normalize
from groove_core.weighting import CJK_TEXT_SHARE, cjk_share, query_script

if TYPE_CHECKING:
    from groove_core.context import QueryContext
    from groove_core.models import LegKind
    from groove_core.storage import SearchStore

NAME = "bilingual"

#: The leg's kind: it matches words, looked up in the word leg's index. Its matches are
#: always in another script than the query, so it declares ``bridges_scripts``: the core's
#: cross-script rule, which multiplies a lexical leg matching another script than the
#: query's by ``cross_script_lexical`` (default 0), leaves it alone (README, "Kind").
KIND: LegKind = "lexical"

#: Query words looked up together, at most (``computed property`` -> 算出プロパティ).
MAX_NGRAM = 3
#: The longest Japanese form looked up in a Japanese query.
MAX_FORM = 8
#: The characters of a Japanese query its forms are read from.
MAX_JAPANESE_READ = 4_000
#: A translation in more than this share of the chunks ranks nothing (bm25's IDF is 0).
COMMON_SHARE = 0.5
#: The least dictionary weight of a run of words' translation that stands for its words:
#: an untagged form in its entry's first two senses (0.5 / sqrt(2) is 0.354; the third
#: sense's, 0.289, is not enough).
PHRASE_WEIGHT = 0.3
#: Chunks fetched per translation: its best-ranked ones, enough to fill the leg.
MIN_FETCH = 100

_JAPANESE_RUN = re.compile(f"{words.JAPANESE_CHAR}+")
_KATAKANA_WORD = re.compile("[\u30a1-\u30fa\u30fc-\u30ff]+")
#: The shortest found word a longer katakana word of a Japanese query is cut into.
MIN_KATAKANA_PART = 3
_KANJI_OR_KATAKANA = re.compile("[\u3005\u3400-\u9fff\uf900-\ufaff\u30a1-\u30fa\u30fc-\u30ff]")


class BilingualSettings(BaseModel):
    """Queries in another script than the notes, through JMdict (plugin groove_bilingual).

    JMdict is the EDRDG's dictionary, used under CC BY-SA 4.0."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(
        True,
        description="translate the query's words with JMdict when its script differs from "
        "the notes' (English over Japanese notes, or the other way; needs groove-bilingual)",
    )
    translations: int = Field(
        3, ge=1, le=10, description="translations searched per query word, at most (1-10)"
    )
    min_share: float = Field(
        0.3,
        gt=0,
        le=1,
        description="run only when at least this share of the documents (by title) is in "
        "the other script than the query",
    )
    own_words: float = Field(
        1.0,
        ge=0,
        le=2,
        description="dictionary weight of an English query word itself among its "
        "translations, where the notes use it (Japanese notes write API names, TypeScript, "
        "props in Latin letters); 0 searches translations only",
    )
    context_weight: float = Field(
        10.0,
        ge=0,
        le=100,
        description="multiplies the bm25 weight of the chunk's context (its page title and "
        "heading path) for this leg: a translated word in the title says more than one in "
        "the text, whose other words the leg cannot see",
    )
    transliterations: int = Field(
        1,
        ge=0,
        le=5,
        description="katakana words of the notes searched per English query word, matched "
        "by their sounds (reactivity -> リアクティビティー), and English words of the notes "
        "per katakana word of a Japanese query that the dictionary lacks, at most (0-5); 0 "
        "turns transliteration off",
    )
    transliteration_weight: float = Field(
        1.5,
        ge=0,
        le=2,
        description="dictionary weight of a transliteration (times its similarity, 0-1) "
        "among a word's translations",
    )
    transliterate_all: bool = Field(
        True,
        description="transliterate every English query word; false: only those the "
        "dictionary gives no translation the notes use",
    )
    dictionary: str | None = Field(
        None,
        description="a jamdict.db (or .db.xz) to convert instead of the jamdict-data package's",
    )


@hookimpl
def groove_config_sections() -> list[ConfigSection]:
    return [ConfigSection("search.bilingual", BilingualSettings)]


@hookimpl
def groove_stage_switches() -> list[StageSwitch]:
    return [
        StageSwitch(
            NAME,
            "search.bilingual.enabled",
            "Translate the query's words with JMdict (CC BY-SA 4.0, EDRDG) when it is in "
            "another script than the notes",
        )
    ]


@hookimpl
def groove_legs() -> list[LegSpec]:
    # raw_score is the negative of a sum of FTS5 bm25 values (larger matches, smaller
    # scores): the bm25 scale of the score fusion
    return [LegSpec(NAME, KIND, search, score="bm25", bridges_scripts=True)]


# ---------- the notes' script ----------

_shares: PerIndexState[float] = PerIndexState()


def japanese_share(store: SearchStore, index: Any) -> float:
    """The share of the documents whose title (else path) is Japanese, computed once per
    state of the index (:class:`~groove_bilingual.index_state.PerIndexState`)."""
    _, total = index.rows([])

    def share() -> float:
        labels = [d.title or d.path for d in store.documents()]
        found = sum(cjk_share(t) >= CJK_TEXT_SHARE for t in labels)
        return found / len(labels) if labels else 0.0

    return _shares.get(store, index, total, share)


# ---------- translations ----------


@dataclass(frozen=True)
class Choice:
    """One translation of a query word: what is shown, the word-leg term, its weights."""

    shown: str
    term: str
    weight: float  # the dictionary's (0-1.5)
    df: int  # chunks of the KB holding it (bounded by its rarest token)
    relative: float = 1.0  # over the word's best chosen translation


def _query_text(ctx: QueryContext) -> str:
    """The query's words to search for, NFKC-normalised."""
    return normalize(" ".join(text for text, _ in ctx.query.positive_parts))


def _japanese_text(ctx: QueryContext) -> str:
    """The query text a Japanese query's forms are read from: its first MAX_JAPANESE_READ
    characters (the leg searches at most ``words.MAX_TERMS`` translations, which a
    pasted page's first lines already give; reading 16,000 characters of kanji cost
    0.8 s for nothing)."""
    return _query_text(ctx)[:MAX_JAPANESE_READ]


def english_units(ctx: QueryContext) -> list[str]:
    """The English query's word-leg tokens (the first ``words.MAX_TERMS``: a quoted phrase
    of thousands of words is one term) and their runs of up to MAX_NGRAM, as keys of the
    dictionary (a quoted phrase's tokens are words of the query too)."""
    tokens = dict.fromkeys(token for term in _terms(ctx) for token in term.split(" "))
    seq = list(tokens)[: words.MAX_TERMS]
    keys = [
        " ".join(seq[i : i + n]) for n in range(1, MAX_NGRAM + 1) for i in range(len(seq) - n + 1)
    ]
    return keys


def japanese_forms(ctx: QueryContext) -> list[str]:
    """Every substring of the query's Japanese runs (up to MAX_FORM characters) holding a
    kanji or katakana: the forms to look up (the longest found are kept, see below)."""
    text = _japanese_text(ctx)
    forms: list[str] = []
    for run in _JAPANESE_RUN.findall(text):
        for i in range(len(run)):
            for n in range(1, min(MAX_FORM, len(run) - i) + 1):
                form = run[i : i + n]
                if _KANJI_OR_KATAKANA.search(form):
                    forms.append(form)
    return list(dict.fromkeys(forms))


def _longest(text_runs: list[str], found: set[str]) -> tuple[list[str], list[str]]:
    """(the found forms of a greedy longest-first cut of each run, in order; the katakana
    words left out, in order).

    A katakana word is a loanword, read whole or not at all: it is found whole (a final
    ``ー`` may be missing from the dictionary's spelling: ハンドラー is ハンドラ), or with
    the kanji after it (データ型), or cut wholly into found words of at least
    MIN_KATAKANA_PART characters (コンポーネントツリー: コンポーネント, ツリー); otherwise it
    is left out, not read as the words that happen to lie inside it (バリデーター is no
    バリ and データー, ミューテーション no ミュー). Linear in the runs' length."""
    out: list[str] = []
    left_out: list[str] = []
    for run in text_runs:
        spans = {m.start(): m.end() for m in _KATAKANA_WORD.finditer(run)}
        # inside[p]: position p lies strictly inside a katakana word (a cut there splits it)
        inside = [False] * (len(run) + 1)
        for a, b in spans.items():
            for p in range(a + 1, b):
                inside[p] = True
        i = 0
        while i < len(run):
            end = spans.get(i)
            if end is not None:
                longer = next(
                    (
                        run[i : i + n]
                        for n in range(min(MAX_FORM, len(run) - i), end - i, -1)
                        if run[i : i + n] in found
                    ),
                    None,
                )
                pieces = [longer] if longer else _katakana_pieces(run[i:end], found)
                out.extend(pieces)
                if not pieces:
                    left_out.append(run[i:end])
                i += len(longer) if longer else end - i
                continue
            for n in range(min(MAX_FORM, len(run) - i), 0, -1):
                form = run[i : i + n]
                if form in found and not inside[i + n]:
                    out.append(form)
                    i += n
                    break
            else:
                i += 1
    return list(dict.fromkeys(out)), list(dict.fromkeys(left_out))


def _katakana_pieces(word: str, found: set[str]) -> list[str]:
    """A katakana word as found words: itself (or without its final ``ー``), else a cut into
    found words of at least MIN_KATAKANA_PART characters covering all of it (longest first,
    the last one's final ``ー`` optional); none when there is no such cut.

    ``found`` holds forms of at most MAX_FORM characters (those looked up). One pass from
    the word's end (which rests can be cut, and where the first piece of each ends): linear
    in the word's length. Trying every cut in turn was exponential
    (``テレビゲーム`` repeated, then one letter no word holds: 10 s for 133 characters)."""
    size = len(word)
    # ends[i]: where the first piece of the best cut of word[i:] ends (size when word[i:],
    # or it less its final ー, is found whole); absent when word[i:] cannot be cut
    ends: dict[int, int] = {}
    for i in range(size - 1, -1, -1):
        if size - i <= MAX_FORM + 1:  # ``found`` holds forms of MAX_FORM characters at most
            rest = word[i:]
            if rest in found or (rest.endswith("ー") and rest[:-1] in found):
                ends[i] = size
                continue
        if size - i < 2 * MIN_KATAKANA_PART:
            continue
        for n in range(min(MAX_FORM, size - i - MIN_KATAKANA_PART), MIN_KATAKANA_PART - 1, -1):
            if i + n in ends and word[i : i + n] in found:
                ends[i] = i + n
                break
    if 0 not in ends:
        return []
    pieces: list[str] = []
    i = 0
    while i < size:
        end = ends[i]
        piece = word[i:end]
        if end == size and piece not in found:
            piece = piece[:-1]  # found without its final ー
        pieces.append(piece)
        i = end
    return pieces


def candidates(
    ctx: QueryContext, dictionary: Any, script: str, own_words: float = 0.0
) -> tuple[dict[str, list[tuple[str, str, float]]], list[str]]:
    """(unit -> [(shown, term, weight)] from the dictionary, the query words it lacks);
    with ``own_words`` above 0, each English word is also its own candidate."""
    if script == "other":
        keys = english_units(ctx)
        found = dictionary.english(keys)
        single = [k for k in keys if " " not in k]
        if own_words > 0:
            for key in single:
                found[key] = [*found.get(key, []), (key, key, own_words)]
            _add_code_words(ctx, found, own_words, hyphens=False)
        return found, [k for k in single if k not in found or len(found[k]) == 1]
    forms = japanese_forms(ctx)
    entries = dictionary.japanese(forms)
    text = _japanese_text(ctx)
    kept, left_out = _longest(_JAPANESE_RUN.findall(text), set(entries))
    units: dict[str, list[tuple[str, str, float]]] = {}
    if own_words > 0:
        # A Japanese question's Latin words (an API name, `props`, `TypeScript`) are
        # already in the English notes' language: searched as they are, first (the word
        # leg matches them too, but the cross-script rule mostly sets it aside for a
        # Japanese query over English notes).
        units = {token: [(token, token, own_words)] for token in _latin_tokens(ctx)}
        _add_code_words(ctx, units, own_words, hyphens=True)
    for form in kept:
        units.setdefault(form, [(w, w, v) for w, v in entries[form]])
    from groove_bilingual.transliteration import countable

    # the loanwords to sound out, as many as the word leg takes terms
    lacking = [word for word in left_out if countable(word)][: words.MAX_TERMS]
    return units, lacking


def _terms(ctx: QueryContext) -> list[str]:
    """The query's word-leg terms in its own order, the first ``words.MAX_TERMS`` of them:
    not the word leg's choice past that cap (its most distinctive terms, among which the
    English words Japanese notes lack come last), and so runs of words are the query's."""
    terms: list[str] = ctx.shared(
        "bilingual.terms", lambda: words.query_terms(ctx.query.positive_parts)[0]
    )
    return terms


def _latin_tokens(ctx: QueryContext) -> list[str]:
    """The query's word-leg tokens that are Latin-script words (stemmed)."""
    tokens = (token for term in _terms(ctx) for token in term.split(" "))
    return list(dict.fromkeys(t for t in tokens if _LATIN_TOKEN.fullmatch(t)))


_LATIN_WORD = re.compile("[A-Za-z0-9]+")
#: A word-leg token of a Latin-script word (lower-cased and stemmed), not a number.
_LATIN_TOKEN = re.compile(r"[0-9]*[a-z\u00c0-\u024f][0-9a-z\u00c0-\u024f]*")


#: A written name of code: words joined by ``.``, ``-``, ``:``, ``/`` or ``#`` (``app.use``,
#: ``v-if``, ``eslint-plugin-vue``, ``std::vector``). Tried only where a word begins and
#: taken whole, possessively: linear in the query's length, never cut inside a word of
#: accented letters.
_CODE_WORD = re.compile(
    r"(?<![A-Za-z0-9_$@\u00c0-\u024f])[A-Za-z0-9_$@]++(?:[.\-:/#]++[A-Za-z0-9_$@]++)++"
    r"(?![\u00c0-\u024f])"
)
_NOT_HYPHEN = re.compile(r"[.:/#]")
_LETTER = re.compile("[A-Za-z]")
#: A name of code of more tokens than this is no name (``a.b.c.d...`` pasted at length).
MAX_CODE_TOKENS = 8


def code_words(text: str, *, hyphens: bool) -> dict[str, str]:
    """The query's names of code (``app.use``, ``v-if``) as they are written (lower-cased)
    -> their word-leg tokens as one phrase, stop words kept (``v if``): the word leg reads
    ``v-if`` as ``v`` (``if`` is a stop word) and ``app.use`` as two words anywhere in a
    chunk, while the notes in the other language write the name as the query does. Words
    joined by hyphens only count with ``hyphens``: in an English query they are mostly
    English (``built-in``, ``two-way``), which Japanese notes write in Latin letters only in
    link destinations (``/api/built-in-directives``); a Japanese query writes Latin letters
    for names. Linear in the text's length."""
    out: dict[str, str] = {}
    for raw in _CODE_WORD.findall(text):
        if not _LETTER.search(raw) or (not hyphens and not _NOT_HYPHEN.search(raw)):
            continue
        found = words.tokens(raw.lower(), drop_stop_words=False)
        if 1 < len(found) <= MAX_CODE_TOKENS:
            out.setdefault(raw.lower(), " ".join(found))
            if len(out) == words.MAX_TERMS:
                break  # as many as the word leg takes terms
    return out


def _add_code_words(
    ctx: QueryContext,
    units: dict[str, list[tuple[str, str, float]]],
    weight: float,
    *,
    hyphens: bool,
) -> None:
    """Each name of code in the query becomes a unit of its own, searched as written (a
    phrase of its tokens) at ``weight``, beside its words' translations."""
    for raw, phrase in code_words(_query_text(ctx), hyphens=hyphens).items():
        units.setdefault(raw, [(raw, phrase, weight)])


def english_words(ctx: QueryContext) -> dict[str, str]:
    """The English query's words as written, by their word-leg token (``reactiv`` ->
    ``Reactivity``): what a transliteration reads."""
    text = _query_text(ctx)
    out: dict[str, str] = {}
    for raw in _LATIN_WORD.findall(text):
        found = words.tokens(raw.lower(), drop_stop_words=True)
        if len(found) == 1:
            out.setdefault(found[0], raw)
    return out


def transliterate(
    ctx: QueryContext,
    index: Any,
    units: dict[str, list[tuple[str, str, float]]],
    targets: list[str],
    settings: BilingualSettings,
    *,
    back: bool = False,
) -> list[str]:
    """Add to ``units`` each target word's words of the KB that sound like it
    (:mod:`groove_bilingual.transliteration`), weighted ``transliteration_weight`` times
    their similarity; returns them as ``--explain`` shows them. The targets are English
    query words matched with the notes' katakana words, or with ``back`` a Japanese
    query's katakana words (those the dictionary lacks) matched with the notes' English
    words."""
    from groove_bilingual.dictionary import form_term
    from groove_bilingual.transliteration import covering, english_table, katakana_table

    limit = settings.transliterations
    if back:
        wanted = [(katakana, katakana) for katakana in targets]
    else:
        raw = english_words(ctx)
        wanted = [(unit, raw[unit]) for unit in targets if unit in raw]
    if not wanted:
        return []
    _, total = index.rows([])
    table = (english_table if back else katakana_table)(ctx.store, index, total)
    shown: list[str] = []
    for unit, word in wanted:
        sounding = table.matches(word)
        # a katakana word holding a shorter match is found by the shorter one's search
        for found, similarity in (sounding if back else covering(sounding))[:limit]:
            term = _english_term(found) if back else form_term(found)
            if term is None:
                continue
            weight = settings.transliteration_weight * similarity
            units[unit] = [*units.get(unit, []), (found, term, weight)]
            shown.append(f"{word}: {found} {similarity:g}")
    return shown


def _english_term(word: str) -> str | None:
    """An English word's word-leg token (``hydration`` -> ``hydrat``); None unless it has one."""
    found = words.tokens(word)
    return found[0] if len(found) == 1 else None


def _translated(
    unit: str, options: list[tuple[str, str, float]], df: dict[str, int], chunks: int
) -> bool:
    """Whether the dictionary gives ``unit`` a translation the KB uses (its own word is
    none)."""
    for _, term, _ in options:
        if term == unit:
            continue
        used = min((df.get(t, 0) for t in term.split(" ")), default=0)
        if 0 < used <= COMMON_SHARE * chunks:
            return True
    return False


def _value(choice: Choice) -> float:
    """How good a translation is for this KB: the dictionary's weight times how much the
    KB uses it (a word the notes use for the concept, not a rare synonym)."""
    return choice.weight * math.log1p(choice.df)


def _holds(term: str, other: str) -> bool:
    """Whether word-leg term ``term`` holds ``other``'s tokens side by side (``基本 本的``
    holds ``基本``): a search for ``other`` finds every chunk ``term`` would."""
    inner, outer = other.split(" "), term.split(" ")
    return any(outer[i : i + len(inner)] == inner for i in range(len(outer) - len(inner) + 1))


def choose(
    units: dict[str, list[tuple[str, str, float]]],
    df: dict[str, int],
    chunks: int,
    count: int,
    holding: Callable[[str], int | None] | None = None,
) -> dict[str, list[Choice]]:
    """Per unit, up to ``count`` translations the KB uses (in at least one chunk, in at
    most COMMON_SHARE of them), by dictionary weight times log(1 + df), each with its
    weight relative to the unit's best. A term of several tokens is counted by its
    rarest token, or by ``holding(shown)`` where that gives a count (katakana words)."""
    out: dict[str, list[Choice]] = {}
    for unit, options in units.items():
        seen: dict[str, Choice] = {}
        for shown, term, weight in options:
            tokens = term.split(" ")
            used = min((df.get(t, 0) for t in tokens), default=0)
            if len(tokens) > 1 and used > 0 and holding is not None:
                own = holding(shown)
                if own is not None:
                    used = min(used, own)
            if used <= 0 or used > COMMON_SHARE * chunks:
                continue
            if term not in seen or seen[term].weight < weight:
                seen[term] = Choice(shown, term, weight, used)
        ranked = sorted(seen.values(), key=lambda c: (-_value(c), c.term))
        best: list[Choice] = []
        for choice in ranked:
            if len(best) == count:
                break
            if not any(_holds(choice.term, kept.term) for kept in best):
                best.append(choice)
        if best:
            top = _value(best[0])
            out[unit] = [
                Choice(c.shown, c.term, c.weight, c.df, round(_value(c) / top, 3)) for c in best
            ]
    return out


def phrases_first(chosen: dict[str, list[Choice]]) -> dict[str, list[Choice]]:
    """The chosen units less those inside a longer chosen run of words whose translation
    the dictionary gives in an entry's first senses (its weight at least PHRASE_WEIGHT):
    ``internet explorer`` found as インターネット・エクスプローラ is not searched again as
    ``internet`` and ``explorer`` (探索: エコシステムを探索する), as the Japanese direction
    reads a run longest first. A run given only in a late sense of an uncommon word
    (``commonly used`` -> 熟す, "to ripen") leaves its words as they were."""
    runs = sorted(
        (u for u in chosen if " " in u and max(c.weight for c in chosen[u]) >= PHRASE_WEIGHT),
        key=lambda u: -len(u.split(" ")),
    )
    covering: list[str] = []
    out = dict(chosen)
    for unit in runs:
        if any(_holds(longer, unit) for longer in covering):
            del out[unit]  # inside a longer run already kept
        else:
            covering.append(unit)
    for unit in list(out):
        if " " not in unit and any(_holds(longer, unit) for longer in covering):
            del out[unit]
    return out


def _katakana_counts(ctx: QueryContext, index: Any) -> Callable[[str], int | None]:
    """A katakana headword's own chunk count, from the KB's katakana table: reached (and
    made, once per index state) only when a query has such a headword to count."""
    from groove_bilingual.transliteration import countable, katakana_table

    tables: list[Any] = []

    def holding(shown: str) -> int | None:
        form = normalize(shown)
        if not countable(form):
            return None
        if not tables:
            tables.append(katakana_table(ctx.store, index, index.rows([])[1]))
        count: int | None = tables[0].holding(form)
        return count

    return holding


def search(ctx: QueryContext) -> LegResult | None:
    if not ctx.active(NAME):
        return None
    script = query_script(ctx.query.embed_text)
    index = ctx.store.leg_index("word")
    if script is None or index is None:
        return None
    settings = ctx.settings.get(BilingualSettings)
    share = japanese_share(ctx.store, index)
    other = share if script == "other" else 1.0 - share
    if other < settings.min_share:
        return None  # the notes are in the query's script: nothing to translate
    from groove_bilingual.dictionary import open_dictionary

    dictionary = open_dictionary(settings.dictionary)
    units, lacking = candidates(ctx, dictionary, script, settings.own_words)
    tokens = sorted({t for opts in units.values() for _, term, _ in opts for t in term.split(" ")})
    df, chunks = index.rows(tokens) if tokens else ({}, 0)
    sounds: list[str] = []
    if script == "other" and settings.transliterations > 0:
        single = [u for u in english_units(ctx) if " " not in u]
        targets = (
            single
            if settings.transliterate_all
            else [u for u in single if not _translated(u, units.get(u, []), df, chunks)]
        )
        sounds = transliterate(ctx, index, units, targets, settings)
    elif script == "ja" and settings.transliterations > 0 and lacking:
        sounds = transliterate(ctx, index, units, lacking, settings, back=True)
    if sounds:
        more = {t for opts in units.values() for _, term, _ in opts for t in term.split(" ")}
        df, chunks = index.rows(sorted(more))
    holding = _katakana_counts(ctx, index) if script == "other" else None
    chosen = choose(units, df, chunks, settings.translations, holding)
    inside = []
    if script == "other":
        runs_first = phrases_first(chosen)
        inside = [unit for unit in chosen if unit not in runs_first]
        chosen = runs_first
    meta: dict[str, Any] = {
        "notes_japanese": round(share, 2),
        "translations": [
            f"{unit}: " + ", ".join(f"{c.shown} {c.relative:g} (df {c.df})" for c in opts)
            for unit, opts in chosen.items()
        ],
    }
    if sounds:
        meta["transliterated"] = sounds
    if inside:
        meta["inside_runs"] = inside  # searched through the run of words that holds them
    unused = [
        u
        for u in units
        if u not in chosen and u not in inside and " " not in u and not _CODE_WORD.fullmatch(u)
    ]
    if lacking or unused:
        meta["untranslated"] = list(dict.fromkeys([*lacking, *unused]))
    if not chosen:
        return LegResult(NAME, (), {**meta, "skipped": True, "reason": "no translation used"})
    fusion = ctx.config.search.fusion
    weights = (fusion.heading, fusion.context * settings.context_weight, fusion.content)
    allowed, excluded = ctx.allowed_ids(), ctx.excluded_ids()
    if allowed is not None:
        allowed = allowed - excluded
    fetch = max(MIN_FETCH, ctx.leg_size + (0 if allowed is not None else len(excluded)))
    totals: dict[int, float] = {}
    searched = 0
    for opts in chosen.values():
        best: dict[int, float] = {}
        for choice in opts:
            if searched >= words.MAX_TERMS:
                break
            searched += 1
            for cid, score in index.search([choice.term], weights, fetch, allowed):
                value = -score * choice.relative
                if value > best.get(cid, 0.0):
                    best[cid] = value
        for cid, value in best.items():
            totals[cid] = totals.get(cid, 0.0) + value
    ranked = sorted(
        ((cid, v) for cid, v in totals.items() if cid not in excluded), key=lambda x: (-x[1], x[0])
    )
    hits = tuple(LegHit(cid, -value) for cid, value in ranked[: ctx.leg_size])
    meta["searched"] = searched
    return LegResult(NAME, hits, meta)
