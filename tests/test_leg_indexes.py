"""A leg's index given by another plugin (``groove_leg_indexes``): the leg declares the
index and its version, a second plugin implements it for a backend; the store fills,
writes and checks it like the built-in legs' (docs/plugins.md, "A leg with its own
index")."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from groove_core.context import LegSpec, QueryContext
from groove_core.hookspecs import hookimpl
from groove_core.leg_index import IndexedChunk, LegIndexImpl, LegIndexSpec
from groove_core.models import LegHit, LegResult
from groove_core.plugins import PluginError
from groove_core.testing import check_leg_index, make_kb, open_kb

NOTES = {
    "alpha.md": "# Alpha\n\nThe ZEPHYR protocol and its handshake.\n",
    "beta.md": "# Beta\n\nA quiet note on gardens.\n\n## Later\n\nNOTHING LOUD, said BOB.\n",
}


class ShoutIndex:
    """Upper-case words of each chunk, one row per (word, chunk)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def create(self, connection: Any) -> None:
        connection.execute(
            "CREATE TABLE IF NOT EXISTS shout_words (word TEXT NOT NULL, chunk_id INTEGER NOT "
            "NULL, PRIMARY KEY (word, chunk_id)) WITHOUT ROWID"
        )
        connection.execute("CREATE TABLE IF NOT EXISTS shout_chunks (chunk_id INTEGER PRIMARY KEY)")

    def drop(self, connection: Any) -> None:
        connection.execute("DROP TABLE IF EXISTS shout_words")
        connection.execute("DROP TABLE IF EXISTS shout_chunks")

    def write(self, connection: Any, chunks: Sequence[IndexedChunk]) -> None:
        rows = {
            (word, c.chunk_id)
            for c in chunks
            for word in c.content.replace(",", " ").replace(".", " ").split()
            if len(word) > 1 and word.isupper()
        }
        connection.executemany("INSERT INTO shout_words VALUES (?, ?)", sorted(rows))
        connection.executemany(
            "INSERT INTO shout_chunks VALUES (?)", [(c.chunk_id,) for c in chunks]
        )

    def delete(self, connection: Any, chunks: Sequence[IndexedChunk]) -> None:
        ids = [(c.chunk_id,) for c in chunks]
        connection.executemany("DELETE FROM shout_words WHERE chunk_id = ?", ids)
        connection.executemany("DELETE FROM shout_chunks WHERE chunk_id = ?", ids)

    def chunk_ids(self) -> frozenset[int]:
        return frozenset(r[0] for r in self.conn.execute("SELECT chunk_id FROM shout_chunks"))

    def check(self) -> list[str]:
        return []

    def find(self, word: str) -> list[int]:
        rows = self.conn.execute(
            "SELECT chunk_id FROM shout_words WHERE word = ? ORDER BY chunk_id", (word,)
        )
        return [r[0] for r in rows]


class ShoutLeg:
    """Declares the leg and its index, with no backend of its own."""

    @hookimpl
    def groove_legs(self) -> list[LegSpec]:
        return [LegSpec("shout", "lexical", self.search, index=LegIndexSpec("shout", "1"))]

    def search(self, ctx: QueryContext) -> LegResult:
        index = ctx.store.leg_index("shout")
        if index is None:
            ctx.note("the shout leg has no index on this backend")
            return LegResult("shout", (), {"skipped": True})
        found = [i for w in ctx.query.text.split() if w.isupper() for i in index.find(w)]
        hits = tuple(LegHit(chunk_id, rank) for rank, chunk_id in enumerate(found, 1))
        return LegResult("shout", hits, {})


class ShoutOnSqlite:
    """Implements the shout leg's index for the SQLite backend."""

    def __init__(self, fail_writes: bool = False) -> None:
        self.fail_writes = fail_writes

    @hookimpl
    def groove_leg_indexes(self) -> list[LegIndexImpl]:
        return [LegIndexImpl("shout", "sqlite", self.make)]

    def make(self, conn: Any) -> ShoutIndex:
        index = ShoutIndex(conn)
        if self.fail_writes:

            def write(connection: Any, chunks: Sequence[IndexedChunk]) -> None:
                raise RuntimeError("the disk of words is full")

            index.write = write  # type: ignore[method-assign]
        return index


def _kb(tmp_path: Path) -> Path:
    return make_kb(tmp_path / "kb", NOTES)


def test_an_index_another_plugin_implements_is_filled_and_searched(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path), extra_plugins=[("shout", ShoutLeg()), ("loud", ShoutOnSqlite())])
    check_leg_index(app, "shout")
    result = app.search("ZEPHYR", limit=3)
    assert [h.path for h in result.results][:1] == ["alpha.md"]
    assert app.store.leg_index("shout").find("ZEPHYR")


def test_without_an_implementation_the_leg_has_no_index(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path), extra_plugins=[("shout", ShoutLeg())])
    assert app.store.leg_index("shout") is None
    result = app.search("ZEPHYR", limit=3)
    assert "the shout leg has no index on this backend" in result.warnings


def test_an_index_failing_to_write_stops_indexing_with_one_line_and_keeps_the_index(
    tmp_path: Path,
) -> None:
    kb = _kb(tmp_path)
    app = open_kb(kb, extra_plugins=[("shout", ShoutLeg()), ("loud", ShoutOnSqlite())])
    before = app.search("ZEPHYR", limit=3)
    (kb / "gamma.md").write_text("# Gamma\n\nANOTHER loud WORD.\n", encoding="utf-8")
    broken = open_kb(
        kb,
        extra_plugins=[("shout", ShoutLeg()), ("loud", ShoutOnSqlite(fail_writes=True))],
        index=False,
    )
    with pytest.raises(PluginError) as caught:
        broken.index()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("the plugin 'loud' (registered in process) failed in ")
    assert "the disk of words is full" in message
    # Nothing of the failed file went in: the index is as it was, and healthy.
    again = open_kb(
        kb, extra_plugins=[("shout", ShoutLeg()), ("loud", ShoutOnSqlite())], index=False
    )
    assert [h.path for h in again.search("ZEPHYR", limit=3).results] == [
        h.path for h in before.results
    ]
    assert "gamma.md" not in {d.path for d in again.store.documents()}
    assert again.doctor().healthy
    again.index()
    assert "gamma.md" in {d.path for d in again.store.documents()}
    assert again.store.leg_index("shout").find("ANOTHER")
