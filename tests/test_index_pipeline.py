"""The pipelined indexer (groove_core/indexer.py): one embedding at a time, whatever the
embedder does on first use, and none left running when a run is interrupted."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from groove_core import vector_pass
from groove_core.testing import WatchedEmbedder
from tests.helpers import batched_kb


class _LazyDim(WatchedEmbedder):
    """Like Model2VecStatic: ``dim`` is probed with an embedding the first time it is read."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner, pause=0.2)
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.embed_documents(["dimension probe"]).shape[1])
        return self._dim


def test_an_embedder_that_probes_its_dimension_never_embeds_twice_at_once(tmp_path: Path) -> None:
    app = batched_kb(tmp_path, 12)
    lazy = _LazyDim(app.embedder)
    app.__dict__["embedder"] = lazy
    app.index()
    # The dimension is read in the embedding thread, not while the next batch embeds.
    assert lazy.most_at_once == 1, "two embeddings ran at once"


def test_an_interrupted_run_leaves_no_embedding_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = batched_kb(tmp_path, 12)
    release = threading.Event()
    inner = app.embedder

    class Slow:
        identity, dim = inner.identity, inner.dim

        def embed_documents(self, texts: Any) -> Any:
            release.wait(5.0)
            return inner.embed_documents(texts)

        def embed_query(self, text: str) -> Any:
            return inner.embed_query(text)

    app.__dict__["embedder"] = Slow()
    threads: list[threading.Thread] = []
    real_join = vector_pass._Batch.join
    interrupted = False

    def join(self: Any) -> None:
        nonlocal interrupted
        if self._thread is not None:
            threads.append(self._thread)
        if not interrupted:
            interrupted = True
            raise KeyboardInterrupt  # Ctrl-C (or a SIGTERM handler) during the wait
        real_join(self)

    monkeypatch.setattr(vector_pass._Batch, "join", join)
    with pytest.raises(KeyboardInterrupt):
        app.index()
    alive = [t for t in threads if t.is_alive()]
    release.set()
    # The batch stays in flight until its embedding has ended: the run's finally waits.
    assert not alive, "an embedding thread outlived the failed run"
