"""The read side of the index as a protocol (groove_core.storage) and its typed rows."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from groove_core.rows import ChunkRow, DocumentChunkRow, DocumentRow, Links, Subsection
from groove_core.sqlite import word_table
from groove_core.sqlite.store import Store
from groove_core.storage import SearchStore
from groove_core.testing import make_kb, open_kb

NOTES = {
    "a.md": "---\ntags: [x]\n---\n# Alpha\n\nzephyr winds over the alpha valley.\n\n"
    "## Detail\n\nMore about [b](b.md).\n",
    "b.md": "# Beta\n\nzephyr beta notes.\n",
}


def _members() -> list[str]:
    return [
        name
        for name, value in vars(SearchStore).items()
        if not name.startswith("_") and inspect.isfunction(value)
    ]


def test_the_sqlite_store_implements_every_method_with_the_same_signature() -> None:
    for name in _members():
        declared = inspect.signature(getattr(SearchStore, name))
        implemented = inspect.signature(getattr(Store, name))
        assert list(implemented.parameters) == list(declared.parameters), name
        assert getattr(SearchStore, name).__doc__, f"{name} says nothing of its contract"


def test_a_query_context_store_is_the_protocol(tmp_path: Path) -> None:
    app = open_kb(make_kb(tmp_path / "kb", NOTES))
    assert isinstance(app.store, SearchStore)
    # Every member the legs and stages read is there, and nothing needs the connection.
    assert {"leg_index", "vector_search", "chunk_rows"} <= set(_members())
    assert not {"fts_search", "word_search"} & set(_members())  # the legs' indexes own them
    assert "conn" not in _members()


def test_rows_are_frozen_and_typed(tmp_path: Path) -> None:
    app = open_kb(make_kb(tmp_path / "kb", NOTES))
    docs = app.store.documents()
    assert [type(d) for d in docs] == [DocumentRow, DocumentRow]
    a = docs[0]
    # The one-line "Detail" section is merged into Alpha's chunk, its heading kept.
    assert (a.path, a.title, a.tags, a.chunks) == ("a.md", "Alpha", ("x",), 1)
    chunks = app.store.document_chunks(a.doc_id)
    assert [type(c) for c in chunks] == [DocumentChunkRow]
    assert [c.heading_path for c in chunks] == [("Alpha",)]
    detail = Subsection(8, 2, "Detail", ("Alpha", "Detail"), offset=46)
    assert chunks[0].sections == (detail,)
    rows = app.store.chunk_rows([c.chunk_id for c in chunks])
    assert all(isinstance(r, ChunkRow) and r.path == "a.md" for r in rows.values())
    assert rows[chunks[0].chunk_id].sections == (detail,)
    found = app.store.links_of("a.md", 10)
    assert isinstance(found, Links)
    assert found.to_json()["outgoing"] == [
        {"target": "b.md", "kind": "link", "path": "b.md", "line": 10}
    ]
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.title = "changed"  # type: ignore[misc]


def test_the_word_index_search_is_the_word_legs_query(tmp_path: Path) -> None:
    app = open_kb(make_kb(tmp_path / "kb", NOTES))
    weights = (1.0, 1.0, 1.0)
    index = app.store.leg_index("word")
    found = index.search(["zephyr"], weights, 10)
    assert found == word_table.search(app.store.conn, '"zephyr"', weights, 10)
    assert len(found) == 2
    only = frozenset({found[1][0]})
    assert [cid for cid, _ in index.search(["zephyr"], weights, 10, only)] == [found[1][0]]
    assert index.search([], weights, 10) == []


def test_the_protocol_and_rows_import_nothing_heavy() -> None:
    code = (
        "import sys, groove_core.storage, groove_core.rows; "
        "print(sorted(m for m in ('numpy', 'pysqlite3', 'pydantic', 'groove_core.sqlite.store') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
