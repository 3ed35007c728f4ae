"""match_spans: where the query's phrases occur in each hit's returned content."""

from __future__ import annotations

import unicodedata
from dataclasses import replace

from groove_core.context import QueryContext
from groove_core.hookspecs import hookimpl
from groove_core.models import SearchHit, Span


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


class _FoldTable(dict[str, str]):
    """Per-character folds, memoised: text reuses a small alphabet, and expanded hits can
    be tens of kilobytes of Japanese, where normalising char by char dominated a search.
    Looked up through ``map(table.__getitem__, text)``, so the loop runs in C."""

    def __missing__(self, ch: str) -> str:
        folded = self[ch] = _fold(ch)
        return folded


_FOLDS = _FoldTable()


def _folded_with_map(content: str) -> tuple[str, list[int] | None]:
    """Fold ``content`` char by char, and say which original char each folded one came
    from (None when every char folds to exactly one, the usual case: the identity)."""
    if content.isascii():
        return content.lower(), None
    parts = list(map(_FOLDS.__getitem__, content))
    folded = "".join(parts)
    if len(folded) == len(content):
        return folded, None
    origin: list[int] = []
    for i, part in enumerate(parts):
        origin.extend([i] * len(part))
    return folded, origin


def _byte_spans(content: str, spans: list[tuple[int, int]]) -> tuple[Span, ...]:
    """Char spans (sorted, disjoint) to UTF-8 byte spans, encoding each stretch between
    boundaries once (in C) rather than walking the text char by char."""
    out: list[Span] = []
    cursor = total = 0
    for start, end in spans:
        total += len(content[cursor:start].encode("utf-8", "surrogatepass"))
        length = len(content[start:end].encode("utf-8", "surrogatepass"))
        out.append(Span(total, total + length))
        total += length
        cursor = end
    return tuple(out)


def find_spans(content: str, phrases: list[str]) -> tuple[Span, ...]:
    """Non-overlapping byte spans of every (case/width-insensitive) phrase occurrence."""
    needles = [n for n in {_fold(p) for p in phrases} if n.strip()]
    if not needles or not content:
        return ()
    # Most hits of a long expanded content match nowhere near every phrase: a whole-string
    # fold (in C) rules out the ones that match none before the char-by-char mapping.
    whole = _fold(content)
    needles = [n for n in needles if n in whole]
    if not needles:
        return ()
    folded, origin = _folded_with_map(content)
    char_spans: list[tuple[int, int]] = []
    for needle in needles:
        start = folded.find(needle)
        while start != -1:
            end = start + len(needle)
            if origin is None:
                char_spans.append((start, end))
            else:
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
    return _byte_spans(content, merged)


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
