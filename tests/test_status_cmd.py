"""``groove status``: what the index holds and how far it lags the files, for one KB."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from groove_core.app import Groove
from groove_core.cli import build_cli
from groove_core.index_report import IndexProgress
from groove_core.sqlite.store import Store
from groove_core.status import kb_status
from groove_core.storage import INCOMPLETE_KEY
from groove_core.testing import open_kb


def _run(*args: str) -> Result:
    return CliRunner().invoke(build_cli(None), list(args), catch_exceptions=False)


def test_status_of_an_indexed_kb_as_json(notes_kb: Path) -> None:
    open_kb(notes_kb).close()
    result = _run("status", str(notes_kb), "--json")
    assert result.exit_code == 0, result.output
    status = json.loads(result.output)
    assert status["indexed"] is True
    assert (status["documents"], status["stale"]) == (4, 0)
    assert status["chunks"] >= 4
    assert status["embedder"] == {
        "name": "hashing",
        "configured_identity": "hashing-trigram:64",
        "identity": "hashing-trigram:64",
        "dim": 64,
        "matches": True,
    }
    assert status["index_file"] == ".groove/index.sqlite"
    index = notes_kb / ".groove" / "index.sqlite"
    wal = index.with_name("index.sqlite-wal")
    on_disk = index.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    assert status["index_bytes"] == on_disk > 0
    assert status["last_indexed"] is not None
    assert status["incomplete"] is False and status["incomplete_since"] is None
    assert status["changes_on_disk"]["up_to_date"] is True


def test_stale_count_follows_added_modified_and_deleted_files(notes_kb: Path) -> None:
    open_kb(notes_kb).close()
    (notes_kb / "new.md").write_text("# New\n\nfresh\n", encoding="utf-8")
    (notes_kb / "notes" / "rust.md").write_text("# Rust\n\nrewritten\n", encoding="utf-8")
    os.utime(notes_kb / "notes" / "rust.md", ns=(1, 1))
    (notes_kb / "guide" / "search.md").unlink()
    status = kb_status(Groove.open(notes_kb))
    changes = status["changes_on_disk"]
    assert status["stale"] == 3
    assert (changes["added"], changes["modified"], changes["deleted"]) == (
        ["new.md"],
        ["notes/rust.md"],
        ["guide/search.md"],
    )
    human = _run("status", "--kb", str(notes_kb)).output
    assert "changed since:  1 added, 1 modified, 1 deleted (run 'groove index' to update)" in human


def test_status_before_any_index_says_so_without_creating_one(notes_kb: Path) -> None:
    result = _run("status", str(notes_kb))
    assert result.exit_code == 0, result.output
    assert "index:          none yet (.groove/index.sqlite does not exist)" in result.output
    assert "documents:      0" in result.output
    assert "last indexed:   never" in result.output
    assert "changed since:  4 added, 0 modified, 0 deleted" in result.output
    assert not (notes_kb / ".groove").exists()


def test_an_interrupted_first_run_is_reported(notes_kb: Path) -> None:
    def stop(event: IndexProgress) -> None:
        if event.files_done == 2:
            raise KeyboardInterrupt

    app = Groove.open(notes_kb)
    with pytest.raises(KeyboardInterrupt):
        app.index(progress=stop)
    status = kb_status(Groove.open(notes_kb))
    assert status["incomplete"] is True
    assert status["incomplete_since"] is not None
    assert status["stale"] > 0
    human = _run("status", str(notes_kb)).output
    assert "interrupted:    the index is incomplete: an index run started" in human
    Groove.open(notes_kb).index()
    assert kb_status(Groove.open(notes_kb))["incomplete"] is False


def test_another_embedder_in_the_config_is_reported_not_an_error(notes_kb: Path) -> None:
    open_kb(notes_kb).close()
    store = Store.open(notes_kb / ".groove" / "index.sqlite")
    with store.transaction():
        store.set_meta("embedder", "other-model:1")
    store.close()
    result = _run("status", str(notes_kb))
    assert result.exit_code == 0, result.output
    assert "the configuration now gives hashing-trigram:64" in result.output
    assert kb_status(Groove.open(notes_kb))["embedder"]["matches"] is False


def test_a_damaged_index_is_one_clear_line(notes_kb: Path) -> None:
    index = notes_kb / ".groove" / "index.sqlite"
    index.parent.mkdir()
    index.write_bytes(b"not a database at all" * 100)
    result = _run("status", str(notes_kb))
    assert result.exit_code == 1
    assert result.output.startswith("groove: ")
    assert "Traceback" not in result.output
    assert ".groove/index.sqlite" in result.output and str(notes_kb) not in result.output


def test_status_reads_without_writing(notes_kb: Path) -> None:
    open_kb(notes_kb).close()
    store = Store.open(notes_kb / ".groove" / "index.sqlite")
    before = dict(store.conn.execute("SELECT key, value FROM meta").fetchall())
    store.close()
    _run("status", str(notes_kb), "--json")
    store = Store.open(notes_kb / ".groove" / "index.sqlite")
    after = dict(store.conn.execute("SELECT key, value FROM meta").fetchall())
    store.close()
    assert before == after and INCOMPLETE_KEY not in after


def test_status_of_several_kbs_is_one_entry_each(notes_kb: Path, tmp_path: Path) -> None:
    from groove_core.testing import make_kb

    other = make_kb(tmp_path / "other", {"x.md": "# X\n\nxylophone\n"})
    open_kb(notes_kb).close()
    open_kb(other).close()
    result = _run("status", "--kb", str(notes_kb), "--kb", str(other), "--json")
    assert result.exit_code == 0, result.output
    statuses = json.loads(result.output)
    assert [s["documents"] for s in statuses] == [4, 1]
    human = _run("status", "--kb", str(notes_kb), "--kb", str(other))
    assert human.output.count("documents:") == 2
