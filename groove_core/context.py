"""The one frozen object every stage of a query receives."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from groove_core.models import SCORE_SCALES

if TYPE_CHECKING:
    import numpy as np
    import structlog

    from groove_core.config import GrooveConfig, Settings
    from groove_core.embedding import Embedder
    from groove_core.leg_index import LegIndexSpec
    from groove_core.models import LegKind, LegResult, ScoreScale, SearchFilters
    from groove_core.query import ParsedQuery
    from groove_core.storage import SearchStore


#: The pool a stage that chooses among more candidates than it returns asks for:
#: ``limit × POOL_FACTOR``, at least ``MIN_POOL`` (docs/retrieval-pipeline.md, "Pool size").
POOL_FACTOR = 5
MIN_POOL = 50


def wide_pool(limit: int) -> int:
    """``max(limit × POOL_FACTOR, MIN_POOL)``: the pool a diversifying stage chooses from."""
    return max(limit * POOL_FACTOR, MIN_POOL)


@dataclass(frozen=True)
class SearchOption:
    """A per-query switch a plugin adds to the CLI and the MCP ``search`` tool."""

    name: str  # snake_case; CLI flag --name (dashes), MCP parameter name
    type: Literal["bool", "str", "int", "float"]
    help: str
    plugin: str = ""
    # The values a remote caller (an MCP client) may give, read from the configuration; None
    # lets it give any value of the type. The CLI is not restricted: the user at the terminal
    # is the one who writes groove.toml anyway. E.g. a model name, so that an agent can pick
    # among the configured models but never make the server load (or download) another.
    choices: Callable[[Settings], Sequence[str]] | None = None
    #: A stage switch's groove.toml key (the default when a query does not give the
    #: option): the CLI's help names it, the MCP schema says whether it is on.
    setting: str | None = None
    #: A key that must be set for the option to do anything (a stage switch's
    #: ``requires``): while it is unset, MCP does not offer the option.
    requires: str | None = None
    #: The option as the MCP schema shows it to an agent, when ``help`` (the CLI's) speaks
    #: of things only the user at the terminal has: local folders, groove.toml.
    agent_help: str | None = None


@dataclass(frozen=True)
class StageSwitch:
    """An optional stage's on/off switch (returned by ``groove_stage_switches``).

    Declared once, it is a per-query option (``--name/--no-name``, a boolean MCP
    parameter), falls back to the groove.toml key ``setting`` when a query does not give
    it, and decides :attr:`QueryContext.active_stages` before the pool is sized, so that
    every stage's pool rule reads the same answer. ``eval --ablate`` measures the stage on
    and off and ``groove plugins list`` says when it is off by default.
    """

    name: str  # the option's name, and the stage's name in ``ctx.active_stages``
    setting: str  # dotted key of a boolean in groove.toml: "search.dedupe.enabled"
    help: str
    #: A dotted key that must be set (not None) for the stage to run at all, e.g. the
    #: model a stage needs; ``eval --ablate`` skips the stage while it is unset.
    requires: str | None = None
    #: Decides activity where the plain rule (the option, else ``setting``) is not enough,
    #: e.g. another option that turns the stage on; raises QueryError for bad combinations.
    decide: Callable[[QueryContext], bool] | None = None
    plugin: str = ""  # set by the core: the plugin that declared it


#: The exclusion scan a lexical leg may offer (``LegSpec.excludes``): every chunk id that
#: holds any of the phrases, matched as the leg matches them.
ExclusionScan = Callable[["SearchStore", Sequence[str]], frozenset[int]]


@dataclass(frozen=True)
class Lexicon:
    """How a lexical leg counts the words of a text and of its index (``LegSpec.lexicon``).

    The core's rules that weigh a query by its words read the lexicon of the leg that
    reports terms: the coverage rule's IDF (``groove_core.weighting``) and the query
    compiler's phrase rarity (a query with more phrases than the cap keeps the rarest).
    """

    #: A text's terms as the leg indexes them (the text NFKC-normalised by the caller).
    tokens: Callable[[str], list[str]]
    #: (chunks containing each single term, chunks in all) from the leg's index; terms with
    #: a space (phrases) are left out of the dict. Called per query: cache in the index.
    rows: Callable[[SearchStore, Sequence[str]], tuple[dict[str, int], int]]
    #: A term's inverse document frequency from its chunk count and the total.
    idf: Callable[[int, int], float]


@dataclass(frozen=True)
class LegSpec:
    """A candidate leg (returned by ``groove_legs``): its name, what it is, and its search.

    ``search(ctx)`` returns up to ``ctx.leg_size`` chunk ids, best first, unique, or None
    when the leg does not apply to the query; the core names the result after the spec
    and stamps its ``kind``. The name is the leg's everywhere: ``[search.fusion.weights]``,
    ``--explain``, a hit's ``legs``. The kind (:data:`~groove_core.models.LegKind`) is all
    the core's rules know of a leg, so a plugin's leg is weighed, explained, ablated and
    counted in ``low_confidence`` as a built-in one of its kind.
    """

    name: str
    kind: LegKind
    search: Callable[[QueryContext], LegResult | None]
    #: A lexical leg whose results carry the query's terms in ``meta["terms"]`` says so
    #: here: the coverage rule reads those terms, and ``groove tune`` sweeps this leg's
    #: weight (its ``word`` knob).
    reports_terms: bool = False
    #: The leg's RRF weight when ``[search.fusion.weights]`` does not name it: a leg that
    #: is the main ranking of its kind may count for more than one that echoes it.
    weight: float = 1.0
    #: What ``raw_score`` is, for the score-based fusion (:data:`~groove_core.models.ScoreScale`);
    #: None: ``distance`` for a vector leg (its kind's contract), ``rank`` for any other.
    score: ScoreScale | None = None
    #: The leg's own index (groove_core.leg_index): written with every document, reached
    #: at query time as ``ctx.store.leg_index(index.name)``.
    index: LegIndexSpec | None = None
    #: The exclusion scan: the query's ``-phrase`` exclusions drop, from every leg, the
    #: chunks the first leg declaring this finds (ADR-0011).
    excludes: ExclusionScan | None = None
    #: How the leg counts words (:class:`Lexicon`); read with ``reports_terms``.
    lexicon: Lexicon | None = None
    #: A lexical leg that matches across scripts by design (a translating leg: an English
    #: query's words looked up in Japanese notes): the cross-script rule neither reads its
    #: hits for the script of the matches nor multiplies it by ``cross_script_lexical``
    #: (groove_core.weighting). Only a ``lexical`` leg may declare it.
    bridges_scripts: bool = False
    plugin: str = ""  # set by the core: the plugin that declared it

    def __post_init__(self) -> None:
        # a typo ("cosine") would be read as another scale, silently
        if self.score is not None and self.score not in SCORE_SCALES:
            raise ValueError(
                f"LegSpec {self.name!r}: score must be one of {', '.join(SCORE_SCALES)} or "
                f"None, not {self.score!r}"
            )
        if self.bridges_scripts and self.kind != "lexical":
            raise ValueError(
                f"LegSpec {self.name!r}: bridges_scripts is read on a lexical leg only, not "
                f"on a {self.kind!r} one"
            )

    @property
    def scale(self) -> ScoreScale:
        """The scale the score-based fusion reads this leg's ``raw_score`` on."""
        if self.score is not None:
            return self.score
        return "distance" if self.kind == "vector" else "rank"


@dataclass(frozen=True)
class QueryContext:
    """Everything a stage may read about the query being run. Never mutated, except
    through :meth:`note`, the one channel from stages back to the response."""

    query: ParsedQuery
    limit: int
    leg_size: int
    filters: SearchFilters
    store: SearchStore  # the index, read-only (groove_core.storage)
    config: GrooveConfig
    embedder: Embedder
    options: Mapping[str, Any]
    log: structlog.typing.FilteringBoundLogger
    settings: Settings
    #: The optional stages that run for this query (see :class:`StageSwitch`).
    active_stages: frozenset[str] = frozenset()
    pool_size: int = 0
    # Response-level notes stages add (e.g. "reranked only the first 12 of 50 candidates
    # within the time budget"); they reach the response's ``warnings``.
    notes: list[str] = field(default_factory=list, compare=False)
    # Lazily computed, shared by the legs and stages (the vector leg, a diversifier).
    _query_vector: Callable[[], np.ndarray] | None = None
    #: Each leg's :class:`Lexicon`, by leg name (the legs that declare one).
    lexicons: Mapping[str, Lexicon] = field(default_factory=dict)
    #: The exclusion scan of the first leg that declares one (``LegSpec.excludes``).
    exclusion: ExclusionScan | None = None
    # Values computed once per query and shared by the stages that ask (:meth:`shared`).
    _shared: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def note(self, message: str) -> None:
        """Tell the user something about this query's results (shown with the results)."""
        self.notes.append(message)

    def flag(self, name: str) -> bool | None:
        """The per-query boolean option ``name`` (see ``groove_search_options``), or None
        when the caller did not give it, so the stage falls back to its config.

        Raises QueryError for a value that is not true/false (an MCP client can send any
        JSON), so every stage rejects bad switches with the same message.
        """
        from groove_core.query import OptionError

        given = self.options.get(name)
        if given is not None and not isinstance(given, bool):
            raise OptionError(f"option {name!r} must be true or false, got {given!r}")
        return given

    def active(self, stage: str) -> bool:
        """Whether the optional stage ``stage`` (a :class:`StageSwitch` name) runs."""
        return stage in self.active_stages

    def query_vector(self) -> np.ndarray:
        """The embedding of ``query.embed_text`` (computed once per query)."""
        assert self._query_vector is not None
        return self._query_vector()

    def shared(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()``, run once per query for every stage asking with the same ``key``
        (a leg's terms, read by the legs and stages that agree with it). Prefix the key
        with the plugin's name; the value is shared, not to be modified."""
        if key not in self._shared:
            self._shared[key] = compute()
        return self._shared[key]

    @functools.cached_property
    def _excluded(self) -> frozenset[int]:
        negatives = self.query.negatives
        if not negatives:
            return frozenset()
        if self.exclusion is None:
            self.note(
                "the query's exclusions were not applied: no enabled lexical leg can find "
                "the chunks holding a phrase"
            )
            return frozenset()
        return self.exclusion(self.store, negatives)

    @functools.cached_property
    def _allowed(self) -> frozenset[int] | None:
        return allowed_chunk_ids(self.store, self.filters)

    def allowed_ids(self) -> frozenset[int] | None:
        """Chunk ids the filters allow, or None without filters (computed once per query)."""
        return self._allowed

    def excluded_ids(self) -> frozenset[int]:
        """Chunk ids the query's exclusions match, by the exclusion scan of the first leg
        that declares one (empty without exclusions).

        Run at most once per query, and only when there are negatives (ADR-0011).
        """
        return self._excluded


def allowed_chunk_ids(store: SearchStore, filters: SearchFilters) -> frozenset[int] | None:
    """Chunk ids passing every filter, or None when no filter is active."""
    from groove_core.filters import compile_glob

    if not filters.active:
        return None
    doc_ids: frozenset[int] | None = None
    if filters.path is not None:
        glob = compile_glob(filters.path)  # a malformed glob fails even on an empty index
        doc_ids = frozenset(d.doc_id for d in store.documents() if glob.matches(d.path))
    if filters.tags:
        # "#scratch" as Obsidian writes it in a note names the tag "scratch"
        tagged = store.doc_ids_with_tags([t.removeprefix("#") for t in filters.tags])
        doc_ids = tagged if doc_ids is None else doc_ids & tagged
    return store.chunk_ids_for_docs(doc_ids or ())
