"""An index run's embedding in a process of its own (``[embedder] own_process``): the same
vectors as in process, the child's errors and death reported as the embedder's, the child
gone when the run ends, and nothing of it on standard output."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from groove_core import embed_worker
from groove_core.app import Groove
from groove_core.config import load_config
from groove_core.embed_worker import (
    OWN_PROCESS_BYTES,
    OWN_PROCESS_CHUNKS,
    EmbedderProcess,
    serve,
    wanted,
)
from groove_core.embedding import (
    EmbedderError,
    HashingEmbedder,
    USEMultilingual,
    WrappedEmbedder,
)
from groove_core.testing import SAMPLE_NOTES, make_kb

ALWAYS = '[embedder]\nname = "hashing"\nown_process = "always"\n'
NEVER = '[embedder]\nname = "hashing"\nown_process = "never"\n'


def _vectors(app: Groove) -> dict[tuple[str, int], bytes]:
    store = app.store
    ids = [row[0] for row in store.chunk_texts(0, 10_000)]
    rows = store.chunk_rows(ids)
    return {(rows[i].path, rows[i].ordinal): v.tobytes() for i, v in store.embeddings(ids).items()}


@pytest.fixture
def children(monkeypatch: pytest.MonkeyPatch) -> list[subprocess.Popen[bytes]]:
    """Every child started from here on (they would be missed silently otherwise: a run
    whose child cannot start embeds the same vectors in its own process)."""
    started: list[subprocess.Popen[bytes]] = []
    real = EmbedderProcess._start

    def spy(self: EmbedderProcess) -> Any:
        conn = real(self)
        assert self._proc is not None
        started.append(self._proc)
        return conn

    monkeypatch.setattr(EmbedderProcess, "_start", spy)
    return started


def _config(tmp_path: Path, text: str) -> Any:
    kb = make_kb(tmp_path / "cfg", {}, config=text)
    return load_config(kb, None)


def test_the_child_embeds_what_the_process_would(
    tmp_path: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    inside = Groove.open(make_kb(tmp_path / "inside", config=NEVER))
    report_inside = inside.index()
    assert children == []
    child = Groove.open(make_kb(tmp_path / "child", config=ALWAYS))
    report_child = child.index()
    assert len(children) == 1 and children[0].poll() == 0  # started, and gone after the run
    assert report_child.warnings == report_inside.warnings == []
    assert report_child.chunks_embedded == report_inside.chunks_embedded > 0
    assert report_child.vectors_pending == 0
    assert _vectors(child) == _vectors(inside)
    hits = child.search("virtual environment").results
    assert hits and hits[0].path == "guide/install.md"


def test_the_default_embedder_gives_the_same_vectors_in_the_child(tmp_path: Path) -> None:
    """The real default model, loaded in the child: bit-identical vectors."""
    config = _config(tmp_path, '[embedder]\nown_process = "always"\n')
    texts = [body for body in SAMPLE_NOTES.values()]
    here = USEMultilingual().embed_documents(texts)
    worker = EmbedderProcess(config, USEMultilingual())
    try:
        there = worker.embed_documents(texts)
        assert worker._proc is not None and worker._dim == 512  # the child's word
    finally:
        worker.close()
    assert worker.warning is None
    assert there.dtype == np.float32
    assert np.array_equal(here, there)


def test_when_a_run_uses_a_child(tmp_path: Path) -> None:
    auto = _config(tmp_path, "")
    few, many = (lambda: OWN_PROCESS_CHUNKS - 1), (lambda: OWN_PROCESS_CHUNKS)
    use = USEMultilingual()
    assert wanted(auto, use, OWN_PROCESS_BYTES, few)
    assert not wanted(auto, use, OWN_PROCESS_BYTES - 1, few)
    # a run that reads little but starts with many chunks left by an interrupted one
    assert wanted(auto, use, 0, many)
    assert not wanted(auto, HashingEmbedder(), 10 * OWN_PROCESS_BYTES, many)

    class Wrapped(WrappedEmbedder):
        inner = USEMultilingual()

    assert wanted(auto, Wrapped(), OWN_PROCESS_BYTES, few)
    never = _config(tmp_path / "n", '[embedder]\nown_process = "never"\n')
    assert not wanted(never, use, 10 * OWN_PROCESS_BYTES, many)
    always = _config(tmp_path / "a", '[embedder]\nown_process = "always"\n')
    assert wanted(always, HashingEmbedder(), 0, few)


def test_a_run_that_resumes_many_waiting_chunks_uses_a_child(
    tmp_path: Path, children: list[subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`auto` with an embedder that computes here: a first run over a small KB keeps it;
    a run that finds many chunks waiting for a vector (one stopped before them) does not."""
    kb = make_kb(tmp_path / "kb", config='[embedder]\nname = "hashing"\n')
    monkeypatch.setattr(HashingEmbedder, "cpu_bound", True, raising=False)
    app = Groove.open(kb)
    first = app.index(stop=lambda: True)  # the vector pass stopped at once
    assert first.vectors_pending > 0 and children == []
    monkeypatch.setattr(embed_worker, "OWN_PROCESS_CHUNKS", first.vectors_pending)
    second = app.index()
    assert len(children) == 1
    assert second.vectors_pending == 0 and second.warnings == []


def test_a_reembed_uses_a_child(tmp_path: Path, children: list[subprocess.Popen[bytes]]) -> None:
    app = Groove.open(make_kb(tmp_path / "kb", config=ALWAYS))
    app.index()
    before = _vectors(app)
    started = len(children)
    report = app.index(reembed=True)
    assert len(children) > started and report.warnings == []
    assert _vectors(app) == before


def test_plugins_registered_in_process_keep_the_embedder_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child cannot rebuild a plugin that exists only in this process: such a run embeds
    here, whatever the setting."""
    started: list[int] = []
    real = embed_worker.EmbedderProcess._start

    def spy(self: EmbedderProcess) -> Any:
        started.append(1)
        return real(self)

    monkeypatch.setattr(embed_worker.EmbedderProcess, "_start", spy)
    installed = Groove.open(make_kb(tmp_path / "installed", config=ALWAYS))
    assert installed.index().chunks_embedded > 0
    assert started == [1]
    kb = make_kb(tmp_path / "kb", config=ALWAYS)
    app = Groove.open(kb, extra_plugins=[("nothing", object())])
    assert app.index().chunks_embedded > 0
    assert started == [1]


def test_the_child_is_gone_after_close(tmp_path: Path) -> None:
    worker = EmbedderProcess(_config(tmp_path, ALWAYS), HashingEmbedder())
    worker.embed_documents(["one text"])
    proc = worker._proc
    assert proc is not None and proc.poll() is None
    worker.close()
    assert proc.poll() == 0
    with pytest.raises(EmbedderError, match="closed"):
        worker.embed_documents(["again"])


def test_a_child_whose_parent_vanished_exits(tmp_path: Path) -> None:
    """The parent killed: its end of the socket closes, and the child leaves."""
    worker = EmbedderProcess(_config(tmp_path, ALWAYS), HashingEmbedder())
    worker.embed_documents(["one text"])
    proc, conn = worker._proc, worker._conn
    assert proc is not None and conn is not None
    conn.close()  # what the kernel does when the parent dies
    assert proc.wait(10) == 0


def test_a_child_that_dies_is_an_embedder_error(tmp_path: Path) -> None:
    worker = EmbedderProcess(_config(tmp_path, ALWAYS), HashingEmbedder())
    try:
        worker.embed_documents(["one text"])
        assert worker._proc is not None
        os.kill(worker._proc.pid, signal.SIGKILL)
        with pytest.raises(EmbedderError, match=r"ended unexpectedly \(signal 9\); \[embedder\]"):
            worker.embed_documents(["two texts", "more"])
    finally:
        worker.close()


def test_a_child_that_dies_mid_run(
    tmp_path: Path, children: list[subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run fails with the embedder's one-line error after every file is written: the
    KB is searchable by its words, and the next run embeds what is left."""
    config = ALWAYS + "batch_size = 2\n"
    kb = make_kb(tmp_path / "kb", config=config)
    real = EmbedderProcess.embed_documents
    calls: list[int] = []

    def dies_after_one(self: EmbedderProcess, texts: Sequence[str]) -> np.ndarray:
        calls.append(1)
        if len(calls) == 2:
            os.kill(children[0].pid, signal.SIGKILL)
        return real(self, texts)

    monkeypatch.setattr(EmbedderProcess, "embed_documents", dies_after_one)
    app = Groove.open(kb)
    with pytest.raises(EmbedderError, match="the embedding process ended unexpectedly"):
        app.index()
    assert children[0].poll() == -signal.SIGKILL
    assert app.search("virtual environment").results[0].path == "guide/install.md"
    assert app.store.pending_vectors() > 0
    monkeypatch.setattr(EmbedderProcess, "embed_documents", real)
    assert app.index().vectors_pending == 0


def test_an_interrupted_run_ends_its_child(
    tmp_path: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    kb = make_kb(tmp_path / "kb", config=ALWAYS + "batch_size = 2\n")

    def interrupt(event: Any) -> None:
        if event.stage == "embedding" and children:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Groove.open(kb).index(progress=interrupt)
    assert len(children) == 1
    assert children[0].poll() is not None


def test_close_does_not_wait_for_a_stuck_child(tmp_path: Path) -> None:
    """A batch in flight when the run is interrupted: close() kills the child instead of
    waiting for it, and the waiting embedding ends with an error."""
    worker = EmbedderProcess(_config(tmp_path, ALWAYS), HashingEmbedder())
    worker.embed_documents(["one text"])
    proc = worker._proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGSTOP)  # stands for a model that never answers
    errors: list[BaseException] = []

    def embed() -> None:
        try:
            worker.embed_documents(["stuck"])
        except EmbedderError as err:
            errors.append(err)

    waiting = threading.Thread(target=embed)
    waiting.start()
    while not worker._lock.locked():
        pass
    worker.close()
    waiting.join(10)
    assert not waiting.is_alive() and len(errors) == 1
    assert proc.poll() == -signal.SIGKILL


HANGS = """
import time
from groove_core import embedding

_embed = embedding.HashingEmbedder.embed_documents

def _hang(self, texts):
    if "hang" in texts:
        time.sleep(3600)  # a model that never answers
    return _embed(self, texts)

embedding.HashingEmbedder.embed_documents = _hang
"""

PARENT = """
import sys, threading, time
from pathlib import Path
from groove_core.config import load_config
from groove_core.embed_worker import EmbedderProcess
from groove_core.embedding import HashingEmbedder

worker = EmbedderProcess(load_config(Path(sys.argv[1]), None), HashingEmbedder())
worker.embed_documents(["x"])
threading.Thread(target=worker.embed_documents, args=(["hang"],), daemon=True).start()
print(worker._proc.pid, flush=True)
time.sleep(3600)
"""


def test_a_child_leaves_when_its_parent_is_killed(tmp_path: Path) -> None:
    """A parent killed outright while its child is stuck in a batch (it would never read
    the closed socket): the child notices and exits on its own."""
    kb = make_kb(tmp_path / "kb", config=ALWAYS)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HANGS, encoding="utf-8")
    (tmp_path / "parent.py").write_text(PARENT, encoding="utf-8")
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    parent = subprocess.Popen(
        [sys.executable, str(tmp_path / "parent.py"), str(kb)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    time.sleep(0.5)  # the child is in its batch
    parent.kill()
    parent.wait()
    for _ in range(100):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the child outlived its parent")


def test_a_child_with_another_embedder_is_not_used(tmp_path: Path) -> None:
    class Other(HashingEmbedder):
        @property
        def identity(self) -> str:
            return "something-else"

    worker = EmbedderProcess(_config(tmp_path, ALWAYS), Other())
    try:
        vectors = worker.embed_documents(["text"])
    finally:
        worker.close()
    assert np.array_equal(vectors, Other().embed_documents(["text"]))
    assert worker.warning == (
        "the embedding process made the embedder hashing-trigram:64, not something-else; "
        "the run embedded in its own process"
    )


def test_an_interpreter_that_is_not_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kb = make_kb(tmp_path / "kb", config=ALWAYS)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    report = Groove.open(kb).index()
    assert report.chunks_embedded == report.chunks_total > 0
    [(where, warning)] = report.warnings
    assert where == "[embedder] own_process"
    assert warning.startswith("the embedding process could not start: [Errno 2]")
    assert warning.endswith("; the run embedded in its own process")


def test_a_child_that_cannot_start_leaves_the_run_to_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An interpreter that cannot run the child (here one that exits at once): the run
    embeds as it would without a child, and says so."""
    kb = make_kb(tmp_path / "kb", config=ALWAYS)
    monkeypatch.setattr(sys, "executable", "/bin/false")
    report = Groove.open(kb).index()
    assert report.chunks_embedded == report.chunks_total > 0
    assert report.warnings == [
        (
            "[embedder] own_process",
            "the embedding process ended unexpectedly (exit status 1); "
            "the run embedded in its own process",
        )
    ]


class _Failing(HashingEmbedder):
    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if "boom" in texts:
            raise RuntimeError("out of memory in the model")
        if "refused" in texts:
            raise EmbedderError("the model refused the text")
        if "unpicklable" in texts:
            return [[lambda: 0.0]]  # type: ignore[return-value]
        return super().embed_documents(texts)


def _served(make: Any) -> tuple[Connection, threading.Thread]:
    mine, theirs = socket.socketpair()
    child = Connection(theirs.detach())

    def run() -> None:
        try:
            serve(child, make)
        finally:
            child.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return Connection(mine.detach()), thread


def test_the_childs_errors_come_back_as_messages(tmp_path: Path) -> None:
    conn, thread = _served(lambda config: _Failing())
    conn.send(("config", _config(tmp_path, ALWAYS)))
    assert conn.recv()[0] == "ready"
    conn.send(("embed", ["boom"]))
    kind, message = conn.recv()
    assert kind == "error"
    assert message == (
        "the embedder hashing-trigram:64 failed: RuntimeError: out of memory in the model"
    )
    conn.send(("embed", ["refused"]))
    assert conn.recv() == ("error", "the model refused the text")
    conn.send(("embed", ["unpicklable"]))
    kind, message = conn.recv()
    assert kind == "error" and message.startswith("the embedder hashing-trigram:64 failed: ")
    conn.send(("embed", ["fine"]))  # the child goes on after an error
    kind, vectors = conn.recv()
    assert kind == "vectors" and vectors.shape == (1, 64)
    conn.close()
    thread.join(10)
    assert not thread.is_alive()


def test_an_embedder_the_child_cannot_make(tmp_path: Path) -> None:
    def broken(config: Any) -> Any:
        raise ImportError("no module named 'model'")

    conn, thread = _served(broken)
    conn.send(("config", _config(tmp_path, ALWAYS)))
    assert conn.recv() == (
        "error",
        "the embedder could not be made: ImportError: no module named 'model'",
    )
    thread.join(10)
    assert not thread.is_alive()


def test_the_command_line_output_stays_clean(tmp_path: Path) -> None:
    """What the child prints goes to the standard error, never to the standard output (an
    MCP stdio server speaks there). A sitecustomize makes the child print on exit."""
    kb = make_kb(tmp_path / "kb", config=ALWAYS)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import atexit, sys\n"
        "def _noise():\n"
        "    if sys.argv[0].endswith('embed_child.py'):\n"
        "        print('NOISE FROM THE CHILD', flush=True)\n"
        "atexit.register(_noise)\n",
        encoding="utf-8",
    )
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONPATH": path,
    }
    done = subprocess.run(
        [sys.executable, "-m", "groove_core", "index", str(kb), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["chunks_embedded"] == report["chunks_total"] > 0
    assert report["warnings"] == []
    assert "NOISE FROM THE CHILD" in done.stderr


def test_the_servers_copies_keep_whether_plugins_are_installed(tmp_path: Path) -> None:
    """The watcher's and the MCP server's own Groove objects may use a child as the app
    they copy may."""
    from groove_core.mcp.threads import server_app
    from groove_core.watch import Watcher

    kb = make_kb(tmp_path / "kb", config=ALWAYS)
    installed = Groove.open(kb)
    in_process = Groove.open(kb, extra_plugins=[("nothing", object())])
    assert installed.plugins_installed and not in_process.plugins_installed
    for app in (installed, in_process):
        assert server_app(app).plugins_installed == app.plugins_installed
        assert Watcher(app).app.plugins_installed == app.plugins_installed


# -- a child that is stopped (issue #46) ---------------------------------------------------


def _stopped_for(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Kill a stopped child after ``seconds`` (raising=False: this runs against older code)."""
    monkeypatch.setattr(embed_worker, "STOPPED_SECONDS", seconds, raising=False)
    monkeypatch.setattr(embed_worker, "STOP_POLL", 0.2, raising=False)


def test_a_stopped_child_is_not_waited_for_without_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child stopped (SIGSTOP) in the middle of a run was waited for forever (only a
    Ctrl-C ended the run): now it is killed once it has stayed stopped STOPPED_SECONDS,
    and the batch fails with one line, as when the child dies."""
    _stopped_for(monkeypatch, 1.0)
    worker = EmbedderProcess(_config(tmp_path, ALWAYS), HashingEmbedder())
    errors: list[BaseException] = []
    try:
        worker.embed_documents(["one text"])
        proc = worker._proc
        assert proc is not None
        os.kill(proc.pid, signal.SIGSTOP)

        def embed() -> None:
            try:
                worker.embed_documents(["two texts"])
            except EmbedderError as err:
                errors.append(err)

        waiting = threading.Thread(target=embed, daemon=True)
        began = time.monotonic()
        waiting.start()
        waiting.join(15)
        assert not waiting.is_alive(), "the run still waits for the stopped child"
        assert time.monotonic() - began < 10
        assert len(errors) == 1
        assert f"(pid {proc.pid}) was stopped (SIGSTOP)" in str(errors[0])
        assert 'own_process = "never"' in str(errors[0])
        assert proc.poll() == -signal.SIGKILL
    finally:
        worker.close()


STOPS_AT_START = """
import os, signal
if os.environ.get("GROOVE_TEST_STOP_THE_CHILD"):
    os.kill(os.getpid(), signal.SIGSTOP)
"""


def test_a_child_stopped_before_it_answers_leaves_the_run_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped before it says it is ready: as a child that cannot start, the run embeds in
    its own process, with the warning saying why."""
    _stopped_for(monkeypatch, 1.0)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(STOPS_AT_START, encoding="utf-8")
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.setenv("GROOVE_TEST_STOP_THE_CHILD", "1")  # only children run sitecustomize
    worker = EmbedderProcess(_config(tmp_path, ALWAYS), HashingEmbedder())
    done: list[Any] = []
    thread = threading.Thread(
        target=lambda: done.append(worker.embed_documents(["a text"])), daemon=True
    )
    try:
        thread.start()
        thread.join(15)
        assert not thread.is_alive(), "the run still waits for the stopped child"
        assert np.array_equal(done[0], HashingEmbedder().embed_documents(["a text"]))
        assert worker.warning is not None and "was stopped (SIGSTOP)" in worker.warning
        assert worker.warning.endswith("the run embedded in its own process")
    finally:
        proc = worker._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
        worker.close()


ORPHAN = """
import os, signal, sys, time
from pathlib import Path
from groove_core.config import load_config
from groove_core.embed_worker import EmbedderProcess
from groove_core.embedding import HashingEmbedder

worker = EmbedderProcess(load_config(Path(sys.argv[1]), None), HashingEmbedder())
worker.embed_documents(["x"])
os.kill(worker._proc.pid, signal.SIGSTOP)
print(worker._proc.pid, flush=True)
time.sleep(3600)
"""


def test_an_orphaned_stopped_child_does_not_hold_the_parents_stderr(tmp_path: Path) -> None:
    """The parent killed outright while its child is stopped: the child cannot leave (it
    is stopped), and it held the parent's standard error, so whatever read that (a pipe to
    `tee`, a test's capture) never saw its end. Now the child writes into a pipe of the
    parent's, which closes with the parent."""
    kb = make_kb(tmp_path / "kb", config=ALWAYS)
    (tmp_path / "parent.py").write_text(ORPHAN, encoding="utf-8")
    here = str(Path(embed_worker.__file__).parents[1])  # the groove this test imported
    path = os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    parent = subprocess.Popen(
        [sys.executable, str(tmp_path / "parent.py"), str(kb)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert parent.stdout is not None and parent.stderr is not None
    child = int(parent.stdout.readline())
    try:
        parent.kill()
        parent.wait()
        ended = threading.Event()

        def drain() -> None:
            assert parent.stderr is not None
            parent.stderr.read()  # returns once every writer has closed the pipe
            ended.set()

        threading.Thread(target=drain, daemon=True).start()
        assert ended.wait(10), "the stopped child still holds the parent's stderr"
    finally:
        os.kill(child, signal.SIGKILL)
