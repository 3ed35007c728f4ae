"""Performance guards of the lexical leg (SPEC P3): ratios measured in one run, never ms.

Worst case: every phrase matches every row, so bm25 scores every row before LIMIT.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from groove_core.query import MAX_PHRASES, parse_query
from groove_core.store import FTS_IDS_SQL, FTS_RANKED_SQL, Store
from groove_core.testing import open_kb

# 32 distinct words of 5+ letters: each compiles to exactly one phrase.
WORDS = [
    "alpha", "bravo", "charlie", "delta", "echoes", "foxtrot", "golfer", "hotel",
    "india", "juliet", "kilos", "limas", "mikes", "novembers", "oscar", "papas",
    "quebec", "romeo", "sierra", "tango", "uniform", "victor", "whiskey", "xrays",
    "yankee", "zulus", "amber", "basil", "cedar", "dunes", "ember", "fjord",
]  # fmt: skip
assert len(WORDS) == MAX_PHRASES


def _corpus(tmp_path: Path, rows: int) -> Store:
    store = Store.create(tmp_path / f"fts-{rows}.sqlite")
    body = " ".join(WORDS)
    with store.transaction():
        store.conn.executemany(
            "INSERT INTO fts_chunks(rowid, heading, context, content) VALUES (?, ?, ?, ?)",
            [(i, f"heading {i}", "context", f"{body} row {i}") for i in range(1, rows + 1)],
        )
    return store


def _best_of(fn: Callable[[], object], runs: int = 5) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def _ranked(store: Store, expr: str) -> Callable[[], object]:
    return lambda: store.conn.execute(FTS_RANKED_SQL, (2.0, 1.0, 1.0, expr, 50)).fetchall()


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Store]:
    tmp = tmp_path_factory.mktemp("fts-cost")
    return {rows: _corpus(tmp, rows) for rows in (1500, 6000)}


def test_32_phrase_or_stays_within_a_small_multiple_of_one_phrase(
    corpora: dict[int, Store],
) -> None:
    one = parse_query(WORDS[0]).match_expr
    many = parse_query(" ".join(WORDS)).match_expr
    assert one is not None and many is not None
    assert many.count(" OR ") == MAX_PHRASES - 1
    times = {
        rows: (_best_of(_ranked(store, one)), _best_of(_ranked(store, many)))
        for rows, store in corpora.items()
    }
    for single, wide in times.values():
        # The seed measured ~10x at every size; 30x leaves room for a noisy machine.
        assert wide / single < 30, times
    # Both grow with the rows matched (4x the rows), not with anything else.
    (s_small, w_small), (s_big, w_big) = times[1500], times[6000]
    assert 2.0 < s_big / s_small < 8.0, times
    assert 2.0 < w_big / w_small < 8.0, times


def test_exclusion_id_scan_is_cheaper_than_the_ranked_query(corpora: dict[int, Store]) -> None:
    store = corpora[6000]
    negative = parse_query("zzz -alpha -bravo").negative_expr
    assert negative is not None
    scan = _best_of(lambda: store.conn.execute(FTS_IDS_SQL, (negative,)).fetchall())
    ranked = _best_of(_ranked(store, negative))
    assert scan < ranked, (scan, ranked)


def test_queries_without_exclusions_never_run_the_scan(
    notes_kb: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = open_kb(notes_kb)
    calls: list[str] = []
    original = app.store.fts_ids

    def spy(expr: str) -> frozenset[int]:
        calls.append(expr)
        return original(expr)

    monkeypatch.setattr(app.store, "fts_ids", spy)
    app.search("rust ownership", limit=3)
    assert calls == []
    app.search("rust -async", limit=3)
    assert calls == ['"async"']
