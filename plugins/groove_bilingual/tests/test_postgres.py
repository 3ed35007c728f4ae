"""The bilingual leg on PostgreSQL: it reads the word leg's index through the leg-index
interface, so groove-postgres serves it with the same answers as SQLite (issue #45 item 1),
against a real PostgreSQL from groove-postgres' test fixtures. They need groove-postgres
with its ``test`` extra (the embedded server), which the project's set-up installs; without
it they fail rather than skip, as groove-postgres' own tests do."""

from __future__ import annotations

from pathlib import Path

import pytest
from groove_postgres.testing import postgres_dsn, postgres_server, store_toml  # noqa: F401

from groove_core.app import Groove
from groove_core.testing import make_kb, open_kb

JAPANESE = {
    "embed.md": "# 画像の埋め込み\n\nノートに画像を埋め込む方法を説明します。\n",
    "state.md": "# 状態管理\n\nアプリの状態を一か所で管理します。\n",
    "component.md": "# コンポーネント\n\nコンポーネントは再利用できる部品です。\n",
    "garden.md": "# 庭の手入れ\n\nトマトには日光と水が必要です。\n",
    "reactivity.md": "# リアクティビティー\n\nリアクティビティーは変化を追跡します。\n",
}
ENGLISH = {
    "state.md": "# Managing state\n\nKeep the application state in one place.\n",
    "garden.md": "# Garden care\n\nTomatoes need sun and water.\n",
    "ship.md": "# Spaceship\n\nThe spaceship leaves at ten.\n",
}
QUERIES = {
    # "reactivity": through a transliteration (the katakana table, read from the store)
    "ja": ("how to embed images", "state", "component state", "bread garden", "reactivity"),
    "en": ("状態の管理", "庭", "宇宙船"),
}


@pytest.fixture
def dsn(request: pytest.FixtureRequest) -> str:
    """A fresh database on the session's PostgreSQL (groove_postgres.testing)."""
    return str(request.getfixturevalue("postgres_dsn"))


def _bilingual(app: Groove, query: str) -> list[tuple[str, float]]:
    """The bilingual leg's hits for ``query``: (path, raw score rounded), best first."""
    _, legs, ctx = app.search_explained(query, limit=10)
    leg = next(leg for leg in legs if leg.name == "bilingual")
    rows = ctx.store.chunk_rows([h.chunk_id for h in leg.hits])
    return [(rows[h.chunk_id].path, round(h.raw_score, 6)) for h in leg.hits]


@pytest.mark.parametrize("language", ["ja", "en"])
def test_it_answers_on_postgres_as_on_sqlite(
    tmp_path: Path, dsn: str, jmdict: Path, language: str
) -> None:
    notes = JAPANESE if language == "ja" else ENGLISH
    dictionary = f'[search.bilingual]\ndictionary = "{jmdict}"\n'
    pg = open_kb(make_kb(tmp_path / "pg", notes, config=store_toml("postgres", dsn) + dictionary))
    lite = open_kb(make_kb(tmp_path / "lite", notes, config=store_toml("sqlite", "") + dictionary))
    try:
        assert pg.backend.name == "postgres" and lite.backend.name == "sqlite"
        found = 0
        for query in QUERIES[language]:
            got = _bilingual(pg, query)
            assert got == _bilingual(lite, query), query
            found += bool(got)
        assert found >= 2  # the queries find notes through the dictionary, not nothing
    finally:
        pg.close()
        lite.close()
