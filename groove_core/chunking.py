"""Heading-aware Markdown chunking (docs/retrieval-pipeline.md, "Indexing").

A document becomes a sequence of chunks, one per section (a heading and the text up to the
next heading of any level), with oversized sections split on a token budget. Every chunk's
``content`` is an exact slice of the input text, addressed by UTF-8 byte and 1-based line
ranges, so the indexer and an expand stage can re-read it from the file and merge
neighbours without drifting.

Decisions worth knowing:

* Headings are found by markdown-it-py's block parser, never by regex: a ``#`` inside a
  fenced block is code, setext headings count, and only top-level headings start a section
  (a ``# ...`` inside a blockquote or list item is part of that block, so a section never
  cuts a quote or a list in half).
* Front matter is a ``---`` first line closed by the next ``---`` or ``...`` line. It is
  parsed with ``yaml.safe_load`` and never appears in a chunk, even when it is invalid YAML
  (that only adds a warning). An unclosed ``---`` is ordinary Markdown.
* A section whose body is whitespace only is skipped when the next section is one of its
  children: its heading reappears in the child's ``heading_path`` and ``context``. A
  heading-only section with no child (``## Deprecated`` followed by a sibling) is kept as a
  chunk of its own, so its words stay searchable; a bare ``##`` (no words at all) is not,
  unless the document holds nothing else: a document with any non-whitespace text
  therefore always yields at least one chunk.
* Headings are flattened to plain text and lose a trailing VitePress ``{#anchor}``: the
  Japanese Vue docs keep English slugs there, which would hand the lexical leg the answer
  of a cross-lingual query.
* Dialect markup (MDX, doc-site, Obsidian; ``groove_core.dialects``) is blanked in a mask
  of the text before anything else: headings, sections and chunk boundaries come from the
  mask, so no heading or chunk is made of markup, while every range stays a range of the
  file. ``content`` is the file's slice with the markup taken out (``dialects.tidy``); with
  no markup (or ``commonmark``) it is the slice itself.
* A section with less text than ``min_section_tokens`` (``[index]``, 32 by default) joins the
  chunk before it while they fit the budget (a reference page's one-line stubs would
  otherwise outrank the pages they point to); the chunk keeps each later section's line and
  heading path in ``sections``, so a hit or a line range in it names its own section.
* Chunks are trimmed of leading blank lines and trailing whitespace, so no chunk is empty
  and the uncovered gaps hold whitespace, front matter or skipped heading lines only.
* Lines are separated by ``\\n``, ``\\r\\n`` or a lone ``\\r`` (markdown-it's definition).
  Byte offsets index ``text.encode("utf-8", "surrogatepass")``, which is ``text.encode()``
  for every string that can be encoded at all, so lone surrogates never raise.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left, bisect_right
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import accumulate, islice, pairwise
from typing import TYPE_CHECKING, Any

from groove_core.dialects import COMMONMARK, Markup, clean, tidy_with_offsets
from groove_core.links import RawLink, extract_links
from groove_core.rows import Subsection

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.rules_block import StateBlock
    from markdown_it.token import Token

__all__ = ["Chunk", "ParsedDocument", "TooManyChunks", "estimate_tokens", "parse_markdown"]


@dataclass(frozen=True)
class Chunk:
    """One indexed piece of a document: ``content`` is the text between its byte offsets,
    less any dialect markup."""

    ordinal: int
    heading: str
    heading_path: tuple[str, ...]
    level: int
    context: str
    content: str
    token_count: int
    byte_start: int
    byte_end: int
    line_start: int
    line_end: int
    # The sections after the first one, when small sections were merged into this chunk.
    sections: tuple[Subsection, ...] = ()


@dataclass(frozen=True)
class ParsedDocument:
    """A parsed Markdown file: metadata from front matter and headings, and its chunks."""

    title: str
    tags: tuple[str, ...]
    front_matter: Mapping[str, Any]
    chunks: tuple[Chunk, ...]
    warnings: tuple[str, ...]
    links: tuple[RawLink, ...] = ()


# Block structure only: inline parsing of a whole document is slower than the block pass and
# has pathological inputs of its own, and only heading text needs it (see _heading_text).
# The GFM table rule stays off: a table is then a paragraph whose lines are its rows, so an
# oversized table still splits between rows (by line), chunks of the Vue docs come out
# byte-identical, and a table-heavy file parses about four times faster.
@lru_cache(maxsize=1)
def _parsers() -> tuple[MarkdownIt, MarkdownIt]:
    """(block parser, inline parser), built on first use: importing markdown-it and
    building its rule chains costs tens of milliseconds that ``groove --help`` and a
    search (which import this module through plugins) should not pay."""
    from markdown_it import MarkdownIt

    block = MarkdownIt("commonmark")
    block.core.ruler.enableOnly(["normalize", "block"])
    block.block.ruler.before("table", "groove_heading_budget", _heading_budget)
    return block, MarkdownIt("commonmark")


class _HeadingBudget:
    """How many top-level headings a parse may produce before it is abandoned.

    Checked while markdown-it parses, not after: its tokens for a flood of headings
    (``"# h\n" * 1_000_000``) take over a gigabyte and a minute to build.
    """

    def __init__(self, max_chunks: int) -> None:
        self.max_chunks = max_chunks
        self.limit = _HEADINGS_PER_CHUNK * max_chunks
        self.scanned = 0
        self.headings = 0

    def check(self, tokens: Sequence[Token]) -> None:
        new = tokens[self.scanned :]
        self.scanned = len(tokens)
        self.headings += sum(1 for t in new if t.type == "heading_open" and t.level == 0)
        if self.headings > self.limit:
            raise TooManyChunks(self.max_chunks)


_BUDGET_KEY = "groove_heading_budget"


def _heading_budget(state: StateBlock, start_line: int, end_line: int, silent: bool) -> bool:
    """A block rule that never matches: it runs before each block, to enforce the budget."""
    budget = state.env.get(_BUDGET_KEY)
    if isinstance(budget, _HeadingBudget):
        budget.check(state.tokens)
    return False


_LINE_BREAK = re.compile(r"\r\n?|\n")
# A trailing VitePress/markdown-it-attrs anchor, `{#id}` or `{#id .class}`, not escaped. Only
# ever matched at the last `{#` of a line (see _strip_anchor): a search for it from every
# position is quadratic in a run of spaces (`"# h" + " " * 100_000 + "x"` took 53 s).
_ANCHOR = re.compile(r"\{#[^{}]*\}")
_TAG_SPLIT = re.compile(r"[,\s]+")
_TAG_KEYS = ("tags", "tag", "keywords")
# Heading text longer than this is not a heading anyone reads; the cap keeps a multi-megabyte
# setext "heading" from being inline-parsed and copied into every chunk's context.
_MAX_HEADING_CHARS = 1000
_CONTEXT_SEPARATOR = " > "


# A dropped heading-only section is followed by a deeper one, so at most five in a row are
# dropped (levels 1 to 6) before one is kept: a document with more than this many times
# ``max_chunks`` headings has more than ``max_chunks`` chunks, known before any is built.
_HEADINGS_PER_CHUNK = 6


class TooManyChunks(ValueError):
    """A document that would make more than the allowed number of chunks."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit} chunks")
        self.limit = limit


#: Tokens one kana, kanji or hangul character counts for (``[index] cjk_char_tokens``).
#: Subword tokenizers give about 4 characters per token in English but close to one token
#: per character in Japanese, so ``len / 4`` let a Japanese chunk hold ~4x the tokens of an
#: English one of the same budget (ADR-0012).
CJK_CHAR_TOKENS = 1.0
_CJK_CHARS = re.compile(
    r"[\u3041-\u309f\u30a1-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
)


def estimate_tokens(text: str, cjk_char_tokens: float = CJK_CHAR_TOKENS) -> int:
    """The indexer's token estimate, 0 for ``""``: the seed's ``ceil(len(text) / 4)``, with
    each CJK character counted as ``cjk_char_tokens`` instead of a quarter token."""
    cjk = len(_CJK_CHARS.findall(text)) if cjk_char_tokens != 0.25 else 0
    return math.ceil((len(text) + cjk * (4 * cjk_char_tokens - 1)) / 4 - 1e-9)


class _Cost:
    """Token cost of character ranges in quarter tokens (a non-CJK character is one), by
    prefix sums over the CJK characters, so every budget check is O(1)."""

    def __init__(self, text: str, cjk_char_tokens: float) -> None:
        self._extra = 4 * cjk_char_tokens - 1
        self._prefix: list[int] | None = None
        if self._extra and _CJK_CHARS.search(text):
            counts = [0] * (len(text) + 1)
            for m in _CJK_CHARS.finditer(text):
                counts[m.start() + 1] = 1
            self._prefix = list(accumulate(counts))

    def __call__(self, start: int, end: int) -> float:
        if self._prefix is None:
            return end - start
        return end - start + self._extra * (self._prefix[end] - self._prefix[start])


class _Lines:
    """Line start offsets of a text, for line <-> character conversions by bisection."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0, *(m.end() for m in _LINE_BREAK.finditer(text))]

    @property
    def count(self) -> int:
        return len(self.starts)

    def offset(self, line: int) -> int:
        """Character offset where 0-based ``line`` starts (``len(text)`` past the end)."""
        return self.starts[line] if line < len(self.starts) else len(self.text)

    def line_of(self, char: int) -> int:
        """0-based line holding character offset ``char``."""
        return bisect_right(self.starts, char) - 1

    def content(self, line: int) -> str:
        """Text of ``line`` without its line break."""
        return self.text[self.offset(line) : self.offset(line + 1)].rstrip("\r\n")


class _ByteOffsets:
    """Converts character offsets to UTF-8 byte offsets in one linear pass.

    Offsets must come in non-decreasing order, as chunk boundaries do; encoding each prefix
    instead would make a document with many chunks quadratic.
    """

    def __init__(self, text: str) -> None:
        self._text = text
        self._char = 0
        self._byte = 0

    def __call__(self, char: int) -> int:
        segment = self._text[self._char : char]
        self._byte += len(segment.encode("utf-8", "surrogatepass"))
        self._char = char
        return self._byte


@dataclass(frozen=True)
class _Section:
    """A heading (or the preamble) and its body, as 0-based half-open line ranges."""

    start: int
    body: int
    end: int
    level: int
    heading: str
    heading_path: tuple[str, ...]
    parts: tuple[_Section, ...] = ()  # the sections merged after it (``_merge_small``)


def body_offset(text: str) -> int:
    """Where the body of ``text`` starts: after its front matter, if it has one."""
    lines = _Lines(text)
    return lines.offset(_body_line(lines))


def private_key_spans(text: str, keys: Collection[str]) -> list[tuple[int, int]]:
    """The character spans of the front matter's top-level ``keys`` (any case), each from
    its key's line to the next top-level key (its value's lines included), sorted."""
    if not keys:
        return []
    lines = _Lines(text)
    body = _body_line(lines)
    if body == 0:
        return []
    hidden = {k.casefold() for k in keys}
    spans: list[tuple[int, int]] = []
    start: int | None = None
    for line in range(1, body - 1):
        content = lines.content(line)
        top = _TOP_KEY.match(content)
        if top is None:
            continue  # a value's continuation (indented, a list item) or a comment
        if start is not None:
            spans.append((start, lines.offset(line)))
            start = None
        if top.group(1).strip("'\"").casefold() in hidden:
            start = lines.offset(line)
    if start is not None:
        spans.append((start, lines.offset(body - 1)))
    return spans


#: A top-level front-matter key: ``key:`` at the start of a line (quoted keys too).
_TOP_KEY = re.compile(r"""^([A-Za-z0-9_][^:#\s]*|"[^"]+"|'[^']+')\s*:(?:\s|$)""")


def parse_markdown(
    text: str,
    *,
    fallback_title: str,
    max_tokens: int = 400,
    cjk_char_tokens: float = CJK_CHAR_TOKENS,
    max_chunks: int | None = None,
    markup: Markup = COMMONMARK,
    min_section_tokens: int = 0,
    private_keys: Collection[str] = (),
) -> ParsedDocument:
    """Parse a Markdown document into metadata and heading-aware chunks.

    Never raises on any ``str``; problems (bad front matter) become ``warnings``. Only a
    ``max_tokens`` below 1 is an error, since no chunk could be produced under it, and a
    document with more than ``max_chunks`` chunks raises :class:`TooManyChunks` after
    building at most ``max_chunks + 1`` of them (and sections for a few times that).
    ``markup`` says which dialect markup is cleaned out (none by default);
    ``private_keys``: front-matter keys left unread (any case). With
    ``min_section_tokens``, a section with less text than that under its heading is merged
    into the chunk before it while the two fit ``max_tokens`` (:func:`_merge_small`).
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    lines = _Lines(text)
    body_line, front_matter, warnings = _front_matter(lines)
    if private_keys:  # the writer's own: never read into the index (title, tags, ...)
        hidden = {k.casefold() for k in private_keys}
        front_matter = {k: v for k, v in front_matter.items() if k.casefold() not in hidden}
    masked = clean(text, lines.offset(body_line), markup)
    if masked.text is not text:
        lines = _Lines(masked.text)  # same line starts: the mask keeps every line break
    budget = None if max_chunks is None else _HeadingBudget(max_chunks)
    tokens = _parsers()[0].parse(masked.text[lines.offset(body_line) :], {_BUDGET_KEY: budget})
    if budget is not None:
        budget.check(tokens)  # the headings after the last block start
    sections = _sections(tokens, body_line, lines.count)
    title = _title(front_matter, sections, fallback_title)
    cost = _Cost(masked.text, cjk_char_tokens)
    splitter = _Splitter(lines, _boundaries(tokens, body_line), max_tokens * 4, cost)
    label = _label(title, front_matter)
    kept = _kept(sections, lines)
    if min_section_tokens > 0:
        kept = _merge_small(kept, lines, cost, max_tokens * 4, min_section_tokens * 4)
    chunks = _chunks(
        kept, splitter, lines, label, cjk_char_tokens, text, _description(front_matter)
    )
    if max_chunks is not None:
        chunks = islice(chunks, max_chunks + 1)
    built = tuple(chunks)
    if max_chunks is not None and len(built) > max_chunks:
        raise TooManyChunks(max_chunks)
    return ParsedDocument(
        title=title,
        tags=tuple(dict.fromkeys((*_tags(front_matter), *masked.tags))),
        front_matter=front_matter,
        chunks=built,
        warnings=tuple(warnings),
        links=extract_links(
            text,
            lines.offset(body_line),
            masked.code,
            wikilinks=markup.clean,
            alias_first=markup.dendron,
        ),
    )


def _body_line(lines: _Lines) -> int:
    """The first line after the front matter (0 without one), found without parsing it."""
    if lines.content(0).rstrip(" \t") != "---":
        return 0
    for line in range(1, lines.count):
        if lines.content(line).rstrip(" \t") in ("---", "..."):
            return line + 1
    return 0


def _front_matter(lines: _Lines) -> tuple[int, dict[str, Any], list[str]]:
    """Find and parse the front matter: (first body line, mapping, warnings)."""
    body = _body_line(lines)
    if body == 0:
        return 0, {}, []
    mapping, warnings = _parse_yaml(lines.text[lines.offset(1) : lines.offset(body - 1)])
    return body, mapping, warnings


def _parse_yaml(source: str) -> tuple[dict[str, Any], list[str]]:
    """Load front matter as a string-keyed mapping; anything else is a warning."""
    import yaml  # ~30 ms to import: only when a file has front matter

    try:
        data = yaml.safe_load(source)
    # YAMLError is the usual failure, but hostile input also raises ValueError (bad dates),
    # RecursionError (deep nesting) and others; front matter must never break indexing.
    except Exception as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return {}, [f"front matter is not valid YAML: {first_line}"]
    if data is None:
        return {}, []
    if not isinstance(data, dict):
        return {}, [f"front matter is not a mapping (got {type(data).__name__}); ignored"]
    return {str(key): value for key, value in data.items()}, []


def _sections(tokens: Sequence[Token], body_line: int, line_count: int) -> list[_Section]:
    """Cut the body at top-level headings; the first section is the (maybe empty) preamble."""
    headings = [
        (
            int(token.tag[1]),
            tokens[i + 1].content,
            body_line + token.map[0],
            body_line + token.map[1],
        )
        for i, token in enumerate(tokens)
        if token.type == "heading_open" and token.level == 0 and token.map
    ]
    starts = [*(start for _, _, start, _ in headings), line_count]
    sections = [_Section(body_line, body_line, starts[0], 0, "", ())]
    stack: list[tuple[int, str]] = []
    for (level, source, start, body), end in zip(headings, starts[1:], strict=True):
        heading = _heading_text(source)
        stack = [*(entry for entry in stack if entry[0] < level), (level, heading)]
        path = tuple(text for _, text in stack)
        sections.append(_Section(start, body, end, level, heading, path))
    return sections


def _heading_text(source: str) -> str:
    """Heading source -> plain text: anchor stripped, inline markup flattened, spaces folded."""
    source = _strip_anchor(source)[:_MAX_HEADING_CHARS]
    inline = _parsers()[1].parseInline(source)
    flat = _flatten(inline[0].children or []) if inline else source
    return _strip_anchor(" ".join(flat.split()))


def _strip_anchor(text: str) -> str:
    """``text`` without a trailing ``{#id}`` anchor and the spaces around it; linear time."""
    body = text.rstrip()
    start = body.rfind("{#")
    if start < 0 or (start and body[start - 1] == "\\"):
        return text
    if not _ANCHOR.fullmatch(body, start):
        return text
    return body[:start].rstrip()


def _flatten(tokens: Sequence[Token]) -> str:
    """Concatenate the visible text of inline tokens (link text, code, image alt)."""
    parts: list[str] = []
    for token in tokens:
        if token.type in ("text", "text_special", "code_inline"):
            parts.append(token.content)
        elif token.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif token.children:
            parts.append(_flatten(token.children))
    return "".join(parts)


def _title(front_matter: Mapping[str, Any], sections: Sequence[_Section], fallback: str) -> str:
    """Front matter ``title``, else the first non-empty H1, else ``fallback``."""
    value = _key(front_matter, "title")
    if isinstance(value, str | int | float):
        folded = " ".join(str(value).split())
        if folded:
            return folded
    for section in sections:
        if section.level == 1 and section.heading:
            return section.heading
    return fallback


#: Longest front-matter ``description`` kept in the first chunk's context, in characters: a
#: page's summary, not a second body.
MAX_DESCRIPTION_CHARS = 500
#: Most ``aliases`` kept in every chunk's context (each at most 100 characters).
MAX_ALIASES = 10


def _label(title: str, front_matter: Mapping[str, Any]) -> str:
    """The title with the note's front-matter ``aliases`` (Obsidian's other names for it):
    they lead every chunk's context, so a search by another name finds the note by its words
    as well as by its meaning."""
    names: dict[str, None] = {}
    for key in ("aliases", "alias"):
        value = _key(front_matter, key)
        items = [value] if isinstance(value, str) else value
        if isinstance(items, list | tuple):
            for item in items:
                if isinstance(item, str | int | float):
                    name = " ".join(str(item).split())[:100]
                    if name and name != title:
                        names.setdefault(name)
    shown = list(names)[:MAX_ALIASES]
    return f"{title} ({', '.join(shown)})" if shown else title


def _description(front_matter: Mapping[str, Any]) -> str:
    """Front-matter ``description`` (or ``summary``), folded to one line, or ``""``."""
    for key in ("description", "summary"):
        value = _key(front_matter, key)
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())[:MAX_DESCRIPTION_CHARS]
    return ""


def _tags(front_matter: Mapping[str, Any]) -> tuple[str, ...]:
    """Tags from ``tags``/``tag``/``keywords``, in order of appearance, de-duplicated."""
    seen: dict[str, None] = {}
    for key in _TAG_KEYS:
        for tag in _tag_values(_key(front_matter, key)):
            seen.setdefault(tag)
    return tuple(seen)


def _key(front_matter: Mapping[str, Any], name: str) -> Any:
    """The value of ``name`` matched case-insensitively (``Title``, ``TAGS``); an exact
    match wins over another spelling."""
    if name in front_matter:
        return front_matter[name]
    return next((v for k, v in front_matter.items() if k.lower() == name), None)


def _tag_values(value: Any) -> list[str]:
    """A list keeps its items whole; a string is split at commas and whitespace."""
    if isinstance(value, str):
        return [tag for tag in _TAG_SPLIT.split(value) if tag]
    if isinstance(value, list | tuple):
        items = (str(item).strip() for item in value if isinstance(item, str | int | float))
        return [item for item in items if item]
    if isinstance(value, int | float):
        return [str(value)]
    return []


def _boundaries(tokens: Sequence[Token], body_line: int) -> dict[int, int]:
    """Lines where a block starts, mapped to the shallowest nesting level starting there.

    These are the places a section may be split; a fenced block is a single token, so no
    boundary ever falls inside one.
    """
    levels: dict[int, int] = {}
    for token in tokens:
        if token.map and token.nesting >= 0:
            line = body_line + token.map[0]
            levels[line] = min(token.level, levels.get(line, token.level))
    return levels


class _Splitter:
    """Splits a line range into contiguous character ranges costing at most ``budget``
    (quarter tokens: a character, or more for a CJK character; see ``_Cost``).

    Prefers the shallowest block boundaries (top-level blocks before list items before the
    paragraphs inside them), then line breaks, and only as a last resort characters, so a
    code block that fits the budget is never cut.
    """

    def __init__(self, lines: _Lines, levels: dict[int, int], budget: int, cost: _Cost) -> None:
        self._cost = cost
        self._lines = lines
        self._boundary_lines = sorted(levels)
        self._levels = levels
        self._budget = budget

    def split(self, start: int, end: int) -> list[tuple[int, int]]:
        """Greedily pack the indivisible units of lines ``[start, end)`` into pieces."""
        pieces: list[tuple[int, int]] = []
        for unit_start, unit_end in self._units(start, end):
            if pieces and self._cost(pieces[-1][0], unit_end) <= self._budget:
                pieces[-1] = (pieces[-1][0], unit_end)
            else:
                pieces.append((unit_start, unit_end))
        return pieces

    def _units(self, start: int, end: int) -> Iterator[tuple[int, int]]:
        """Character ranges that fit the budget, cut at the coarsest boundaries possible."""
        char_start, char_end = self._lines.offset(start), self._lines.offset(end)
        if self._cost(char_start, char_end) <= self._budget:
            yield char_start, char_end
            return
        inside = self._boundary_lines[
            bisect_right(self._boundary_lines, start) : bisect_left(self._boundary_lines, end)
        ]
        if inside:
            level = min(self._levels[line] for line in inside)
            cuts = [line for line in inside if self._levels[line] == level]
            for piece_start, piece_end in pairwise([start, *cuts, end]):
                yield from self._units(piece_start, piece_end)
        elif end - start > 1:
            for line in range(start, end):
                yield from self._units(line, line + 1)
        else:
            yield from self._characters(char_start, char_end)

    def _characters(self, start: int, end: int) -> Iterator[tuple[int, int]]:
        """Cut one over-long line, after a space in the window's second half if there is one."""
        text = self._lines.text
        while self._cost(start, end) > self._budget:
            cut = self._fit(start, end)
            space = text.rfind(" ", start + (cut - start) // 2, cut)
            if space != -1:
                cut = space + 1
            yield start, cut
            start = cut
        yield start, end

    def _fit(self, start: int, end: int) -> int:
        """The largest cut in (start, end) whose range from ``start`` fits the budget (at
        least one character, so a budget under one character still advances)."""
        low, high = start + 1, end
        while low < high:
            mid = (low + high + 1) // 2
            if self._cost(start, mid) <= self._budget:
                low = mid
            else:
                high = mid - 1
        return low


def _kept(sections: Sequence[_Section], lines: _Lines) -> list[_Section]:
    """Sections that become chunks: see the module docstring for the heading-only rule."""
    kept: list[_Section] = []
    wordless: list[_Section] = []  # a bare "##": no words to find it by
    for n, section in enumerate(sections):
        body = lines.text[lines.offset(section.body) : lines.offset(section.end)]
        if body.strip():
            kept.append(section)
        elif section.level > 0:
            following = sections[n + 1] if n + 1 < len(sections) else None
            if following is None or following.level <= section.level:
                (kept if section.heading.strip() else wordless).append(section)
    return kept or wordless


def _merge_small(
    sections: Sequence[_Section], lines: _Lines, cost: _Cost, budget: int, small: int
) -> list[_Section]:
    """Kept sections with the small ones merged (issue #44): a section whose body (the text
    under its heading) costs less than ``small`` joins the group before it, and a group whose
    body is still small takes in the section after it, as long as the whole group costs at
    most ``budget`` and the section is not shallower than the group's first heading (a
    ``##`` never joins a ``###``'s group); a small preamble (the text before the first
    heading) joins the first section under that section's heading. A group is one section
    to the chunker: its
    heading, heading path and level are its first section's, the later headings are text.
    Costs are quarter tokens (``_Cost``)."""

    def body(section: _Section) -> float:
        return cost(lines.offset(section.body), lines.offset(section.end))

    groups: list[_Section] = []
    for section in sections:
        if groups:
            group = groups[-1]
            whole = cost(lines.offset(group.start), lines.offset(section.end))
            if group.level == 0 and not group.parts and body(group) < small and whole <= budget:
                # a line or two before the first heading (a badge, a date) joins the first
                # section under that section's heading, not the other way round
                groups[-1] = replace(section, start=group.start)
                continue
            if (
                (body(section) < small or body(group) < small)
                and section.level >= group.level
                and whole <= budget
            ):
                groups[-1] = replace(group, end=section.end, parts=(*group.parts, section))
                continue
        groups.append(section)
    return groups


def _chunks(
    sections: Iterable[_Section],
    splitter: _Splitter,
    lines: _Lines,
    title: str,
    cjk_char_tokens: float,
    original: str,
    description: str = "",
) -> Iterator[Chunk]:
    """Split the kept sections, trim the pieces and turn them into chunks. ``lines`` is the
    mask of ``original`` (or ``original`` itself); offsets are the same in both. The first
    chunk's context also carries the document's ``description``: what the page is about,
    said once."""
    to_bytes = _ByteOffsets(original)
    ordinal = 0
    for section in sections:
        context = _context(title, section.heading_path)
        for piece in splitter.split(section.start, section.end):
            trimmed = _trim(lines, *piece)
            if trimmed is None:
                continue
            start, end = trimmed
            parts = [p for p in section.parts if start < lines.offset(p.start) < end]
            content, found = tidy_with_offsets(
                original[start:end],
                lines.text[start:end],
                [lines.offset(part.start) - start for part in parts],
            )
            merged = tuple(
                Subsection(
                    part.start + 1,
                    part.level,
                    part.heading,
                    part.heading_path,
                    len(content[:at].encode("utf-8", "surrogatepass")),
                )
                for part, at in zip(parts, found, strict=True)
            )
            yield Chunk(
                ordinal=ordinal,
                heading=section.heading,
                heading_path=section.heading_path,
                level=section.level,
                context=f"{context}\n{description}" if description and not ordinal else context,
                content=content,
                token_count=estimate_tokens(content, cjk_char_tokens),
                byte_start=to_bytes(start),
                byte_end=to_bytes(end),
                line_start=lines.line_of(start) + 1,
                line_end=lines.line_of(end - 1) + 1,
                sections=merged,
            )
            ordinal += 1


def _trim(lines: _Lines, start: int, end: int) -> tuple[int, int] | None:
    """Drop leading blank lines and trailing whitespace; None when nothing else is left.

    Leading whitespace inside the first non-blank line is kept: it is indentation, which
    changes what the Markdown means (an indented code block, a nested list item).
    """
    segment = lines.text[start:end]
    stripped_end = start + len(segment.rstrip())
    first_visible = start + len(segment) - len(segment.lstrip())
    if first_visible >= stripped_end:
        return None
    return max(start, lines.offset(lines.line_of(first_visible))), stripped_end


def _context(title: str, heading_path: Sequence[str]) -> str:
    """Title and heading path joined with " > ", without empty parts or repeats in a row."""
    parts: list[str] = []
    for part in (title, *heading_path):
        if part and (not parts or parts[-1] != part):
            parts.append(part)
    return _CONTEXT_SEPARATOR.join(parts)
