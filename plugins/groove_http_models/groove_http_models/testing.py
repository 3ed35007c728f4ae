"""A real model server on loopback, for tests (this plugin's, the reranker's, a user's).

:class:`ModelServer` is a ``ThreadingHTTPServer`` speaking the OpenAI embeddings API
(``POST /v1/embeddings``), Ollama's (``POST /api/embed``) and the rerank APIs (``POST
/rerank`` TEI-style, ``POST /v1/rerank`` Cohere-style), serving vectors from any groove
embedder (the bundled multilingual encoder for real quality). Faults are scripted: answers
to give first (``429`` with ``Retry-After``...), a delay, a wrong dimension, a body to give
whatever was asked (hostile JSON), answers sent a byte at a time, stopping and starting on
the same port. Every request is recorded (path, headers, body).
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

EmbedFn = Callable[[Sequence[str]], np.ndarray]


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class ServerState:
    """What the server serves and how it misbehaves; tests change it between requests."""

    models: dict[str, EmbedFn]
    #: (status, headers, body) answered before any real answer, one per request.
    script: list[tuple[int, dict[str, str], dict[str, Any]]] = field(default_factory=list)
    delay: float = 0.0
    #: Cut every vector to this many dimensions (a server running another model).
    truncate_to: int | None = None
    #: After this many successful embedding requests, answer nothing more (stop serving).
    fail_after: int | None = None
    #: The body of every 200 answer instead of the real one (deeply nested, oversized...).
    body: bytes | None = None
    #: Answers without a Content-Length: the client reads until the server closes.
    unsized: bool = False
    #: Seconds between the bytes of every answer: a server that never stops sending, slowly.
    drip: float = 0.0
    #: Drip from the status line on (else the headers come at once and the body drips).
    drip_headers: bool = True
    requests: list[Recorded] = field(default_factory=list)
    served: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # test output stays clean

    def do_POST(self) -> None:
        state = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        with state.lock:
            state.requests.append(Recorded(self.path, dict(self.headers.items()), body))
            scripted = state.script.pop(0) if state.script else None
            down = state.fail_after is not None and state.served >= state.fail_after
        if state.delay:
            threading.Event().wait(state.delay)
        if down:
            self.close_connection = True  # a server that died mid-request: no answer at all
            return
        if scripted is not None:
            self._send(*scripted)
            return
        if state.body is not None:
            self._send_bytes(200, {}, state.body)
            return
        routes = {
            "/v1/embeddings": self._openai,
            "/api/embed": self._ollama,
            "/rerank": self._tei_rerank,
            "/v1/rerank": self._cohere_rerank,
        }
        route = routes.get(self.path)
        if route is None:
            self._send(404, {}, {"error": f"no route {self.path}"})
            return
        route(body)

    def _send(self, status: int, headers: dict[str, str], payload: Any) -> None:
        self._send_bytes(status, headers, json.dumps(payload).encode())

    def _send_bytes(self, status: int, headers: dict[str, str], data: bytes) -> None:
        state = self.server.state
        try:
            if state.drip and state.drip_headers:
                self.wfile = _Dripping(self.wfile, state.drip)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            if state.unsized:
                self.close_connection = True
            else:
                self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            if state.drip and not state.drip_headers:
                self.wfile = _Dripping(self.wfile, state.drip)
            self.wfile.write(data)
        except OSError:  # the client gave up (a dripped or oversized answer): so be it
            self.close_connection = True

    def _vectors(self, body: dict[str, Any], missing: Any) -> np.ndarray | None:
        state = self.server.state
        embed = state.models.get(str(body.get("model")))
        if embed is None:
            self._send(404, {}, missing)
            return None
        texts = body["input"]
        vectors = embed([texts] if isinstance(texts, str) else list(texts))
        if state.truncate_to is not None:
            vectors = vectors[:, : state.truncate_to]
        with state.lock:
            state.served += 1
        return vectors

    def _openai(self, body: dict[str, Any]) -> None:
        model = body.get("model")
        missing = {"error": {"message": f"model '{model}' not found", "type": "not_found"}}
        vectors = self._vectors(body, missing)
        if vectors is None:
            return
        data = [
            {"object": "embedding", "index": i, "embedding": v.tolist()}
            for i, v in enumerate(vectors)
        ]
        data.reverse()  # clients must order by "index", not by position
        self._send(200, {}, {"object": "list", "data": data, "model": model})

    def _ollama(self, body: dict[str, Any]) -> None:
        model = body.get("model")
        missing = {"error": f'model "{model}" not found, try pulling it first'}
        vectors = self._vectors(body, missing)
        if vectors is not None:
            self._send(200, {}, {"model": model, "embeddings": vectors.tolist()})

    def _similarities(self, query: str, texts: list[str], model: str) -> list[float] | None:
        embed = self.server.state.models.get(model) or next(iter(self.server.state.models.values()))
        vectors = embed([query, *texts])
        return [float(v) for v in vectors[1:] @ vectors[0]]

    def _tei_rerank(self, body: dict[str, Any]) -> None:
        scores = self._similarities(body["query"], list(body["texts"]), str(body.get("model")))
        ranked = sorted(enumerate(scores or []), key=lambda p: -p[1])
        self._send(200, {}, [{"index": i, "score": s} for i, s in ranked])

    def _cohere_rerank(self, body: dict[str, Any]) -> None:
        scores = self._similarities(body["query"], list(body["documents"]), str(body.get("model")))
        ranked = sorted(enumerate(scores or []), key=lambda p: -p[1])
        results = [{"index": i, "relevance_score": s} for i, s in ranked]
        self._send(200, {}, {"model": body.get("model"), "results": results})


class _Dripping(io.BufferedIOBase):
    """A writer that sends one byte, waits, sends the next."""

    def __init__(self, out: Any, seconds: float) -> None:
        self._out = out
        self._seconds = seconds

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        for i in range(len(view)):
            self._out.write(view[i : i + 1])
            threading.Event().wait(self._seconds)
        return len(view)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: ServerState


class ModelServer:
    """``with ModelServer({"model-name": embed_fn}) as server:`` ... ``server.url``."""

    def __init__(self, models: dict[str, EmbedFn], port: int = 0) -> None:
        self.state = ServerState(models)
        self._port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def start(self) -> ModelServer:
        server = _Server(("127.0.0.1", self._port), _Handler)
        server.state = self.state
        self._port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening: connections are then refused, as from a server that is down."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- groove.toml and KBs for tests ---------------------------------------------------------


def http_config(
    base_url: str, *, api: str = "openai", model: str = "hash-64", batch: int = 64, **plugin: object
) -> str:
    """A groove.toml using an HTTP embedder at ``base_url`` (patient settings trimmed so
    that failing tests fail in well under a second)."""
    settings: dict[str, object] = {"max_retries": 2, "retry_max_seconds": 2.0, **plugin}
    lines = [
        "[embedder]",
        f'name = "{api}"',
        f'model = "{model}"',
        f"batch_size = {batch}",
        "[plugin.http_models]",
        f'base_url = "{base_url}"',
    ]
    for key, value in settings.items():
        lines.append(f"{key} = {_toml(value)}")
    return "\n".join(lines) + "\n"


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def many_notes(n: int) -> dict[str, str]:
    """``n`` small files of three chunks each, distinct enough to rank."""
    topics = ["ranking", "embedding", "ownership", "install", "retries", "timeouts"]
    return {
        f"notes/n{i:02d}.md": (
            f"# Note {i} on {topics[i % 6]}\n\nIntro {i} about {topics[i % 6]}.\n\n"
            f"## Part A\n\nDetails {i} alpha {topics[(i + 1) % 6]}.\n\n"
            f"## Part B\n\nDetails {i} beta {topics[(i + 2) % 6]}.\n"
        )
        for i in range(n)
    }
