"""The reranker plugin inside real searches (tiny random cross-encoder, ``hashing``
embedder): activation, pool sizes, the score switch, the budget, the contract, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import structlog
from groove_reranker_bge import plugin as reranker_plugin
from groove_reranker_bge.backends import ModelKey, get_model, loaded_keys

from groove_core.app import Groove
from groove_core.config import ConfigError, parse_config
from groove_core.plugins import make_plugin_manager
from groove_core.query import QueryError
from groove_core.testing import (
    SECTION_CHUNKS,
    check_rerank_stage,
    installed_plugin,
    make_kb,
    open_kb,
)

QUERY = "ranking results"


def _kb(tmp_path: Path, config: str = "") -> Path:
    return make_kb(tmp_path / "kb", config=SECTION_CHUNKS + config)


def _configured(model: Path, *, by_default: bool, extra: str = "") -> str:
    # Top-level keys must precede the first [table] of the TOML file.
    head = f'reranker = "{model}"\nrerank_by_default = {str(by_default).lower()}\n'
    return head + SECTION_CHUNKS + extra


def _app(tmp_path: Path, config: str) -> Groove:
    return open_kb(make_kb(tmp_path / "kb", config=config))


def _search(app: Groove, limit: int = 3, **options: Any) -> tuple[list[tuple[int, float]], int]:
    response, _, ctx = app.search_explained(QUERY, limit=limit, options=options)
    return [(h.chunk_id, h.score) for h in response.results], ctx.pool_size


def _baseline(app: Groove, tmp_path: Path, limit: int) -> list[tuple[int, float]]:
    """The same KB searched by the core alone (no plugins, no reranker configured)."""
    plain_config = tmp_path / "plain.toml"
    plain_config.write_text(SECTION_CHUNKS, encoding="utf-8")
    core = Groove.open(app.kb, plain_config, entry_points=False)
    return [(h.chunk_id, h.score) for h in core.search(QUERY, limit=limit).results]


def _raw_scores(model: Path, app: Groove, query: str, chunk_ids: list[int]) -> list[float]:
    """What the model itself says for the passages, outside the pipeline."""
    pool = app.search(query, limit=50).results
    by_id = {h.chunk_id: h for h in pool}
    key = ModelKey(str(model), "sentence-transformers", max_length=512)
    pairs = [(query, reranker_plugin.passage_text(by_id[c])) for c in chunk_ids]
    return get_model(key).score(pairs)


def test_the_plugin_is_discovered_through_its_entry_point() -> None:
    info = installed_plugin("reranker")
    assert (info.distribution, info.status) == ("groove-reranker-bge", "enabled")
    assert info.hooks == (
        "groove_config_sections",
        "groove_pool_size",
        "groove_rerank",
        "groove_search_options",
        "groove_stage_switches",
    )


def test_the_reranker_meets_the_core_contract(tmp_path: Path, tiny_model: Path) -> None:
    app = _app(tmp_path, _configured(tiny_model, by_default=True))
    check_rerank_stage(reranker_plugin, app)


def test_without_a_model_nothing_changes(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    with_plugin = open_kb(kb)
    without = Groove.open(kb, entry_points=False)
    response, _, ctx = with_plugin.search_explained(QUERY, limit=3)
    assert ctx.pool_size == 3
    assert response == without.search(QUERY, limit=3)


def test_a_configured_model_obeys_rerank_by_default(tmp_path: Path, tiny_model: Path) -> None:
    off = _app(tmp_path / "off", _configured(tiny_model, by_default=False))
    on = _app(tmp_path / "on", _configured(tiny_model, by_default=True))
    plain = _baseline(off, tmp_path, limit=3)
    assert _search(off) == (plain, 3)  # configured, not by default: a pass-through
    reranked, pool = _search(on)
    assert pool == 15 and reranked != plain
    assert _search(off, rerank=True) == (reranked, 15)
    assert _search(on, rerank=False) == (plain, 3)


def test_a_model_named_for_the_query_applies_unconditionally(
    tmp_path: Path, tiny_model: Path
) -> None:
    unconfigured = _app(tmp_path / "a", SECTION_CHUNKS)
    configured_off = _app(tmp_path / "b", _configured(tiny_model, by_default=False))
    named = _search(unconfigured, reranker=str(tiny_model))
    assert named[1] == 15
    assert _search(configured_off, reranker=str(tiny_model)) == named
    assert _search(configured_off, reranker=str(tiny_model), rerank=True) == named


def test_score_is_the_models_raw_score_best_first(tmp_path: Path, tiny_model: Path) -> None:
    app = _app(tmp_path, SECTION_CHUNKS)
    hits, _ = _search(app, limit=8, reranker=str(tiny_model))
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True)
    raw = _raw_scores(tiny_model, app, QUERY, [c for c, _ in hits])
    assert scores == pytest.approx(raw, abs=1e-5)
    assert any(not 0.0 < s < 1.0 for s in scores)  # logits, not sigmoid probabilities


def test_reranking_is_deterministic_and_reorders_the_rrf_pool(
    tmp_path: Path, tiny_model: Path
) -> None:
    app = _app(tmp_path, SECTION_CHUNKS)
    first, _ = _search(app, limit=8, reranker=str(tiny_model))
    assert _search(app, limit=8, reranker=str(tiny_model))[0] == first
    rrf = [h.chunk_id for h in app.search(QUERY, limit=8).results]
    assert sorted(c for c, _ in first) == sorted(rrf)
    assert [c for c, _ in first] != rrf  # the guard: a pass-through would fail here


@pytest.mark.parametrize(
    ("config", "options", "limit", "expected"),
    [
        ("", {}, 3, 15),  # the reranker alone: limit × 5
        ("", {"mmr": True}, 3, 50),  # with MMR: limit × 5, at least 50
        ("", {"mmr": True}, 20, 100),
        ("", {"parent": True}, 3, 3),  # with only the parent retriever: limit
        ("", {"parent": True, "mmr": True}, 3, 50),
        ("[search.mmr]\nenabled = true\n", {}, 3, 50),  # MMR on from the config
        ("[search.mmr]\nenabled = true\n", {"mmr": False}, 3, 15),
        ("[search.parent_retriever]\nenabled = true\n", {}, 4, 4),
        # A blocked plugin's stage does not run, whatever the query asks.
        ('[plugins]\ndisabled = ["mmr"]\n', {"mmr": True}, 3, 15),
        ('[plugins]\ndisabled = ["parent"]\n', {"parent": True}, 3, 15),
    ],
)
def test_pool_sizes_follow_the_other_stages(
    tmp_path: Path,
    tiny_model: Path,
    config: str,
    options: dict[str, Any],
    limit: int,
    expected: int,
) -> None:
    app = _app(tmp_path, SECTION_CHUNKS + config)
    _, pool = _search(app, limit=limit, reranker=str(tiny_model), **options)
    assert pool == expected


def test_a_budget_scores_a_prefix_and_keeps_the_rest_in_rrf_order(
    tmp_path: Path, tiny_model: Path
) -> None:
    # A budget no forward pass can meet: one candidate is scored to measure the cost, then
    # nothing more fits. Later queries know the cost and score nothing.
    app = _app(
        tmp_path,
        SECTION_CHUNKS + "[plugin.reranker]\nrerank_budget_ms = 0.001\nbatch_size = 4\n",
    )
    get_model(ModelKey(str(tiny_model), "sentence-transformers", 512)).ms_per_pair = None
    rrf = app.search(QUERY, limit=8).results
    with structlog.testing.capture_logs() as logs:
        hits, _ = _search(app, limit=8, reranker=str(tiny_model))
    raw = _raw_scores(tiny_model, app, QUERY, [rrf[0].chunk_id])[0]
    assert hits[0] == (rrf[0].chunk_id, pytest.approx(raw, abs=1e-5))
    assert hits[1:] == [(h.chunk_id, hits[0][1]) for h in rrf[1:]]  # RRF order, at the floor
    assert [e["event"] for e in logs] == ["reranker_budget_exceeded"]
    assert (logs[0]["scored"], logs[0]["candidates"]) == (1, len(rrf))
    assert "rerank_budget_ms" in logs[0]["message"]
    flagged = app.search(QUERY, limit=8, options={"reranker": str(tiny_model)})
    assert any("rerank_budget_ms" in w for w in flagged.to_json()["warnings"])

    again, _ = _search(app, limit=8, reranker=str(tiny_model))
    assert again == [(h.chunk_id, h.score) for h in rrf]


def test_settings_reach_the_loaded_model(tmp_path: Path, tiny_model: Path) -> None:
    name = str(tiny_model)
    app = _app(
        tmp_path,
        SECTION_CHUNKS + f'[plugin.reranker]\nmax_length = 64\ntrust_remote_code = ["{name}"]\n',
    )
    _search(app, reranker=name)
    assert loaded_keys()[-1] == ModelKey(name, "sentence-transformers", 64, "cpu", True)
    other = _app(tmp_path / "other", SECTION_CHUNKS + "[plugin.reranker]\nmax_length = 64\n")
    _search(other, reranker=name)  # trust is granted by name only
    assert loaded_keys()[-1] == ModelKey(name, "sentence-transformers", 64, "cpu", False)


@pytest.mark.parametrize(
    ("section", "named"),
    [
        ('backend = "onnx"', "backend"),
        ("batch_size = 0", "batch_size"),
        ("rerank_budget_ms = -5", "rerank_budget_ms"),
        ('device = "gpu"', "device"),
        ("max_lenght = 256", "max_lenght"),
    ],
)
def test_bad_plugin_settings_are_config_errors_naming_the_key(
    tmp_path: Path, section: str, named: str
) -> None:
    kb = _kb(tmp_path, f"[plugin.reranker]\n{section}\n")
    with pytest.raises(ConfigError, match=rf"\[plugin\.reranker\].*{named}"):
        Groove.open(kb)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"rerank": True}, "option 'rerank' needs a model"),
        ({"rerank": "yes"}, "option 'rerank' must be true or false"),
        ({"reranker": "  "}, "option 'reranker' must be a model name or path"),
        ({"reranker": "m", "rerank": False}, "give one or the other"),
    ],
)
def test_contradictory_or_bad_options_are_query_errors(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    app = open_kb(_kb(tmp_path))
    with pytest.raises(QueryError, match=message):
        _search(app, **options)


def test_a_missing_local_model_is_one_clear_error(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path))
    with pytest.raises(ConfigError, match=r"reranker model directory '\./no-such-model' does not"):
        _search(app, reranker="./no-such-model")
    not_a_model = tmp_path / "empty"
    not_a_model.mkdir()
    with pytest.raises(ConfigError, match="must hold a cross-encoder") as err:
        _search(app, reranker=str(not_a_model))
    assert str(not_a_model) in str(err.value) and "\n" not in str(err.value)


def test_the_model_is_loaded_once_and_reused(tmp_path: Path, tiny_model: Path) -> None:
    app = _app(tmp_path, SECTION_CHUNKS)
    _search(app, reranker=str(tiny_model))
    key = loaded_keys()[-1]
    model = get_model(key)
    _search(app, reranker=str(tiny_model))
    _search(_app(tmp_path / "other", SECTION_CHUNKS), reranker=str(tiny_model))
    assert get_model(key) is model and loaded_keys().count(key) == 1


def test_the_cli_reranks_with_a_named_model(tmp_path: Path, tiny_model: Path) -> None:
    from click.testing import CliRunner

    from groove_core.cli import build_cli

    kb = _kb(tmp_path)
    app = open_kb(kb)
    cli = build_cli(make_plugin_manager(parse_config({}), validate=False))
    help_text = CliRunner().invoke(cli, ["search", "--help"]).output
    assert "--reranker TEXT" in help_text and "--rerank / --no-rerank" in help_text
    argv = ["search", QUERY, "--kb", str(kb), "--limit", "3", "--json"]
    result = CliRunner().invoke(cli, [*argv, "--reranker", str(tiny_model)])
    assert result.exit_code == 0, result.output
    got = [(h["chunk_id"], h["score"]) for h in json.loads(result.stdout)["results"]]
    assert got == _search(app, reranker=str(tiny_model))[0]

    bad = CliRunner().invoke(cli, [*argv, "--reranker", str(tmp_path / "missing")])
    assert bad.exit_code == 1
    assert (
        bad.output.strip()
        == f"groove: reranker model directory '{tmp_path}/missing' does not exist"
    )
