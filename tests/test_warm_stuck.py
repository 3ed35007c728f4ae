"""A warm server whose one command thread is stuck (a plugin that hangs): the clients
behind it are refused within seconds and run alone, not held for the answer deadline, and
the silent mark the stuck command's client leaves stays until the command thread works
again (the accepting thread, alive all along, removed it within a second)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import groove_core
from groove_core.app import Groove
from groove_core.cli import warm, warm_server
from groove_core.cli.main import startup_cli
from groove_core.testing import make_kb, open_kb
from tests.helpers import bound_sockets

CONFIG = '[embedder]\nname = "hashing"\n'


def _request(kb: Path) -> bytes:
    where = {k: os.environ.get(k) for k in warm.MATCH_ENV}
    body = {"op": "run", "version": groove_core.__version__, "argv": ["status", str(kb)],
            "cwd": str(kb), "env": {}, "where": where, "python": sys.prefix}  # fmt: skip
    return json.dumps(body).encode() + b"\n"


@pytest.fixture
def stuck(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[warm_server.LocalServer, Path, threading.Event]]:
    """A server whose first command hangs until the event is set."""
    kb = make_kb(tmp_path / "notes", config=CONFIG)
    open_kb(kb)
    app = Groove.open(kb)
    release, real, calls = threading.Event(), warm_server._invoke, []

    def hangs_once(cli: Any, argv: list[str]) -> int:
        calls.append(argv)
        if len(calls) == 1:
            release.wait(60)
        return real(cli, argv)

    monkeypatch.setattr(warm_server, "_invoke", hangs_once)
    monkeypatch.setattr(warm_server, "STUCK_SECONDS", 1.5, raising=False)
    listener = warm_server.LocalServer(
        [(kb, None, app)], cli_factory=startup_cli, on_stop=lambda: None
    )
    assert listener.start() is not None
    try:
        yield listener, kb, release
    finally:
        release.set()
        listener.close()


def _start_stuck_command(listener: warm_server.LocalServer, kb: Path) -> threading.Thread:
    assert listener.path is not None
    path = listener.path
    first = threading.Thread(target=lambda: warm._ask(path, _request(kb)), daemon=True)
    first.start()
    time.sleep(0.5)  # it runs (and hangs) now
    return first


def test_a_command_queued_behind_a_stuck_one_is_refused_within_seconds(
    stuck: tuple[warm_server.LocalServer, Path, threading.Event],
) -> None:
    listener, kb, release = stuck
    _start_stuck_command(listener, kb)
    began = time.monotonic()
    try:
        answer = warm._ask(listener.path, _request(kb), timeout=8)  # type: ignore[arg-type]
    except warm.Silent as why:  # what it did: waited the whole deadline
        pytest.fail(f"held behind the stuck command: {why}")
    took = time.monotonic() - began
    assert answer is not None and "refused" in answer, answer
    assert "queued behind a command running for" in answer["refused"]
    assert took < 5
    release.set()
    # The refused command was not run for nobody: the server answers the next at once.
    time.sleep(0.3)
    answer = warm._ask(listener.path, _request(kb), timeout=8)  # type: ignore[arg-type]
    assert answer is not None and answer.get("code") == 0, answer


def test_the_silent_mark_stays_while_the_command_thread_is_stuck(
    stuck: tuple[warm_server.LocalServer, Path, threading.Event],
) -> None:
    listener, kb, release = stuck
    _start_stuck_command(listener, kb)
    mark = Path(f"{listener.path}{warm.SILENT}")
    warm._mark_silent(str(listener.path))  # as the stuck command's client does at its deadline
    time.sleep(3 * warm_server.MARK_CHECK)
    assert mark.exists(), "the mark was removed while the command thread is still stuck"
    assert str(listener.path) not in warm._sockets(str(mark.parent))  # skipped at once
    release.set()
    deadline = time.monotonic() + 5
    while mark.exists():
        assert time.monotonic() < deadline, "the mark stayed after the command thread went on"
        time.sleep(0.1)


def test_a_mark_on_an_idle_server_is_removed(
    stuck: tuple[warm_server.LocalServer, Path, threading.Event],
) -> None:
    listener, _, _ = stuck
    mark = Path(f"{listener.path}{warm.SILENT}")
    warm._mark_silent(str(listener.path))
    deadline = time.monotonic() + 5
    while mark.exists():
        assert time.monotonic() < deadline, "an idle server kept its mark"
        time.sleep(0.1)


def test_the_listen_queue_holds_more_than_the_clients_served_at_once() -> None:
    assert warm_server.LISTEN_BACKLOG >= warm_server.MAX_CLIENTS


def test_a_refusing_socket_of_a_live_process_is_left_alone() -> None:
    """macOS and BSD refuse a connection when a live server's listen queue is full: the
    client removed that live server's socket. Now only a socket whose process is gone."""
    folder = warm.runtime_dir(create=True)
    assert folder is not None
    live = folder / f"{os.getpid()}-1{warm.SUFFIX}"
    dead = folder / f"{2**22 + 29}-1{warm.SUFFIX}"
    bound_sockets(live, dead)  # bound, not listening: each refuses, as a full queue does
    try:
        assert warm._ask(live, b"{}\n") is None
        assert warm._ask(dead, b"{}\n") is None
        assert live.exists()
        assert not dead.exists()
    finally:
        live.unlink(missing_ok=True)
        dead.unlink(missing_ok=True)
