"""A tiny randomly initialised cross-encoder, built once per test session.

No reranker weights are available offline; a 2-layer BERT with one output label and the
MiniLM tokenizer loads and runs through both backends exactly like a downloaded model.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from groove_reranker_bge.testing import build_random_cross_encoder

    return build_random_cross_encoder(tmp_path_factory.mktemp("reranker") / "tiny-cross-encoder")
