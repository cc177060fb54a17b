"""Converters of onnxruntime's ``com.microsoft`` operators that its transformer optimizer
writes into models (Hugging Face Optimum's optimized exports): they become the standard
operators they stand for, so passes see through them and the export is plain ONNX::

    com.microsoft.BiasGelu(a, b)                 ->  nn.gelu(add(%a, %b))
    com.microsoft.SkipLayerNormalization(x, s, g, b)   ->  nn.layer_norm(add(%x, %s), %g, %b)

Covered: ``Gelu``, ``FastGelu``, ``BiasGelu``, ``QuickGelu``, ``BiasAdd``,
``SkipLayerNormalization`` and ``FusedMatMul``. Another contrib operator stays opaque (see
docs/onnx.md, custom operators).
"""
from __future__ import annotations

import numpy as np

from passhost import ir

from .build import call, const
from .node import Node
from .table import converter

MS = "com.microsoft"


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
    beta = node.input(3) if node.input(3) is not None else const(np.zeros(hidden), node.dtype(0))
    out = call("nn.layer_norm", total, node.inputs[2], beta, axis=-1, epsilon=float(node.attr("epsilon", 1e-12)))
    return (out, None, None, total) if outputs[3] else out


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
