"""A loopback model server serving the hashing embedder, and KBs configured to use it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from groove_http_models.testing import ModelServer

from groove_core.embedding import HashingEmbedder

MODEL = "hash-64"


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer({MODEL: HashingEmbedder(64).embed_documents}) as running:
        yield running


@pytest.fixture
def kb_dir(tmp_path: Path) -> Path:
    return tmp_path / "kb"
