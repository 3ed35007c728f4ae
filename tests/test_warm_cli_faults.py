"""The warm command line (issue #31) when things go wrong around it: a current folder
deleted under the shell, Ctrl-C while a server is busy, a KB folder deleted or replaced
while it is held, another registry of KB names, a configuration changed under a background
server, and requests about other KBs, which must not keep an idle server alive."""

from __future__ import annotations

import json
import os
import shutil
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
from groove_core.testing import make_kb

CONFIG = '[embedder]\nname = "hashing"\n'


def _run(argv: list[str], cwd: Path, **extra: Any) -> bytes:
    where = {k: os.environ.get(k) for k in warm.MATCH_ENV}
    body = {"op": "run", "version": __version__, "argv": argv, "cwd": str(cwd),
            "env": {}, "where": where, "python": sys.prefix, **extra}  # fmt: skip
    return json.dumps(body).encode() + b"\n"


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[warm_server.LocalServer, Path, Path, threading.Event]]:
    """A background listener in this process holding a KB configured by --config (the
    KB folder has no groove.toml of its own)."""
    config = tmp_path / "groove.toml"
    config.write_text(CONFIG, encoding="utf-8")
    kb = make_kb(tmp_path / "notes", config=None)
    app = Groove.open(kb, config)
    app.index()
    stopped = threading.Event()
    listener = warm_server.LocalServer(
        [(kb, config, app)], cli_factory=startup_cli, background=True, on_stop=stopped.set
    )
    assert listener.start() is not None
    yield listener, kb, config, stopped
    listener.close()


def test_a_deleted_current_folder_runs_the_command_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert warm.runtime_dir(create=True) is not None
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert warm.forward(["search", "anything"]) is None  # not a traceback


def test_ctrl_c_while_a_server_is_busy_is_said_as_alone(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while the client waits for a busy server: what the command says alone, not a
    traceback. The interrupt is raised where the wait is (a real SIGINT's delivery depends
    on how the test run was started: a background job has it ignored)."""
    folder = warm.runtime_dir(create=True)
    assert folder is not None
    busy = socket.socket(socket.AF_UNIX)
    busy.bind(str(folder / f"busy-{os.getpid()}{warm.SUFFIX}"))
    busy.listen(1)  # accepts, never answers: a server busy with a long command
    waited: list[str] = []

    def interrupted(sock: socket.socket, limit: int, seconds: float | None = None) -> bytes:
        waited.append(sock.getpeername())
        raise KeyboardInterrupt

    monkeypatch.setattr(warm, "read_line", interrupted)
    try:
        code = warm.forward(["search", "anything"])
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C came out of forward() as a traceback")
    finally:
        busy.close()
        (folder / f"busy-{os.getpid()}{warm.SUFFIX}").unlink()
    assert waited, "forward never waited for the busy server"
    assert code == 130
    assert capsys.readouterr().err == "\ngroove: interrupted\n"


def test_a_kb_folder_deleted_while_held_is_not_answered_for(
    held: tuple[warm_server.LocalServer, Path, Path, threading.Event], tmp_path: Path
) -> None:
    listener, kb, config, _ = held
    assert listener.path is not None
    argv = ["status", str(kb), "--config", str(config)]
    assert warm._ask(listener.path, _run(argv, tmp_path))["code"] == 0  # type: ignore[index]
    other = make_kb(tmp_path / "other", config=None)  # made while the KB is there: its own
    shutil.rmtree(kb)  # the configuration file, outside it, is unchanged
    answer = warm._ask(listener.path, _run(argv, tmp_path))
    assert answer is not None and "not the folder it was" in answer["refused"]
    other.rename(kb)  # another folder moved to its path: another KB
    answer = warm._ask(listener.path, _run(argv, tmp_path))
    assert answer is not None and "refused" in answer


def test_another_registry_of_kb_names_is_refused(
    held: tuple[warm_server.LocalServer, Path, Path, threading.Event],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    listener, kb, config, _ = held
    assert listener.path is not None
    monkeypatch.setenv("GROOVE_CONFIG_HOME", str(tmp_path / "server-registry"))
    argv = ["status", str(kb), "--config", str(config)]
    theirs = {"GROOVE_CONFIG_HOME": str(tmp_path / "client-registry")}
    answer = warm._ask(listener.path, _run(argv, tmp_path, where=theirs))
    assert answer is not None and "registry" in answer["refused"]
    # The same folder however it is named is the same registry.
    same = {"GROOVE_CONFIG_HOME": str(tmp_path / "server-registry"), "HOME": "/elsewhere"}
    answer = warm._ask(listener.path, _run(argv, tmp_path, where=same))
    assert answer is not None and answer.get("code") == 0


def test_requests_about_other_kbs_leave_a_server_idle(
    held: tuple[warm_server.LocalServer, Path, Path, threading.Event], tmp_path: Path
) -> None:
    listener, _, _, _ = held
    assert listener.path is not None
    other = make_kb(tmp_path / "other", config=CONFIG)
    before = listener.last_used
    time.sleep(0.05)
    answer = warm._ask(listener.path, _run(["status", str(other)], tmp_path))
    assert answer is not None and "not held here" in answer["refused"]
    assert listener.last_used == before  # the idle timeout still runs


def test_a_background_server_whose_configuration_changed_stops(
    held: tuple[warm_server.LocalServer, Path, Path, threading.Event], tmp_path: Path
) -> None:
    listener, _, config, stopped = held
    assert listener.path is not None
    config.write_text(CONFIG + "[search]\ndefault_limit = 1\n", encoding="utf-8")
    who = warm._ask(listener.path, json.dumps({"op": "who"}).encode() + b"\n")
    assert who is not None and who["background"] is False  # `serve --background` starts anew
    assert stopped.wait(5)  # it could never answer again


def test_an_ascii_stdout_gets_what_click_prints_on_it(tmp_path: Path) -> None:
    """click takes a stream that says it is ASCII as misconfigured and writes UTF-8; the
    warm answer is printed the same way, not a UnicodeEncodeError."""
    kb = make_kb(tmp_path / "ノート", config=CONFIG)
    app = Groove.open(kb, None)
    app.index()
    listener = warm_server.LocalServer(
        [(kb, None, app)], cli_factory=startup_cli, background=True, on_stop=lambda: None
    )
    assert listener.start() is not None
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    argv = [sys.executable, "-m", "groove_core", "status", str(kb)]
    try:
        before = listener.last_used
        hot = subprocess.run(argv, env=env, capture_output=True, timeout=120)
        assert listener.last_used > before  # the server answered it
    finally:
        listener.close()
    cold = subprocess.run(argv, env={**env, "GROOVE_NO_SERVER": "1"}, capture_output=True,
                          timeout=120)  # fmt: skip
    assert (hot.returncode, hot.stdout, hot.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    assert "ノート".encode() in hot.stdout


def test_a_client_that_sends_slowly_does_not_hold_the_others(
    held: tuple[warm_server.LocalServer, Path, Path, threading.Event], tmp_path: Path
) -> None:
    """The server answers one request at a time: one byte now and then (or nothing) must
    lose its turn within the request deadline, not keep every other client waiting."""
    listener, kb, config, _ = held
    assert listener.path is not None
    slow = socket.socket(socket.AF_UNIX)
    slow.connect(str(listener.path))
    stop = threading.Event()

    def drip() -> None:
        while not stop.wait(0.5):
            try:
                slow.send(b" ")
            except OSError:
                return

    threading.Thread(target=drip, daemon=True).start()
    try:
        time.sleep(0.2)
        began = time.monotonic()
        argv = ["status", str(kb), "--config", str(config)]
        answer = warm._ask(listener.path, _run(argv, tmp_path))
        waited = time.monotonic() - began
    finally:
        stop.set()
        slow.close()
    assert answer is not None and answer["code"] == 0
    assert waited < warm_server.REQUEST_SECONDS + 5, waited


def test_a_package_installed_under_a_background_server_stops_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plugin (or groove, even at the same version) installed, upgraded or removed after
    the server started: it still runs the code it imported, so it answers no command (the
    client runs it alone, with the new code) and a background one stops. Other files in
    the folders Python imports from do not count."""
    site = tmp_path / "site-packages"
    record = site / "groove_core-0.1.0.dist-info"
    record.mkdir(parents=True)
    source = tmp_path / "source"
    source.mkdir()
    # after sys.path[0], which is the script's or working folder and is not watched
    monkeypatch.setattr(sys, "path", [sys.path[0], str(site), str(source), *sys.path[1:]])
    kb = make_kb(tmp_path / "notes", config=CONFIG)
    app = Groove.open(kb)
    app.index()
    stopped = threading.Event()
    listener = warm_server.LocalServer(
        [(kb, None, app)], cli_factory=startup_cli, background=True, on_stop=stopped.set
    )
    assert listener.start() is not None and listener.path is not None
    try:
        (source / "notes.txt").write_text("a file beside the packages", encoding="utf-8")
        (site / "module.py").write_text("x = 1\n", encoding="utf-8")
        answer = warm._ask(listener.path, _run(["status"], kb))
        assert answer is not None and answer.get("code") == 0, answer
        record.rmdir()  # reinstalled at the same version: a new record
        record.mkdir()
        answer = warm._ask(listener.path, _run(["status"], kb))
        assert answer == {
            "refused": "a package was installed, upgraded or removed since the server started"
        }
        assert stopped.wait(5)
    finally:
        listener.close()


def test_a_package_installed_where_none_was_counts(tmp_path: Path) -> None:
    folder = tmp_path / "target"
    before = warm_server.installation([str(folder)])
    folder.mkdir()
    created = warm_server.installation([str(folder)])
    (folder / "groove_plugin-1.0.dist-info").mkdir()
    assert before == {str(folder): None}
    assert created == {str(folder): frozenset()}
    assert warm_server.installation([str(folder)]) not in (before, created)


def test_a_client_of_another_python_environment_is_refused(
    held: tuple[warm_server.LocalServer, Path, Path, threading.Event],
) -> None:
    """Another virtual environment with the same groove may have other plugins installed:
    the command runs there, alone, with them."""
    listener, kb, config, _ = held
    assert listener.path is not None
    argv = ["status", str(kb), "--config", str(config)]
    assert warm._ask(listener.path, _run(argv, kb))["code"] == 0  # type: ignore[index]
    answer = warm._ask(listener.path, _run(argv, kb, python="/elsewhere/venv"))
    assert answer == {"refused": "another Python environment"}
