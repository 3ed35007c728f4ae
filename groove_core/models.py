"""The values that travel through the pipeline: filters, leg results, hits, the response.

All frozen: stages return new lists of new hits (``dataclasses.replace``) and never mutate
what they were given, so a stage that passes leaves its input exactly as it was.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, get_args

from groove_core.rows import Subsection, heading_at

#: What a candidate leg is, as its :class:`~groove_core.context.LegSpec` declares it: the
#: fusion rules, ``low_confidence``, ``groove tune`` and ``eval --ablate`` read the kind,
#: never a leg's name. ``lexical``: matches the query's words or phrases (the rules that
#: distrust stray word matches apply); ``vector``: nearest neighbours of the query's
#: embedding, ``raw_score`` an L2 distance (smaller is nearer); ``other``: anything else.
LegKind = Literal["lexical", "vector", "other"]

#: What a leg's ``raw_score`` is, as its :class:`~groove_core.context.LegSpec` declares it,
#: for the score-based fusion (``[search.fusion] method = "scores"``), which puts each leg's
#: scores on one scale: its hit's value over its best hit's, from the scale's floor.
#: ``bm25``: an FTS5 bm25 (negative, smaller is better; floor 0); ``distance``: an L2
#: distance between unit vectors (smaller is nearer; read as the cosine, floor -1);
#: ``similarity``: larger is better, floor 0; ``rank``: the score means nothing outside
#: the leg, only the order counts (the hit's RRF share, the first 1).
ScoreScale = Literal["bm25", "distance", "similarity", "rank"]
SCORE_SCALES: tuple[str, ...] = get_args(ScoreScale)


@dataclass(frozen=True)
class SearchFilters:
    """Filters applied inside every candidate leg, so ``limit`` results still come back.

    ``path`` is a glob over the KB-relative POSIX path (``*`` does not cross ``/``, ``**``
    does); ``tags`` requires every listed tag (case-insensitive; a leading ``#`` is dropped, and
    a tag matches the tags nested under it: ``status`` matches ``status/active``).
    """

    path: str | None = None
    tags: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return self.path is not None or bool(self.tags)

    def describe(self) -> dict[str, Any] | None:
        """The ``filter_applied`` value of a response: the active filters, or None."""
        if not self.active:
            return None
        out: dict[str, Any] = {}
        if self.path is not None:
            out["path"] = self.path
        if self.tags:
            out["tags"] = list(self.tags)
        return out


@dataclass(frozen=True)
class LegHit:
    """One candidate from one leg: the chunk and the leg's own raw score."""

    chunk_id: int
    raw_score: float


@dataclass(frozen=True)
class LegResult:
    """A candidate leg's ranked output (best first, unique chunk ids).

    ``meta`` is what the leg says about how it ran, read by fusion and ``--explain``
    (docs/plugins.md). The keys the core reads: ``skipped`` (True: the leg could not run on
    this query, e.g. no term it can look up) with ``reason`` (why, a few words, shown
    beside it), ``expr`` (the expression it ran),
    ``common_dropped`` (the common phrases it left out), ``added_terms`` (the words a
    query-expanding leg searched beyond the query's), ``terms`` (a lexical leg's query
    terms: the lexical leg reporting them is the one the query-dependent fusion rules
    read, and without one that ran they are off), and ``weight`` / ``weight_reasons``,
    which the core adds before fusion (``groove_core.weighting``). Other keys are the
    leg's own. ``name``, ``kind``, ``default_weight`` and ``bridges_scripts`` are set by
    the core from the leg's spec.
    """

    name: str
    hits: tuple[LegHit, ...]
    meta: dict[str, Any] = field(default_factory=dict)
    kind: LegKind = "other"
    #: The spec's default weight (``LegSpec.weight``), set by the core.
    default_weight: float = 1.0
    #: The spec's ``LegSpec.bridges_scripts`` (a lexical leg matching across scripts by
    #: design, which the cross-script rule leaves alone), set by the core.
    bridges_scripts: bool = False


@dataclass(frozen=True)
class Span:
    """A highlighted match: UTF-8 byte offsets into the hit's returned content."""

    start: int
    end: int


@dataclass(frozen=True)
class ExpandedRange:
    """A source range an expand stage merged into a hit's content."""

    line_start: int
    line_end: int
    byte_start: int
    byte_end: int


@dataclass(frozen=True)
class SearchHit:
    """One result. ``score`` is the fusion's score (or a rerank stage's own score); larger is
    better."""

    chunk_id: int
    doc_id: int
    path: str
    title: str
    heading: str
    heading_path: tuple[str, ...]
    level: int
    content: str
    score: float
    rank: int
    line_start: int
    line_end: int
    byte_start: int
    byte_end: int
    token_count: int | None
    tags: tuple[str, ...] = ()
    match_spans: tuple[Span, ...] = ()
    expanded_from: tuple[ExpandedRange, ...] | None = None
    # The file changed on disk (or vanished) after it was indexed: content may be outdated.
    stale: bool = False
    # Per-leg ranks and raw scores, for --explain; not part of the JSON output.
    legs: dict[str, tuple[int, float]] = field(default_factory=dict, compare=False)
    # The later sections of a merged chunk (``[index] min_section_tokens``): the hit is
    # named after the one its matches fall in (``named_by_matches``); not in the JSON.
    sections: tuple[Subsection, ...] = field(default=(), compare=False)

    def named_by_matches(self) -> SearchHit:
        """The hit with the heading, heading path and level of the section of its chunk
        that holds most of its match spans (the first section on a tie, or without spans).
        A hit whose content an expand stage replaced keeps its chunk's first heading."""
        if not self.sections or not self.match_spans or self.expanded_from is not None:
            return self
        raw = self.content.encode("utf-8", "surrogatepass")
        first = (self.heading, self.heading_path, self.level)
        counts: dict[tuple[str, tuple[str, ...], int], int] = {}
        located = all(s.offset >= 0 for s in self.sections)
        for span in self.match_spans:
            if located:  # where each section starts in the content
                named = heading_at(first, self.sections, span.start, offset=True)
            else:  # an index written before the offsets: count the content's lines
                line = self.line_start + raw.count(b"\n", 0, span.start)
                named = heading_at(first, self.sections, line)
            counts[named] = counts.get(named, 0) + 1
        best = max(counts.values())
        heading, path, level = next(n for n, c in counts.items() if c == best)
        if heading == self.heading and path == self.heading_path:
            return self
        return replace(self, heading=heading, heading_path=path, level=level)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "title": self.title,
            "heading": self.heading,
            "heading_path": list(self.heading_path),
            "level": self.level,
            "content": self.content,
            "score": self.score,
            "rank": self.rank,
            "chunk_id": self.chunk_id,
            "line_start": self.line_start,
            "line_end": self.line_end,
            "tags": list(self.tags),
            "match_spans": [[s.start, s.end] for s in self.match_spans],
        }
        if self.stale:
            out["stale"] = True
        if self.expanded_from is not None:
            out["expanded_from"] = [asdict(r) for r in self.expanded_from]
        return out


@dataclass(frozen=True)
class SearchResponse:
    """The P8 wrapper: ``{results, low_confidence, filter_applied}`` (+ warnings if any)."""

    results: tuple[SearchHit, ...]
    low_confidence: bool
    filter_applied: dict[str, Any] | None
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "results": [h.to_json() for h in self.results],
            "low_confidence": self.low_confidence,
            "filter_applied": self.filter_applied,
        }
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out
