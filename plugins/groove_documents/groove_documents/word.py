"""Word (.docx): paragraphs, headings, lists and tables in document order, read with
python-docx (MIT; ADR-0016).

Heading styles become Markdown headings (``Title`` and ``Heading 1`` → ``#``), list
paragraphs ``-`` items, tables Markdown tables. A .docx is a zip: its parts' declared
sizes are checked before anything is expanded (a zip bomb is skipped), and an encrypted
or legacy Word file (an OLE container, not a zip) is skipped with the reason.
"""

from __future__ import annotations

import io
import re
import time
import zipfile
from typing import TYPE_CHECKING, Any

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
_HEADING = re.compile(r"^heading (\d)$")


def sniff(head: bytes) -> bool:
    return head.startswith((ZIP, OLE))


def load(data: bytes, rel: str, settings: Settings) -> Loaded:
    cfg = settings.get(DocumentsSettings)
    if data.startswith(OLE):
        raise LoadError("encrypted or legacy Word file (an OLE container, not a .docx zip)")
    _check_zip(data, cfg)
    import docx

    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as err:
        raise LoadError(f"damaged .docx ({type(err).__name__}: {_first(err)})") from None
    budget = Budget(cfg.max_chars)
    deadline = time.monotonic() + cfg.max_seconds
    lines: list[str] = []
    warnings = []
    for block in _blocks(document):
        if budget.spent:
            warnings.append(f"text cut at [plugin.documents] max_chars ({cfg.max_chars})")
            break
        if lines and time.monotonic() > deadline:  # the first block even after a slow parse
            warnings.append(
                f"stopped reading after [plugin.documents] max_seconds ({cfg.max_seconds:g})"
            )
            break
        lines += block
        lines.append("")
        budget.take("\n".join(block))
    text = "\n".join(lines).strip()
    if not text:
        raise LoadError("the .docx holds no text")
    return Loaded(text + "\n", (), tuple(warnings))


def _check_zip(data: bytes, cfg: DocumentsSettings) -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            parts = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
        raise LoadError(f"damaged .docx (not a readable zip: {_first(err)})") from None
    if len(parts) > MAX_PARTS:
        raise LoadError(f"a .docx of {len(parts)} parts (over {MAX_PARTS}): refused")
    expanded = sum(p.file_size for p in parts)
    if expanded > cfg.max_unzipped_bytes:
        raise LoadError(
            f"a .docx expanding to {expanded} bytes (a zip bomb?): over [plugin.documents] "
            f"max_unzipped_bytes ({cfg.max_unzipped_bytes})"
        )
    if "word/document.xml" not in {p.filename for p in parts}:
        raise LoadError("not a Word document (a zip without word/document.xml)")


def _blocks(document: Any) -> Any:
    """Each paragraph or table of the body, in order, as Markdown lines."""
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    # Style names by id, read once: python-docx's ``paragraph.style`` looks the default
    # style up among all styles on every call (100,000 paragraphs took 11 minutes).
    names = {s.style_id: (s.name or "").lower() for s in document.styles}
    default = next((s.name or "" for s in document.styles if _is_default(s)), "normal").lower()
    for item in document.iter_inner_content():
        if isinstance(item, Paragraph):
            style_id = item._p.style
            block = _paragraph(item, default if style_id is None else names.get(style_id, ""))
        elif isinstance(item, Table):
            block = _table(item)
        else:
            continue
        if block:
            yield block


def _is_default(style: Any) -> bool:
    try:
        return bool(style.element.default) and style.type == 1  # a paragraph style
    except Exception:
        return False


#: WordprocessingML's namespace, as lxml spells tags in it.
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_RUN_BREAKS = {f"{W}tab": "\t", f"{W}br": "\n", f"{W}cr": "\n"}


def _text(p: Any) -> str:
    """A paragraph's text from its XML: python-docx's ``paragraph.text`` runs two XPath
    queries a paragraph, most of the time of a long document."""
    parts = []
    for el in p.iter(f"{W}t", f"{W}tab", f"{W}br", f"{W}cr"):
        if el.tag == f"{W}t":
            parts.append(el.text or "")
        elif el.getparent() is not None and el.getparent().tag == f"{W}r":
            parts.append(_RUN_BREAKS[el.tag])  # a tab stop of the paragraph's style is not
    return "".join(parts)


def _paragraph(paragraph: Any, style: str) -> list[str]:
    text = _text(paragraph._p)
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


def _table(table: Any) -> list[str]:
    rows = []
    for row in table.rows:
        cells = [inline(cell.text) for cell in row.cells]
        if any(cells):
            rows.append(cells)
    if not rows:
        return []
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    out = ["| " + " | ".join(rows[0]) + " |", "|" + " --- |" * width]
    out += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return out


def _first(err: BaseException) -> str:
    return str(err).splitlines()[0][:160] if str(err) else type(err).__name__
