"""groove.toml: every knob of the pipeline, validated, with its default.

The file lives at the KB root (or is named with ``--config``). Unknown keys and bad values
fail with a :class:`ConfigError` that names the key and the file, never a pydantic traceback.
Plugins declare their own sections through ``groove_config_schema``; those sections are
validated by the plugin's model when the plugin is loaded.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

CONFIG_FILENAME = "groove.toml"
DEFAULT_INDEX_DIR = ".groove"
INDEX_FILENAME = "index.sqlite"
#: Default of ``[index] max_chunks_per_file``: over 100x the most chunks (41) any file of the
#: bundled evaluation collections makes at the default chunk size (see docs/reliability.md).
MAX_CHUNKS_PER_FILE = 5000


class ConfigError(Exception):
    """A configuration problem a user can fix; the message names the file and the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class FusionConfig(_Strict):
    """Reciprocal Rank Fusion and the bm25 column weights of the lexical leg."""

    rrf_k: float = Field(60.0, gt=0, description="RRF constant k: score = sum(1 / (k + rank))")
    heading: float = Field(2.0, ge=0, description="bm25 weight of the heading column")
    context: float = Field(1.0, ge=0, description="bm25 weight of the contextual prefix")
    content: float = Field(1.0, ge=0, description="bm25 weight of the chunk content")
    candidates: int = Field(
        50, ge=1, le=1000, description="top-N each candidate leg returns before fusion"
    )
    weights: dict[str, Annotated[float, Field(ge=0)]] = Field(
        default_factory=dict,
        description="RRF weight per leg name (fts, word, vector, a plugin's leg); "
        "1.0 when not listed, 0 leaves the leg out of fusion",
    )
    cross_script_lexical: float = Field(
        0.0,
        ge=0,
        description="multiplies the lexical legs' weight when the query's script (Japanese or "
        "not) differs from that of what they matched (their top hits); 0 leaves them out, "
        "1.0 turns the rule off",
    )
    coverage_threshold: float = Field(
        0.5,
        ge=0,
        le=1,
        description="share of the query's IDF mass the word leg's top hit must contain for "
        "coverage_vector to apply",
    )
    coverage_vector: float = Field(
        0.25,
        ge=0,
        description="multiplies the vector leg's weight when the word leg's top hit covers "
        "the query (see coverage_threshold); 1.0 turns the rule off",
    )


class MMRConfig(_Strict):
    """MMR diversity (plugin groove_mmr)."""

    enabled: bool = Field(False, description="diversify the top results (needs groove-mmr)")
    lambda_: float = Field(
        0.7,
        alias="lambda",
        ge=0.0,
        le=1.0,
        description="relevance vs. diversity: 1.0 is pure relevance (MMR off, but slower)",
    )
    same_doc_penalty: float = Field(
        0.0, ge=0.0, description="extra penalty for a second chunk of an already picked document"
    )


class ParentRetrieverConfig(_Strict):
    """Parent-retriever expansion (plugin groove_parent)."""

    enabled: bool = Field(False, description="expand small hits (needs groove-parent)")
    whole_doc_threshold_tokens: int = Field(
        100, ge=0, description="a hit under this many tokens returns its whole document"
    )
    max_expanded_tokens: int = Field(
        2000, ge=1, description="cap on the tokens of an expanded hit's content"
    )


class LowConfidenceConfig(_Strict):
    """When a result set is flagged ``low_confidence`` (see docs/retrieval-pipeline.md)."""

    max_vector_distance: float = Field(
        1.2,
        ge=0.0,
        description="L2 distance past which the best vector hit counts as a weak match",
    )


class SearchConfig(_Strict):
    """Searching: how many results, and the knobs of each stage."""

    default_limit: int = Field(
        10, ge=1, le=200, description="results returned when a search gives no limit"
    )
    lexical_common_share: float = Field(
        0.2,
        ge=0.0,
        le=1.0,
        description=(
            "the lexical legs (trigram, word) leave out a query phrase or term found in more "
            "than this share of the chunks (the rarest always stays); 0 keeps them all"
        ),
    )
    fusion: FusionConfig = FusionConfig()
    mmr: MMRConfig = MMRConfig()
    parent_retriever: ParentRetrieverConfig = ParentRetrieverConfig()
    low_confidence: LowConfidenceConfig = LowConfidenceConfig()


class EmbedderConfig(_Strict):
    """Which embedder turns chunks and queries into vectors."""

    name: str = Field("use-multilingual", description="a registered embedder name")
    model: str | None = Field(
        None, description="model name or local path, for embedders that take one"
    )
    batch_size: int = Field(64, ge=1, le=4096, description="chunks embedded per call")
    query_threads: int = Field(
        1, ge=1, le=256, description="BLAS threads of the default embedder for a query"
    )
    index_threads: int = Field(
        1, ge=1, le=256, description="BLAS threads of the default embedder for index batches"
    )
    threads: int | None = Field(
        None,
        ge=1,
        le=256,
        description="older key: sets query_threads and index_threads together "
        "(either one set beside it wins)",
    )

    @model_validator(mode="before")
    @classmethod
    def _threads_sets_both(cls, data: Any) -> Any:
        # `threads = N` from before the split keeps its meaning: N for all embedding
        if isinstance(data, dict) and type(data.get("threads")) is int:
            data = {"query_threads": data["threads"], "index_threads": data["threads"], **data}
        return data


class KbConfig(_Strict):
    """What this knowledge base is called and holds (shown to agents when served)."""

    name: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$",
        description="its name in results and MCP (default: the registered name, else the "
        "folder's name)",
    )
    description: str = Field(
        "", max_length=500, description="what it holds, in a sentence (listed to MCP clients)"
    )


class IndexConfig(_Strict):
    """Where the index lives and what is indexed."""

    path: str | None = Field(
        None, description="index file; default <kb>/.groove/index.sqlite (relative to the KB)"
    )
    max_chunk_tokens: int = Field(
        400,
        ge=32,
        le=8192,
        description="sections longer than this are split (tokens estimated as len/4, "
        "each CJK character counting cjk_char_tokens)",
    )
    cjk_char_tokens: float = Field(
        1.0,
        ge=0.25,
        le=4.0,
        description="tokens one kana/kanji/hangul character counts for in chunk sizing; "
        "0.25 is the seed's plain len/4 (re-index with --rebuild after changing it)",
    )
    max_file_bytes: int = Field(
        10 * 1024 * 1024, ge=1024, description="larger files are skipped with a warning"
    )
    max_chunks_per_file: int = Field(
        MAX_CHUNKS_PER_FILE,
        ge=1,
        description="files that would make more chunks are skipped with a warning",
    )
    extensions: tuple[str, ...] = Field(
        (".md", ".markdown"), description="file name endings that are indexed"
    )
    ignore: tuple[str, ...] = Field((), description="extra glob patterns never indexed")
    dialect: Literal["auto", "commonmark", "mdx", "obsidian"] = Field(
        "auto",
        description="markup cleaned out of chunks: mdx (MDX, VitePress/Docusaurus/Hugo), "
        "obsidian (mdx's plus inline #tags), commonmark (none), auto (mdx's for every file, "
        "obsidian's in a vault or a note with [[wikilinks]]); auto and mdx also index *.mdx "
        "(re-index with --rebuild after changing it)",
    )

    def indexed_extensions(self) -> tuple[str, ...]:
        """File name endings indexed and served, lower-cased: ``extensions``, plus ``.mdx``
        where the dialect cleans MDX (unreadable as plain Markdown, so never by default)."""
        found = tuple(e.lower() for e in self.extensions)
        if self.dialect in ("auto", "mdx") and ".mdx" not in found:
            found += (".mdx",)
        return found

    @field_validator("ignore")
    @classmethod
    def _globs_compile(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        # Checked here so a bad pattern is a configuration error naming the key, not a
        # failure halfway through a walk.
        from groove_core.filters import compile_glob

        for pattern in patterns:
            compile_glob(pattern)
        return patterns


class PluginsConfig(_Strict):
    """Plugins switched off by name (as listed by ``groove plugins list``)."""

    disabled: tuple[str, ...] = Field(
        (), description="plugin names never loaded (built-in ones included)"
    )


class GrooveConfig(BaseModel):
    """The whole of groove.toml. Plugin sections live under ``[plugin.<name>]``."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    kb: KbConfig = KbConfig()
    search: SearchConfig = SearchConfig()
    embedder: EmbedderConfig = EmbedderConfig()
    index: IndexConfig = IndexConfig()
    plugins: PluginsConfig = PluginsConfig()
    reranker: str | None = Field(None, description="cross-encoder model name or path")
    rerank_by_default: bool = Field(
        False, description="apply the configured reranker to every search"
    )
    plugin: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="per-plugin settings, validated by each plugin"
    )

    source: str | None = Field(None, exclude=True, description="the file this came from")


def validation_problems(err: ValidationError) -> list[str]:
    """Each problem ``err`` found, as ``key: what is wrong (got value)``.

    Built from the items, never from ``str(err)``, whose text sends users to pydantic's
    web site ("For further information visit ..."); a validator's own message is given
    without pydantic's "Value error, " in front of it.
    """
    problems = []
    for item in err.errors(include_url=False):
        key = ".".join(str(p) for p in item["loc"]) or "(top level)"
        if item["type"] == "extra_forbidden":
            problems.append(f"unknown key '{key}'")
            continue
        cause = item.get("ctx", {}).get("error") if item["type"] == "value_error" else None
        message = str(cause) if cause is not None else item["msg"]
        problems.append(f"{key}: {message} (got {item.get('input')!r})")
    return problems


def _format_error(err: ValidationError, source: str) -> str:
    lines = [f"invalid configuration in {source}:"]
    lines += [f"  {problem}" for problem in validation_problems(err)]
    return "\n".join(lines)


def parse_config(data: dict[str, Any], source: str = "<config>") -> GrooveConfig:
    """Validate a mapping as groove.toml content; errors name the key and the source."""
    if "source" in data:
        raise ConfigError(f"invalid configuration in {source}:\n  unknown key 'source'")
    try:
        return GrooveConfig.model_validate({**data, "source": source})
    except ValidationError as err:
        raise ConfigError(_format_error(err, source)) from None


def load_config(kb: Path, explicit: Path | None = None) -> GrooveConfig:
    """Read ``explicit`` or ``<kb>/groove.toml``; all defaults when neither exists."""
    path = explicit if explicit is not None else kb / CONFIG_FILENAME
    if explicit is None and not path.exists():
        return GrooveConfig()
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise ConfigError(f"cannot read configuration file {path}: {err.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"configuration file {path} is not valid UTF-8") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"configuration file {path} is not valid TOML: {err}") from None
    return parse_config(data, str(path))


def index_path(kb: Path, config: GrooveConfig) -> Path:
    """The index file for ``kb``: the configured path (relative to the KB) or the default."""
    if config.index.path:
        configured = Path(config.index.path).expanduser()
        return configured if configured.is_absolute() else kb / configured
    return kb / DEFAULT_INDEX_DIR / INDEX_FILENAME
