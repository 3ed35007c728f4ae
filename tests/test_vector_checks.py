"""Vectors are checked where they enter the index or a search, whatever embedder made them:
finite, the right shape and count; a zero vector is stored and reported. An index that
holds non-finite vectors (written before the check) is still searchable, and doctor finds
and repairs them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from groove_core.app import Groove
from groove_core.embedding import EmbedderError, EmbedderSpec, HashingEmbedder
from groove_core.hookspecs import hookimpl
from groove_core.sqlite.store import Store
from groove_core.testing import make_kb
from groove_core.vector_pass import ZERO_VECTOR

# A chunk per section: the checks spoil notes/rust.md's second one (its Ownership section).
CONFIG = '[embedder]\nname = "odd"\nbatch_size = 2\n[index]\nmin_section_tokens = 0\n'
Spoil = Callable[[Sequence[str], np.ndarray], np.ndarray]


class _Odd(HashingEmbedder):
    """The hashing embedder, with its answers spoiled by ``spoil`` while it is set."""

    def __init__(self, owner: _Plugin) -> None:
        super().__init__(64)
        self.owner = owner

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        vectors = super().embed_documents(texts)
        return vectors if self.owner.spoil is None else self.owner.spoil(texts, vectors)

    def embed_query(self, text: str) -> np.ndarray:
        vector = super().embed_query(text)
        return vector if self.owner.spoil_query is None else self.owner.spoil_query(vector)


class _Plugin:
    def __init__(self) -> None:
        self.spoil: Spoil | None = None
        self.spoil_query: Callable[[np.ndarray], np.ndarray] | None = None

    @hookimpl
    def groove_embedders(self) -> list[EmbedderSpec]:
        return [EmbedderSpec("odd", lambda c, s: _Odd(self))]


def _rows_with(word: str, value: float) -> Spoil:
    def spoil(texts: Sequence[str], vectors: np.ndarray) -> np.ndarray:
        vectors = vectors.astype(np.float64)
        for i, text in enumerate(texts):
            if word in text:
                vectors[i] = value
        return vectors

    return spoil


def _open(kb: Path, plugin: _Plugin) -> Groove:
    return Groove.open(kb, extra_plugins=[("odd", plugin)])


def _kb(tmp_path: Path) -> Path:
    return make_kb(tmp_path / "kb", config=CONFIG)


def _indexed_paths(app: Groove) -> set[str]:
    return {str(r[0]) for r in app.store.conn.execute("SELECT path FROM documents")}


@pytest.mark.parametrize("value", [np.nan, np.inf, 1e39], ids=["nan", "inf", "float32-overflow"])
def test_non_finite_vectors_fail_the_run_and_nothing_of_them_is_stored(
    tmp_path: Path, value: float
) -> None:
    kb, plugin = _kb(tmp_path), _Plugin()
    plugin.spoil = _rows_with("Ownership", value)  # notes/rust.md's second chunk
    with pytest.raises(EmbedderError) as caught:
        _open(kb, plugin).index()
    message = str(caught.value)
    assert "NaN or infinite values for 1 of" in message, message
    assert "notes/rust.md, chunk 2" in message, message
    assert "\n" not in message
    app = _open(kb, plugin)
    # The file is searchable by its words; its batch's vectors wait for the next run.
    assert "notes/rust.md" in _indexed_paths(app) and app.store.pending_vectors() >= 1
    vectors = app.store.conn.execute("SELECT embedding FROM vec_chunks").fetchall()
    assert all(np.isfinite(np.frombuffer(v[0], dtype=np.float32)).all() for v in vectors)
    assert app.search("install python").results  # what was written is searchable
    plugin.spoil = None  # the model recovers: the next run embeds the rest
    report = _open(kb, plugin).index()
    assert report.added == 0 and report.chunks_embedded >= 1
    assert _open(kb, plugin).store.pending_vectors() == 0


@pytest.mark.parametrize(
    ("spoil", "expected"),
    [
        (lambda texts, v: v[:-1], "array for 2 texts (expected 2x64)"),
        (lambda texts, v: v[:, :32], "a 2x32 array for 2 texts (expected 2x64)"),
        (lambda texts, v: v.reshape(-1), "a 128 array for 2 texts"),
        (lambda texts, v: np.array([["x"] * 64] * len(texts)), "not a vector"),
    ],
)
def test_vectors_of_the_wrong_shape_are_refused(
    tmp_path: Path, spoil: Spoil, expected: str
) -> None:
    kb, plugin = _kb(tmp_path), _Plugin()
    plugin.spoil = spoil
    with pytest.raises(EmbedderError, match=r"nothing of it was stored|not a vector") as caught:
        _open(kb, plugin).index()
    assert expected in str(caught.value)
    store = _open(kb, plugin).store  # searchable by words, with no vector stored
    assert store.pending_vectors() == store.counts()["chunks"] > 0 and not store.has_vectors()


def test_a_zero_vector_is_stored_and_reported(tmp_path: Path) -> None:
    kb, plugin = _kb(tmp_path), _Plugin()
    plugin.spoil = _rows_with("Ownership", 0.0)
    report = _open(kb, plugin).index()
    assert report.warnings == [("notes/rust.md", f"{ZERO_VECTOR} for chunk 2")]
    app = _open(kb, plugin)
    assert "notes/rust.md" in _indexed_paths(app)
    hits = app.search("ownership rules prevent data races").results
    assert hits and hits[0].path == "notes/rust.md"  # found by its words


def test_a_non_finite_query_vector_is_a_clear_error(tmp_path: Path) -> None:
    kb, plugin = _kb(tmp_path), _Plugin()
    _open(kb, plugin).index()
    plugin.spoil_query = lambda v: np.full_like(v, np.nan)
    with pytest.raises(EmbedderError, match="NaN or infinite values for 1 of 1 text:"):
        _open(kb, plugin).search("ranking results")
    plugin.spoil_query = lambda v: v[:10]
    with pytest.raises(EmbedderError, match="a 1x10 array for 1 text "):
        _open(kb, plugin).search("ranking results")


def _poison(index: Path, path: str) -> int:
    """Write NaN into the stored vectors of ``path``'s chunks, as an older groove stored
    what a broken model server answered. Returns how many."""
    store = Store.open(index)
    ids = [
        int(r[0])
        for r in store.conn.execute(
            "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.path = ?",
            (path,),
        )
    ]
    nan = np.full(64, np.nan, dtype=np.float32).tobytes()
    with store.transaction():
        for chunk_id in ids:
            store.conn.execute("DELETE FROM vec_chunks WHERE chunk_id = ?", (chunk_id,))
            store.conn.execute(
                "INSERT INTO vec_chunks(chunk_id, embedding) VALUES (?, ?)", (chunk_id, nan)
            )
    store.close()
    return len(ids)


def test_stored_nan_vectors_are_searchable_found_by_doctor_and_repaired(tmp_path: Path) -> None:
    kb, plugin = _kb(tmp_path), _Plugin()
    app = _open(kb, plugin)
    app.index()
    poisoned = _poison(app.index_file, "notes/rust.md")
    assert poisoned == 2

    app = _open(kb, plugin)
    hits = app.search("rust ownership").results  # was a TypeError in every search
    assert hits and hits[0].path == "notes/rust.md"  # the lexical legs still find it
    found = app.doctor()
    assert f"{poisoned} chunks whose vector holds NaN or infinity" in found.problems

    repaired = _open(kb, plugin).doctor(repair=True)
    assert repaired.repaired, repaired
    after = _open(kb, plugin)
    assert after.doctor().problems == []
    rows = after.store.conn.execute("SELECT embedding FROM vec_chunks").fetchall()
    assert all(np.isfinite(np.frombuffer(r[0], dtype=np.float32)).all() for r in rows)
    assert after.store.counts()["chunks"] == app.store.counts()["chunks"]
