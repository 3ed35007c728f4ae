"""Per-leg fusion weights, and the query-dependent rules that adjust them.

Fusion adds ``weight × share`` per leg (the hit's score over the leg's best, or RRF's
``1 / (k + rank)``; groove_core.fusion). The weights come from ``[search.fusion.weights]``
(for a leg not listed, the weight its spec declares: 2 for the built-in word leg, else 1),
and two rules change them per query. The rules know a leg by the kind its spec declares
(``lexical``, ``vector``, ``other``; see ``groove_core.context.LegSpec``), never by its
name, so a plugin's leg is weighed like a built-in one of its kind:

* **cross-script**: when the query's script (Japanese or not) differs from the script of
  what the lexical legs matched (their top hits), every lexical leg is multiplied by
  ``cross_script_lexical``. An English question over Japanese notes shares
  only stray Latin words with them (code, product names), which match pages that are not
  the answer; the vector leg is the one that can bridge languages. The script is read from
  the matches, not from the corpus as a whole, so that in a bilingual knowledge base an
  English question that matches English notes keeps its lexical legs. An **exact match**
  is never left out: when the top hit of the lexical leg reporting the query's terms (the
  word leg) holds every word of the query, at most EXACT_MAX_HITS chunks match, and a vector
  leg ranks that hit among its first VECTOR_AGREES (an identifier like ``kubectl`` found
  only in a Japanese runbook), the factor is at least ``cross_script_exact`` (default 1:
  the rule does not apply). All three conditions, because English page titles ("Glossary",
  "Transition") occur verbatim inside Japanese pages that are not their answer: full
  coverage alone cost the English-to-Japanese Vue set 0.17 nDCG@10, with the vector leg's
  agreement still 0.04–0.07; with the rarity bound too, nothing (docs/eval.md).
  A lexical leg that declares ``bridges_scripts`` (``LegSpec``: it matches across scripts
  by design, e.g. by translating the query's words) is outside this rule: its hits do not
  tell the script of the matches, and its weight is not multiplied.
* **lexical coverage**: when the top hit of the lexical leg that reports the query's terms
  (``meta["terms"]``: the built-in word leg) contains at least ``coverage_threshold`` of
  the query's IDF mass (the rare words of the query, weighted by bm25's IDF), every vector
  leg is multiplied by ``coverage_vector``: an exact match on the query's distinctive
  words is better evidence than a semantic neighbour. It does not apply to a cross-script
  query.

Both rules exist for the three-leg pipeline and were measured with it (ADR-0012), so they
apply only when a lexical leg reporting terms took part in the query; with the word leg
disabled, fusion is the seed's plain RRF. The figures behind the defaults are in docs/eval.md.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from groove_core.folding import JAPANESE_CHAR

if TYPE_CHECKING:
    from groove_core.config import FusionConfig
    from groove_core.context import Lexicon, QueryContext
    from groove_core.models import LegKind, LegResult
    from groove_core.storage import SearchStore

#: Top hits of each lexical leg whose text tells the script of what the legs matched.
MATCH_SAMPLE = 5
#: Matched text is Japanese when at least this share of its letters are kana or kanji.
#: Japanese technical notes carry a lot of Latin (code, names), so the bar is well under one
#: half (docs/adr/0012).
CJK_TEXT_SHARE = 0.2
#: Coverage from which the word leg's top hit counts as an exact match of the query (all of
#: its words; a hair under 1 for float sums).
EXACT_COVERAGE = 0.999
#: How near the vector leg must rank the word leg's top hit for an exact match to count:
#: English page titles occur verbatim inside Japanese pages that are not their answer.
VECTOR_AGREES = 10
#: An exact match is a rare one: the query's words in at most this many chunks (an
#: identifier in a runbook, not a common English word used in many Japanese pages).
EXACT_MAX_HITS = 3

_CJK = re.compile(JAPANESE_CHAR)
_LETTER = re.compile(r"[^\W\d_]")


def cjk_share(text: str) -> float:
    """Kana and kanji as a share of all letters in ``text`` (0.0 without letters)."""
    letters = len(_LETTER.findall(text))
    return len(_CJK.findall(text)) / letters if letters else 0.0


def query_script(text: str) -> str | None:
    """``ja`` when the query has any kana or kanji, ``other`` when it has letters, else None.

    One Japanese character is enough: ``Vue の computed とは`` is a Japanese question.
    """
    if _CJK.search(text):
        return "ja"
    return "other" if _LETTER.search(text) else None


def match_script(store: SearchStore, legs: Sequence[LegResult]) -> str | None:
    """``ja`` or ``other``: the script of the lexical legs' top hits (None without hits).

    A leg that bridges scripts (``LegSpec.bridges_scripts``) is not read: its matches are in
    the other script by design, and say nothing about what the query's own words matched.
    """
    ids = {
        hit.chunk_id
        for leg in legs
        if leg.kind == "lexical" and not leg.bridges_scripts
        for hit in leg.hits[:MATCH_SAMPLE]
    }
    if not ids:
        return None
    rows = store.chunk_rows(sorted(ids)).values()
    # Where a chunk sits says more than a code-heavy body: a Japanese page's code sample is
    # still under a Japanese title and headings, an English note's are English.
    labels = "\n".join(f"{row.title}\n{row.heading_path}" for row in rows)
    content = "\n".join(f"{row.heading}\n{row.content}" for row in rows)
    japanese = max(cjk_share(labels), cjk_share(content)) >= CJK_TEXT_SHARE
    return "ja" if japanese else "other"


@dataclass(frozen=True)
class Features:
    """What the rules look at, computed once per query (tuning re-weighs without them)."""

    query_script: str | None
    match_script: str | None  # of what the lexical legs matched
    coverage: float | None  # share of the query's IDF mass in the terms leg's top hit
    terms_leg: str | None  # the lexical leg that reported the query's terms, if one ran

    #: the terms leg's top hit is also among a vector leg's first VECTOR_AGREES hits
    vector_agrees: bool = False
    #: chunks the terms leg matched (up to its candidate count)
    word_hits: int = 0

    @property
    def exact(self) -> bool:
        """The word leg's top hit holds all of the query's IDF mass (every word of it), and
        the vector leg finds it near the query too: an exact match, not a stray one."""
        return (
            self.coverage is not None
            and self.coverage >= EXACT_COVERAGE
            and self.vector_agrees
            and 0 < self.word_hits <= EXACT_MAX_HITS
        )

    @property
    def cross_script(self) -> bool:
        return (
            self.query_script is not None
            and self.match_script is not None
            and self.query_script != self.match_script
        )


def _coverage(store: SearchStore, leg: LegResult, lexicon: Lexicon | None) -> float | None:
    terms = [t for t in leg.meta.get("terms", ()) if " " not in t]
    if not leg.hits or not terms or lexicon is None:
        return None
    from groove_core.query import normalize

    # Cached per data_version by the leg's index: at 100k chunks counting the common terms'
    # rows on every query cost as much as the word leg itself.
    found, chunks = lexicon.rows(store, terms)
    if not chunks:
        return None
    idf = {t: lexicon.idf(df, chunks) for t, df in found.items()}
    mass = sum(idf.values())
    if mass <= 0:
        return None
    row = store.chunk_rows([leg.hits[0].chunk_id]).get(leg.hits[0].chunk_id)
    if row is None:
        return None
    text = " ".join(normalize(t) for t in (row.heading, row.context, row.content))
    present = set(lexicon.tokens(text))
    return sum(v for t, v in idf.items() if t in present) / mass


def terms_leg(legs: Sequence[LegResult]) -> LegResult | None:
    """The lexical leg that reports the query's terms (``meta["terms"]``), if one ran."""
    return next(
        (
            leg
            for leg in legs
            if leg.kind == "lexical" and leg.meta.get("terms") and not leg.meta.get("skipped")
        ),
        None,
    )


def features(ctx: QueryContext, legs: Sequence[LegResult]) -> Features:
    terms = terms_leg(legs)
    if terms is None:
        return Features(None, None, None, None)
    near = {
        hit.chunk_id for leg in legs if leg.kind == "vector" for hit in leg.hits[:VECTOR_AGREES]
    }
    return Features(
        query_script(ctx.query.embed_text),
        match_script(ctx.store, legs),
        _coverage(ctx.store, terms, ctx.lexicons.get(terms.name)),
        terms.name,
        bool(terms.hits) and terms.hits[0].chunk_id in near,
        len(terms.hits),
    )


def leg_weights(
    found: Features,
    kinds: Mapping[str, LegKind],
    fusion: FusionConfig,
    defaults: Mapping[str, float] | None = None,
    bridging: Collection[str] = (),
) -> dict[str, tuple[float, tuple[str, ...]]]:
    """leg name -> (weight, the reasons it differs from the configured weight), for the
    legs ``kinds`` names (leg name -> its kind); a leg the configuration does not weigh has
    its spec's weight (``defaults``, else 1.0). The lexical legs named in ``bridging``
    (:func:`leg_bridges`) are not multiplied by the cross-script rule."""
    out: dict[str, tuple[float, tuple[str, ...]]] = {}
    for name, kind in kinds.items():
        weight = fusion.weights.get(name, (defaults or {}).get(name, 1.0))
        why: list[str] = []
        if found.terms_leg is not None:
            factor = fusion.cross_script_lexical
            if found.cross_script and found.exact:
                factor = max(factor, fusion.cross_script_exact)
            bridges = name in bridging
            if found.cross_script and kind == "lexical" and not bridges and factor != 1:
                weight *= factor
                exact = ", exact match" if found.exact else ""
                why.append(
                    f"query {found.query_script} vs matches {found.match_script}{exact}: "
                    f"x{factor:g}"
                )
            # A query in another script than its matches matched only stray words (code,
            # names): covering those is no evidence against the vector leg, the one leg
            # that bridges languages.
            covered = (
                not found.cross_script
                and found.coverage is not None
                and found.coverage >= fusion.coverage_threshold
            )
            if covered and kind == "vector" and fusion.coverage_vector != 1:
                weight *= fusion.coverage_vector
                why.append(
                    f"{found.terms_leg} leg's top hit covers {found.coverage:.0%} of the "
                    f"query's IDF: x{fusion.coverage_vector:g}"
                )
        out[name] = (weight, tuple(why))
    return out


def leg_kinds(legs: Sequence[LegResult]) -> dict[str, LegKind]:
    """Each leg's name -> its kind, in the legs' order."""
    return {leg.name: leg.kind for leg in legs}


def leg_bridges(legs: Sequence[LegResult]) -> set[str]:
    """The names of the legs that bridge scripts (``LegSpec.bridges_scripts``)."""
    return {leg.name for leg in legs if leg.bridges_scripts}


def leg_defaults(legs: Sequence[LegResult]) -> dict[str, float]:
    """Each leg's name -> its spec's weight, used where the configuration names no weight."""
    return {leg.name: leg.default_weight for leg in legs}


def apply(
    legs: Sequence[LegResult], weights: dict[str, tuple[float, tuple[str, ...]]]
) -> list[LegResult]:
    """The legs with their weight (and its reasons) in ``meta``, where RRF and --explain
    read it."""
    out = []
    for leg in legs:
        weight, why = weights.get(leg.name, (1.0, ()))
        out.append(replace(leg, meta={**leg.meta, "weight": weight, "weight_reasons": why}))
    return out


def weigh(ctx: QueryContext, legs: Sequence[LegResult]) -> list[LegResult]:
    """Weights for this query's legs, from the configuration and the rules."""
    found = features(ctx, legs)
    weights = leg_weights(
        found, leg_kinds(legs), ctx.config.search.fusion, leg_defaults(legs), leg_bridges(legs)
    )
    return apply(legs, weights)
