"""The mmr plugin inside a real search: activation, pool size, diversity, knobs, CLI."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import structlog
from click.testing import CliRunner, Result

from groove_core.app import Groove
from groove_core.cli import build_cli
from groove_core.config import parse_config
from groove_core.plugins import make_plugin_manager
from groove_core.query import QueryError
from groove_core.testing import SECTION_CHUNKS, installed_plugin, make_kb, open_kb

QUERY = "cache invalidation"

# One document of four near-identical sections floods the top of a plain search; two other
# documents are about the same topic in other words.
FILES = {
    "cache.md": "# Cache\n\n"
    + "\n\n".join(
        f"## Part {i}\n\nCache invalidation strategy for the web tier, variant {i}."
        for i in range(4)
    )
    + "\n",
    "ttl.md": "# Expiry\n\nA time to live bounds how stale a cached page can become before "
    "invalidation.\n",
    "cdn.md": "# CDN\n\nEdge servers purge objects on deploy; cache keys include the asset hash.\n",
    "misc.md": "# Gardening\n\nTomatoes need sun and water every day.\n",
}


def _kb(tmp_path: Path, mmr: str = "") -> Path:
    config = SECTION_CHUNKS + (f"[search.mmr]\n{mmr}\n" if mmr else "")
    return make_kb(tmp_path / "kb", FILES, config=config)


def _search(app: Groove, limit: int = 3, **options: object) -> tuple[list[str], int]:
    response, _, ctx = app.search_explained(QUERY, limit=limit, options=options)
    return [h.path for h in response.results], ctx.pool_size


def test_the_plugin_is_discovered_through_its_entry_point() -> None:
    info = installed_plugin("mmr")
    assert (info.distribution, info.status) == ("groove-mmr", "enabled")
    assert info.hooks == (
        "groove_config_sections",
        "groove_diversify",
        "groove_pool_size",
        "groove_stage_switches",
    )
    assert (info.stages, info.off_by_default) == (("mmr",), True)


def test_inactive_mmr_requests_no_pool_and_changes_nothing(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    app = open_kb(kb)
    without = Groove.open(kb, entry_points=False)
    response, _, ctx = app.search_explained(QUERY, limit=3)
    assert ctx.pool_size == 3
    assert response == without.search(QUERY, limit=3)


def test_mmr_brings_other_documents_into_a_flooded_top_k(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path))
    plain, _ = _search(app)
    diverse, _ = _search(app, mmr=True)
    assert plain == ["cache.md"] * 3
    assert diverse[0] == "cache.md"
    # the nearest other document comes in second; cdn.md, which shares one word of the
    # query, stays below a third cache section as the fused scores rank it (ADR-0019)
    assert diverse[:2] == ["cache.md", "ttl.md"]


def test_mmr_keeps_scores_renumbers_ranks_and_picks_from_the_pool(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path))
    pool = {h.chunk_id: h.score for h in app.search(QUERY, limit=50).results}
    hits = app.search(QUERY, limit=3, options={"mmr": True}).results
    assert [h.rank for h in hits] == [1, 2, 3]
    assert all(pool[h.chunk_id] == h.score for h in hits)


def test_pool_widens_to_five_times_the_limit_and_at_least_fifty(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path))
    assert _search(app, limit=3, mmr=True)[1] == 50
    assert _search(app, limit=20, mmr=True)[1] == 100


def test_the_per_query_option_overrides_the_config_both_ways(tmp_path: Path) -> None:
    on = open_kb(_kb(tmp_path / "on", "enabled = true"))
    off = open_kb(_kb(tmp_path / "off"))
    assert _search(on) == _search(off, mmr=True)
    assert _search(on, mmr=False) == _search(off)
    assert _search(on)[1] == 50 and _search(on, mmr=False)[1] == 3


def test_same_doc_penalty_from_the_config_spreads_documents(tmp_path: Path) -> None:
    # λ = 1: similarity plays no part, so only the penalty can move a document down.
    strict = open_kb(_kb(tmp_path / "a", "enabled = true\nlambda = 1.0\nsame_doc_penalty = 2.0"))
    loose = open_kb(_kb(tmp_path / "b", "enabled = true\nlambda = 1.0"))
    assert _search(loose)[0] == ["cache.md"] * 3
    assert len(set(_search(strict)[0])) == 3


def test_lambda_one_warns_that_mmr_is_off_but_slower(tmp_path: Path) -> None:
    footgun = open_kb(_kb(tmp_path / "a", "enabled = true\nlambda = 1.0"))
    normal = open_kb(_kb(tmp_path / "b", "enabled = true"))
    with structlog.testing.capture_logs() as logs:
        _search(footgun)
    assert [e["event"] for e in logs] == ["mmr_lambda_is_one"]
    assert logs[0]["log_level"] == "warning" and "enabled = false" in logs[0]["message"]
    with structlog.testing.capture_logs() as logs:
        _search(normal)
        _search(footgun, mmr=False)  # switched off for the query: nothing to warn about
    assert logs == []


def test_similarity_comes_from_stored_vectors_not_re_embedding(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path))
    expected = _search(app, mmr=True)
    embedded: list[str] = []
    real = app.embedder.embed_documents

    def spy(texts: Sequence[str]) -> np.ndarray:
        embedded.extend(texts)
        return real(texts)

    app.embedder.embed_documents = spy  # type: ignore[method-assign]
    assert _search(app, mmr=True) == expected
    assert embedded == [QUERY]  # the query once; no chunk text


def test_a_non_boolean_option_is_a_clear_query_error(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path))
    with pytest.raises(QueryError, match="option 'mmr' must be true or false, got 'yes'"):
        _search(app, mmr="yes")


def _cli(kb: Path, *args: str) -> Result:
    plugins = make_plugin_manager(parse_config({}), validate=False)
    return CliRunner().invoke(build_cli(plugins), [*args, "--kb", str(kb)])


def test_cli_flags_switch_mmr_per_query(tmp_path: Path) -> None:
    kb = _kb(tmp_path, "enabled = true")
    open_kb(kb)
    assert "--mmr / --no-mmr" in _cli(kb, "search", "--help").output
    runs = {}
    for flag in ("--mmr", "--no-mmr"):
        result = _cli(kb, "search", QUERY, "--limit", "3", "--json", flag)
        assert result.exit_code == 0, result.output
        runs[flag] = [h["path"] for h in json.loads(result.output)["results"]]
    assert runs["--no-mmr"] == ["cache.md"] * 3
    assert runs["--mmr"][:2] == ["cache.md", "ttl.md"]


def test_enabling_mmr_while_the_plugin_is_disabled_names_the_package(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    (kb / "groove.toml").write_text(
        SECTION_CHUNKS + '[plugins]\ndisabled = ["mmr"]\n[search.mmr]\nenabled = true\n'
    )
    result = _cli(kb, "search", QUERY)
    assert result.exit_code == 1
    assert "[search.mmr]: no enabled plugin provides this section" in result.output
    assert "[plugins] disabled keeps mmr (groove-mmr) from loading" in result.output
    assert "Traceback" not in result.output
