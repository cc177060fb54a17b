"""Converters of onnxruntime's ``com.microsoft`` operators that its transformer optimizer
writes into models (Hugging Face Optimum's optimized exports): they become the standard
operators they stand for, so passes see through them and the export is plain ONNX::

    com.microsoft.BiasGelu(a, b)                 ->  nn.gelu(add(%a, %b))
    com.microsoft.SkipLayerNormalization(x, s, g, b)   ->  nn.layer_norm(add(%x, %s), %g, %b)

Covered: ``Gelu``, ``FastGelu``, ``BiasGelu``, ``QuickGelu``, ``BiasAdd``,
``SkipLayerNormalization``, ``FusedMatMul``, ``Attention`` and ``EmbedLayerNormalization``
(with the default-domain ``LayerNormalization`` the optimizer writes below opset 17, a BERT
optimized by onnxruntime imports); and for Llama-like decoders ``RotaryEmbedding``
(``nn.rotary_embedding``), ``SkipSimplifiedLayerNormalization`` and the default-domain
``SimplifiedLayerNormalization`` onnxruntime registers (``nn.rms_norm``; in a half type
widened to float32 and rounded once, as onnxruntime's kernels compute)::

    SimplifiedLayerNormalization(x, g)          ->  nn.rms_norm(%x, %g)
    com.microsoft.RotaryEmbedding(x, pos, cos, sin)  ->  nn.rotary_embedding(%x, take(%cos, %pos), take(%sin, %pos)) The quantized ones (``QLinearAdd``, ``QGemm`` ...) are in
:mod:`.convert_qcontrib`. Another contrib operator stays opaque (see docs/onnx.md, custom
operators).
"""
from __future__ import annotations

import numpy as np

from passhost import ir

from passhost.ir.pattern import is_op, wildcard

from .build import arange, call, const, reshape, zeros
from .composites import composite
from .convert_composite import rotary
from .node import Node
from .table import converter

MS = "com.microsoft"
_x = wildcard()


def _added(*terms):
    out = terms[0]
    for t in terms[1:]:
        if t is not None:
            out = call("add", out, t)
    return out


@converter("Gelu", 1, domain=MS)
def _gelu(node):
    return call("nn.gelu", node.inputs[0], approximate="none")


@converter("BiasGelu", 1, domain=MS)
def _bias_gelu(node):
    return call("nn.gelu", _added(node.inputs[0], node.inputs[1]), approximate="none")


@converter("FastGelu", 1, domain=MS)
def _fast_gelu(node):
    return call("nn.gelu", _added(node.inputs[0], node.input(1)), approximate="tanh")


@converter("QuickGelu", 1, domain=MS)
def _quick_gelu(node):
    x = node.inputs[0]
    alpha = const(float(node.attr("alpha", 1.702)), node.dtype(0))
    return call("multiply", x, call("sigmoid", call("multiply", x, alpha)))


@composite("onnx.QuickGelu", is_op("multiply")(_x, is_op("sigmoid")(_x)), target="onnxruntime")
def _quick_gelu_back(em, m, args):
    """``multiply(x, sigmoid(x))`` (SiLU, the gate of Llama's MLP) -> ``QuickGelu(x, alpha=1)``
    (com.microsoft: half the time in onnxruntime), in an export to onnxruntime"""
    em.domains.setdefault(MS, 1)
    return em.node("QuickGelu", args, domain=MS, alpha=1.0)[0]


@converter("BiasAdd", 1, domain=MS)
def _bias_add(node):
    return _added(*node.inputs[:3])


@converter("SkipLayerNormalization", 1, domain=MS)
def _skip_layer_norm(node):
    """``layer_norm(input + skip (+ bias))`` over the last axis; the optional fourth output is
    that sum. (The mean and inverse deviation outputs are not supported.)"""
    outputs = list(node.outputs) + [""] * 4
    if outputs[1] or outputs[2]:
        raise node.error("its mean and inv_std_var outputs are not supported")
    total = _added(node.inputs[0], node.inputs[1], node.input(4))
    hidden = node.shape(0)[-1]
    beta = node.input(3) if node.input(3) is not None else (
        const(np.zeros(hidden), node.dtype(0)) if type(hidden) is int else zeros((hidden,), node.dtype(0)))
    out = call("nn.layer_norm", total, node.inputs[2], beta, axis=-1, epsilon=float(node.attr("epsilon", 1e-12)))
    return (out, None, None, total) if outputs[3] else out


def _rms_once(x, gamma, axis: int, eps: float, dtype: str):
    """onnxruntime's RMS normalisation kernels: in float32, the product with ``gamma`` included,
    rounded once to a half ``dtype`` (``nn.rms_norm`` of the half type would round before it)."""
    if np.dtype(dtype).itemsize >= 4:
        return call("nn.rms_norm", x, gamma, axis=axis, epsilon=eps)
    wide = call("nn.rms_norm", call("cast", x, dtype="float32"), call("cast", gamma, dtype="float32"), axis=axis,
                epsilon=eps)
    return call("cast", wide, dtype=dtype)


@converter("SimplifiedLayerNormalization", 1)
def _simplified_layer_norm(node):
    """onnxruntime's (default-domain) RMS normalisation over the axes from ``axis`` on."""
    if len(node.outputs) > 1 and node.outputs[1]:
        raise node.error("its inv_std_var output is not supported")
    if node.dtype(1) != node.dtype(0):
        raise node.error(f"a scale of {node.dtype(1)} on {node.dtype(0)} data is not supported")
    nd = node.ndim(0)
    axis = int(node.attr("axis", -1)) % nd - nd
    return _rms_once(node.inputs[0], node.inputs[1], axis, float(node.attr("epsilon", 1e-5)), node.dtype(0))


@converter("SkipSimplifiedLayerNormalization", 1, domain=MS)
def _skip_simplified_layer_norm(node):
    """``rms_norm(input + skip (+ bias)) * gamma`` over the last axis; the optional fourth output
    is that sum. In a half type the sum is taken in float32, normalised from there and rounded
    once (the fourth output rounded too), as onnxruntime's kernel does."""
    outputs = list(node.outputs) + [""] * 4
    if outputs[1] or outputs[2]:
        raise node.error("its mean and inv_std_var outputs are not supported")
    dtype = node.dtype(0)
    eps = float(node.attr("epsilon", 1e-12))
    if np.dtype(dtype).itemsize >= 4:
        total = _added(node.inputs[0], node.inputs[1], node.input(3))
        out = call("nn.rms_norm", total, node.inputs[2], axis=-1, epsilon=eps)
    else:
        total = _added(*(None if t is None else call("cast", t, dtype="float32")
                         for t in (node.inputs[0], node.inputs[1], node.input(3))))
        out = call("cast", call("nn.rms_norm", total, call("cast", node.inputs[2], dtype="float32"), axis=-1,
                                epsilon=eps), dtype=dtype)
        total = call("cast", total, dtype=dtype)
    return (out, None, None, total) if outputs[3] else out


@converter("RotaryEmbedding", 1, domain=MS)
def _ms_rotary_embedding(node):
    """onnxruntime's RotaryEmbedding: (input, position_ids, cos_cache, sin_cache)."""
    if float(node.attr("scale", 1.0)) != 1.0 or int(node.attr("is_packed_batching", 0)):
        raise node.error("scale other than 1 and packed batching are not supported")
    return rotary(node, node.inputs[0], node.inputs[2], node.inputs[3], 1)


@converter("FusedMatMul", 1, domain=MS)
def _fused_matmul(node):
    """``alpha * matmul(A', B')`` with ``A'``/``B'`` optionally transposed in their last two axes."""
    from .convert_nn import _matmul

    if int(node.attr("transBatchA", 0)) or int(node.attr("transBatchB", 0)):
        raise node.error("transBatchA/transBatchB are not supported")
    inputs = list(node.inputs[:2])
    for i, key in enumerate(("transA", "transB")):
        rank = node.ndim(i)
        if int(node.attr(key, 0)) and rank >= 2:
            axes = tuple(range(rank - 2)) + (rank - 1, rank - 2)
            inputs[i] = ir.infer_type(call("transpose", inputs[i], axes=axes))
    product = _matmul(Node("MatMul", "", node.name, inputs, {}, node.outputs, 13))
    alpha = float(node.attr("alpha", 1.0))
    return product if alpha == 1.0 else call("multiply", product, const(alpha, node.dtype(0)))


@converter("Attention", 1, domain=MS)
def _attention(node):
    """onnxruntime's fused self-attention of BERT-style models: ``input @ weights + bias``
    split into query, key and value, ``num_heads`` heads, ``softmax(q k^T * scale + mask) v``.
    The mask is absent, a raw ``(batch, sequence)`` 0/1 mask or ``(batch,)`` key lengths
    (right padding); ``unidirectional`` adds the causal mask. ``past``/``present`` (decoding
    with a cache) are not supported."""
    names = list(node.outputs) + [""]
    if node.input(4) is not None or names[1]:
        raise node.error("past and present (a decoding cache) are not supported")
    if any(node.input(i) is not None for i in range(5, 8)):
        raise node.error("attention_bias, past_sequence_length and the other extra inputs are not supported")
    b, s, hidden_in = node.shape(0)
    heads = int(node.attr("num_heads"))
    sizes = [int(x) for x in node.attr("qkv_hidden_sizes", [])] or [node.shape(1)[1] // 3] * 3
    if sizes[0] != sizes[1] or any(x % heads for x in sizes):
        raise node.error(f"qkv_hidden_sizes {sizes} do not split into {heads} heads with equal query and key sizes")
    dtype = node.dtype(0)
    x2 = call("reshape", node.inputs[0], newshape=(b * s, hidden_in))
    qkv = call("nn.dense", x2, call("transpose", node.inputs[1], axes=(1, 0)))
    if node.input(2) is not None:
        qkv = call("add", qkv, node.inputs[2])
    bounds = (sizes[0], sizes[0] + sizes[1])
    parts = call("split", qkv, indices_or_sections=bounds, axis=1)

    def heads_of(i):  # (b*s, n*h) -> (b*n, s, h)
        h = sizes[i] // heads
        t = call("reshape", ir.TupleGetItem(parts, i), newshape=(b, s, heads, h))
        return call("reshape", call("transpose", t, axes=(0, 2, 1, 3)), newshape=(b * heads, s, h))

    q, k, v = heads_of(0), heads_of(1), heads_of(2)
    head = sizes[0] // heads
    scale = float(node.attr("scale", 0.0)) or 1.0 / float(np.sqrt(head))
    scores = call("multiply", call("nn.batch_matmul", q, k, transpose_b=True), const(scale, dtype))
    bias = _attention_mask(node, b, s, heads, dtype)
    if bias is not None:
        scores = call("add", scores, bias)
    probs = call("nn.softmax", scores, axis=-1)
    context = call("nn.batch_matmul", probs, v)                                  # (b*n, s, hv)
    hv = sizes[2] // heads
    context = call("transpose", call("reshape", context, newshape=(b, heads, s, hv)), axes=(0, 2, 1, 3))
    return call("reshape", context, newshape=(b, s, heads * hv))


def _attention_mask(node, b: int, s: int, heads: int, dtype: str):
    """The additive mask of ``Attention``, ``(b * heads, s, s)``, or ``None``."""
    fill = float(node.attr("mask_filter_value", -10000.0))
    parts = []
    mask = node.input(3)
    if mask is not None:
        shape = node.shape(3)
        if shape == (b, s):  # raw mask: 1 attends, 0 does not
            keep = call("cast", mask, dtype=dtype)
        elif shape == (b,):  # key lengths: right padding
            row = ir.Constant(np.arange(s, dtype="int64")[None, :]) if type(s) is int else \
                reshape(arange(s, "int64"), (1, s))
            keep = call("cast", call("less", row,
                                     call("expand_dims", call("cast", mask, dtype="int64"), axis=1)), dtype=dtype)
        else:
            raise node.error(f"a mask_index of shape {list(shape)} is not supported (raw (batch, sequence) masks "
                             "and (batch,) key lengths are)")
        additive = call("multiply", call("subtract", const(1.0, dtype), keep), const(fill, dtype))   # (b, s)
        parts.append(call("reshape", call("broadcast_to", call("reshape", additive, newshape=(b, 1, 1, s)),
                                          shape=(b, heads, 1, s)), newshape=(b * heads, 1, s)))
    if int(node.attr("unidirectional", 0)) and type(s) is not int:  # fill where the key is after the query
        later = call("greater", reshape(arange(s, "int64"), (1, 1, s)), reshape(arange(s, "int64"), (1, s, 1)))
        parts.append(call("where", later, const(fill, dtype), const(0.0, dtype)))
    elif int(node.attr("unidirectional", 0)):
        parts.append(ir.Constant(np.triu(np.full((s, s), fill, dtype=dtype), k=1)[None]))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else call("add", parts[0], parts[1])


@converter("EmbedLayerNormalization", 1, domain=MS)
def _embed_layer_norm(node):
    """BERT's embeddings: ``layer_norm(word[ids] + position[positions] + segment[segment_ids])``;
    the second output is each batch row's mask length (the sum of its 0/1 mask, int32), the
    optional third the sum before the normalisation."""
    ids = node.inputs[0]
    b, s = node.shape(0)
    total = call("take", node.inputs[2], ids, axis=0)
    positions = node.input(8) if node.input(8) is not None else (
        ir.Constant(np.arange(s, dtype="int32")[None, :]) if type(s) is int else reshape(arange(s, "int32"), (1, s)))
    total = call("add", total, call("take", node.inputs[3], positions, axis=0))
    if node.input(1) is not None and node.input(4) is not None:
        total = call("add", total, call("take", node.inputs[4], node.inputs[1], axis=0))
    out = call("nn.layer_norm", total, node.inputs[5], node.inputs[6], axis=-1,
               epsilon=float(node.attr("epsilon", 1e-12)))
    if node.input(7) is not None:
        lengths = call("cast", call("sum", call("cast", node.inputs[7], dtype="int32"), axis=(1,)), dtype="int32")
    else:
        lengths = zeros((b,), "int32")
    return out, lengths, total
