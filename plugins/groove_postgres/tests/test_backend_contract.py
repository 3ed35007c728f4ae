"""The storage-backend contract, run for both backends: what a user sees is the same on
SQLite and on PostgreSQL (docs/storage-backends.md)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from groove_postgres.testing import BILINGUAL, store_toml

from groove_core.app import Groove
from groove_core.get_cmd import parse_target, read_target
from groove_core.status import kb_status
from groove_core.testing import make_kb, open_kb

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


MakeKb = Callable[..., Path]


def get_document(app: Groove, path: str) -> dict[str, Any]:
    return read_target(app, parse_target(path, app.kb), 0)


def _top(app: Groove, query: str, **filters: object) -> list[tuple[str, int, str]]:
    response = app.search(query, limit=10, **filters)  # type: ignore[arg-type]
    return [(h.path, h.line_start, h.content) for h in response.results]


def _content(app: Groove) -> set[tuple[str, int, str]]:
    """Everything a search can return, independent of ids and timestamps."""
    store = app.backend.open()
    try:
        docs = store.documents()
        rows = store.chunk_rows(sorted(store.chunk_ids_for_docs(d.doc_id for d in docs)))
        return {(r.path, r.ordinal, r.content) for r in rows.values()}
    finally:
        store.close()


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
    for query, filters in [
        ("検索", {"path": "notes/*"}),
        ("rust generators", {"tags": ("lang",)}),
        ("search", {"tags": ("GUIDE",), "path": "guide/**"}),
        ("状態", {"tags": ("日本語",)}),
    ]:
        assert _top(pg, query, **filters) == _top(lite, query, **filters), (query, filters)
    assert [d.path for d in pg.store.documents()] == [d.path for d in lite.store.documents()]
    for path in ("guide/install.md", "guide/search.md"):
        assert pg.store.links_of(path, 10) == lite.store.links_of(path, 10)


def test_index_incrementally_change_and_delete(kb_on: MakeKb, tmp_path: Path) -> None:
    kb = kb_on(tmp_path / "kb")
    app = Groove.open(kb)
    first = app.index()
    assert (first.added, first.documents_total) == (len(BILINGUAL), len(BILINGUAL))
    assert app.index().unchanged == len(BILINGUAL)  # nothing to do the second time
    (kb / "notes" / "rust.md").write_text("# Rust notes\n\nBorrow checker lifetimes.\n")
    (kb / "notes" / "python.md").unlink()
    (kb / "notes" / "new.md").write_text("# 新しいノート\n\n部屋の掃除について。\n")
    report = app.index()
    assert (report.added, report.changed, report.removed) == (1, 1, 1)
    assert _top(app, "borrow checker lifetimes")[0][0] == "notes/rust.md"
    assert "notes/python.md" not in {p for p, _, _ in _top(app, "python generators")}
    assert _top(app, "部屋")[0][0] == "notes/new.md"
    clean = open_kb(kb_on(tmp_path / "clean", {**_files(kb)}))
    assert _content(app) == _content(clean)
    status = kb_status(app)
    assert status["indexed"] and status["documents"] == len(BILINGUAL)
    assert status["backend"] == app.backend.name and not status["incomplete"]
    assert status["stale"] == 0
    got = get_document(app, "notes/new.md")
    assert got["indexed"] is True and got["title"] == "新しいノート"


def _files(kb: Path) -> dict[str, str]:
    return {
        p.relative_to(kb).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(kb.rglob("*.md"))
    }


def test_exclusions_and_filters(kb_on: MakeKb, tmp_path: Path) -> None:
    app = open_kb(kb_on(tmp_path / "kb"))
    assert not any("tokio" in c for _, _, c in _top(app, "rust -tokio"))
    assert {p for p, _, _ in _top(app, "検索", path="notes/*")} <= {
        f"notes/{n}.md" for n in ("ja", "vue", "rust", "python")
    }
    assert {p for p, _, _ in _top(app, "検索", path="guide")} <= {
        "guide/install.md",
        "guide/search.md",
    }
    assert {p for p, _, _ in _top(app, "notes", tags=("lang",))} == {"notes/rust.md"}
    assert _top(app, "検索", tags=("missing",)) == []


def test_rebuild_and_reembed_swap_in_a_whole_index(kb_on: MakeKb, tmp_path: Path) -> None:
    app = open_kb(kb_on(tmp_path / "kb"))
    before = _content(app)
    reader = app.store  # a connection opened before the rebuild
    rebuilt = Groove.open(app.kb).index(rebuild=True)
    assert rebuilt.added == len(BILINGUAL)
    assert not app.backend.current(reader)  # it reads the replaced index: reopened
    assert app.store is not reader
    assert _content(app) == before
    assert _top(app, "再ランキングの評価")[0][0] == "notes/ja.md"
    reembedded = Groove.open(app.kb).index(reembed=True)
    assert reembedded.chunks_embedded >= len(before)
    assert _content(app) == before
    assert _top(app, "rust ownership")[0][0] == "notes/rust.md"
    assert app.doctor().healthy


def test_doctor_healthy_and_repair(kb_on: MakeKb, tmp_path: Path) -> None:
    app = open_kb(kb_on(tmp_path / "kb"))
    result = app.doctor()
    assert result.healthy, result.problems
    repaired = app.doctor(repair=True)
    assert repaired.healthy and not repaired.reindexed


def test_a_missing_index_is_said_on_both(kb_on: MakeKb, tmp_path: Path) -> None:
    app = Groove.open(kb_on(tmp_path / "kb"))
    assert not app.backend.exists()
    assert kb_status(app)["indexed"] is False
    with pytest.raises(Exception, match="run 'groove index'"):
        app.search("rust")
    assert get_document(app, "notes/rust.md")["indexed"] is False


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
