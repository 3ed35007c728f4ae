"""A filling build's deferred document frequencies when a commit's outcome is unknown to
the client (the server committed, the connection broke before the reply): the failed run
leaves them to the next run, which recounts them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from groove_postgres.store import PostgresStore

from groove_core import indexer as indexer_mod
from groove_core.app import Groove
from groove_core.storage import StoreError
from groove_core.testing import make_kb

CONFIG = '[embedder]\nname = "hashing"\nbatch_size = 4\n'


def test_a_commit_that_fails_after_the_server_committed_leaves_no_wrong_frequencies(
    tmp_path: Path, postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = {f"n{i:02d}.md": f"# Note {i}\n\nBody {i} about topic{i % 3}.\n" for i in range(16)}
    config = CONFIG + f'[store]\nbackend = "postgres"\ndsn = "{postgres_dsn}"\n'
    kb = make_kb(tmp_path / "kb", notes, config=config)
    real_tx = PostgresStore.transaction
    real_write = PostgresStore.write_documents
    writes = 0
    in_write = False

    @contextmanager
    def transaction(self: PostgresStore) -> Iterator[Any]:
        outer = not self.in_transaction
        with real_tx(self) as conn:
            yield conn
        # Committed. The second batch's COMMIT "fails" on the client side.
        if outer and in_write and writes == 2:
            err = psycopg.OperationalError("server closed the connection unexpectedly")
            raise self._error(err, "writing") from err

    def write_documents(self: PostgresStore, docs: Any, vectors: Any) -> None:
        nonlocal writes, in_write
        writes += 1
        in_write = True
        try:
            real_write(self, docs, vectors)
        finally:
            in_write = False

    monkeypatch.setattr(PostgresStore, "transaction", transaction)
    monkeypatch.setattr(PostgresStore, "write_documents", write_documents)
    monkeypatch.setattr(indexer_mod, "LEXICAL_BATCH_CHUNKS", 4)  # four one-chunk files a write
    with pytest.raises(StoreError, match="connection"):
        Groove.open(kb).index()
    monkeypatch.undo()
    # The next run (nothing marks the frequencies as pending any more) and doctor.
    Groove.open(kb).index()
    found = Groove.open(kb).doctor()
    assert found.healthy, found.problems
