"""The ``parent`` plugin: stage 4 of the pipeline, parent-retriever expansion.

Registered through the ``groove`` entry point ``parent``; it owns
``[search.parent_retriever]`` and the ``parent`` switch. It only rewrites the content of
hits already chosen: it never asks for a wider pool and never reorders, so recall, MRR
and nDCG cannot move. Inactive (config off and no ``--parent``), the stage returns
``None`` and the output is bit-identical to a groove without this plugin.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from groove_core.config import ConfigSection
from groove_core.context import StageSwitch
from groove_core.hookspecs import hookimpl
from groove_parent.expand import Piece, expand, pieces

if TYPE_CHECKING:
    from groove_core.context import QueryContext
    from groove_core.models import SearchHit

NAME = "parent"


class ParentSettings(BaseModel):
    """Parent-retriever expansion (plugin groove_parent)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(False, description="expand small hits (needs groove-parent)")
    whole_doc_threshold_tokens: int = Field(
        100, ge=0, description="a hit under this many tokens returns its whole document"
    )
    max_expanded_tokens: int = Field(
        2000, ge=1, description="cap on the tokens of an expanded hit's content"
    )


@hookimpl
def groove_config_sections() -> list[ConfigSection]:
    return [ConfigSection("search.parent_retriever", ParentSettings)]


@hookimpl
def groove_stage_switches() -> list[StageSwitch]:
    return [
        StageSwitch(
            NAME,
            "search.parent_retriever.enabled",
            "Expand small hits with their document or sibling sections for this query",
        )
    ]


@hookimpl
def groove_expand(ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit] | None:
    if not ctx.active(NAME):
        return None
    settings = ctx.settings.get(ParentSettings)
    docs: dict[int, list[Piece]] = {}
    out = []
    for hit in hits:
        if hit.doc_id not in docs:
            docs[hit.doc_id] = _document(ctx, hit.doc_id)
        out.append(
            _expanded(
                hit,
                docs[hit.doc_id],
                whole_doc_threshold=settings.whole_doc_threshold_tokens,
                cap=settings.max_expanded_tokens,
            )
        )
    return out


def _document(ctx: QueryContext, doc_id: int) -> list[Piece]:
    """A document's chunks in order, read once per query however many hits it has."""
    return pieces(ctx.store.document_chunks(doc_id))


def _expanded(hit: SearchHit, doc: list[Piece], *, whole_doc_threshold: int, cap: int) -> SearchHit:
    """The hit with merged content and ``expanded_from``, or the hit itself when nothing
    fits (score, rank, path and line range always stay those of the matched chunk)."""
    index = next((i for i, p in enumerate(doc) if p.chunk_id == hit.chunk_id), None)
    if index is None:  # the chunk left the index between fusion and now
        return hit
    merged = expand(doc, index, whole_doc_threshold=whole_doc_threshold, cap=cap)
    if merged is None:
        return hit
    content, ranges = merged
    return replace(hit, content=content, expanded_from=ranges)
