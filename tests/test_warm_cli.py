"""The command line answered by a running server (issue #31): the same output, exit status
and errors as alone, from a background server or any `groove serve` holding the KB; stale
sockets, changed configurations and foreign KBs fall back to running alone."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from groove_core.cli import warm
from groove_core.testing import make_kb, open_kb

CONFIG = '[embedder]\nname = "hashing"\n'


def groove(*args: str | Path, cold: bool = False, **kw: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if cold:
        env["GROOVE_NO_SERVER"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "groove_core", *map(str, args)],
        env=env, capture_output=True, text=True, timeout=120, **kw,  # type: ignore[call-overload]
    )  # fmt: skip


def _logged_requests() -> int:
    folder = warm.runtime_dir()
    assert folder is not None
    return sum(p.read_text().count("command line") for p in folder.glob("background-*.log"))


def _served(folder: Path, config: str = CONFIG) -> Iterator[Path]:
    path = make_kb(folder / "notes", config=config)
    open_kb(path)
    started = groove("serve", "--background", "--kb", path, "--idle-timeout", "300")
    assert started.returncode == 0, started.stderr
    assert "for the command line (pid" in started.stdout
    yield path
    groove("serve", "--stop", "--kb", path)


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[Path]:
    """A KB of its own served in the background: for a test that changes or stops it."""
    yield from _served(tmp_path)


@pytest.fixture(scope="module")
def shared_kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One KB served in the background for the tests that only read (a server's start
    is seconds)."""
    yield from _served(tmp_path_factory.mktemp("warm"))


@pytest.mark.parametrize(
    "args",
    [
        ["search", "fused with RRF", "--limit", "3"],
        ["search", "fused with RRF", "--json", "--explain"],
        ["search", "rust -async", "--files"],
        ["search", "--limt", "3", "rust"],  # a usage error: status 2, the same message
        ["search", "-only"],  # an invalid query
        ["get", "guide/search.md"],
        ["get", "missing.md"],
        ["status", "--json"],
    ],
)
def test_a_warm_answer_is_the_cold_one(shared_kb: Path, args: list[str]) -> None:
    kb = shared_kb
    where = ["--kb", str(kb)] if args[0] != "status" else [str(kb)]
    before = _logged_requests()
    hot = groove(*args, *where)
    cold = groove(*args, *where, cold=True)
    assert (hot.returncode, hot.stdout, hot.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    assert _logged_requests() == before + 1  # the server answered the first


def _timeless(stderr: str) -> list[str]:
    """stderr's lines without the time a log line starts with."""
    return [re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", "", line) for line in stderr.splitlines()]


def test_a_plugins_log_line_reaches_the_command_line(tmp_path: Path) -> None:
    # MMR at lambda 1 warns on every search that it changes nothing.
    mmr = CONFIG + "[search.mmr]\nenabled = true\nlambda = 1.0\n"
    served = _served(tmp_path, mmr)
    kb = next(served)
    try:
        before = _logged_requests()
        hot = groove("search", "fused with RRF", "--kb", kb)
        assert _logged_requests() == before + 1  # the server answered
        cold = groove("search", "fused with RRF", "--kb", kb, cold=True)
        assert (hot.returncode, hot.stdout) == (cold.returncode, cold.stdout)
        assert _timeless(hot.stderr) == _timeless(cold.stderr)
        assert "[warning  ] mmr_lambda_is_one" in hot.stderr
        assert "\x1b[" not in hot.stderr  # not a terminal: no colour, as alone
    finally:
        next(served, None)


def test_relative_paths_are_the_clients(shared_kb: Path) -> None:
    kb = shared_kb
    hot = groove("search", "fused with RRF", "--kb", kb.name, cwd=kb.parent)
    cold = groove("search", "fused with RRF", "--kb", kb.name, cwd=kb.parent, cold=True)
    assert hot.stdout == cold.stdout and "guide/search.md" in hot.stdout


def test_another_kb_is_searched_alone(shared_kb: Path, tmp_path: Path) -> None:
    other = make_kb(tmp_path / "other", {"x.md": "# Other\n\nquokka island\n"}, config=CONFIG)
    open_kb(other)
    before = _logged_requests()
    found = groove("search", "quokka", "--kb", other)
    assert found.returncode == 0 and "x.md" in found.stdout
    assert _logged_requests() == before + 1  # asked, refused: not held there


def test_a_changed_configuration_is_refused_and_answered_alone(kb: Path) -> None:
    (kb / "groove.toml").write_text(CONFIG + "[search]\ndefault_limit = 1\n", encoding="utf-8")
    found = groove("search", "rust", "--kb", kb, "--json")
    assert len(json.loads(found.stdout)["results"]) == 1  # the new configuration's answer


def test_a_rebuilt_index_is_what_a_warm_search_reads(kb: Path) -> None:
    (kb / "guide" / "new.md").write_text("# New\n\nwombat burrows\n", encoding="utf-8")
    assert groove("index", kb, "--rebuild").returncode == 0
    found = groove("search", "wombat burrows", "--kb", kb)
    assert "guide/new.md" in found.stdout


def test_stop_stops_it_and_then_says_none_runs(kb: Path) -> None:
    stopped = groove("serve", "--stop", "--kb", kb)
    assert stopped.returncode == 0 and "stopped (pid" in stopped.stdout
    deadline = time.monotonic() + 10
    while warm.served_by([kb]) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert warm.served_by([kb]) is None
    again = groove("serve", "--stop", "--kb", kb)
    assert again.returncode == 1 and "no background server holds" in again.stderr
    assert groove("search", "rust", "--kb", kb).returncode == 0  # alone, silently


def test_a_stale_socket_is_removed_and_the_command_runs_alone(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "notes", config=CONFIG)
    open_kb(kb)
    folder = warm.runtime_dir(create=True)
    assert folder is not None
    stale = folder / f"999999-0{warm.SUFFIX}"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(stale))
    sock.close()  # bound, never listening: what a killed server leaves
    found = groove("search", "fused with RRF", "--kb", kb)
    assert found.returncode == 0 and "guide/search.md" in found.stdout
    assert not stale.exists()


def test_an_idle_background_server_stops_on_its_own(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "notes", config=CONFIG)
    open_kb(kb)
    assert groove("serve", "--background", "--kb", kb, "--idle-timeout", "1").returncode == 0
    pid = warm.served_by([kb])
    assert pid is not None
    deadline = time.monotonic() + 30
    while warm.served_by([kb]) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert warm.served_by([kb]) is None


def test_an_mcp_server_answers_the_command_line_too(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "notes", config=CONFIG)
    open_kb(kb)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "groove_core", "serve", "--kb", str(kb)],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not any(warm.runtime_dir().glob(f"{proc.pid}-*{warm.SUFFIX}")):  # type: ignore[union-attr]
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
        hot = groove("search", "fused with RRF", "--kb", kb)
        cold = groove("search", "fused with RRF", "--kb", kb, cold=True)
        assert hot.stdout == cold.stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert b"event='command line'" in err


def test_a_folder_open_to_others_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    (run / "groove").mkdir(parents=True)
    (run / "groove").chmod(0o755)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    assert warm.runtime_dir() is None
    assert warm.forward(["search", "anything"]) is None
