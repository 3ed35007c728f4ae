"""Embedders served over HTTP: the OpenAI-compatible ``/embeddings`` and Ollama's ``/api/embed``.

A call to :meth:`HttpEmbedder.embed_documents` is split into requests of ``batch_size``
texts, at most ``concurrency`` of them in flight; the vectors come back in input order,
L2-normalized (groove ranks by L2 distance, and its low-confidence threshold assumes unit
vectors; servers differ in whether they normalize). Any failure raises
:class:`~groove_core.embedding.EmbedderError` naming the server: the indexer writes a batch
of files only after all its vectors exist, so a failure mid-file writes nothing of it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from groove_core.embedding import EmbedderError
from groove_http_models.client import AnswerLimit, JsonClient, RetryPolicy, ServerError
from groove_http_models.settings import MAX_DIMENSIONS, HttpModelsSettings

if TYPE_CHECKING:
    from groove_core.config import EmbedderConfig, Settings

Api = Literal["openai", "ollama"]

DEFAULT_URLS: dict[Api, str] = {
    "openai": "http://localhost:11434/v1",
    "ollama": "http://localhost:11434",
}
_PATHS: dict[Api, str] = {"openai": "/embeddings", "ollama": "/api/embed"}
#: The most one number of a vector may take in an answer: a float64 written out in full
#: (24 characters) and as much again for separators and indentation.
BYTES_PER_NUMBER = 48
#: What an answer's item holds besides its numbers (``{"object": "embedding", "index": 0}``).
BYTES_PER_VECTOR = 256


class HttpEmbedder:
    """One model on one server; nothing is sent until the first text is embedded."""

    def __init__(self, api: Api, model: str, settings: HttpModelsSettings) -> None:
        self.api = api
        self.model = model
        self.settings = settings
        self.client = JsonClient(
            settings.base_url or DEFAULT_URLS[api],
            timeout=settings.timeout,
            retry=RetryPolicy(settings.max_retries, settings.retry_max_seconds),
            api_key_env=settings.api_key_env,
            on_retry=self._log_retry,
        )
        self._dim = settings.dimensions

    # -- identity --------------------------------------------------------------------------

    @property
    def identity(self) -> str:
        """The model and its dimension, and the prefixes (they change every vector): never
        the server's address or key, so moving the server does not invalidate the index."""
        prefixes = self.settings.query_prefix + "\0" + self.settings.document_prefix
        tag = ""
        if prefixes != "\0":
            tag = ":prefixes-" + hashlib.sha256(prefixes.encode()).hexdigest()[:8]
        return f"http:{self.model}:{self.dim}{tag}"

    @property
    def dim(self) -> int:
        if self._dim is None:
            # Unset in groove.toml: one request tells. Setting it saves this on every start.
            self._dim = int(self._request(["dimension probe"]).shape[1])
        return self._dim

    # -- embedding -------------------------------------------------------------------------

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        prefix = self.settings.document_prefix
        return self._embed([prefix + t for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self._embed([self.settings.query_prefix + text])[0]
        return vector

    def _embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        size = self.settings.batch_size
        batches = [texts[i : i + size] for i in range(0, len(texts), size)]
        workers = min(self.settings.concurrency, len(batches))
        if workers == 1:
            parts = [self._request(b) for b in batches]
        else:
            with ThreadPoolExecutor(workers, thread_name_prefix="groove-embed") as pool:
                # map yields in input order; the first failure propagates, and leaving the
                # block waits for the requests already in flight (none is left dangling).
                parts = list(pool.map(self._request, batches))
        return np.concatenate(parts)

    def _request(self, texts: list[str]) -> np.ndarray:
        payload: dict[str, Any] = {"model": self.model, "input": texts}
        if self.api == "openai" and self.settings.request_dimensions and self.settings.dimensions:
            payload["dimensions"] = self.settings.dimensions
        try:
            answer = self.client.post(_PATHS[self.api], payload, self._limit(len(texts)))
        except ServerError as err:
            raise EmbedderError(self._failure(err)) from None
        vectors = self._vectors(answer, len(texts))
        if self._dim is not None and vectors.shape[1] != self._dim:
            where = "[plugin.http_models] dimensions" if self.settings.dimensions else "the index"
            raise EmbedderError(
                f"the embedding server {self.client.server} returned {vectors.shape[1]}-"
                f"dimensional vectors for model {self.model!r}, but {where} says "
                f"{self._dim}: set dimensions to the model's size (and re-embed with "
                "'groove index --reembed' if the model changed)"
            )
        return _normalized(vectors)

    def _limit(self, texts: int) -> AnswerLimit:
        """What an answer of ``texts`` vectors can need; before the dimension is known (the
        probe), the largest a setting allows."""
        dim = self._dim or MAX_DIMENSIONS
        size = f"dimension {dim}" if self._dim else f"up to {MAX_DIMENSIONS} dimensions"
        per_vector = dim * BYTES_PER_NUMBER + BYTES_PER_VECTOR
        return AnswerLimit.per_item(texts, per_vector, f"{texts} texts of {size}")

    def _failure(self, err: ServerError) -> str:
        message = f"embedder {self.api!r} (model {self.model!r}): {err}"
        if err.status == 404:
            hint = (
                f"is the model pulled (ollama pull {self.model})?"
                if "ollama" in str(err).lower() or self.api == "ollama"
                else "does the server serve this model, and does base_url end in /v1?"
            )
            return f"{message}. Check the model name: {hint}"
        if err.status in (401, 403):
            key = self.settings.api_key_env
            where = f"the key in ${key}" if key else "no API key (set api_key_env)"
            return f"{message}. The server refused the request: check {where}"
        return message

    def _vectors(self, answer: Any, expected: int) -> np.ndarray:
        try:
            if self.api == "openai":
                items = sorted(answer["data"], key=lambda item: int(item["index"]))
                rows = [item["embedding"] for item in items]
            else:
                rows = answer["embeddings"]
            vectors = np.asarray(rows, dtype=np.float32)
        except (KeyError, TypeError, ValueError):
            raise EmbedderError(
                f"the embedding server {self.client.server} answered in an unexpected shape "
                f"for the {self.api!r} API (is base_url the right server and path?)"
            ) from None
        if vectors.ndim != 2 or vectors.shape[0] != expected:
            raise EmbedderError(
                f"the embedding server {self.client.server} returned {len(rows)} vectors for "
                f"{expected} texts (model {self.model!r})"
            )
        return vectors

    def _log_retry(self, what: str, seconds: float) -> None:
        import structlog  # ~70 ms; only once a server asks to wait

        structlog.get_logger("groove").warning(
            "embedding_retry", server=self.client.server, problem=what, wait_s=round(seconds, 2)
        )


def _normalized(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: np.ndarray = (vectors / norms).astype(np.float32)
    return out


def make_embedder(api: Api, config: EmbedderConfig, settings: Settings) -> HttpEmbedder:
    """The factory behind ``[embedder] name = "openai"`` / ``"ollama"``."""
    if not config.model:
        example = "nomic-embed-text" if api == "ollama" else "text-embedding-3-small"
        raise EmbedderError(
            f"embedder {api!r} needs a model: set [embedder] model = '{example}' (the name "
            "the server knows it by) in groove.toml"
        )
    return HttpEmbedder(api, config.model, settings.get(HttpModelsSettings))
