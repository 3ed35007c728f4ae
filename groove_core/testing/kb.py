"""A temporary knowledge base with a fast deterministic embedder, and a query context on it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from groove_core.app import Groove
from groove_core.context import QueryContext
from groove_core.models import SearchHit

if TYPE_CHECKING:
    from groove_core.plugins import PluginInfo


FAST_CONFIG = '[embedder]\nname = "hashing"\n'
#: Every section a chunk of its own (small ones are merged by default): for checks about
#: chunks and their neighbours on fixtures of one-line sections. Appended to a config.
EVERY_SECTION = "[index]\nmin_section_tokens = 0\n"
#: FAST_CONFIG with EVERY_SECTION.
SECTION_CHUNKS = FAST_CONFIG + EVERY_SECTION

#: A small mixed-language KB for contract checks.
SAMPLE_NOTES: dict[str, str] = {
    "guide/install.md": (
        "---\ntitle: Installing\ntags: [setup]\n---\n# Installing\n\n"
        "Create a virtual environment and install the package.\n\n"
        "## Requirements\n\nPython 3.11 or newer is required.\n"
    ),
    "guide/search.md": (
        "# Searching\n\nQuoted phrases match exactly; a leading minus excludes a word.\n\n"
        "## Ranking\n\nResults from the lexical and vector legs are fused with RRF.\n"
    ),
    "notes/rust.md": (
        "# Rust\n\nAsync runtimes schedule futures.\n\n## Ownership\n\n"
        "Ownership rules prevent data races.\n"
    ),
    "notes/ja.md": (
        "# 再ランキング\n\nクロスエンコーダによる再ランキングの評価について。\n\n"
        "## 検索\n\n全文検索とベクトル検索を組み合わせる。\n"
    ),
}
SAMPLE_QUERIES = ("ranking results", "再ランキングの評価", "rust ownership", "install python")


def make_kb(
    root: Path, files: Mapping[str, str | bytes] | None = None, *, config: str | None = FAST_CONFIG
) -> Path:
    """Write ``files`` (KB-relative path -> text or bytes; default ``SAMPLE_NOTES``) under
    ``root``, plus a groove.toml (``config``; None writes none)."""
    root.mkdir(parents=True, exist_ok=True)
    for rel, body in (SAMPLE_NOTES if files is None else files).items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, bytes):
            target.write_bytes(body)
        else:
            target.write_text(body, encoding="utf-8")
    if config is not None:
        (root / "groove.toml").write_text(config, encoding="utf-8")
    return root


def open_kb(
    kb: Path,
    *,
    extra_plugins: Sequence[tuple[str, object]] = (),
    entry_points: bool = True,
    index: bool = True,
) -> Groove:
    """A :class:`Groove` for ``kb`` with a fresh plugin set (indexed unless ``index=False``)."""
    app = Groove.open(kb, extra_plugins=extra_plugins, entry_points=entry_points)
    if index:
        app.index()
    return app


def installed_plugin(name: str) -> PluginInfo:
    """What groove reports of the plugin ``name`` found through its entry point (its
    distribution, status and hooks), under a default configuration: a plugin's test that
    it is installed and discovered as published."""
    from groove_core.config import parse_config
    from groove_core.plugins import make_plugin_manager

    plugins = make_plugin_manager(parse_config({}))
    return next(i for i in plugins.infos if i.name == name)


def query_context(
    app: Groove, query: str, *, limit: int = 5, options: Mapping[str, Any] | None = None
) -> QueryContext:
    """The context a stage would receive for ``query`` (pool sized by the enabled plugins)."""
    return app.searcher().context(query, limit=limit, options=options)


def candidate_pool(app: Groove, ctx: QueryContext) -> list[SearchHit]:
    """The fused stage-1 hits for ``ctx`` — the input the rerank stage receives."""
    return app.searcher().pool(ctx)
