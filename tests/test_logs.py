"""A server answering a command for the command line copies the warnings that command's
thread logs to its stderr (groove_core.logs.to_stream), rendered as the command alone
renders them, and nothing of other threads or of the server's own info lines."""

from __future__ import annotations

import io
import threading

import pytest

from groove_core import logs


def _copied(method: str, event: dict[str, object], *, stdout_tty: bool = False) -> str:
    stream = io.StringIO()
    with logs.to_stream(stream, stdout_tty=stdout_tty):
        assert logs.copy_to_stream(None, method, event) is event  # goes on unchanged
    return stream.getvalue()


def test_only_the_commands_own_thread_is_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    stream = io.StringIO()
    event = {"event": "mine", "detail": 3}

    def elsewhere() -> None:
        logs.copy_to_stream(None, "warning", {"event": "another thread"})

    with logs.to_stream(stream):
        logs.copy_to_stream(None, "warning", event)
        worker = threading.Thread(target=elsewhere)
        worker.start()
        worker.join()
    logs.copy_to_stream(None, "warning", {"event": "after the command"})
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    assert lines[0].endswith("[warning  ] mine                           detail=3")
    assert event == {"event": "mine", "detail": 3}


def test_info_and_debug_lines_are_the_servers_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert _copied("info", {"event": "index replaced: reopening"}) == ""
    assert _copied("debug", {"event": "detail"}) == ""
    assert "[error    ] broken" in _copied("error", {"event": "broken"})


@pytest.mark.parametrize(
    ("no_color", "force_color", "stdout_tty", "coloured"),
    [
        ("", "", False, False),  # a pipe: structlog alone writes no colour
        ("", "", True, True),  # a terminal
        ("", "1", False, True),
        ("1", "", True, False),
        ("1", "1", True, False),
    ],
)
def test_colour_is_what_structlog_decides_alone(
    monkeypatch: pytest.MonkeyPatch,
    no_color: str,
    force_color: str,
    stdout_tty: bool,
    coloured: bool,
) -> None:
    monkeypatch.setenv("NO_COLOR", no_color)
    monkeypatch.setenv("FORCE_COLOR", force_color)
    text = _copied("warning", {"event": "plain"}, stdout_tty=stdout_tty)
    assert ("\x1b[" in text) == coloured
    if not coloured:
        assert text.endswith("[warning  ] plain\n")  # no padding left behind
