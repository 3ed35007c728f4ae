"""Changing embedders: a clear error that says what to run, and ``index --reembed``, which
re-embeds a copy while the old index serves and swaps it in only when complete."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from groove_core.app import Groove
from groove_core.cli import build_cli
from groove_core.embedding import EmbedderError, EmbedderSpec, HashingEmbedder
from groove_core.hookspecs import hookimpl
from groove_core.sqlite.store import Store, staging_path
from groove_core.storage import EmbedderMismatchError
from groove_core.testing import make_kb

SMALL = '[embedder]\nname = "hashing-32"\n'


class _Embedders:
    """A second embedder (32-d hashing) that fails once ``budget`` calls are spent."""

    def __init__(self, budget: int | None = None) -> None:
        self.budget = budget

    @hookimpl
    def groove_embedders(self) -> list[EmbedderSpec]:
        return [EmbedderSpec("hashing-32", lambda c, s: _Flaky(self))]


class _Flaky(HashingEmbedder):
    def __init__(self, owner: _Embedders) -> None:
        super().__init__(32)
        self.owner = owner

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if self.owner.budget is not None:
            if self.owner.budget == 0:
                raise EmbedderError("the test embedder went away")
            self.owner.budget -= 1
        return super().embed_documents(texts)


def _app(kb: Path, plugin: _Embedders) -> Groove:
    return Groove.open(kb, extra_plugins=[("test_embedders", plugin)])


def _vectors(app: Groove) -> list[Any]:
    return list(
        app.store.conn.execute(
            "SELECT d.path, c.ordinal, v.embedding FROM chunks c "
            "JOIN documents d ON d.id = c.doc_id JOIN vec_chunks v ON v.chunk_id = c.id "
            "ORDER BY d.path, c.ordinal"
        )
    )


def test_a_different_embedder_is_a_clear_error_naming_the_command(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb")
    Groove.open(kb).index()  # the hashing embedder, 64-d
    (kb / "groove.toml").write_text(SMALL)
    for action in ("search", "index"):
        app = _app(kb, _Embedders())
        with pytest.raises(EmbedderMismatchError) as err:
            app.search("ranking") if action == "search" else app.index()
        message = str(err.value)
        assert "'hashing-trigram:64' (64 dimensions)" in message
        assert "'hashing-trigram:32'" in message and "groove index --reembed" in message


def test_reembed_swaps_in_an_index_equal_to_a_clean_build(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb")
    Groove.open(kb).index()
    (kb / "groove.toml").write_text(SMALL)
    plugin = _Embedders()
    report = _app(kb, plugin).index(reembed=True)
    assert report.chunks_embedded > 0 and report.unchanged == report.documents_total
    app = _app(kb, plugin)
    assert app.store.embedder_identity() == ("hashing-trigram:32", 32)
    assert app.search("rust ownership").results[0].path == "notes/rust.md"

    clean = _app(make_kb(tmp_path / "clean", config=SMALL), plugin)
    clean.index()
    assert _vectors(app) == _vectors(clean)
    assert not staging_path(app.index_file).exists()


def test_the_old_index_serves_through_a_failed_reembed_and_stays(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", config='[embedder]\nname = "hashing"\nbatch_size = 2\n')
    Groove.open(kb).index()
    old = Groove.open(kb)
    before = old.search("rust ownership").results
    (kb / "groove.toml").write_text('[embedder]\nname = "hashing-32"\nbatch_size = 2\n')
    with pytest.raises(EmbedderError):
        _app(kb, _Embedders(budget=1)).index(reembed=True)  # fails part-way
    assert old.search("rust ownership").results == before
    store = Store.open(old.index_file)
    assert store.embedder_identity() == ("hashing-trigram:64", 64)
    store.close()
    assert not staging_path(old.index_file).exists()
    old.close()


def test_reembed_on_the_command_line(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb")
    Groove.open(kb).index()
    (kb / "groove.toml").write_text('[embedder]\nname = "model2vec"\n')
    cli = build_cli(None)
    result = CliRunner().invoke(cli, ["search", "ranking", "--kb", str(kb)])
    assert result.exit_code != 0 and "groove index --reembed" in result.output
    result = CliRunner().invoke(cli, ["index", str(kb), "--reembed"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(cli, ["search", "ranking", "--kb", str(kb)])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(cli, ["index", str(kb), "--reembed", "--rebuild"])
    assert result.exit_code != 0 and "exclude each other" in result.output
