"""Live index: the watcher follows creates, edits, renames and deletes; stale hits say so."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from groove_core import watch
from groove_core.app import Groove
from groove_core.storage import StoreError
from groove_core.testing import make_kb, open_kb
from groove_core.watch import Snapshot, Watcher


def _wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def _paths(kb: Path) -> set[str]:
    app = Groove.open(kb)
    try:
        return {d.path for d in app.store.documents()}
    except StoreError:  # the watcher's first run may still be creating the index
        return set()
    finally:
        app.close()


def _contents(kb: Path) -> str:
    app = Groove.open(kb)
    try:
        rows = app.store.conn.execute("SELECT content FROM chunks").fetchall()
        return "\n".join(r[0] for r in rows)
    except StoreError:  # the watcher's first run may still be creating the index
        return ""
    finally:
        app.close()


def test_watcher_follows_create_edit_rename_delete(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", {"a.md": "# A\n\nalpha\n"})
    watcher = Watcher(Groove.open(kb), interval=0.05, debounce=0.1)
    thread = watcher.start()
    try:
        _wait_for(lambda: _paths(kb) == {"a.md"})
        (kb / "b.md").write_text("# B\n\nbravo\n", encoding="utf-8")
        _wait_for(lambda: _paths(kb) == {"a.md", "b.md"})
        (kb / "b.md").rename(kb / "c.md")
        _wait_for(lambda: _paths(kb) == {"a.md", "c.md"})
        (kb / "a.md").write_text("# A\n\nzebra crossing\n", encoding="utf-8")
        _wait_for(lambda: "zebra" in _contents(kb))
        (kb / "c.md").unlink()
        _wait_for(lambda: _paths(kb) == {"a.md"})
    finally:
        watcher.stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()


def test_a_burst_of_saves_is_one_reindex(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", {"a.md": "# A\n\nalpha\n"})
    # The debounce is far longer than the gaps between the saves, so that a loaded machine
    # stretching a 0.05 s sleep cannot split the burst in two.
    watcher = Watcher(Groove.open(kb), interval=0.05, debounce=1.0)
    thread = watcher.start()
    try:
        _wait_for(lambda: watcher.runs == 1)
        time.sleep(0.2)  # let the watcher take its post-index snapshot first
        for i in range(6):
            (kb / "a.md").write_text(f"# A\n\nversion {i}\n", encoding="utf-8")
            time.sleep(0.05)
        _wait_for(lambda: watcher.runs == 2)
        time.sleep(1.5)
        assert watcher.runs == 2
    finally:
        watcher.stop.set()
        thread.join(timeout=10)


def test_hits_whose_file_changed_after_indexing_are_marked_stale(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", {"a.md": "# A\n\nalpha beta\n", "b.md": "# B\n\nalpha\n"})
    app = open_kb(kb)
    fresh = app.search("alpha", limit=2)
    assert not any(h.stale for h in fresh.results)
    assert all("stale" not in h for h in fresh.to_json()["results"])
    (kb / "a.md").write_text("# A\n\nalpha beta gamma\n", encoding="utf-8")
    (kb / "b.md").unlink()
    stale = {h.path: h.stale for h in app.search("alpha", limit=2).results}
    assert stale == {"a.md": True, "b.md": True}
    # The text output says so too, not only --json (issue #44).
    from click.testing import CliRunner

    from groove_core.cli import build_cli

    text = CliRunner().invoke(build_cli(None), ["search", "alpha", "--kb", str(kb)]).output
    assert text.count("(changed since indexed)") == 2


def test_serve_watch_indexes_and_follows_changes(tmp_path: Path) -> None:
    import asyncio
    import os
    import sys

    from mcp import Client, StdioServerParameters

    kb = make_kb(tmp_path / "kb", {"a.md": "# A\n\nalpha\n"})
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "groove_core", "serve", "--kb", str(kb), "--watch"],
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )

    async def paths(client: Client) -> set[str]:
        result = await client.call_tool("list_documents", {})
        docs = (result.structured_content or {}).get("documents", [])
        return {d["path"] for d in docs}

    async def wait_for(client: Client, expected: set[str]) -> None:
        # Until the watcher's first run commits, the tools report "no index" (an error).
        for _ in range(400):
            result = await client.call_tool("list_documents", {})
            if not result.is_error and await paths(client) == expected:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"the served index never reached {expected}")

    async def scenario() -> None:
        async with Client(params) as client:
            await wait_for(client, {"a.md"})
            (kb / "b.md").write_text("# B\n\nbravo\n", encoding="utf-8")
            await wait_for(client, {"a.md", "b.md"})

    asyncio.run(scenario())


class _EditsDuringCatchUp(Watcher):
    """Saves a file right after the first index has read it, as an editor would while a
    long catch-up index runs."""

    def _reindex(self) -> None:
        super()._reindex()
        if self.runs == 1:
            (self.app.kb / "a.md").write_text("# A\n\nzebra crossing\n", encoding="utf-8")


def test_an_edit_during_the_catch_up_index_is_indexed(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", {"a.md": "# A\n\nalpha\n"})
    watcher = _EditsDuringCatchUp(Groove.open(kb), interval=0.05, debounce=0.1)
    thread = watcher.start()
    try:
        _wait_for(lambda: "zebra" in _contents(kb))
    finally:
        watcher.stop.set()
        thread.join(timeout=10)


def _unblock(fifo: Path) -> None:
    """Open the FIFO's write end, so a reader stuck opening it (the old watcher) returns."""
    with contextlib.suppress(OSError):  # nobody is reading it: nothing to unblock
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def test_the_watcher_survives_loops_fifos_and_a_broken_ignore_file(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", {"a.md": "# A\n\nalpha\n"})
    watcher = Watcher(Groove.open(kb), interval=0.05, debounce=0.1)
    thread = watcher.start()
    fifo = kb / "pipe.md"
    try:
        _wait_for(lambda: _paths(kb) == {"a.md"})
        (kb / "x.md").symlink_to("x.md")
        (kb / "l1.md").symlink_to("l2.md")
        (kb / "l2.md").symlink_to("l1.md")
        os.mkfifo(fifo)
        (kb / "b.md").write_text("# B\n\nbravo\n", encoding="utf-8")
        _wait_for(lambda: _paths(kb) == {"a.md", "b.md"})
        # A cycle that fails outright (a malformed ignore file) does not end the watch.
        (kb / ".grooveignore").write_text("[z-a]\n", encoding="utf-8")
        time.sleep(0.3)
        (kb / ".grooveignore").write_text("drafts/\n", encoding="utf-8")
        (kb / "c.md").write_text("# C\n\ncharlie\n", encoding="utf-8")
        _wait_for(lambda: _paths(kb) == {"a.md", "b.md", "c.md"})
        assert thread.is_alive()
    finally:
        watcher.stop.set()
        _unblock(fifo)
        thread.join(timeout=10)
    assert not thread.is_alive()


Told = list[tuple[list[str], list[str], list[str]]]


def _caught_up(tmp_path: Path) -> tuple[Path, Watcher, Told, Snapshot]:
    """A KB of one file, and a watcher that has caught up with it (driven by hand, poll
    by poll, with ``_cycle``), recording what it tells."""
    kb = make_kb(tmp_path / "kb", {"a.md": "# A\n\nalpha\n"})
    told: Told = []
    watcher = Watcher(
        Groove.open(kb), debounce=0.01, on_changes=lambda a, m, r: told.append((a, m, r))
    )
    watcher._baseline = watcher.snapshot()
    watcher._reindex()
    return kb, watcher, told, watcher.snapshot()


def test_changes_of_a_failed_reindex_are_told_with_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A re-index that fails (a full disk, a model server away) may have written part of
    its files; the changes it was for are told with the run that succeeds, not lost (an MCP
    client subscribed to a document would never hear it changed)."""
    kb, watcher, told, last = _caught_up(tmp_path)
    real = watcher.app.index

    def fails(**args: Any) -> Any:
        raise StoreError("no space left on the device")

    os.utime(kb / "a.md", ns=(1, 1))
    monkeypatch.setattr(watcher.app, "index", fails)
    last = watcher._cycle(last)
    assert told == [] and watcher.runs == 1
    (kb / "b.md").write_text("# B\n\nbravo\n", encoding="utf-8")
    monkeypatch.setattr(watcher.app, "index", real)
    watcher._cycle(last)
    assert watcher.runs == 2
    assert told == [(["b.md"], ["a.md"], [])]


def test_a_failed_reindex_is_tried_again_without_a_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing changes after the failure (the edit is done, or the model server comes
    back): the run is tried again after a wait that doubles with each failure."""
    kb, watcher, told, last = _caught_up(tmp_path)
    real = watcher.app.index
    calls: list[int] = []

    def fails(**args: Any) -> Any:
        calls.append(1)
        raise StoreError("the model server is away")

    (kb / "b.md").write_text("# B\n\nbravo\n", encoding="utf-8")
    monkeypatch.setattr(watcher.app, "index", fails)
    monkeypatch.setattr(watch, "RETRY_SECONDS", 0.2)
    last = watcher._cycle(last)
    assert len(calls) == 1 and watcher._retry_at is not None
    last = watcher._cycle(last)  # too soon: nothing changed, no run
    assert len(calls) == 1
    time.sleep(0.25)
    last = watcher._cycle(last)  # due: tried again, and failed again
    assert len(calls) == 2
    assert watcher._retry_at - time.monotonic() > 0.3  # the wait doubled
    monkeypatch.setattr(watcher.app, "index", real)
    watcher._retry_at = time.monotonic()
    watcher._cycle(last)
    assert watcher.runs == 2 and watcher._retry_at is None
    assert told == [(["b.md"], [], [])]
