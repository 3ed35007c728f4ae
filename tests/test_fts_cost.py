"""Performance guards of the lexical leg (docs/retrieval-pipeline.md, "Cost notes"):
ratios measured in one run, never ms.

Worst case: every phrase matches every row, so bm25 scores every row before LIMIT.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from groove_core.query import MAX_PHRASES, parse_query
from groove_core.sqlite.lexical_legs import FTS_IDS_SQL, FTS_RANKED_SQL
from groove_core.sqlite.store import Store
from groove_core.testing import cost_ratio, open_kb

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


def _ranked(store: Store, expr: str) -> Callable[[], object]:
    return lambda: store.conn.execute(FTS_RANKED_SQL, (2.0, 1.0, 1.0, expr, 50)).fetchall()


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Store]:
    tmp = tmp_path_factory.mktemp("fts-cost")
    return {rows: _corpus(tmp, rows) for rows in (1500, 6000)}


# The seed measured ~10x at every size; about 20x here (CPU time, at both sizes and whether
# the machine is idle or loaded: see cost_ratio). Wall-clock ratios read 36-56x under load.
WIDE_OVER_ONE_LIMIT = 30


def _expressions() -> tuple[str, str]:
    one = parse_query(WORDS[0]).match_expr
    many = parse_query(" ".join(WORDS)).match_expr
    assert one is not None and many is not None
    assert many.count(" OR ") == MAX_PHRASES - 1
    return one, many


def test_32_phrase_or_stays_within_a_small_multiple_of_one_phrase(
    corpora: dict[int, Store],
) -> None:
    one, many = _expressions()
    for rows, store in corpora.items():
        ratio = cost_ratio(_ranked(store, many), _ranked(store, one))
        assert ratio < WIDE_OVER_ONE_LIMIT, (rows, ratio)


def test_the_wide_query_guard_fails_when_the_cost_really_regresses(
    corpora: dict[int, Store],
) -> None:
    # The guard above must be able to fail: the same measurement when the wide query costs
    # three times what it does today (it runs thrice) lands above the limit. Twice was too
    # close to call: today's ratio reads 14-15, so twice it read 28-30 against the limit 30.
    one, many = _expressions()
    store = corpora[1500]
    ranked = _ranked(store, many)

    def regressed() -> None:
        for _ in range(3):
            ranked()

    assert cost_ratio(regressed, _ranked(store, one)) > WIDE_OVER_ONE_LIMIT


def test_fts_cost_grows_with_the_rows_matched(corpora: dict[int, Store]) -> None:
    # Both grow with the rows matched (4x the rows), not with anything else.
    one, many = _expressions()
    small, big = corpora[1500], corpora[6000]
    for expr in (one, many):
        ratio = cost_ratio(_ranked(big, expr), _ranked(small, expr))
        assert 2.0 < ratio < 8.0, (expr[:20], ratio)


def test_exclusion_id_scan_is_cheaper_than_the_ranked_query(corpora: dict[int, Store]) -> None:
    store = corpora[6000]
    negative = parse_query("zzz -alpha -bravo").negative_expr
    assert negative is not None
    scan = lambda: store.conn.execute(FTS_IDS_SQL, (negative,)).fetchall()  # noqa: E731
    assert cost_ratio(scan, _ranked(store, negative)) < 1.0


def test_queries_without_exclusions_never_run_the_scan(
    notes_kb: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = open_kb(notes_kb)
    calls: list[str] = []
    index = app.store.leg_index("fts")
    original = index.ids

    def spy(phrases: Sequence[str]) -> frozenset[int]:
        calls.append(list(phrases))
        return original(phrases)

    monkeypatch.setattr(index, "ids", spy)
    app.search("rust ownership", limit=3)
    assert calls == []
    app.search("rust -async", limit=3)
    assert calls == [["async"]]
