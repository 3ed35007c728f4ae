"""A candidate leg ranking chunks of documents whose title contains the query's phrases.

It declares itself a ``lexical`` leg (it matches the query's words), so the core's fusion
rules, ``low_confidence``, ``groove tune`` and ``eval --ablate`` treat it as they treat the
built-in lexical legs."""

from __future__ import annotations

import unicodedata

from pydantic import BaseModel, ConfigDict, Field

from groove_core.config import ConfigSection
from groove_core.context import LegSpec, QueryContext, StageSwitch
from groove_core.hookspecs import hookimpl
from groove_core.models import LegHit, LegResult

NAME = "titles"


class TitleLegSettings(BaseModel):
    """``[plugin.titles]`` in groove.toml."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled_by_default: bool = Field(False, description="run unless a query turns it off")
    max_documents: int = Field(10, ge=1, le=1000, description="title matches that count")


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


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
    return [LegSpec(NAME, "lexical", search, score="similarity")]


def search(ctx: QueryContext) -> LegResult | None:
    if not ctx.active(NAME) or not ctx.query.positives:
        return None
    settings = ctx.settings.get(TitleLegSettings)
    phrases = [_fold(p) for p in ctx.query.positives]
    scored = []
    for doc in ctx.store.documents():
        title = _fold(doc.title)
        matched = sum(1 for p in phrases if p in title)
        if matched:
            scored.append((-matched, doc.path, doc.doc_id))
    scored.sort()
    allowed, excluded = ctx.allowed_ids(), ctx.excluded_ids()
    hits: list[LegHit] = []
    for negative_matches, _path, doc_id in scored[: settings.max_documents]:
        for chunk in ctx.store.document_chunks(doc_id):
            cid = chunk.chunk_id
            if cid in excluded or (allowed is not None and cid not in allowed):
                continue
            hits.append(LegHit(cid, float(-negative_matches)))
    return LegResult(NAME, tuple(hits[: ctx.leg_size]))
