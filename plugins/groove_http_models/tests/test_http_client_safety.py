"""The HTTP client never hands the API key to another server, and never reads without end."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from groove_http_models.client import JsonClient, RetryPolicy, ServerError


def _serve(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def elsewhere() -> Iterator[tuple[str, list[str | None]]]:
    """A second server that records the Authorization header of whatever reaches it."""
    seen: list[str | None] = []

    class Record(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            seen.append(self.headers.get("Authorization"))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"ok": 1}')

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    server, url = _serve(Record)
    yield url, seen
    server.shutdown()


def test_a_redirect_is_refused_and_the_key_goes_nowhere(
    elsewhere: tuple[str, list[str | None]], monkeypatch: pytest.MonkeyPatch
) -> None:
    target, seen = elsewhere

    class Redirect(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(302)
            self.send_header("Location", target + "/steal")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server, url = _serve(Redirect)
    monkeypatch.setenv("TEST_MODEL_KEY", "sk-SECRET123")
    client = JsonClient(
        url, timeout=5, retry=RetryPolicy(max_retries=0), api_key_env="TEST_MODEL_KEY"
    )
    try:
        with pytest.raises(ServerError) as err:
            client.post("/v1/embeddings", {"input": ["x"], "model": "m"})
    finally:
        server.shutdown()
    assert "302" in str(err.value) and "sk-SECRET123" not in str(err.value)
    assert seen == []  # urllib's default handler re-sent the request, key and all


def test_error_bodies_lose_the_key_and_the_url_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_MODEL_KEY", "sk-SECRET123")
    client = JsonClient(
        "http://user:p%40ss-word@127.0.0.1:9/v1",
        timeout=1,
        retry=RetryPolicy(max_retries=0),
        api_key_env="TEST_MODEL_KEY",
    )
    echoed = "bad request: key sk-SECRET123, password p@ss-word (p%40ss-word)"
    assert client._scrub(echoed) == "bad request: key ***, password *** (***)"


def test_an_answer_of_escaped_quotes_is_walked_in_linear_time() -> None:
    # The nesting check walks the answer's strings and brackets before json reads it. A
    # string pattern that had to close rescanned the rest of the answer from every later
    # escaped quote: 16 KB of them took 0.8 s, 64 KB 15 s, 256 KB over four minutes.
    from groove_http_models.client import AnswerLimit, _structure_problem

    from groove_core.testing import cost_ratio

    hostile = bytearray(b'{"embeddings": ["' + b'\\"' * 8_000)
    normal = bytearray(b'{"embeddings": [' + b'["ab", "cd"], ' * (len(hostile) // 14) + b"[]]}")
    assert _structure_problem(hostile, AnswerLimit()) is None  # json refuses it next
    ratio = cost_ratio(
        lambda: _structure_problem(hostile, AnswerLimit()),
        lambda: _structure_problem(normal, AnswerLimit()),
        rounds=3,
        repeat=1,
    )
    assert ratio < 5, ratio


def test_an_answer_in_utf_16_is_refused_before_the_nesting_check_misreads_it() -> None:
    # json reads UTF-16 too, but the nesting check walks bytes: an escaped quote's NUL byte
    # hid the brackets after it, and json then hit its recursion limit (a crash); read as
    # UTF-8 its NUL bytes are no JSON
    body = ('["\\"", ' + "[" * 100_000 + "]" * 100_000 + "]").encode("utf-16-le")

    class Utf16(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            # read the request first: closing with it unread resets the connection
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server, url = _serve(Utf16)
    client = JsonClient(url, timeout=5, retry=RetryPolicy(max_retries=0))
    try:
        with pytest.raises(ServerError, match="answered with something that is not JSON"):
            client.post("/v1/embeddings", {"input": ["x"], "model": "m"})
    finally:
        server.shutdown()
