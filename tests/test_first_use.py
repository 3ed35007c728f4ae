"""A first index with a slow embedder (ADR-0015): every file is searchable by its words
before its vectors exist, the partial vector leg is said everywhere (search, status, MCP
index_status, doctor), and a run killed during the vector pass resumes where it stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from groove_core.app import Groove
from groove_core.embedding import EmbedderError, EmbedderSpec, HashingEmbedder
from groove_core.hookspecs import hookimpl
from groove_core.indexer import IndexProgress, SourceFile, _new_document
from groove_core.mcp.server import build_mcp_server
from groove_core.sqlite.store import SCHEMA_VERSION, Store, check_consistency, connect
from groove_core.status import kb_status
from groove_core.testing import call_tools, make_kb
from groove_core.watch import Watcher
from tests.helpers import slow_embedder_site

NOTES = {
    f"n{i:02d}.md": f"# Note {i}\n\nThe lighthouse keeper wrote entry {i} about topic {i}.\n"
    for i in range(40)
}


class _Watched(HashingEmbedder):
    """The hashing embedder (identity ``NAME-hashing:64``), calling ``before_batch`` before
    each batch an index run embeds: a search's query goes through untouched."""

    def __init__(self, name: str, before_batch: Callable[[], None]) -> None:
        super().__init__(64)
        self.name, self.before_batch = name, before_batch

    @classmethod
    def spec(cls, name: str, before_batch: Callable[[], None]) -> EmbedderSpec:
        """A plugin's declaration of this embedder as ``[embedder] name = NAME``."""
        return EmbedderSpec(name, lambda config, settings: cls(name, before_batch))

    @property
    def identity(self) -> str:
        return f"{self.name}-hashing:64"

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if threading.current_thread().name == "groove-index-embed":
            self.before_batch()
        return super().embed_documents(texts)


class _Plugin:
    """The embedder ``gated``: past ``free`` batches of an index run, each waits for the
    gate, and each pauses ``pause`` seconds."""

    def __init__(self, free: int = 10**6, pause: float = 0.0) -> None:
        self.free, self.pause, self.calls = free, pause, 0
        self.gate = threading.Event()

    def _hold_up(self) -> None:
        self.calls += 1
        if self.calls > self.free:
            self.gate.wait(30.0)
        time.sleep(self.pause)

    @hookimpl
    def groove_embedders(self) -> list[EmbedderSpec]:
        return [_Watched.spec("gated", self._hold_up)]


def _open(kb: Path, plugin: _Plugin) -> Groove:
    return Groove.open(kb, extra_plugins=[("gated", plugin)])


def _wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


def _state(index: Path) -> tuple[int, int, int]:
    """(documents, chunks, chunks waiting for a vector) as another process sees them."""
    if not index.exists():
        return 0, 0, 0
    conn = connect(index)
    try:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM chunks), "
            "(SELECT count(*) FROM pending_vectors)"
        ).fetchone()
    except Exception:  # the schema is not created yet
        return 0, 0, 0
    finally:
        conn.close()
    return int(row[0]), int(row[1]), int(row[2])


def _note(embedded: int, chunks: int) -> str:
    percent = embedded * 100 // chunks
    return f"semantic part {percent}% embedded ({embedded:,} of {chunks:,} chunks)"


def test_every_file_is_searchable_and_the_partial_vector_leg_is_said_everywhere(
    tmp_path: Path,
) -> None:
    kb = make_kb(tmp_path / "kb", NOTES, config='[embedder]\nname = "gated"\nbatch_size = 4\n')
    plugin = _Plugin(free=2)  # two batches of 4 are embedded, then the embedder stalls
    app = _open(kb, plugin)
    reports: list[Any] = []
    run = threading.Thread(target=lambda: reports.append(app.index()))
    run.start()
    try:
        _wait_for(lambda: _state(app.index_file) == (40, 40, 32))
        searching = _open(kb, plugin)
        response = searching.search("lighthouse keeper entry 17")
        # The lexical legs searched every file, chunks without a vector included.
        assert "n17.md" in [hit.path for hit in response.results]
        note = _note(8, 40)
        assert any(note in w for w in response.warnings), response.warnings
        status = kb_status(searching)
        assert status["vectors_pending"] == 32 and note in status["semantic_note"]
        assert status["incomplete"] is False  # every document is in
        server = build_mcp_server(searching)
        found, state = call_tools(
            server, ("search", {"query": "lighthouse keeper"}), ("index_status", {})
        )
        assert any(note in w for w in found.structured_content["warnings"])
        assert state.structured_content["vectors_pending"] == 32
        assert note in state.structured_content["semantic_note"]
        doctor = searching.doctor()
        assert doctor.healthy and any(note in n for n in doctor.notes), doctor
        searching.close()
    finally:
        plugin.gate.set()
        run.join(timeout=60)
    assert reports and reports[0].chunks_embedded == 40 and reports[0].vectors_pending == 0
    done = _open(kb, plugin)
    assert not [w for w in done.search("lighthouse keeper").warnings if "semantic part" in w]
    assert kb_status(done)["semantic_note"] is None and not done.doctor().notes


def _slow_env(tmp_path: Path) -> dict[str, str]:
    site = slow_embedder_site(tmp_path, "gv_slow_first", delay=0.05)
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def _groove(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "groove_core", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _vectors(index: Path) -> dict[tuple[str, int], bytes]:
    store = Store.open(index)
    rows = store.conn.execute(
        "SELECT d.path, c.ordinal, v.embedding FROM chunks c JOIN documents d "
        "ON d.id = c.doc_id JOIN vec_chunks v ON v.chunk_id = c.id"
    )
    out = {(str(p), int(o)): bytes(e) for p, o, e in rows}
    store.close()
    return out


def test_sigkill_during_the_vector_pass_then_the_next_run_resumes(tmp_path: Path) -> None:
    config = '[embedder]\nname = "slow-hashing"\nbatch_size = 4\n'
    kb = make_kb(tmp_path / "kb", NOTES, config=config)
    env = _slow_env(tmp_path)
    index = kb / ".groove" / "index.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-m", "groove_core", "index", str(kb)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # Killed once every file is in and some vectors are stored, others not.
        _wait_for(lambda: _state(index)[0] == 40 and 0 < _state(index)[2] < 36)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    store = Store.open(index)
    assert check_consistency(store).ok
    pending, chunks = store.pending_vectors(), store.counts()["chunks"]
    store.close()
    assert 0 < pending < chunks == 40
    note = _note(chunks - pending, chunks)

    status = _groove(env, "status", str(kb), "--json")
    assert json.loads(status.stdout)["vectors_pending"] == pending, status.stderr
    human = _groove(env, "status", str(kb)).stdout
    assert f"vectors:        {note}" in human, human
    searched = _groove(env, "search", "lighthouse keeper", "--kb", str(kb), "--json")
    assert any(note in w for w in json.loads(searched.stdout)["warnings"]), searched.stdout
    doctor = _groove(env, "doctor", str(kb))
    assert doctor.returncode == 0 and f"note: {note}" in doctor.stdout, doctor.stdout

    resumed = _groove(env, "index", str(kb), "--json")
    report = json.loads(resumed.stdout)
    assert (report["added"], report["unchanged"]) == (0, 40), resumed.stderr
    assert report["chunks_embedded"] == pending and report["vectors_pending"] == 0
    # Exactly the vectors a clean build stores.
    clean = make_kb(tmp_path / "clean", NOTES, config=config)
    assert _groove(env, "index", str(clean)).returncode == 0
    assert _vectors(index) == _vectors(clean / ".groove" / "index.sqlite")
    assert _groove(env, "doctor", str(kb)).stdout.count("note:") == 0


def test_doctor_tells_a_lost_vector_from_one_not_embedded_yet(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", NOTES, config='[embedder]\nname = "hashing"\n')
    app = Groove.open(kb)
    app.index()
    store = Store.open(app.index_file)
    ids = [int(r[0]) for r in store.conn.execute("SELECT id FROM chunks ORDER BY id")]
    with store.transaction():
        # A lost vector (not waiting for one), a chunk both embedded and waiting, a mark
        # for no chunk, and a chunk that waits as it should.
        store.conn.execute("DELETE FROM vec_chunks WHERE chunk_id = ?", (ids[0],))
        store.conn.execute("INSERT INTO pending_vectors VALUES (?)", (ids[1],))
        store.conn.execute("INSERT INTO pending_vectors VALUES (?)", (ids[-1] + 100,))
        store.conn.execute("DELETE FROM vec_chunks WHERE chunk_id = ?", (ids[2],))
        store.conn.execute("INSERT INTO pending_vectors VALUES (?)", (ids[2],))
    store.close()
    found = app.doctor()
    assert sorted(found.problems) == [
        "1 chunks both holding a vector and marked as waiting for one",
        "1 chunks marked as waiting for a vector that no longer exist",
        "1 chunks without a vector",
    ]
    assert any(_note(38, 40) in n for n in found.notes), found.notes
    repaired = app.doctor(repair=True)
    assert repaired.repaired, repaired
    after = app.doctor()
    assert after.healthy and not after.notes, after
    store = Store.open(app.index_file)
    assert store.pending_vectors() == 0 and store.counts()["chunks"] == 40
    store.close()


def test_an_index_of_schema_4_gains_the_pending_table(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", NOTES, config='[embedder]\nname = "hashing"\n')
    app = Groove.open(kb)
    app.index()
    store = Store.open(app.index_file)
    with store.transaction():
        store.conn.execute("DROP TABLE pending_vectors")
        store.set_meta("schema_version", "4")
    store.close()
    store = Store.open(app.index_file)
    assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
    assert store.pending_vectors() == 0 and check_consistency(store).ok
    store.close()


def test_a_rewritten_chunk_never_gets_the_vector_of_its_old_text(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", {"a.md": "# A\n\nold text\n"}, config=None)
    rules = Groove.open(kb).config.index
    src = SourceFile("a.md", kb / "a.md", 1, 1)
    old, _ = _new_document(src, "# A\n\nold text\n", "h1", rules)
    new, _ = _new_document(src, "# A\n\nnew text\n", "h2", rules)
    store = Store.create(tmp_path / "index.sqlite")
    store.write_documents([old], None)
    read = store.pending_chunks(0, 10)
    store.write_documents([new], None)  # rewritten by another run meanwhile: the same id
    assert [r[0] for r in store.pending_chunks(0, 10)] == [r[0] for r in read]
    store.bind_embedder("test:64", 64)
    assert store.fill_vectors(read, np.ones((len(read), 64), np.float32)) == 0
    assert store.pending_vectors() == len(new.chunks)
    again = store.pending_chunks(0, 10)
    assert store.fill_vectors(again, np.ones((len(again), 64), np.float32)) == len(again)
    assert store.fill_vectors(again, np.ones((len(again), 64), np.float32)) == 0  # once only
    assert store.pending_vectors() == 0 and check_consistency(store).ok
    store.close()


def test_the_watcher_indexes_an_edit_before_its_vector_pass_ends(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", NOTES, config='[embedder]\nname = "gated"\nbatch_size = 2\n')
    plugin = _Plugin(pause=0.25)  # 20 batches: ~5 s of embedding
    plugin.gate.set()
    watcher = Watcher(_open(kb, plugin), interval=0.05, debounce=0.1)
    thread = watcher.start()
    seen: list[tuple[bool, int]] = []

    def edited_while_embedding() -> bool:
        conn = connect(watcher.app.index_file)
        try:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM chunks WHERE content LIKE '%zebra%'), "
                "(SELECT count(*) FROM pending_vectors)"
            ).fetchone()
        except Exception:
            return False
        finally:
            conn.close()
        seen.append((bool(row[0]), int(row[1])))
        return bool(row[0]) and int(row[1]) > 0

    try:
        _wait_for(lambda: 0 < _state(watcher.app.index_file)[2] < 36)
        (kb / "n00.md").write_text("# Note 0\n\nA zebra crossing.\n", encoding="utf-8")
        _wait_for(edited_while_embedding, timeout=20)
        # ... and the server goes on to finish the embedding.
        _wait_for(lambda: _state(watcher.app.index_file)[2] == 0 and watcher.runs >= 2)
    finally:
        watcher.stop.set()
        thread.join(timeout=30)
    store = Store.open(watcher.app.index_file)
    assert check_consistency(store).ok and store.pending_vectors() == 0
    store.close()


def test_ctrl_c_during_the_vector_pass_keeps_what_was_stored(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", NOTES, config='[embedder]\nname = "hashing"\nbatch_size = 4\n')
    app = Groove.open(kb)

    def interrupt(event: IndexProgress) -> None:
        if event.stage == "embedding" and event.chunks_embedded >= 12:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        app.index(progress=interrupt)
    store = Store.open(app.index_file)
    assert check_consistency(store).ok and store.incomplete() is None
    assert store.pending_vectors() == 40 - 12
    store.close()
    report = Groove.open(kb).index()
    assert (report.added, report.unchanged, report.chunks_embedded) == (0, 40, 28)


class _RecordingPlugin:
    """The embedder ``recording``, noting how many documents the index held when an index
    run first asked it for vectors; it raises instead when ``fail`` is set."""

    def __init__(self, index: Path, *, fail: bool = False) -> None:
        self.index, self.fail = index, fail
        self.first: int | None = None

    def _record(self) -> None:
        if self.first is None:
            self.first = _state(self.index)[0]
        if self.fail:
            raise RuntimeError("the model server went away")

    @hookimpl
    def groove_embedders(self) -> list[EmbedderSpec]:
        return [_Watched.spec("recording", self._record)]


#: More chunks than one lexical batch (LEXICAL_BATCH_CHUNKS), one chunk per file.
MANY = {f"m{i:04d}.md": f"# Entry {i}\n\nThe lighthouse log, entry {i}.\n" for i in range(1200)}


def test_the_vector_pass_starts_while_the_lexical_pass_goes_on(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", MANY, config='[embedder]\nname = "recording"\n')
    index = Groove.open(kb).index_file
    plugin = _RecordingPlugin(index)
    report = Groove.open(kb, extra_plugins=[("recording", plugin)]).index()
    # The first batches were embedded beside the reading of the later files (the second
    # core), not after the last one.
    assert plugin.first is not None and 0 < plugin.first < len(MANY)
    assert report.chunks_embedded == len(MANY) and report.vectors_pending == 0
    assert _state(index) == (len(MANY), len(MANY), 0)


def test_an_embedder_failing_during_the_lexical_pass_leaves_every_file_searchable(
    tmp_path: Path,
) -> None:
    kb = make_kb(tmp_path / "kb", MANY, config='[embedder]\nname = "recording"\n')
    index = Groove.open(kb).index_file
    plugin = _RecordingPlugin(index, fail=True)
    app = Groove.open(kb, extra_plugins=[("recording", plugin)])
    # an unexpected error of the embedder is one line naming it (EmbedderError)
    with pytest.raises(EmbedderError, match="model server went away"):
        app.index()
    # Raised after the lexical pass: every file is in and searchable by its words, the
    # run is complete, and no vector was stored.
    assert plugin.first is not None and plugin.first < len(MANY)
    assert _state(index) == (len(MANY), len(MANY), len(MANY))
    store = Store.open(index)
    assert store.incomplete() is None
    store.close()
    plugin.fail = False
    found = Groove.open(kb, extra_plugins=[("recording", plugin)]).search("entry 1177")
    assert "m1177.md" in [hit.path for hit in found.results]


def test_a_rewritten_file_whose_old_chunks_waited_gets_its_vectors(tmp_path: Path) -> None:
    # SQLite gives the rewritten note's chunk the id its old chunk freed, which the vector
    # pass may already have passed during the lexical pass: it must still be embedded.
    kb = make_kb(tmp_path / "kb", {"a.md": "# A\n\nalpha\n", "b.md": "# B\n\nbeta\n"})
    first = Groove.open(kb).index(stop=lambda: True)
    assert first.vectors_pending == 2
    time.sleep(0.01)
    (kb / "b.md").write_text("# B\n\nbeta, rewritten\n", encoding="utf-8")
    report = Groove.open(kb).index()
    assert (report.changed, report.vectors_pending) == (1, 0)
    assert _state(Groove.open(kb).index_file) == (2, 2, 0)
