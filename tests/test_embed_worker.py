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
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from groove_core import embed_worker
from groove_core.app import Groove
from groove_core.config import load_config
from groove_core.embed_worker import OWN_PROCESS_BYTES, EmbedderProcess, serve, wanted
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


def _config(tmp_path: Path, text: str) -> Any:
    kb = make_kb(tmp_path / "cfg", {}, config=text)
    return load_config(kb, None)


def test_the_child_embeds_what_the_process_would(tmp_path: Path) -> None:
    inside = Groove.open(make_kb(tmp_path / "inside", config=NEVER))
    child = Groove.open(make_kb(tmp_path / "child", config=ALWAYS))
    report_inside, report_child = inside.index(), child.index()
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
        assert worker.dim == 512
    finally:
        worker.close()
    assert there.dtype == np.float32
    assert np.array_equal(here, there)


def test_when_a_run_uses_a_child(tmp_path: Path) -> None:
    auto = _config(tmp_path, "")
    assert wanted(auto, USEMultilingual(), OWN_PROCESS_BYTES)
    assert not wanted(auto, USEMultilingual(), OWN_PROCESS_BYTES - 1)
    assert not wanted(auto, HashingEmbedder(), 10 * OWN_PROCESS_BYTES)

    class Wrapped(WrappedEmbedder):
        inner = USEMultilingual()

    assert wanted(auto, Wrapped(), OWN_PROCESS_BYTES)
    never = _config(tmp_path / "n", '[embedder]\nown_process = "never"\n')
    assert not wanted(never, USEMultilingual(), 10 * OWN_PROCESS_BYTES)
    always = _config(tmp_path / "a", '[embedder]\nown_process = "always"\n')
    assert wanted(always, HashingEmbedder(), 0)


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
        with pytest.raises(EmbedderError, match=r"ended unexpectedly \(signal 9\)"):
            worker.embed_documents(["two texts", "more"])
    finally:
        worker.close()


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
    """The child never writes to the standard output (an MCP stdio server speaks there)."""
    kb = make_kb(tmp_path / "kb", config=ALWAYS)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
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
