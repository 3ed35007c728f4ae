"""A damaged, partial, read-only or replaced index: doctor tells damage from the
environment, never loses an index it cannot rebuild, and search and the server say what
is wrong instead of crashing or serving stale or partial results silently."""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from mcp import Client

from evaldata import EVALDATA
from groove_core.app import Groove
from groove_core.cli import build_cli
from groove_core.index_report import IndexProgress
from groove_core.mcp.server import build_mcp_server
from groove_core.sqlite.store import connect, staging_path
from groove_core.testing import make_kb, open_kb
from tests.helpers import index_content

CONFIG = '[embedder]\nname = "hashing"\nbatch_size = 8\n'
#: Three or more characters, quoted: trigram FTS ignores shorter phrases and leaves unquoted
#: Japanese ones to the word leg, and the FTS leg must run.
QUERY = '"東京大学"'


def _corpus(root: Path, files: int) -> Path:
    kb = make_kb(root, {}, config=CONFIG)
    for path in sorted((EVALDATA / "jsquad-ja-para" / "docs").glob("*.md"))[:files]:
        shutil.copy(path, kb / path.name)
    return kb


def _cli(*args: str) -> Result:
    """Run a command; it must end by its own exit, never an escaped exception."""
    result = CliRunner().invoke(build_cli(None), list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result


def _root_page(index: Path, table: str) -> int:
    conn = connect(index)
    row = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    conn.close()
    return int(row[0])


def _overwrite_pages(index: Path, pages: list[int], seed: int) -> None:
    """Fill whole pages of the file with random bytes, as a bad disk block would."""
    conn = connect(index)
    size = int(conn.execute("PRAGMA page_size").fetchone()[0])
    conn.close()
    rng = random.Random(seed)
    with open(index, "r+b") as f:
        for page in pages:
            f.seek((page - 1) * size)
            f.write(rng.randbytes(size))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[tuple[str, str, int, str]]]:
    """A 60-document index (several pages per table) and its content, to copy per test."""
    kb = _corpus(tmp_path_factory.mktemp("built") / "kb", 60)
    app = open_kb(kb)
    app.close()
    return kb, index_content(app.index_file)


def _copy_kb(built: tuple[Path, Any], tmp_path: Path) -> Path:
    return Path(shutil.copytree(built[0], tmp_path / "kb"))


# -- item 2: page-level corruption -------------------------------------------------------


@pytest.mark.parametrize("table", ["fts_chunks_data", "vec_chunks_vector_chunks00", "chunks"])
def test_a_damaged_root_page_is_detected_reported_and_rebuilt(
    built: tuple[Path, set[Any]], tmp_path: Path, table: str
) -> None:
    kb = _copy_kb(built, tmp_path)
    index = Groove.open(kb).index_file
    _overwrite_pages(index, [_root_page(index, table)], seed=1)

    searched = _cli("search", QUERY, "--kb", str(kb))
    assert searched.exit_code == 1, searched.output
    assert "is damaged" in searched.output and "groove doctor --repair" in searched.output
    assert str(tmp_path) not in searched.output

    checked = _cli("doctor", str(kb))
    assert checked.exit_code == 1 and "problem:" in checked.output, checked.output
    assert "environment" not in checked.output

    repaired = _cli("doctor", str(kb), "--repair")
    assert repaired.exit_code == 0, repaired.output
    assert "rebuilt from the knowledge base" in repaired.output
    assert index_content(index) == built[1]
    assert _cli("doctor", str(kb)).exit_code == 0
    assert _cli("search", QUERY, "--kb", str(kb)).exit_code == 0


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_random_damaged_pages_never_crash_and_repair_restores(
    built: tuple[Path, set[Any]], tmp_path: Path, seed: int
) -> None:
    kb = _copy_kb(built, tmp_path)
    index = Groove.open(kb).index_file
    pages = index.stat().st_size // 4096
    _overwrite_pages(index, random.Random(seed).sample(range(2, pages + 1), 4), seed)

    searched = _cli("search", QUERY, "--kb", str(kb))
    assert searched.exit_code == 0 or "is damaged" in searched.output, searched.output
    checked = _cli("doctor", str(kb))
    assert checked.exit_code == 1 and "problem:" in checked.output, checked.output
    repaired = _cli("doctor", str(kb), "--repair")
    assert repaired.exit_code == 0, repaired.output
    assert index_content(index) == built[1]


# -- item 1: environment problems are not damage -----------------------------------------


@contextmanager
def _disk_fills_after(pages: int, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every new index connection may grow its file only to ``pages`` pages: SQLite itself
    then fails a write with SQLITE_FULL, exactly as on a full disk."""
    import groove_core.sqlite.store as store_module

    real = store_module.connect

    def capped(path: Path | str) -> Any:
        conn = real(path)
        conn.execute(f"PRAGMA max_page_count = {int(pages)}")
        return conn

    with monkeypatch.context() as patch:
        patch.setattr(store_module, "connect", capped)
        yield


def test_repair_on_a_full_disk_keeps_the_old_index(
    built: tuple[Path, set[Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = _copy_kb(built, tmp_path)
    index = Groove.open(kb).index_file
    _overwrite_pages(index, [_root_page(index, "fts_chunks_data")], seed=1)
    damaged = index.read_bytes()

    with _disk_fills_after(20, monkeypatch):
        repaired = _cli("doctor", str(kb), "--repair")
        rebuilt = _cli("index", str(kb), "--rebuild")
    assert repaired.exit_code == 1, repaired.output
    assert "no space left on the disk" in repaired.output
    assert "left as it was" in repaired.output
    assert rebuilt.exit_code == 1 and "no space left on the disk" in rebuilt.output
    # Nothing was deleted or half-written, and no staging file was left behind.
    assert index.read_bytes() == damaged
    assert not staging_path(index).exists()
    # Doctor still sees the damage; it never calls a remnant healthy.
    assert _cli("doctor", str(kb)).exit_code == 1
    assert _cli("doctor", str(kb), "--repair").exit_code == 0
    assert index_content(index) == built[1]


def test_a_rebuild_killed_midway_leaves_the_old_index_and_is_tidied(
    built: tuple[Path, set[Any]], tmp_path: Path
) -> None:
    kb = _copy_kb(built, tmp_path)
    app = Groove.open(kb)
    before = app.index_file.read_bytes()

    def stop(event: IndexProgress) -> None:
        if event.files_done == 30:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        app.index(rebuild=True, progress=stop)
    assert app.index_file.read_bytes() == before
    assert not staging_path(app.index_file).exists()
    # A staging file left by a SIGKILL is removed by the next run.
    staging_path(app.index_file).write_bytes(b"left by a killed rebuild")
    assert app.doctor().healthy
    assert not staging_path(app.index_file).exists()


@contextmanager
def _read_only(path: Path) -> Iterator[None]:
    """The file cannot be written, even by root (permission bits do not stop root)."""
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(path)], check=True)
    else:
        path.chmod(0o444)
    try:
        yield
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        else:
            path.chmod(0o644)


def test_a_read_only_index_is_an_environment_problem_not_damage(
    built: tuple[Path, set[Any]], tmp_path: Path
) -> None:
    kb = _copy_kb(built, tmp_path)
    index = Groove.open(kb).index_file
    before = index.read_bytes()
    with _read_only(index):
        assert _cli("search", QUERY, "--kb", str(kb)).exit_code == 0
        checked = _cli("doctor", str(kb))
        repaired = _cli("doctor", str(kb), "--repair")
    for result in (checked, repaired):
        # Checked as far as it can be without writing, and healthy: nothing to repair.
        assert result.exit_code == 0, result.output
        assert "problem:" not in result.output  # no damage is claimed
        assert "skipped: the fts leg index's own check" in result.output
        assert "read-only" in result.output and "healthy as far as checked" in result.output
        assert str(tmp_path) not in result.output
    assert "rebuilt from the knowledge base" not in repaired.output
    assert index.read_bytes() == before
    assert _cli("doctor", str(kb)).exit_code == 0


def test_a_damaged_read_only_index_is_left_in_place_with_a_clear_error(
    built: tuple[Path, set[Any]], tmp_path: Path
) -> None:
    kb = _copy_kb(built, tmp_path)
    index = Groove.open(kb).index_file
    _overwrite_pages(index, [_root_page(index, "chunks")], seed=2)
    damaged = index.read_bytes()
    with _read_only(index):
        repaired = _cli("doctor", str(kb), "--repair")
    assert repaired.exit_code == 1, repaired.output
    assert "problem:" in repaired.output and "environment:" in repaired.output
    assert "left as it was" in repaired.output
    assert "rebuilt from the knowledge base" not in repaired.output
    assert index.read_bytes() == damaged and not staging_path(index).exists()


# -- item 3: an unfinished index run is said, not served silently ------------------------


def _search_json(kb: Path) -> dict[str, Any]:
    result = _cli("search", QUERY, "--kb", str(kb), "--json")
    assert result.exit_code == 0, result.output
    payload: dict[str, Any] = json.loads(result.stdout)
    return payload


def _index_status(app: Groove) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        async with Client(build_mcp_server(app)) as client:
            result = await client.call_tool("index_status", {})
            assert result.structured_content is not None
            return result.structured_content

    return asyncio.run(main())


def _assert_incomplete(kb: Path, incomplete: bool) -> None:
    warnings = _search_json(kb).get("warnings", [])
    assert any("index is incomplete" in w for w in warnings) == incomplete, warnings
    status = _index_status(Groove.open(kb))
    assert status["incomplete"] is incomplete, status
    assert (status["incomplete_note"] is not None) == incomplete
    doctor = _cli("doctor", str(kb))
    assert ("index is incomplete" in doctor.output) == incomplete, doctor.output
    assert doctor.exit_code == (1 if incomplete else 0)


def test_an_interrupted_first_index_is_reported_incomplete_until_completed(
    tmp_path: Path,
) -> None:
    kb = _corpus(tmp_path / "kb", 60)
    app = Groove.open(kb)

    def stop(event: IndexProgress) -> None:
        if event.files_done == 40:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        app.index(progress=stop)
    _assert_incomplete(kb, True)
    assert Groove.open(kb).index().documents_total == 60
    _assert_incomplete(kb, False)


def test_an_update_of_a_complete_index_is_not_marked(notes_kb: Path) -> None:
    app = open_kb(notes_kb)
    (notes_kb / "new.md").write_text("# New\n\n東京大学の新しいノート\n", encoding="utf-8")

    def check(event: IndexProgress) -> None:
        assert app.store.incomplete() is None

    app.index(progress=check)
    assert app.store.incomplete() is None


def test_sigkill_during_a_first_index_is_reported_incomplete(tmp_path: Path) -> None:
    kb = _corpus(tmp_path / "kb", 1145)
    index = Groove.open(kb).index_file
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "groove_core", "index", str(kb)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        if _documents(index) > 0:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the index run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert 0 < _documents(index) < 1145
    _assert_incomplete(kb, True)


def _documents(index: Path) -> int:
    if not index.exists():
        return 0
    conn = connect(index)
    try:
        row = conn.execute("SELECT count(*) FROM documents").fetchone()
    except Exception:  # the schema is not created yet
        return 0
    finally:
        conn.close()
    return int(row[0])


# -- item 4: a running server follows a rebuilt index ------------------------------------


def test_a_running_server_reads_the_index_a_rebuild_swapped_in(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", {"old.md": "# Old\n\n旧い東京大学のノート\n"}, config=CONFIG)
    app = open_kb(kb)
    server = build_mcp_server(app)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}

    async def main() -> tuple[list[str], list[str]]:
        async with Client(server) as client:
            before = await client.call_tool("search", {"query": QUERY})
            (kb / "old.md").unlink()
            (kb / "new.md").write_text("# New\n\n新しい東京大学のノート\n", encoding="utf-8")
            rebuild = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "groove_core", "index", str(kb), "--rebuild", env=env
            )
            assert await rebuild.wait() == 0
            after = await client.call_tool("search", {"query": QUERY})
            status = await client.call_tool("index_status", {})
            assert status.structured_content is not None
            assert status.structured_content["documents"] == 1
            return _paths(before), _paths(after)

    before, after = asyncio.run(main())
    assert before == ["old.md"]
    assert after == ["new.md"]


def _paths(result: Any) -> list[str]:
    assert not result.is_error, result.content
    return [hit["path"] for hit in result.structured_content["results"]]


def test_reading_tools_on_a_damaged_index_say_so_over_mcp(
    built: tuple[Path, set[Any]], tmp_path: Path
) -> None:
    kb = _copy_kb(built, tmp_path)
    index = Groove.open(kb).index_file
    _overwrite_pages(index, [_root_page(index, "chunks"), _root_page(index, "documents")], seed=2)
    server = build_mcp_server(Groove.open(kb))

    async def scenario() -> list[Any]:
        async with Client(server) as client:
            return [
                await client.call_tool("list_documents", {}),
                await client.call_tool("get_document", {"path": "a10336-p00.md"}),
            ]

    for result in asyncio.run(scenario()):
        assert result.is_error
        text = result.content[0].text
        assert "is damaged" in text and "groove doctor --repair" in text, text
        assert str(tmp_path) not in text
