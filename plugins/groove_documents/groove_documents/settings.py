"""``[plugin.documents]``: which types are read, and the caps that bound a hostile file."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Kind = Literal["pdf", "docx", "html"]


class DocumentsSettings(BaseModel):
    """PDF, Word and HTML loaders (plugin groove_documents)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    types: tuple[Kind, ...] = Field(
        ("pdf", "docx", "html"),
        description="the file types read (pdf: .pdf, docx: .docx, html: .html and .htm)",
    )
    max_pages: int = Field(
        1000, ge=1, description="PDF pages read at most; the rest is left out with a warning"
    )
    max_page_content_bytes: int = Field(
        512 * 1024,
        ge=1024,
        description="a PDF page whose drawing instructions are larger is left out with a "
        "warning (one huge page must not stall a run)",
    )
    max_document_content_bytes: int = Field(
        64 * 1024 * 1024,
        ge=1024 * 1024,
        description="a PDF's pages' drawing instructions decoded at most, all pages together "
        "(those left out included); the pages after are left out with a warning",
    )
    max_chars: int = Field(
        5_000_000,
        ge=1000,
        description="characters of text kept per file; the rest is left out with a warning",
    )
    max_unzipped_bytes: int = Field(
        100 * 1024 * 1024,
        ge=1024 * 1024,
        description="a .docx whose parts expand to more is skipped (a zip bomb)",
    )
    max_depth: int = Field(
        256, ge=8, description="HTML element nesting followed; deeper markup is read as text"
    )
    max_seconds: float = Field(
        30.0,
        gt=0,
        description="seconds spent reading one PDF, DOCX or HTML file; what follows is left "
        "out with a warning",
    )
