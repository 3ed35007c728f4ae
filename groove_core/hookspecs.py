# mypy: disable-error-code="empty-body"
"""The stage contract: every hook a groove plugin can implement.

Two kinds of hook:

* **Contribution hooks** return all results: candidate legs (the core fuses every leg with
  RRF), pool-size requests, embedders, file loaders, per-query search options, config
  sections, CLI commands and MCP tools.
* **Stage hooks** are ``firstresult`` and return ``None`` to pass: rerank, diversify,
  expand, highlight. The identity default lives in the caller, so a disabled stage is simply
  not registered and the output is bit-identical by construction. Two enabled plugins
  implementing the same stage hook is a configuration error (see ``plugins.py``).

Stage hooks receive hits and return a *new* list; they never mutate their input.
The built-in legs (trigram FTS, word, vector), match_spans highlighter, embedders and the
Markdown loader are plugins registered through these same hooks (``groove_core.builtins``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    import click

    from groove_core.backend import BackendSpec
    from groove_core.config import ConfigSection
    from groove_core.context import LegSpec, QueryContext, SearchOption, StageSwitch
    from groove_core.embedding import EmbedderSpec
    from groove_core.leg_index import LegIndexImpl
    from groove_core.loaders import LoaderSpec
    from groove_core.models import SearchHit
    from groove_core.tool_app import ToolApp

PROJECT = "groove"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

#: The stage hooks at most one enabled plugin may implement.
STAGE_HOOKS = ("groove_rerank", "groove_diversify", "groove_expand", "groove_highlight")


@hookspec
def groove_embedders() -> list[EmbedderSpec]:
    """Embedders this plugin provides, by name (``[embedder] name = ...`` picks one).

    Return specs whose factories are cheap to call and load their model lazily: the spec
    list is collected on every start, including ``groove --help``.
    """


@hookspec
def groove_storage_backends() -> list[BackendSpec]:
    """Storage backends this plugin provides, by name (``[store] backend = ...`` picks one).

    Factories must be cheap until used: the spec list is collected on every start. The
    built-in ``sqlite`` backend is provided this way too (see groove_core.backend for the
    contract).
    """


@hookspec
def groove_loaders() -> list[LoaderSpec]:
    """File loaders this plugin provides: each claims file types (name endings, optionally
    confirmed by the file's first bytes) and turns a file's bytes into Markdown text plus
    anchors back to the source (``page=12``). See :mod:`groove_core.loaders`.

    The built-in ``markdown`` loader is provided this way too. Where two loaders claim a
    file, the first in plugin order whose ``sniff`` accepts it reads it. A loader raises
    :class:`groove_core.loaders.LoadError` with a one-line reason for a file it cannot read
    (encrypted, damaged, over its caps); the file is then skipped with that reason, never
    the run. Load lazily: the spec list is collected on every start.
    """


@hookspec
def groove_config_sections() -> list[ConfigSection]:
    """Keys of groove.toml this plugin owns, each at its path with its pydantic model: the
    one way a plugin declares settings.

    A table of its own (``ConfigSection("plugin.<name>", Settings)``,
    ``ConfigSection("search.dedupe", DedupeSettings)``) or keys added to one of the core's
    tables (``ConfigSection("", Keys)`` for top-level keys). The core validates them when
    the plugin loads; stages, embedder factories and tools read them with
    ``settings.get(DedupeSettings)``. A key no enabled plugin claims is an error.
    """


@hookspec
def groove_stage_switches() -> list[StageSwitch]:
    """The on/off switch of each optional stage this plugin provides.

    The core turns each into a per-query option, decides ``ctx.active_stages`` from the
    option or the configured default before sizing the pool, and uses the same switches
    for ``eval --ablate`` and ``groove plugins list``.
    """


@hookspec
def groove_search_options() -> list[SearchOption]:
    """Per-query switches this plugin adds to ``groove search`` and the MCP ``search`` tool.

    Each option becomes a CLI flag (``--name/--no-name`` for booleans) and a typed MCP tool
    parameter; the value a user gives arrives in ``ctx.options[name]`` (absent when not
    given, so the plugin falls back to its config). ``SearchOption.choices`` restricts what an
    MCP client may give (e.g. to the models groove.toml lists); the CLI is not restricted.
    """


@hookspec
def groove_legs() -> list[LegSpec]:
    """Candidate legs this plugin provides, each a :class:`LegSpec` (name, kind, search).

    Every leg's list is fused by the core with Reciprocal Rank Fusion, weighed by the rules
    of its kind (lexical, vector, other). Respect ``ctx.filters`` inside the leg (so that
    ``limit`` results still come back) and ``ctx.excluded_ids()`` for exclusions; the
    search returns ``None`` when the leg does not apply. The spec list is collected once
    per plugin set. A leg that keeps postings of its own declares ``LegSpec.index``
    (``groove_core.leg_index``, docs/plugins.md "A leg with its own index").
    """


@hookspec
def groove_leg_indexes() -> list[LegIndexImpl]:
    """Implementations of other plugins' leg indexes for a storage backend this plugin
    knows: a backend plugin gives the built-in legs an index in its engine (as
    groove-postgres does). A leg's own ``LegIndexSpec.backends`` entry wins over these.
    """


@hookspec
def groove_pool_size(ctx: QueryContext) -> int | None:
    """How many fused candidates this plugin's stage needs to see, or ``None``.

    The core uses the largest request, and never less than ``ctx.limit``. Only stages that
    are active for this query should ask (``ctx.active(name)``; a diversifier asks for
    ``groove_core.context.wide_pool(ctx.limit)``); ``ctx.active_stages`` tells which others run.
    """


@hookspec(firstresult=True)
def groove_rerank(ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit] | None:
    """Stage 2: return the pool re-scored and re-ordered, or ``None`` to pass.

    The result must be a reordering of ``hits`` (same chunk ids); ``score`` may change to
    the stage's own scale and ``rank`` must be renumbered from 1.
    """


@hookspec(firstresult=True)
def groove_diversify(ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit] | None:
    """Stage 3: choose at most ``ctx.limit`` hits from the pool, or ``None`` to pass."""


@hookspec(firstresult=True)
def groove_expand(ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit] | None:
    """Stage 4: rewrite hits' content (e.g. merge neighbours), or ``None`` to pass.

    Must leave ``score``, ``rank`` and ``path`` untouched and must not reorder; record what
    was merged in ``expanded_from``.
    """


@hookspec(firstresult=True)
def groove_highlight(ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit] | None:
    """Final stage: set ``match_spans`` (UTF-8 byte offsets into the returned content)."""


@hookspec
def groove_cli_commands(cli: click.Group) -> None:
    """Add commands to the ``groove`` CLI group (``cli.add_command(...)``)."""


@hookspec
def groove_mcp_tools(server: Any, app: ToolApp) -> None:
    """Register extra tools on the MCP server (``@server.tool()``) built for ``app``.

    ``app`` is the served knowledge base as tools need it (:class:`ToolApp`: its root,
    config, ``settings``, ``search`` and this thread's ``store``), not the application.
    Synchronous tools run on the server's worker threads, where ``app`` may be used (each
    thread has its own index connection); several may run at once, so a tool keeps any
    state of its own thread-safe. Asynchronous tools must not touch ``app``.
    """
