"""match_spans: where the query's phrases occur in each hit's returned content."""

from __future__ import annotations

import unicodedata
from dataclasses import replace

from groove_core.context import QueryContext
from groove_core.hookspecs import hookimpl
from groove_core.models import SearchHit, Span


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _folded_with_map(content: str) -> tuple[str, list[int]]:
    """Fold ``content`` char by char, remembering which original char each folded one
    came from, so matches found on the folded text map back to exact original offsets."""
    if content.isascii():
        return content.lower(), list(range(len(content)))
    parts: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(content):
        folded = _fold(ch)
        parts.append(folded)
        origin.extend([i] * len(folded))
    return "".join(parts), origin


def _byte_offsets(content: str) -> list[int]:
    """UTF-8 byte offset of every char index (plus the end)."""
    offsets = [0] * (len(content) + 1)
    total = 0
    for i, ch in enumerate(content):
        offsets[i] = total
        total += len(ch.encode("utf-8", "surrogatepass"))
    offsets[len(content)] = total
    return offsets


def find_spans(content: str, phrases: list[str]) -> tuple[Span, ...]:
    """Non-overlapping byte spans of every (case/width-insensitive) phrase occurrence."""
    needles = [n for n in {_fold(p) for p in phrases} if n.strip()]
    if not needles or not content:
        return ()
    folded, origin = _folded_with_map(content)
    char_spans: list[tuple[int, int]] = []
    for needle in needles:
        start = folded.find(needle)
        while start != -1:
            end = start + len(needle)
            char_spans.append((origin[start], origin[end - 1] + 1))
            start = folded.find(needle, start + 1)
    if not char_spans:
        return ()
    char_spans.sort()
    merged = [char_spans[0]]
    for s, e in char_spans[1:]:
        if s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    offsets = _byte_offsets(content)
    return tuple(Span(offsets[s], offsets[e]) for s, e in merged)


def query_phrases(ctx: QueryContext) -> list[str]:
    """The positive phrases, or the whole exclusion-free query when it made none."""
    if ctx.query.positives:
        return list(ctx.query.positives)
    text = ctx.query.embed_text.strip()
    return [text] if text else []


class MatchSpans:
    @hookimpl
    def groove_highlight(self, ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit]:
        phrases = query_phrases(ctx)
        return [replace(h, match_spans=find_spans(h.content, phrases)) for h in hits]
