"""Reductions (pattern COMM_REDUCE): ``sum mean max min variance``.

``axis`` is ``None`` (all axes), an int, or a list of ints; ``exclude=True``
reduces every axis *not* listed; ``keepdims=True`` keeps reduced axes as size 1.
``variance(data, mean)`` takes the mean (usually ``mean(data, axis, keepdims=True)``)
as its second argument, as TVM's internal ``_variance`` op does.
"""
from __future__ import annotations

import numpy as np

from ...errors import TypeInferenceError
from ..op import OpPattern
from ..types import TensorType
from ._util import broadcast_shape, kernel, norm_axes, reg, tensor_arg

R = OpPattern.COMM_REDUCE
_REDUCE_ATTRS = (("axis", None), ("keepdims", False), ("exclude", False))


def reduce_shape(shape: tuple, axes: tuple, keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce_rel(name: str, nargs: int = 1):
    def rel(types: list, attrs) -> TensorType:
        t = tensor_arg(name, types, 0, "data")
        if nargs == 2:
            m = tensor_arg(name, types, 1, "the mean")
            if m.dtype != t.dtype or broadcast_shape(t.shape, m.shape) != t.shape:
                raise TypeInferenceError(f"{name}: the mean {m} must broadcast to the data {t}")
        axes = norm_axes(name, attrs.axis, t.ndim, bool(attrs.exclude))
        shape = reduce_shape(t.shape, axes, bool(attrs.keepdims))
        return t if shape == t.shape else TensorType(shape, t.dtype)

    rel.__name__ = f"{name}_rel"
    return rel


def _reduce_kernel(name: str, fn):
    @kernel
    def run(args: list, attrs) -> np.ndarray:
        x = args[0]
        axes = norm_axes(name, attrs.axis, x.ndim, bool(attrs.exclude))
        out = fn(x, axis=axes, keepdims=bool(attrs.keepdims))
        return np.asarray(out).astype(x.dtype, copy=False)

    return run


def _mean(x, axis, keepdims):
    if x.dtype.kind in "iub":
        return np.mean(x, axis=axis, keepdims=keepdims, dtype="float64")
    return np.mean(x, axis=axis, keepdims=keepdims)


for _name, _fn, _doc in [
    ("sum", np.sum, "Sum over axes."),
    ("mean", _mean, "Arithmetic mean over axes."),
    ("max", np.max, "Maximum over axes."),
    ("min", np.min, "Minimum over axes."),
]:
    reg(_name, 1, _reduce_rel(_name), _reduce_kernel(_name, _fn), attrs=_REDUCE_ATTRS, pattern=R, summary=_doc)


@kernel
def _variance(args: list, attrs) -> np.ndarray:
    x, m = args
    axes = norm_axes("variance", attrs.axis, x.ndim, bool(attrs.exclude))
    dev = np.square(x.astype("float64") - m.astype("float64"))
    count = 1
    for a in axes:
        count *= x.shape[a]
    if attrs.unbiased:
        count -= 1
    out = np.sum(dev, axis=axes, keepdims=bool(attrs.keepdims)) / count
    return np.asarray(out).astype(x.dtype, copy=False)


reg("variance", 2, _reduce_rel("variance", 2), _variance, attrs=_REDUCE_ATTRS + (("unbiased", False),),
    pattern=R, summary="Variance over axes given the mean (unbiased divides by N-1).")
