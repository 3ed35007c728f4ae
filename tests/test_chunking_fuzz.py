"""Property tests: the chunker never raises and its chunks tile the document exactly.

Inputs are random mixes of Markdown-ish fragments (headings, fences, front matter fences,
quotes, lists, tables, setext underlines, anchors) with CRLF/CR, CJK, emoji and NUL, so the
parser's structural paths are exercised far more often than with uniform random text.
"""

from __future__ import annotations

import re
from bisect import bisect_right

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from groove_core.chunking import ParsedDocument, estimate_tokens, parse_markdown

FRAGMENTS = [
    "#", "# ", "## ", "###### ", "####### ", "```", "~~~", "---", "...", "===", "=",
    ">", "> ", "- ", "* ", "1. ", "|", " | ", "|---|", "\n", "\n", "\n\n", "\r\n", "\r",
    "\t", "    ", " ", "text", "word ", "日本語の文", "漢字", "🎉", "👩‍👩‍👧", "\0", "{#anchor}",
    "**", "`", "[link](url)", "<div>", "</div>", "title: x", "tags: [a, b]", ":", "\\",
]  # fmt: skip

LINE_BREAK = re.compile(r"\r\n?|\n")
MARKDOWN = MarkdownIt("commonmark")  # the chunker's own block grammar

markdownish = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4)), max_size=80).map(
    "".join
)
with_front_matter = st.tuples(markdownish, markdownish).map(lambda p: f"---\n{p[0]}\n---\n{p[1]}")
documents = st.one_of(markdownish, with_front_matter)


def line_starts(text: str) -> list[int]:
    return [0, *(m.end() for m in LINE_BREAK.finditer(text))]


def body_line(text: str, starts: list[int]) -> int:
    """First line after the front matter, by the rule the chunker documents."""
    lines = [
        text[a:b].rstrip("\r\n") for a, b in zip(starts, [*starts[1:], len(text)], strict=True)
    ]
    if lines[0].rstrip(" \t") != "---":
        return 0
    for n, line in enumerate(lines[1:], start=1):
        if line.rstrip(" \t") in ("---", "..."):
            return n + 1
    return 0


def heading_lines(text: str, starts: list[int], first: int) -> set[int]:
    """0-based lines of top-level headings (in the body after the front matter)."""
    body = text[starts[first] :] if first < len(starts) else ""
    lines: set[int] = set()
    for token in MARKDOWN.parse(body):
        if token.type == "heading_open" and token.level == 0 and token.map:
            lines.update(range(first + token.map[0], first + token.map[1]))
    return lines


def char_ranges(text: str, doc: ParsedDocument) -> list[tuple[int, int]]:
    data = text.encode("utf-8", "surrogatepass")
    return [
        (
            len(data[: chunk.byte_start].decode("utf-8", "surrogatepass")),
            len(data[: chunk.byte_end].decode("utf-8", "surrogatepass")),
        )
        for chunk in doc.chunks
    ]


@settings(max_examples=300, deadline=None)
@given(text=documents, max_tokens=st.sampled_from([1, 3, 10, 400]))
def test_chunks_tile_the_document(text: str, max_tokens: int) -> None:
    doc = parse_markdown(text, fallback_title="f", max_tokens=max_tokens)
    data = text.encode("utf-8", "surrogatepass")
    ranges = char_ranges(text, doc)

    previous_end = 0
    for ordinal, (chunk, (start, end)) in enumerate(zip(doc.chunks, ranges, strict=True)):
        assert chunk.ordinal == ordinal
        assert previous_end <= start < end <= len(text)
        assert text[start:end] == chunk.content
        assert data[chunk.byte_start : chunk.byte_end].decode("utf-8", "surrogatepass") == (
            chunk.content
        )
        assert chunk.content.strip()
        assert chunk.token_count == estimate_tokens(chunk.content) <= max_tokens
        assert (chunk.level == 0) == (chunk.heading_path == ())
        assert 0 <= chunk.level <= 6
        previous_end = end

    starts = line_starts(text)
    first = body_line(text, starts)
    headings = heading_lines(text, starts, first)
    covered = bytearray(len(text))
    for start, end in ranges:
        covered[start:end] = b"\1" * (end - start)
    body_start = starts[first] if first < len(starts) else len(text)
    assert bool(doc.chunks) == bool(text[body_start:].strip())
    for index in range(body_start, len(text)):
        if not covered[index] and not text[index].isspace():
            line = bisect_right(starts, index) - 1
            assert line in headings, (index, text[index])


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=300))
def test_any_text_never_raises(text: str) -> None:
    doc = parse_markdown(text, fallback_title="f", max_tokens=5)
    assert all(chunk.content in text for chunk in doc.chunks)
    assert isinstance(doc.title, str)
