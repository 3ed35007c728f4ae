"""Indexing and query cost at a given KB size, with the real default embedder.

    .venv/bin/python bench/scale.py 1000 10000 100000 [--root DIR] [--search-only]
    .venv/bin/python bench/scale.py 10000 --index-only   # the indexing overhead alone

For each size: builds a synthetic KB from real text (bench/corpus.py), indexes it in a
subprocess (peak RSS, index size), then embeds the same chunks with the embedder alone in
a subprocess of its own (model load timed apart), so that the indexing overhead is the
whole run's wall time over the embedder's, unrounded; re-indexes with nothing and
with 1% changed, then measures warm in-process search per leg and end to end (median and
p95 over real golden queries, Japanese and English), with and without the MMR and parent
plugins, plus start-up times. Prints Markdown tables and writes bench/results/<size>.json.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus
from timing import OFFLINE_ENV, timed_groove

from groove_core.app import Groove
from groove_core.embedding import embedding_input

RESULTS = Path(__file__).resolve().parent / "results"


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return {"p50_ms": statistics.median(ordered) * 1000, "p95_ms": p95 * 1000}


def queries(limit: int = 100) -> list[str]:
    out = []
    for collection in ("jsquad-ja-para", "xquad-en-para"):
        path = corpus.EVALDATA / collection / "golden.jsonl"
        lines = path.read_text(encoding="utf-8").splitlines()[:limit]
        out += [json.loads(line)["query"] for line in lines]
    return out


def measure_index(kb: Path) -> dict[str, Any]:
    index_dir = kb / ".groove"
    if index_dir.exists():
        for child in index_dir.iterdir():
            child.unlink()
    wall, out = timed_groove("index", str(kb), "--json")
    report = json.loads(out)
    rss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    size = (index_dir / "index.sqlite").stat().st_size
    alone = embed_alone(kb)
    markdown = sum(p.stat().st_size for p in kb.rglob("*.md"))
    return {
        "wall_s": wall,
        "chunks": report["chunks_total"],
        "documents": report["documents_total"],
        "chunks_per_s": report["chunks_total"] / wall,
        "embedder_alone": alone,
        # Everything but embedding, as a share of embedding: process start, imports, model
        # load, walk, parse, chunk, write. Both from wall clocks, neither rounded.
        "overhead": wall / alone["embed_s"] - 1,
        "overhead_without_model_load": (wall - alone["load_s"]) / alone["embed_s"] - 1,
        # The figure this table used to give: the run's own embed timer (in the run, so
        # with the run's memory and cache state) against the same wall time.
        "in_run_embed_s": report["embed_seconds"],
        "overhead_vs_in_run_timer": wall / report["embed_seconds"] - 1,
        "peak_rss_mib_max_of_children": rss_kib / 1024,
        "index_mib": size / 2**20,
        "index_bytes_per_markdown_byte": size / markdown,
        "index_kib_per_1k_chunks": size / 1024 / (report["chunks_total"] / 1000),
    }


def embed_alone(kb: Path) -> dict[str, float]:
    """The embedder alone over the chunks of KB's index, in a process of its own."""
    proc = subprocess.run(
        [sys.executable, __file__, "--embed-alone", str(kb)],
        capture_output=True,
        text=True,
        env=OFFLINE_ENV,
        check=True,
    )
    result: dict[str, float] = json.loads(proc.stdout)
    return result


def run_embed_alone(kb: Path) -> None:
    """Child of :func:`embed_alone`: load the model (timed), then embed every chunk's text
    (what the indexer embeds) in the configured batches (timed). Prints JSON."""
    app = Groove.open(kb)
    started = time.perf_counter()
    embedder = app.embedder
    embedder.embed_documents(["load"])
    load_s = time.perf_counter() - started
    texts: list[str] = []
    after = 0
    while rows := app.store.chunk_texts(after, 1000):
        # groove_core.vector_pass.embedding_text: the context prefix, then the chunk's text.
        texts += [f"{ctx}\n{content}" if ctx else content for _, ctx, content in rows]
        after = rows[-1][0]
    batch = app.config.embedder.batch_size
    started = time.perf_counter()
    for i in range(0, len(texts), batch):
        embedder.embed_documents(texts[i : i + batch])
    embed_s = time.perf_counter() - started
    out = {"load_s": load_s, "embed_s": embed_s, "chunks": len(texts)}
    print(json.dumps({**out, "chunks_per_s": len(texts) / embed_s}))


def measure_reindex(kb: Path) -> dict[str, float]:
    unchanged, _ = timed_groove("index", str(kb), "--json")
    files = sorted(kb.rglob("note*.md"))
    for path in files[::100]:  # 1% of the files
        with path.open("a", encoding="utf-8") as f:
            f.write("\nAppended during the incremental benchmark.\n")
    changed, out = timed_groove("index", str(kb), "--json")
    return {
        "unchanged_s": unchanged,
        "one_percent_changed_s": changed,
        "changed_files": json.loads(out)["changed"],
    }


def time_query(app: Groove, q: str) -> dict[str, float]:
    """Seconds spent in each part of one search, then the whole search end to end."""
    store, embedder, plugins = app.store, app.embedder, app.plugins
    fusion = app.config.search.fusion
    weights = (fusion.heading, fusion.context, fusion.content)
    searcher = app.searcher()
    ctx = searcher.context(q, limit=10)
    out: dict[str, float] = {}
    started = time.perf_counter()
    vector = embedder.embed_query(embedding_input(ctx.query.embed_text, query=True))
    out["embed"] = time.perf_counter() - started
    started = time.perf_counter()
    store.vector_search(vector, ctx.leg_size)
    out["knn"] = time.perf_counter() - started
    started = time.perf_counter()
    if ctx.query.match_expr:
        store.leg_index("fts").search(
            ctx.query.positives, weights, ctx.leg_size, excluded=ctx.query.negatives
        )
    out["fts"] = time.perf_counter() - started
    results = searcher.candidates(ctx)
    started = time.perf_counter()
    hits = searcher.pool(ctx, results)
    out["fuse"] = time.perf_counter() - started
    started = time.perf_counter()
    plugins.highlight(ctx, hits[: ctx.limit])
    out["highlight"] = time.perf_counter() - started
    started = time.perf_counter()
    app.search(q, limit=10)
    out["end_to_end"] = time.perf_counter() - started
    return out


def measure_search(kb: Path, qs: list[str]) -> dict[str, Any]:
    app = Groove.open(kb)
    app.search("warm up the model and the page cache", limit=10)
    samples = [time_query(app, q) for q in qs]
    parts = ("embed", "knn", "fts", "fuse", "highlight", "end_to_end")
    out: dict[str, Any] = {p: percentiles([s[p] for s in samples]) for p in parts}
    leg_sum = sum(statistics.median(s[p] for s in samples) for p in ("embed", "knn", "fts"))
    out["glue_over_legs"] = statistics.median(s["end_to_end"] for s in samples) / leg_sum - 1
    for stage in ("mmr", "parent"):
        if any(o.name == stage for o in app.plugins.search_options()):
            out[f"end_to_end_{stage}"] = percentiles(
                [timed_search(app, q, {stage: True}) for q in qs]
            )
    return out


def timed_search(app: Groove, q: str, options: dict[str, Any]) -> float:
    started = time.perf_counter()
    app.search(q, limit=10, options=options)
    return time.perf_counter() - started


def measure_startup(kb: Path) -> dict[str, float]:
    bare = []
    for _ in range(5):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append(time.perf_counter() - started)
    helps = [timed_groove("--help")[0] for _ in range(5)]
    first = [timed_groove("search", "検索の評価", "--kb", str(kb))[0] for _ in range(3)]
    return {
        "bare_python_s": statistics.median(bare),
        "help_s": statistics.median(helps),
        "help_above_bare_s": statistics.median(helps) - statistics.median(bare),
        "first_search_s": statistics.median(first),
    }


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["--embed-alone"]:
        run_embed_alone(Path(args[1]))
        return
    root = Path(tempfile.gettempdir()) / "groove-bench"
    if "--root" in args:
        i = args.index("--root")
        root = Path(args[i + 1])
        del args[i : i + 2]
    search_only = "--search-only" in args  # reuse an existing index, re-measure search
    index_only = "--index-only" in args  # the first index run and the embedder alone
    args = [a for a in args if a not in ("--search-only", "--index-only")]
    qs = queries()
    RESULTS.mkdir(exist_ok=True)
    for size in [int(a) for a in args]:
        kb = root / str(size)
        corpus.write(size, kb)
        saved = RESULTS / f"{size}.json"
        result: dict[str, Any] = json.loads(saved.read_text()) if search_only else {}
        result["size"] = size
        result["machine"] = f"{os.cpu_count()} CPU {platform.machine()} {platform.processor()}"
        if not search_only:
            result["index"] = measure_index(kb)
            if index_only:
                (RESULTS / f"{size}-index.json").write_text(json.dumps(result, indent=2))
                print(json.dumps(result, indent=2))
                continue
            result["reindex"] = measure_reindex(kb)
            timed_groove("index", str(kb))
        result["search"] = measure_search(kb, qs)
        result["startup"] = measure_startup(kb)
        (RESULTS / f"{size}.json").write_text(json.dumps(result, indent=2))
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
