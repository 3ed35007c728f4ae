"""Retrieval parity of the PostgreSQL backend with SQLite on the evaluation collections.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/pg_parity.py [--work DIR] [--json FILE]
        [--collection NAME ...] [--sqlite-only]

For each collection (jsquad-ja-para: golden and golden-hard; xquad-en-para; cranfield-en):

1. copy its ``docs/`` and golden files to ``<work>/<collection>/`` (evaldata/ is never
   written to), index it on SQLite with the default embedder (``groove index``; a later
   run reuses the index), run ``groove eval --json --per-query`` on every golden file and
   the golden queries through ``groove search``'s code (one process per backend, below);
2. switch the KB to PostgreSQL in its groove.toml (``[store] backend = "postgres"``,
   ``dsn``: a fresh database with the builtin C.UTF-8 locale on a PostgreSQL 18 this
   script starts), ``groove index --copy-from sqlite`` (the same vectors, not re-embedded),
   and evaluate and search again;
3. put the KB's groove.toml back to SQLite.

Prints, per golden file, nDCG@10 on each backend and the difference (target: within 0.01)
with a paired bootstrap interval, and the mean top-10 overlap per query (target >= 9/10):
chunks in both backends' top 10 of ``search --limit 10``, a chunk named by (path, byte
range), since chunk ids differ between the two indexes. ``--sqlite-only`` runs step 1
alone (a dry run without PostgreSQL). The server is stopped and its folder removed at the
end, whatever happens.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_collections import scratch_copy
from pg_common import (
    ROOT,
    begin,
    create_database,
    groove,
    index_on_sqlite,
    load_average,
    start_postgres,
    use_backend,
)
from timing import OFFLINE_ENV

#: collection -> golden files evaluated (docs/eval.md).
COLLECTIONS = {
    "jsquad-ja-para": ("golden.jsonl", "golden-hard.jsonl"),
    "xquad-en-para": ("golden.jsonl",),
    "cranfield-en": ("golden.jsonl",),
}
LIMIT = 10


def prepare(evaldata: Path, work: Path, collection: str) -> Path:
    """A scratch copy of the collection on SQLite, indexed (reused when already there)."""
    target = scratch_copy(evaldata, work, collection)
    report, seconds = index_on_sqlite(target, "")
    print(
        f"{collection}: SQLite index {report['chunks_total']} chunks, "
        f"{report['chunks_embedded']} embedded, {seconds:.1f} s",
        flush=True,
    )
    return target


def copy_to_postgres(kb: Path, collection: str) -> None:
    """``groove index --copy-from sqlite`` with the KB's groove.toml naming PostgreSQL."""
    started = time.perf_counter()
    out = groove("index", str(kb), "--copy-from", "sqlite", "--json", "--quiet").stdout
    report = json.loads(out)
    print(
        f"{collection}: copied to PostgreSQL in {time.perf_counter() - started:.1f} s "
        f"({report['chunks_total']} chunks, {report['chunks_embedded']} embedded)",
        flush=True,
    )


def evaluate(kb: Path, golden: str, per_query: Path) -> dict[str, Any]:
    """``groove eval --json`` (stage 1, the default): nDCG@10 and the per-query file."""
    began = time.perf_counter()
    out = groove(
        "eval",
        "--kb",
        str(kb),
        "--golden",
        str(kb / golden),
        "--json",
        "--no-history",
        "--per-query",
        str(per_query),
    )
    run = json.loads(out.stdout)["runs"][0]
    print(f"  eval {golden} on {per_query.stem.split('-')[0]}: {time.perf_counter() - began:.1f} s")
    ndcg = run["metrics"]["ndcg@10"]
    return {
        "n": run["n"],
        "ndcg": ndcg["mean"],
        "ci": (ndcg["ci_low"], ndcg["ci_high"]),
        "rejected": len(run["rejected"]),
        "per_query": {
            row["id"]: float(row["ndcg@10"])
            for row in map(json.loads, per_query.read_text(encoding="utf-8").splitlines())
            if row
        },
    }


def top10(kb: Path, goldens: tuple[str, ...], out: Path) -> dict[str, list[list[list[Any]]]]:
    """Every golden query's top 10 through ``Groove.search`` (what ``groove search --limit
    10`` returns), in a process of its own: golden file -> per query, [path, start, end]."""
    began = time.perf_counter()
    subprocess.run(
        [sys.executable, __file__, "--dump", str(kb), str(out), *goldens],
        env=OFFLINE_ENV,
        check=True,
    )
    result: dict[str, list[list[list[Any]]]] = json.loads(out.read_text(encoding="utf-8"))
    print(f"  searches on {out.stem.split('-')[0]}: {time.perf_counter() - began:.1f} s")
    return result


def dump(kb: Path, out: Path, goldens: list[str]) -> None:
    """The --dump mode: one process, one open KB, every query of the golden files."""
    from groove_core.app import Groove

    app = Groove.open(kb)
    result: dict[str, list[list[tuple[str, int, int]]]] = {}
    try:
        for golden in goldens:
            lines = (kb / golden).read_text(encoding="utf-8").splitlines()
            queries = [json.loads(line)["query"] for line in lines if line.strip()]
            rows = []
            for query in queries:
                try:
                    hits = app.search(query, limit=LIMIT).results
                except Exception:  # a query the language rejects: an empty list on both sides
                    hits = ()
                rows.append([(h.path, h.byte_start, h.byte_end) for h in hits])
            result[golden] = rows
    finally:
        app.close()
    out.write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")


def overlap(a: list[list[list[Any]]], b: list[list[list[Any]]]) -> tuple[float, int, int]:
    """(mean chunks shared by the two top-10 lists, queries with all 10 shared, queries)."""
    shared = [len({tuple(x) for x in p} & {tuple(x) for x in q}) for p, q in zip(a, b, strict=True)]
    full = sum(s == max(len(p), len(q)) for s, p, q in zip(shared, a, b, strict=True) if p or q)
    return statistics.fmean(shared) if shared else 0.0, full, len(shared)


def paired(a: dict[str, float], b: dict[str, float]) -> dict[str, Any]:
    """Mean per-query difference b - a, its 95% paired bootstrap interval, and counts."""
    ids = sorted(a.keys() & b.keys())
    diffs = [b[i] - a[i] for i in ids]
    rng = random.Random(7)
    rounds = 5000
    means = sorted(statistics.fmean(rng.choices(diffs, k=len(diffs))) for _ in range(rounds))
    return {
        "mean": statistics.fmean(diffs),
        "ci": (means[int(0.025 * rounds)], means[int(0.975 * rounds)]),
        "better": sum(d > 1e-9 for d in diffs),
        "worse": sum(d < -1e-9 for d in diffs),
        "n": len(ids),
    }


def table(rows: list[dict[str, Any]], postgres: bool) -> str:
    if not postgres:
        head = "| collection / golden file | n | nDCG@10 SQLite |\n|---|---|---|\n"
        body = [
            f"| {r['name']} | {r['n']} | {r['sqlite']['ndcg']:.4f} "
            f"({r['sqlite']['ci'][0]:.3f}–{r['sqlite']['ci'][1]:.3f}) |"
            for r in rows
        ]
        return head + "\n".join(body) + "\n"
    head = (
        "| collection / golden file | n | nDCG@10 SQLite | nDCG@10 PostgreSQL | difference "
        "(95% paired) | queries better / worse | top-10 overlap | all 10 shared |\n"
        "|---|---|---|---|---|---|---|---|\n"
    )
    body = []
    for r in rows:
        d = r["difference"]
        body.append(
            f"| {r['name']} | {r['n']} | {r['sqlite']['ndcg']:.4f} | {r['postgres']['ndcg']:.4f} "
            f"| {d['mean']:+.4f} ({d['ci'][0]:+.4f} .. {d['ci'][1]:+.4f}) "
            f"| {d['better']} / {d['worse']} "
            f"| {r['overlap']:.2f} / 10 | {r['full']} of {r['n']} |"
        )
    return head + "\n".join(body) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--work", type=Path, default=Path(tempfile.gettempdir()) / "groove-pg-parity"
    )
    parser.add_argument("--evaldata", type=Path, default=ROOT / "evaldata")
    parser.add_argument("--collection", action="append", choices=sorted(COLLECTIONS))
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--sqlite-only", action="store_true", help="dry run without PostgreSQL")
    parser.add_argument("--dump", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.dump:
        dump(Path(args.dump[0]), Path(args.dump[1]), args.dump[2:])
        return
    postgres = begin("pg_parity", sqlite_only=args.sqlite_only)
    rows: list[dict[str, Any]] = []
    server = None
    began = time.perf_counter()
    try:
        dsn = None
        if postgres:
            server = start_postgres()
            dsn = create_database(server, "groove_parity")
        for collection in args.collection or list(COLLECTIONS):
            goldens = COLLECTIONS[collection]
            kb = prepare(args.evaldata, args.work, collection)
            scratch = args.work / f"{collection}.out"
            scratch.mkdir(exist_ok=True)
            try:
                found = {g: {"sqlite": evaluate(kb, g, scratch / f"sqlite-{g}")} for g in goldens}
                tops = {"sqlite": top10(kb, goldens, scratch / "sqlite-top10.json")}
                if postgres:
                    use_backend(kb, "", "postgres", dsn)
                    copy_to_postgres(kb, collection)
                    for g in goldens:
                        found[g]["postgres"] = evaluate(kb, g, scratch / f"postgres-{g}")
                    tops["postgres"] = top10(kb, goldens, scratch / "postgres-top10.json")
            finally:
                use_backend(kb, "", "sqlite")
            for g in goldens:
                row: dict[str, Any] = {
                    "name": f"{collection} / {g}",
                    "n": found[g]["sqlite"]["n"],
                    "sqlite": found[g]["sqlite"],
                }
                if postgres:
                    row["postgres"] = found[g]["postgres"]
                    row["difference"] = paired(
                        found[g]["sqlite"]["per_query"], found[g]["postgres"]["per_query"]
                    )
                    row["overlap"], row["full"], _ = overlap(tops["sqlite"][g], tops["postgres"][g])
                rows.append(row)
                print(f"{row['name']}: done", flush=True)
    finally:
        if server is not None:
            server.stop()
    spent = time.perf_counter() - began
    print(f"\n{spent:.0f} s in all; load average at the end {load_average()}\n")
    print(table(rows, postgres))
    if args.json is not None:
        for r in rows:
            for side in ("sqlite", "postgres"):
                if side in r:
                    r[side] = {k: v for k, v in r[side].items() if k != "per_query"}
        args.json.write_text(json.dumps(rows, ensure_ascii=False, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
