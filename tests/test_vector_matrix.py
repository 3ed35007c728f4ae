"""The in-memory KNN path for large indexes agrees with sqlite-vec and follows writes."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from groove_core.app import Groove
from groove_core.sqlite import store as store_module
from groove_core.testing import make_kb, open_kb

FILES = {
    f"n{i:03d}.md": f"# Note {i}\n\ntopic {i % 7} text {i} words {i * 3}\n" for i in range(120)
}


def _indexed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Any, list[int]]:
    """An index of FILES whose every store keeps a vector matrix, its embedder, and the
    list the matrix loads are counted in."""
    monkeypatch.setattr(store_module, "MATRIX_MIN_ROWS", 1)
    app = open_kb(make_kb(tmp_path / "kb", FILES))
    index, embedder = app.index_file, app.embedder
    app.close()
    return index, embedder, _count_loads(monkeypatch)


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


def _count_loads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    loads: list[int] = []
    load = store_module.Store._load_matrix

    def counted(self: store_module.Store) -> object:
        loads.append(1)
        time.sleep(0.05)  # long enough for readers that meet a new version to overlap
        return load(self)

    monkeypatch.setattr(store_module.Store, "_load_matrix", counted)
    return loads


def test_readers_of_one_index_share_one_matrix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each reader thread of `groove serve` has its own connection; one copy of the vectors
    serves them all, and a write gives them one new copy."""
    index, embedder, loads = _indexed(tmp_path, monkeypatch)
    kb = tmp_path / "kb"
    query = embedder.embed_query("topic 3 text")
    zebra = embedder.embed_query("zebra crossing stripes")
    n = 4
    met, written = threading.Barrier(n + 1, timeout=60), threading.Event()
    seen: list[list[object]] = [[] for _ in range(n)]

    def reader(i: int) -> None:
        store = store_module.Store.open(index)  # a connection per thread, as serve's
        try:
            store.vector_search(query, 5)  # a first search goes to vec0
            met.wait()
            seen[i] += [store.vector_search(query, 5), store._matrix]
            met.wait()
            written.wait(60)
            seen[i] += [store.vector_search(zebra, 1)[0][0], store._matrix]
        finally:
            store.close()

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    met.wait()  # all four search together
    met.wait()
    assert len(loads) == 1
    first, matrix = seen[0][0], seen[0][1]
    assert matrix is not None and all(s[0] == first and s[1] is matrix for s in seen)

    (kb / "zebra.md").write_text("# Zebra\n\nzebra crossing stripes\n", encoding="utf-8")
    Groove.open(kb).index()  # another connection commits new vectors
    written.set()
    for t in threads:
        t.join()
    assert len(loads) == 2
    assert all(s[3] is seen[0][3] is not matrix for s in seen)
    check = store_module.Store.open(index)
    zebra_id = check.conn.execute(
        "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.path = 'zebra.md'"
    ).fetchone()[0]
    check.close()
    assert all(s[2] == zebra_id for s in seen)


def test_a_replaced_index_gets_its_own_matrix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index, embedder, loads = _indexed(tmp_path, monkeypatch)
    kb = tmp_path / "kb"
    query = embedder.embed_query("topic 3 text")
    before = store_module.Store.open(index)
    before.vector_search(query, 3)
    before.vector_search(query, 3)
    for name in list(FILES)[:60]:
        (kb / name).unlink()
    Groove.open(kb).index(rebuild=True)  # a new file swapped in at the same path
    after = store_module.Store.open(index)
    after.vector_search(query, 3)
    found = after.vector_search(query, 200)
    assert len(loads) == 2 and after._matrix is not before._matrix
    assert len(found) == 60 == len(after._matrix.ids)  # type: ignore[union-attr]
    before.close()
    after.close()
