"""Converters of element-wise and reduction operators."""
from __future__ import annotations

from typing import Optional

import ml_dtypes
import numpy as np

from passhost.ir.pattern import is_op, wildcard

from .build import call, const
from .composites import calls, composite
from .dtypes import FLOAT_DTYPES
from .emit import _reduce_node, reduce_axes
from .table import converter

_BINARY = {"Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide", "Pow": "power",
           "Equal": "equal", "Less": "less", "Greater": "greater", "LessOrEqual": "less_equal",
           "GreaterOrEqual": "greater_equal"}
_UNARY = {"Relu": "nn.relu", "Exp": "exp", "Log": "log", "Sqrt": "sqrt", "Neg": "negative", "Sigmoid": "sigmoid",
          "Tanh": "tanh"}


def _binary(name: str):
    def convert(node):
        a, b = node.inputs[0], node.inputs[1]
        if name == "power" and node.dtype(0) != node.dtype(1):
            b = call("cast", b, dtype=node.dtype(0))
        return call(name, a, b)
    return convert


for _onnx, _ours in _BINARY.items():
    converter(_onnx, 7)(_binary(_ours))


def _unary(name: str):
    def convert(node):
        return call(name, node.inputs[0])
    return convert


for _onnx, _ours in _UNARY.items():
    converter(_onnx, 6)(_unary(_ours))


@converter("Reciprocal", 6)
def _reciprocal(node):
    return call("divide", const(1, node.dtype(0)), node.inputs[0])


@converter("Not", 1)
def _not(node):
    return call("logical_not", node.inputs[0])


@converter("Identity", 1)
def _identity(node):
    return node.inputs[0]


@converter("LeakyRelu", 6)
def _leaky_relu(node):
    return call("nn.leaky_relu", node.inputs[0], alpha=float(node.attr("alpha", 0.01)))


@converter("Clip", 6)
def _clip_attrs(node):
    lo = float(node.attr("min", -np.inf))
    hi = float(node.attr("max", np.inf))
    return call("clip", node.inputs[0], a_min=lo, a_max=hi)


@converter("Clip", 11)
def _clip_inputs(node):
    x = node.inputs[0]
    lo, hi = node.input(1), node.input(2)
    lo_v, hi_v = node.const(1), node.const(2)
    if (lo is None or lo_v is not None) and (hi is None or hi_v is not None):
        info = ml_dtypes.finfo if node.dtype(0) in FLOAT_DTYPES else ml_dtypes.iinfo  # (bfloat16, int4 too)
        lim = info(node.dtype(0))
        return call("clip", x, a_min=float(lo_v) if lo is not None else float(lim.min),
                    a_max=float(hi_v) if hi is not None else float(lim.max))
    out = x
    if lo is not None:
        out = call("maximum", out, lo)
    if hi is not None:
        out = call("minimum", out, hi)
    return out


def _variadic(name: str):
    def convert(node):
        args = [x for x in node.inputs if x is not None]
        out = args[0]
        for x in args[1:]:
            out = call(name, out, x)
        return out
    return convert


converter("Sum", 6)(_variadic("add"))
converter("Max", 6)(_variadic("maximum"))
converter("Min", 6)(_variadic("minimum"))


@converter("Mean", 6)
def _mean(node):
    total = _variadic("add")(node)
    return call("divide", total, const(len([x for x in node.inputs if x is not None]), node.dtype(0)))


@converter("Where", 9)
def _where(node):
    return call("where", *node.inputs[:3])


@converter("Cast", 6)
def _cast(node):
    from .dtypes import to_dtype

    dtype = to_dtype(int(node.attr("to")), repr(node))
    if dtype.startswith("float8") and not int(node.attr("saturate", 1)):
        return call("cast", node.inputs[0], dtype=dtype, saturate=False)
    return call("cast", node.inputs[0], dtype=dtype)


_REDUCE = {"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min", "ReduceProd": "prod",
           "ReduceL1": "l1", "ReduceL2": "l2", "ReduceLogSum": "logsum", "ReduceLogSumExp": "logsumexp",
           "ReduceSumSquare": "sumsquare"}
#: reductions built from a host reduction: (before, host op, after)
_COMPOSED = {"l1": ("abs", "sum", None), "l2": ("square", "sum", "sqrt"), "logsum": (None, "sum", "log"),
             "sumsquare": ("square", "sum", None)}
#: the value of a reduction over an empty set (ONNX's identities)
_EMPTY = {"sum": 0, "mean": np.nan, "max": -np.inf, "min": np.inf, "prod": 1, "l1": 0, "l2": 0,
          "logsum": -np.inf, "logsumexp": -np.inf, "sumsquare": 0}


def _empty_reduce(node, name: str, axis, keepdims: bool):
    shape = node.shape(0)
    nd = len(shape)
    axes = set(range(nd)) if axis is None else {a % nd for a in axis}
    out = [1 if i in axes else d for i, d in enumerate(shape) if keepdims or i not in axes]
    dtype = node.dtype(0)
    value = _EMPTY[name]
    if dtype == "bool":
        value = name == "min"
    elif np.dtype(dtype).kind in "iu" and not np.isfinite(value):
        info = np.iinfo(dtype)
        value = info.min if value < 0 else info.max
    from passhost import ir

    if not all(type(d) is int for d in out):  # (the axes kept are dynamic)
        if any(d is ir.ANY for d in out):
            raise node.error(f"a reduction over an empty axis of a shape with unknown sizes {tuple(map(str, shape))}")
        return call("full", const(value, dtype), shape=tuple(out), dtype=dtype)
    return ir.Constant(np.full(out, value, dtype=dtype))


def _log_sum_exp(x, axis, keepdims: bool):
    """``log(sum(exp(x)))`` with the maximum taken out first, as TVM's ``relay.logsumexp``
    writes it (``log(sum(exp(x - m))) + m``): ``exp`` alone overflows once an element
    passes about 88.7 in float32, where onnxruntime's ``ReduceLogSumExp`` stays finite."""
    m = call("max", x, axis=axis, keepdims=True)
    out = call("add", call("log", call("sum", call("exp", call("subtract", x, m)), axis=axis, keepdims=True)), m)
    return out if keepdims else call("squeeze", out, axis=axis)


def _apply(name: str, x, axis, keepdims: bool):
    if name == "logsumexp":
        return _log_sum_exp(x, axis, keepdims)
    before, op, after = _COMPOSED.get(name, (None, name, None))
    if before == "square":
        x = call("multiply", x, x)
    elif before:
        x = call(before, x)
    out = call(op, x, axis=axis, keepdims=keepdims)
    return call(after, out) if after else out


def _reduce(name: str, axes_input: bool):
    def convert(node):
        if axes_input:
            axes = node.need_const(1, "the axes") if node.input(1) is not None else None
        else:
            axes = node.attr("axes")
        keepdims = bool(node.attr("keepdims", 1))
        if axes is None or len(axes) == 0:
            if axes_input and node.attr("noop_with_empty_axes", 0):
                return node.inputs[0]
            axis = None
        else:
            axis = tuple(int(a) for a in np.asarray(axes).reshape(-1))
        shape = node.shape(0)
        if axis is not None and any(not -len(shape) <= a < len(shape) for a in axis):
            raise node.error(f"axes {list(axis)} are out of range for its rank-{len(shape)} input "
                             f"(valid: {-len(shape)}..{len(shape) - 1})")
        reduced = range(len(shape)) if axis is None else axis
        if any(shape[a] == 0 for a in reduced):
            return _empty_reduce(node, name, axis, keepdims)
        return _apply(name, node.inputs[0], axis, keepdims)
    return convert


for _onnx, _ours in _REDUCE.items():
    converter(_onnx, 1)(_reduce(_ours, False))
    converter(_onnx, 13 if _onnx == "ReduceSum" else 18)(_reduce(_ours, True))


# -- the way back: composite patterns of the reductions above (see :mod:`.composites`) -----------
_x = wildcard()
_sum_sq = is_op("sum")(is_op("multiply")(_x, _x))
_m = is_op("max")(_x)
_lse = is_op("add")(is_op("log")(is_op("sum")(is_op("exp")(is_op("subtract")(_x, _m)))), _m)


def _reduce_back(em, onnx_op: str, total, args, keep: bool) -> Optional[str]:
    """``onnx_op`` over the axes of reduction ``total`` (none: declined)."""
    axes = reduce_axes(total)
    return _reduce_node(em, onnx_op, 18, args[0], axes, int(keep)) if axes else None


@composite("onnx.ReduceL2", is_op("sqrt")(_sum_sq), stage=0)
@composite("onnx.ReduceSumSquare", _sum_sq)
def _sum_square_back(em, m, args):
    """``sum(multiply(x, x))`` -> ``ReduceSumSquare(x)``; ``sqrt(sum(multiply(x, x)))`` -> ``ReduceL2(x)``"""
    l2 = calls(m.root, "sqrt")
    total = m.root.args[0] if l2 else m.root
    return _reduce_back(em, "ReduceL2" if l2 else "ReduceSumSquare", total, args, total.attrs.keepdims)


def _lse_parts(root) -> Optional[tuple]:
    """``(total, m)``: the sum and the max of a matched ``log(sum(exp(x - m))) + m``, if they
    reduce the same axes, keeping them."""
    log = next(a for a in root.args if calls(a, "log"))
    total = log.args[0]
    m = total.args[0].args[0].args[1]
    if not (total.attrs.keepdims and m.attrs.keepdims) or reduce_axes(total) != reduce_axes(m):
        return None
    return total, m


def _dropped(root) -> bool:
    """Whether ``root``, a squeeze or a reshape of a matched log-sum-exp, drops its reduced axes."""
    parts = _lse_parts(root.args[0])
    if parts is None:
        return False
    axes = reduce_axes(parts[0])
    kept = tuple(d for i, d in enumerate(root.args[0].checked_type.shape) if i not in axes)
    if calls(root, "squeeze"):
        nd = len(root.args[0].checked_type.shape)
        return (nd == len(axes)) if root.attrs.axis is None else sorted(a % nd for a in root.attrs.axis) == axes
    return tuple(root.checked_type.shape) == kept


@composite("onnx.ReduceLogSumExp/dropped", is_op("squeeze")(_lse) | is_op("reshape")(_lse), stage=0, check=_dropped)
@composite("onnx.ReduceLogSumExp", _lse, check=lambda root: _lse_parts(root) is not None)
def _lse_back(em, m, args):
    """``add(log(sum(exp(subtract(x, m)))), m)``, ``m = max(x)`` -> ``ReduceLogSumExp(x)``; under a squeeze
    (or the reshape -O3 makes of it) dropping the reduced axes -> ``ReduceLogSumExp(x, keepdims=0)``"""
    kept = calls(m.root, "add")
    return _reduce_back(em, "ReduceLogSumExp", _lse_parts(m.root if kept else m.root.args[0])[0], args, kept)
