"""The ``documents`` plugin: loaders for PDF, Word (.docx) and HTML (``[plugin.documents]``).

Registered through the ``groove`` entry point ``documents``. Light at import: pypdf (and
each loader's module) is imported by the loader that needs it, when a file of its type is
read, so ``groove --help`` and searches never pay for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from groove_core.config import ConfigSection
from groove_core.hookspecs import hookimpl
from groove_core.loaders import Loaded, LoaderSpec
from groove_documents.settings import DocumentsSettings, Kind

if TYPE_CHECKING:
    from collections.abc import Callable

    from groove_core.config import Settings

NAME = "documents"
#: Bump a loader's version whenever the text it produces changes: indexed files of its
#: type are then read again (the loader's identity is recorded with each file).
VERSION = "1"
#: 2: the text after an XML entity or comment inside a run is kept (it was dropped).
DOCX_VERSION = "2"
#: 2: a page whose <meta charset> names no character set is read as UTF-8 (it was
#: skipped); unclosed markup ends the text where HTML's own rules end it.
HTML_VERSION = "2"
EXTENSIONS: dict[Kind, tuple[str, ...]] = {
    "pdf": (".pdf",),
    "docx": (".docx",),
    "html": (".html", ".htm"),
}


def _claims(kind: Kind) -> Callable[[Settings], tuple[str, ...]]:
    def extensions(settings: Settings) -> tuple[str, ...]:
        wanted = settings.get(DocumentsSettings).types
        return EXTENSIONS[kind] if kind in wanted else ()

    return extensions


def _pdf(data: bytes, rel: str, settings: Settings) -> Loaded:
    from groove_documents import pdf

    return pdf.load(data, rel, settings)


def _docx(data: bytes, rel: str, settings: Settings) -> Loaded:
    from groove_documents import word

    return word.load(data, rel, settings)


def _html(data: bytes, rel: str, settings: Settings) -> Loaded:
    from groove_documents import web

    return web.load(data, rel, settings)


def _sniff_pdf(head: bytes) -> bool:
    from groove_documents import pdf

    return pdf.sniff(head)


def _sniff_docx(head: bytes) -> bool:
    from groove_documents import word

    return word.sniff(head)


def _sniff_html(head: bytes) -> bool:
    from groove_documents import web

    return web.sniff(head)


@hookimpl
def groove_config_sections() -> list[ConfigSection]:
    return [ConfigSection(f"plugin.{NAME}", DocumentsSettings)]


@hookimpl
def groove_loaders() -> list[LoaderSpec]:
    return [
        LoaderSpec("pdf", VERSION, _claims("pdf"), _pdf, _sniff_pdf, "PDF text layer (pypdf)"),
        LoaderSpec(
            "docx", DOCX_VERSION, _claims("docx"), _docx, _sniff_docx, "Word (expat, streamed)"
        ),
        LoaderSpec("html", HTML_VERSION, _claims("html"), _html, _sniff_html, "HTML (html.parser)"),
    ]
