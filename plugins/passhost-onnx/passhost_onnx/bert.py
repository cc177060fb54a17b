"""A BERT-style encoder written with ``onnx.helper`` in the older, decomposed spelling, as
``torch.onnx.export`` wrote it at opset 13: LayerNorm as ReduceMean/Sub/Pow/ReduceMean/
Add/Sqrt/Div/Mul/Add, GELU through Erf, reshapes whose target shape is computed from
``Shape``/``Gather``/``Unsqueeze``/``Concat``, positions from ``Range`` over the sequence
length, and an additive attention mask from ``Equal``/``Where``. Weights are random.

``make_bert()`` returns the model; its inputs are ``input_ids`` and ``attention_mask``,
int64 ``(batch, sequence)`` with a symbolic sequence length, and its output is the last
hidden state ``(batch, sequence, hidden)``::

    model = make_bert(layers=2, hidden=32, heads=4)
    passhost run bert.onnx -O3 -o bert.opt.onnx --input-shape input_ids=1,128 --input-shape attention_mask=1,128
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["make_bert"]


class _Graph:
    def __init__(self, seed: int) -> None:
        self.nodes: list = []
        self.inits: list = []
        self.rng = np.random.RandomState(seed)
        self.count = 0

    def name(self, hint: str) -> str:
        self.count += 1
        return f"{hint}_{self.count}"

    def op(self, op_type: str, inputs: list, **attrs) -> str:
        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def const(self, value, hint: str = "c") -> str:
        name = self.name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(self, *shape: int, scale: float = 0.2) -> str:
        return self.const((self.rng.randn(*shape) * scale).astype("float32"), "w")

    def layer_norm(self, x: str, hidden: int) -> str:
        mean = self.op("ReduceMean", [x], axes=[-1])
        d = self.op("Sub", [x, mean])
        var = self.op("ReduceMean", [self.op("Pow", [d, self.const(np.float32(2.0))])], axes=[-1])
        std = self.op("Sqrt", [self.op("Add", [var, self.const(np.float32(1e-12))])])
        gamma = self.const((1 + self.rng.randn(hidden) * 0.1).astype("float32"), "gamma")
        beta = self.const((self.rng.randn(hidden) * 0.1).astype("float32"), "beta")
        return self.op("Add", [self.op("Mul", [self.op("Div", [d, std]), gamma]), beta])

    def linear(self, x: str, n_in: int, n_out: int) -> str:
        y = self.op("MatMul", [x, self.weight(n_in, n_out)])
        return self.op("Add", [y, self.const((self.rng.randn(n_out) * 0.1).astype("float32"), "b")])

    def gelu(self, x: str) -> str:
        erf = self.op("Erf", [self.op("Div", [x, self.const(np.float32(1.4142135623730951))])])
        return self.op("Mul", [self.op("Mul", [x, self.op("Add", [erf, self.const(np.float32(1.0))])]),
                               self.const(np.float32(0.5))])

    def dim(self, x: str, i: int) -> str:
        """``Unsqueeze(Gather(Shape(x), i))``: one dimension of ``x`` as a 1-element tensor."""
        g = self.op("Gather", [self.op("Shape", [x]), self.const(np.int64(i))], axis=0)
        return self.op("Unsqueeze", [g, self.const(np.asarray([0], "int64"))])

    def heads(self, x: str, heads: int, head_dim: int, perm: list) -> str:
        shape = self.op("Concat", [self.dim(x, 0), self.dim(x, 1), self.const(np.asarray([heads, head_dim], "int64"))],
                        axis=0)
        return self.op("Transpose", [self.op("Reshape", [x, shape])], perm=perm)


def make_bert(layers: int = 2, hidden: int = 32, heads: int = 4, ffn: int = 64, vocab: int = 100,
              max_positions: int = 512, seed: int = 0) -> onnx.ModelProto:
    """The encoder described in the module docstring, at opset 13."""
    g = _Graph(seed)
    head_dim = hidden // heads
    ids, mask = "input_ids", "attention_mask"
    # embeddings: word + position (positions = Range(0, sequence length))
    words = g.op("Gather", [g.weight(vocab, hidden, scale=1.0), ids], axis=0)
    seq_len = g.op("Gather", [g.op("Shape", [ids]), g.const(np.int64(1))], axis=0)
    positions = g.op("Range", [g.const(np.int64(0)), seq_len, g.const(np.int64(1))])
    pos = g.op("Gather", [g.weight(max_positions, hidden, scale=1.0), positions], axis=0)
    h = g.layer_norm(g.op("Add", [words, pos]), hidden)
    # additive mask: 0 where attended, -10000 where masked, shape (batch, 1, 1, seq)
    masked = g.op("Equal", [mask, g.const(np.int64(0))])
    additive = g.op("Where", [masked, g.const(np.float32(-10000.0)), g.const(np.float32(0.0))])
    additive = g.op("Unsqueeze", [additive, g.const(np.asarray([1, 2], "int64"))])
    scale = g.const(np.float32(np.sqrt(head_dim)))
    for _ in range(layers):
        q = g.heads(g.linear(h, hidden, hidden), heads, head_dim, [0, 2, 1, 3])
        k = g.heads(g.linear(h, hidden, hidden), heads, head_dim, [0, 2, 3, 1])
        v = g.heads(g.linear(h, hidden, hidden), heads, head_dim, [0, 2, 1, 3])
        scores = g.op("Add", [g.op("Div", [g.op("MatMul", [q, k]), scale]), additive])
        ctx = g.op("Transpose", [g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])], perm=[0, 2, 1, 3])
        merged = g.op("Concat", [g.dim(ctx, 0), g.dim(ctx, 1), g.const(np.asarray([hidden], "int64"))], axis=0)
        attn = g.linear(g.op("Reshape", [ctx, merged]), hidden, hidden)
        h = g.layer_norm(g.op("Add", [h, attn]), hidden)
        ff = g.linear(g.gelu(g.linear(h, hidden, ffn)), ffn, hidden)
        h = g.layer_norm(g.op("Add", [h, ff]), hidden)
    g.nodes.append(helper.make_node("Identity", [h], ["last_hidden_state"]))
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"]) for n in (ids, mask)]
    output = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", hidden])
    graph = helper.make_graph(g.nodes, "bert_encoder", inputs, [output], g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="passhost_onnx.bert")
    model.ir_version = 7
    onnx.checker.check_model(model)
    return model
