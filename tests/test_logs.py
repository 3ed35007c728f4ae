"""A server answering a command for the command line copies the lines that command's
thread logs to its stderr (groove_core.logs.to_stream), and no other thread's."""

from __future__ import annotations

import io
import threading

import pytest

from groove_core import logs


def test_only_the_commands_own_thread_is_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    stream = io.StringIO()
    event = {"event": "mine", "detail": 3}

    def elsewhere() -> None:
        logs.copy_to_stream(None, "warning", {"event": "another thread"})

    with logs.to_stream(stream):
        assert logs.copy_to_stream(None, "warning", event) is event  # goes on unchanged
        logs.copy_to_stream(None, "debug", {"event": "below info"})  # alone shows none
        worker = threading.Thread(target=elsewhere)
        worker.start()
        worker.join()
    logs.copy_to_stream(None, "warning", {"event": "after the command"})
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    assert lines[0].endswith("[warning  ] mine                           detail=3")
    assert event == {"event": "mine", "detail": 3}


def test_colour_is_kept_for_the_client_to_strip(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    stream = io.StringIO()
    with logs.to_stream(stream):
        logs.copy_to_stream(None, "info", {"event": "coloured"})
    assert "\x1b[" in stream.getvalue()
