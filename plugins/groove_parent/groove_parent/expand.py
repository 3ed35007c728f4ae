"""Which neighbouring chunks a hit's content grows into, and how they are joined
(docs/retrieval-pipeline.md, stage 4).

Pure functions over a document's chunks in order; the plugin reads them from the index.

Joining. Chunks are exact, in-order slices of the file, but the text *between* two chunks
is not stored: blank lines, front matter, and the heading line of a section that has no
text of its own (its heading lives on in the next chunk's heading path). Expanded content
therefore joins consecutive chunks with ``"\\n"`` when they sit on consecutive lines (an
oversized section split in two) and with one blank line (``"\\n\\n"``) when lines lie
between them. The result reads like the file but is not a byte-exact copy of it; the
``expanded_from`` ranges are exact, so a client can re-read the file span if it must.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from groove_core.chunking import estimate_tokens
from groove_core.models import ExpandedRange
from groove_core.rows import DocumentChunkRow


@dataclass(frozen=True)
class Piece:
    """One chunk of a document, as expansion needs it."""

    chunk_id: int
    level: int
    parent: tuple[str, ...]
    content: str
    tokens: int
    line_start: int
    line_end: int
    byte_start: int
    byte_end: int

    @property
    def range(self) -> ExpandedRange:
        return ExpandedRange(self.line_start, self.line_end, self.byte_start, self.byte_end)


def token_count(stored: int | None, content: str) -> int:
    """The stored count, or the indexer's own estimate for rows of older indexes that have
    none (NULL): treating NULL as 0 would let every such chunk slip under the cap."""
    return estimate_tokens(content) if stored is None else int(stored)


def pieces(rows: Sequence[DocumentChunkRow]) -> list[Piece]:
    """A document's chunks (``document_chunks``, in order) as pieces."""
    return [
        Piece(
            chunk_id=r.chunk_id,
            level=r.level,
            parent=r.heading_path[:-1],
            content=r.content,
            tokens=token_count(r.token_count, r.content),
            line_start=r.line_start,
            line_end=r.line_end,
            byte_start=r.byte_start,
            byte_end=r.byte_end,
        )
        for r in rows
    ]


def sibling_bounds(doc: Sequence[Piece], i: int) -> tuple[int, int]:
    """The run of adjacent chunks around ``doc[i]`` at its heading level under its parent.

    A chunk at another level (a child section, or the parent's own text) ends the run, and
    so does a same-level chunk under another parent (possible when the parent heading
    between them had no text and so no chunk). The parts of an oversized section share its
    heading, level and parent, so they are siblings of each other.
    """
    lo = hi = i

    def same(j: int) -> bool:
        return doc[j].level == doc[i].level and doc[j].parent == doc[i].parent

    while lo > 0 and same(lo - 1):
        lo -= 1
    while hi + 1 < len(doc) and same(hi + 1):
        hi += 1
    return lo, hi


def grow(doc: Sequence[Piece], i: int, bounds: tuple[int, int], cap: int) -> tuple[int, int]:
    """The widest contiguous window within ``bounds`` around ``doc[i]`` under ``cap`` tokens.

    Grows one chunk at a time, following text first, then preceding, so the hit stays near
    the middle; a side stops at the first chunk that does not fit (a window never skips a
    chunk). The hit itself is always in the window, even when it alone exceeds the cap.
    """
    lo = hi = i
    used = doc[i].tokens
    can_next = can_prev = True
    while can_next or can_prev:
        if can_next:
            can_next = hi < bounds[1] and used + doc[hi + 1].tokens <= cap
            if can_next:
                hi += 1
                used += doc[hi].tokens
        if can_prev:
            can_prev = lo > bounds[0] and used + doc[lo - 1].tokens <= cap
            if can_prev:
                lo -= 1
                used += doc[lo].tokens
    return lo, hi


def join(window: Sequence[Piece]) -> str:
    """Chunk contents joined as described in the module docstring."""
    parts = [window[0].content]
    for prev, cur in pairwise(window):
        parts.append("\n" if cur.line_start == prev.line_end + 1 else "\n\n")
        parts.append(cur.content)
    return "".join(parts)


def expand(
    doc: Sequence[Piece], i: int, *, whole_doc_threshold: int, cap: int
) -> tuple[str, tuple[ExpandedRange, ...]] | None:
    """New content and its source ranges for the hit ``doc[i]``, or None when nothing fits.

    Under ``whole_doc_threshold`` tokens the hit grows toward the whole document, otherwise
    toward its adjacent siblings; either way within ``cap`` tokens.
    """
    hit = doc[i]
    bounds = (0, len(doc) - 1) if hit.tokens < whole_doc_threshold else sibling_bounds(doc, i)
    lo, hi = grow(doc, i, bounds, cap)
    if lo == hi:
        return None
    window = doc[lo : hi + 1]
    return join(window), tuple(p.range for p in window)
