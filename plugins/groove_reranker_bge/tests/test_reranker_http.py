"""The ``http`` backend against a real /rerank server on loopback (TEI and Cohere styles)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from groove_http_models.testing import ModelServer
from groove_reranker_bge.backends import RerankerError

from groove_core.app import Groove
from groove_core.embedding import HashingEmbedder
from groove_core.testing import make_kb

MODEL = "BAAI/bge-reranker-v2-m3"  # the name the server knows; never loaded here


def _config(url: str, style: str) -> str:
    return (
        f'reranker = "{MODEL}"\nrerank_by_default = true\n'
        '[embedder]\nname = "hashing"\n'
        f'[plugin.reranker]\nbackend = "http"\nurl = "{url}"\napi_style = "{style}"\n'
    )


@pytest.mark.parametrize(
    ("style", "path", "field"), [("tei", "/rerank", "texts"), ("cohere", "/v1/rerank", "documents")]
)
def test_search_is_reranked_by_the_servers_scores(
    tmp_path: Path, style: str, path: str, field: str
) -> None:
    embed = HashingEmbedder(64).embed_documents
    with ModelServer({MODEL: embed}) as server:
        kb = make_kb(tmp_path / "kb", config=_config(server.url + path, style))
        app = Groove.open(kb)
        app.index()
        hits = app.search("rust ownership", limit=3).results
        (request,) = server.state.requests
    assert request.path == path and request.body["query"] == "rust ownership"
    passages = request.body[field]
    vectors = embed(["rust ownership", *passages])
    expected = sorted(float(s) for s in vectors[1:] @ vectors[0])[::-1][:3]
    assert [h.score for h in hits] == pytest.approx(expected, abs=1e-6)
    assert np.all(np.diff([h.score for h in hits]) <= 0)
    if style == "cohere":
        assert request.body["model"] == MODEL


def test_a_failing_server_is_named(tmp_path: Path) -> None:
    with ModelServer({}) as server:
        server.state.script = [(400, {}, {"error": "batch size 50 > maximum allowed 32"})]
        kb = make_kb(tmp_path / "kb", config=_config(server.url + "/rerank", "tei"))
        app = Groove.open(kb)
        app.index()
        with pytest.raises(RerankerError) as err:
            app.search("rust ownership")
    message = str(err.value)
    assert f"{server.url}/rerank answered HTTP 400" in message
    assert "maximum allowed 32" in message
