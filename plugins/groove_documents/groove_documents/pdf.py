"""PDF: the text layer of each page, read with pypdf (BSD; ADR-0016), one section a page.

Each page with text becomes a ``## Page N`` section whose start is the anchor ``page=N``:
a hit's heading path names its page, and ``get report.pdf#page=N`` serves it. Bounded
for hostile files: an encrypted file (other than with an empty password), a damaged one
or one without any text layer is skipped with the reason; pages past ``max_pages``, a page
whose drawing instructions exceed ``max_page_content_bytes``, text past ``max_chars`` and
pages after ``max_seconds`` are left out with a warning.
"""

from __future__ import annotations

import io
import time
from typing import TYPE_CHECKING, Any

from groove_core.loaders import Anchor, Loaded, LoadError
from groove_documents.settings import DocumentsSettings
from groove_documents.text import Budget, inline, text_line

if TYPE_CHECKING:
    from groove_core.config import Settings

#: Where PDF readers look for the header (it may follow some junk bytes).
HEADER_WINDOW = 1024


def sniff(head: bytes) -> bool:
    return b"%PDF-" in head[:HEADER_WINDOW]


def load(data: bytes, rel: str, settings: Settings) -> Loaded:
    import logging

    from pypdf import PdfReader

    cfg = settings.get(DocumentsSettings)
    # pypdf logs every repair it makes to a damaged file; the run's report says enough.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        encrypted = reader.is_encrypted
    except Exception as err:
        raise LoadError(f"damaged PDF ({_said(err)})") from None
    if encrypted and not _opens_without_password(reader):
        raise LoadError("encrypted PDF (it needs a password)")
    try:
        total = len(reader.pages)
    except Exception as err:
        raise LoadError(f"damaged PDF: its pages cannot be read ({_said(err)})") from None
    if total == 0:
        raise LoadError("PDF has no pages")
    return _pages(reader, total, cfg)


def _pages(reader: Any, total: int, cfg: DocumentsSettings) -> Loaded:
    lines: list[str] = []
    warnings: list[str] = []
    title = _title(reader)
    if title:
        lines += [f"# {title}", ""]
    anchors: list[Anchor] = []
    budget = Budget(cfg.max_chars)
    deadline = time.monotonic() + cfg.max_seconds
    read = min(total, cfg.max_pages)
    for number in range(1, read + 1):
        if time.monotonic() > deadline:
            warnings.append(
                f"stopped after page {number - 1} of {total}: over [plugin.documents] "
                f"max_seconds ({cfg.max_seconds:g})"
            )
            break
        if budget.spent:
            warnings.append(
                f"stopped after page {number - 1} of {total}: over [plugin.documents] "
                f"max_chars ({cfg.max_chars})"
            )
            break
        text = _page_text(reader, number, cfg, warnings)
        body = _paragraphs(budget.take(text))
        if not body:
            continue
        anchors.append(Anchor(len(lines) + 1, f"page={number}"))
        lines += [f"## Page {number}", "", *body, ""]
    if total > read:
        warnings.append(
            f"only the first {read} of {total} pages read ([plugin.documents] max_pages)"
        )
    if not anchors:
        if warnings:
            raise LoadError(f"no text read from the PDF: {warnings[0]}")
        raise LoadError("PDF has no text layer (scanned or image-only? OCR is not supported)")
    return Loaded("\n".join(lines), tuple(anchors), tuple(warnings))


def _page_text(reader: Any, number: int, cfg: DocumentsSettings, warnings: list[str]) -> str:
    """One page's text, or "" with a warning saying why it was left out."""
    try:
        page = reader.pages[number - 1]
        size = _content_bytes(page)
        if size > cfg.max_page_content_bytes:
            warnings.append(
                f"page {number} left out: its content is {size} bytes, over "
                f"[plugin.documents] max_page_content_bytes ({cfg.max_page_content_bytes})"
            )
            return ""
        return str(page.extract_text() or "")
    except Exception as err:
        warnings.append(f"page {number} left out: {_said(err)}")
        return ""


def _content_bytes(page: Any) -> int:
    """The size of the page's drawing instructions, decompressed (what text extraction
    walks, at about 8 s a MiB in pypdf; pypdf caps what one stream may expand to, and keeps
    the decoded data for the extraction that follows)."""
    contents = page.get("/Contents")
    if contents is None:
        return 0
    found = contents.get_object()
    parts = found if isinstance(found, list) else [found]
    return sum(len(part.get_object().get_data()) for part in parts)


def _paragraphs(text: str) -> list[str]:
    """The page's lines as Markdown, runs of blank lines folded to one."""
    out: list[str] = []
    for raw in text.splitlines():
        line = text_line(raw)
        if line or (out and out[-1]):
            out.append(line)
    while out and not out[-1]:
        out.pop()
    return out


def _title(reader: Any) -> str:
    try:
        meta = reader.metadata
        title = meta.title if meta is not None else None
    except Exception:
        return ""
    return inline(str(title))[:300] if title else ""


def _opens_without_password(reader: Any) -> bool:
    try:
        return bool(reader.decrypt(""))
    except Exception:
        return False


def _said(err: BaseException) -> str:
    first = str(err).splitlines()[0][:160] if str(err) else ""
    return f"{type(err).__name__}: {first}" if first else type(err).__name__
