from __future__ import annotations

from pathlib import Path

import pytest

from groove_core.config import ConfigError, GrooveConfig, index_path, load_config
from groove_core.plugins import make_plugin_manager


def _settings(config: GrooveConfig):  # type: ignore[no-untyped-def]
    """The configuration as groove validates it: the core's keys, then the plugins'."""
    return make_plugin_manager(config).settings


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "groove.toml").write_text(text, encoding="utf-8")
    return tmp_path


def test_defaults_match_the_seed() -> None:
    c = GrooveConfig()
    f = c.search.fusion
    assert (f.rrf_k, f.heading, f.context, f.content) == (60.0, 2.0, 1.0, 1.0)
    assert c.embedder.name == "use-multilingual"
    # The seed's stage defaults, now declared by the plugins that own them.
    value = _settings(c).value
    mmr = [value(f"search.mmr.{k}") for k in ("enabled", "lambda", "same_doc_penalty")]
    assert mmr == [False, 0.7, 0.0]
    keys = ("enabled", "whole_doc_threshold_tokens", "max_expanded_tokens")
    assert [value(f"search.parent_retriever.{k}") for k in keys] == [False, 100, 2000]
    assert (value("reranker"), value("rerank_by_default")) == (None, False)


def test_missing_file_means_defaults(tmp_path: Path) -> None:
    assert load_config(tmp_path) == GrooveConfig()


def test_values_are_read(tmp_path: Path) -> None:
    kb = _write(tmp_path, "[search.fusion]\nrrf_k = 30\n[search.mmr]\nlambda = 0.5\n")
    c = load_config(kb)
    assert c.search.fusion.rrf_k == 30.0
    assert _settings(c).value("search.mmr.lambda") == 0.5


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[search.fusion]\nrrf_kk = 3\n", "unknown key 'search.fusion.rrf_kk'"),
        ("[search.fusion]\nrrf_k = -1\n", "search.fusion.rrf_k"),
        ("[search.mmr]\nlambda = 2.0\n", "search.mmr.lambda"),
        ("colour = 'red'\n", "unknown key 'colour'"),
        ("[embedder]\nbatch_size = 'many'\n", "embedder.batch_size"),
        ("[search\n", "not valid TOML"),
        # Booleans are booleans (issue #44): "yes" or 1 would silently turn a stage on.
        ('[search.prf]\nenabled = "yes"\n', "search.prf.enabled: must be true or false"),
        ("[search.mmr]\nenabled = 1\n", "search.mmr.enabled: must be true or false (got 1)"),
        ('[index]\nserve_comments = "false"\n', "index.serve_comments: must be true or false"),
    ],
)
def test_bad_config_names_the_key_and_the_file(tmp_path: Path, text: str, needle: str) -> None:
    kb = _write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        _settings(load_config(kb))
    assert needle in str(err.value)
    assert "groove.toml" in str(err.value)


def test_explicit_config_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path, tmp_path / "nope.toml")


def test_index_location(tmp_path: Path) -> None:
    assert index_path(tmp_path, GrooveConfig()) == tmp_path / ".groove" / "index.sqlite"
    kb = _write(tmp_path, "[index]\npath = 'idx/x.sqlite'\n")
    assert index_path(kb, load_config(kb)) == kb / "idx" / "x.sqlite"
