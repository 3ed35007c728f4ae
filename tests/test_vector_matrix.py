"""The in-memory KNN path for large indexes agrees with sqlite-vec and follows writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from groove_core import store as store_module
from groove_core.app import Groove
from groove_core.testing import make_kb, open_kb

FILES = {
    f"n{i:03d}.md": f"# Note {i}\n\ntopic {i % 7} text {i} words {i * 3}\n" for i in range(120)
}


def test_matrix_and_vec0_return_the_same_neighbours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = open_kb(make_kb(tmp_path / "kb", FILES))
    store = app.store
    rng = np.random.default_rng(3)
    queries = [app.embedder.embed_query(f"topic {i} text") for i in range(5)]
    queries += [rng.standard_normal(app.embedder.dim).astype(np.float32) for _ in range(3)]
    allowed = frozenset(range(1, 200, 3))
    vec0 = [store.vector_search(q, 20) for q in queries]
    vec0_filtered = [store.vector_search(q, 20, allowed) for q in queries]
    monkeypatch.setattr(store_module, "MATRIX_MIN_ROWS", 1)
    vec_rows = store.embeddings([5, 1, 77, 9999])
    matrix = [store.vector_search(q, 20) for q in queries]
    matrix_filtered = [store.vector_search(q, 20, allowed) for q in queries]
    assert store._matrix is not None, "the matrix path did not run"
    matrix_rows = store.embeddings([5, 1, 77, 9999])
    assert sorted(matrix_rows) == sorted(vec_rows) == [1, 5, 77]
    assert all(np.array_equal(vec_rows[i], matrix_rows[i]) for i in vec_rows)
    for a, b in zip(vec0 + vec0_filtered, matrix + matrix_filtered, strict=True):
        distances = [d for _, d in a]
        assert np.allclose(distances, [d for _, d in b], atol=1e-5)
        # Same neighbours in the same order, except among (near-)equal distances, which
        # float rounding may order either way, and at the cut-off.
        for pos, ((id_a, d_a), (id_b, _)) in enumerate(zip(a, b, strict=True)):
            tied = sum(abs(d - d_a) < 1e-5 for d in distances) > 1 or pos == len(a) - 1
            assert id_a == id_b or tied


def test_matrix_reloads_after_another_connection_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "MATRIX_MIN_ROWS", 1)
    kb = make_kb(tmp_path / "kb", FILES)
    reader = open_kb(kb)
    reader.search("topic 3 text", limit=3)
    before = reader.search("topic 3 text", limit=3)  # the second search loads the matrix
    assert reader.store._matrix is not None
    (kb / "fresh.md").write_text("# Zebra\n\nzebra crossing stripes\n", encoding="utf-8")
    Groove.open(kb).index()  # another connection commits
    after = reader.search("zebra crossing stripes", limit=1)
    assert after.results[0].path == "fresh.md"
    assert before.results


def test_a_one_shot_process_does_not_load_the_matrix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "MATRIX_MIN_ROWS", 1)
    app = open_kb(make_kb(tmp_path / "kb", FILES))
    first = app.search("topic 2 text", limit=5)
    assert app.store._matrix is None
    second = app.search("topic 2 text", limit=5)
    assert app.store._matrix is not None
    assert [h.chunk_id for h in first.results] == [h.chunk_id for h in second.results]
