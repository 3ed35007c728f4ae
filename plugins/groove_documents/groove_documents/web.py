"""HTML (.html, .htm): the page's text as Markdown, headings, lists, tables and links kept.

Read with the standard library's streaming ``html.parser``: no dependency, no tree built
(ADR-0016). Scripts, styles and the head are dropped (the ``<title>`` is the document's
title when no ``<h1>`` gives one). A heading with an ``id`` is an anchor:
``get page.html#install`` serves its section. Bounded for hostile pages: nesting deeper
than ``max_depth`` is read as plain text, text past ``max_chars`` and whatever follows
``max_seconds`` are left out, each with a warning.

Linear time: the page is fed to the parser once, which stops at the first construct that
never ends (a tag, comment or declaration with no closing ``>``, ``-->`` or ``]]>`` before
the end of the file). Such a construct runs to the end of the file, as HTML's own rules say
(what browsers show, and what newer Python releases' parser does at its end), so the
rest is left out with a warning. It is never handed to ``close()``: on the Python releases
without the upstream fix (CVE-2025-6069), ``close()`` rescans to the end of the buffer from
every ``<`` left in it, quadratic time (200 KB of ``<a`` took 22 s, 8 MB never ended).
"""

from __future__ import annotations

import codecs
import functools
import re
import time
from html.parser import HTMLParser
from typing import TYPE_CHECKING

from groove_core.loaders import Anchor, Loaded, LoadError
from groove_documents.settings import DocumentsSettings
from groove_documents.text import Budget, inline, text_line

if TYPE_CHECKING:
    from groove_core.config import Settings

#: Elements whose content is never text of the page.
HIDDEN = frozenset(
    {"script", "style", "noscript", "template", "head", "svg", "math", "iframe", "object"}
)
#: Elements that start and end a block of their own.
BLOCKS = frozenset(
    {
        "p", "div", "section", "article", "header", "footer", "main", "nav", "aside",
        "blockquote", "figure", "figcaption", "form", "fieldset", "address", "details",
        "summary", "dl", "dt", "dd", "ul", "ol", "hr", "br", "body", "html",
    }
)  # fmt: skip
HEADINGS = {f"h{n}": n for n in range(1, 7)}
#: Elements that never have content (no end tag to wait for).
VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
     "source", "track", "wbr"}
)  # fmt: skip
#: A start tag of one of these closes an open one of the same kind (``<li>a<li>b``).
SELF_CLOSING_SIBLINGS = frozenset({"p", "li", "dt", "dd", "tr", "td", "th", "option"})
_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*+["']?+\s*+([A-Za-z0-9_.:-]+)""", re.I)


def sniff(head: bytes) -> bool:
    return b"\x00" not in head or head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))


def decode(data: bytes) -> str:
    """The page's text: a BOM's encoding, else its ``<meta charset>`` when that names a
    character set, else UTF-8, else Windows-1252 (what browsers assume), never an error."""
    for bom, encoding in (
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if data.startswith(bom):
            return data.decode(encoding, errors="replace")
    declared = _CHARSET.search(data[:4096])
    if declared and _is_charset(declared.group(1).decode("ascii").lower()):
        try:
            return data.decode(declared.group(1).decode("ascii"), errors="replace")
        except (LookupError, UnicodeError):
            pass
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


#: ASCII the way markup uses it, and the sequences that the codecs which are not character
#: sets (``unicode_escape``, ``utf-7``, ``hz``) read otherwise.
_ASCII_SAMPLE = bytes(range(0x20, 0x7F)) + b"\t\n\r \\N{x} \\u00 +a- ~{"


@functools.lru_cache(maxsize=64)
def _is_charset(name: str) -> bool:
    """Whether ``<meta charset=NAME>`` can be believed: a codec Python knows that reads
    ASCII as ASCII (the declaration itself was found as ASCII: UTF-16 cannot be meant) and
    reads any byte without an error (``idna``, ``punycode`` and ``undefined`` do not)."""
    try:
        ascii_kept = _ASCII_SAMPLE.decode(name) == _ASCII_SAMPLE.decode("ascii")
        bytes(range(256)).decode(name, errors="replace")
    except (LookupError, UnicodeError, ValueError):
        return False
    return ascii_kept


def load(data: bytes, rel: str, settings: Settings) -> Loaded:
    cfg = settings.get(DocumentsSettings)
    converter = _Converter(cfg.max_depth, Budget(cfg.max_chars))
    converter.deadline = time.monotonic() + cfg.max_seconds
    try:
        converter.feed(decode(data))
        converter.finish()
    except _OutOfTime:
        converter.late = cfg.max_seconds
    return converter.result()


class _OutOfTime(Exception):
    """Raised from the parser's events past ``max_seconds``: what was read is kept."""


class _Converter(HTMLParser):
    def __init__(self, max_depth: int, budget: Budget) -> None:
        super().__init__(convert_charrefs=True)
        self.max_depth = max_depth
        self.budget = budget
        self.deadline = float("inf")
        self.ticks = 1  # events until the clock is read again
        self.late = 0.0  # max_seconds, once reading stopped there
        self.unclosed = ""  # the construct that ran to the end of the file, left out
        self.lines: list[str] = []
        self.anchors: list[Anchor] = []
        self.stack: list[str] = []
        self.too_deep = 0  # start tags past max_depth, read as text
        self.hidden = 0  # depth inside HIDDEN elements
        self.text: list[str] = []  # inline text of the current block
        self.heading = 0
        self.heading_id = ""
        self.item = False  # the current block is a list item
        self.pre = 0
        self.links: list[tuple[str, int]] = []
        self.table: list[list[str]] | None = None
        self.row: list[str] | None = None
        self.cell: list[str] | None = None
        self.title: list[str] | None = None
        self.page_title = ""
        self.seen_h1 = False

    # -- the parser's events ---------------------------------------------------------

    def finish(self) -> None:
        """What ``close()`` does, without its quadratic path: markup that never ends (the
        parser stopped at it and holds the rest) runs to the end of the file and is left
        out; anything else held back (text waiting for the end of a character reference,
        a script never closed) is ``close()``'s to finish, in linear time."""
        held = getattr(self, "rawdata", "")
        if held.startswith("<") and getattr(self, "cdata_elem", None) is None:
            self.unclosed = held
            self.rawdata = ""
            return
        self.close()

    def _tick(self) -> None:
        """Every 256th event: past ``max_seconds``, stop reading."""
        self.ticks = 256
        if time.monotonic() > self.deadline:
            raise _OutOfTime

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ticks -= 1
        if not self.ticks:
            self._tick()
        if tag == "title" and self.title is None and not self.page_title:
            self.title = []
            return
        if tag in VOID:
            self._void(tag, dict(attrs))
            return
        if tag in SELF_CLOSING_SIBLINGS and tag in self.stack[-3:]:
            self._close(tag)
        if len(self.stack) >= self.max_depth:
            self.too_deep += 1
            return
        self.stack.append(tag)
        if tag in HIDDEN:
            self.hidden += 1
        if self.hidden:
            return
        self._open(tag, dict(attrs))

    def handle_endtag(self, tag: str) -> None:
        self.ticks -= 1
        if not self.ticks:
            self._tick()
        if tag == "title" and self.title is not None:
            self.page_title = inline("".join(self.title))
            self.title = None
            return
        if tag in self.stack:
            self._close(tag)

    def handle_data(self, data: str) -> None:
        self.ticks -= 1
        if not self.ticks:
            self._tick()
        if self.title is not None:
            self.title.append(data)
            return
        if self.hidden or self.budget.spent:
            return
        kept = self.budget.take(data)
        if self.cell is not None:
            self.cell.append(kept)
        else:
            self.text.append(kept)

    # -- structure -------------------------------------------------------------------

    def _void(self, tag: str, attrs: dict[str, str | None]) -> None:
        if self.hidden:
            return
        if tag == "br":
            if self.cell is not None:
                self.cell.append(" ")
            else:
                self.text.append("\n")
        elif tag == "hr":
            self._flush()
        elif tag == "img" and attrs.get("alt"):
            self.handle_data(f" {attrs['alt']} ")

    def _close(self, tag: str) -> None:
        """Close ``tag`` and whatever was left open inside it."""
        while self.stack:
            top = self.stack.pop()
            if top in HIDDEN:
                self.hidden -= 1
            elif not self.hidden:
                self._end(top)
            if top == tag:
                return

    def _open(self, tag: str, attrs: dict[str, str | None]) -> None:
        if tag in HEADINGS:
            self._flush()
            self.heading = HEADINGS[tag]
            self.heading_id = attrs.get("id") or ""
        elif tag == "li":
            self._flush()
            self.item = True
        elif tag == "pre":
            self._flush()
            self.pre += 1
        elif tag == "table":
            if self.table is None:
                self._flush()
                self.table = []
        elif tag == "tr" and self.table is not None and self.cell is None:
            self.row = []
        elif tag in ("td", "th") and self.row is not None and self.cell is None:
            self.cell = []
        elif tag == "a" and self.cell is None:
            href = (attrs.get("href") or "").strip()
            if href and not href.startswith(("#", "javascript:", "data:")):
                self.links.append((href, len(self.text)))
            if self.heading and not self.heading_id:
                self.heading_id = attrs.get("id") or attrs.get("name") or ""
        elif tag in BLOCKS:
            self._flush()

    def _end(self, tag: str) -> None:
        if tag in HEADINGS or tag == "li":
            self._flush()
        elif tag == "pre":
            self._flush()
            self.pre = max(0, self.pre - 1)
        elif tag in ("td", "th") and self.cell is not None and self.row is not None:
            self.row.append(inline("".join(self.cell)))
            self.cell = None
        elif tag == "tr" and self.row is not None and self.table is not None:
            if self.cell is not None:
                self.row.append(inline("".join(self.cell)))
                self.cell = None
            if any(self.row):
                self.table.append(self.row)
            self.row = None
        elif tag == "table" and self.table is not None and "table" not in self.stack:
            self._emit(_table(self.table))
            self.table = self.row = self.cell = None
        elif tag == "a" and self.links:
            href, start = self.links.pop()
            label = inline("".join(self.text[start:]))
            if label and start <= len(self.text):
                self.text[start:] = [f"[{label.replace(']', '')}]({href.replace(' ', '%20')})"]
        elif tag in BLOCKS:
            self._flush()

    def _flush(self) -> None:
        """End the current block: write its text as a heading, an item, code or lines."""
        raw = "".join(self.text)
        self.text, self.links = [], []
        heading, self.heading = self.heading, 0
        item, self.item = self.item, False
        if heading:
            title = inline(raw)
            if title:
                if heading == 1:
                    self.seen_h1 = True
                if self.heading_id:
                    self.anchors.append(Anchor(len(self.lines) + 1, self.heading_id))
                self._emit(["#" * heading + " " + title])
            self.heading_id = ""
            return
        if self.pre:
            body = raw.strip("\n").replace("```", "`\u200b``")
            if body.strip():
                self._emit(["```", *body.splitlines(), "```"])
            return
        lines = [text_line(line) for line in raw.split("\n")]
        lines = [line for line in lines if line]
        if not lines:
            return
        if item:
            lines = ["- " + lines[0], *("  " + line for line in lines[1:])]
        self._emit(lines)

    def _emit(self, block: list[str]) -> None:
        if block:
            self.lines += [*block, ""]

    def result(self) -> Loaded:
        self._close_all()
        warnings = []
        if self.too_deep:
            warnings.append(
                f"markup nested deeper than [plugin.documents] max_depth ({self.max_depth}) "
                "was read as plain text"
            )
        if self.budget.cut or self.budget.spent:
            warnings.append(f"text cut at [plugin.documents] max_chars ({self.budget_limit})")
        if self.unclosed:
            line = self.getpos()[0]
            warnings.append(
                f"markup left open at line {line} ({_opening(self.unclosed)} never closed) "
                f"runs to the end of the file: its {len(self.unclosed)} "
                f"character{'s were' if len(self.unclosed) != 1 else ' was'} left out"
            )
        if self.late:
            warnings.append(f"stopped reading after [plugin.documents] max_seconds ({self.late:g})")
        lines, anchors = self.lines, self.anchors
        if self.page_title and not self.seen_h1:
            lines = [f"# {self.page_title}", "", *lines]
            anchors = [Anchor(a.line + 2, a.fragment) for a in anchors]
        text = "\n".join(lines).strip()
        if not text:
            cut = [w for w in warnings if w.startswith(("markup left open", "stopped"))]
            raise LoadError(
                f"no text read from the page: {cut[0]}" if cut else "the page holds no text"
            )
        return Loaded(text + "\n", tuple(anchors), tuple(warnings))

    @property
    def budget_limit(self) -> int:
        return self.budget.limit

    def _close_all(self) -> None:
        while self.stack:
            self._close(self.stack[-1])
        if self.table is not None:
            if self.row:
                self.table.append(self.row)
            self._emit(_table(self.table))
            self.table = self.row = self.cell = None
        self._flush()


def _opening(markup: str) -> str:
    """How the markup that never closed starts, for the warning (``<!--``, ``<a``)."""
    head = re.match(r"<(!--|!\[CDATA\[|!|\?|/)?[A-Za-z]{0,12}", markup)
    return repr(head.group() if head else markup[:1])


def _table(rows: list[list[str]]) -> list[str]:
    rows = [r for r in rows if any(r)]
    if not rows:
        return []
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    out = ["| " + " | ".join(rows[0]) + " |", "|" + " --- |" * width]
    return out + ["| " + " | ".join(r) + " |" for r in rows[1:]]
