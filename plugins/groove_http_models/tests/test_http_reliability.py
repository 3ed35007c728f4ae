"""Model servers that misbehave: a dripping answer is answered within the timeout, as one
line naming the server, and an index stays as it was."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from groove_http_models.client import JsonClient, RetryPolicy, ServerError
from groove_http_models.testing import ModelServer, http_config

from groove_core.app import Groove
from groove_core.store import Store, check_consistency
from groove_core.testing import SAMPLE_NOTES, make_kb

MODEL = "hash-64"
TIMEOUT = 1.0
#: Room for a loaded machine: the answer must end within TIMEOUT + SLACK, and a dripped
#: one would take a minute (1 byte per 0.2 s).
SLACK = 2.0


def _within(seconds: float, call: Callable[[], Any]) -> tuple[BaseException | None, float]:
    """What ``call`` raised (None if nothing) and how long it took; fails the test, rather
    than hanging it, if ``call`` is still running after ``seconds``."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as err:
            outcome.append(err)

    started = time.monotonic()
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert outcome, f"still running after {seconds} s: the timeout bounds each read only"
    return outcome[0], time.monotonic() - started


def _groove(*args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI, so that what a user sees (a traceback or one line) is what is checked."""
    return subprocess.run(
        [sys.executable, "-m", "groove_core", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "NO_COLOR": "1"},
    )


@pytest.mark.parametrize("from_status_line", [True, False], ids=["whole-answer", "body"])
def test_a_dripping_answer_is_cut_off_at_the_timeout(
    server: ModelServer, from_status_line: bool
) -> None:
    server.state.drip = 0.2
    server.state.drip_headers = from_status_line
    client = JsonClient(server.url, TIMEOUT, RetryPolicy(max_retries=0))
    err, elapsed = _within(
        TIMEOUT + SLACK, lambda: client.post("/v1/embeddings", {"model": MODEL, "input": ["x"]})
    )
    assert isinstance(err, ServerError)
    assert str(err).startswith(f"{server.url}/v1/embeddings did not answer within 1 s")
    assert elapsed >= TIMEOUT


def test_groove_index_against_a_dripping_server_is_one_line_and_loses_nothing(
    server: ModelServer, kb_dir: Path
) -> None:
    config = http_config(server.url + "/v1", dimensions=64, timeout=TIMEOUT, max_retries=0)
    make_kb(kb_dir, config=config)
    Groove.open(kb_dir).index()
    index = kb_dir / ".groove" / "index.sqlite"
    before = _documents(index)

    (kb_dir / "notes" / "new.md").write_text("# New\n\nA note that arrives later.\n")
    server.state.drip = 0.2
    result = _groove("index", str(kb_dir))
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert f"{server.url}/v1/embeddings did not answer within 1 s" in line
    assert _documents(index) == before

    server.state.drip = 0.0
    report = Groove.open(kb_dir).index()
    assert report.added == 1 and len(_documents(index)) == len(SAMPLE_NOTES) + 1


def _documents(index: Path) -> list[tuple[str, int]]:
    store = Store.open(index)
    try:
        assert check_consistency(store).ok
        return sorted((d.path, d.chunks) for d in store.documents())
    finally:
        store.close()
