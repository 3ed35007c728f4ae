"""The warm command line's servers under races and freezes (issue #46): a server's socket
appears whole (a client never finds it bound and not yet listening, and removes it), two
`serve --background` at once leave one server, a stopped or frozen server costs a client
seconds once and is said, not 120 s in silence, and an MCP server ended with SIGTERM takes
its socket with it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from groove_core import __version__
from groove_core.app import Groove
from groove_core.cli import warm, warm_server
from groove_core.cli.main import startup_cli
from groove_core.testing import make_kb, open_kb

CONFIG = '[embedder]\nname = "hashing"\n'
#: As the client names them (spelt out too, so that these tests run against older code).
SIGN_OF_LIFE: float = getattr(warm, "SIGN_OF_LIFE", 3.0)
SILENT: str = getattr(warm, "SILENT", ".silent")
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
WHO = json.dumps({"op": "who"}).encode() + b"\n"


def groove(*args: str | Path, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "groove_core", *map(str, args)],
        env={**ENV, **env}, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def _folder() -> Path:
    folder = warm.runtime_dir(create=True)
    assert folder is not None
    return folder


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _end(pid: int) -> None:
    for sig in (signal.SIGCONT, signal.SIGTERM):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
    for _ in range(100):
        if not _alive(pid):
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


def _logged_requests() -> int:
    return sum(p.read_text().count("command line") for p in _folder().glob("background-*.log"))


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    path = make_kb(tmp_path / "notes", config=CONFIG)
    open_kb(path)
    return path


# -- a server's socket appears whole ---------------------------------------------------------


def test_a_client_never_finds_a_socket_bound_and_not_yet_listening(
    kb: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that looks between the server's bind and listen (here: while it sets the
    socket's mode) took the socket for a dead server's and removed it: the server then
    listened where nobody could reach it, or failed with FileNotFoundError."""
    app = Groove.open(kb)
    real_chmod = Path.chmod
    looked: list[int] = []

    def chmod_while_a_client_looks(self: Path, mode: int, **kw: Any) -> None:
        looked.append(len(warm._ask_all({"op": "who"})))  # what every client does
        real_chmod(self, mode, **kw)

    monkeypatch.setattr(Path, "chmod", chmod_while_a_client_looks)
    listener = warm_server.LocalServer(
        [(kb, None, app)], cli_factory=startup_cli, on_stop=lambda: None
    )
    try:
        path = listener.start()
        monkeypatch.undo()
        assert looked, "the server set no mode: the window this test looks into is gone"
        assert path is not None and path.exists()
        answer = warm._ask(path, WHO)
        assert answer is not None and answer["pid"] == os.getpid()
    finally:
        listener.close()
    assert not list(_folder().glob(f"*{os.getpid()}-*"))  # nothing left behind


def _started_pids(outputs: list[str]) -> set[int]:
    import re

    return {int(p) for out in outputs for p in re.findall(r"\(pid (\d+)\)", out)}


def test_two_background_starts_at_once_leave_one_server(kb: Path) -> None:
    """Both commands at once: one starts the server, the other says it is running (the
    same pid), both exit 0. Before, each started its own, or one removed the other's
    socket while it started and failed after 120 s."""
    for _ in range(2):
        argv = [sys.executable, "-m", "groove_core", "serve", "--background", "--kb", str(kb)]
        procs = [
            subprocess.Popen(
                argv, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for _ in range(2)
        ]
        outs = [p.communicate(timeout=60) for p in procs]
        pids = _started_pids([o + e for o, e in outs])
        try:
            assert [p.returncode for p in procs] == [0, 0], outs
            assert len(pids) == 1, outs
            (pid,) = pids
            assert sum("is already running (pid" in o for o, _ in outs) == 1, outs
            assert warm.served_by([kb]) == pid
        finally:
            for pid in pids:
                _end(pid)


def test_a_second_background_server_of_the_same_kbs_refuses_to_start(kb: Path) -> None:
    """Whoever holds the KBs' lock is their background server: another one started by
    hand (or by a start that was interrupted) stops at once and names the holder."""
    started = groove("serve", "--background", "--kb", kb)
    assert started.returncode == 0, started.stderr
    pid = warm.served_by([kb])
    assert pid is not None
    try:
        done = groove("serve", "--local-only", "--kb", kb, timeout=30)
    finally:
        _end(pid)
    assert done.returncode == 1
    assert f"is already running (pid {pid})" in done.stderr
    assert "Traceback" not in done.stderr


# -- a server that does not answer -------------------------------------------------------------


@pytest.fixture
def mute() -> Iterator[Path]:
    """A server socket whose server never answers: it listens (the kernel accepts for it)
    and never reads, as a stopped (SIGSTOP) or frozen server does."""
    path = _folder() / f"{2**22 + 17}-1{warm.SUFFIX}"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.listen(8)
    yield path
    sock.close()
    for leftover in (path, Path(f"{path}{SILENT}")):
        leftover.unlink(missing_ok=True)


def _forward_in_thread(argv: list[str], wait: float) -> tuple[bool, float]:
    """Whether forward(argv) ended within ``wait`` seconds, and how long it took."""
    done = threading.Event()
    began = time.monotonic()

    def run() -> None:
        warm.forward(argv)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    ended = done.wait(wait)
    return ended, time.monotonic() - began


def test_a_server_that_never_answers_costs_seconds_once_and_is_said(
    mute: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It cost every command 120 s, silently. Now the first command waits SIGN_OF_LIFE
    seconds and says so on one line; later ones skip it without waiting or saying."""
    ended, took = _forward_in_thread(["search", "anything"], SIGN_OF_LIFE + 10)
    assert ended, "the client waited for a server that never answers"
    assert took < SIGN_OF_LIFE + 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"did not answer in {SIGN_OF_LIFE:g} s" in err
    assert "running this command without it" in err
    assert Path(f"{mute}{SILENT}").exists()
    ended, took = _forward_in_thread(["search", "anything"], 5)
    assert ended and took < 1.0
    assert capsys.readouterr().err == ""


def test_a_busy_server_is_not_taken_for_a_frozen_one(
    kb: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command that takes longer than SIGN_OF_LIFE (or waits behind one): the server
    says it is working meanwhile, and the client gets its answer."""
    app = Groove.open(kb)
    real = warm_server._invoke

    def slow(cli: Any, argv: list[str]) -> int:
        time.sleep(SIGN_OF_LIFE + 1.5)
        return real(cli, argv)

    monkeypatch.setattr(warm_server, "_invoke", slow)
    listener = warm_server.LocalServer(
        [(kb, None, app)], cli_factory=startup_cli, on_stop=lambda: None
    )
    path = listener.start()
    assert path is not None
    where = {k: os.environ.get(k) for k in warm.MATCH_ENV}
    body = {"op": "run", "version": __version__, "argv": ["status", str(kb)],
            "cwd": str(kb), "env": {}, "where": where, "python": sys.prefix}  # fmt: skip
    try:
        answer = warm._ask(path, json.dumps(body).encode() + b"\n")
    finally:
        listener.close()
    assert answer is not None and answer["code"] == 0, answer


def test_a_stopped_background_server_costs_seconds_once(kb: Path) -> None:
    """The repro of the report: `kill -STOP` the background server, then search. It took
    124 s; now one command waits SIGN_OF_LIFE seconds and says so, the next runs alone at
    once, a start says the server does not answer, and once the server goes on it answers
    again."""
    started = groove("serve", "--background", "--kb", kb, "--idle-timeout", "300")
    assert started.returncode == 0, started.stderr
    pid = warm.served_by([kb])
    assert pid is not None
    try:
        os.kill(pid, signal.SIGSTOP)
        began = time.monotonic()
        first = groove("search", "ranking", "--kb", kb, timeout=30)
        took = time.monotonic() - began
        assert first.returncode == 0 and "guide/search.md" in first.stdout
        said = [line for line in first.stderr.splitlines() if "did not answer" in line]
        assert len(said) == 1 and f"pid {pid}" in said[0], first.stderr
        assert took < SIGN_OF_LIFE + 10
        second = groove("search", "ranking", "--kb", kb, timeout=30)
        assert second.returncode == 0 and "did not answer" not in second.stderr
        again = groove("serve", "--background", "--kb", kb, timeout=30)
        assert again.returncode == 1
        assert f"already running (pid {pid}) but does not answer" in again.stderr
        os.kill(pid, signal.SIGCONT)
        deadline = time.monotonic() + 10
        while list(_folder().glob(f"{pid}-*{SILENT}")):  # it removes the mark
            assert time.monotonic() < deadline, "the server did not clear its mark"
            time.sleep(0.2)
        before = _logged_requests()
        assert groove("search", "ranking", "--kb", kb).returncode == 0
        assert _logged_requests() == before + 1  # answered by the server again
    finally:
        _end(pid)


# -- what a client talks to and removes ---------------------------------------------------------


def test_a_client_removes_only_a_dead_servers_socket(capsys: pytest.CaptureFixture[str]) -> None:
    """Anything named *.sock that refuses a connection was removed; now only a socket of
    this user (a dead server's), not a file that happens to have the name."""
    folder = _folder()
    stray = folder / f"not-a-server{warm.SUFFIX}"
    stray.write_text("a file someone put here", encoding="utf-8")
    dead = folder / f"{2**22 + 23}-1{warm.SUFFIX}"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(dead))
    sock.close()
    try:
        assert warm.forward(["search", "anything"]) is None
        assert stray.exists()
        assert not dead.exists()
    finally:
        stray.unlink(missing_ok=True)
        dead.unlink(missing_ok=True)


def test_a_client_sends_nothing_to_a_server_of_another_user(
    mute: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The request holds the command line, the folder and part of the environment: a
    listener of another user (which could only be there by root's doing) gets none of it."""
    monkeypatch.setattr(warm, "same_user", lambda sock: False, raising=False)
    began = time.monotonic()
    assert warm._ask(mute, WHO) is None
    assert time.monotonic() - began < 1.0


def test_an_mcp_server_ended_with_sigterm_takes_its_socket_along(kb: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "groove_core", "serve", "--kb", str(kb)],
        env={**ENV, "GROOVE_NO_SERVER": "1"},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not list(_folder().glob(f"{proc.pid}-*{warm.SUFFIX}")):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGTERM
    assert not list(_folder().glob(f"{proc.pid}-*"))


def test_a_stop_the_moment_the_socket_appears_removes_it(
    kb: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`serve` closes the listener from its SIGTERM handler, which Python runs between any
    two lines of the main thread: one right after the socket got its name (the moment a
    client, or a test, first sees it) must still remove it. The handler is installed before
    the socket exists (seen in CI: a SIGTERM sent as the socket appeared left it behind)."""
    app = Groove.open(kb)
    listener = warm_server.LocalServer(
        [(kb, None, app)], cli_factory=startup_cli, on_stop=lambda: None
    )
    real = Path.rename

    def rename_then_stop(self: Path, target: Any) -> Any:
        moved = real(self, target)
        listener.close()  # what the handler does, at the worst moment
        return moved

    monkeypatch.setattr(Path, "rename", rename_then_stop)
    listener.start()
    monkeypatch.undo()
    assert not list(_folder().glob(f"{os.getpid()}-*"))
    assert not list(_folder().glob(f".{os.getpid()}-*"))
    app.close()
