"""groove.toml: every knob of the pipeline, validated, with its default.

The file lives at the KB root (or is named with ``--config``). Unknown keys and bad values
fail with a :class:`ConfigError` that names the key and the file, never a pydantic traceback.
Plugins own their keys (``groove_config_sections``): the core
validates what it defines when the file is read, keeps every other key aside
(:attr:`GrooveConfig.unclaimed`), and the plugin set validates those with the models the
plugins declare when it loads (:class:`Settings`); a key no enabled plugin claims is an error
then. The core names no optional stage.
"""

from __future__ import annotations

import copy
import functools
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from groove_core.errors import GrooveError

CONFIG_FILENAME = "groove.toml"
DEFAULT_INDEX_DIR = ".groove"
INDEX_FILENAME = "index.sqlite"
#: Default of ``[index] max_chunks_per_file``: over 100x the most chunks (41) any file of the
#: bundled evaluation collections makes at the default chunk size (see docs/reliability.md).
MAX_CHUNKS_PER_FILE = 5000
#: The most results one search returns (the CLI, the MCP tools and ``[search] default_limit``).
MAX_LIMIT = 200


class ConfigError(GrooveError):
    """A configuration problem a user can fix; the message names the file and the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class FusionConfig(_Strict):
    """How the legs are fused (their scores, or Reciprocal Rank Fusion), their weights and
    rules, and the bm25 column weights of the lexical legs."""

    method: Literal["rrf", "scores"] = Field(
        "scores",
        description="how the legs' lists are fused: scores (sum of weight x the hit's score "
        "over its leg's best, on the scale each leg declares) or rrf (sum of weight / (k + "
        'rank), the seed\'s); docs/retrieval-pipeline.md, "Hybrid candidates"',
    )
    rrf_k: float = Field(
        60.0,
        gt=0,
        description="RRF constant k: score = sum(1 / (k + rank)); under method = scores, "
        "the share of a leg that declares no score scale",
    )
    heading: float = Field(2.0, ge=0, description="bm25 weight of the heading column")
    context: float = Field(1.0, ge=0, description="bm25 weight of the contextual prefix")
    content: float = Field(1.0, ge=0, description="bm25 weight of the chunk content")
    candidates: int = Field(
        50, ge=1, le=1000, description="top-N each candidate leg returns before fusion"
    )
    weights: dict[str, Annotated[float, Field(ge=0)]] = Field(
        default_factory=dict,
        description="fusion weight per leg name (fts, word, vector, a plugin's leg); "
        "when not listed, the weight the leg declares (word 2, the others 1); "
        "0 leaves the leg out of fusion",
    )
    cross_script_lexical: float = Field(
        0.0,
        ge=0,
        description="multiplies the lexical legs' weight when the query's script (Japanese or "
        "not) differs from that of what they matched (their top hits); 0 leaves them out, "
        "1.0 turns the rule off; a leg that translates (bridges_scripts) is exempt",
    )
    cross_script_exact: float = Field(
        1.0,
        ge=0,
        description="the least the cross-script rule multiplies the lexical legs by for an "
        "exact match: the word leg's top hit holds every word of the query, at most 3 "
        "chunks hold them, and the vector leg ranks it in its top 10 (e.g. an identifier "
        "inside notes in another script)",
    )
    coverage_threshold: float = Field(
        0.5,
        ge=0,
        le=1,
        description="share of the query's IDF mass the top hit of the lexical leg reporting "
        "the query's terms (the word leg) must contain for coverage_vector to apply",
    )
    coverage_vector: float = Field(
        0.25,
        ge=0,
        description="multiplies the vector legs' weight when the word leg's top hit covers "
        "the query (see coverage_threshold); 1.0 turns the rule off",
    )


class LowConfidenceConfig(_Strict):
    """When a result set is flagged ``low_confidence`` (see docs/retrieval-pipeline.md)."""

    max_vector_distance: float = Field(
        1.2,
        ge=0.0,
        description="L2 distance past which the best vector hit counts as a weak match",
    )
    max_cross_script_distance: float = Field(
        1.25,
        ge=0.0,
        description="the same for a query in another script than the notes' (one a "
        "translating leg answered): distances between languages run larger",
    )
    corroborated_rank: int = Field(
        5,
        ge=1,
        le=1000,
        description="a hit two legs found is corroborated (the results are not weak) when it "
        "ranks this high or better in each of them",
    )
    bridged_rank: int = Field(
        3,
        ge=1,
        le=1000,
        description="the same when one of those legs translates (bridges_scripts): "
        "dictionary translations match loosely",
    )


class SearchConfig(_Strict):
    """Searching: how many results, and the knobs of each stage."""

    default_limit: int = Field(
        10, ge=1, le=MAX_LIMIT, description="results returned when a search gives no limit"
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
    low_confidence: LowConfidenceConfig = LowConfidenceConfig()


class EmbedderConfig(_Strict):
    """Which embedder turns chunks and queries into vectors."""

    name: str = Field("use-multilingual", description="a registered embedder name")
    model: str | None = Field(
        None, description="model name or local path, for embedders that take one"
    )
    batch_size: int = Field(64, ge=1, le=4096, description="chunks embedded per call")
    query_prefix: str | None = Field(
        None,
        max_length=200,
        description="sentence-transformers only: text put before each query (default: "
        "from the model family's table, e.g. 'query: ' for e5; '' for none)",
    )
    document_prefix: str | None = Field(
        None,
        max_length=200,
        description="sentence-transformers only: text put before each chunk (default: "
        "from the model family's table, e.g. 'passage: ' for e5; '' for none)",
    )
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
        description="sets query_threads and index_threads together (either one set beside it wins)",
    )
    own_process: Literal["auto", "always", "never"] = Field(
        "auto",
        description="embed an index run's chunks in a process of its own (auto: an embedder "
        "that computes in this process, e.g. the default one, and a run reading 1 MB or more "
        "or starting with 1,000 chunks or more without a vector)",
    )

    @model_validator(mode="before")
    @classmethod
    def _threads_sets_both(cls, data: Any) -> Any:
        # `threads = N`: N for every embedding, unless one of the two is set beside it
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
    min_section_tokens: int = Field(
        32,
        ge=0,
        le=8192,
        description="a section with less text than this under its heading (a reference page's "
        "one-line entries) joins the chunk before it, while they fit max_chunk_tokens, so it "
        "no longer outranks the page it points to; a hit in it still names its own heading "
        "(docs/eval.md); 0 keeps every section its own chunk (re-index with --rebuild after "
        "changing it)",
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
    dialect: Literal["auto", "commonmark", "mdx", "obsidian", "dendron"] = Field(
        "auto",
        description="markup cleaned out of chunks: mdx (MDX, VitePress/Docusaurus/Hugo), "
        "obsidian (mdx's plus [[wikilinks]], inline #tags, %% comments %%), dendron "
        "(obsidian's with [[alias|note]] links and #dotted.tags), commonmark (none), auto "
        "(mdx's for every file, dendron's under a dendron.yml, obsidian's in a vault or a "
        "note with [[wikilinks]]); auto and mdx also index *.mdx (re-index with --rebuild "
        "after changing it)",
    )
    obsidian_comments: Literal["hide", "keep"] = Field(
        "hide",
        description="Obsidian %% comments %%: hide (neither indexed nor served, as Obsidian's "
        "reading view hides them) or keep (re-index with --rebuild after changing it)",
    )
    private_keys: tuple[str, ...] = Field(
        (),
        description="front-matter keys that are the writer's own (e.g. ['salary', 'contact']): "
        "never read into the index and left out wherever a note is served, their lines kept "
        "blank (re-index with --rebuild after changing it)",
    )
    serve_comments: bool = Field(
        False,
        description="serve the comments the index leaves out (HTML <!-- -->, MDX {/* */}, and "
        "Obsidian %% %% unless kept) as written, in get, get_document and resources; by "
        "default they are left out there too, their line breaks kept",
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


class StoreConfig(_Strict):
    """Which storage backend holds the index (docs/storage-backends.md)."""

    backend: str = Field(
        "sqlite",
        pattern=r"^[a-z][a-z0-9_-]{0,31}$",
        description="'sqlite' (one file per KB, built in) or one a plugin provides "
        "('postgres' with groove-postgres); a backend's own keys sit beside this one",
    )


class PluginsConfig(_Strict):
    """Plugins switched off by name (as listed by ``groove plugins list``)."""

    disabled: tuple[str, ...] = Field(
        (), description="plugin names never loaded (built-in ones included)"
    )


class GrooveConfig(BaseModel):
    """The whole of groove.toml: the core's keys, and those plugins own (``unclaimed``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    kb: KbConfig = KbConfig()
    search: SearchConfig = SearchConfig()
    embedder: EmbedderConfig = EmbedderConfig()
    index: IndexConfig = IndexConfig()
    store: StoreConfig = StoreConfig()
    plugins: PluginsConfig = PluginsConfig()
    plugin: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="per-plugin settings, validated by each plugin"
    )

    source: str | None = Field(None, exclude=True, description="the file this came from")
    #: Every key the core does not define, by dotted path: a table as one entry
    #: (``"search.dedupe": {...}``), a key as another (``"cross_encoder": "..."``). Plugins claim
    #: them; see :func:`resolve_settings`.
    unclaimed: dict[str, Any] = Field(default_factory=dict, exclude=True)

    def to_data(self) -> dict[str, Any]:
        """The configuration as groove.toml's mapping (the plugins' keys included), which
        :func:`parse_config` reads back into an equal configuration."""
        data = self.model_dump(by_alias=True)
        for dotted, value in self.unclaimed.items():
            # A copy: callers edit the mapping (eval's variants), never this configuration.
            set_dotted(data, dotted, copy.deepcopy(value))
        return data


#: Keys of the model that groove.toml cannot set.
_RESERVED = ("source", "unclaimed")


def set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``a.b.c`` in a nested mapping, making the tables on the way."""
    node = data
    *parents, leaf = dotted.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value


def _keys(model: type[BaseModel]) -> dict[str, str]:
    """groove.toml key (the alias where there is one) -> field name."""
    keys = {}
    for name, info in model.model_fields.items():
        keys[info.alias or name] = name
        keys[name] = name
    return keys


def not_booleans(model: type[BaseModel], raw: Any, table: str = "") -> list[str]:
    """``key: must be true or false (got 'yes')`` for each boolean key of ``model`` (and
    of its sub-tables) that ``raw`` gives another value: pydantic would read ``"yes"`` or
    ``1`` as true, and a typo in a setting would then silently turn something on."""
    if not isinstance(raw, dict):
        return []
    problems = []
    for key, name in _keys(model).items():
        if key not in raw:
            continue
        annotation = model.model_fields[name].annotation
        where = f"{table}.{key}" if table else key
        if annotation in (bool, bool | None) and not isinstance(raw[key], bool | None):
            problems.append(f"{where}: must be true or false (got {raw[key]!r})")
        sub = _sub_model(model, name)
        if sub is not None:
            problems += not_booleans(sub, raw[key], where)
    return list(dict.fromkeys(problems))


def _sub_model(model: type[BaseModel], name: str) -> type[BaseModel] | None:
    annotation = model.model_fields[name].annotation
    return (
        annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    )


def _split(
    data: Mapping[str, Any], model: type[BaseModel], prefix: str = ""
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the keys ``model`` defines, every other key by dotted path), through sub-tables."""
    known: dict[str, Any] = {}
    unclaimed: dict[str, Any] = {}
    keys = _keys(model)
    for key, value in data.items():
        dotted = f"{prefix}.{key}" if prefix else key
        name = keys.get(key)
        if name is None or (not prefix and key in _RESERVED):
            unclaimed[dotted] = value
            continue
        sub = _sub_model(model, name)
        if sub is not None and isinstance(value, dict):
            known[key], more = _split(value, sub, dotted)
            unclaimed.update(more)
        else:
            known[key] = value
    return known, unclaimed


@functools.cache
def core_tables() -> frozenset[str]:
    """The dotted paths of the core's own tables (``""`` for the top level): a plugin
    section at one of them adds keys to it instead of owning a table of its own."""
    found = {""}

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, info in model.model_fields.items():
            sub = _sub_model(model, name)
            if sub is not None:
                path = f"{prefix}.{info.alias or name}" if prefix else info.alias or name
                found.add(path)
                walk(sub, path)

    walk(GrooveConfig, "")
    return frozenset(found)


M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class ConfigSection:
    """Keys of groove.toml a plugin owns (returned by ``groove_config_sections``).

    ``path`` names a table (``"search.dedupe"``) that the plugin then owns whole, or one of the
    core's tables (``""`` for the top level, ``"search"``), to which the model's fields add
    keys (e.g. a top-level ``cross_encoder = "..."``). The model validates what the file holds
    there (absent keys take its defaults); declare it with ``extra="forbid"`` so a typo is
    an error naming the key.
    """

    path: str
    model: type[BaseModel]
    plugin: str = ""  # set by the core: the plugin that declared it

    def owned_keys(self) -> list[str]:
        """The dotted keys of ``GrooveConfig.unclaimed`` this section owns: its table, or
        each key it adds to a core table (by name and by alias)."""
        if self.path not in core_tables():
            return [self.path]
        prefix = f"{self.path}." if self.path else ""
        return [prefix + key for key in _keys(self.model)]

    @property
    def label(self) -> str:
        """How messages name it: ``[search.dedupe]``, or the keys it adds to a core table."""
        if self.path not in core_tables():
            return f"[{self.path}]"
        keys = ", ".join(info.alias or name for name, info in self.model.model_fields.items())
        return f"{keys} ({f'[{self.path}]' if self.path else 'top level'})"


@dataclass(frozen=True)
class Settings:
    """The validated configuration: the core's, and every enabled plugin's sections."""

    config: GrooveConfig
    sections: tuple[ConfigSection, ...] = ()
    values: Mapping[type[BaseModel], BaseModel] = field(default_factory=dict)

    def get(self, model: type[M]) -> M:
        """The validated instance of a section's model (its defaults when the file has
        none of its keys). Raises KeyError for a model no enabled plugin declared."""
        value = self.values[model]
        assert isinstance(value, model)
        return value

    def value(self, dotted: str) -> Any:
        """The value of the key ``dotted`` (``"search.dedupe.enabled"``, ``"search.fusion.rrf_k"``),
        whether the core or a plugin owns it. Raises KeyError for a key nobody defines."""
        for section in sorted(self.sections, key=lambda s: -len(s.path)):
            prefix = f"{section.path}." if section.path else ""
            if not dotted.startswith(prefix):
                continue
            rest = dotted[len(prefix) :].split(".")
            if rest[0] in _keys(section.model):
                return _lookup(self.values[section.model], rest, dotted)
        return _lookup(self.config, dotted.split("."), dotted)

    def describe(self, dotted: str) -> str:
        return describe_key(dotted)


def describe_key(dotted: str) -> str:
    """A key as a user reads it in groove.toml: ``[search.dedupe] enabled``."""
    table, _, key = dotted.rpartition(".")
    return f"[{table}] {key}" if table else key


def resolve_settings(
    config: GrooveConfig,
    sections: Sequence[ConfigSection],
    plugin_names: Sequence[str],
    disabled: Sequence[str] = (),
) -> Settings:
    """Validate every plugin section of ``config`` with the model its plugin declared.

    ``plugin_names`` are the plugins groove knows of, enabled or not: a ``[plugin.NAME]``
    table of a disabled plugin is left alone, so that disabling a plugin never breaks the
    config. Any other key that no
    section claims is an error, all of them named in one message; ``disabled`` (e.g.
    ``"dedupe (groove-dedupe)"``) names the plugins that did not load because of
    ``[plugins] disabled``, one of which may own the key.
    """
    source = config.source or "groove.toml"
    _check_claims(sections, source)
    unclaimed = dict(config.unclaimed)
    unclaimed.update({f"plugin.{name}": table for name, table in config.plugin.items()})
    tables = core_tables()
    values: dict[type[BaseModel], BaseModel] = {}
    for section in sections:
        if section.path in tables:
            prefix = f"{section.path}." if section.path else ""
            raw: Any = {
                dotted.removeprefix(prefix): unclaimed.pop(dotted)
                for dotted in section.owned_keys()
                if dotted in unclaimed
            }
        else:
            raw = unclaimed.pop(section.path, {})
        if not isinstance(raw, dict):
            raise ConfigError(f"{section.label} in {source} must be a table, got {raw!r}")
        wrong = not_booleans(section.model, raw, section.path)
        if wrong:
            raise ConfigError(f"invalid {section.label} in {source}: {'; '.join(wrong)}")
        try:
            values[section.model] = section.model.model_validate(raw)
        except ValidationError as err:
            # One line, as a plugin's message has always been: "invalid [plugin.x] in F: ..."
            found = "; ".join(validation_problems(err, section.path))
            raise ConfigError(f"invalid {section.label} in {source}: {found}") from None
    known = set(plugin_names)
    spelled = _known_keys(sections, known)
    problems = [
        _unclaimed_problem(k, v) + _did_you_mean(k, spelled)
        for k, v in unclaimed.items()
        if not _dormant(k, known)
    ]
    if problems:
        hint = (
            "`groove plugins list` shows the installed plugins; one in a groove checkout "
            "installs with `pip install ./plugins/NAME`"
        )
        if disabled:
            hint = (
                f"[plugins] disabled keeps {', '.join(disabled)} from loading: take the one "
                f"that provides it out of that list; {hint}"
            )
        lines = [f"invalid configuration in {source}:", *problems, f"  ({hint})"]
        raise ConfigError("\n".join(lines))
    return Settings(config, tuple(sections), values)


def _check_claims(sections: Sequence[ConfigSection], source: str) -> None:
    """Each key has one owner: the core, or one plugin; a plugin's own table is
    ``[plugin.<its name>]``, never another plugin's."""
    owners: dict[str, str] = {}
    tables = core_tables()
    for section in sections:
        path, plugin = section.path, section.plugin
        table, _, leaf = path.rpartition(".")
        if path == "plugin" or (path.startswith("plugin.") and path != f"plugin.{plugin}"):
            raise ConfigError(
                f"the plugin {plugin} claims [{path}] of groove.toml: a plugin's own table "
                f"is [plugin.{plugin}]"
            )
        if path and path not in tables and table in tables and leaf in _core_keys(table):
            raise ConfigError(
                f"the plugin {plugin} claims {path!r} of groove.toml, which groove itself "
                "defines: add the plugin to [plugins] disabled"
            )
        prefix = f"{path}." if path else ""
        if path in tables:
            claimed = [prefix + key for key in _toml_keys(section.model)]
            core = [key for key in claimed if key.rpartition(".")[2] in _core_keys(path)]
        else:
            claimed, core = [path], []
        for key in claimed:
            other = owners.setdefault(key, plugin)
            if key in core or other != plugin:
                rival = "groove itself" if key in core else f"the plugin {other}"
                raise ConfigError(
                    f"the plugin {plugin} claims {key!r} of groove.toml, which "
                    f"{rival} defines: add one of them to [plugins] disabled"
                )


def _toml_keys(model: type[BaseModel]) -> list[str]:
    """The keys a model reads in groove.toml: each field's alias, else its name."""
    return [info.alias or name for name, info in model.model_fields.items()]


def _core_keys(table: str) -> set[str]:
    """The keys the core defines in its table ``table``."""
    model: type[BaseModel] | None = GrooveConfig
    for part in [p for p in table.split(".") if p]:
        name = _keys(model).get(part) if model is not None else None
        model = _sub_model(model, name) if model is not None and name else None
    return set(_keys(model)) if model is not None else set()


def _dormant(key: str, plugins: set[str]) -> bool:
    """A ``[plugin.NAME]`` table of a known plugin that did not load (disabled)."""
    return key.startswith("plugin.") and key.removeprefix("plugin.") in plugins


def _known_keys(sections: Sequence[ConfigSection], plugins: set[str]) -> set[str]:
    """Every table and dotted key groove.toml may hold here: the core's, the enabled
    plugins' sections', and ``plugin.NAME`` of each known plugin."""
    tables = set(core_tables()) | {s.path for s in sections if s.path}
    tables |= {f"plugin.{name}" for name in plugins}
    keys = {f"{t}.{k}" if t else k for t in core_tables() for k in _core_keys(t)}
    for section in sections:
        prefix = f"{section.path}." if section.path else ""
        keys |= {prefix + k for k in _keys(section.model)}
    return (tables | keys) - {""}


def _did_you_mean(key: str, known: set[str]) -> str:
    """`` (did you mean 'search.fusion.weights'?)`` for a key one typo away from a known one."""
    import difflib

    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.8)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _unclaimed_problem(key: str, value: Any) -> str:
    if key.startswith("plugin."):
        return f"  [{key}]: no plugin named {key.removeprefix('plugin.')!r} is installed"
    if isinstance(value, dict):
        return f"  [{key}]: no enabled plugin provides this section"
    return f"  unknown key '{key}': neither groove nor an enabled plugin defines it"


def _lookup(node: Any, parts: Sequence[str], dotted: str) -> Any:
    for part in parts:
        if not isinstance(node, BaseModel) or part not in _keys(type(node)):
            raise KeyError(dotted)
        node = getattr(node, _keys(type(node))[part])
    return node


def validation_problems(err: ValidationError, table: str = "") -> list[str]:
    """Each problem ``err`` found, as ``key: what is wrong (got value)``, keys from ``table``.

    Built from the items, never from ``str(err)``, whose text sends users to pydantic's
    web site ("For further information visit ..."); a validator's own message is given
    without pydantic's "Value error, " in front of it.
    """
    problems = []
    for item in err.errors(include_url=False):
        key = ".".join([*([table] if table else []), *(str(p) for p in item["loc"])])
        key = key or "(top level)"
        if item["type"] == "extra_forbidden":
            problems.append(f"unknown key '{key}'")
            continue
        cause = item.get("ctx", {}).get("error") if item["type"] == "value_error" else None
        message = str(cause) if cause is not None else item["msg"]
        problems.append(f"{key}: {message} (got {item.get('input')!r})")
    return problems


def _format_error(err: ValidationError, header: str) -> str:
    """One line per problem under ``header``."""
    return "\n".join([header, *(f"  {problem}" for problem in validation_problems(err))])


def parse_config(data: dict[str, Any], source: str = "<config>") -> GrooveConfig:
    """Validate the core's keys of a mapping read as groove.toml (errors name the key and
    the source) and keep every other key in ``unclaimed``, for the plugins to validate."""
    known, unclaimed = _split(data, GrooveConfig)
    wrong = not_booleans(GrooveConfig, known)
    if wrong:
        header = f"invalid configuration in {source}:"
        raise ConfigError("\n".join([header, *(f"  {problem}" for problem in wrong)]))
    try:
        return GrooveConfig.model_validate({**known, "source": source, "unclaimed": unclaimed})
    except ValidationError as err:
        raise ConfigError(_format_error(err, f"invalid configuration in {source}:")) from None


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
