"""[embedder] thread settings: defaults chosen by measurement, the older key still works."""

from __future__ import annotations

import time

import pytest

from groove_core.config import EmbedderConfig, parse_config
from groove_core.embedding import USEMultilingual, builtin_embedder_specs
from groove_core.testing import SAMPLE_NOTES, cost_ratio


def _embedder(config: EmbedderConfig) -> USEMultilingual:
    spec = next(s for s in builtin_embedder_specs() if s.name == "use-multilingual")
    embedder = spec.factory(config)
    assert isinstance(embedder, USEMultilingual)
    return embedder


def test_the_defaults_are_one_thread_for_queries_and_for_index_batches() -> None:
    embedder = _embedder(EmbedderConfig())
    assert (embedder._query_threads, embedder._index_threads) == (1, 1)


def test_the_older_threads_key_keeps_setting_both() -> None:
    config = parse_config({"embedder": {"threads": 2}}).embedder
    assert (config.query_threads, config.index_threads) == (2, 2)
    config = parse_config({"embedder": {"threads": 2, "query_threads": 1}}).embedder
    assert (config.query_threads, config.index_threads) == (1, 2)
    embedder = _embedder(config)
    assert (embedder._query_threads, embedder._index_threads) == (1, 2)


@pytest.mark.slow
def test_the_default_thread_count_costs_no_more_cpu_than_two_threads() -> None:
    """CPU time of the whole process (BLAS worker threads included), interleaved, median:
    a second BLAS thread never made the default embedder cheaper here, idle or loaded,
    and on a busy machine it costs several times more (docs/benchmarks.md)."""
    default = USEMultilingual()
    other = USEMultilingual(query_threads=2, index_threads=2)
    batch = [text for text in SAMPLE_NOTES.values()] * 8
    query = "クロスエンコーダによる再ランキングの評価"
    for embedder in (default, other):
        embedder.embed_documents(batch[:1])  # load outside the measurement

    queries = cost_ratio(
        lambda: default.embed_query(query),
        lambda: other.embed_query(query),
        clock=time.process_time,
        repeat=5,
    )
    batches = cost_ratio(
        lambda: default.embed_documents(batch),
        lambda: other.embed_documents(batch),
        clock=time.process_time,
        rounds=5,
        repeat=2,
    )
    assert queries <= 1.0, f"a query with the default costs {queries:.2f}x two threads"
    assert batches <= 1.0, f"a batch with the default costs {batches:.2f}x two threads"
