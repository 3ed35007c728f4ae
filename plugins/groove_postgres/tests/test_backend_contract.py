"""The storage-backend contract (``groove_core.testing.BackendContract``) on PostgreSQL,
and what a user sees compared with SQLite: the same results, leg by leg and score by score
(docs/storage-backends.md)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from groove_postgres.testing import store_toml

from groove_core.app import Groove
from groove_core.testing import BILINGUAL, BackendContract, make_kb, open_kb

#: Queries of every kind: Japanese, English, short Japanese words (the word leg),
#: phrases, exclusions, NFKC and diacritics.
QUERIES = [
    "再ランキングの評価",
    "状態",
    "型",
    "ベクトル検索",
    "日本語の文章",
    "rust ownership",
    "generators pipelines",
    '"reciprocal rank fusion"',
    "rust -tokio",
    "search -minus",
    "cafe resume",
    "full width",
    "virtual environment python",
    "東京 bm25",
]


class TestPostgresBackend(BackendContract):
    def store_config(self, request: Any) -> str:
        return store_toml("postgres", str(request.getfixturevalue("postgres_dsn")))


def _top(app: Groove, query: str, **filters: object) -> list[tuple[str, int, str]]:
    response = app.search(query, limit=10, **filters)  # type: ignore[arg-type]
    return [(h.path, h.line_start, h.content) for h in response.results]


def test_search_results_are_the_same_on_both_backends(tmp_path: Path, postgres_dsn: str) -> None:
    lite = open_kb(make_kb(tmp_path / "lite", BILINGUAL, config=store_toml("sqlite")))
    pg = open_kb(make_kb(tmp_path / "pg", BILINGUAL, config=store_toml("postgres", postgres_dsn)))
    assert pg.backend.name == "postgres"
    for query in QUERIES:
        expected = _top(lite, query)
        assert _top(pg, query) == expected, query
        # Each leg's own list, ids mapped to (path, ordinal), agrees too.
        _, lite_legs, lite_ctx = lite.search_explained(query, limit=10)
        _, pg_legs, pg_ctx = pg.search_explained(query, limit=10)
        for a, b in zip(lite_legs, pg_legs, strict=True):
            assert a.name == b.name
            a_rows = lite_ctx.store.chunk_rows([h.chunk_id for h in a.hits])
            b_rows = pg_ctx.store.chunk_rows([h.chunk_id for h in b.hits])
            a_keys = [(a_rows[h.chunk_id].path, a_rows[h.chunk_id].ordinal) for h in a.hits]
            b_keys = [(b_rows[h.chunk_id].path, b_rows[h.chunk_id].ordinal) for h in b.hits]
            assert b_keys == a_keys, (query, a.name)
            if a.name in ("fts", "word"):
                assert [h.raw_score for h in b.hits] == pytest.approx(
                    [h.raw_score for h in a.hits], rel=1e-9
                ), (query, a.name)
    # Filters, pushed into each backend's queries.
    cases: list[tuple[str, dict[str, Any]]] = [
        ("検索", {"path": "notes/*"}),
        ("rust generators", {"tags": ("lang",)}),
        ("search", {"tags": ("GUIDE",), "path": "guide/**"}),
        ("状態", {"tags": ("日本語",)}),
    ]
    for query, filters in cases:
        assert _top(pg, query, **filters) == _top(lite, query, **filters), (query, filters)
    assert [d.path for d in pg.store.documents()] == [d.path for d in lite.store.documents()]
    for path in ("guide/install.md", "guide/search.md"):
        assert pg.store.links_of(path, 10) == lite.store.links_of(path, 10)


def test_two_kbs_share_one_database(tmp_path: Path, postgres_dsn: str) -> None:
    toml = store_toml("postgres", postgres_dsn)
    a = open_kb(make_kb(tmp_path / "a", BILINGUAL, config=toml))
    files = {"other.md": "# Other\n\nrust ownership elsewhere\n"}
    b = open_kb(make_kb(tmp_path / "b", files, config=toml))
    assert a.index_label.endswith("KB a") and b.index_label.endswith("KB b")
    assert {p for p, _, _ in _top(b, "rust ownership")} == {"other.md"}
    assert _top(a, "rust ownership")[0][0] == "notes/rust.md"
    b.index(rebuild=True)
    assert _top(a, "rust ownership")[0][0] == "notes/rust.md"
    # [store] kb names the key explicitly: a copy of the KB elsewhere reads the same rows.
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "a", copy)
    (copy / "groove.toml").write_text(toml + 'kb = "a"\n', encoding="utf-8")
    assert Groove.open(copy).backend.exists()
    assert _top(Groove.open(copy), "rust ownership") == _top(a, "rust ownership")
