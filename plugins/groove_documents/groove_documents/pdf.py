"""PDF: the text layer of each page, read with pypdf (BSD; ADR-0016), one section a page.

Each page with text becomes a ``## Page N`` section whose start is the anchor ``page=N``:
a hit's heading path names its page, and ``get report.pdf#page=N`` serves it. Bounded
for hostile files: an encrypted file (other than with an empty password), a damaged one
or one without any text layer is skipped with the reason; pages past ``max_pages``, a page
whose drawing instructions exceed ``max_page_content_bytes``, text past ``max_chars`` and
pages after ``max_seconds`` or ``max_document_content_bytes`` are left out with a warning.

A page's drawing instructions (its content streams, and the forms it draws, once per time
it draws them: what text extraction walks) are decoded here, within the page's budget and
a piece at a time (``streams``): a FlateDecode bomb costs the budget, not its expanded
size. pypdf is handed the decoded data for the page's extraction and lets go of it after,
so nothing decoded outlives its page.
"""

from __future__ import annotations

import io
import re
import time
from typing import TYPE_CHECKING, Any

from groove_core.loaders import Anchor, Loaded, LoadError
from groove_documents.settings import DocumentsSettings
from groove_documents.streams import Over, Unreadable, decoded
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
    decoded_left = cfg.max_document_content_bytes
    read = min(total, cfg.max_pages)
    for number in range(1, read + 1):
        over = (
            ("max_seconds", f"{cfg.max_seconds:g}")
            if time.monotonic() > deadline
            else ("max_chars", str(cfg.max_chars))
            if budget.spent
            else ("max_document_content_bytes", str(cfg.max_document_content_bytes))
            if decoded_left <= 0
            else None
        )
        if over:
            warnings.append(
                f"stopped after page {number - 1} of {total}: over [plugin.documents] "
                f"{over[0]} ({over[1]})"
            )
            break
        content = _Content(reader, number, min(cfg.max_page_content_bytes, decoded_left))
        text = _page_text(content, cfg, warnings)
        decoded_left -= content.cost
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


def _page_text(content: _Content, cfg: DocumentsSettings, warnings: list[str]) -> str:
    """One page's text, or "" with a warning saying why it was left out."""
    number = content.number
    try:
        content.decode()
    except Over:
        limit = cfg.max_page_content_bytes
        if content.cap < limit:  # what is left of the document's budget ran out
            warnings.append(
                f"page {number} left out: its content is over what is left of "
                "[plugin.documents] max_document_content_bytes "
                f"({cfg.max_document_content_bytes})"
            )
        elif content.exact:
            warnings.append(
                f"page {number} left out: its content is {content.size} bytes, over "
                f"[plugin.documents] max_page_content_bytes ({limit})"
            )
        else:
            warnings.append(
                f"page {number} left out: its content is over [plugin.documents] "
                f"max_page_content_bytes ({limit}), decoded no further"
            )
        return ""
    except Unreadable as err:
        warnings.append(f"page {number} left out: {err}")
        return ""
    except Exception as err:
        warnings.append(f"page {number} left out: {_said(err)}")
        return ""
    try:
        with content.handed_to_pypdf():
            return str(content.page.extract_text() or "")
    except Exception as err:
        warnings.append(f"page {number} left out: {_said(err)}")
        return ""


#: A form (or image) drawn by a content stream: its name, then the ``Do`` operator.
_DRAWN = re.compile(rb"/([^\s/\[\]()<>{}%]+)\s*Do(?![^\s/\[\]()<>{}%])")
_NAME_ESCAPE = re.compile(rb"#([0-9A-Fa-f]{2})")


class _Content:
    """A page's drawing instructions, decoded within ``cap`` bytes: its content streams,
    and each form they draw, counted once per time it is drawn (what pypdf's text
    extraction walks, at about 8 s a MiB). ``cost``: the bytes decoded to find out."""

    def __init__(self, reader: Any, number: int, cap: int) -> None:
        self.reader = reader
        self.number = number
        self.cap = cap
        self.page: Any = None
        self.size = 0  # bytes walked so far
        self.cost = 0  # bytes decoded, the page's budget spent (Over counts the whole cap)
        self.exact = True  # ``size`` is the full size (no stream stopped at the cap)
        self.data: dict[int, tuple[Any, bytes]] = {}  # id(stream): the stream, its data
        self.walked: dict[int, int] = {}  # id(form): bytes walked when it is drawn

    def decode(self) -> None:
        from pypdf.generic import StreamObject

        self.page = self.reader.pages[self.number - 1]
        contents = self.page.get("/Contents")
        if contents is None:
            return
        found = contents.get_object()
        parts = found if isinstance(found, list) else [found]
        streams = [p.get_object() for p in parts]
        streams = [s for s in streams if isinstance(s, StreamObject)]
        if all("/Filter" not in s for s in streams):
            raw = sum(len(s._data) for s in streams)
            if raw > self.cap:  # known without decoding anything: say it exactly
                self.size, self.cost = raw, self.cap
                raise Over
        for stream in streams:
            self._add(len(self._data(stream)))
        resources = self.page.get("/Resources")
        for stream in streams:
            self._add(self._drawn(self.data[id(stream)][1], resources, set()))

    def _add(self, size: int) -> None:
        self.size += size
        if self.size > self.cap:
            self.exact = False
            self.cost = self.cap
            raise Over

    def _data(self, stream: Any) -> bytes:
        """The stream's data, decoded once, within what the page has left."""
        known = self.data.get(id(stream))
        if known is not None:
            return known[1]
        raw_size = len(stream._data)
        if "/Filter" not in stream and self.size + raw_size > self.cap:
            self.exact = False  # the streams after this one are not counted
            self.cost = self.cap
            raise Over
        try:
            data = decoded(stream, self.cap - self.size)
        except Over:
            self.exact = False
            self.cost = self.cap
            raise
        self.cost += len(data)
        self.data[id(stream)] = (stream, data)
        return data

    def _drawn(self, data: bytes, resources: Any, open_forms: set[int]) -> int:
        """Bytes walked for the forms ``data`` draws (each time it draws one), with the
        forms those draw; a form drawing itself is walked once (as pypdf does)."""
        xobjects = _get(resources, "/XObject")
        if xobjects is None:
            return 0
        walked = 0
        for match in _DRAWN.finditer(data):
            form = _form(xobjects, match.group(1))
            if form is None or id(form) in open_forms:
                continue
            walked += self._walk(form, open_forms)
            if self.size + walked > self.cap:
                self._add(walked)
        return walked

    def _walk(self, form: Any, open_forms: set[int]) -> int:
        known = self.walked.get(id(form))
        if known is not None:
            return known
        own = self._data(form)
        self.size += len(own)  # its bytes count against the page while its forms are read
        try:
            inner = 0
            resources = form.get("/Resources")
            if resources is not None:  # pypdf reads no text from a form without resources
                inner = self._drawn(own, resources, open_forms | {id(form)})
        finally:
            self.size -= len(own)
        self.walked[id(form)] = len(own) + inner
        return len(own) + inner

    def handed_to_pypdf(self) -> Any:
        """While extracting: pypdf reads each decoded stream from here (its cache of the
        stream's decoded data), and forgets it after."""
        from contextlib import contextmanager

        from pypdf.generic import DecodedStreamObject

        @contextmanager
        def handed() -> Any:
            lent = []
            for stream, data in self.data.values():
                if hasattr(stream, "decoded_self") and stream.decoded_self is None:
                    copy = DecodedStreamObject()
                    copy.set_data(data)
                    stream.decoded_self = copy
                    lent.append(stream)
            try:
                yield
            finally:
                for stream in lent:
                    stream.decoded_self = None
                self.data.clear()
                _forget_forms(self.page.get("/Resources"))

        return handed()


def _forget_forms(resources: Any) -> None:
    """Drop what pypdf decoded and kept of the page's forms on its own (one the scan for
    ``Do`` missed): nothing decoded outlives its page."""
    xobjects = _get(resources, "/XObject")
    if xobjects is None:
        return
    try:
        for value in xobjects.values():
            form = value.get_object()
            if getattr(form, "decoded_self", None) is not None:
                form.decoded_self = None
    except Exception:
        return


def _get(dictionary: Any, key: str) -> Any:
    try:
        value = dictionary.get_object().get(key) if dictionary is not None else None
        return value.get_object() if value is not None else None
    except Exception:
        return None


def _form(xobjects: Any, raw_name: bytes) -> Any:
    """The form XObject ``/NAME`` names (None for an image or a name not there)."""
    from pypdf.generic import StreamObject

    name = _NAME_ESCAPE.sub(lambda m: bytes([int(m.group(1), 16)]), raw_name)
    for encoding in ("utf-8", "latin-1"):
        try:
            found = xobjects.get("/" + name.decode(encoding))
        except (UnicodeDecodeError, AttributeError):
            continue
        if found is not None:
            found = found.get_object()
            if isinstance(found, StreamObject) and found.get("/Subtype") == "/Form":
                return found
            return None
    return None


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
