"""The trigram leg leaves out a query's common phrases: which ones, and what it saves.

A corpus where one phrase is in every row and another in a few, on a real index file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from groove_core.builtins.legs import COMMON_PHRASE_MIN_ROWS, common_phrases
from groove_core.query import match_expression, parse_query
from groove_core.sqlite.lexical_legs import FTS_RANKED_SQL
from groove_core.sqlite.store import Store
from groove_core.testing import cost_ratio, make_kb, open_kb

ROWS = 4_000
RARE_EVERY = 400  # "zephyr" is in 10 rows, 0.25% of them


def _body(i: int) -> str:
    rare = " zephyr" if i % RARE_EVERY == 0 else ""
    return f"the system is running as configured している状態です row {i}{rare}"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    store = Store.create(tmp_path_factory.mktemp("common") / "index.sqlite")
    with store.transaction():
        store.conn.executemany(
            "INSERT INTO fts_chunks(rowid, heading, context, content) VALUES (?, ?, ?, ?)",
            [(i, f"heading {i}", "context", _body(i)) for i in range(1, ROWS + 1)],
        )
    return store


def test_phrases_in_more_than_the_share_of_rows_are_common(store: Store) -> None:
    phrases = ("running", "している", "zephyr")
    assert common_phrases(store, phrases, 0.05) == ["running", "している"]
    # Case and diacritics are folded as the trigram tokenizer folds them.
    assert common_phrases(store, ("RUNNING", "Zéphyr"), 0.05) == ["RUNNING"]


def test_the_rarest_phrase_always_stays(store: Store) -> None:
    assert common_phrases(store, ("running", "している"), 0.05) == ["している"]
    assert common_phrases(store, ("running",), 0.05) == []


def test_a_phrase_under_the_row_floor_is_never_common(store: Store) -> None:
    # 10 rows are 0.25% of the corpus, over a 0.1% share, but far under the floor.
    assert COMMON_PHRASE_MIN_ROWS > 10
    assert common_phrases(store, ("zephyr", "nothing-here"), 0.001) == []


def test_counts_follow_commits_from_another_connection(store: Store, tmp_path: Path) -> None:
    other = Store.open(store.path)
    try:
        assert common_phrases(other, ("quokka", "zephyr"), 0.05) == []
        with store.transaction():
            store.conn.executemany(
                "INSERT INTO fts_chunks(rowid, heading, context, content) VALUES (?, ?, ?, ?)",
                [(ROWS + i, "h", "c", "quokka") for i in range(1, 1_500)],
            )
        assert common_phrases(other, ("quokka", "zephyr"), 0.05) == ["quokka"]
    finally:
        with store.transaction():
            # A contentless table deletes a row given the text it was written with.
            store.conn.executemany(
                "INSERT INTO fts_chunks(fts_chunks, rowid, heading, context, content) "
                "VALUES ('delete', ?, ?, ?, ?)",
                [(ROWS + i, "h", "c", "quokka") for i in range(1, 1_500)],
            )
        other.close()


def _ranked(store: Store, expr: str) -> object:
    return store.conn.execute(FTS_RANKED_SQL, (2.0, 1.0, 1.0, expr, 50)).fetchall()


def test_leaving_common_phrases_out_saves_most_of_the_legs_cost(store: Store) -> None:
    query = parse_query("is the system running as configured? している zephyr")
    common = common_phrases(store, query.positives, 0.05)
    kept = [p for p in query.positives if p not in common]
    assert kept == ["zephyr"]
    full, pruned = str(query.match_expr), match_expression(kept, query.negatives)
    # CPU time (see cost_ratio): every row matched by the full expression is scored; the
    # pruned one scores 10 rows and looks up the counts, cached after the first query.
    lookup_and_rank = lambda: (  # noqa: E731
        common_phrases(store, query.positives, 0.05),
        _ranked(store, pruned),
    )
    assert cost_ratio(lookup_and_rank, lambda: _ranked(store, full)) < 0.2


def test_the_leg_reports_what_it_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    notes = {f"n{i}.md": f"# Note {i}\n\nthe system is running {i}\n" for i in range(30)}
    notes["rare.md"] = "# Rare\n\nthe system has a zephyr\n"
    app = open_kb(make_kb(tmp_path / "kb", notes))
    monkeypatch.setattr("groove_core.builtins.legs.COMMON_PHRASE_MIN_ROWS", 0)
    _, legs, _ = app.search_explained("system zephyr", limit=3)
    fts = next(leg for leg in legs if leg.name == "fts")
    assert fts.meta["common_dropped"] == ["system"]
    assert fts.meta["expr"] == '"zephyr"'
    assert [h.chunk_id for h in fts.hits] == [next(iter(_ids(app, "rare.md")))]
    # The word leg leaves the same word out, and keeps every term for the coverage rule.
    word = next(leg for leg in legs if leg.name == "word")
    assert word.meta["common_dropped"] == ["system"]
    assert word.meta["expr"] == '"zephyr"' and word.meta["terms"] == ["system", "zephyr"]
    assert [h.chunk_id for h in word.hits] == [h.chunk_id for h in fts.hits]
    # Off: every phrase stays and the leg says nothing.
    (tmp_path / "kb" / "groove.toml").write_text(
        '[embedder]\nname = "hashing"\n[search]\nlexical_common_share = 0\n', encoding="utf-8"
    )
    app = open_kb(tmp_path / "kb", index=False)
    _, legs, _ = app.search_explained("system zephyr", limit=3)
    fts = next(leg for leg in legs if leg.name == "fts")
    word = next(leg for leg in legs if leg.name == "word")
    assert "common_dropped" not in fts.meta and "common_dropped" not in word.meta
    assert len(fts.hits) == 31 and len(word.hits) == 31


def _ids(app: object, path: str) -> frozenset[int]:
    store = app.store  # type: ignore[attr-defined]
    doc = next(d for d in store.documents() if d.path == path)
    return frozenset(c.chunk_id for c in store.document_chunks(doc.doc_id))


def test_the_row_counts_kept_are_bounded(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    # Long queries (a pasted log's every token) ask for many terms' counts; an index keeps
    # at most MAX_CACHED of them, then starts again, and still answers right.
    from groove_core.sqlite import lexical_legs

    monkeypatch.setattr(lexical_legs, "MAX_CACHED", 5)
    index = store.leg_index("word")
    assert index is not None
    counts = index._counts  # type: ignore[attr-defined]
    _, total = index.rows([f"zq{i}" for i in range(8)])
    assert len(counts.cache) == 8  # this query's terms are all counted
    assert index.rows(["zq1"]) == ({"zq1": 0}, total) and len(counts.cache) == 1
