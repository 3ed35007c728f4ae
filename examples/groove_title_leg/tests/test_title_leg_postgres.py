"""The title leg's index on PostgreSQL (groove_title_leg.postgres), against a real
PostgreSQL 18 from groove-postgres' test fixtures: its answers are the SQLite index's,
the indexer keeps it through edits, deletions, rebuilds and re-embeds, doctor checks and
repairs it, and two KBs in one database keep their rows apart.

They need groove-postgres with its ``test`` extra (the embedded server); without it they
fail rather than skip, as groove-postgres' own tests do."""

from __future__ import annotations

from pathlib import Path

import groove_postgres.plugin
import groove_title_leg
import psycopg
import pytest
from groove_postgres.testing import postgres_dsn, postgres_server, store_toml  # noqa: F401

from groove_core.app import Groove
from groove_core.index_report import IndexProgress
from groove_core.testing import check_leg_index, make_kb, open_kb

NOTES = {
    "a.md": "---\ntitle: Deployment runbook\n---\n# Steps\n\nShip it carefully.\n",
    "b.md": "# Notes\n\nA deployment happened on Friday.\n",
    "c.md": "# Gardening\n\nTomatoes need sun.\n",
    "d.md": "---\ntitle: Runbook for the deployment of Ｖｕｅ\n---\n# One\n\na\n\n# Two\n\nb\n",
    "e/f.md": "# Deployment\n\nThe deployment of the garden.\n",
    "g.md": "# 100% done_ish\n\nPercent and underscore in a title.\n",
}
QUERIES = ("deployment runbook", "vue deployment", "garden", "runbook -carefully", "% done_")

POSTGRES = ("postgres", groove_postgres.plugin)
TITLES = ("titles", groove_title_leg)


@pytest.fixture
def dsn(request: pytest.FixtureRequest) -> str:
    """A fresh database on the session's PostgreSQL (groove_postgres.testing)."""
    return str(request.getfixturevalue("postgres_dsn"))


def _app(kb: Path, *, titles: bool = True, index: bool = True) -> Groove:
    """The KB with the postgres backend's plugin and, with ``titles``, the title leg,
    registered in process (no other installed plugin)."""
    plugins = [POSTGRES, TITLES] if titles else [POSTGRES]
    return open_kb(kb, entry_points=False, extra_plugins=plugins, index=index)


def _pg_kb(root: Path, dsn: str, notes: dict[str, str] | None = None) -> Path:
    return make_kb(root, NOTES if notes is None else notes, config=store_toml("postgres", dsn))


def _titles(app: Groove, query: str) -> list[tuple[str, int, float]]:
    """The title leg's hits for ``query`` as (path, line, matched phrases)."""
    _, legs, ctx = app.search_explained(query, limit=10, options={"titles": True})
    leg = next(leg for leg in legs if leg.name == "titles")
    assert leg.meta["index"] is True, "the leg searched its own index"
    rows = ctx.store.chunk_rows([h.chunk_id for h in leg.hits])
    return [(rows[h.chunk_id].path, rows[h.chunk_id].line_start, h.raw_score) for h in leg.hits]


def _agrees(app: Groove) -> None:
    store = app.store
    index = store.leg_index("titles")
    assert index is not None
    every = store.chunk_ids_for_docs(d.doc_id for d in store.documents())
    assert index.chunk_ids() == every
    assert index.check() == []


def test_it_answers_as_on_sqlite_and_ranks_the_title_match_first(tmp_path: Path, dsn: str) -> None:
    pg = _app(_pg_kb(tmp_path / "pg", dsn))
    assert pg.backend.name == "postgres"
    lite = open_kb(make_kb(tmp_path / "lite", NOTES), entry_points=False, extra_plugins=[TITLES])
    for query in QUERIES:
        assert _titles(pg, query) == _titles(lite, query), query
    assert [s for _, _, s in _titles(pg, "vue deployment")][:1] == [2.0]  # NFKC title
    # The phrases are matched as text: LIKE's wildcards in them are escaped.
    index = pg.store.leg_index("titles")
    assert index is not None
    g = next(d.doc_id for d in pg.store.documents() if d.path == "g.md")
    assert index.documents(["%"], 10) == index.documents(["_"], 10) == [(g, 1)]
    assert index.documents(["0% done_i"], 10) == [(g, 1)]
    assert index.chunks(g) == sorted(pg.store.chunk_ids_for_docs([g]))
    response = pg.search("deployment runbook", limit=3, options={"titles": True})
    assert response.results[0].path == "a.md"


def test_edits_and_deletions_reach_the_index(tmp_path: Path, dsn: str) -> None:
    kb = _pg_kb(tmp_path / "kb", dsn)
    app = _app(kb)
    (kb / "c.md").write_text("---\ntitle: Compost runbook\n---\n# Heap\n\nTurn it.\n")
    (kb / "a.md").unlink()
    app.index()
    _agrees(app)
    found = {p for p, _, _ in _titles(app, "runbook")}
    assert "c.md" in found and "a.md" not in found
    assert _titles(app, "gardening") == []  # the old title went with the edit
    doctor = app.doctor()
    assert doctor.healthy, doctor.problems
    assert not doctor.notes, doctor.notes


def test_it_keeps_the_leg_index_contract(tmp_path: Path, dsn: str) -> None:
    check_leg_index(_app(_pg_kb(tmp_path / "kb", dsn), index=False), "titles")


def test_enabling_it_on_an_indexed_kb_fills_its_index_once(tmp_path: Path, dsn: str) -> None:
    kb = _pg_kb(tmp_path / "kb", dsn)
    _app(kb, titles=False).close()  # indexed without the leg
    app = _app(kb, index=False)
    events: list[IndexProgress] = []
    report = app.index(progress=events.append)
    filling = [e for e in events if e.stage == "filling the titles leg's index"]
    assert filling and filling[-1].work_done == filling[-1].work_total == report.chunks_total
    assert report.unchanged == len(NOTES)  # no file read again
    _agrees(app)
    again: list[IndexProgress] = []
    app.index(progress=again.append)
    assert not [e for e in again if e.stage.startswith("filling")]  # once
    assert _titles(app, "deployment runbook")[0][0] == "a.md"


def test_a_write_without_the_leg_has_its_index_filled_again(tmp_path: Path, dsn: str) -> None:
    kb = _pg_kb(tmp_path / "kb", dsn)
    _app(kb).close()
    without = _app(kb, titles=False, index=False)
    (kb / "h.md").write_text("# Deployment diary\n\nNew.\n")
    without.index()  # written without the leg: its index misses this note
    without.close()
    app = _app(kb, index=False)  # filled again on open
    _agrees(app)
    assert _titles(app, "deployment diary")[0] == ("h.md", 1, 2.0)


def test_a_reembed_and_a_rebuild_keep_it_whole(tmp_path: Path, dsn: str) -> None:
    app = _app(_pg_kb(tmp_path / "kb", dsn))
    before = _titles(app, "deployment runbook")
    app.index(reembed=True)
    _agrees(app)
    assert _titles(app, "deployment runbook") == before
    app.index(rebuild=True)
    _agrees(app)
    assert _titles(app, "deployment runbook") == before


def test_two_kbs_in_one_database_keep_their_rows_apart(
    tmp_path: Path, dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    a = _app(_pg_kb(tmp_path / "a", dsn))
    b = _app(_pg_kb(tmp_path / "b", dsn, {"x.md": "# Deployment\n\nElsewhere.\n"}))
    assert {p for p, _, _ in _titles(b, "deployment")} == {"x.md"}
    assert "x.md" not in {p for p, _, _ in _titles(a, "deployment")}
    b.index(rebuild=True)  # its old rows go, and a's stay
    assert not [r for r in caplog.records if "could not drop" in r.getMessage()]
    _agrees(a)
    _agrees(b)
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM groove.title_chunks").fetchone()
    assert row is not None
    assert row[0] == a.store.counts()["chunks"] + b.store.counts()["chunks"]
    assert _titles(a, "deployment runbook")[0][0] == "a.md"


def test_doctor_finds_a_damaged_index_and_repair_fills_it(tmp_path: Path, dsn: str) -> None:
    app = _app(_pg_kb(tmp_path / "kb", dsn))
    app.close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "DELETE FROM groove.title_chunks WHERE chunk_id = "
            "(SELECT min(chunk_id) FROM groove.title_chunks)"
        )
    found = app.doctor()
    assert not found.healthy
    assert any("chunks without a row in the titles leg's index" in p for p in found.problems)
    repaired = app.doctor(repair=True)
    assert repaired.repaired, repaired.problems
    assert app.doctor().healthy
    _agrees(app)
