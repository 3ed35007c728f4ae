"""The built-in candidate legs: lexical (trigram, bm25), word (script-boundary tokens, bm25;
see groove_core.words) and vector.

The two lexical legs own their indexes (``groove_core.leg_index``): the SQLite wing keeps
them as FTS5 tables (``groove_core.sqlite.lexical_legs``), groove-postgres as columns of
its chunk rows, each contributing its implementation (``groove_leg_indexes``). A leg
reaches its index as ``ctx.store.leg_index(name)`` and calls the same methods on either:
``search``, ``rows``, ``expression`` and the trigram leg's ``ids``. What the core's rules
need from them is declared on their specs: the trigram leg's exclusion scan
(``excludes``) and the word leg's :class:`Lexicon` (the coverage rule's IDF, the query
compiler's phrase rarity).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from groove_core import words
from groove_core.context import LegSpec, Lexicon, QueryContext
from groove_core.folding import fold_char
from groove_core.hookspecs import hookimpl
from groove_core.leg_index import LegIndexSpec
from groove_core.models import LegHit, LegResult
from groove_core.query import most_distinctive

if TYPE_CHECKING:
    from groove_core.storage import SearchStore


def fts_version() -> str:
    """What the trigram leg's index text depends on besides the chunks: Python's Unicode
    database (NFKC)."""
    return f"unicode {unicodedata.unidata_version}"


def word_version() -> str:
    """... and the word leg's: the Unicode database and the word segmentation."""
    return f"unicode {unicodedata.unidata_version}; words {words.SEGMENTATION}"


def _index_specs() -> tuple[LegIndexSpec, LegIndexSpec]:
    # The backends contribute their implementations (groove_leg_indexes): the SQLite wing
    # its FTS5 tables, groove-postgres columns of its chunk rows.
    return LegIndexSpec("fts", fts_version()), LegIndexSpec("word", word_version())


class IndexMissing(Exception):
    """A lexical leg's index is not there (see :func:`index_of`)."""


def index_of(store: SearchStore, name: str) -> Any:
    """The built-in lexical leg ``name``'s index in ``store``; raises :class:`IndexMissing`
    when the store keeps none (the backend has no implementation, or a read-only index
    was not filled since the leg was enabled)."""
    index = store.leg_index(name)
    if index is None:
        raise IndexMissing(name)
    return index


def _missing(ctx: QueryContext, name: str) -> LegResult:
    ctx.note(
        f"the {name} leg found nothing: its index is not filled in this knowledge base yet "
        "(run 'groove index')"
    )
    return LegResult(name, (), {"skipped": True, "index_missing": True})


def word_terms(ctx: QueryContext) -> tuple[list[str], bool]:
    """(the word leg's terms of the query, whether they were cut at its limit): computed
    once per query for every stage that reads them (the lexical legs, query expansion).
    Not to be modified.

    The terms are ``groove_core.words.query_terms``'s; past ``words.MAX_TERMS`` of them
    the most distinctive are kept as the trigram leg keeps its phrases
    (``groove_core.query.most_distinctive``): a pasted log's telling lines' first, then the
    terms fewest chunks hold (a quoted phrase counted by its rarest token). A long request's
    first words are rarely its point (issue #42)."""
    terms: tuple[list[str], bool] = ctx.shared("word.terms", lambda: _capped_terms(ctx))
    return terms


def _capped_terms(ctx: QueryContext) -> tuple[list[str], bool]:
    found = words.term_parts(ctx.query.positive_parts)
    terms = list(found)
    if len(terms) <= words.MAX_TERMS:
        return terms, False
    split = {t: t.split(" ") for t in terms}
    counts, _ = word_rows(ctx.store, sorted({tok for toks in split.values() for tok in toks}))
    rarity = [min(counts.get(tok, 0) for tok in split[t]) for t in terms]
    by_part = ctx.query.positive_groups
    groups = [by_part[found[t]] for t in terms] if by_part else None
    keep = most_distinctive(rarity, words.MAX_TERMS, groups)
    return [terms[i] for i in keep], True


def trigram_ids(store: SearchStore, phrases: Sequence[str]) -> frozenset[int]:
    """The trigram leg's exclusion scan: every chunk holding any of ``phrases``."""
    try:
        ids: frozenset[int] = index_of(store, "fts").ids(phrases)
    except IndexMissing:
        return frozenset()
    return ids


def word_rows(store: SearchStore, terms: Sequence[str]) -> tuple[dict[str, int], int]:
    """The word leg's lexicon: chunks holding each single-token term, and chunks in all."""
    try:
        index = index_of(store, "word")
    except IndexMissing:
        return {t: 0 for t in terms if " " not in t}, 0
    found: tuple[dict[str, int], int] = index.rows(terms)
    return found


#: The word leg's lexicon (``LegSpec.lexicon``).
WORD_LEXICON = Lexicon(tokens=words.tokens, rows=word_rows, idf=words.idf)


#: A phrase in fewer rows than this is never left out, whatever its share: matching it
#: costs a few milliseconds at most (docs/benchmarks.md), and on a small corpus a share says
#: little (one long note can hold a "common" phrase).
COMMON_PHRASE_MIN_ROWS = 1_000


#: A phrase written wholly in kana and kanji: a Japanese word, or a run of them.
_JAPANESE = re.compile(f"{words.JAPANESE_CHAR}+")


#: A phrase written wholly in hiragana: the word leg has no token for it.
_HIRAGANA = re.compile("[\u3041-\u309f\u30fc]+")


def left_to_word_leg(ctx: QueryContext) -> tuple[list[str], list[str]]:
    """(Japanese phrases, English stop words): the query's phrases the trigram leg leaves
    to the word leg, when the word leg looks the whole query up (switched on, weighted
    above 0, with a term to look up and not cut at its term limit); quoted ones never.

    Japanese: every phrase written wholly in kana and kanji but a hiragana word typed
    apart (``おにぎり``, for which the word leg has no token). A Japanese phrase of the
    query compiler glues particles to words (``の高さはどれくらいですか``), so on Japanese
    text the trigram leg mostly echoes the word leg's kanji and katakana pairs with noise
    added (docs/eval.md, issue #27); it keeps what only it can match: Latin words (inside
    longer words), quoted phrases (verbatim) and other scripts.

    Stop words (``what``, ``which``), as the word leg leaves them out, unless they are all
    the query has (``to be or not to be``): they hardly move a ranking and cost the most,
    each matching inside thousands of words, and on PostgreSQL every row a phrase matches
    is counted in its text (docs/eval.md, docs/benchmarks.md).
    """
    if "word" in ctx.config.plugins.disabled or ctx.config.search.fusion.weights.get("word") == 0:
        return [], []
    if ctx.store.leg_index("word") is None:
        return [], []
    terms, truncated = word_terms(ctx)
    if not terms or truncated:
        return [], []
    quoted = {text for text, is_quoted in ctx.query.positive_parts if is_quoted}
    typed = {text for text, is_quoted in ctx.query.positive_parts if not is_quoted}
    phrases = [p for p in ctx.query.positives if p not in quoted]
    japanese = [
        p for p in phrases if _JAPANESE.fullmatch(p) and not (p in typed and _HIRAGANA.fullmatch(p))
    ]
    stop = [p for p in phrases if p.lower() in words.STOP_WORDS]
    return japanese, stop if len(stop) < len(ctx.query.positives) else []


def _trigrams(phrase: str) -> list[str]:
    folded = "".join(fold_char(ch) for ch in phrase)
    return [folded[i : i + 3] for i in range(len(folded) - 2)]


def common_phrases(store: SearchStore, phrases: Sequence[str], share: float) -> list[str]:
    """The trigram phrases whose row count exceeds ``share`` of the chunks (and
    :data:`COMMON_PHRASE_MIN_ROWS`), the rarest always kept.

    A phrase's rows are at most those of its rarest trigram (it contains them all), so that
    count is an upper bound read from the vocabulary without matching the phrase. A bound
    that overestimates can only make a phrase look common when each of its trigrams is,
    which is what common words are made of.
    """
    grams = {p: _trigrams(p) for p in phrases}
    counts, total = index_of(store, "fts").rows({g for gs in grams.values() for g in gs})
    bound = {p: min((counts[g] for g in gs), default=0) for p, gs in grams.items()}
    return _common(phrases, bound, share, total)


def common_terms(store: SearchStore, terms: Sequence[str], share: float) -> list[str]:
    """The word-leg terms in more than ``share`` of the chunks, as :func:`common_phrases`
    (exact counts for a token; a quoted phrase of tokens is bounded by its rarest one)."""
    tokens = {t: t.split(" ") for t in terms}
    counts, total = index_of(store, "word").rows([w for ws in tokens.values() for w in ws])
    bound = {t: min(counts[w] for w in ws) for t, ws in tokens.items()}
    return _common(terms, bound, share, total)


def _common(items: Sequence[str], rows: dict[str, int], share: float, total: int) -> list[str]:
    floor = max(share * total, COMMON_PHRASE_MIN_ROWS)
    common = [p for p in items if rows[p] > floor]
    if common and len(common) == len(items):
        common.remove(min(items, key=lambda p: rows[p]))
    return common


class FTSLeg:
    """bm25 over heading / context / content with the configured column weights, without
    the query's common phrases (:func:`common_phrases`)."""

    @hookimpl
    def groove_legs(self) -> list[LegSpec]:
        index = _index_specs()[0]
        return [
            LegSpec("fts", "lexical", self.search, score="bm25", index=index, excludes=trigram_ids)
        ]

    def search(self, ctx: QueryContext) -> LegResult:
        if ctx.query.fts_skipped or ctx.query.match_expr is None:
            return LegResult("fts", (), {"skipped": True})
        index = ctx.store.leg_index("fts")
        if index is None:
            return _missing(ctx, "fts")
        meta: dict[str, Any] = {}
        japanese, stop = left_to_word_leg(ctx)
        if stop:
            meta["stop_words_dropped"] = stop
        if japanese:
            meta["left_to_word"] = japanese
        phrases = [p for p in ctx.query.positives if p not in japanese and p not in stop]
        if not phrases:
            return LegResult("fts", (), {"skipped": True, **meta})
        if meta:
            meta["expr"] = index.expression(phrases, ctx.query.negatives)
        # bm25 scores every row an expression matches before its LIMIT
        # (docs/retrieval-pipeline.md, "Cost notes"), so a
        # phrase such as "している" or "the", in a third of a corpus, costs most of the
        # leg's time while its IDF (near zero) hardly moves the ranking; the query's rare
        # phrases still find the rows (docs/benchmarks.md, "FTS at scale").
        share = ctx.config.search.lexical_common_share
        common = common_phrases(ctx.store, phrases, share) if share else []
        if common:
            phrases = [p for p in phrases if p not in common]
            meta = {
                **meta,
                "expr": index.expression(phrases, ctx.query.negatives),
                "common_dropped": common,
            }
        fusion = ctx.config.search.fusion
        weights = (fusion.heading, fusion.context, fusion.content)
        rows = index.search(
            phrases, weights, ctx.leg_size, ctx.allowed_ids(), excluded=ctx.query.negatives
        )
        return LegResult("fts", tuple(LegHit(cid, score) for cid, score in rows), meta)


def _scope(ctx: QueryContext) -> tuple[frozenset[int] | None, frozenset[int], int]:
    """(chunk ids the filters allow, or None for all; ids the exclusions drop; how many to
    fetch) for a leg that drops excluded ids after its query (ADR-0011)."""
    excluded = ctx.excluded_ids()
    allowed = ctx.allowed_ids()
    if allowed is not None:
        return allowed - excluded, excluded, ctx.leg_size
    # Over-fetch by the excluded count so that dropping them still fills the leg.
    return None, excluded, ctx.leg_size + len(excluded)


class VectorLeg:
    """KNN over the stored chunk embeddings (L2), agreeing with FTS on exclusions."""

    @hookimpl
    def groove_legs(self) -> list[LegSpec]:
        return [LegSpec("vector", "vector", self.search)]

    def search(self, ctx: QueryContext) -> LegResult:
        allowed, excluded, k = _scope(ctx)
        rows = ctx.store.vector_search(ctx.query_vector(), k, allowed)
        kept = [LegHit(cid, dist) for cid, dist in rows if cid not in excluded]
        return LegResult("vector", tuple(kept[: ctx.leg_size]))


class WordLeg:
    """bm25 over the word table: finds the one- and two-character Japanese words (状態, 型)
    that the trigram leg cannot, and English words stemmed for plurals.

    Exclusions are the same chunk ids the other legs drop (ADR-0011), filters are applied
    inside the query, and the leg reports its expression for ``--explain`` and its terms
    for the coverage rule (``groove_core.weighting``).
    """

    @hookimpl
    def groove_legs(self) -> list[LegSpec]:
        # Weight 2: the main lexical ranking (bm25 over kanji/katakana pairs and stemmed
        # English words); the trigram leg mostly echoes it (docs/eval.md, issue #27).
        return [
            LegSpec(
                "word",
                "lexical",
                self.search,
                reports_terms=True,
                weight=2.0,
                score="bm25",
                index=_index_specs()[1],
                lexicon=WORD_LEXICON,
            )
        ]

    def search(self, ctx: QueryContext) -> LegResult:
        terms, truncated = word_terms(ctx)
        if not terms:
            # e.g. a query of hiragana only: nothing this leg can look up.
            return LegResult("word", (), {"skipped": True})
        index = ctx.store.leg_index("word")
        if index is None:
            return _missing(ctx, "word")
        # As in the trigram leg: a term in a large share of the chunks costs the most and
        # ranks the least. ``terms`` stays whole in the meta (the coverage rule's IDF mass).
        share = ctx.config.search.lexical_common_share
        common = common_terms(ctx.store, terms, share) if share else []
        kept = [t for t in terms if t not in common]  # the rarest term always stays
        if truncated:
            ctx.note(
                f"the word leg used only the {words.MAX_TERMS} most distinctive of the "
                "query's distinct terms"
            )
        allowed, excluded, k = _scope(ctx)
        fusion = ctx.config.search.fusion
        weights = (fusion.heading, fusion.context, fusion.content)
        rows = index.search(kept, weights, k, allowed)
        hits = [LegHit(cid, score) for cid, score in rows if cid not in excluded]
        meta: dict[str, Any] = {"expr": index.expression(kept), "terms": terms}
        if common:
            meta["common_dropped"] = common
        return LegResult("word", tuple(hits[: ctx.leg_size]), meta)
