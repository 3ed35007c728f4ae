"""Incremental, crash-safe indexing and the index's own consistency."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from groove_core import indexer as indexer_mod
from groove_core.app import Groove
from groove_core.embedding import EmbedderError
from groove_core.index_report import IndexProgress
from groove_core.sqlite.store import SCHEMA_VERSION, Store
from groove_core.storage import StoreError
from groove_core.testing import WatchedEmbedder, make_kb, open_kb
from tests.helpers import batched_kb


def _consistent(store: Store) -> None:
    """documents, chunks and FTS rows agree one to one, and each chunk has a vector or
    waits for one (never both)."""
    conn = store.conn
    chunk_ids = {r[0] for r in conn.execute("SELECT id FROM chunks")}
    fts_ids = {r[0] for r in conn.execute("SELECT rowid FROM fts_chunks")}
    vec_ids = (
        {r[0] for r in conn.execute("SELECT chunk_id FROM vec_chunks")}
        if store.has_vectors()
        else set()
    )
    pending = {r[0] for r in conn.execute("SELECT chunk_id FROM pending_vectors")}
    assert chunk_ids == fts_ids == vec_ids | pending and not vec_ids & pending
    orphans = conn.execute(
        "SELECT count(*) FROM chunks WHERE doc_id NOT IN (SELECT id FROM documents)"
    ).fetchone()[0]
    assert orphans == 0


def test_first_run_then_nothing_reembedded(notes_kb: Path) -> None:
    app = Groove.open(notes_kb)
    first = app.index()
    assert (first.added, first.changed, first.removed, first.unchanged) == (4, 0, 0, 0)
    assert first.chunks_embedded == first.chunks_total > 0
    second = app.index()
    assert (second.added, second.changed, second.removed, second.unchanged) == (0, 0, 0, 4)
    assert second.chunks_embedded == 0


def test_edit_delete_and_touch(notes_kb: Path) -> None:
    app = Groove.open(notes_kb)
    app.index()
    (notes_kb / "notes/rust.md").write_text("# Rust\n\nBorrow checker tales.\n", encoding="utf-8")
    (notes_kb / "guide/install.md").unlink()
    # Same content, new mtime: detected by hash, not re-embedded.
    os.utime(notes_kb / "notes/ja.md", ns=(1, 1))
    report = app.index()
    assert (report.added, report.changed, report.removed, report.unchanged) == (0, 1, 1, 2)
    assert report.chunks_embedded == 1
    assert report.documents_total == 3
    assert app.search("borrow checker", limit=1).results[0].path == "notes/rust.md"
    assert all(h.path != "guide/install.md" for h in app.search("setup script", limit=10).results)
    _consistent(app.store)


def test_rebuild_starts_from_scratch(notes_kb: Path) -> None:
    app = Groove.open(notes_kb)
    app.index()
    report = app.index(rebuild=True)
    assert report.added == 4 and report.unchanged == 0


def test_changed_embedder_is_detected_not_mixed(notes_kb: Path) -> None:
    app = Groove.open(notes_kb)
    app.index()
    (notes_kb / "groove.toml").write_text('[embedder]\nname = "model2vec"\n', encoding="utf-8")
    changed = Groove.open(notes_kb)
    with pytest.raises(StoreError, match="groove index --reembed"):
        changed.index()
    with pytest.raises(StoreError, match="groove index --reembed"):
        changed.search("rust")


def test_bad_files_are_skipped_with_a_reason(tmp_path: Path) -> None:
    kb = make_kb(
        tmp_path / "kb",
        {
            "good.md": "# Good\n\nFine text here.\n",
            "latin1.md": "caf\xe9 au lait".encode("latin-1"),
            "binary.md": b"\x89PNG\r\n\x1a\n\x00\x00\x00",
            "bom-crlf.md": "\ufeff# BOM\r\n\r\nWindows line endings.\r\n".encode(),
            "node_modules/pkg/readme.md": "# Not indexed\n",
            ".git/notes.md": "# Not indexed either\n",
        },
    )
    report = Groove.open(kb).index()
    reasons = dict(report.skipped)
    assert "not valid UTF-8" in reasons["latin1.md"]
    assert "binary" in reasons["binary.md"]
    assert report.added == 2
    assert report.documents_total == 2


def test_symlink_outside_the_kb_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "secret.md"
    outside.write_text("# Secret\n\npassword hunter2\n", encoding="utf-8")
    kb = make_kb(tmp_path / "kb", {"a.md": "# A\n\ntext\n"})
    (kb / "link.md").symlink_to(outside)
    report = Groove.open(kb).index()
    assert dict(report.skipped)["link.md"].startswith("symlink pointing outside")
    app = Groove.open(kb)
    assert all("hunter2" not in h.content for h in app.search("password hunter2").results)


def test_huge_file_is_skipped_by_the_size_cap(tmp_path: Path) -> None:
    config = '[embedder]\nname = "hashing"\n[index]\nmax_file_bytes = 2048\n'
    kb = make_kb(tmp_path / "kb", {"big.md": "# Big\n\n" + "x " * 5000}, config=config)
    report = Groove.open(kb).index()
    assert "max_file_bytes" in dict(report.skipped)["big.md"]


def test_grooveignore_and_config_ignore(tmp_path: Path) -> None:
    config = '[embedder]\nname = "hashing"\n[index]\nignore = ["drafts/**"]\n'
    kb = make_kb(
        tmp_path / "kb",
        {
            "a.md": "# A\n\ntext\n",
            "drafts/b.md": "# B\n\ntext\n",
            "private/c.md": "# C\n\ntext\n",
            ".grooveignore": "# comment\nprivate/\n",
        },
        config=config,
    )
    assert Groove.open(kb).index().documents_total == 1


def test_interrupted_run_leaves_a_consistent_index_and_the_next_run_finishes(
    notes_kb: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(indexer_mod, "LEXICAL_BATCH_CHUNKS", 1)  # a transaction per file

    def explode(event: IndexProgress) -> None:
        if event.files_done == 3:
            raise KeyboardInterrupt

    (notes_kb / "groove.toml").write_text(
        '[embedder]\nname = "hashing"\nbatch_size = 1\n', encoding="utf-8"
    )
    app = Groove.open(notes_kb)
    with pytest.raises(KeyboardInterrupt):
        app.index(progress=explode)
    partial = Store.open(app.index_file)
    _consistent(partial)
    assert 0 < partial.counts()["documents"] < 4
    partial.close()
    report = app.index()
    assert report.documents_total == 4
    assert report.added == 4 - report.unchanged
    _consistent(Store.open(app.index_file))


def test_schema_is_versioned_and_wal(notes_kb: Path) -> None:
    app = open_kb(notes_kb)
    store = app.store
    assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.set_meta("schema_version", str(SCHEMA_VERSION + 1))
    app.close()
    with pytest.raises(StoreError, match="newer"):
        Store.open(app.index_file)


def test_search_without_an_index_says_what_to_do(notes_kb: Path) -> None:
    app = Groove.open(notes_kb)
    with pytest.raises(StoreError, match="groove index"):
        app.search("rust")


def test_corrupt_index_file_is_a_clear_error(notes_kb: Path) -> None:
    app = Groove.open(notes_kb)
    app.index_file.parent.mkdir(parents=True, exist_ok=True)
    app.index_file.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="rebuild"):
        app.search("rust")
    assert app.index(rebuild=True).documents_total == 4


def test_a_batch_is_written_while_the_next_one_is_embedded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = batched_kb(tmp_path, 24, "Body {i} of a pipelined run.")
    watched = WatchedEmbedder(app.embedder)
    app.__dict__["embedder"] = watched
    overlapped: list[bool] = []
    writers: set[str] = set()
    write = Store.fill_vectors

    def spy(self: Store, chunks: Any, vectors: Any) -> int:
        writers.add(threading.current_thread().name)
        batch = len(overlapped)
        # Batch n is stored once batch n + 1's embedding has started (6 batches of 4
        # one-chunk notes; the last has none after it). Stored one after the other, the
        # wait would time out.
        overlapped.append(batch == 5 or watched.started[batch + 1].wait(10.0))
        return write(self, chunks, vectors)

    monkeypatch.setattr(Store, "fill_vectors", spy)
    report = app.index()
    assert report.added == 24 and report.chunks_total == report.chunks_embedded == 24
    assert overlapped == [True] * 6 and watched.calls == 6
    assert watched.most_at_once == 1  # the embedder is never called from two threads at once
    assert writers == {threading.main_thread().name}  # the store stays in its own thread
    assert watched.threads and threading.main_thread().name not in watched.threads
    assert open_kb(app.kb).search("pipelined").results
    store = app.backend.open()
    assert isinstance(store, Store)
    _consistent(store)


def test_an_embedder_error_fails_the_run_and_writes_nothing_of_its_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = batched_kb(tmp_path, 12)
    inner = app.embedder
    calls = 0

    class Failing(WatchedEmbedder):
        def embed_documents(self, texts: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == 2:
                raise RuntimeError("the embedder broke")
            return super().embed_documents(texts)

    app.__dict__["embedder"] = Failing(inner)
    with pytest.raises(EmbedderError, match="the embedder broke"):
        app.index()
    # Every file was written searchable before the vector pass; of its batches the first
    # was stored (its embedding ended before the failure), the second not: the next run
    # reads no file again and embeds the rest.
    again = Groove.open(app.kb).index()
    assert (again.added, again.unchanged) == (0, 12)
    assert again.chunks_embedded == 8 and again.chunks_total == 12
