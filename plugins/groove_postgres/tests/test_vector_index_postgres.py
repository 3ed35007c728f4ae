"""The KB's HNSW index on PostgreSQL: a build that fills an empty KB (a first index,
``--rebuild``, ``--copy-from``) creates it once at the end instead of inserting into it row
by row (docs/benchmarks.md, issue #17); every run ends with it in place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from groove_postgres.store import PostgresStore
from groove_postgres.testing import store_toml

from groove_core.app import Groove
from groove_core.testing import BILINGUAL, make_kb


def _hnsw(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE indexname LIKE 'vectors_hnsw_%'"
        ).fetchall()
    return {str(r[0]) for r in rows}


def _live_id(dsn: str, name: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT id FROM groove.kbs WHERE name = %s AND state = 'live'", (name,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_filling_build_creates_the_hnsw_index_once_at_the_end(
    tmp_path: Path, postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = make_kb(tmp_path / "notes", BILINGUAL, config=store_toml("postgres", postgres_dsn))
    seen: list[set[str]] = []
    write = PostgresStore.write_documents

    def spy(self: PostgresStore, *args: Any, **kwargs: Any) -> None:
        seen.append(_hnsw(postgres_dsn))
        write(self, *args, **kwargs)

    monkeypatch.setattr(PostgresStore, "write_documents", spy)
    app = Groove.open(kb)
    app.index()
    first = _live_id(postgres_dsn, "notes")
    # While the first run wrote, the KB had no HNSW index; at its end it has one.
    assert seen and all(f"vectors_hnsw_{first}" not in s for s in seen)
    assert f"vectors_hnsw_{first}" in _hnsw(postgres_dsn)
    query = "groove"
    before = [(h.path, h.score) for h in app.search(query).results]

    # A rebuild writes a staging KB without the index and swaps in one that has it.
    seen.clear()
    Groove.open(kb).index(rebuild=True)
    second = _live_id(postgres_dsn, "notes")
    assert second != first and seen
    assert all(f"vectors_hnsw_{second}" not in s for s in seen)
    assert _hnsw(postgres_dsn) == {f"vectors_hnsw_{second}"}
    after = [(h.path, h.score) for h in Groove.open(kb).search(query).results]
    assert [p for p, _ in after] == [p for p, _ in before]
    assert np.allclose([s for _, s in after], [s for _, s in before])

    # An update run of a KB that lost its index (a run killed before building it) ends
    # with the index back; an update of a filled KB writes into the existing index.
    with psycopg.connect(postgres_dsn) as conn:
        conn.execute(f"DROP INDEX groove.vectors_hnsw_{second}")
    (kb / "notes" / "extra.md").write_text("# Extra\n\nanother note\n", encoding="utf-8")
    seen.clear()
    Groove.open(kb).index()
    assert seen == [set()]
    assert _hnsw(postgres_dsn) == {f"vectors_hnsw_{second}"}
    (kb / "notes" / "more.md").write_text("# More\n\nyet another note\n", encoding="utf-8")
    seen.clear()
    Groove.open(kb).index()
    assert seen == [{f"vectors_hnsw_{second}"}]
    assert Groove.open(kb).doctor().healthy


def _pending_pages(dsn: str) -> dict[str, int]:
    pages: dict[str, int] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
        for index in ("groove.chunks_trgm", "groove.chunks_words"):
            row = conn.execute("SELECT pending_pages FROM pgstatginindex(%s)", (index,)).fetchone()
            assert row is not None
            pages[index] = int(row[0])
    return pages


def test_every_run_leaves_the_lexical_gin_indexes_without_a_pending_list(
    tmp_path: Path, postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # New rows go to a GIN index's pending list, which every lookup scans whole; a run
    # merges it at its end (a first build and an update alike).
    kb = make_kb(tmp_path / "notes", BILINGUAL, config=store_toml("postgres", postgres_dsn))
    seen: list[dict[str, int]] = []
    clean = PostgresStore.clean_pending

    def spy(self: PostgresStore) -> None:
        seen.append(_pending_pages(postgres_dsn))
        clean(self)

    monkeypatch.setattr(PostgresStore, "clean_pending", spy)
    app = Groove.open(kb)
    app.index()
    assert seen and all(pages > 0 for pages in seen[-1].values())  # there was a list
    assert set(_pending_pages(postgres_dsn).values()) == {0}
    (kb / "extra.md").write_text("# Extra\n\nA note added later about pending lists.\n")
    seen.clear()
    Groove.open(kb).index()
    assert seen and all(pages > 0 for pages in seen[-1].values())
    assert set(_pending_pages(postgres_dsn).values()) == {0}
