"""The rows an index returns: small frozen values, typed field by field.

Every storage backend returns these (see :class:`groove_core.storage.SearchStore`), so a
plugin reads ``row.path`` instead of ``row["path"]`` and mypy checks it. This module imports
nothing heavy: a plugin can import it at no cost.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeAlias

#: A leg's or a store's ranked candidates: (chunk id, raw score), best first.
Ranked: TypeAlias = list[tuple[int, float]]
#: Only these chunk ids (a filter's), or None for every chunk.
Allowed: TypeAlias = frozenset[int] | None
#: The bm25 weights of a lexical index's heading, context and content columns.
Weights: TypeAlias = tuple[float, float, float]


@dataclass(frozen=True, slots=True)
class Subsection:
    """A section merged into the chunk of the section before it (``[index]
    min_section_tokens``): its heading holds the chunk's lines from ``line`` (1-based) on."""

    line: int
    level: int
    heading: str
    heading_path: tuple[str, ...]
    #: Where it starts in the chunk's content, in UTF-8 bytes (as match spans count); -1
    #: in chunks written before it was recorded (then its line is counted in the content).
    offset: int = -1


@dataclass(frozen=True, slots=True)
class ChunkRow:
    """One chunk with the fields of its document (``chunk_rows``)."""

    chunk_id: int
    doc_id: int
    path: str  # the document's KB-relative POSIX path
    title: str
    tags: tuple[str, ...]  # the document's front-matter tags, in file order
    heading: str
    heading_path: tuple[str, ...]  # the headings above the chunk, outermost first
    level: int  # the heading level (0: text before the first heading)
    content: str
    token_count: int | None  # None in rows of indexes written before it was stored
    line_start: int  # 1-based, inclusive
    line_end: int
    byte_start: int  # UTF-8 byte offsets into the file, end exclusive
    byte_end: int
    ordinal: int  # the chunk's position in its document, from 0
    context: str  # the text the chunk was embedded with besides its content
    sections: tuple[Subsection, ...] = ()  # the later sections of a merged chunk


@dataclass(frozen=True, slots=True)
class DocumentChunkRow:
    """One chunk of a document, as the document's chunks in order (``document_chunks``)."""

    chunk_id: int
    ordinal: int
    heading: str
    heading_path: tuple[str, ...]
    level: int
    content: str
    token_count: int | None
    line_start: int
    line_end: int
    byte_start: int
    byte_end: int
    sections: tuple[Subsection, ...] = ()


def heading_at(
    first: tuple[str, tuple[str, ...], int],
    sections: Sequence[Subsection],
    position: int,
    *,
    offset: bool = False,
) -> tuple[str, tuple[str, ...], int]:
    """(heading, heading path, level) at ``position`` in a chunk whose start is under
    ``first`` and whose later parts are under its ``sections`` (in order): a line of the
    file, or with ``offset`` a byte offset into the chunk's content."""
    found = first
    for section in sections:
        if (section.offset if offset else section.line) > position:
            break
        found = (section.heading, section.heading_path, section.level)
    return found


def sections_text(sections: Sequence[Subsection]) -> str:
    """The ``sections`` column as the stores keep it: JSON text, empty for a chunk of one
    section (nearly all of them)."""
    if not sections:
        return ""
    return json.dumps(
        [[s.line, s.level, s.heading, list(s.heading_path), s.offset] for s in sections],
        ensure_ascii=False,
    )


def _sections(text: str | None) -> tuple[Subsection, ...]:
    if not text:
        return ()
    return tuple(
        Subsection(
            int(row[0]),
            int(row[1]),
            str(row[2]),
            tuple(str(p) for p in row[3]),
            int(row[4]) if len(row) > 4 else -1,
        )
        for row in json.loads(text)
    )


@dataclass(frozen=True, slots=True)
class DocumentRow:
    """One indexed document (``documents``)."""

    doc_id: int
    path: str
    title: str
    tags: tuple[str, ...]
    indexed_at: float  # seconds since the epoch
    size: int  # the file's size and mtime when it was indexed (staleness checks)
    mtime_ns: int
    chunks: int  # how many chunks it has


@dataclass(frozen=True, slots=True)
class OutgoingLink:
    """A link a document makes, in file order."""

    target: str  # as written in the file
    kind: str  # "link" (Markdown) or "wikilink"
    path: str | None  # the indexed document it resolves to, None when it resolves to none
    line: int


@dataclass(frozen=True, slots=True)
class Backlink:
    """A link into a document from another one."""

    path: str  # the linking document
    kind: str
    target: str
    line: int


@dataclass(frozen=True, slots=True)
class Links:
    """The first links of a document each way, with the totals (``links_of``)."""

    outgoing: tuple[OutgoingLink, ...]
    outgoing_total: int
    backlinks: tuple[Backlink, ...]
    backlinks_total: int

    def to_json(self) -> dict[str, Any]:
        """``{outgoing, outgoing_total, backlinks, backlinks_total}``, links as objects."""
        return {
            "outgoing": [asdict(link) for link in self.outgoing],
            "outgoing_total": self.outgoing_total,
            "backlinks": [asdict(link) for link in self.backlinks],
            "backlinks_total": self.backlinks_total,
        }


def _strings(text: str) -> tuple[str, ...]:
    """A list column as the stores keep it (JSON text of strings)."""
    return tuple(str(v) for v in json.loads(text))


def chunk_row(r: Sequence[Any]) -> ChunkRow:
    """A :class:`ChunkRow` from the columns a store selects in this order: chunk id, doc id,
    path, title, tags, heading, heading_path, level, content, token_count, line_start,
    line_end, byte_start, byte_end, ordinal, context, sections (tags, heading_path and
    sections JSON text)."""
    return ChunkRow(
        chunk_id=int(r[0]),
        doc_id=int(r[1]),
        path=str(r[2]),
        title=str(r[3]),
        tags=_strings(r[4]),
        heading=str(r[5]),
        heading_path=_strings(r[6]),
        level=int(r[7]),
        content=str(r[8]),
        token_count=None if r[9] is None else int(r[9]),
        line_start=int(r[10]),
        line_end=int(r[11]),
        byte_start=int(r[12]),
        byte_end=int(r[13]),
        ordinal=int(r[14]),
        context=str(r[15]),
        sections=_sections(r[16]),
    )


def document_chunk_row(r: Sequence[Any]) -> DocumentChunkRow:
    """A :class:`DocumentChunkRow` from: chunk id, ordinal, heading, heading_path, level,
    content, token_count, line_start, line_end, byte_start, byte_end, sections."""
    return DocumentChunkRow(
        chunk_id=int(r[0]),
        ordinal=int(r[1]),
        heading=str(r[2]),
        heading_path=_strings(r[3]),
        level=int(r[4]),
        content=str(r[5]),
        token_count=None if r[6] is None else int(r[6]),
        line_start=int(r[7]),
        line_end=int(r[8]),
        byte_start=int(r[9]),
        byte_end=int(r[10]),
        sections=_sections(r[11]),
    )
