"""Which vector leg, and which fusion, with e5 beside USE (issue #47 item 3).

Usage (from the repository root)::

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python bench/vector_legs.py \
        [--work-use DIR] [--work-e5 DIR] [--variants use-rrf,use,e5,two] [--golden C/G.jsonl]

Every variant names its fusion (``-rrf``: Reciprocal Rank Fusion, the seed's; otherwise the
legs' scores, the default since ADR-0019). Each collection is indexed twice
(``bench/eval_collections.py``'s scratch copies): once with USE, the default
(``--work-use``), once with ``e5-small`` (``--work-e5``; this script writes that folder's
groove.toml and indexes it). Variants named ``use*`` run on the USE index, the others on
the e5 index, all at stage 1 as ``groove eval`` measures, and every row is paired query by
query against the first variant.

The ``two*`` variants add USE's vector leg to the e5 index as a leg of an in-process plugin:
the same chunks (matched by path and position) ranked by USE's embedding of the query.
``two`` fuses both vector legs whole; ``two-script`` is the rule by script: e5's leg keeps
the passages in the query's script (Japanese or not) and USE's leg the passages in the
other, so each model ranks where it is strong (e5 within a language, USE across).
"""

from __future__ import annotations

import argparse
import sqlite3 as stdlib_sqlite3
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval_collections import ROOT, scratch_copy
from paired import GOLDEN_SETS, versus
from timing import run_groove

#: name -> (index: "use" or "e5", config changes, the extra legs: None, "two", "two-script")
RRF = {"search.fusion.method": "rrf"}
SCORES = {"search.fusion.method": "scores"}
NOCOV = {"search.fusion.coverage_vector": 1.0}
V2 = {"search.fusion.weights": {"vector": 2.0}}
ONLY_PLUGIN_VECTORS = {"search.fusion.weights": {"vector": 0.0}}

VARIANTS: dict[str, tuple[str, dict[str, Any], str | None]] = {
    # the fusion named in every variant, whatever the default is
    "use-rrf": ("use", RRF, None),
    "use": ("use", SCORES, None),
    "e5-rrf": ("e5", RRF, None),
    "e5": ("e5", SCORES, None),
    "e5-rrf-nocov": ("e5", {**RRF, **NOCOV}, None),
    "e5-nocov": ("e5", {**SCORES, **NOCOV}, None),
    "e5-v2": ("e5", {**SCORES, **V2}, None),
    "two-rrf": ("e5", RRF, "two"),
    "two": ("e5", SCORES, "two"),
    "two-script-rrf": ("e5", {**RRF, **ONLY_PLUGIN_VECTORS}, "two-script"),
    "two-script": ("e5", {**SCORES, **ONLY_PLUGIN_VECTORS}, "two-script"),
}

E5_CONFIG = '[embedder]\nname = "e5-small"\n'


def prepare_e5(work: Path, collection: str) -> Path:
    """A scratch copy of the collection indexed with e5-small (its own groove.toml)."""
    target = scratch_copy(ROOT / "evaldata", work, collection)
    (target / "groove.toml").write_text(E5_CONFIG, encoding="utf-8")
    wall = time.perf_counter()
    out = run_groove("index", str(target))
    print(
        f"indexed {collection} with e5-small in {time.perf_counter() - wall:.0f} s: "
        f"{out.stdout.strip()}",
        flush=True,
    )
    return target


def chunk_keys(index: Path) -> dict[tuple[str, int], int]:
    """(document path, chunk position) -> chunk id in a SQLite index."""
    conn = stdlib_sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT d.path, c.ordinal, c.id FROM chunks c JOIN documents d ON d.id = c.doc_id"
        ).fetchall()
    finally:
        conn.close()
    return {(str(p), int(o)): int(i) for p, o, i in rows}


@dataclass
class UseLegs:
    """The USE index of the same collection, as legs of the e5 index's searches."""

    use_kb: Path
    e5_index: Path
    mode: str  # "two" or "two-script"
    _vectors: dict[str, Any] = field(default_factory=dict)
    _app: Any = None
    _to_e5: dict[int, int] = field(default_factory=dict)
    _script: dict[int, str] = field(default_factory=dict)  # e5 chunk id -> "ja" | "other"

    def open(self) -> None:
        from groove_core.app import Groove
        from groove_core.weighting import CJK_TEXT_SHARE, cjk_share

        self._app = Groove.open(self.use_kb)
        e5_ids = chunk_keys(self.e5_index)
        use_ids = chunk_keys(self._app.index_file)
        self._to_e5 = {cid: e5_ids[key] for key, cid in use_ids.items() if key in e5_ids}
        rows = self._app.store.chunk_rows(sorted(self._to_e5))
        for cid, row in rows.items():
            text = f"{row.title}\n{' '.join(row.heading_path)}\n{row.heading}\n{row.content}"
            japanese = cjk_share(text) >= CJK_TEXT_SHARE
            self._script[self._to_e5[cid]] = "ja" if japanese else "other"

    def _use_vector(self, text: str) -> Any:
        if text not in self._vectors:
            self._vectors[text] = self._app.embedder.embed_query(text)
        return self._vectors[text]

    def plugin(self) -> object:
        from groove_core.context import LegSpec, QueryContext
        from groove_core.hookspecs import hookimpl
        from groove_core.models import LegHit, LegResult
        from groove_core.weighting import query_script

        legs = self

        def script_of(ctx: QueryContext) -> str:
            return query_script(ctx.query.embed_text or ctx.query.text) or "other"

        def use_leg(ctx: QueryContext) -> LegResult:
            vector = legs._use_vector(ctx.query.embed_text or ctx.query.text)
            rows = legs._app.store.vector_search(vector, ctx.leg_size * 3)
            hits = [LegHit(legs._to_e5[c], d) for c, d in rows if c in legs._to_e5]
            if legs.mode == "two-script":
                same = script_of(ctx)
                hits = [h for h in hits if legs._script.get(h.chunk_id) != same]
            return LegResult("use", tuple(hits[: ctx.leg_size]))

        def e5_leg(ctx: QueryContext) -> LegResult:
            rows = ctx.store.vector_search(ctx.query_vector(), ctx.leg_size * 3)
            same = script_of(ctx)
            hits = [LegHit(c, d) for c, d in rows if legs._script.get(c) == same]
            return LegResult("e5", tuple(hits[: ctx.leg_size]))

        class Plugin:
            @hookimpl
            def groove_legs(self) -> list[LegSpec]:
                specs = [LegSpec("use", "vector", use_leg)]
                if legs.mode == "two-script":
                    specs.append(LegSpec("e5", "vector", e5_leg))
                return specs

        return Plugin()


def session_for(kb: Path, golden: Path, extra: list[tuple[str, object]]) -> Any:
    """An eval session (as ``groove eval`` opens one) with in-process plugins."""
    from groove_core.app import Groove
    from groove_core.evaluation.golden import load_golden, resolve
    from groove_core.evaluation.runner import CachedEmbedder
    from groove_core.evaluation.session import EvalSession

    app = Groove.open(kb, None, extra_plugins=extra)
    loaded = load_golden(golden)
    queries = resolve(loaded, kb, frozenset(app.store.doc_states()))
    return EvalSession(app, loaded, queries, CachedEmbedder(app.embedder))


def rows_for(
    work_use: Path, work_e5: Path, golden: str, names: list[str], out: Callable[[str], None]
) -> None:
    from groove_core.evaluation.metrics import bootstrap
    from groove_core.evaluation.runner import GoldenSearcher, run_golden, with_changes
    from groove_core.pipeline import Searcher
    from groove_core.plugins import make_plugin_manager

    collection, name = golden.split("/")
    base: list[float] | None = None
    sessions: dict[tuple[str, str | None], tuple[Any, list[tuple[str, object]]]] = {}
    for variant in names:
        index, changes, extra = VARIANTS[variant]
        kb = (work_use if index == "use" else work_e5) / collection
        key = (index, extra)
        if key not in sessions:
            plugins: list[tuple[str, object]] = []
            if extra is not None:
                legs = UseLegs(work_use / collection, index_file_of(kb), extra)
                legs.open()
                plugins.append((f"bench-{extra}", legs.plugin()))
            sessions[key] = (session_for(kb, kb / name, plugins), plugins)
        session, plugins = sessions[key]
        config = with_changes(session.config, changes)
        # a searcher of its own: the session's would build its plugin set without these
        searcher = GoldenSearcher(
            Searcher(
                make_plugin_manager(config, extra=plugins), session.app.store, session.embedder
            )
        )
        started = time.perf_counter()
        outcomes = run_golden(searcher, session.queries, stage="candidates", limit=10)
        took = time.perf_counter() - started
        values = outcomes.values("ndcg@10")
        ndcg, hit = bootstrap(values), bootstrap(outcomes.values("hit@10"))
        cells = [
            golden,
            str(len(values)),
            variant,
            f"{ndcg.mean:.3f} ({ndcg.low:.3f}–{ndcg.high:.3f})",
            f"{hit.mean:.3f}",
            versus(values, base),
            f"{took:.1f}s",
        ]
        base = values if base is None else base
        out("| " + " | ".join(cells) + " |")
    for session, _ in sessions.values():
        session.app.close()


def index_file_of(kb: Path) -> Path:
    from groove_core.app import Groove

    app = Groove.open(kb)
    try:
        return Path(app.index_file)
    finally:
        app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    tmp = Path(tempfile.gettempdir())
    parser.add_argument("--work-use", type=Path, default=tmp / "groove-eval")
    parser.add_argument("--work-e5", type=Path, default=tmp / "groove-eval-e5")
    parser.add_argument("--variants", default="use-rrf,use,e5-rrf,e5,two")
    parser.add_argument("--golden", action="append", default=None)
    args = parser.parse_args()
    names = args.variants.split(",")
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    goldens = args.golden or GOLDEN_SETS
    for collection in dict.fromkeys(g.split("/")[0] for g in goldens):
        if not (args.work_use / collection / ".groove").exists():
            parser.error(f"{args.work_use / collection} is not indexed: run eval_collections.py")
        if any(VARIANTS[n][0] == "e5" for n in names):
            prepare_e5(args.work_e5, collection)
    print("| golden | n | variant | nDCG@10 (95% CI) | hit@10 | Δ nDCG vs first | time |")
    print("|---|---|---|---|---|---|---|")
    for golden in goldens:
        rows_for(args.work_use, args.work_e5, golden, names, lambda r: print(r, flush=True))


if __name__ == "__main__":
    main()
