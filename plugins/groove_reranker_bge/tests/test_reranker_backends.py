"""Both backends on the tiny model: same raw scores, FlagEmbedding's own scoring reproduced,
the cache, and the errors for models that cannot load or run."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from groove_reranker_bge import backends
from groove_reranker_bge.backends import (
    MAX_LOADED,
    ModelKey,
    RerankerError,
    get_model,
    loaded_keys,
    resolve_backend,
)

PAIRS = [
    ("how are results ranked", "Ranking\nResults from the lexical and vector legs are fused."),
    ("how are results ranked", "Rust\nAsync runtimes schedule futures."),
    ("how are results ranked", "再ランキング > 検索\n全文検索とベクトル検索を組み合わせる。"),
    ("how are results ranked", "Installing\nCreate a virtual environment and install it."),
]


def test_both_backends_give_the_same_raw_scores(tiny_model: Path) -> None:
    st = get_model(ModelKey(str(tiny_model), "sentence-transformers", 512)).score(PAIRS)
    flag = get_model(ModelKey(str(tiny_model), "flag", 512)).score(PAIRS)
    assert flag == pytest.approx(st, abs=1e-4)
    assert len(set(st)) == len(PAIRS)  # distinct: the model tells passages apart


def test_the_flag_backend_reproduces_flag_rerankers_compute_score(tiny_model: Path) -> None:
    from FlagEmbedding import FlagReranker

    # Long passages, short max_length: FlagEmbedding's truncation (keep the query, cut the
    # passage) is what must be reproduced, and ours must not change it.
    long_pairs = [(q, p * 20) for q, p in PAIRS]
    reference = FlagReranker(str(tiny_model), devices="cpu", max_length=48)
    expected = reference.compute_score(long_pairs, batch_size=len(long_pairs), normalize=False)
    ours = get_model(ModelKey(str(tiny_model), "flag", 48)).score(long_pairs)
    assert ours == pytest.approx(expected, abs=1e-4)


def test_auto_is_sentence_transformers() -> None:
    assert resolve_backend("auto") == "sentence-transformers"
    assert resolve_backend("flag") == "flag"


def test_at_most_max_loaded_models_are_kept(tiny_model: Path) -> None:
    keys = [ModelKey(str(tiny_model), "sentence-transformers", n) for n in (32, 33, 34)]
    models = [get_model(k) for k in keys]
    assert MAX_LOADED == 2 and loaded_keys() == keys[1:]
    assert get_model(keys[2]) is models[2]
    assert get_model(keys[0]) is not models[0]  # evicted, so loaded again


def test_an_offline_hub_name_fails_fast_naming_the_model() -> None:
    key = ModelKey("BAAI/bge-reranker-v2-m3", "sentence-transformers", 512)
    start = time.perf_counter()
    with pytest.raises(RerankerError) as err:
        get_model(key)
    # A hang guard, not a speed guard: without the offline check the hub client retries for
    # about 70 s. Well under that even on a loaded machine (about 0.1 s idle).
    assert time.perf_counter() - start < 20.0
    message = str(err.value)
    assert "'BAAI/bge-reranker-v2-m3'" in message and "HF_HUB_OFFLINE" in message
    assert "huggingface-cli download BAAI/bge-reranker-v2-m3" in message
    assert key not in loaded_keys()  # a failure is not cached: fix it and retry


def test_a_model_with_several_labels_is_refused(tmp_path: Path) -> None:
    from groove_reranker_bge.testing import minilm_tokenizer_dir
    from transformers import BertConfig, BertForSequenceClassification

    target = tmp_path / "classifier"
    config = BertConfig(
        vocab_size=30522,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        num_labels=3,
    )
    BertForSequenceClassification(config).save_pretrained(str(target))
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json"):
        (target / name).write_bytes((minilm_tokenizer_dir() / name).read_bytes())
    model = get_model(ModelKey(str(target), "sentence-transformers", 64))
    with pytest.raises(RerankerError, match="has 3 output labels; a cross-encoder reranker"):
        model.score(PAIRS)


def test_a_max_length_beyond_the_model_fails_while_scoring_naming_it(tiny_model: Path) -> None:
    # The tiny model has 512 positions; 2048 tokens of passage overflow them.
    model = get_model(ModelKey(str(tiny_model), "flag", 2048))
    with pytest.raises(RerankerError, match="failed while scoring with flag \\(max_length 2048\\)"):
        model.score([("query", "word " * 1500)])


def test_a_missing_library_names_the_package_to_install() -> None:
    hint = r"pip install './plugins/groove_reranker_bge\[flag\]' torch==2\.13\.0"
    with pytest.raises(RerankerError, match=hint):
        backends._import("no_such_reranker_library", "flag")
