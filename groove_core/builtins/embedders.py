"""Built-in embedders (USE multilingual by default; model2vec, sentence-transformers, hashing)."""

from __future__ import annotations

from groove_core.embedding import EmbedderSpec, builtin_embedder_specs
from groove_core.hookspecs import hookimpl


@hookimpl
def groove_embedders() -> list[EmbedderSpec]:
    return builtin_embedder_specs()
