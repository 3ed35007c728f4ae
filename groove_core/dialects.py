"""Markdown dialects: what is markup, not content, in MDX, doc-site and Obsidian files.

Cleaning never moves text. :func:`clean` returns a *mask* of the input: the same string with
every markup character replaced by a space (line breaks kept), so character offsets and line
numbers of the mask are those of the file. The chunker finds headings, sections and chunk
boundaries in the mask, which makes a markup-only line blank (and a markup-only chunk
impossible), while byte and line ranges still point into the original file. The text a
chunk returns is :func:`tidy` of the mask: masked lines lose the runs of spaces the mask
left behind and lines that held only markup, and every other line is the file's own.

What is markup (outside fenced code and inline code spans, which are never touched):

* MDX: ``import``/``export`` statements, ``{/* comments */}``, JSX and HTML tags (the text
  between an opening and a closing tag stays), HTML comments and ``<script>``/``<style>``;
* doc sites: ``:::`` container markers (VitePress, Docusaurus; the title after the type
  stays), Hugo shortcodes ``{{< ... >}}`` / ``{{% ... %}}``, ``{#custom-id}`` anchors;
* Obsidian: the brackets of ``[[Note]]`` (``[[Note|alias]]`` shows ``alias``),
  whole ``![[embeds]]``, the ``[!note]`` marker of a callout. Inline ``#tags`` stay in the
  text (Obsidian shows them) and are collected as the document's tags.
* Dendron: Obsidian's, but a link is written alias first (``[[alias|note.name]]`` shows
  ``alias`` and links to ``note.name``; ``dendron://vault/note.name`` names a vault too),
  tags are dotted hierarchies (``#stage.germ``), and ``%%`` is text.

``commonmark`` cleans nothing (a ``{#anchor}`` still leaves the heading text, as before).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

__all__ = [
    "DIALECTS",
    "Dialect",
    "Markup",
    "Masked",
    "clean",
    "comment_spans",
    "markup_for",
    "tidy",
    "vault_kind",
    "without",
]

Dialect = Literal["auto", "commonmark", "mdx", "obsidian", "dendron"]
DIALECTS: tuple[str, ...] = ("auto", "commonmark", "mdx", "obsidian", "dendron")
#: What kind of vault a KB lies in (``vault_kind``): its notes' dialect under ``auto``.
VaultKind = Literal["obsidian", "dendron"]


@dataclass(frozen=True)
class Markup:
    """How one file is cleaned: ``clean`` turns the markup rules on, ``inline_tags``
    collects ``#tags`` (only in Obsidian notes: elsewhere ``#123`` or ``#fff`` is prose)."""

    clean: bool
    inline_tags: bool
    #: ``%% comments %%`` are the writer's own notes, hidden in Obsidian's reading view:
    #: blanked (neither indexed nor served) unless ``[index] obsidian_comments = "keep"``.
    comments: bool = False
    #: Dendron's link order, ``[[alias|target]]`` (Obsidian writes ``[[target|alias]]``),
    #: and its dotted tags (``#stage.germ``).
    dendron: bool = False


COMMONMARK = Markup(clean=False, inline_tags=False)
DOCS = Markup(clean=True, inline_tags=False)
OBSIDIAN = Markup(clean=True, inline_tags=True, comments=True)
OBSIDIAN_KEEP_COMMENTS = Markup(clean=True, inline_tags=True)
DENDRON = Markup(clean=True, inline_tags=True, dendron=True)

#: How far up from a KB's folder an ``.obsidian/`` folder is looked for: a KB is often one
#: folder of a vault, and its notes are still Obsidian notes.
VAULT_SEARCH_DEPTH = 32

# An Obsidian note is told by its links: `[[...]]` is literal text in every other dialect.
_WIKILINK_HINT = re.compile(r"!?\[\[[^\[\]\n]+\]\]")


def markup_for(
    dialect: str, rel: str, text: str, vault: VaultKind | bool | None, keep_comments: bool = False
) -> Markup:
    """The cleaning for the file ``rel``: ``auto`` treats a KB inside a Dendron workspace (a
    ``dendron.yml`` in its folder or above) as Dendron, one inside an Obsidian vault (an
    ``.obsidian/`` folder there or above) or a note using wikilinks as Obsidian, and
    everything else (``.mdx`` included) as MDX and doc-site Markdown, whose markup is
    unambiguous outside code. ``vault``: :func:`vault_kind` of the KB (True: Obsidian)."""
    obsidian = OBSIDIAN_KEEP_COMMENTS if keep_comments else OBSIDIAN
    if dialect == "commonmark":
        return COMMONMARK
    if dialect == "obsidian":
        return obsidian
    if dialect == "dendron":
        return DENDRON
    if dialect == "mdx" or PurePosixPath(rel).suffix.lower() == ".mdx":
        return DOCS
    if vault == "dendron":
        return DENDRON
    return obsidian if vault or _WIKILINK_HINT.search(text) else DOCS


def vault_kind(folder: Path) -> VaultKind | None:
    """``obsidian`` when ``folder`` has an ``.obsidian/`` folder or lies under one that has,
    ``dendron`` for a ``dendron.yml`` (a Dendron workspace), the nearest first (at most
    :data:`VAULT_SEARCH_DEPTH` levels up); None for neither."""
    here = folder.resolve()
    for level, candidate in enumerate((here, *here.parents)):
        if level > VAULT_SEARCH_DEPTH:
            return None
        try:
            if (candidate / ".obsidian").is_dir():
                return "obsidian"
            if (candidate / "dendron.yml").is_file():
                return "dendron"
        except OSError:  # a folder above that this user may not read
            return None
    return None


@dataclass(frozen=True)
class Masked:
    """The mask of a text (same length, markup blanked) and the inline tags found."""

    text: str
    tags: tuple[str, ...]
    code: tuple[tuple[int, int], ...]  # character ranges never touched (code)


_LINE = re.compile(r"[^\r\n]*(?:\r\n?|\n|$)")
# The prefix is possessive and a backtick fence is told from a code span by one `str.find`
# for a later backtick: `(?!.*`)` after a backtracking run rescanned the rest of the line
# once per backtick, quadratic on a single long line of backticks.
_FENCE_OPEN = re.compile(r"^[ \t]*+(?:>[ \t]?)*+[ \t]*+(`{3,}+|~{3,}+)")
_BACKTICKS = re.compile(r"`+")
# The blanks after the import's end are possessive: ``\s*`` and ``[ \t]*`` both taking them
# made a line of ``import {`` and blanks quadratic (1 s at 16,000 characters).
_ESM_IMPORT = re.compile(r"^import\s[^\n]{0,500}?(?:['\"][^'\"\n]+['\"]|\{)\s*+;?[ \t]*+$")
_ESM_EXPORT = re.compile(r"^export\s+(?:const|let|var|function|async|class|default|\{|\*)")
_JSX_TAG = re.compile(  # JSX/HTML tag; `{...}` attribute values may nest one level
    r"(?<!\\)</?[A-Za-z][\w.:-]*+(?:\s(?:[^<>\"'{}]|\"[^\"<>]*+\"|'[^'<>]*+'"
    r"|\{(?:[^{}]|\{[^{}]*+\})*+\}){0,2000}+)?>"
)
_ANCHOR = re.compile(r"(?<!\\)\{#[^{}\n]*\}")  # {#custom-id}; the word leg ignores the same pattern
_SCRIPT_OPEN = re.compile(r"(?<!\\)<(script|style)\b", re.IGNORECASE)
_SCRIPT_CLOSE = {name: re.compile(rf"</{name}\s*>", re.IGNORECASE) for name in ("script", "style")}
# Delimited markup, as (opener, closer): see _delimited.
_MDX_COMMENT = (re.compile(r"\{/\*"), re.compile(r"\*/\}"))
_HTML_COMMENT = (re.compile(r"<!--"), re.compile(r"-->"))
_HUGO = (re.compile(r"\{\{[<%]"), re.compile(r"[%>]\}\}"))  # Hugo shortcode
_CONTAINER = re.compile(r"^[ \t]*(?:>[ \t]*)*(:{3,}[ \t]*[\w-]*)", re.MULTILINE)
_CALLOUT = re.compile(r"^[ \t]*(?:>[ \t]*)+(\[![\w-]+\][+-]?)", re.MULTILINE)
_WIKILINK = re.compile(r"(!?)\[\[([^\[\]\n]{1,500})\]\]")
# A tag starts a word: after white space, or right after Japanese punctuation
# (``…参照。#進行中``), where no space is written. After a letter or digit (``page#part``,
# ``C#``) or ``&`` (``&#123;``) a ``#`` is not a tag.
_INLINE_TAG = re.compile(
    r"(?:(?<=[\s\u3000-\u303f\uff01-\uff0f\uff1a-\uff20])|^)#([\w/-]*[^\W\d][\w/-]*)",
    re.MULTILINE,
)
#: Dendron's tags are dotted hierarchies: ``#stage.germ`` (a dot inside, never last).
_DOTTED_TAG = re.compile(
    r"(?:(?<=[\s\u3000-\u303f\uff01-\uff0f\uff1a-\uff20])|^)#([\w/-]*[^\W\d][\w/-]*(?:\.[\w/-]+)*)",
    re.MULTILINE,
)
_OBSIDIAN_COMMENT = (re.compile(r"%%"), re.compile(r"%%"))


def clean(text: str, start: int, markup: Markup) -> Masked:
    """Mask the markup of ``text[start:]`` (the body after front matter)."""
    if not markup.clean:
        return Masked(text, (), ())
    code = _code_ranges(text, start)
    blanks: list[tuple[int, int]] = []
    protected = _Protected(code)
    blanks += _esm(text, start, protected)
    for spans in (
        _delimited(text, start, *_MDX_COMMENT, 4000),  # also a {/*heading-id*/}
        _delimited(text, start, *_HTML_COMMENT, 20000),
        _scripts(text, start),
        (m.span() for m in _JSX_TAG.finditer(text, start)),
        (m.span() for m in _ANCHOR.finditer(text, start)),
        _delimited(text, start, *_HUGO, 2000),
    ):
        blanks += (span for span in spans if protected.clear(*span))
    for rule in (_CONTAINER, _CALLOUT):
        blanks += (m.span(1) for m in rule.finditer(text, start) if protected.clear(*m.span(1)))
    blanks += _wikilinks(text, start, protected, alias_first=markup.dendron)
    comments: list[tuple[int, int]] = []
    if markup.comments:
        comments = [
            span
            for span in _delimited(text, start, *_OBSIDIAN_COMMENT, 20000)
            if protected.clear(*span)
        ]
        blanks += comments
    # a #tag inside a comment is not one (Obsidian does not list it either)
    unread = _Protected(sorted(code + comments)) if comments else protected
    rule = _DOTTED_TAG if markup.dendron else _INLINE_TAG
    tags = _inline_tags(text, start, unread, rule) if markup.inline_tags else ()
    return Masked(_blank(text, blanks), tags, tuple(code))


def comment_spans(text: str, start: int, markup: Markup) -> list[tuple[int, int]]:
    """The comments of ``text[start:]`` that :func:`clean` blanks under ``markup``,
    outside code, sorted and disjoint: HTML and MDX comments wherever markup is cleaned,
    Obsidian ``%% comments %%`` where ``markup.comments``. What is neither indexed nor
    served (the served text is :func:`without` them)."""
    if not markup.clean:
        return []
    protected = _Protected(_code_ranges(text, start))
    found = [
        *_delimited(text, start, *_MDX_COMMENT, 4000),
        *_delimited(text, start, *_HTML_COMMENT, 20000),
        *(_delimited(text, start, *_OBSIDIAN_COMMENT, 20000) if markup.comments else ()),
    ]
    merged: list[tuple[int, int]] = []
    for begin, end in sorted(span for span in found if protected.clear(*span)):
        if merged and begin < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((begin, end))
    return merged


def without(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with ``spans`` (sorted, disjoint) left out but their line breaks kept, so
    every other line keeps its number (a hit's lines still point at the same text)."""
    if not spans:
        return text
    pieces, cursor = [], 0
    for begin, end in spans:
        pieces.append(text[cursor:begin])
        pieces.append("\n" * text.count("\n", begin, end))
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)


class _Protected:
    """Sorted, disjoint character ranges (code) that no rule may touch."""

    def __init__(self, ranges: list[tuple[int, int]]) -> None:
        self._starts = [s for s, _ in ranges]
        self._ranges = ranges

    def clear(self, start: int, end: int) -> bool:
        i = bisect_right(self._starts, end - 1) - 1
        return i < 0 or self._ranges[i][1] <= start


def _lines(text: str, start: int) -> Iterator[tuple[int, str]]:
    """(offset, line without its break) for each line from ``start`` on."""
    for m in _LINE.finditer(text, start):
        if m.start() == len(text) and m.start() > start:
            return
        yield m.start(), m.group().rstrip("\r\n")
        if m.end() == len(text):
            return


def _code_ranges(text: str, start: int) -> list[tuple[int, int]]:
    """Fenced code blocks (fence lines included) and inline code spans, in order."""
    ranges: list[tuple[int, int]] = []
    fence: str | None = None
    for offset, line in _lines(text, start):
        end = offset + len(line)
        if fence is not None:
            ranges.append((offset, end))
            stripped = line.strip().lstrip(">").strip()
            if stripped.startswith(fence) and not stripped.strip(fence[0]):
                fence = None
            continue
        opened = _FENCE_OPEN.match(line)
        if opened and (opened.group(1)[0] == "~" or line.find("`", opened.end()) < 0):
            fence = opened.group(1)
            ranges.append((offset, end))
            continue
        ranges += ((offset + s, offset + e) for s, e in _code_spans(line))
    return ranges


def _code_spans(line: str) -> Iterator[tuple[int, int]]:
    """Inline code spans of one line, by CommonMark's rule: a run of backticks opens a span
    that the next run of exactly its length closes; a run with no such partner is text.

    Runs are found once and each run length keeps the queue of its runs, so the line is read
    in linear time: a regex tried at every backtick rescanned the line from each of them."""
    runs = [m.span() for m in _BACKTICKS.finditer(line)]
    if len(runs) < 2:
        return
    later: dict[int, list[int]] = {}  # run length -> indexes of its runs, in reverse order
    for i in range(len(runs) - 1, -1, -1):
        later.setdefault(runs[i][1] - runs[i][0], []).append(i)
    i = 0
    while i < len(runs):
        start, end = runs[i]
        same = later[end - start]
        same.pop()  # run i itself: it is the smallest index left of its length
        if not same:
            i += 1
            continue
        j = same.pop()
        yield start, runs[j][1]
        for k in range(i + 1, j):  # the runs inside the span are code, not openers
            skipped = later[runs[k][1] - runs[k][0]]
            skipped.pop()
        i = j + 1


def _delimited(
    text: str, start: int, opener: re.Pattern[str], closer: re.Pattern[str], window: int
) -> Iterator[tuple[int, int]]:
    """Spans from ``opener`` to the first ``closer`` that starts at most ``window``
    characters after it: what ``opener[\\s\\S]{0,window}?closer`` matches, but the next
    closer is remembered across openers, so a text of openers is read once instead of one
    window per opener."""
    pos = start
    close: re.Match[str] | None = None
    while opened := opener.search(text, pos):
        inner = opened.end()
        if close is None or close.start() < inner:
            close = closer.search(text, inner)
            if close is None:
                return  # no closer after this opener, hence none after any later one
        if close.start() - inner <= window:
            yield opened.start(), close.end()
            pos = close.end()
        else:
            pos = opened.start() + 1


def _scripts(text: str, start: int) -> Iterator[tuple[int, int]]:
    """``<script ...>...</script>`` and ``<style>`` blocks: what
    ``<(script|style)\\b[^>]{0,2000}>[\\s\\S]{0,200000}?</\\1\\s*>`` matches, with the
    next ``>`` and the next closing tag of each name remembered across openers."""
    pos = start
    gt = -1
    closes: dict[str, re.Match[str] | None] = {}
    ended: set[str] = set()  # names with no closing tag left
    while opened := _SCRIPT_OPEN.search(text, pos):
        head = opened.end()
        if gt < head:
            gt = text.find(">", head)
            if gt < 0:
                return
        name = opened.group(1).lower()
        if gt - head > 2000 or name in ended:
            pos = opened.start() + 1
            continue
        inner = gt + 1
        close = closes.get(name)
        if close is None or close.start() < inner:
            close = closes[name] = _SCRIPT_CLOSE[name].search(text, inner)
            if close is None:
                ended.add(name)
                pos = opened.start() + 1
                continue
        if close.start() - inner <= 200000:
            yield opened.start(), close.end()
            pos = close.end()
        else:
            pos = opened.start() + 1


def _esm(text: str, start: int, protected: _Protected) -> list[tuple[int, int]]:
    """MDX ``import``/``export`` statements at the start of a line, with the lines that
    follow while their braces stay open (``export const meta = {`` ... ``}``)."""
    blanks: list[tuple[int, int]] = []
    depth, budget = 0, 0
    for offset, line in _lines(text, start):
        end = offset + len(line)
        if depth > 0 and budget > 0:
            blanks.append((offset, end))
            depth += line.count("{") - line.count("}")
            budget -= 1
            continue
        depth = 0
        if not protected.clear(offset, max(end, offset + 1)):
            continue
        if _ESM_IMPORT.match(line) or _ESM_EXPORT.match(line):
            blanks.append((offset, end))
            depth, budget = line.count("{") - line.count("}"), 200
    return blanks


def _wikilinks(
    text: str, start: int, protected: _Protected, *, alias_first: bool = False
) -> list[tuple[int, int]]:
    """Blank an embed whole; of a link, the brackets and all but the visible text (the
    alias: after ``|``, or before it with ``alias_first``)."""
    blanks: list[tuple[int, int]] = []
    for m in _WIKILINK.finditer(text, start):
        if not protected.clear(*m.span()):
            continue
        if m.group(1):
            blanks.append(m.span())
            continue
        inner_start, inner = m.start(2), m.group(2)
        blanks += [(m.start(), inner_start), (m.end(2), m.end())]
        if "|" in inner and alias_first:
            blanks.append((inner_start + inner.index("|"), m.end(2)))
        elif "|" in inner:
            blanks.append((inner_start, inner_start + inner.index("|") + 1))
        else:
            blanks += (
                (inner_start + i, inner_start + i + 1) for i, c in enumerate(inner) if c in "#^"
            )
    return blanks


def _inline_tags(
    text: str, start: int, protected: _Protected, rule: re.Pattern[str] = _INLINE_TAG
) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for m in rule.finditer(text, start):
        if protected.clear(*m.span()):
            seen.setdefault(m.group(1).rstrip("/-"))
    return tuple(t for t in seen if t)


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with every span's characters but line breaks replaced by spaces."""
    if not spans:
        return text
    parts: list[str] = []
    pos = 0
    for s, e in sorted(spans):
        s = max(s, pos)
        if e <= s:
            continue
        parts.append(text[pos:s])
        parts.append(_NOT_BREAK.sub(" ", text[s:e]))
        pos = e
    parts.append(text[pos:])
    return "".join(parts)


_NOT_BREAK = re.compile(r"[^\r\n]")
_CLOSING_PUNCTUATION = frozenset(".,;:!?)]")


def tidy(original: str, masked: str) -> str:
    """The text a chunk returns: ``masked`` (a slice of the mask) with the mask's traces
    removed. Lines the mask did not touch come back as they are (code stays exact); a
    touched line loses its markup (see :func:`_tidy_line`), and disappears if nothing
    but markup was on it."""
    return tidy_with_offsets(original, masked, ())[0]


def tidy_with_offsets(original: str, masked: str, points: Sequence[int]) -> tuple[str, list[int]]:
    """:func:`tidy`'s text, and where each of ``points`` (character offsets into
    ``original``, each at or inside a line) lands in it: the same place on a line kept as
    it is, the start of a line that lost its markup, the start of the next line kept for a
    line dropped. A merged chunk's sections are found in its content so
    (``Subsection.offset``), whatever lines the markup took out."""
    if original == masked:
        return original, list(points)
    out: list[str] = []
    starts: list[int] = []  # per input line: where it starts in ``original``
    lands: list[tuple[int, bool]] = []  # per input line: (output line, kept as it is)
    dropped = False
    at = 0
    for raw, line in zip(original.split("\n"), masked.split("\n"), strict=True):
        if points:  # every chunk is tidied; only a merged one asks where its sections land
            starts.append(at)
            at += len(raw) + 1
            lands.append((len(out), raw == line))
        if raw != line and not line.strip():
            dropped = True  # a markup-only line
            continue
        if raw != line:
            line = _tidy_line(raw, line)
        elif not line.strip() and dropped and out and not out[-1].strip():
            continue  # the dropped line sat between blank lines: keep only one
        dropped = dropped and not line.strip()
        out.append(line)
    joined = "\n".join(out)
    text = joined.strip("\n")
    if not points:
        return text, []
    lead = len(joined) - len(joined.lstrip("\n"))
    line_at = [0]
    for line in out:
        line_at.append(line_at[-1] + len(line) + 1)
    found: list[int] = []
    for point in points:
        index = max(0, bisect_right(starts, point) - 1)
        row, same = lands[index]
        column = point - starts[index] if same and row < len(out) else 0
        found.append(min(len(text), max(0, line_at[min(row, len(out))] + column - lead)))
    return text, found


def _tidy_line(raw: str, masked: str) -> str:
    """Drop each run of masked characters; a space takes its place only between two
    words it would otherwise glue together (``[[Note#Part]]`` reads ``Note Part``)."""
    out: list[str] = []
    i = 0
    while i < len(raw):
        if raw[i] == masked[i]:
            out.append(raw[i])
            i += 1
            continue
        j = _run_end(raw, masked, i)
        after = raw[j] if j < len(raw) else ""
        if out and _glues(out[-1], after):
            out.append(" ")
        elif after and (after in _CLOSING_PUNCTUATION or after.isspace()):
            while out and out[-1] == " ":
                out.pop()  # "see [[a]] ." -> "see a." and "> [!note] T" -> "> T"
            if after.isspace():
                if out and not out[-1].isspace():
                    out.append(" ")
                while j < len(raw) and raw[j] in " \t":
                    j += 1  # "::: tip Title" -> "Title", not " Title"
        i = j
    return "".join(out).rstrip()


#: Kana, kanji and CJK punctuation: Japanese writes no space between words, so a link
#: inside a sentence (``は[[保管庫]]内の``) must read ``は保管庫内の``, not ``は 保管庫 内の``.
_NO_SPACE_SCRIPT = re.compile(
    r"[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]"
)


def _glues(before: str, after: str) -> bool:
    """Whether removing markup between ``before`` and ``after`` would glue two words of a
    space-separated script together."""
    if not (before.isalnum() and after.isalnum()):
        return False
    return not (_NO_SPACE_SCRIPT.match(before) or _NO_SPACE_SCRIPT.match(after))


def _run_end(raw: str, masked: str, i: int) -> int:
    """End of the masked run at ``i``; spaces inside it (``[[Other Note|``) belong to it."""
    j = i
    while j < len(raw):
        if raw[j] != masked[j]:
            j += 1
            continue
        k = j
        while k < len(raw) and raw[k] in " \t" and raw[k] == masked[k]:
            k += 1
        if k == j or k == len(raw) or raw[k] == masked[k]:
            return j
        j = k
    return j
