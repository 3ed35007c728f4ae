"""The storage-backend contract: [store] backend picks a backend a plugin provides, and
the application reaches its index only through it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from groove_core.app import Groove
from groove_core.backend import BackendContext, BackendSpec
from groove_core.config import ConfigError
from groove_core.hookspecs import hookimpl
from groove_core.sqlite.backend import SqliteBackend
from groove_core.testing import FAST_CONFIG, make_kb

NOTES = {"a.md": "# Kettle\n\nDescale the kettle.\n", "b.md": "# Tea\n\nBrew the tea.\n"}


class Elsewhere:
    """A third-party backend: SQLite files kept in one folder outside the KBs, by KB name,
    counting what the application asks of it."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.calls = folder, []  # type: list[str]

    @hookimpl
    def groove_storage_backends(self) -> list[BackendSpec]:
        def factory(ctx: BackendContext) -> SqliteBackend:
            self.calls.append(f"factory {ctx.kb_name}")
            path = self.folder / f"{ctx.kb_name}.sqlite"
            return SqliteBackend(path, f"{ctx.kb_name} in the shared folder")

        return [BackendSpec("elsewhere", factory, "SQLite files in one shared folder")]


def test_the_store_backend_key_picks_a_plugins_backend(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "notes", NOTES, config=FAST_CONFIG + '[store]\nbackend = "elsewhere"\n')
    plugin = Elsewhere(tmp_path / "shared")
    app = Groove.open(kb, extra_plugins=[("elsewhere", plugin)], entry_points=False)
    report = app.index()
    assert report.documents_total == 2
    assert (tmp_path / "shared" / "notes.sqlite").exists()
    assert not (kb / ".groove" / "index.sqlite").exists()
    assert app.search("kettle", limit=1).results[0].path == "a.md"
    assert app.index_label == "notes in the shared folder"
    assert app.doctor().healthy
    assert plugin.calls == ["factory notes"]  # one backend per app, made when first used


def test_sqlite_is_the_default_and_is_provided_like_any_backend(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", NOTES, config=FAST_CONFIG)
    app = Groove.open(kb, entry_points=False)
    assert (app.backend.name, app.backend.readers) == ("sqlite", 2)
    assert app.plugins.backend_specs()["sqlite"].plugin == "sqlite"
    app.index()
    assert app.index_file.exists() and app.index_label == ".groove/index.sqlite"


def test_an_unknown_backend_is_a_clear_error(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", NOTES, config=FAST_CONFIG + '[store]\nbackend = "mongo"\n')
    app = Groove.open(kb, entry_points=False)
    with pytest.raises(ConfigError, match=r"\[store\] backend = 'mongo'.*available: sqlite"):
        app.index()
    off = FAST_CONFIG + '[plugins]\ndisabled = ["sqlite"]\n'
    app = Groove.open(make_kb(tmp_path / "off", NOTES, config=off), entry_points=False)
    with pytest.raises(ConfigError, match="available: none"):
        app.search("kettle")


LINKED = {
    "a.md": "# Kettle\n\nDescale the kettle; see [tea](b.md).\n\n## More\n\nAgain, descale.\n",
    "b.md": "# Tea\n\nBrew the tea, then [[a]].\n",
    "c.md": "# Cups\n\nWash the cups.\n",
}


def test_copy_from_moves_an_index_to_another_backend_without_re_embedding(
    tmp_path: Path,
) -> None:
    # RRF: its scores are ranks only, so the unchanged files' scores must come back
    # exactly (the score fusion reads bm25, which the changed file's statistics move)
    config = FAST_CONFIG + '[search.fusion]\nmethod = "rrf"\n'
    kb = make_kb(tmp_path / "notes", LINKED, config=config)
    plain = Groove.open(kb, entry_points=False)
    plain.index()
    before = plain.search("descale kettle", limit=5)
    (kb / "groove.toml").write_text(config + '[store]\nbackend = "elsewhere"\n')
    (kb / "c.md").write_text("# Cups\n\nWash the cups twice.\n")  # changed since: re-embedded
    plugin = Elsewhere(tmp_path / "shared")
    moved = Groove.open(kb, extra_plugins=[("elsewhere", plugin)], entry_points=False)
    report = moved.index(copy_from="sqlite")
    assert report.copied == 3
    assert (report.changed, report.unchanged, report.chunks_embedded) == (1, 2, 1)
    after = moved.search("descale kettle", limit=5)

    def unchanged(hits: tuple[Any, ...]) -> list[tuple[str, str, float]]:
        return [(h.path, h.content, h.score) for h in hits if h.path != "c.md"]

    assert unchanged(after.results) == unchanged(before.results)
    links = moved.store.links_of("a.md", 10)
    assert links is not None and [b.path for b in links.backlinks] == ["b.md"]
    assert moved.doctor().healthy
    with pytest.raises(ConfigError, match="--copy-from elsewhere: that is the configured"):
        moved.index(copy_from="elsewhere")
    with pytest.raises(ConfigError, match="exclude each other"):
        moved.index(copy_from="sqlite", rebuild=True)


def test_copy_from_keeps_unknown_token_counts_unknown_not_zero(tmp_path: Path) -> None:
    from groove_core.chunking import estimate_tokens

    kb = make_kb(tmp_path / "notes", LINKED, config=FAST_CONFIG)
    Groove.open(kb, entry_points=False).index()
    from groove_core.sqlite.store import Store

    store = Store.open(kb / ".groove" / "index.sqlite")
    with store.conn:
        store.conn.execute("UPDATE chunks SET token_count = NULL")  # as older indexes have
    store.close()
    (kb / "groove.toml").write_text(FAST_CONFIG + '[store]\nbackend = "elsewhere"\n')
    moved = Groove.open(
        kb, extra_plugins=[("elsewhere", Elsewhere(tmp_path / "shared"))], entry_points=False
    )
    moved.index(copy_from="sqlite")
    doc = next(d for d in moved.store.documents() if d.path == "a.md")
    chunks = moved.store.document_chunks(doc.doc_id)
    assert [c.token_count for c in chunks] == [estimate_tokens(c.content) for c in chunks]
    with pytest.raises(ConfigError, match="--copy-from nosuch: no enabled plugin provides"):
        moved.index(copy_from="nosuch")
