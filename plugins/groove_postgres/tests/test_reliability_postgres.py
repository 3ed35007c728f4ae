"""Never a corrupt index on PostgreSQL: kills at random points, two runs at once, doctor
finding and repairing rows that disagree (tests/test_reliability.py for SQLite); and a
server that dies under a running MCP server: an error at once, service again once it is
back."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, LiteralString

import psycopg
from groove_postgres.backend import PostgresBackend
from groove_postgres.errors import classify
from groove_postgres.settings import PostgresSettings
from groove_postgres.store import PostgresStore
from groove_postgres.testing import EmbeddedPostgres, store_toml

from evaldata import EVALDATA
from groove_core.app import Groove
from groove_core.mcp.server import build_mcp_server
from groove_core.testing import BILINGUAL, KillRounds, drive_mcp, make_kb, open_kb

KILL_CONFIG = '[embedder]\nname = "hashing"\nbatch_size = 8\n'


def _content(app: Groove) -> set[tuple[str, str, int, str]]:
    """Everything a search can return, independent of row ids and timestamps."""
    store = app.backend.open()
    try:
        with store.snapshot():
            docs = store.documents()
            states = store.doc_states()
            rows = store.chunk_rows(sorted(store.chunk_ids_for_docs(d.doc_id for d in docs)))
        return {(r.path, states[r.path].content_hash, r.ordinal, r.content) for r in rows.values()}
    finally:
        store.close()


def _corpus(root: Path, files: int, dsn: str) -> Path:
    kb = make_kb(root, {}, config=KILL_CONFIG + f'[store]\nbackend = "postgres"\ndsn = "{dsn}"\n')
    source = sorted((EVALDATA / "jsquad-ja-para" / "docs").glob("*.md"))[:files]
    assert len(source) == files, "the shared jsquad collection is missing"
    for path in source:
        shutil.copy(path, kb / path.name)
    return kb


def _start_index(kb: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "groove_core", "index", str(kb), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )


def _consistent(app: Groove) -> None:
    found = app.backend.diagnose(repair=False)
    # A kill part-way through a first run leaves it marked incomplete, and without the HNSW
    # index it builds at its end (the next run builds it), nothing else.
    assert all("incomplete" in p or "vector index" in p for p in found.problems), found.problems
    assert not found.environment and not found.rebuild


def test_sigkill_at_random_points_never_corrupts_the_index(
    tmp_path: Path, postgres_dsn: str
) -> None:
    files = 400
    kb = _corpus(tmp_path / "kb", files, postgres_dsn)
    # A clean build of the same files under another KB key in the same database.
    clean = _corpus(tmp_path / "clean", files, postgres_dsn)
    expected = _content(_indexed(clean))
    killer = KillRounds.timed(
        lambda: _start_index(kb), timeout=300, seed=20261130, share=(0.2, 0.9)
    )
    for round_ in killer.rounds(12, enough=5):
        rebuild = round_ % 2 == 1  # alternate: a first run into an emptied KB, a rebuild
        if not rebuild:
            _forget(kb)
        killer.kill(_start_index(kb, *(["--rebuild"] if rebuild else [])))
        app = Groove.open(kb)
        if rebuild:
            # The old index kept serving, whole.
            assert _content(app) == expected, f"a killed rebuild changed the index ({round_})"
        elif app.backend.exists():
            _consistent(app)
        report = Groove.open(kb).index()
        assert report.documents_total == files
        assert _content(Groove.open(kb)) == expected, f"differs from a clean build ({round_})"
        assert Groove.open(kb).doctor().healthy
    assert killer.kills >= 4, f"only {killer.kills} runs were still going when killed"
    # No staging rows are left behind.
    with psycopg.connect(postgres_dsn) as conn:
        states = conn.execute("SELECT name, state FROM groove.kbs ORDER BY name").fetchall()
    assert states == [("clean", "live"), ("kb", "live")]


_MARKED = (
    "SELECT count(*) FROM groove.meta m JOIN groove.kbs k ON k.id = m.kb "
    "WHERE k.name = 'kb' AND k.state = 'live' AND m.key = 'df_pending'"
)


def test_a_killed_filling_build_leaves_statistics_that_the_next_run_recounts(
    tmp_path: Path, postgres_dsn: str
) -> None:
    """A first index keeps its document frequencies in memory until its end, under a meta
    mark written with its first rows; SIGKILLed in between, the next run recounts them from
    the stored rows before anything else (or ``doctor --repair`` does): the same
    statistics as a clean build."""
    files = 200
    kb = _corpus(tmp_path / "kb", files, postgres_dsn)
    clean = _corpus(tmp_path / "clean", files, postgres_dsn)
    _indexed(clean)
    for repair in (False, True):
        if repair:
            _forget(kb)
        _kill_at_the_mark(kb, files, postgres_dsn)
        # Until the next run, the KB reads as incomplete, nothing else.
        _consistent(Groove.open(kb))
        if repair:
            Groove.open(kb).backend.diagnose(repair=True)
            with psycopg.connect(postgres_dsn, autocommit=True) as conn:
                assert _count(conn, _MARKED) == 0
            _consistent(Groove.open(kb))  # now with the frequencies compared
        report = Groove.open(kb).index()
        assert report.documents_total == files
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            assert _count(conn, _MARKED) == 0
        assert _stats(kb) == _stats(clean)
        assert Groove.open(kb).doctor().healthy


def _kill_at_the_mark(kb: Path, files: int, dsn: str) -> None:
    """Start a first index of ``kb`` and SIGKILL it once it has committed rows whose
    document frequencies wait in memory."""
    proc = _start_index(kb)
    deadline = time.monotonic() + 120
    with psycopg.connect(dsn, autocommit=True) as conn:
        while proc.poll() is None and time.monotonic() < deadline:
            schema = conn.execute("SELECT to_regclass('groove.meta')").fetchone()
            if schema and schema[0] is not None and _count(conn, _MARKED):
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        assert _count(conn, _MARKED) == 1, "the run ended before it could be killed"
        written = _count(
            conn,
            "SELECT count(*) FROM groove.documents d JOIN groove.kbs k "
            "ON k.id = d.kb WHERE k.name = 'kb' AND k.state = 'live'",
        )
    # The mark (asserted above) says the run had not ended; with every file written before
    # any vector (ADR-0015), its last rows may already be in when it is killed.
    assert 0 < written <= files


def _count(conn: psycopg.Connection[Any], sql: LiteralString) -> int:
    row = conn.execute(sql).fetchone()
    return int(row[0]) if row else 0


def _stats(kb: Path) -> dict[str, Any]:
    store = Groove.open(kb).backend.open()
    assert isinstance(store, PostgresStore)
    try:
        stats: dict[str, Any] = store.lexical_stats()
    finally:
        store.close()
    return stats


def _indexed(kb: Path) -> Groove:
    app = Groove.open(kb)
    app.index()
    return app


def _indexed_notes(tmp_path: Path, dsn: str) -> tuple[Path, Groove]:
    """The bilingual notes in a KB on PostgreSQL, indexed."""
    kb = make_kb(tmp_path / "notes", BILINGUAL, config=store_toml("postgres", dsn))
    return kb, _indexed(kb)


def _postgres_store(app: Groove) -> PostgresStore:
    store = app.backend.open()
    assert isinstance(store, PostgresStore)
    return store


def _forget(kb: Path) -> None:
    """Delete the KB's rows, as if it had never been indexed."""
    backend = Groove.open(kb).backend
    assert isinstance(backend, PostgresBackend)
    backend._drop("live")
    backend.close()


def test_doctor_repairs_nothing_while_an_index_run_holds_the_kb(
    tmp_path: Path, postgres_dsn: str
) -> None:
    kb, app = _indexed_notes(tmp_path, postgres_dsn)
    store = _postgres_store(app)
    with store.transaction() as conn:
        conn.execute("UPDATE groove.kbs SET nrow = nrow + 3 WHERE id = %s", (store.kb_id,))
    backend = app.backend
    assert isinstance(backend, PostgresBackend)
    # A run under way owns the KB's rows: --repair says so and leaves them alone.
    with backend.db.run_lock("notes"):
        busy = app.doctor(repair=True)
    assert not busy.repaired
    assert any("index run of this KB is under way" in e for e in busy.environment)
    assert any("rows recorded" in p for p in Groove.open(kb).doctor().problems)
    assert Groove.open(kb).doctor(repair=True).repaired
    assert Groove.open(kb).doctor().healthy


def test_two_concurrent_index_runs_serialise(tmp_path: Path, postgres_dsn: str) -> None:
    kb = make_kb(tmp_path / "notes", BILINGUAL, config=store_toml("postgres", postgres_dsn))
    backend = Groove.open(kb).backend
    assert isinstance(backend, PostgresBackend)
    # While the KB's run lock is held, a run waits and writes nothing.
    with backend.db.run_lock("notes"):
        waiting = _start_index(kb)
        time.sleep(2.0)
        assert waiting.poll() is None
        assert not backend.exists() or backend.open().counts()["documents"] == 0
    assert waiting.wait(timeout=120) == 0
    assert backend.open().counts()["documents"] == len(BILINGUAL)
    # Two runs started together (a rebuild and an update): both finish, one after the other.
    (kb / "notes" / "extra.md").write_text("# Extra\n\nanother note\n", encoding="utf-8")
    runs = [_start_index(kb, "--rebuild"), _start_index(kb)]
    codes = [p.wait(timeout=120) for p in runs]
    assert codes == [0, 0], [p.stderr.read() if p.stderr else b"" for p in runs]
    app = Groove.open(kb)
    assert app.backend.open().counts()["documents"] == len(BILINGUAL) + 1
    assert app.doctor().healthy
    # In one process too: two threads' index runs queue on the lock.
    errors: list[BaseException] = []

    def run() -> None:
        try:
            Groove.open(kb).index(rebuild=True)
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    assert Groove.open(kb).doctor().healthy


def test_doctor_finds_and_repairs_disagreeing_rows(tmp_path: Path, postgres_dsn: str) -> None:
    kb, app = _indexed_notes(tmp_path, postgres_dsn)
    expected = _content(app)
    store = _postgres_store(app)
    with store.transaction() as conn:
        victim = conn.execute(
            "SELECT c.id FROM groove.chunks c JOIN groove.documents d ON d.id = c.doc_id "
            "WHERE d.path = 'notes/rust.md' ORDER BY c.id LIMIT 1"
        ).fetchone()
        assert victim is not None
        conn.execute("DELETE FROM groove.vectors WHERE chunk_id = %s", victim)
        conn.execute("UPDATE groove.kbs SET nrow = nrow + 3 WHERE id = %s", (store.kb_id,))
        conn.execute("DELETE FROM groove.word_df WHERE kb = %s AND term = 'rust'", (store.kb_id,))
        conn.execute(
            "UPDATE groove.word_tf SET c = c + 1 WHERE kb = %s AND term = 'rust'", (store.kb_id,)
        )
        conn.execute(
            "UPDATE groove.trigram_df SET df = df + 1 WHERE kb = %s AND tri = 'rus'",
            (store.kb_id,),
        )
        # The trigram leg's postings of a surface word, and the word in its vocabulary.
        conn.execute(
            "UPDATE groove.word_tf SET h = h + 1 WHERE kb = %s AND term = E'\\x1frust'",
            (store.kb_id,),
        )
        conn.execute(
            "DELETE FROM groove.surface_terms WHERE kb = %s AND term = 'rust'", (store.kb_id,)
        )
    found = app.doctor()
    assert not found.healthy
    text = "\n".join(found.problems)
    assert "1 chunks without a vector" in text
    assert "3 rows recorded" not in text and "rows recorded" in text
    assert "word leg's document frequencies disagree" in text
    assert "lexical leg's document frequencies disagree" in text
    assert "term frequencies (postings) disagree" in text
    assert "vocabulary lacks 1 words" in text
    repaired = app.doctor(repair=True)
    assert repaired.repaired and repaired.reindexed == ["notes/rust.md"]
    assert Groove.open(kb).doctor().healthy
    assert _content(Groove.open(kb)) == expected


def _vector_index(tmp_path: Path, dsn: str) -> tuple[Path, Groove, PostgresStore, str]:
    """The bilingual notes indexed on PostgreSQL, their store and the name of its vector
    index (in the groove schema), for a test to damage."""
    kb, app = _indexed_notes(tmp_path, dsn)
    store = _postgres_store(app)
    return kb, app, store, f"vectors_hnsw_{store.kb_id}"


def test_doctor_reports_a_missing_vector_index_and_repair_builds_it(
    tmp_path: Path, postgres_dsn: str
) -> None:
    kb, app, store, index = _vector_index(tmp_path, postgres_dsn)
    with store.transaction() as conn:
        conn.execute(f"DROP INDEX groove.{index}")  # a run killed before it built it
    found = app.doctor()
    assert not found.healthy and not found.rebuilt
    assert any(f"vector index ({index}) is missing" in p for p in found.problems)
    repaired = app.doctor(repair=True)
    assert repaired.repaired and repaired.reindexed == []
    assert Groove.open(kb).doctor().healthy


def test_doctor_reports_an_invalid_vector_index_and_repair_rebuilds_it(
    tmp_path: Path, postgres_dsn: str
) -> None:
    kb, app, store, index = _vector_index(tmp_path, postgres_dsn)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        # What a REINDEX CONCURRENTLY that failed part way leaves: an index never used.
        conn.execute(
            f"UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'groove.{index}'::regclass"
        )
    found = app.doctor()
    assert not found.healthy
    assert any("is invalid (a build of it failed part way)" in p for p in found.problems)
    repaired = app.doctor(repair=True)
    assert repaired.repaired and repaired.reindexed == []
    with store.transaction() as conn:
        assert store.vector_index_state(conn) == "valid"
    assert Groove.open(kb).doctor().healthy


def test_a_damaged_index_is_rebuilt(tmp_path: Path, postgres_dsn: str) -> None:
    kb, app = _indexed_notes(tmp_path, postgres_dsn)
    expected = _content(app)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        # A column every search reads (the word leg's postings: a chunk's length).
        conn.execute("ALTER TABLE groove.word_tf RENAME COLUMN len TO len_lost")
    try:
        result = Groove.open(kb).search("rust")
    except Exception as err:
        assert "damaged" in str(err) and "doctor --repair" in str(err)
    else:
        raise AssertionError(f"searched a damaged index: {result}")
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE groove.word_tf RENAME COLUMN len_lost TO len")
    assert _content(Groove.open(kb)) == expected


def test_a_killed_server_is_an_error_at_once_and_a_restarted_one_serves_again(
    tmp_path: Path,
) -> None:
    # A server of its own: this test kills it. Commits durable at once, as on a real
    # server: the fixture's synchronous_commit=off loses the index to a kill that comes
    # within the WAL writer's delay of the last commit, and the restart then has no KB.
    server = EmbeddedPostgres.start(settings={"synchronous_commit": "on"})
    try:
        dsn = server.create_database("kb")
        app = open_kb(make_kb(tmp_path / "notes", BILINGUAL, config=store_toml("postgres", dsn)))
        app.close()
        mcp = build_mcp_server(app)
        seen: list[tuple[float, Any]] = []

        async def search(client: Any) -> Any:
            began = time.monotonic()
            # Bounded here so that a call that never answers fails the test, not hangs it;
            # loose, since the first call loads the model and the last waits for a restart
            # on a busy machine: "at once" is the elapsed < 5 s asserted below.
            result = await asyncio.wait_for(
                client.call_tool("search", {"query": "rust", "limit": 3}), timeout=90
            )
            seen.append((time.monotonic() - began, result))
            return result

        async def scenario(client: Any) -> None:
            assert not (await search(client)).is_error  # the pool holds a connection now
            server.kill()
            for _ in range(2):  # the same session: each call answers, none waits forever
                await search(client)
            server.restart()
            await search(client)  # the pool reconnects; groove is not restarted

        drive_mcp(mcp, scenario)
        for elapsed, result in seen[1:3]:
            message = result.content[0].text
            assert result.is_error, message
            assert elapsed < 5, (elapsed, message)
            assert "\n" not in message and "Traceback" not in message
            # Refused (a new connection) or closed (one the server had open as it died).
            assert re.search(r"the PostgreSQL server (cannot be reached|closed the conn)", message)
            assert "The cause is the environment, not the index" in message
        elapsed, result = seen[3]
        assert not result.is_error, result.content[0].text
        assert result.structured_content["results"][0]["path"] == "notes/rust.md"
    finally:
        server.stop()


def test_a_lost_connection_is_named_as_such() -> None:
    lost = psycopg.OperationalError(
        "consuming input failed: server closed the connection unexpectedly\n\tThis probably "
        "means the server terminated abnormally\n\tbefore or while processing the request."
    )
    settings = PostgresSettings(dsn="host=db.example port=5432 dbname=notes")
    message = str(classify(lost, settings, "postgres db notes, KB notes", "reading"))
    assert message.startswith(
        "reading the index postgres db notes, KB notes failed: the PostgreSQL server closed "
        "the connection (consuming input failed: server closed the connection unexpectedly "
        "This probably means"
    )
    assert "dsn 'host=db.example port=5432 dbname=notes'" in message and "\n" not in message
