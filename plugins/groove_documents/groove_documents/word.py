"""Word (.docx): paragraphs, headings, lists and tables in document order (ADR-0016).

Heading styles become Markdown headings (``Title`` and ``Heading 1`` → ``#``), list
paragraphs ``-`` items, tables Markdown tables, with python-docx's reading of a document
(its package rules, styles, merged cells), but streamed: no part is ever held whole.

Bounded for hostile files. A .docx is a zip: its parts' declared sizes are checked before
anything is expanded (a zip bomb is skipped), and each part read is inflated a piece at a
time, its bytes counted as they come (a part whose header lies about its size is cut at
``max_unzipped_bytes``, never inflated whole). The XML is parsed as it streams (expat),
one block of the body at a time, and reading stops at ``max_chars`` or ``max_seconds``
with a warning, so a small file holding a hundred megabytes of XML costs what the text
kept costs. Entities are never expanded (an entity reference is left out, the text around
it kept) and nothing outside the file is fetched. An encrypted or legacy Word file (an
OLE container, not a zip) is skipped with the reason.
"""

from __future__ import annotations

import io
import posixpath
import re
import time
import zipfile
import zlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any
from xml.parsers import expat

from groove_core.loaders import Loaded, LoadError
from groove_documents.settings import DocumentsSettings
from groove_documents.text import Budget, inline, text_line

if TYPE_CHECKING:
    from groove_core.config import Settings

ZIP = b"PK\x03\x04"
#: An OLE compound file: a legacy .doc, or a password-protected .docx.
OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
#: Parts a .docx may hold at most (a real one has tens).
MAX_PARTS = 10_000
#: Inflated bytes read from a part at a time (the memory one read may take).
CHUNK = 64 * 1024
#: Bytes of one XML tag at most (expat holds a tag whole; a real one is far smaller).
MAX_TAG_BYTES = 16 * 1024 * 1024
#: Styles remembered at most (a real document has hundreds; the rest are read past).
MAX_STYLES = 50_000
#: Columns one table cell may span (Word's tables have at most 63 columns).
MAX_SPAN = 1_000
#: XML elements open at once at most (a real document nests tens deep).
MAX_DEPTH = 1_000
_HEADING = re.compile(r"^heading (\d)$")

#: Namespaces, as expat spells a name with ``namespace_separator=" "``.
_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main "
_RELS = "http://schemas.openxmlformats.org/package/2006/relationships "
_TYPES = "http://schemas.openxmlformats.org/package/2006/content-types "
_RT = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"
OFFICE_DOCUMENT = _RT + "officeDocument"
STYLES = _RT + "styles"
MAIN_CONTENT_TYPE = (
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
)

DOCUMENT, BODY, P, TBL, TR, TC, R, T = (
    _W + name for name in ("document", "body", "p", "tbl", "tr", "tc", "r", "t")
)
PPR, PSTYLE, TRPR, GRID_BEFORE, TCPR, GRID_SPAN, V_MERGE, HYPERLINK = (
    _W + name
    for name in ("pPr", "pStyle", "trPr", "gridBefore", "tcPr", "gridSpan", "vMerge", "hyperlink")
)
VAL, TYPE = _W + "val", _W + "type"
#: What a top-level paragraph's run breaks read as (this loader's reading of a paragraph,
#: kept: every ``w:br`` is a line break, a page break too).
_PARAGRAPH_BREAKS = {_W + "tab": "\t", _W + "br": "\n", _W + "cr": "\n"}
#: What a table cell's run content reads as (python-docx's ``cell.text``); ``w:br`` is a
#: line break only when it is one (``w:type`` absent or ``textWrapping``).
_CELL_RUN = {
    _W + "tab": "\t",
    _W + "ptab": "\t",
    _W + "cr": "\n",
    _W + "noBreakHyphen": "-",
}
_BR = _W + "br"


def sniff(head: bytes) -> bool:
    return head.startswith((ZIP, OLE))


def load(data: bytes, rel: str, settings: Settings) -> Loaded:
    cfg = settings.get(DocumentsSettings)
    if data.startswith(OLE):
        raise LoadError("encrypted or legacy Word file (an OLE container, not a .docx zip)")
    deadline = time.monotonic() + cfg.max_seconds
    with _open_zip(data, cfg) as archive:
        package = _Package(archive, cfg.max_unzipped_bytes, deadline)
        main = package.main_part()
        names, default = package.styles(main)
        body = _Body(names, default, Budget(cfg.max_chars), deadline, cfg)
        package.parse(main, body, body.stop)
    return body.result()


#: The zip compression methods read: stored and deflated (what Word writes).
_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)


def _open_zip(data: bytes, cfg: DocumentsSettings) -> zipfile.ZipFile:
    """The zip, once its directory says it is a Word document of a sane size."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        parts = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
        raise LoadError(f"damaged .docx (not a readable zip: {_first(err)})") from None
    if len(parts) > MAX_PARTS:
        raise LoadError(f"a .docx of {len(parts)} parts (over {MAX_PARTS}): refused")
    odd = next((p for p in parts if p.compress_type not in _METHODS), None)
    if odd is not None:
        # zipfile inflates bzip2 and LZMA without a bound on what one read produces.
        raise LoadError(
            f"a .docx part compressed with zip method {odd.compress_type} ({odd.filename}; "
            "Word stores or deflates): refused"
        )
    expanded = sum(p.file_size for p in parts)
    if expanded > cfg.max_unzipped_bytes:
        raise LoadError(
            f"a .docx expanding to {expanded} bytes (a zip bomb?): over [plugin.documents] "
            f"max_unzipped_bytes ({cfg.max_unzipped_bytes})"
        )
    if "word/document.xml" not in {p.filename for p in parts}:
        raise LoadError("not a Word document (a zip without word/document.xml)")
    return archive


class _Stop(Exception):
    """Raised from a parser's handlers: read no further (the reason is already noted)."""


class _Package:
    """The parts of a .docx, each inflated and parsed a piece at a time, the inflated
    bytes of all of them counted against ``max_unzipped_bytes`` as they come."""

    def __init__(self, archive: zipfile.ZipFile, limit: int, deadline: float) -> None:
        self.archive = archive
        self.limit = limit
        self.inflated = 0
        self.deadline = deadline
        self.members = {info.filename: info for info in archive.infolist()}

    def chunks(self, name: str) -> Iterator[bytes]:
        """The part's bytes, ``CHUNK`` at a time (zipfile inflates no more than asked)."""
        try:
            with self.archive.open(self.members[name]) as part:
                while chunk := part.read(CHUNK):
                    self.inflated += len(chunk)
                    if self.inflated > self.limit:
                        break
                    yield chunk
        except (
            zipfile.BadZipFile,
            zlib.error,
            OSError,
            EOFError,
            ValueError,
            RuntimeError,  # an encrypted part
            NotImplementedError,
        ) as err:
            raise LoadError(f"damaged .docx ({_first(err)})") from None
        if self.inflated > self.limit:
            raise LoadError(
                f"a .docx expanding to over {self.limit} bytes (a zip bomb?): over "
                f"[plugin.documents] max_unzipped_bytes ({self.limit})"
            )

    def parse(self, name: str, handler: Any, stop: Callable[[], bool] | None = None) -> None:
        """Parse the part ``name`` with expat, feeding ``handler``'s ``start``, ``end`` and
        ``data``; ``stop()``, asked after each piece, ends the reading early (so does
        ``_Stop`` raised by a handler)."""
        parser = expat.ParserCreate(namespace_separator=" ")
        parser.buffer_text = True
        parser.StartElementHandler = handler.start
        parser.EndElementHandler = handler.end
        parser.CharacterDataHandler = handler.data
        # A default handler turns the expansion of entity references off: one that was
        # declared is left out (the text around it kept), and none is ever fetched.
        parser.DefaultHandler = _ignore
        parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
        fed = 0
        try:
            for chunk in self.chunks(name):
                fed += len(chunk)
                parser.Parse(chunk, False)
                if fed - parser.CurrentByteIndex > MAX_TAG_BYTES:
                    raise LoadError(
                        f"damaged .docx ({name} holds an XML tag over {MAX_TAG_BYTES} bytes)"
                    )
                if stop() if stop is not None else time.monotonic() > self.deadline:
                    return
            parser.Parse(b"", True)
        except _Stop:
            return
        except expat.ExpatError as err:
            raise LoadError(f"damaged .docx (XML error in {name}: {_first(err)})") from None

    def main_part(self) -> str:
        """The main document part (the package's ``officeDocument`` relationship), once
        [Content_Types].xml says it is a Word document's (python-docx's rule)."""
        if "[Content_Types].xml" not in self.members:
            raise LoadError("damaged .docx (no [Content_Types].xml)")
        main = self.related("", OFFICE_DOCUMENT) or "word/document.xml"
        if main not in self.members:
            raise LoadError(f"damaged .docx (its main part {main} is missing)")
        types = _ContentTypes()
        self.parse("[Content_Types].xml", types)
        found = types.of(main)
        if found != MAIN_CONTENT_TYPE:
            raise LoadError(f"not a Word document (its main part is {found or 'untyped'})")
        return main

    def related(self, source: str, kind: str) -> str | None:
        """The part that ``source`` (``""``: the package) relates to by ``kind``, first
        of them; None when there is none."""
        folder, name = posixpath.split(source)
        rels = posixpath.join(folder, "_rels", name + ".rels")
        if rels not in self.members:
            return None
        found = _Relationships(kind)
        self.parse(rels, found)
        if found.target is None:
            return None
        target = posixpath.normpath(posixpath.join("/", folder, found.target))
        return target.lstrip("/")

    def styles(self, main: str) -> tuple[dict[str | None, str], str]:
        """Paragraph style names by id, lower-cased, and the default paragraph style's
        name (python-docx's default styles when the document has none)."""
        found = _Styles()
        part = self.related(main, STYLES)
        if part is not None and part in self.members:
            self.parse(part, found)
        else:
            _default_styles(found)
        return found.names, found.default


def _ignore(data: str) -> None:
    pass


class _ContentTypes:
    """[Content_Types].xml: a part's content type by its name, else by its extension."""

    def __init__(self) -> None:
        self.overrides: dict[str, str] = {}
        self.defaults: dict[str, str] = {}

    def start(self, name: str, attrs: dict[str, str]) -> None:
        if len(self.overrides) + len(self.defaults) >= MAX_PARTS:
            return
        if name == _TYPES + "Override":
            part = attrs.get("PartName", "").lower()
            self.overrides.setdefault(part, attrs.get("ContentType", ""))
        elif name == _TYPES + "Default":
            ext = attrs.get("Extension", "").lower()
            self.defaults.setdefault(ext, attrs.get("ContentType", ""))

    def end(self, name: str) -> None:
        pass

    def data(self, data: str) -> None:
        pass

    def of(self, part: str) -> str | None:
        found = self.overrides.get("/" + part.lower())
        if found is None:
            found = self.defaults.get(posixpath.splitext(part)[1].lstrip(".").lower())
        return found


class _Relationships:
    """A .rels part: the target of the first internal relationship of one kind."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.target: str | None = None

    def start(self, name: str, attrs: dict[str, str]) -> None:
        if (
            name == _RELS + "Relationship"
            and self.target is None
            and attrs.get("Type") == self.kind
            and attrs.get("TargetMode", "Internal") != "External"
        ):
            self.target = attrs.get("Target")

    def end(self, name: str) -> None:
        pass

    def data(self, data: str) -> None:
        pass


class _Styles:
    """styles.xml: each ``w:style``'s id, name, type and default flag (python-docx's
    reading: a style without ``w:type`` is a paragraph style; ``w:name`` is the first)."""

    def __init__(self) -> None:
        self.names: dict[str | None, str] = {}
        self.default = "normal"
        self.seen_default = False
        self.depth = 0
        self.style: dict[str, str] | None = None  # the open w:style's attributes
        self.name: str | None = None
        self.named = False  # its first w:name was seen
        self.count = 0

    def start(self, name: str, attrs: dict[str, str]) -> None:
        self.depth += 1
        if self.depth == 2 and name == _W + "style":
            self.style, self.name, self.named = attrs, None, False
        elif self.depth == 3 and self.style is not None and name == _W + "name" and not self.named:
            self.name, self.named = attrs.get(VAL), True

    def end(self, name: str) -> None:
        self.depth -= 1
        if self.depth == 1 and self.style is not None:
            self._add(self.style, self.name)
            self.style = None

    def data(self, data: str) -> None:
        pass

    def _add(self, style: dict[str, str], name: str | None) -> None:
        self.count += 1
        if self.count > MAX_STYLES:
            return
        self.names[style.get(_W + "styleId")] = (name or "").lower()
        if not self.seen_default and _is_default(style):
            self.seen_default = True
            self.default = (name or "").lower()


def _is_default(style: dict[str, str]) -> bool:
    """A default paragraph style (``w:default`` on, ``w:type`` paragraph or absent)."""
    return (
        style.get(_W + "default") in ("1", "true", "on")
        and style.get(_W + "type", "paragraph") == "paragraph"
    )


def _default_styles(found: _Styles) -> None:
    """The styles python-docx gives a document without a styles part."""
    from importlib import resources

    try:
        xml = resources.files("docx").joinpath("templates/default-styles.xml").read_bytes()
    except (ModuleNotFoundError, OSError):
        return
    parser = expat.ParserCreate(namespace_separator=" ")
    parser.StartElementHandler = found.start
    parser.EndElementHandler = found.end
    parser.Parse(xml, True)


class _Body:
    """The body of the main part, read a block at a time: each paragraph or table that is
    a child of ``w:body`` becomes Markdown lines as soon as it ends, and nothing of it is
    kept but those lines."""

    def __init__(
        self,
        names: dict[str | None, str],
        default: str,
        budget: Budget,
        deadline: float,
        cfg: DocumentsSettings,
    ) -> None:
        self.names = names
        self.default = default
        self.budget = budget
        self.deadline = deadline
        self.cfg = cfg
        self.lines: list[str] = []
        self.warnings: list[str] = []
        self.stack: list[str] = []
        self.bodies = 0  # w:body elements seen: python-docx reads the first
        self.late = False  # stopped at max_seconds
        # Text of the open block: the chars collected so far, and where w:t text goes.
        self.held = 0
        self.sink: list[str] | None = None
        # A top-level paragraph.
        self.paragraph: list[str] | None = None
        self.style: str | None = None
        self.ppr = 0  # 1 inside the paragraph's first w:pPr, 2 once it ended
        self.pstyle = False
        # A top-level table: its rows (cells as table text), the open row and cell.
        self.rows: list[list[str]] | None = None
        self.table_chars = 0  # of its rows so far, as Markdown (" | " between cells)
        self.above: list[tuple[int, list[str]]] = []  # the previous row: offset, cells
        self.row: list[tuple[int, str | None, str]] = []  # span, vMerge, text
        self.grid_before = 0
        self.trpr = 0
        self.cell: list[str] = []  # the open cell's paragraphs' texts
        self.span = 1
        self.vmerge: str | None = None
        self.tcpr = 0
        self.cell_text: list[str] | None = None  # the open cell paragraph's text
        self.run = -1  # depth of the open run of a cell paragraph

    # -- expat's events --------------------------------------------------------------

    def start(self, name: str, attrs: dict[str, str]) -> None:
        stack = self.stack
        depth = len(stack)
        stack.append(name)
        if depth >= MAX_DEPTH:
            self._too_deep()
        if depth <= 2:
            if depth == 1 and name == BODY:
                self.bodies += 1
            elif depth == 2 and self.bodies == 1 and stack[1] == BODY and stack[0] == DOCUMENT:
                if name == P:
                    self.paragraph, self.style, self.ppr, self.pstyle = [], None, 0, False
                elif name == TBL:
                    self.rows, self.above, self.table_chars = [], [], 0
            return
        if self.paragraph is not None:
            self._paragraph_start(name, attrs, depth)
        elif self.rows is not None:
            self._table_start(name, attrs, depth)

    def end(self, name: str) -> None:
        stack = self.stack
        stack.pop()
        depth = len(stack)
        if name == T:
            self.sink = None
        if depth == 2:
            if self.paragraph is not None:
                text, self.paragraph = "".join(self.paragraph), None
                self.held = 0
                self._emit(_paragraph(text, self._style_name()))
            elif self.rows is not None:
                rows, self.rows = self.rows, None
                self.held = 0
                self._emit(_table(rows))
        elif self.paragraph is not None:
            if depth == 3 and name == PPR and self.ppr == 1:
                self.ppr = 2
        elif self.rows is not None:
            self._table_end(name, depth)

    def data(self, data: str) -> None:
        sink = self.sink
        if sink is not None:
            sink.append(data)
            self._hold(len(data))

    def _hold(self, chars: int) -> None:
        """``chars`` more held for the open block: past what ``max_chars`` leaves, cut."""
        self.held += chars
        if self.held > self.budget.left:
            self._cut()

    # -- a top-level paragraph -------------------------------------------------------

    def _paragraph_start(self, name: str, attrs: dict[str, str], depth: int) -> None:
        """Inside a paragraph of the body: every ``w:t`` below it is its text (text boxes
        included), a tab or break of a run a character; its style is the first
        ``w:pStyle`` of its first ``w:pPr``."""
        if name == T:
            self.sink = self.paragraph
        elif name in _PARAGRAPH_BREAKS:
            if self.stack[-2] == R:
                assert self.paragraph is not None
                self.paragraph.append(_PARAGRAPH_BREAKS[name])
                self._hold(1)
        elif depth == 3 and name == PPR and self.ppr == 0:
            self.ppr = 1
        elif depth == 4 and name == PSTYLE and self.ppr == 1 and not self.pstyle:
            self.pstyle = True
            self.style = attrs.get(VAL)

    def _style_name(self) -> str:
        return self.default if self.style is None else self.names.get(self.style, "")

    # -- a top-level table (python-docx's rows, cells and cell text) -----------------

    def _table_start(self, name: str, attrs: dict[str, str], depth: int) -> None:
        stack = self.stack
        if depth == self.run + 1:  # what a cell paragraph's run holds
            assert self.cell_text is not None
            if name == T:
                self.sink = self.cell_text
            elif name == _BR:
                if attrs.get(TYPE, "textWrapping") == "textWrapping":
                    self.cell_text.append("\n")
                    self._hold(1)
            elif name in _CELL_RUN:
                self.cell_text.append(_CELL_RUN[name])
                self._hold(1)
            return
        if depth == 3:
            if name == TR:
                self.row, self.grid_before, self.trpr = [], 0, 0
        elif depth == 4 and stack[3] == TR:
            if name == TC:
                self.cell, self.span, self.vmerge, self.tcpr = [], 1, None, 0
            elif name == TRPR and self.trpr == 0:
                self.trpr = 1
        elif depth == 5 and stack[4] == TC and stack[3] == TR:
            if name == P:
                self.cell_text = []
            elif name == TCPR and self.tcpr == 0:
                self.tcpr = 1
        elif depth == 5 and stack[4] == TRPR and self.trpr == 1:
            if name == GRID_BEFORE:
                self.trpr = 2
                self.grid_before = _int(attrs.get(VAL), 0)
        elif depth == 6 and stack[5] == TCPR and self.tcpr == 1 and stack[4] == TC:
            if name == GRID_SPAN and self.span == 1:
                self.span = min(max(1, _int(attrs.get(VAL), 1)), MAX_SPAN)
            elif name == V_MERGE and self.vmerge is None:
                self.vmerge = attrs.get(VAL, "continue")
        elif self.cell_text is not None and stack[4] == TC and stack[5] == P:
            if depth == 6 and name == R:
                self.run = 6
            elif depth == 7 and name == R and stack[6] == HYPERLINK:
                self.run = 7

    def _table_end(self, name: str, depth: int) -> None:
        if depth == self.run:
            self.run = -1
        elif depth == 5 and name == P and self.cell_text is not None:
            self.cell.append("".join(self.cell_text))
            self.cell_text = None
            self._hold(1)
        elif depth == 5 and name == TCPR and self.tcpr == 1:
            self.tcpr = 2
        elif depth == 4 and name == TRPR and self.trpr == 1:
            self.trpr = 2
        elif depth == 4 and name == TC and self.stack[3] == TR:
            self.row.append((self.span, self.vmerge, "\n".join(self.cell)))
            self.cell = []
        elif depth == 3 and name == TR and self.rows is not None:
            cells = self._cells()
            if any(cells):
                self.rows.append(cells)
                self.table_chars += sum(len(c) + 3 for c in cells)
            self.held = self.table_chars  # the row's text now counts as its cells
            self._hold(0)

    def _cells(self) -> list[str]:
        """The open row's cells, python-docx's way: a cell spanning columns repeated, a
        vertically merged one (``vMerge`` continue) giving the cells of the one above it
        at the same grid offset (its own text where there is none)."""
        out: list[str] = []
        placed: list[tuple[int, list[str]]] = []
        offset = self.grid_before
        for span, vmerge, text in self.row:
            if vmerge == "continue":
                above = next((c for o, c in self.above if o == offset), None)
                mine = above if above is not None else [inline(text)] * span
            else:
                mine = [inline(text)] * span
            placed.append((offset, mine))
            out += mine
            offset += span
        self.above = placed
        self.row = []
        return out

    # -- the run's limits ------------------------------------------------------------

    def _emit(self, block: list[str]) -> None:
        """Add one block of the body, as the loader always did: the first block past
        ``max_chars`` or ``max_seconds`` (the first block even after a slow start) ends
        the reading with a warning."""
        if not block:
            return
        if self.budget.spent:
            self.warnings.append(f"text cut at [plugin.documents] max_chars ({self.cfg.max_chars})")
            raise _Stop
        if self.lines and time.monotonic() > self.deadline:
            self._late()
            raise _Stop
        self.lines += block
        self.lines.append("")
        self.budget.take("\n".join(block))

    def _cut(self) -> None:
        """The open block alone holds more text than ``max_chars`` leaves: add what it
        holds so far, cut there, and read no further."""
        if self.paragraph is not None:
            text = "".join(self.paragraph)[: self.budget.left]
            block = _paragraph(text, self._style_name())
        else:
            block = _table(self.rows or [])
        self.paragraph = self.rows = None
        if block and not self.budget.spent:
            self.lines += block
            self.lines.append("")
            self.budget.take("\n".join(block))
        self.warnings.append(f"text cut at [plugin.documents] max_chars ({self.cfg.max_chars})")
        raise _Stop

    def _too_deep(self) -> None:
        self.warnings.append(
            f"stopped reading at XML nested over {MAX_DEPTH} levels deep (a damaged or "
            "hostile file)"
        )
        raise _Stop

    def stop(self) -> bool:
        """Asked after each piece parsed: past ``max_seconds``, read no further."""
        if time.monotonic() > self.deadline:
            self._late()
            return True
        return False

    def _late(self) -> None:
        self.late = True
        self.warnings.append(
            f"stopped reading after [plugin.documents] max_seconds ({self.cfg.max_seconds:g})"
        )

    def result(self) -> Loaded:
        text = "\n".join(self.lines).strip()
        if not text:
            if self.warnings:
                raise LoadError(f"no text read from the .docx: {self.warnings[-1]}")
            raise LoadError("the .docx holds no text")
        return Loaded(text + "\n", (), tuple(self.warnings))


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def _paragraph(text: str, style: str) -> list[str]:
    if not text.strip():
        return []
    level = 1 if style == "title" else _level(style)
    if level:
        return ["#" * level + " " + inline(text)]
    lines = [text_line(line) for line in text.splitlines() if line.strip()]
    if "list" in style:
        return ["- " + lines[0], *("  " + line for line in lines[1:])]
    return lines


def _level(style: str) -> int:
    found = _HEADING.match(style)
    return min(int(found.group(1)), 6) if found else 0


def _table(rows: list[list[str]]) -> list[str]:
    if not rows:
        return []
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    out = ["| " + " | ".join(rows[0]) + " |", "|" + " --- |" * width]
    out += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return out


def _first(err: BaseException) -> str:
    return str(err).splitlines()[0][:160] if str(err) else type(err).__name__
