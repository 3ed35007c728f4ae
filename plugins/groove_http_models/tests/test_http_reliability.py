"""Model servers that misbehave: a dripping answer, a deeply nested one, a huge one. Each is
answered within the timeout and in memory set by what the request needs, as one line
naming the server, and an index stays as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from groove_http_models.client import JsonClient, RetryPolicy, ServerError
from groove_http_models.embedders import HttpEmbedder
from groove_http_models.rerank import RerankServerError, score
from groove_http_models.settings import HttpModelsSettings
from groove_http_models.testing import ModelServer, http_config

from groove_core.app import Groove
from groove_core.embedding import EmbedderError
from groove_core.sqlite.store import Store, check_consistency
from groove_core.testing import SAMPLE_NOTES, make_kb

MODEL = "hash-64"
TIMEOUT = 1.0
#: Room for a loaded machine: the answer must end within TIMEOUT + SLACK, and a dripped
#: one would take a minute (1 byte per 0.2 s).
SLACK = 2.0
#: Deeper than the JSON parser's recursion allows, and small enough for any byte limit.
DEEP = b"[" * 20_000 + b"]" * 20_000


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
    # The new file is in, searchable by its words, its chunk waiting for a vector
    # (ADR-0015); nothing else changed.
    after = _documents(index)
    assert [d for d in after if d[0] != "notes/new.md"] == before and len(after) == len(before) + 1

    server.state.drip = 0.0
    report = Groove.open(kb_dir).index()
    assert (report.added, report.vectors_pending) == (0, 0) and report.chunks_embedded >= 1
    assert len(_documents(index)) == len(SAMPLE_NOTES) + 1


def _documents(index: Path) -> list[tuple[str, int]]:
    store = Store.open(index)
    try:
        assert check_consistency(store).ok
        return sorted((d.path, d.chunks) for d in store.documents())
    finally:
        store.close()


def test_groove_search_with_a_deeply_nested_answer_is_one_line(
    server: ModelServer, kb_dir: Path
) -> None:
    make_kb(kb_dir, config=http_config(server.url + "/v1", dimensions=64, max_retries=0))
    Groove.open(kb_dir).index()
    server.state.body = DEEP
    result = _groove("search", "rust ownership", "--kb", str(kb_dir))
    assert result.returncode != 0
    assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert f"{server.url}/v1/embeddings answered with JSON nested more than 8 deep" in line


def test_a_deeply_nested_rerank_answer_is_the_rerank_error(server: ModelServer) -> None:
    server.state.body = DEEP
    with pytest.raises(RerankServerError, match="nested more than 8 deep"):
        score(server.url + "/rerank", MODEL, "tei", [("q", "a"), ("q", "b")])


@pytest.mark.parametrize("sized", [True, False], ids=["content-length", "until-close"])
def test_an_oversized_answer_is_refused_in_memory_the_request_sets(
    server: ModelServer, sized: bool
) -> None:
    row = "[" + ",".join(["0.0"] * 64) + "]"
    rows = 16 * 1024 * 1024 // (len(row) + 1)  # 16 MiB of vectors for a request of two
    server.state.body = ('{"embeddings": [' + ",".join([row] * rows) + "]}").encode()
    server.state.unsized = not sized
    settings = HttpModelsSettings(base_url=server.url, dimensions=64, max_retries=0)
    embedder = HttpEmbedder("ollama", MODEL, settings)
    tracemalloc.start()
    try:
        with pytest.raises(EmbedderError) as err:
            embedder.embed_documents(["one", "two"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    message = str(err.value)
    assert f"{server.url}/api/embed answered with more than" in message
    assert "more than 2 texts of dimension 64 can need" in message
    assert peak < 2 * 1024 * 1024  # parsing it all took over 100 MiB


def test_real_answers_pretty_printed_fit_their_limits(server: ModelServer) -> None:
    """Full float64 digits, one number a line, indented (as a debugging proxy may write them): the
    limits leave room for honest answers however they are laid out."""
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((16, 1024)) * 1e-3
    answer = {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": [float(x) for x in v]}
            for i, v in enumerate(vectors)
        ],
        "model": MODEL,
        "usage": {"prompt_tokens": 16, "total_tokens": 16},
    }
    server.state.body = json.dumps(answer, indent=4).encode()
    settings = HttpModelsSettings(base_url=server.url + "/v1", dimensions=1024, batch_size=16)
    got = HttpEmbedder("openai", MODEL, settings).embed_documents([f"t{i}" for i in range(16)])
    assert got.shape == (16, 1024)

    passages = ["順位付けの説明 " * 40 + "🎌" * 20, '[link](x) {braces} "quoted" \\ ' * 30]
    results = [
        {"index": i, "relevance_score": 0.5, "document": {"text": text}}
        for i, text in enumerate(passages)
    ]
    rerank = {"model": MODEL, "results": results, "usage": {"total_tokens": 9}}
    server.state.body = json.dumps(rerank, indent=4).encode()  # ensure_ascii: \uXXXX
    assert score(server.url + "/v1/rerank", MODEL, "cohere", [("q", p) for p in passages]) == [
        0.5,
        0.5,
    ]
