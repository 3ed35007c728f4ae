"""The ``http_models`` plugin: embedders behind an HTTP endpoint.

``[embedder] name = "openai"`` (any OpenAI-compatible ``/v1/embeddings``: Ollama, TEI,
vLLM, LM Studio, llama.cpp's server, hosted APIs) or ``"ollama"`` (Ollama's ``/api/embed``),
configured in ``[plugin.http_models]`` (:class:`HttpModelsSettings`). The reranker plugin's
``http`` backend uses :mod:`groove_http_models.rerank`. Nothing is sent at start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

from groove_core.embedding import EmbedderError, EmbedderSpec
from groove_core.hookspecs import hookimpl
from groove_http_models.embedders import make_embedder
from groove_http_models.settings import HttpModelsSettings

if TYPE_CHECKING:
    from pydantic import BaseModel

    from groove_core.config import EmbedderConfig

NAME = "http_models"


def _unconfigured(config: EmbedderConfig) -> NoReturn:
    raise EmbedderError(
        f"embedder {config.name!r} is configured through [plugin.{NAME}], which this groove "
        "does not pass to embedders: upgrade groove-core"
    )


@hookimpl
def groove_config_schema() -> type[BaseModel]:
    return HttpModelsSettings


@hookimpl
def groove_embedders() -> list[EmbedderSpec]:
    return [
        EmbedderSpec(
            "openai",
            _unconfigured,
            "an OpenAI-compatible /v1/embeddings server (Ollama, TEI, vLLM, LM Studio, "
            "llama.cpp, hosted); [plugin.http_models]",
            configured_factory=lambda c, s: make_embedder("openai", c, s),
        ),
        EmbedderSpec(
            "ollama",
            _unconfigured,
            "Ollama's native /api/embed; [plugin.http_models]",
            configured_factory=lambda c, s: make_embedder("ollama", c, s),
        ),
    ]
