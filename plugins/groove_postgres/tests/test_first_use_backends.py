"""Chunks without a vector yet (ADR-0015) on both backends: searchable by their words and
said to be waiting, embedded by the rest of the run, and a lost vector still a problem."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from groove_postgres.testing import store_toml

from groove_core.app import Groove
from groove_core.embedding import EmbedderSpec, HashingEmbedder
from groove_core.hookspecs import hookimpl
from groove_core.status import kb_status
from groove_core.storage import StoreError
from groove_core.testing import BILINGUAL, make_kb


class _Stalled(HashingEmbedder):
    """The hashing embedder; the index run's second embedding waits for the gate."""

    def __init__(self, gate: threading.Event) -> None:
        super().__init__(64)
        self.gate, self.calls = gate, 0

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if threading.current_thread().name == "groove-index-embed":
            self.calls += 1
            if self.calls > 1:
                self.gate.wait(30.0)
        return super().embed_documents(texts)


class _Plugin:
    def __init__(self) -> None:
        self.gate = threading.Event()

    @hookimpl
    def groove_embedders(self) -> list[EmbedderSpec]:
        return [EmbedderSpec("stalled", lambda config, settings: _Stalled(self.gate))]


@pytest.fixture(params=["sqlite", "postgres"])
def kb(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    dsn = str(request.getfixturevalue("postgres_dsn")) if request.param == "postgres" else ""
    config = store_toml(str(request.param), dsn).replace(
        'name = "hashing"', 'name = "stalled"\nbatch_size = 2'
    )
    return make_kb(tmp_path / "kb", BILINGUAL, config=config)


def _pending(app: Groove) -> tuple[int, int]:
    if not app.backend.exists():
        return 0, 0
    try:
        store = app.backend.open()
    except StoreError:  # created, its schema not written yet
        return 0, 0
    try:
        return store.pending_vectors(), store.counts()["chunks"]
    finally:
        store.close()


def test_chunks_wait_for_vectors_searchably_and_the_run_fills_them(kb: Path) -> None:
    plugin = _Plugin()
    app = Groove.open(kb, extra_plugins=[("stalled", plugin)])
    reports: list[Any] = []
    run = threading.Thread(target=lambda: reports.append(app.index()))
    run.start()
    try:
        deadline = time.monotonic() + 60
        while not (0 < (seen := _pending(app))[0] == seen[1] - 2):
            assert time.monotonic() < deadline, _pending(app)
            time.sleep(0.05)
        pending, chunks = _pending(app)
        note = f"semantic part {2 * 100 // chunks}% embedded (2 of {chunks} chunks)"
        searching = Groove.open(kb, extra_plugins=[("stalled", plugin)])
        response = searching.search("再ランキング")
        assert response.results and any(note in w for w in response.warnings), response
        assert kb_status(searching)["vectors_pending"] == pending
        doctor = searching.doctor()
        # PostgreSQL builds a first index's HNSW index at the end of the run (as before).
        assert all("vector index" in p for p in doctor.problems), doctor
        assert any(note in n for n in doctor.notes), doctor
        searching.close()
    finally:
        plugin.gate.set()
        run.join(timeout=60)
    assert reports and reports[0].vectors_pending == 0
    assert _pending(app)[0] == 0
    done = Groove.open(kb, extra_plugins=[("stalled", plugin)])
    assert not [w for w in done.search("再ランキング").warnings if "semantic part" in w]
    assert done.doctor().healthy and not done.doctor().notes


def test_a_lost_vector_is_still_a_problem(kb: Path) -> None:
    plugin = _Plugin()
    plugin.gate.set()
    app = Groove.open(kb, extra_plugins=[("stalled", plugin)])
    app.index()
    store: Any = app.backend.open()
    try:
        if app.backend.name == "sqlite":
            store.conn.execute(
                "DELETE FROM vec_chunks WHERE chunk_id = (SELECT min(id) FROM chunks)"
            )
        else:
            with store.transaction() as conn:
                conn.execute(
                    f"DELETE FROM {store.db.s}.vectors WHERE chunk_id = "
                    f"(SELECT min(id) FROM {store.db.s}.chunks WHERE kb = %s)",
                    (store.kb_id,),
                )
    finally:
        store.close()
    found = app.doctor()
    assert "1 chunks without a vector" in found.problems and not found.notes, found
    assert app.doctor(repair=True).repaired
    assert app.doctor().healthy
