"""Converters of element-wise math, activations and logic that map to one host operator or
decompose into a few, as TVM's ``from_onnx`` decomposes them::

    Elu(x, alpha=a)       ->  where(less(x, 0f), multiply(a, subtract(exp(x), 1f)), x)
    Softplus(x)           ->  add(log(add(exp(negative(abs(x))), 1f)), nn.relu(x))
    And(a, b) (bool)      ->  minimum(a, b)
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from passhost import ir
from passhost.ir.pattern import is_constant, is_op, wildcard

from .build import call, const, reshape
from .composites import calls, composite, example, split
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


# -- the way back: composite patterns of the decompositions above (see :mod:`.composites`) -------
_x = wildcard()
_CLIP01 = {"a_min": 0.0, "a_max": 1.0}
_hard_sigmoid = is_op("clip")(is_op("add")(is_op("multiply")(_x, is_constant()) | _x, is_constant())).has_attr(_CLIP01)
_hard_sigmoid_x6 = is_op("clip")(is_op("add")(is_op("multiply")(_x, is_constant()), is_constant())).has_attr(_CLIP01)
_stable_softplus = is_op("add")(is_op("log")(is_op("add")(is_op("exp")(is_op("negative")(is_op("abs")(_x))),
                                                          is_constant())), is_op("nn.relu")(_x))
_plain_softplus = is_op("log")(is_op("add")(is_op("exp")(_x), is_constant()))
_softplus_form = _stable_softplus | _plain_softplus
_SIXTH = float(np.float32(1 / 6))


def _hard_sigmoid_params(clip: ir.Call) -> Optional[tuple]:
    """``(alpha, beta)`` of ``clip(add(multiply(x, alpha), beta), 0, 1)`` (``alpha`` 1
    without the multiply: FoldScaleAxis moved it into the convolution before), if scalars."""
    inner, beta = split(clip.args[0])
    if beta is None:
        return None
    if calls(inner, "multiply") and any(type(a) is ir.Constant for a in inner.args):
        alpha = split(inner)[1]
        return None if alpha is None else (alpha, beta)
    return 1.0, beta


def _hard_swish_ok(root: ir.Call) -> bool:
    """Whether ``root``, ``multiply(x, clip(add(multiply(x, a), b)))``, has ``a = 1/6, b = 1/2``."""
    for x, clip in (root.args, root.args[::-1]):
        if calls(clip, "clip"):
            mul = split(clip.args[0])[0]
            if calls(mul, "multiply") and split(mul)[0] is x and _hard_sigmoid_params(clip) == (_SIXTH, 0.5):
                return True
    return False


def _hard_swish_example(rng) -> list:
    return [example(rng, lambda x: ir.multiply(x, ir.clip(ir.add(ir.multiply(x, ir.const(np.float32(_SIXTH))),
                                                               ir.const(np.float32(0.5))), 0.0, 1.0)))]


@composite("onnx.HardSwish", is_op("multiply")(_x, _hard_sigmoid_x6), since=14, stage=0, check=_hard_swish_ok,
           examples=_hard_swish_example)
def _hard_swish_back(em, m, args):
    """``Mul(x, HardSigmoid(x, 1/6, 1/2))`` -> ``HardSwish(x)``"""
    return em.one("HardSwish", args)


@composite("onnx.HardSigmoid", _hard_sigmoid, check=_hard_sigmoid_params)
def _hard_sigmoid_back(em, m, args):
    """``clip(add(multiply(x, a), b), 0, 1)`` -> ``HardSigmoid(x, alpha=a, beta=b)``"""
    alpha, beta = m.info

    return em.one("HardSigmoid", args, alpha=alpha, beta=beta)


def _softplus_ok(sp: ir.Call) -> bool:
    """Whether the constant of a matched softplus (either form) is 1."""
    if calls(sp, "add"):  # the stable form: add(log(...), nn.relu(x))
        sp = next(a for a in sp.args if calls(a, "log"))
    return split(sp.args[0])[1] == 1.0


def _softplus_input(s: ir.Expr) -> Optional[ir.Expr]:
    """``x`` of a softplus of ``x`` (either form, matched), else ``None``."""
    if not _softplus_form.match(s):
        return None
    if s.op.name == "add":  # the stable form: add(log(...), nn.relu(x))
        relu = [a for a in s.args if calls(a, "nn.relu")]
        return relu[0].args[0] if relu else None
    e = split(s.args[0])[0] if s.op.name == "log" else None  # log(add(exp(x), 1))
    return e.args[0] if calls(e, "exp") else None


def _mish_x(root: ir.Call) -> Optional[ir.Expr]:
    """``x`` when ``root`` is ``multiply(x, tanh(softplus(x)))`` with a softplus of constant 1."""
    for x, t in (root.args, root.args[::-1]):
        s = t.args[0] if calls(t, "tanh") else None
        if s is not None and _softplus_input(s) is x and _softplus_ok(s):
            return x
    return None


@composite("onnx.Softplus", _stable_softplus, check=_softplus_ok)
@composite("onnx.Softplus/plain", _plain_softplus, stage=2, check=_softplus_ok)
def _softplus_back(em, m, args):
    """``add(log(add(exp(negative(abs(x))), 1f)), nn.relu(x))``, or TVM's ``log(add(exp(x), 1f))``
    -> ``Softplus(x)``"""
    return em.one("Softplus", args)


def _shared_example(rng) -> list:
    return [example(rng, lambda x: ir.multiply(x, ir.tanh(softplus(x, ir.const(np.float32(1))))), (3,))]


@composite("onnx.Mish", is_op("multiply")(_x, is_op("tanh")(_softplus_form)), since=18, stage=0,
           check=lambda root: _mish_x(root) is not None)
@composite("onnx.Mish/shared", is_op("multiply")(_x, is_op("tanh")(wildcard())), since=18, stage=3,
           check=lambda root: _mish_x(root) is not None, examples=_shared_example)
def _mish_back(em, m, args):
    """``multiply(x, tanh(softplus(x)))`` -> ``Mish(x)``; ``Mish/shared``: the softplus is read
    elsewhere too, and stays for its other readers"""
    return em.one("Mish", [args[m.leaves.index(_mish_x(m.root))]])




_elu_tail = is_op("subtract")(is_op("exp")(_x), is_constant())


def _elu_alpha(root: ir.Call) -> Optional[float]:
    """``a`` of ``where(less(x, 0), multiply(a, subtract(exp(x), 1)), x)`` (1 without the multiply)."""
    less, neg = root.args[0], root.args[1]
    sub, alpha = split(neg) if calls(neg, "multiply") else (neg, 1.0)
    if split(less)[1] != 0.0 or sub is None or split(sub)[1] != 1.0:
        return None
    return alpha


@composite("onnx.Elu", is_op("where")(is_op("less")(_x, is_constant()), is_op("multiply")(is_constant(), _elu_tail)
                                      | _elu_tail, _x), check=lambda root: _elu_alpha(root) is not None)
def _elu_back(em, m, args):
    """``where(less(x, 0f), multiply(a, subtract(exp(x), 1f)), x)`` -> ``Elu(x, alpha=a)``"""
    return em.one("Elu", args, alpha=_elu_alpha(m.root))
