"""What the word leg costs: index-time writes and per-query time, beside the trigram leg.

    .venv/bin/python bench/word_cost.py [CHUNKS]   (default 10000)

Builds the two lexical FTS5 tables (trigram and word) for CHUNKS chunks of real text (the
committed Japanese and English collections, cycled) in a temporary database, timing each
table's inserts (segmentation included for the word table), then times both legs' ranked
queries over the golden questions (median and p95): the word leg with every term, and as
the leg searches, without the terms in more than ``lexical_common_share`` of the chunks
(the default 0.2; counting included). No embedder: its cost is the denominator measured by
bench/scale.py.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from itertools import cycle, islice
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # evaldata, from a checkout

from evaldata import EVALDATA
from groove_core import words
from groove_core.builtins.legs import common_terms
from groove_core.config import SearchConfig
from groove_core.query import match_expression, normalize, parse_query
from groove_core.sqlite import word_table
from groove_core.sqlite.store import Store


def _texts() -> list[str]:
    out = []
    for name in ("jsquad-ja-para", "xquad-en-para", "cranfield-en", "md-vue-docs-ja"):
        for path in sorted((EVALDATA / name / "docs").rglob("*.md")):
            out.append(normalize(path.read_text(encoding="utf-8")))
    return out


def _queries() -> list[str]:
    out = []
    for golden in ("jsquad-ja-para/golden.jsonl", "xquad-en-para/golden.jsonl"):
        lines = (EVALDATA / golden).read_text(encoding="utf-8").splitlines()
        out += [json.loads(line)["query"] for line in lines if line.strip()]
    return out


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    texts = list(islice(cycle(_texts()), n))
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.create(Path(tmp) / "index.sqlite")
        conn = store.conn
        started = time.perf_counter()
        with store.transaction():
            for i, text in enumerate(texts, start=1):
                conn.execute(
                    "INSERT INTO fts_chunks(rowid, heading, context, content) "
                    "VALUES (?, '', '', ?)",
                    (i, text),
                )
        trigram_s = time.perf_counter() - started
        started = time.perf_counter()
        with store.transaction():
            for i, text in enumerate(texts, start=1):
                word_table.insert_row(conn, i, "", "", text)
        word_s = time.perf_counter() - started
        print(f"{n} chunks: trigram table {trigram_s:.1f} s, word table {word_s:.1f} s")
        share = SearchConfig().lexical_common_share
        fts_ms, word_ms, leg_ms = [], [], []
        for query in _queries():
            parsed = parse_query(query)
            if parsed.match_expr is not None:
                started = time.perf_counter()
                store.leg_index("fts").search(
                    parsed.positives, (2.0, 1.0, 1.0), 50, excluded=parsed.negatives
                )
                fts_ms.append((time.perf_counter() - started) * 1000)
            terms = words.query_terms(parsed.positive_parts)[0]
            expr = match_expression(terms, ())
            if expr:
                started = time.perf_counter()
                word_table.search(conn, expr, (2.0, 1.0, 1.0), 50)
                word_ms.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                common = common_terms(store, terms, share)
                kept = [t for t in terms if t not in common]
                word_table.search(conn, match_expression(kept, ()), (2.0, 1.0, 1.0), 50)
                leg_ms.append((time.perf_counter() - started) * 1000)
        for name, ms in (
            ("trigram", fts_ms),
            ("word (every term)", word_ms),
            ("word (as searched)", leg_ms),
        ):
            p95 = statistics.quantiles(ms, n=20)[-1]
            print(f"{name} leg: median {statistics.median(ms):.1f} ms, p95 {p95:.1f} ms")
        store.close()


if __name__ == "__main__":
    main()
