"""The HTTP embedders against a real server on loopback: indexing and searching through it,
batching and concurrency, retries, timeouts, wrong dimensions, missing models, a server
that dies mid-index, and the API key kept out of messages, logs, the index and the history."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from groove_http_models.testing import ModelServer, http_config, many_notes

from groove_core.app import Groove
from groove_core.cli import build_cli
from groove_core.embedding import EmbedderError, HashingEmbedder
from groove_core.sqlite.store import Store, check_consistency
from groove_core.testing import EVERY_SECTION, SAMPLE_NOTES, make_kb

MODEL = "hash-64"


def _open(kb: Path) -> Groove:
    return Groove.open(kb)


@pytest.mark.parametrize(("api", "base"), [("openai", "/v1"), ("ollama", "")])
def test_index_and_search_through_the_server(
    server: ModelServer, kb_dir: Path, api: str, base: str
) -> None:
    make_kb(kb_dir, config=http_config(server.url + base, api=api, dimensions=64))
    app = _open(kb_dir)
    report = app.index()
    assert report.added == len(SAMPLE_NOTES) and report.chunks_embedded > 0
    hits = app.search("rust ownership", limit=3).results
    assert hits[0].path == "notes/rust.md"
    paths = {r.path for r in server.state.requests}
    assert paths == {"/v1/embeddings" if api == "openai" else "/api/embed"}
    assert all(r.body["model"] == MODEL for r in server.state.requests)
    # Same vectors as the hashing embedder in process (normalized once more by the client).
    stored = app.store.embeddings([hits[0].chunk_id])[hits[0].chunk_id]
    row = app.store.chunk_rows([hits[0].chunk_id])[hits[0].chunk_id]
    text = f"{row.context}\n{row.content}" if row.context else row.content
    assert np.allclose(stored, HashingEmbedder(64).embed_documents([text])[0], atol=1e-6)
    assert app.store.embedder_identity() == (f"http:{MODEL}:64", 64)
    app.close()


def test_batches_go_out_concurrently_and_come_back_in_order(server: ModelServer) -> None:
    from groove_http_models.embedders import HttpEmbedder
    from groove_http_models.settings import HttpModelsSettings

    server.state.delay = 0.2
    settings = HttpModelsSettings(base_url=server.url + "/v1", batch_size=5, concurrency=4)
    embedder = HttpEmbedder("openai", MODEL, settings)
    texts = [f"text number {i} about topic {i % 7}" for i in range(20)]
    started = time.perf_counter()
    got = embedder.embed_documents(texts)
    elapsed = time.perf_counter() - started
    assert np.allclose(got, HashingEmbedder(64).embed_documents(texts), atol=1e-6)
    assert [len(r.body["input"]) for r in server.state.requests] == [5, 5, 5, 5]
    # Four requests of 0.2 s each, in flight together: well under the 0.8 s of one by one.
    assert elapsed < 0.6


def test_prefixes_reach_the_server_and_name_the_identity(server: ModelServer) -> None:
    from groove_http_models.embedders import HttpEmbedder
    from groove_http_models.settings import HttpModelsSettings

    plain = HttpModelsSettings(base_url=server.url + "/v1", dimensions=64)
    prefixed = plain.model_copy(
        update={"query_prefix": "search_query: ", "document_prefix": "search_document: "}
    )
    embedder = HttpEmbedder("openai", MODEL, prefixed)
    embedder.embed_documents(["a note"])
    embedder.embed_query("a question")
    assert [r.body["input"] for r in server.state.requests] == [
        ["search_document: a note"],
        ["search_query: a question"],
    ]
    assert embedder.identity != HttpEmbedder("openai", MODEL, plain).identity
    assert embedder.identity.startswith(f"http:{MODEL}:64:prefixes-")


def test_429_with_retry_after_is_waited_out(server: ModelServer, kb_dir: Path) -> None:
    server.state.script = [(429, {"Retry-After": "1"}, {"error": "slow down"})]
    make_kb(kb_dir, config=http_config(server.url + "/v1", dimensions=64))
    started = time.perf_counter()
    report = _open(kb_dir).index()
    assert report.added == len(SAMPLE_NOTES)
    assert time.perf_counter() - started >= 1.0  # Retry-After was honoured
    assert len(server.state.requests) == 2


def test_5xx_is_retried_with_backoff_and_then_gives_up(server: ModelServer) -> None:
    from groove_http_models.client import JsonClient, RetryPolicy, ServerError

    waits: list[float] = []
    client = JsonClient(server.url, 5.0, RetryPolicy(max_retries=3), sleep=waits.append)
    server.state.script = [(503, {}, {"error": "loading model"})] * 2
    assert client.post("/v1/embeddings", {"model": MODEL, "input": ["x"]})["data"]
    assert waits == [0.5, 1.0]
    server.state.script = [(502, {}, {"error": "bad gateway"})] * 10
    with pytest.raises(ServerError) as err:
        client.post("/v1/embeddings", {"model": MODEL, "input": ["x"]})
    assert "HTTP 502" in str(err.value) and "gave up after 4 attempts" in str(err.value)
    assert server.url in str(err.value)


def test_a_retry_after_beyond_the_budget_gives_up_at_once(server: ModelServer) -> None:
    from groove_http_models.client import JsonClient, RetryPolicy, ServerError

    waits: list[float] = []
    client = JsonClient(server.url, 5.0, RetryPolicy(5, max_seconds=10), sleep=waits.append)
    server.state.script = [(429, {"Retry-After": "3600"}, {"error": "quota"})]
    with pytest.raises(ServerError, match="HTTP 429: quota"):
        client.post("/v1/embeddings", {"model": MODEL, "input": ["x"]})
    assert waits == []


def test_a_slow_server_times_out_naming_it(server: ModelServer, kb_dir: Path) -> None:
    server.state.delay = 1.5
    make_kb(kb_dir, config=http_config(server.url + "/v1", timeout=0.3, max_retries=0))
    with pytest.raises(EmbedderError) as err:
        _open(kb_dir).index()
    message = str(err.value)
    assert f"{server.url}/v1/embeddings did not answer within 0.3 s" in message


def test_a_wrong_dimension_is_a_clear_error(server: ModelServer, kb_dir: Path) -> None:
    make_kb(kb_dir, config=http_config(server.url + "/v1", dimensions=384))
    with pytest.raises(EmbedderError) as err:
        _open(kb_dir).index()
    message = str(err.value)
    assert "64-dimensional" in message and "dimensions says 384" in message
    assert server.url in message
    # The files were written searchable by their words first (ADR-0015); no vector was
    # stored and no embedder bound, so a corrected configuration embeds them next time.
    store = Store.open(kb_dir / ".groove" / "index.sqlite")
    try:
        assert store.pending_vectors() == store.counts()["chunks"] > 0
        assert store.embedder_identity() is None
    finally:
        store.close()


def test_a_server_that_changes_dimension_later_is_caught(server: ModelServer, kb_dir: Path) -> None:
    make_kb(kb_dir, config=http_config(server.url + "/v1"))  # dimensions probed
    app = _open(kb_dir)
    app.index()
    server.state.truncate_to = 32
    with pytest.raises(Exception) as err:
        app.search("rust ownership")
    assert "32-dimensional" in str(err.value) or "'http:hash-64:32'" in str(err.value)
    app.close()


@pytest.mark.parametrize(
    ("api", "base", "hint"), [("openai", "/v1", "/v1"), ("ollama", "", "ollama pull")]
)
def test_a_missing_model_names_server_and_model(
    server: ModelServer, kb_dir: Path, api: str, base: str, hint: str
) -> None:
    make_kb(kb_dir, config=http_config(server.url + base, api=api, model="nope", dimensions=64))
    with pytest.raises(EmbedderError) as err:
        _open(kb_dir).index()
    message = str(err.value)
    assert "'nope'" in message and "HTTP 404" in message and server.url in message
    assert hint in message


def test_an_unreachable_server_is_named(server: ModelServer, kb_dir: Path) -> None:
    url = server.url
    server.stop()
    make_kb(kb_dir, config=http_config(url + "/v1", dimensions=64, retry_max_seconds=0.5))
    result = CliRunner().invoke(build_cli(None), ["index", str(kb_dir)])
    assert result.exit_code != 0
    assert f"cannot reach {url}/v1/embeddings" in result.output
    assert "Traceback" not in result.output


def _snapshot(kb: Path) -> tuple[object, ...]:
    store = Store.open(kb / ".groove" / "index.sqlite")
    try:
        assert check_consistency(store).ok
        docs = sorted((d.path, d.title, d.chunks) for d in store.documents())
        rows = store.conn.execute(
            "SELECT d.path, c.ordinal, c.heading, c.context, c.content, v.embedding "
            "FROM chunks c JOIN documents d ON d.id = c.doc_id "
            "JOIN vec_chunks v ON v.chunk_id = c.id ORDER BY d.path, c.ordinal"
        ).fetchall()
        return (docs, rows, store.embedder_identity(), store.incomplete() is None)
    finally:
        store.close()


def test_server_down_mid_index_then_a_resumed_run_equals_a_clean_build(
    server: ModelServer, tmp_path: Path
) -> None:
    notes = many_notes(12)  # 36 chunks; 4 per index write, 2 per request
    config = http_config(server.url + "/v1", batch=4, batch_size=2, concurrency=2, dimensions=64)
    config += EVERY_SECTION  # three chunks a note
    clean = make_kb(tmp_path / "clean", notes, config=config)
    _open(clean).index()

    broken = make_kb(tmp_path / "broken", notes, config=config)
    server.state.served = 0
    server.state.fail_after = 7  # dies in the middle of the fourth write's requests
    with pytest.raises(EmbedderError) as err:
        _open(broken).index()
    assert f"cannot reach {server.url}/v1/embeddings" in str(err.value)
    store = Store.open(broken / ".groove" / "index.sqlite")
    try:
        # Every file is in, searchable by its words (ADR-0015); part of its chunks wait for
        # their vectors, and say so: never passed off as complete.
        assert len(store.documents()) == len(notes)
        assert all(d.chunks == 3 for d in store.documents())  # whole files only
        assert check_consistency(store).ok
        waiting = store.pending_vectors()
        assert 0 < waiting < 36
    finally:
        store.close()

    server.state.fail_after = None
    report = _open(broken).index()
    assert (report.added, report.chunks_embedded) == (0, waiting)
    assert _snapshot(broken) == _snapshot(clean)


def test_the_key_stays_out_of_messages_logs_index_and_history(
    server: ModelServer, kb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import structlog

    key = "sk-test-very-secret-0123456789"
    monkeypatch.setenv("GROOVE_TEST_KEY", key)
    base = server.url.replace("http://", "http://user:hunter2pass@") + "/v1"
    config = http_config(base, api_key_env="GROOVE_TEST_KEY", dimensions=64)
    make_kb(kb_dir, config=config)
    (kb_dir / "golden.jsonl").write_text(
        json.dumps({"query": "rust ownership", "expected": ["notes/rust.md"]}) + "\n"
    )
    # A 429 whose body echoes the key: a retry is logged, and the detail must be scrubbed.
    server.state.script = [(429, {"Retry-After": "0"}, {"error": f"bad key {key}"})]
    with structlog.testing.capture_logs() as logs:
        _open(kb_dir).index()
    assert logs and all(key not in repr(e) and "hunter2pass" not in repr(e) for e in logs)
    assert server.state.requests[0].headers["Authorization"] == f"Bearer {key}"

    result = CliRunner().invoke(
        build_cli(None), ["eval", "--kb", str(kb_dir), "--stage", "full", "--json"]
    )
    assert result.exit_code == 0, result.output
    history = (kb_dir / ".groove" / "eval-history.json").read_text()
    fingerprint = json.loads(result.output)["runs"][0]["fingerprint"]
    assert fingerprint["embedder"] == f"http:{MODEL}:64"
    assert "plugin.http_models" in fingerprint  # the settings that change results stay
    index_bytes = b"".join(p.read_bytes() for p in (kb_dir / ".groove").iterdir())
    for secret in (key, "hunter2pass", "GROOVE_TEST_KEY", server.url):
        assert secret not in history and secret not in result.output
        assert secret.encode() not in index_bytes

    # A refused key: the message names the variable, never the key.
    server.state.script = [(401, {}, {"error": {"message": f"invalid key {key}"}})]
    with pytest.raises(EmbedderError) as err:
        _open(kb_dir).search("anything")
    assert "$GROOVE_TEST_KEY" in str(err.value) and key not in str(err.value)
    assert "hunter2pass" not in str(err.value)


def test_an_unset_key_variable_is_named(server: ModelServer, kb_dir: Path) -> None:
    make_kb(kb_dir, config=http_config(server.url + "/v1", api_key_env="GROOVE_NO_SUCH_KEY"))
    with pytest.raises(EmbedderError, match="GROOVE_NO_SUCH_KEY, which is not set"):
        _open(kb_dir).index()


def test_bad_settings_name_the_key(kb_dir: Path) -> None:
    from groove_core.config import ConfigError

    make_kb(kb_dir, config=http_config("ftp://example.org"))
    with pytest.raises(ConfigError, match=r"plugin.http_models.*base_url"):
        _open(kb_dir)
    make_kb(kb_dir, config='[embedder]\nname = "openai"\n')
    with pytest.raises(EmbedderError, match="needs a model"):
        _open(kb_dir).index()
