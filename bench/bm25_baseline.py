"""A plain BM25 baseline for the evaluation collections (issue #42): SQLite FTS5, whole documents.

Usage (from the repository root)::

    .venv/bin/python bench/bm25_baseline.py evaldata/cacm-en [--golden FILE] \
        [--per-query out.json] [--pair groove-per-query.jsonl --variant "lexical only"]

What it does, deliberately simple so that it is a fixed reference point:

- Index: one FTS5 row per ``docs/**/*.md`` file, one column holding the Markdown body (the
  ``# title`` line and the text; YAML front matter left out, as it holds ids and
  bibliographic fields), tokenizer ``porter unicode61`` (lower-cased, diacritics removed,
  Porter-stemmed). ``--front-matter`` indexes the whole file instead.
- Query: the query's words (runs of ASCII letters and digits after NFKC and lower-casing,
  ``evaldata/build.py``'s ``words``) less ``evaldata/build.py``'s 59-word ``STOP_WORDS``,
  each distinct word once, as an OR of quoted terms; ranked by ``bm25()`` (k1 = 1.2,
  b = 0.75), the best 100 documents kept.
- Score: ``groove_core.evaluation.metrics.query_metrics`` over the ranked documents, the
  very function ``groove eval`` uses (document-level credit, tie-aware), with binary
  relevance from ``expected`` (grade 1 for every expected path). nDCG@10 is reported
  overall (with groove's 95% bootstrap interval) and per query-length bucket (content
  words = the words above with repeats kept: 0-7, 8-15, 16-31, 32+).
- ``--per-query FILE`` writes ``{id: {"ndcg@10", "words", "bucket", "query", "top"}}``.
- ``--pair FILE`` reads the per-query JSON Lines of ``groove eval --per-query FILE``
  (``--ablate`` writes one row per variant and query), and prints for each variant (or
  only ``--variant``) the paired comparison with BM25: wins / losses / ties, mean
  difference with its bootstrap interval, groove's sign-flip randomization p, a two-sided
  sign test and a paired t test, per bucket too; and the queries where BM25 leads most.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from statistics import mean, stdev
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaldata.build import LENGTH_BUCKETS, STOP_WORDS, length_bucket, words  # noqa: E402
from groove_core.evaluation.metrics import (  # noqa: E402
    RankedDoc,
    bootstrap,
    paired_test,
    query_metrics,
)

DEPTH = 100
BM25_K1, BM25_B = 1.2, 0.75  # FTS5's fixed parameters, stated for the record


def connect() -> Any:
    """An in-memory database whose SQLite has FTS5 (pysqlite3 as groove uses, else stdlib)."""
    try:
        import pysqlite3.dbapi2 as sqlite3
    except ImportError:
        import sqlite3
    con = sqlite3.connect(":memory:")
    try:
        con.execute("CREATE VIRTUAL TABLE probe USING fts5(x)")
        con.execute("DROP TABLE probe")
    except sqlite3.OperationalError as exc:
        raise SystemExit(f"this SQLite ({sqlite3.sqlite_version}) has no FTS5: {exc}") from None
    return con


def body(text: str) -> str:
    """The file without its leading ``---`` YAML front matter."""
    if text.startswith("---\n"):
        end = text.find("\n---\n", 4)
        if end >= 0:
            return text[end + 5 :]
    return text


def build_index(collection: Path, *, front_matter: bool) -> Any:
    con = connect()
    con.execute(
        "CREATE VIRTUAL TABLE docs USING fts5(path UNINDEXED, text, tokenize='porter unicode61')"
    )
    rows = []
    for path in sorted((collection / "docs").rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        rows.append((path.relative_to(collection).as_posix(), text if front_matter else body(text)))
    con.executemany("INSERT INTO docs(path, text) VALUES (?, ?)", rows)
    return con


def match_expression(query: str) -> str:
    terms = list(dict.fromkeys(w for w in words(query) if w not in STOP_WORDS))
    return " OR ".join(f'"{t}"' for t in terms)


def search(con: Any, query: str) -> list[RankedDoc]:
    expr = match_expression(query)
    if not expr:
        return []
    rows = con.execute(
        "SELECT path, bm25(docs) FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT ?",
        (expr, DEPTH),
    ).fetchall()
    return [RankedDoc(path, -score) for path, score in rows]  # bm25(): smaller is better


def load_golden(path: Path) -> list[dict[str, Any]]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            row = json.loads(line)
            row.setdefault("id", f"line-{n}")
            rows.append(row)
    return rows


def expected_paths(row: dict[str, Any]) -> list[str]:
    return [e if isinstance(e, str) else e["path"] for e in row["expected"]]


def evaluate(collection: Path, golden: Path, *, front_matter: bool) -> dict[str, dict[str, Any]]:
    con = build_index(collection, front_matter=front_matter)
    out: dict[str, dict[str, Any]] = {}
    for row in load_golden(golden):
        docs = search(con, row["query"])
        n_words = sum(1 for w in words(row["query"]) if w not in STOP_WORDS)
        grades = dict.fromkeys(expected_paths(row), 1.0)
        out[row["id"]] = {
            "ndcg@10": query_metrics(docs, grades)["ndcg@10"],
            "words": n_words,
            "bucket": length_bucket(n_words),
            "query": row["query"],
            "top": [d.path for d in docs[:10]],
        }
    return out


def bucket_means(scores: dict[str, float], per_query: dict[str, dict[str, Any]]) -> str:
    cells = []
    for label, _, _ in LENGTH_BUCKETS:
        vals = [s for q, s in scores.items() if per_query[q]["bucket"] == label]
        cells.append(f"{label}: {mean(vals):.3f} (n={len(vals)})" if vals else f"{label}: -")
    return "  ".join(cells)


def sign_test_p(wins: int, losses: int) -> float:
    """Two-sided exact binomial sign test (ties dropped)."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / float(2**n)
    return min(1.0, 2 * tail)


def t_test_p(diffs: list[float]) -> tuple[float, float]:
    """Paired t statistic and two-sided p (scipy when installed, else a normal approximation)."""
    n = len(diffs)
    if n < 2 or stdev(diffs) == 0:
        return 0.0, 1.0
    t = mean(diffs) / (stdev(diffs) / math.sqrt(n))
    try:
        from scipy import stats

        p = float(2 * stats.t.sf(abs(t), n - 1))
        return t, p
    except ImportError:
        return t, math.erfc(abs(t) / math.sqrt(2))


def compare(
    name: str, groove: dict[str, float], bm25: dict[str, dict[str, Any]], worst: int
) -> None:
    ids = [q for q in bm25 if q in groove]
    diffs = [groove[q] - bm25[q]["ndcg@10"] for q in ids]
    wins = sum(d > 1e-9 for d in diffs)
    losses = sum(d < -1e-9 for d in diffs)
    test = paired_test([groove[q] for q in ids], [bm25[q]["ndcg@10"] for q in ids])
    t, tp = t_test_p(diffs)
    print(
        f"\n{name} vs BM25 (n={len(ids)}): groove {mean(groove[q] for q in ids):.3f}, "
        f"BM25 {mean(bm25[q]['ndcg@10'] for q in ids):.3f}"
    )
    print(
        f"  groove better {wins}, BM25 better {losses}, tied {len(ids) - wins - losses}; "
        f"mean diff {mean(diffs):+.3f} (95% CI {test.delta.low:+.3f}..{test.delta.high:+.3f})"
    )
    print(
        f"  sign-flip p={test.p_value:.4f}  sign test p={sign_test_p(wins, losses):.4f}  "
        f"paired t={t:.2f} p={tp:.4f}"
    )
    for label, _, _ in LENGTH_BUCKETS:
        sub = [q for q in ids if bm25[q]["bucket"] == label]
        if sub:
            d = [groove[q] - bm25[q]["ndcg@10"] for q in sub]
            print(
                f"  bucket {label:>5} (n={len(sub):>3}): groove {mean(groove[q] for q in sub):.3f}"
                f"  BM25 {mean(bm25[q]['ndcg@10'] for q in sub):.3f}  diff {mean(d):+.3f}"
                f"  groove/BM25 better {sum(x > 1e-9 for x in d)}/{sum(x < -1e-9 for x in d)}"
            )
    if worst:
        print(f"  queries where BM25 leads most ({name}):")
        order = sorted(ids, key=lambda q: groove[q] - bm25[q]["ndcg@10"])[:worst]
        for q in order:
            b = bm25[q]
            print(
                f"    {q:<12} words={b['words']:>3}  BM25 {b['ndcg@10']:.3f}  groove "
                f"{groove[q]:.3f}  {b['query'][:90]!r}"
            )


def read_groove(path: Path) -> dict[str, dict[str, float]]:
    """variant -> {id: ndcg@10} from ``groove eval --per-query`` JSON Lines."""
    out: dict[str, dict[str, float]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            out.setdefault(row.get("variant", "default"), {})[row["id"]] = row["ndcg@10"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("collection", type=Path, help="folder holding docs/ and golden files")
    ap.add_argument("--golden", type=Path, help="default: <collection>/golden.jsonl")
    ap.add_argument("--front-matter", action="store_true", help="index the front matter too")
    ap.add_argument("--per-query", type=Path, help="write per-query BM25 scores (JSON) here")
    ap.add_argument(
        "--pair",
        type=Path,
        action="append",
        default=[],
        help="groove eval --per-query JSON Lines to compare with (may repeat)",
    )
    ap.add_argument("--variant", action="append", help="only these variants of --pair")
    ap.add_argument("--worst", type=int, default=10, help="list this many queries BM25 leads")
    args = ap.parse_args()
    golden = args.golden or args.collection / "golden.jsonl"
    per_query = evaluate(args.collection, golden, front_matter=args.front_matter)
    scores = {q: r["ndcg@10"] for q, r in per_query.items()}
    est = bootstrap(list(scores.values()))
    print(f"{golden}: {len(scores)} queries, FTS5 porter unicode61 bm25, whole documents")
    print(f"nDCG@10 {est.mean:.3f} (95% CI {est.low:.3f}-{est.high:.3f})")
    print("by content words: " + bucket_means(scores, per_query))
    if args.per_query:
        args.per_query.write_text(json.dumps(per_query, ensure_ascii=False, indent=1))
    for path in args.pair:
        for variant, groove in read_groove(path).items():
            if args.variant and variant not in args.variant:
                continue
            compare(f"{path.name}: {variant}", groove, per_query, args.worst)


if __name__ == "__main__":
    main()
