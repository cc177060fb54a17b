"""Models larger than memory, built from seeded random weights (issue 35).

Each builder writes an ONNX model made with ``onnx.helper`` whose weights are generated a
block at a time straight into the file, so building a 6 GB model needs a few tens of
megabytes of memory::

    decoder(path, hidden=6656, ...)          a Llama-style decoder (RMSNorm, attention with a
                                             causal mask, SiLU-gated MLP), float16
    matmul_stack(path, width=8192, ...)      MatMul + bias + Relu layers, float32

``layout`` says where the weights go: ``"one"`` (one external-data file beside the
model, ``<name>.data``), ``"per-tensor"`` (a file per weight) or ``"inline"`` (inside the
model file, framed by hand: protobuf cannot serialise a message above 2 GB, but its wire
format can hold one, so an inline model of any size can be written -- and then read only
by a tool that never parses the weights with protobuf). The same arguments at smaller
sizes give the smaller sibling whose outputs onnxruntime compares.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

__all__ = ["Weight", "decoder", "matmul_stack", "decoder_sizes", "matmul_sizes", "weight_bytes", "write_model"]

#: bytes of random numbers generated at a time
_BLOCK = 16 << 20


@dataclass(frozen=True)
class Weight:
    """A weight to generate: normal values times ``std`` (or ``fill`` everywhere when given)."""

    name: str
    shape: tuple
    dtype: str
    std: float = 1.0
    fill: Optional[float] = None

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


def _blocks(w: Weight, seed: int):
    """The weight's bytes, a block of whole rows at a time (seeded by name, so a weight's
    values do not depend on which other weights the model has)."""
    rng = np.random.default_rng([seed, *w.name.encode()])
    count = int(np.prod(w.shape, dtype=np.int64))
    step = max(1, _BLOCK // 4)
    done = 0
    while done < count:
        n = min(step, count - done)
        if w.fill is not None:
            block = np.full(n, w.fill, dtype=w.dtype)
        else:
            block = (rng.standard_normal(n, dtype=np.float32) * np.float32(w.std)).astype(w.dtype)
        yield block.tobytes()
        done += n


def weight_bytes(weights: list) -> int:
    return sum(w.nbytes for w in weights)


def _tensor_head(w: Weight):
    import onnx

    t = onnx.TensorProto()
    t.name = w.name
    t.data_type = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(w.dtype))
    t.dims.extend(w.shape)
    return t


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def write_model(path: str, graph, weights: list, *, layout: str = "one", seed: int = 0, opset: int = 18) -> int:
    """Write ``graph`` (an ``onnx.GraphProto`` without the weights) with ``weights``
    generated into it as ``layout`` says; returns the weight bytes written."""
    import onnx
    from onnx import helper

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="bench_large")
    model.ir_version = 8
    base = os.path.basename(path)
    directory = os.path.dirname(os.path.abspath(path))
    if layout == "inline":
        _write_inline(path, model, weights, seed)
        return weight_bytes(weights)
    if layout not in ("one", "per-tensor"):
        raise ValueError(f"layout {layout!r}: one, per-tensor or inline")
    data_file = None
    offset = 0
    try:
        for i, w in enumerate(weights):
            location = f"{base}.data" if layout == "one" else f"{base}.{i}.bin"
            if layout == "per-tensor" or data_file is None:
                if data_file is not None:
                    data_file.close()
                data_file = open(os.path.join(directory, location), "wb")
                offset = 0
            pad = -offset % 4096  # page-aligned weights, as onnx's writer aligns large ones
            data_file.write(b"\0" * pad)
            offset += pad
            for block in _blocks(w, seed):
                data_file.write(block)
            t = _tensor_head(w)
            t.data_location = onnx.TensorProto.EXTERNAL
            for key, value in (("location", location), ("offset", str(offset)), ("length", str(w.nbytes))):
                entry = t.external_data.add()
                entry.key, entry.value = key, value
            offset += w.nbytes
            model.graph.initializer.append(t)
    finally:
        if data_file is not None:
            data_file.close()
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return weight_bytes(weights)


def _write_inline(path: str, model, weights: list, seed: int) -> None:
    """The model with every weight's ``raw_data`` in the file, framed by hand (fields of a
    message may come in any order, so the graph's initializers follow its other fields)."""
    graph_bytes = model.graph.SerializeToString()
    heads = []
    for w in weights:
        head = _tensor_head(w).SerializeToString() + b"\x4a" + _varint(w.nbytes)  # raw_data(9)
        heads.append(b"\x2a" + _varint(len(head) + w.nbytes) + head)              # initializer(5)
    graph_size = len(graph_bytes) + sum(len(h) for h in heads) + weight_bytes(weights)
    outer = type(model)()
    outer.CopyFrom(model)
    outer.ClearField("graph")
    with open(path, "wb") as f:
        f.write(outer.SerializeToString() + b"\x3a" + _varint(graph_size) + graph_bytes)  # graph(7)
        for head, w in zip(heads, weights):
            f.write(head)
            for block in _blocks(w, seed):
                f.write(block)


# ----------------------------------------------------------------------------- the models


def matmul_sizes(target_bytes: int, width: int = 8192, dtype: str = "float32") -> int:
    """The number of layers of :func:`matmul_stack` nearest ``target_bytes`` of weights."""
    per_layer = (width * width + width) * np.dtype(dtype).itemsize
    return max(1, round(target_bytes / per_layer))


def matmul_stack(path: str, *, layers: int, width: int, batch: int = 4, dtype: str = "float32",
                 layout: str = "one", seed: int = 0, scale_every: int = 0) -> int:
    """``layers`` times ``y = Relu(x @ W + b)`` on ``x: [batch, width]``; with ``scale_every=k``
    every k-th layer is ``Relu(x @ W * s + b)`` with a positive per-channel ``s`` (which
    FoldScaleAxis folds into ``W``: a weight the optimiser computes). Returns the weight bytes."""
    from onnx import helper

    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    nodes, weights = [], []
    x = "x"
    for i in range(layers):
        w, b, mm = f"layer{i}.weight", f"layer{i}.bias", f"mm{i}"
        weights += [Weight(w, (width, width), dtype, std=1.0 / np.sqrt(width)), Weight(b, (width,), dtype, std=0.1)]
        nodes.append(helper.make_node("MatMul", [x, w], [mm], name=f"layer{i}/matmul"))
        if scale_every and i % scale_every == scale_every - 1:
            weights.append(Weight(f"layer{i}.scale", (width,), dtype, fill=1.5))
            nodes.append(helper.make_node("Mul", [mm, f"layer{i}.scale"], [mm + "s"], name=f"layer{i}/scale"))
            mm += "s"
        nodes += [helper.make_node("Add", [mm, b], [f"add{i}"], name=f"layer{i}/add"),
                  helper.make_node("Relu", [f"add{i}"], [f"h{i}"], name=f"layer{i}/relu")]
        x = f"h{i}"
    nodes[-1].output[0] = "y"
    graph = helper.make_graph(nodes, "matmul_stack", [helper.make_tensor_value_info("x", elem, [batch, width])],
                              [helper.make_tensor_value_info("y", elem, [batch, width])])
    return write_model(path, graph, weights, layout=layout, seed=seed)


def decoder_sizes(target_bytes: int, layers: int = 2, vocab: int = 32000, dtype: str = "float16") -> dict:
    """``hidden`` and ``intermediate`` (8/3 of hidden, a multiple of 256) of a
    :func:`decoder` with about ``target_bytes`` of weights; 64-wide heads."""
    item = np.dtype(dtype).itemsize
    best = None
    for hidden in range(256, 32768, 128):
        inter = int(round(hidden * 8 / 3 / 256)) * 256
        size = (layers * (4 * hidden * hidden + 3 * hidden * inter + 2 * hidden) + 2 * vocab * hidden + hidden) * item
        if best is None or abs(size - target_bytes) < abs(best[0] - target_bytes):
            best = (size, hidden, inter)
    return {"hidden": best[1], "intermediate": best[2], "heads": best[1] // 64}


def _rms_norm(nodes: list, x: str, weight: str, out: str, eps_name: str) -> None:
    from onnx import helper

    p = out + "/"
    nodes += [helper.make_node("Mul", [x, x], [p + "sq"]),
              helper.make_node("ReduceMean", [p + "sq", "axes_last"], [p + "ms"], keepdims=1),
              helper.make_node("Add", [p + "ms", eps_name], [p + "mse"]),
              helper.make_node("Sqrt", [p + "mse"], [p + "rms"]),
              helper.make_node("Div", [x, p + "rms"], [p + "normed"]),
              helper.make_node("Mul", [p + "normed", weight], [out])]


def _attention(nodes: list, h: str, i: int, seq: int, heads: int, head_dim: int) -> str:
    from onnx import helper

    p = f"layer{i}.attn."
    for proj in "qkv":
        nodes.append(helper.make_node("MatMul", [h, p + f"{proj}_proj.weight"], [p + proj]))
        nodes.append(helper.make_node("Reshape", [p + proj, "shape_heads"], [p + proj + "4"]))
        perm = [0, 2, 3, 1] if proj == "k" else [0, 2, 1, 3]
        nodes.append(helper.make_node("Transpose", [p + proj + "4"], [p + proj + "t"], perm=perm))
    nodes += [helper.make_node("MatMul", [p + "qt", p + "kt"], [p + "scores"]),
              helper.make_node("Mul", [p + "scores", "attn_scale"], [p + "scaled"]),
              helper.make_node("Add", [p + "scaled", "causal_mask"], [p + "masked"]),
              helper.make_node("Softmax", [p + "masked"], [p + "probs"], axis=-1),
              helper.make_node("MatMul", [p + "probs", p + "vt"], [p + "ctx"]),
              helper.make_node("Transpose", [p + "ctx"], [p + "ctx_t"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", [p + "ctx_t", "shape_hidden"], [p + "ctx2"]),
              helper.make_node("MatMul", [p + "ctx2", p + "o_proj.weight"], [p + "out"])]
    del seq, heads, head_dim
    return p + "out"


def _mlp(nodes: list, h: str, i: int) -> str:
    from onnx import helper

    p = f"layer{i}.mlp."
    nodes += [helper.make_node("MatMul", [h, p + "gate_proj.weight"], [p + "gate"]),
              helper.make_node("Sigmoid", [p + "gate"], [p + "gate_sig"]),
              helper.make_node("Mul", [p + "gate", p + "gate_sig"], [p + "silu"]),
              helper.make_node("MatMul", [h, p + "up_proj.weight"], [p + "up"]),
              helper.make_node("Mul", [p + "silu", p + "up"], [p + "act"]),
              helper.make_node("MatMul", [p + "act", p + "down_proj.weight"], [p + "out"])]
    return p + "out"


def decoder(path: str, *, hidden: int, intermediate: int, heads: int, layers: int = 2, vocab: int = 32000,
            seq: int = 8, dtype: str = "float16", layout: str = "one", seed: int = 0) -> int:
    """A Llama-style decoder over ``input_ids: int64[1, seq]`` giving ``logits: [1, seq, vocab]``;
    returns the weight bytes."""
    from onnx import TensorProto, helper, numpy_helper

    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    head_dim = hidden // heads
    std = 1.0 / np.sqrt(hidden)
    weights = [Weight("embed_tokens.weight", (vocab, hidden), dtype, std=1.0)]
    nodes = [helper.make_node("Gather", ["embed_tokens.weight", "input_ids"], ["h0"])]
    h = "h0"
    for i in range(layers):
        p = f"layer{i}."
        weights += [Weight(p + "input_layernorm.weight", (hidden,), dtype, fill=1.0)]
        weights += [Weight(p + f"attn.{n}_proj.weight", (hidden, hidden), dtype, std=std) for n in "qkvo"]
        weights += [Weight(p + "post_attention_layernorm.weight", (hidden,), dtype, fill=1.0),
                    Weight(p + "mlp.gate_proj.weight", (hidden, intermediate), dtype, std=std),
                    Weight(p + "mlp.up_proj.weight", (hidden, intermediate), dtype, std=std),
                    Weight(p + "mlp.down_proj.weight", (intermediate, hidden), dtype, std=1.0 / np.sqrt(intermediate))]
        _rms_norm(nodes, h, p + "input_layernorm.weight", p + "normed1", "eps")
        attn = _attention(nodes, p + "normed1", i, seq, heads, head_dim)
        nodes.append(helper.make_node("Add", [h, attn], [p + "resid1"]))
        _rms_norm(nodes, p + "resid1", p + "post_attention_layernorm.weight", p + "normed2", "eps")
        mlp = _mlp(nodes, p + "normed2", i)
        nodes.append(helper.make_node("Add", [p + "resid1", mlp], [f"h{i + 1}"]))
        h = f"h{i + 1}"
    weights += [Weight("norm.weight", (hidden,), dtype, fill=1.0), Weight("lm_head.weight", (hidden, vocab), dtype, std=std)]
    _rms_norm(nodes, h, "norm.weight", "final_normed", "eps")
    nodes.append(helper.make_node("MatMul", ["final_normed", "lm_head.weight"], ["logits"]))
    mask = np.triu(np.full((seq, seq), -1e4, dtype=dtype), k=1)
    small = [numpy_helper.from_array(np.array([-1], np.int64), "axes_last"),
             numpy_helper.from_array(np.array(1e-5, dtype), "eps"),
             numpy_helper.from_array(np.array(1.0 / np.sqrt(head_dim), dtype), "attn_scale"),
             numpy_helper.from_array(mask, "causal_mask"),
             numpy_helper.from_array(np.array([1, seq, heads, head_dim], np.int64), "shape_heads"),
             numpy_helper.from_array(np.array([1, seq, hidden], np.int64), "shape_hidden")]
    graph = helper.make_graph(nodes, "decoder", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, seq])],
                              [helper.make_tensor_value_info("logits", elem, [1, seq, vocab])], initializer=small)
    return write_model(path, graph, weights, layout=layout, seed=seed)


Builder = Callable[..., int]
