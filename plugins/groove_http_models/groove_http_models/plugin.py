"""The ``http_models`` plugin: embedders behind an HTTP endpoint.

``[embedder] name = "openai"`` (any OpenAI-compatible ``/v1/embeddings``: Ollama, TEI,
vLLM, LM Studio, llama.cpp's server, hosted APIs) or ``"ollama"`` (Ollama's ``/api/embed``),
configured in ``[plugin.http_models]`` (:class:`HttpModelsSettings`). The reranker plugin's
``http`` backend uses :mod:`groove_http_models.rerank`. Nothing is sent at start-up.
"""

from __future__ import annotations

from groove_core.config import ConfigSection
from groove_core.embedding import EmbedderSpec
from groove_core.hookspecs import hookimpl
from groove_http_models.embedders import make_embedder
from groove_http_models.settings import HttpModelsSettings

NAME = "http_models"


@hookimpl
def groove_config_sections() -> list[ConfigSection]:
    return [ConfigSection(f"plugin.{NAME}", HttpModelsSettings)]


@hookimpl
def groove_embedders() -> list[EmbedderSpec]:
    return [
        EmbedderSpec(
            "openai",
            lambda c, s: make_embedder("openai", c, s),
            "an OpenAI-compatible /v1/embeddings server (Ollama, TEI, vLLM, LM Studio, "
            "llama.cpp, hosted); [plugin.http_models]",
        ),
        EmbedderSpec(
            "ollama",
            lambda c, s: make_embedder("ollama", c, s),
            "Ollama's native /api/embed; [plugin.http_models]",
        ),
    ]
