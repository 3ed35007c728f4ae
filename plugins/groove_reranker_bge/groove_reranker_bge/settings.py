"""The plugin's keys in groove.toml: which cross-encoder reranks and whether by default
(the top-level ``reranker`` and ``rerank_by_default``, the seed's layout), and how it runs
(``[plugin.reranker]``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class RerankerKeys(BaseModel):
    """Which cross-encoder reranks, and whether for every search (groove-reranker-bge)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reranker: str | None = Field(None, description="cross-encoder model name or path")
    rerank_by_default: bool = Field(
        False, description="apply the configured reranker to every search"
    )


class RerankerSettings(BaseModel):
    """The plugin's knobs; unknown keys are errors naming the key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: Literal["auto", "sentence-transformers", "flag", "http"] = Field(
        "auto",
        description="library that runs the model: 'auto' is sentence-transformers (always "
        "installed); 'flag' is FlagEmbedding's FlagReranker (the [flag] extra); 'http' a "
        "/rerank server at url (needs groove-http-models)",
    )
    url: str | None = Field(
        None,
        pattern=r"^https?://",
        description="backend 'http': the rerank endpoint, e.g. http://localhost:8080/rerank "
        "(TEI) or https://api.jina.ai/v1/rerank",
        json_schema_extra={"fingerprint": False},
    )
    api_style: Literal["tei", "cohere"] = Field(
        "tei",
        description="backend 'http': request shape, 'tei' ({query, texts}) or 'cohere' "
        "({model, query, documents}: Cohere, Jina, vLLM)",
    )
    api_key_env: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="backend 'http': environment variable holding the API key (never the key)",
        json_schema_extra={"fingerprint": False},
    )
    timeout: float = Field(
        60.0,
        gt=0,
        description="backend 'http': seconds to wait for one answer",
        json_schema_extra={"fingerprint": False},
    )
    batch_size: int = Field(8, ge=1, le=256, description="pairs scored per forward pass")
    max_length: int = Field(
        512, ge=16, le=8192, description="tokens per (query, passage) pair; longer is cut"
    )
    rerank_budget_ms: float | None = Field(
        None,
        gt=0,
        description="stop scoring when the next batch would pass this many milliseconds; "
        "unscored candidates keep their RRF order after the scored ones (unset: no budget)",
    )
    device: str = Field(
        "cpu",
        pattern=r"^(cpu|cuda(:\d+)?|mps)$",
        description="torch device: cpu, cuda, cuda:N or mps",
    )
    models: tuple[str, ...] = Field(
        (),
        description="other cross-encoders (hub names or local directories) an MCP client may "
        "pick per query with the search tool's 'reranker' parameter, besides the top-level "
        "reranker; a client can name no other model ('groove search --reranker' can)",
    )
    trust_remote_code: tuple[str, ...] = Field(
        (),
        description="models allowed to run code from their own repository (e.g. "
        "jinaai/jina-reranker-v2-base-multilingual); never granted to other names",
    )
