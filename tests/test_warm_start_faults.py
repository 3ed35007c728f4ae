"""A background server's start, when the ground is odd: a symbolic link planted where its
lock file goes, a file system without locks (NFS), an embedder that fails to warm up, a
socket left half made by a server that died: one line each, and nothing left behind."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from groove_core.cli import serve, warm, warm_server
from groove_core.cli.main import startup_cli
from groove_core.errors import GrooveError
from tests.helpers import bound_sockets


def test_a_symbolic_link_planted_as_the_lock_file_is_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    lock = warm_server.BackgroundLock(folder, [tmp_path / "kb"])
    path = lock.path
    lock.close()
    path.unlink()
    path.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(GrooveError) as caught:
        warm_server.BackgroundLock(folder, [tmp_path / "kb"])
    message = str(caught.value)
    assert str(path) in message and "\n" not in message
    assert "symbolic link" in message


def test_a_file_system_without_locks_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_locks(fd: int, op: int) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    lock = warm_server.BackgroundLock(tmp_path, [tmp_path / "kb"])
    monkeypatch.setattr(fcntl, "flock", no_locks)
    try:
        with pytest.raises(GrooveError) as caught:
            lock.take()
    finally:
        lock.close()
    assert str(lock.path) in str(caught.value)
    assert "TMPDIR" in str(caught.value)


class _Failing:
    def embed_query(self, text: str) -> Any:
        raise GrooveError("the embedder failed to load")


def _mine() -> list[str]:
    folder = warm.runtime_dir(create=True)
    assert folder is not None
    return [p.name for p in folder.iterdir() if p.name.startswith(f"{os.getpid()}-")]


def test_an_embedder_failing_to_warm_up_takes_the_socket_along(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    app = SimpleNamespace(kb=kb, embedder=_Failing())
    local = serve.LocalOptions(True, 60.0, None, startup_cli)
    before = _mine()
    with pytest.raises(GrooveError, match="failed to load"):
        serve._serve_local([SimpleNamespace(app=app)], None, local)
    assert _mine() == before


def test_a_half_made_socket_of_a_dead_server_is_removed_at_start(tmp_path: Path) -> None:
    folder = warm.runtime_dir(create=True)
    assert folder is not None
    dead = folder / f".{2**22 + 31}-1{warm.SUFFIX}.new"
    live = folder / f".{os.getpid()}-1{warm.SUFFIX}.new"
    bound_sockets(dead, live)
    kb = tmp_path / "kb"
    kb.mkdir()
    listener = warm_server.LocalServer(
        [(kb, None, object())], cli_factory=startup_cli, on_stop=lambda: None
    )
    try:
        assert listener.start() is not None
        assert not dead.exists()
        assert live.exists()  # a server of a live process may be starting
    finally:
        listener.close()
        dead.unlink(missing_ok=True)
        live.unlink(missing_ok=True)
