"""The unpackings SimplifyInference's rules apply: a normalisation operator written out
in plain arithmetic, in TVM's exact operator order (see :mod:`.simplify_inference`)::

    nn.batch_norm(%x, %g, %b, %m, %v)[0]    # NCHW, epsilon=1e-05
    ->  add(multiply(%x, expand_dims(%scale, axis=1, num_newaxis=2)),
            expand_dims(%shift, axis=1, num_newaxis=2))
"""
from __future__ import annotations

from typing import Any

import numpy as np

from passhost import ir
from passhost.ir import Call, Constant, Expr, Op, TensorType

__all__ = ["batch_norm_to_infer", "layer_norm_to_infer", "instance_norm_to_infer"]

# the operators of the batch_norm unpacking (built with Call directly: one per replacement
# node, and the builders' argument conversion is not needed for expressions)
_ADD, _MULTIPLY, _DIVIDE = Op.get("add"), Op.get("multiply"), Op.get("divide")
_SQRT, _NEGATIVE = Op.get("sqrt"), Op.get("negative")


#: (value, dtype) -> the read-only 0-d array of that scalar. Every replacement gets its
#: own Constant node, but they can share one immutable array (Constant keeps a read-only
#: C-contiguous array as it is), so the numpy conversion runs once per distinct scalar.
_SCALARS: dict = {}


def _scalar(value: float, dtype: str) -> Constant:
    """``MakeConstantScalar(dtype, float(value))``: the value goes through float32 first."""
    key = (value, dtype)
    arr = _SCALARS.get(key)
    if arr is None:
        with np.errstate(all="ignore"):
            arr = np.array(np.float32(value), dtype=dtype)
        arr.flags.writeable = False
        if len(_SCALARS) < 256:
            _SCALARS[key] = arr
    return Constant(arr)


def _norm_axis(axis: int, ndim: int) -> int:
    return axis + ndim if axis < 0 else axis


def batch_norm_to_infer(attrs: Any, data: Expr, gamma: Expr, beta: Expr, mean: Expr, var: Expr,
                        ty: TensorType) -> Expr:
    """``BatchNormToInferUnpack``: ``data * scale + shift`` in TVM's op order."""
    eps = _scalar(attrs.epsilon, ty.dtype)
    scale = Call(_DIVIDE, (_scalar(1.0, ty.dtype), Call(_SQRT, (Call(_ADD, (var, eps)),))))
    if attrs.scale:
        scale = Call(_MULTIPLY, (scale, gamma))
    shift = Call(_MULTIPLY, (Call(_NEGATIVE, (mean,)), scale))
    if attrs.center:
        shift = Call(_ADD, (shift, beta))
    ndim = len(ty.shape)
    axis = _norm_axis(attrs.axis, ndim)
    scale = ir.expand_bias_to_match_axis(scale, ndim, axis)
    shift = ir.expand_bias_to_match_axis(shift, ndim, axis)
    return Call(_ADD, (Call(_MULTIPLY, (data, scale)), shift))


def _normalize(data: Expr, axis: Any, eps: Constant) -> Expr:
    mean = ir.mean(data, axis, keepdims=True)
    var = ir.variance(data, mean, axis, keepdims=True)
    return ir.divide(ir.subtract(data, mean), ir.sqrt(ir.add(var, eps)))


def _affine(out: Expr, attrs: Any, gamma: Expr, beta: Expr, ndim: int, axis: int) -> Expr:
    if attrs.scale:
        out = ir.multiply(out, ir.expand_bias_to_match_axis(gamma, ndim, axis))
    if attrs.center:
        out = ir.add(out, ir.expand_bias_to_match_axis(beta, ndim, axis))
    return out


def layer_norm_to_infer(attrs: Any, data: Expr, gamma: Expr, beta: Expr, ty: TensorType) -> Expr:
    """``LayerNormToInferUnpack``: normalise over ``axis`` (given as written), then
    scale and shift."""
    out = _normalize(data, (attrs.axis,), _scalar(attrs.epsilon, ty.dtype))
    ndim = len(ty.shape)
    return _affine(out, attrs, gamma, beta, ndim, _norm_axis(attrs.axis, ndim))


def instance_norm_to_infer(attrs: Any, data: Expr, gamma: Expr, beta: Expr, ty: TensorType) -> Expr:
    """``InstanceNormToInferUnpack``: normalise over every axis but 0 and ``axis``."""
    ndim = len(ty.shape)
    axis = _norm_axis(attrs.axis, ndim)
    reduced = tuple(i for i in range(1, ndim) if i != axis)
    out = _normalize(data, reduced, _scalar(attrs.epsilon, "float32"))
    return _affine(out, attrs, gamma, beta, ndim, axis)
