"""Scores from a ``/rerank`` server, for the reranker plugin's ``http`` backend.

Two request shapes cover the servers in use: ``tei`` (text-embeddings-inference:
``{"query", "texts", "raw_scores"}`` answered with ``[{"index", "score"}]``) and ``cohere``
(Cohere, Jina, vLLM: ``{"model", "query", "documents"}`` answered with
``{"results": [{"index", "relevance_score"}]}``). Either answer shape is read, whichever was
asked, since compatible servers mix them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from groove_http_models.client import AnswerLimit, JsonClient, RetryPolicy, ServerError

Style = Literal["tei", "cohere"]
#: What one scored passage may bring besides its own text: index, score, field names.
BYTES_PER_SCORE = 1024
#: Some servers (Jina) return each passage's text with its score, JSON-escaped: CJK text
#: takes twice its UTF-8 bytes (``\uXXXX``), an emoji three times.
ECHO_FACTOR = 4


class RerankServerError(Exception):
    """The server could not score; the message names it (never the key)."""


def score(
    url: str,
    model: str,
    style: Style,
    pairs: Sequence[tuple[str, str]],
    *,
    timeout: float = 60.0,
    api_key_env: str | None = None,
    retry: RetryPolicy | None = None,
) -> list[float]:
    """One score per (query, passage) pair, in order. ``url`` is the whole endpoint
    (``http://host:8080/rerank``); pairs sharing one query go in one request."""
    client = JsonClient(url, timeout=timeout, retry=retry or RetryPolicy(), api_key_env=api_key_env)
    out: list[float] = [0.0] * len(pairs)
    groups: dict[str, list[int]] = {}
    for i, (query, _passage) in enumerate(pairs):
        groups.setdefault(query, []).append(i)
    for query, indexes in groups.items():
        texts = [pairs[i][1] for i in indexes]
        payload: dict[str, Any]
        if style == "tei":
            payload = {"query": query, "texts": texts, "raw_scores": True}
        else:
            payload = {"model": model, "query": query, "documents": texts, "top_n": len(texts)}
        echoed = sum(len(t.encode()) for t in texts) * ECHO_FACTOR
        limit = AnswerLimit.per_item(
            len(texts), BYTES_PER_SCORE + echoed // len(texts) + 1, f"{len(texts)} passages"
        )
        try:
            answer = client.post("", payload, limit)
        except ServerError as err:
            raise RerankServerError(f"reranker {model!r}: {err}") from None
        for index, value in _scores(answer, len(texts), client.server):
            out[indexes[index]] = value
    return out


def _scores(answer: Any, expected: int, server: str) -> list[tuple[int, float]]:
    items: Any = answer.get("results") if isinstance(answer, dict) else answer
    try:
        found = [
            (int(item["index"]), float(item.get("score", item.get("relevance_score"))))
            for item in items
        ]
    except (KeyError, TypeError, ValueError, AttributeError):
        raise RerankServerError(
            f"the rerank server {server} answered in an unexpected shape (expected a list of "
            "{index, score} or {results: [{index, relevance_score}]})"
        ) from None
    if sorted(i for i, _ in found) != list(range(expected)):
        raise RerankServerError(
            f"the rerank server {server} scored {len(found)} of {expected} passages"
        )
    return found
