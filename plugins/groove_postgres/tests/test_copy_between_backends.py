"""`groove index --copy-from`: an index moves between SQLite and PostgreSQL with its
vectors, so nothing is re-embedded and every search answers as before."""

from __future__ import annotations

from pathlib import Path

from groove_postgres.testing import store_toml

from groove_core.app import Groove
from groove_core.testing import BILINGUAL, make_kb

QUERIES = [
    "再ランキングの評価",
    "状態",
    "rust ownership",
    '"reciprocal rank fusion"',
    "rust -tokio",
]


def _answers(app: Groove) -> list[list[tuple[str, int, int]]]:
    return [
        [(h.path, h.line_start, h.line_end) for h in app.search(q, limit=10).results]
        for q in QUERIES
    ]


def test_an_index_moves_to_postgres_and_back_without_re_embedding(
    tmp_path: Path, postgres_dsn: str
) -> None:
    sections = "[index]\nmin_section_tokens = 0\n"  # not the default: the copy says so
    kb = make_kb(tmp_path / "notes", BILINGUAL, config=store_toml("sqlite") + sections)
    on_sqlite = Groove.open(kb)
    on_sqlite.index()
    before = _answers(on_sqlite)
    links_before = on_sqlite.store.links_of("notes/ja.md", 50)
    on_sqlite.close()

    (kb / "groove.toml").write_text(store_toml("postgres", postgres_dsn))
    on_postgres = Groove.open(kb)
    report = on_postgres.index(copy_from="sqlite")
    assert (report.copied, report.chunks_embedded) == (len(BILINGUAL), 0)
    # the chunks came as the source cut them, which the configuration now cuts otherwise
    assert report.notes and "min_section_tokens = 0" in report.notes[0]
    assert _answers(on_postgres) == before
    assert on_postgres.store.links_of("notes/ja.md", 50) == links_before
    assert on_postgres.doctor().healthy
    on_postgres.close()

    # And back, into a fresh SQLite file.
    (kb / ".groove" / "index.sqlite").unlink()
    # The postgres keys stay in [store] while SQLite holds the index: the source's address.
    postgres = store_toml("postgres", postgres_dsn)
    (kb / "groove.toml").write_text(postgres.replace('backend = "postgres"', 'backend = "sqlite"'))
    back = Groove.open(kb)
    report = back.index(copy_from="postgres")
    assert (report.copied, report.chunks_embedded) == (len(BILINGUAL), 0)
    assert _answers(back) == before
