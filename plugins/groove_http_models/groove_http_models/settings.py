"""``[plugin.http_models]`` in groove.toml: where the embedding server is and how to talk to it.

Which embedder and which model are the core's ``[embedder] name`` (``openai`` or ``ollama``)
and ``[embedder] model``; this section holds what only an HTTP embedder has. The API key is
never a setting: ``api_key_env`` names the environment variable that holds it, so the key
stays out of groove.toml, the index and the eval history.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

#: Marks a key that does not change results (where the server is, how patient to be): the
#: eval history's fingerprint leaves it out (a URL may even carry credentials).
NOT_FINGERPRINTED: dict[str, JsonValue] = {"fingerprint": False}
#: The largest vector size a setting may name; it also sizes the probe's answer limit.
MAX_DIMENSIONS = 65536


class HttpModelsSettings(BaseModel):
    """The plugin's knobs; unknown keys are errors naming the key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = Field(
        None,
        description="the server: for 'openai' up to /v1 (default http://localhost:11434/v1, "
        "a local Ollama); for 'ollama' its root (default http://localhost:11434)",
        json_schema_extra=NOT_FINGERPRINTED,
    )
    dimensions: int | None = Field(
        None,
        ge=1,
        le=MAX_DIMENSIONS,
        description="the model's vector size, checked against every response (unset: asked "
        "of the server with one probe request on start)",
    )
    request_dimensions: bool = Field(
        False,
        description="send 'dimensions' in each 'openai' request (models that can shorten "
        "their vectors, e.g. text-embedding-3-*)",
    )
    batch_size: int = Field(
        16, ge=1, le=2048, description="texts per request ([embedder] batch_size per index write)"
    )
    concurrency: int = Field(4, ge=1, le=64, description="requests in flight at once")
    timeout: float = Field(
        60.0,
        gt=0,
        le=3600,
        description="seconds one request may take, from connecting to the last byte of "
        "the answer (a server that sends slowly is cut off too)",
        json_schema_extra=NOT_FINGERPRINTED,
    )
    max_retries: int = Field(
        5,
        ge=0,
        le=50,
        description="retries of a request answered 429 or 5xx, or that failed to connect",
        json_schema_extra=NOT_FINGERPRINTED,
    )
    retry_max_seconds: float = Field(
        60.0,
        ge=0,
        le=3600,
        description="total seconds one request may spend waiting between retries (a longer "
        "Retry-After gives up at once)",
        json_schema_extra=NOT_FINGERPRINTED,
    )
    api_key_env: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="environment variable holding the API key, sent as 'Authorization: "
        "Bearer'; the key itself is never read from groove.toml",
        json_schema_extra=NOT_FINGERPRINTED,
    )
    query_prefix: str = Field(
        "", description="prepended to queries (e5: 'query: ', nomic: 'search_query: ')"
    )
    document_prefix: str = Field(
        "",
        description="prepended to chunks (e5: 'passage: ', nomic: 'search_document: ')",
    )

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http:// or https:// URL with a host")
        return value.rstrip("/")
