"""Writers of real PDF, Word and HTML files for tests (reportlab, the ``[test]`` extra, and
python-docx), each from the same sections so a test can compare them with Markdown."""

from __future__ import annotations

import html
import io
import zipfile
from collections.abc import Callable, Sequence
from typing import IO

#: A document: its title and sections of (heading, paragraphs).
Sections = Sequence[tuple[str, Sequence[str]]]


def markdown_text(title: str, sections: Sections) -> str:
    out = [f"# {title}", ""]
    for heading, paragraphs in sections:
        out += [f"## {heading}", ""]
        for paragraph in paragraphs:
            out += [paragraph, ""]
    return "\n".join(out)


def pdf_bytes(
    pages: Sequence[Sequence[str]],
    *,
    title: str | None = None,
    password: str | None = None,
) -> bytes:
    """A PDF with a text layer: each page's lines drawn top-down (wrapped at ~90 chars)."""
    import textwrap

    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    pdf = canvas.Canvas(buf, pagesize=A4, encrypt=password, invariant=True)
    if title:
        pdf.setTitle(title)
    for lines in pages:
        y = 800
        for line in lines:
            for part in textwrap.wrap(line, 90) or [""]:
                pdf.drawString(40, y, part)
                y -= 14
            y -= 6
        pdf.showPage()
    pdf.save()
    return buf.getvalue()


def pdf_of_sections(title: str, sections: Sections) -> bytes:
    """One page per section, its heading as the page's first line."""
    return pdf_bytes([[heading, *paragraphs] for heading, paragraphs in sections], title=title)


def image_only_pdf() -> bytes:
    """A PDF page with drawing and no text layer (what a scanner makes, less the image)."""
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    pdf = canvas.Canvas(buf, invariant=True)
    pdf.rect(50, 50, 300, 400, fill=1)
    pdf.showPage()
    pdf.save()
    return buf.getvalue()


def docx_of_sections(
    title: str, sections: Sections, table: Sequence[Sequence[str]] = (), *, heading: bool = True
) -> bytes:
    """A .docx: the title as Heading 1, each section's heading as Heading 2 (none when
    ``heading`` is false or the heading is empty), its paragraphs, then ``table``."""
    import docx

    document = docx.Document()
    document.add_heading(title, level=1)
    for name, paragraphs in sections:
        if heading and name:
            document.add_heading(name, level=2)
        for paragraph in paragraphs:
            document.add_paragraph(paragraph)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, value in enumerate(row):
                grid.cell(r, c).text = value
    buf = io.BytesIO()
    document.save(buf)
    return buf.getvalue()


def html_of_sections(title: str, sections: Sections) -> str:
    body = [f"<h1>{html.escape(title)}</h1>"]
    for heading, paragraphs in sections:
        if heading:
            body.append(f"<h2>{html.escape(heading)}</h2>")
        body += [f"<p>{html.escape(p)}</p>" for p in paragraphs]
    return (
        f"<!doctype html><html><head><title>{html.escape(title)}</title>"
        "<style>p { color: red }</style><script>var hidden = 1;</script></head>"
        f"<body>{''.join(body)}</body></html>"
    )


def zip_bomb_docx(expanded: int) -> bytes:
    """A .docx-shaped zip whose document part expands to ``expanded`` bytes of zeros,
    written a MiB at a time (the test never holds it expanded)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w", force_zip64=True) as part:
            block = b"\0" * (1 << 20)
            for _ in range(expanded >> 20):
                part.write(block)
    return buf.getvalue()


def _text_page(writer: object, content: object, font: object) -> None:
    from pypdf.generic import DictionaryObject, NameObject

    page = writer.add_blank_page(300, 300)  # type: ignore[attr-defined]
    fonts = DictionaryObject({NameObject("/F1"): font})
    page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): fonts})
    page[NameObject("/Contents")] = content


def _writer_with_font() -> tuple[object, object]:
    from pypdf import PdfWriter
    from pypdf.generic import DictionaryObject, NameObject

    writer = PdfWriter()
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    return writer, writer._add_object(font)


def _stream(writer: object, data: bytes) -> object:
    from pypdf.generic import DecodedStreamObject

    stream = DecodedStreamObject()
    stream.set_data(data)
    return writer._add_object(stream)  # type: ignore[attr-defined]


def _saved(writer: object) -> bytes:
    buf = io.BytesIO()
    writer.write(buf)  # type: ignore[attr-defined]
    return buf.getvalue()


def many_pages_pdf(pages: int) -> bytes:
    """A PDF of ``pages`` pages sharing one line of text (quick to write at 10,000)."""
    writer, font = _writer_with_font()
    content = _stream(writer, b"BT /F1 12 Tf 20 150 Td (the same line on every page) Tj ET")
    for _ in range(pages):
        _text_page(writer, content, font)
    return _saved(writer)


def huge_page_pdf(content_bytes: int, other: str = "a normal page about lichens") -> bytes:
    """A PDF whose first page draws ``content_bytes`` of text instructions and whose second
    is ordinary."""
    writer, font = _writer_with_font()
    op = b"(word word word) Tj 0 -1 Td "
    huge = b"BT /F1 12 Tf 10 290 Td " + op * (content_bytes // len(op)) + b"ET"
    _text_page(writer, _stream(writer, huge), font)
    _text_page(writer, _stream(writer, f"BT /F1 12 Tf 20 150 Td ({other}) Tj ET".encode()), font)
    return _saved(writer)


def many_paragraphs_docx(paragraphs: int) -> bytes:
    """A real .docx of ``paragraphs`` paragraphs (its XML written directly: python-docx
    would take minutes to add them one by one)."""
    base = docx_of_sections("Long", [("Start", ["first paragraph"])])
    source = zipfile.ZipFile(io.BytesIO(base))
    one = "<w:p><w:r><w:t>lorem ipsum dolor sit amet, consectetur adipiscing</w:t></w:r></w:p>"
    xml = source.read("word/document.xml").decode("utf-8")
    xml = xml.replace("</w:p><w:sectPr", "</w:p>" + one * paragraphs + "<w:sectPr", 1)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for item in source.infolist():
            body = xml.encode("utf-8") if item.filename == "word/document.xml" else None
            archive.writestr(item.filename, body or source.read(item.filename))
    return buf.getvalue()


def _zeros_deflated(size: int) -> bytes:
    """``size`` zero bytes, zlib-compressed a MiB at a time (never held expanded)."""
    import zlib

    packer = zlib.compressobj(9)
    block = b"\0" * (1 << 20)
    out = [packer.compress(block) for _ in range(size >> 20)]
    out.append(packer.compress(b"\0" * (size & ((1 << 20) - 1))))
    out.append(packer.flush())
    return b"".join(out)


def flate_bomb_pdf(
    pages: int,
    inflated: int,
    *,
    streams: int = 1,
    other: str = "a normal page about lichens",
    lead: str | None = None,
) -> bytes:
    """A PDF of ``pages`` pages whose content is ``streams`` FlateDecode streams each
    expanding to ``inflated`` zero bytes (a stream bomb: about a thousandth of that in the
    file, each stream an object of its own), then one ordinary page (``lead``: one before
    them too). Written by hand: a PDF writer would decode what it is given."""
    bomb = _zeros_deflated(inflated)
    objects: list[bytes] = [b"", b"", b""]  # catalog, page tree, font: filled in below
    kids = []

    def ordinary(text: str) -> None:
        shown = b"BT /F1 12 Tf 20 150 Td (" + text.encode("latin-1") + b") Tj ET"
        objects.append(b"<< /Length %d >>\nstream\n" % len(shown) + shown + b"\nendstream")
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 300] /Resources << /Font "
            b"<< /F1 3 0 R >> >> /Contents %d 0 R >>" % len(objects)
        )
        kids.append(b"%d 0 R" % len(objects))

    if lead is not None:
        ordinary(lead)
    for _ in range(pages):
        refs = []
        for _ in range(streams):
            objects.append(
                b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(bomb)
                + bomb
                + b"\nendstream"
            )
            refs.append(b"%d 0 R" % len(objects))
        contents = b"[" + b" ".join(refs) + b"]" if streams > 1 else refs[0]
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 300] /Resources << /Font "
            b"<< /F1 3 0 R >> >> /Contents " + contents + b" >>"
        )
        kids.append(b"%d 0 R" % len(objects))
    ordinary(other)
    objects[0] = b"<< /Type /Catalog /Pages 2 0 R >>"
    objects[1] = b"<< /Type /Pages /Kids [" + b" ".join(kids) + b"] /Count %d >>" % len(kids)
    objects[2] = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def xml_flood_docx(paragraphs: int, text: str = "xyz") -> bytes:
    """A real .docx whose body is ``paragraphs`` tiny paragraphs of ``text``: at 2.2
    million, 99 MB of XML in a file of about 300 KB (written a piece at a time)."""
    one = f"<w:p><w:r><w:t>{text}</w:t></w:r></w:p>".encode()

    def flood(part: IO[bytes]) -> None:
        for start in range(0, paragraphs, 10_000):
            part.write(one * min(10_000, paragraphs - start))

    return _docx_with_body("Flood", flood, zip64=True)


def _docx_with_body(title: str, fill: Callable[[IO[bytes]], None], *, zip64: bool = False) -> bytes:
    """A real .docx of one section whose ``word/document.xml`` gets what ``fill`` writes
    before its section properties, written a piece at a time (``zip64`` for one whose XML
    may pass 4 GiB's headers' limits)."""
    base = docx_of_sections(title, [("Start", ["first paragraph"])])
    source = zipfile.ZipFile(io.BytesIO(base))
    head, rest = source.read("word/document.xml").split(b"<w:sectPr", 1)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for item in source.infolist():
            if item.filename != "word/document.xml":
                archive.writestr(item.filename, source.read(item.filename))
                continue
            with archive.open("word/document.xml", "w", force_zip64=zip64) as part:
                part.write(head)
                fill(part)
                part.write(b"<w:sectPr" + rest)
    return buf.getvalue()


def lying_docx(inflated: int, declared: int = 4096) -> bytes:
    """A .docx whose ``word/document.xml`` says (in the zip's headers) it expands to
    ``declared`` bytes and expands to ``inflated`` (its XML, then zero bytes): a bomb the
    zip's directory does not show (200 MB in a file of 200 KB)."""
    import struct

    block = b"\0" * (1 << 20)

    def zeros(part: IO[bytes]) -> None:
        for _ in range(inflated >> 20):
            part.write(block)

    data = bytearray(_docx_with_body("Lies", zeros))
    name = b"word/document.xml"
    # The uncompressed size: 22 bytes into a local header, 24 into a central directory's.
    for signature, name_at, size_at in ((b"PK\x03\x04", 30, 22), (b"PK\x01\x02", 46, 24)):
        at = data.find(signature)
        while at >= 0:
            if data[at + name_at : at + name_at + len(name)] == name:
                struct.pack_into("<I", data, at + size_at, declared)
            at = data.find(signature, at + 4)
    return bytes(data)
