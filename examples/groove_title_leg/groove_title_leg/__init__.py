"""A candidate leg ranking chunks of documents whose title contains the query's phrases.

It declares itself a ``lexical`` leg (it matches the query's words), so the core's fusion
rules, ``low_confidence``, ``groove tune`` and ``eval --ablate`` treat it as they treat the
built-in lexical legs.

It keeps an index of its own (``groove_core.leg_index``): the folded title of every
document and the document of every chunk, on SQLite (:mod:`groove_title_leg.sqlite`) and
on PostgreSQL (:mod:`groove_title_leg.postgres`). The indexer writes it with every
document; a backend without an implementation leaves the leg to scan the documents'
titles through the storage contract instead (slower, the same answers).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from groove_core.config import ConfigSection
from groove_core.context import LegSpec, QueryContext, StageSwitch
from groove_core.hookspecs import hookimpl
from groove_core.leg_index import LegIndexSpec
from groove_core.models import LegHit, LegResult
from groove_title_leg.common import VERSION, fold

NAME = "titles"


class TitleLegSettings(BaseModel):
    """``[plugin.titles]`` in groove.toml."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled_by_default: bool = Field(False, description="run unless a query turns it off")
    max_documents: int = Field(10, ge=1, le=1000, description="title matches that count")


def _sqlite(conn: Any) -> Any:
    from groove_title_leg.sqlite import title_index

    return title_index(conn)


def _postgres(site: Any) -> Any:
    from groove_title_leg.postgres import title_index  # psycopg only for PostgreSQL users

    return title_index(site)


#: The leg's index: its name is what ``ctx.store.leg_index`` is asked for.
INDEX = LegIndexSpec(NAME, VERSION, {"sqlite": _sqlite, "postgres": _postgres})


@hookimpl
def groove_config_sections() -> list[ConfigSection]:
    return [ConfigSection(f"plugin.{NAME}", TitleLegSettings)]


@hookimpl
def groove_stage_switches() -> list[StageSwitch]:
    # --titles/--no-titles and the MCP "titles" parameter, defaulting to the setting.
    setting = f"plugin.{NAME}.enabled_by_default"
    return [StageSwitch(NAME, setting, "Also rank documents whose title matches the query")]


@hookimpl
def groove_legs() -> list[LegSpec]:
    # raw_score: how many of the query's phrases the title holds (more is better)
    return [LegSpec(NAME, "lexical", search, score="similarity", index=INDEX)]


def search(ctx: QueryContext) -> LegResult | None:
    if not ctx.active(NAME) or not ctx.query.positives:
        return None
    settings = ctx.settings.get(TitleLegSettings)
    phrases = [fold(p) for p in ctx.query.positives]
    index = ctx.store.leg_index(NAME)
    if index is not None:
        found = index.documents(phrases, settings.max_documents)
        chunks = {doc_id: index.chunks(doc_id) for doc_id, _ in found}
        meta = {"index": True, "documents": len(found)}
    else:
        found, chunks = _scan(ctx, phrases, settings.max_documents)
        meta = {"index": False, "documents": len(found)}
    allowed, excluded = ctx.allowed_ids(), ctx.excluded_ids()
    hits: list[LegHit] = []
    for doc_id, matched in found:
        for cid in chunks[doc_id]:
            if cid in excluded or (allowed is not None and cid not in allowed):
                continue
            hits.append(LegHit(cid, float(matched)))
    return LegResult(NAME, tuple(hits[: ctx.leg_size]), meta)


def _scan(
    ctx: QueryContext, phrases: list[str], limit: int
) -> tuple[list[tuple[int, int]], dict[int, list[int]]]:
    """Without an index of its own (a backend it has none for): every document's title,
    read through the storage contract."""
    scored = []
    for doc in ctx.store.documents():
        title = fold(doc.title)
        matched = sum(1 for p in phrases if p in title)
        if matched:
            scored.append((-matched, doc.path, doc.doc_id))
    scored.sort()
    found = [(doc_id, -negative) for negative, _path, doc_id in scored[:limit]]
    chunks = {
        doc_id: [c.chunk_id for c in ctx.store.document_chunks(doc_id)] for doc_id, _ in found
    }
    return found, chunks
