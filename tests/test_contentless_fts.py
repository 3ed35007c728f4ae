"""Schema 4: contentless lexical tables. Scores, ids and vocabulary counts stay those of a
table with its own copy of the text, through edits, migration and kills."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from groove_core.builtins.legs import fts_version, word_version
from groove_core.leg_index import meta_key
from groove_core.query import normalize
from groove_core.sqlite import store as store_module
from groove_core.sqlite import word_table
from groove_core.sqlite.lexical_legs import FTS_IDS_SQL, FTS_RANKED_SQL
from groove_core.sqlite.store import (
    SCHEMA_VERSION,
    VECTORS_VERSION_KEY,
    Store,
    check_consistency,
    connect,
)
from groove_core.storage import IndexEnvironmentError
from groove_core.testing import make_kb, open_kb
from tests.helpers import to_schema_3

FILES = {
    f"notes/n{i:02d}.md": (
        f"# Note {i}\n\nThe system is running as configured, row {i}. 状態管理について{i % 3}。\n\n"
        f"## Details {i}\n\n{'pipelines ' * (i % 4)}している {'zephyr' if i % 5 == 0 else ''}\n"
    )
    for i in range(30)
}
QUERIES = ('"system"', '"している" OR "zephyr"', '"状態管理"', '"pipelines" AND "running"')
WORD_QUERIES = ('"状態" OR "管理"', '"pipeline"', '"zephyr" OR "system"')
WORD_RANKED_SQL = (
    "SELECT rowid, bm25(word_chunks, 2.0, 1.0, 1.0) AS s FROM word_chunks "
    "WHERE word_chunks MATCH ? ORDER BY s, rowid LIMIT 50"
)


def _lexical_state(conn: Any) -> dict[str, Any]:
    """Everything searches read from the lexical tables: ranked rows with their bm25
    scores, id scans and vocabulary counts."""
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.v USING fts5vocab(main, fts_chunks, row)")
    return {
        "ranked": [
            conn.execute(FTS_RANKED_SQL, (2.0, 1.0, 1.0, q, 50)).fetchall() for q in QUERIES
        ],
        "ids": [sorted(conn.execute(FTS_IDS_SQL, (q,)).fetchall()) for q in QUERIES],
        "words": [conn.execute(WORD_RANKED_SQL, (q,)).fetchall() for q in WORD_QUERIES],
        "trigrams": conn.execute("SELECT term, doc, cnt FROM temp.v ORDER BY term").fetchall(),
        "word_vocab": conn.execute(
            "SELECT term, doc, cnt FROM word_vocab ORDER BY term"
        ).fetchall(),
    }


def _by_chunk(conn: Any, sql: str, queries: tuple[str, ...]) -> list[dict[tuple[str, int], float]]:
    """Ranked scores keyed by (path, ordinal): chunk ids differ between two builds."""
    keys = {
        int(r[0]): (str(r[1]), int(r[2]))
        for r in conn.execute(
            "SELECT c.id, d.path, c.ordinal FROM chunks c JOIN documents d ON d.id = c.doc_id"
        )
    }
    return [{keys[int(i)]: s for i, s in conn.execute(sql, (q,))} for q in queries]


def _tables(index: Path) -> set[str]:
    conn = connect(index)
    try:
        return {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()


def test_the_lexical_tables_hold_no_copy_of_the_text(tmp_path: Path) -> None:
    app = open_kb(make_kb(tmp_path / "kb", FILES), entry_points=False)
    tables = _tables(app.index_file)
    assert {"fts_chunks", "word_chunks", "fts_chunks_docsize"} <= tables
    assert "fts_chunks_content" not in tables and "word_chunks_content" not in tables
    assert app.search("状態管理", limit=3).results[0].match_spans  # spans come from chunks
    app.close()


def test_scores_after_edits_equal_a_clean_builds(tmp_path: Path) -> None:
    """FTS5's contentless_delete option would fail this: it never subtracts deleted rows
    from the row count and token totals that bm25 reads."""
    edited = make_kb(tmp_path / "edited", FILES)
    app = open_kb(edited, entry_points=False)
    for i in range(0, 30, 3):
        (edited / f"notes/n{i:02d}.md").write_text(f"# Edited {i}\n\nzephyr system {i}\n")
    for i in range(1, 30, 7):
        (edited / f"notes/n{i:02d}.md").unlink()
    app.index()
    app.index()  # nothing changed: nothing written
    files = {p.relative_to(edited).as_posix(): p.read_text() for p in edited.rglob("*.md")}
    clean = open_kb(make_kb(tmp_path / "clean", files), entry_points=False)
    for sql, queries in (
        (
            "SELECT rowid, bm25(fts_chunks, 2.0, 1.0, 1.0) FROM fts_chunks "
            "WHERE fts_chunks MATCH ?",
            QUERIES,
        ),
        (WORD_RANKED_SQL, WORD_QUERIES),
    ):
        assert _by_chunk(app.store.conn, sql, queries) == _by_chunk(clean.store.conn, sql, queries)
    assert check_consistency(app.store).ok
    app.close()
    clean.close()


def _as_schema_3(index: Path) -> Any:
    """Turn ``index`` back into a schema-3 index; its lexical state before migrating."""
    to_schema_3(index)
    old = connect(index)
    before = _lexical_state(old)
    old.close()
    return before


def test_schema_3_index_migrates_in_place_and_reads_the_same(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", FILES)
    app = open_kb(kb, entry_points=False)
    expected_hits = [(h.chunk_id, h.score) for h in app.search("状態管理 system", limit=10).results]
    index = app.index_file
    app.close()
    before = _as_schema_3(index)
    assert "fts_chunks_content" in _tables(index)

    store = Store.open(index)  # a search opens it: the migration runs there
    assert store.get_meta("schema_version") == str(SCHEMA_VERSION) == "7"  # 3 -> ... -> 7
    assert _lexical_state(store.conn) == before
    assert check_consistency(store).ok
    assert store.get_meta(VECTORS_VERSION_KEY)
    assert store.get_meta(meta_key("fts")) == fts_version()
    assert store.get_meta(meta_key("word")) == word_version()
    store.close()
    assert "fts_chunks_content" not in _tables(index)
    app = open_kb(kb, entry_points=False, index=False)
    assert [(h.chunk_id, h.score) for h in app.search("状態管理 system", limit=10).results] == (
        expected_hits
    )
    app.close()


_SLOW_MIGRATION = """
import sys, time
from pathlib import Path
from groove_core.sqlite import store as store_module
from groove_core import words
from groove_core.sqlite import word_table
from groove_core.sqlite.store import Store

fill = word_table.fill
def slow(conn, rows):
    fill(conn, rows)
    Path(sys.argv[2]).write_text("filling")
    time.sleep(120)
word_table.fill = slow
Store.open(Path(sys.argv[1]))
"""


def test_a_kill_during_the_migration_leaves_a_usable_index(tmp_path: Path) -> None:
    """The schema steps commit one by one; the lexical tables are then filled as the
    built-in legs' indexes, in a transaction of their own: a kill there leaves them
    unfilled (their versions unrecorded) and the next writable open fills them."""
    kb = make_kb(tmp_path / "kb", FILES)
    app = open_kb(kb, entry_points=False)
    index = app.index_file
    app.close()
    before = _as_schema_3(index)
    marker = tmp_path / "marker"
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_MIGRATION, str(index), str(marker)])
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None, "the migration ended before it was killed"
            assert time.monotonic() < deadline, "the migration never started filling"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    conn = connect(index)  # the killed fill is rolled back: the migrated schema, not filled
    version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    assert version == str(SCHEMA_VERSION)
    filled = conn.execute("SELECT key FROM meta WHERE key LIKE 'leg_index:%'").fetchall()
    assert len(filled) < 2  # the trigram index may be filled, the word one is not
    conn.close()
    store = Store.open(index)
    assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
    assert _lexical_state(store.conn) == before
    assert check_consistency(store).ok
    store.close()


def test_rows_written_under_other_rules_are_rewritten_before_a_delete(tmp_path: Path) -> None:
    """Another Python's Unicode database may normalise text differently; deleting a row
    with other text than it was written with would damage the contentless table."""
    kb = make_kb(tmp_path / "kb", FILES)
    app = open_kb(kb, entry_points=False)
    store = app.store
    with store.transaction():  # rows as other rules wrote them: here, upper-cased
        rows = store.conn.execute("SELECT id, heading, context, content FROM chunks").fetchall()
        for table in ("fts_chunks", "word_chunks"):
            store.conn.execute(f"INSERT INTO {table}({table}) VALUES ('delete-all')")
        upper = [(i, h.upper(), c.upper(), t.upper() + " OTHER") for i, h, c, t in rows]
        store.conn.executemany(
            "INSERT INTO fts_chunks(rowid, heading, context, content) VALUES (?, ?, ?, ?)", upper
        )
        word_table.fill(store.conn, upper)
        store.set_meta(meta_key("fts"), "unicode 0.0")
        store.set_meta(meta_key("word"), "unicode 0.0; words 0")
    (kb / "notes/n03.md").write_text("# Changed\n\nnew text\n")
    (kb / "notes/n04.md").unlink()
    app.index()
    assert check_consistency(app.store).ok
    assert app.store.get_meta(meta_key("fts")) == fts_version()
    assert app.store.get_meta(meta_key("word")) == word_version()
    assert not app.store.conn.execute(FTS_IDS_SQL, ('"OTHER"',)).fetchall()
    app.close()


@pytest.mark.parametrize("damage", ["fts_orphan", "word_orphan", "missing_fts"])
def test_doctor_repairs_contentless_tables(tmp_path: Path, damage: str) -> None:
    kb = make_kb(tmp_path / "kb", FILES)
    app = open_kb(kb, entry_points=False)
    conn = app.store.conn
    if damage == "fts_orphan":
        conn.execute(
            "INSERT INTO fts_chunks(rowid, heading, context, content) VALUES (9999, 'x', 'y', 'z')"
        )
    elif damage == "word_orphan":
        word_table.fill(conn, [(9999, "x", "y", "z")])
    else:
        victim, heading, context, content = conn.execute(
            "SELECT id, heading, context, content FROM chunks LIMIT 1"
        ).fetchone()
        conn.execute(
            "INSERT INTO fts_chunks(fts_chunks, rowid, heading, context, content) "
            "VALUES ('delete', ?, ?, ?, ?)",
            (victim, normalize(heading), normalize(context), normalize(content)),
        )
    assert not app.doctor().healthy
    app.doctor(repair=True)
    assert app.doctor().healthy
    assert check_consistency(app.store).ok
    app.close()


def test_a_step_another_connection_ran_meanwhile_is_not_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two reader threads opening a schema-3 index both see version 3; the second waits
    for the first's write lock and must then find the step done."""
    kb = make_kb(tmp_path / "kb", FILES)
    app = open_kb(kb, entry_points=False)
    index = app.index_file
    app.close()
    to_schema_3(index)
    runs: list[int] = []
    step = store_module.MIGRATIONS[3]
    monkeypatch.setitem(store_module.MIGRATIONS, 3, lambda conn: (runs.append(3), step(conn)))
    late = Store._connect(index, "index")  # opened, its version (3) read, not yet migrated
    Store.open(index).close()  # meanwhile another connection migrates
    late._migrate(3)
    assert runs == [3]
    assert late.get_meta("schema_version") == str(SCHEMA_VERSION) and check_consistency(late).ok
    late.close()


def test_a_migration_that_cannot_get_the_lock_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = make_kb(tmp_path / "kb", FILES)
    app = open_kb(kb, entry_points=False)
    index = app.index_file
    app.close()
    to_schema_3(index)
    connect_ = store_module.connect

    def impatient(path: Path | str) -> Any:
        conn = connect_(path)
        conn.execute("PRAGMA busy_timeout = 50")
        return conn

    monkeypatch.setattr(store_module, "connect", impatient)
    writer = connect(index)
    writer.execute("BEGIN IMMEDIATE")  # an index run holds the write lock
    try:
        with pytest.raises(IndexEnvironmentError, match="locked by another"):
            Store.open(index, "idx")
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    store = Store.open(index)  # and once the lock is free, it migrates
    assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
    store.close()
