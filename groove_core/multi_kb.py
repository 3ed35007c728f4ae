"""Searching several knowledge bases at once, and merging their results into one ranking.

Each KB runs its own whole pipeline (its config, plugins and index). The merge then fuses
all KBs' legs as one KB's fusion would: every leg's candidates from every KB are put in
one ranking by the leg's own score (the order each KB's leg already uses), and each KB's
final hits are scored again in those merged legs, with the leg weights their own KB gave
them: by their raw scores' share of the best any KB's leg found when every KB fuses by
scores (the default; the scores are then on one KB's scale), else by their merged ranks
(reciprocal rank fusion). Vector distances from one embedder are comparable across KBs, which
is why every KB searched together must use the same embedder; bm25 scores come from each
KB's own term statistics, close enough to rank by. Searching two KBs then ranks nearly as
one index holding both would (docs/several-kbs.md has the figures); a merge of the final
lists by rank alone cannot, as it interleaves the KBs whatever the query is about.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from groove_core.config import ConfigError
from groove_core.search_request import SearchArgs, SearchRequest

if TYPE_CHECKING:
    from groove_core.app import Groove
    from groove_core.context import QueryContext
    from groove_core.models import LegResult, ScoreScale, SearchHit, SearchResponse


@dataclass(frozen=True)
class NamedKb:
    """A KB as results, the MCP tools and ``index_status`` name it (see :meth:`of`)."""

    name: str
    app: Groove
    description: str = ""

    @classmethod
    def of(cls, app: Groove) -> NamedKb:
        """``app`` under the one rule for a KB's name: its registered name, else ``[kb]
        name``, else its folder's name; its description likewise from groove.toml first."""
        from groove_core.registry import registered_entry

        entry = registered_entry(app.kb)
        description = app.config.kb.description or (entry.description if entry else "")
        return cls(app.public_name, app, description)


def open_kbs(folders: Sequence[Path], config_path: Path | None = None) -> list[NamedKb]:
    """Each folder as a named KB (:meth:`NamedKb.of`); two with one name are refused."""
    from groove_core.app import Groove

    if config_path is not None and len(folders) > 1:
        raise ConfigError("--config names one KB's file; with several KBs each uses its own")
    kbs: list[NamedKb] = []
    seen: dict[str, Path] = {}
    for folder in dict.fromkeys(f.expanduser().resolve() for f in folders):
        kb = NamedKb.of(Groove.open(folder, config_path))
        if kb.name in seen:
            raise ConfigError(
                f"two knowledge bases are both called {kb.name!r} ({seen[kb.name]} and "
                f"{folder}): register one under another name ('groove kb add') or set [kb] name"
            )
        seen[kb.name] = folder
        kbs.append(kb)
    return kbs


def check_same_embedder(kbs: Sequence[NamedKb]) -> None:
    """Vector distances only compare within one embedder: refuse to mix them."""
    identities = {kb.name: kb.app.embedder.identity for kb in kbs}
    if len(set(identities.values())) > 1:
        listed = "; ".join(f"{name}: {ident}" for name, ident in identities.items())
        raise ConfigError(
            "knowledge bases searched together must use the same embedder, and these differ "
            f"({listed}); search them one at a time, or re-index with one embedder "
            "('groove index --reembed')"
        )


@dataclass(frozen=True)
class KbHit:
    kb: str
    hit: SearchHit

    def to_json(self) -> dict[str, Any]:
        return {"kb": self.kb, **self.hit.to_json()}


@dataclass(frozen=True)
class KbRun:
    """One KB's own search, before the merge: what ``--explain`` shows for it."""

    kb: str
    response: SearchResponse
    legs: list[LegResult]
    ctx: QueryContext


@dataclass(frozen=True)
class MultiKbResponse:
    results: tuple[KbHit, ...]
    low_confidence: bool
    filter_applied: dict[str, Any] | None
    warnings: tuple[str, ...]
    runs: tuple[KbRun, ...] = field(default=(), compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "results": [h.to_json() for h in self.results],
            "low_confidence": self.low_confidence,
            "filter_applied": self.filter_applied,
            "warnings": list(self.warnings),
        }


def searchable(kbs: Sequence[NamedKb]) -> tuple[list[NamedKb], list[str]]:
    """(the KBs that can be searched together, a warning for each one left out): those of
    the embedder most of them use (the first one's on a tie), as vector distances compare
    only within one embedder."""
    identities = {kb.name: kb.app.embedder.identity for kb in kbs}
    counts: dict[str, int] = {}
    for identity in identities.values():
        counts[identity] = counts.get(identity, 0) + 1
    chosen = max(counts, key=lambda i: (counts[i], -list(identities.values()).index(i)))
    left = [
        f"{name}: not searched: it uses another embedder ({identity}, not {chosen}); search "
        "it alone, or re-index it with this one ('groove index --reembed')"
        for name, identity in identities.items()
        if identity != chosen
    ]
    return [kb for kb in kbs if identities[kb.name] == chosen], left


def search_kbs(
    kbs: Sequence[NamedKb], query: str | SearchRequest, **args: Unpack[SearchArgs]
) -> MultiKbResponse:
    """Search every KB and merge (see the module docstring); ``limit`` results in all.

    A KB that cannot be searched with the others (another embedder, no index yet, an index
    that cannot be read) is left out with a warning naming it, as long as one can be; a
    query that cannot run is an error for all (they share it)."""
    from groove_core.storage import StoreError

    request = SearchRequest.of(query, **args)
    chosen, left_out = searchable(kbs)
    runs, searched = [], []
    for kb in chosen:
        # Each KB's errors name its own files; say which KB they come from.
        try:
            runs.append(kb.app.search_explained(request))
            searched.append(kb)
        except StoreError as err:
            left_out.append(f"{kb.name}: not searched: {err}")
        except ConfigError as err:
            raise ConfigError(f"{kb.name}: {err}") from None
    if not runs:
        raise ConfigError("no knowledge base could be searched: " + "; ".join(left_out))
    kbs = searched
    limit = request.limit
    wanted = limit if limit is not None else kbs[0].app.config.search.default_limit
    responses = [r[0] for r in runs]
    merged = merge(
        [kb.name for kb in kbs],
        responses,
        [r[1] for r in runs],
        [kb.app.config.search.fusion.rrf_k for kb in kbs],
        _scales(kbs),
    )
    nested = overlaps(kbs)
    if nested:
        merged = _once_per_file(kbs, merged)
    merged = merged[:wanted]
    return MultiKbResponse(
        results=tuple(
            KbHit(name, replace(hit, rank=rank)) for rank, (name, hit) in enumerate(merged, 1)
        ),
        low_confidence=all(r.low_confidence for r in responses),
        filter_applied=responses[0].filter_applied,
        warnings=(
            *left_out,
            *(f"{kb.name}: {w}" for kb, r in zip(kbs, responses, strict=True) for w in r.warnings),
            *nested,
        ),
        runs=tuple(KbRun(kb.name, *run) for kb, run in zip(kbs, runs, strict=True)),
    )


def _scales(kbs: Sequence[NamedKb]) -> dict[str, ScoreScale] | None:
    """Leg name -> score scale when every KB fuses by scores (then the merge does too),
    else None (the merge is RRF's)."""
    from groove_core.fusion import leg_scales

    if any(kb.app.config.search.fusion.method != "scores" for kb in kbs):
        return None
    scales: dict[str, ScoreScale] = {}
    for kb in kbs:
        for name, scale in leg_scales(kb.app.plugins.leg_specs()).items():
            scales.setdefault(name, scale)
    return scales


def overlaps(kbs: Sequence[NamedKb]) -> list[str]:
    """One warning per KB whose folder lies inside another's: their files are indexed in
    both, and the outer one would otherwise answer for the inner one with its copies."""
    folders = [kb.app.kb.resolve() for kb in kbs]
    found = []
    for outer, outer_folder in zip(kbs, folders, strict=True):
        for inner, inner_folder in zip(kbs, folders, strict=True):
            if inner is not outer and inner_folder.is_relative_to(outer_folder):
                found.append(
                    f"knowledge base {outer.name!r} ({outer_folder}) contains {inner.name!r} "
                    f"({inner_folder}): a file indexed in both is listed once, from {inner.name!r}"
                )
    return found


def _once_per_file(
    kbs: Sequence[NamedKb], merged: list[tuple[str, SearchHit]]
) -> list[tuple[str, SearchHit]]:
    """``merged`` with each passage of a file listed once (by the file's real path and
    lines), at its best rank, from the innermost KB that holds it: the more specific one,
    under whose name a user knows it."""
    folders = {kb.name: kb.app.kb.resolve() for kb in kbs}
    slots: dict[tuple[Path, int, int], int] = {}
    out: list[tuple[str, SearchHit]] = []
    for name, hit in merged:
        key = (folders[name] / hit.path, hit.line_start, hit.line_end)
        if key not in slots:
            slots[key] = len(out)
            out.append((name, hit))
        elif len(folders[name].parts) > len(folders[out[slots[key]][0]].parts):
            out[slots[key]] = (name, hit)
    return out


def merge(
    names: Sequence[str],
    responses: Sequence[SearchResponse],
    legs: Sequence[Sequence[LegResult]],
    rrf_k: Sequence[float],
    scales: Mapping[str, ScoreScale] | None = None,
) -> list[tuple[str, SearchHit]]:
    """Every KB's final hits in one ranking, best first (see the module docstring); ties
    keep a stable order. Each hit is scored over its legs with the weights its own KB gave
    them: by RRF over its ranks in the merged legs, or, with ``scales`` (every KB fuses by
    scores: leg name -> score scale), as one KB's score fusion scores it, its raw score's
    share of the best any KB's leg of that name found, so that the scores are on one KB's
    scale (``--min-score`` means the same with one KB or several)."""
    ranks = _merged_leg_ranks(legs)
    best = _merged_bests(legs, scales) if scales is not None else {}
    scored = []
    for i, response in enumerate(responses):
        weights = {leg.name: float(leg.meta.get("weight", 1.0)) for leg in legs[i]}
        for local, hit in enumerate(response.results):
            score, top = 0.0, 10**9
            for leg_name, (_, raw) in hit.legs.items():
                weight = weights.get(leg_name, 1.0)
                rank = ranks.get((leg_name, i, hit.chunk_id))
                if rank is None or weight <= 0:
                    continue
                if scales is not None:
                    bound = best.get(leg_name)
                    score += weight * _share(raw, rank, rrf_k[i], scales.get(leg_name), bound)
                else:
                    score += weight / (rrf_k[i] + rank)
                top = min(top, rank)
            scored.append((-score, top, local, i, names[i], replace(hit, score=score)))
    scored.sort(key=lambda item: item[:4])
    return [(name, hit) for *_, name, hit in scored]


def _merged_bests(
    legs: Sequence[Sequence[LegResult]], scales: Mapping[str, ScoreScale]
) -> dict[str, tuple[float, float]]:
    """Leg name -> (the best value any KB's leg of that name found, the scale's floor), on
    the leg's scale (larger is better: ``groove_core.fusion.score_value``); a leg on the
    rank scale, or with no value above its floor, is left out (its order ranks it)."""
    from groove_core.fusion import score_value

    out: dict[str, tuple[float, float]] = {}
    for kb_legs in legs:
        for leg in kb_legs:
            scale = scales.get(leg.name, "rank")
            if scale == "rank":
                continue
            # A KB's leg weighted 0 still sets the best: one index holding both KBs would
            # hold those matches too (an English query matching a Japanese page's
            # identifier), and leaving them out let the other KB's stray matches take
            # whole shares (Vue EN->JA beside an English vault: 0.324 -> 0.206 nDCG@10).
            for hit in leg.hits:
                value, floor = score_value(hit.raw_score, scale)
                top = out.get(leg.name, (floor, floor))[0]
                if math.isfinite(value) and value > top:
                    out[leg.name] = (value, floor)
    return out


def _share(
    raw: float,
    rank: int,
    k: float,
    scale: ScoreScale | None,
    bound: tuple[float, float] | None,
) -> float:
    """A hit's share of its merged leg, as the score fusion computes one KB's: its value
    over the best any KB's leg found (``bound``), or by its merged rank where the leg's
    scores say nothing (``groove_core.fusion.by_scores``)."""
    from groove_core.fusion import rank_share, score_value, share

    if scale is None or scale == "rank" or bound is None:
        return rank_share(rank, k)
    return share(score_value(raw, scale)[0], *bound)


def _merged_leg_ranks(legs: Sequence[Sequence[LegResult]]) -> dict[tuple[str, int, int], int]:
    """(leg, KB index, chunk id) -> 1-based rank in that leg merged across KBs.

    A leg orders its candidates by its own raw score, smaller or larger first as the leg
    does; that direction is read from the leg's own order, so a plugin's leg merges too."""
    by_leg: dict[str, list[tuple[float, int, int, int]]] = {}
    descending: dict[str, bool] = {}
    for i, kb_legs in enumerate(legs):
        for leg in kb_legs:
            rows = by_leg.setdefault(leg.name, [])
            for local, hit in enumerate(leg.hits):
                rows.append((hit.raw_score, local, i, hit.chunk_id))
            if len(leg.hits) > 1 and leg.hits[0].raw_score != leg.hits[-1].raw_score:
                descending[leg.name] = leg.hits[0].raw_score > leg.hits[-1].raw_score
    ranks: dict[tuple[str, int, int], int] = {}
    for name, rows in by_leg.items():
        sign = -1.0 if descending.get(name, False) else 1.0
        rows.sort(key=lambda r: (sign * r[0], r[1], r[2], r[3]))
        for rank, (_, _, i, chunk_id) in enumerate(rows, start=1):
            ranks.setdefault((name, i, chunk_id), rank)
    return ranks
