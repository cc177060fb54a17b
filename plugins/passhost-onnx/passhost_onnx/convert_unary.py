"""Converters of element-wise math, activations and logic that map to one host operator or
decompose into a few, as TVM's ``from_onnx`` decomposes them::

    Elu(x, alpha=a)       ->  where(less(x, 0f), multiply(a, subtract(exp(x), 1f)), x)
    Softplus(x)           ->  add(log(add(exp(negative(abs(x))), 1f)), nn.relu(x))
    And(a, b) (bool)      ->  minimum(a, b)
"""
from __future__ import annotations

import numpy as np

from passhost import ir

from .build import call, const, reshape
from .table import converter

_UNARY = {"Erf": ("erf", 9), "Floor": ("floor", 6), "Ceil": ("ceil", 6), "Round": ("round", 11),
          "Abs": ("abs", 6), "Sign": ("sign", 9), "Sin": ("sin", 7), "Cos": ("cos", 7), "Tan": ("tan", 7),
          "Asin": ("asin", 7), "Acos": ("acos", 7), "Atan": ("atan", 7), "Sinh": ("sinh", 9), "Cosh": ("cosh", 9),
          "Asinh": ("asinh", 9), "Acosh": ("acosh", 9), "Atanh": ("atanh", 9), "BitwiseNot": ("bitwise_not", 18)}
_BINARY = {"BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor"}


def _unary(name: str):
    def convert(node):
        return call(name, node.inputs[0])
    return convert


for _onnx, (_ours, _since) in _UNARY.items():
    converter(_onnx, _since)(_unary(_ours))


def _binary(name: str):
    def convert(node):
        return call(name, node.inputs[0], node.inputs[1])
    return convert


for _onnx, _ours in _BINARY.items():
    converter(_onnx, 18)(_binary(_ours))


@converter("BitShift", 11)
def _bit_shift(node):
    direction = node.attr("direction", "")
    direction = direction.decode() if isinstance(direction, bytes) else str(direction)
    if direction not in ("LEFT", "RIGHT"):
        raise node.error(f"direction must be LEFT or RIGHT, got {direction!r}")
    return call("left_shift" if direction == "LEFT" else "right_shift", node.inputs[0], node.inputs[1])


def _c(node, value) -> ir.Constant:
    return const(value, node.dtype(0))


@converter("Elu", 6)
def _elu(node):
    x = node.inputs[0]
    alpha = float(node.attr("alpha", 1.0))
    neg = call("multiply", _c(node, alpha), call("subtract", call("exp", x), _c(node, 1)))
    return call("where", call("less", x, _c(node, 0)), neg, x)


@converter("Selu", 6)
def _selu(node):
    x = node.inputs[0]
    alpha = float(node.attr("alpha", 1.67326319217681884765625))
    gamma = float(node.attr("gamma", 1.05070102214813232421875))
    neg = call("subtract", call("multiply", _c(node, alpha), call("exp", x)), _c(node, alpha))
    return call("multiply", _c(node, gamma), call("where", call("less_equal", x, _c(node, 0)), neg, x))


@converter("Celu", 12)
def _celu(node):
    x = node.inputs[0]
    alpha = float(node.attr("alpha", 1.0))
    neg = call("multiply", _c(node, alpha),
               call("subtract", call("exp", call("divide", x, _c(node, alpha))), _c(node, 1)))
    return call("add", call("maximum", x, _c(node, 0)), call("minimum", neg, _c(node, 0)))


def softplus(x, one):
    """``log(1 + exp(x))`` as ``relu(x) + log(1 + exp(-|x|))``, which does not overflow.

    TVM's ``from_onnx`` writes ``log(exp(x) + 1)``. In float32 that is ``inf`` once ``x``
    passes about 88.7, where onnxruntime's ``Softplus`` gives ``x``. Below that the two
    forms agree to a rounding. ``one`` is the constant 1 in ``x``'s dtype."""
    return call("add", call("log", call("add", call("exp", call("negative", call("abs", x))), one)),
                call("nn.relu", x))


@converter("Softplus", 1)
def _softplus(node):
    return softplus(node.inputs[0], _c(node, 1))


@converter("Softsign", 1)
def _softsign(node):
    x = node.inputs[0]
    return call("divide", x, call("add", call("abs", x), _c(node, 1)))


@converter("Mish", 18)
def _mish(node):
    x = node.inputs[0]
    return call("multiply", x, call("tanh", _softplus(node)))


@converter("ThresholdedRelu", 10)
def _thresholded_relu(node):
    x = node.inputs[0]
    return call("where", call("greater", x, _c(node, float(node.attr("alpha", 1.0)))), x, _c(node, 0))


@converter("Shrink", 9)
def _shrink(node):
    x = node.inputs[0]
    bias, lambd = float(node.attr("bias", 0.0)), float(node.attr("lambd", 0.5))
    low = call("where", call("less", x, _c(node, -lambd)), call("add", x, _c(node, bias)), _c(node, 0))
    return call("where", call("greater", x, _c(node, lambd)), call("subtract", x, _c(node, bias)), low)


@converter("Gelu", 20)
def _gelu(node):
    return call("nn.gelu", node.inputs[0], approximate=node.attr("approximate", "none"))


@converter("HardSigmoid", 6)
def _hard_sigmoid(node):
    return ir.nn.hard_sigmoid(node.inputs[0], alpha=float(node.attr("alpha", 0.2)),
                              beta=float(node.attr("beta", 0.5)))


@converter("HardSwish", 14)
def _hard_swish(node):
    return ir.nn.hard_swish(node.inputs[0])


@converter("PRelu", 7)
def _prelu(node):
    x, slope = node.inputs[0], node.inputs[1]
    xs, ss = node.shape(0), node.shape(1)
    aligned = (1,) * (len(xs) - len(ss)) + tuple(ss)  # as the slope broadcasts against x
    if len(xs) >= 2 and len(ss) <= len(xs) and xs[1] != 1 and aligned[1] == xs[1] \
            and all(d == 1 for i, d in enumerate(aligned) if i != 1):
        # one slope per channel: [C, 1, 1] (ONNX's examples) or [1, C, 1, 1, 1] (PyTorch's dynamo export)
        return call("nn.prelu", x, reshape(slope, (aligned[1],)), axis=1)
    return call("where", call("less", x, _c(node, 0)), call("multiply", x, slope), x)


@converter("And", 7)
def _and(node):
    return call("logical_and", node.inputs[0], node.inputs[1])


@converter("Or", 7)
def _or(node):
    return call("logical_or", node.inputs[0], node.inputs[1])


@converter("Xor", 7)
def _xor(node):
    return call("logical_xor", node.inputs[0], node.inputs[1])


@converter("IsNaN", 9)
def _isnan(node):
    return call("not_equal", node.inputs[0], node.inputs[0])


@converter("IsInf", 10)
def _isinf(node):
    x = node.inputs[0]
    pos, neg = int(node.attr("detect_positive", 1)), int(node.attr("detect_negative", 1))
    if pos and neg:
        return call("equal", call("abs", x), _c(node, np.inf))
    if pos:
        return call("equal", x, _c(node, np.inf))
    if neg:
        return call("equal", x, _c(node, -np.inf))
    if any(d is ir.ANY for d in node.shape(0)):
        return call("cast", call("zeros_like", x), dtype="bool")
    return call("broadcast_to", const(False, "bool"), shape=node.shape(0))


@converter("CastLike", 15)
def _cast_like(node):
    if node.dtype(1).startswith("float8") and not int(node.attr("saturate", 1)):
        return call("cast", node.inputs[0], dtype=node.dtype(1), saturate=False)
    return call("cast", node.inputs[0], dtype=node.dtype(1))
