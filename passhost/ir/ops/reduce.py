"""Reductions (pattern COMM_REDUCE): ``sum mean max min prod variance argmax argmin``.

``axis`` is ``None`` (all axes), an int, or a list of ints; ``exclude=True``
reduces every axis *not* listed; ``keepdims=True`` keeps reduced axes as size 1.
``variance(data, mean)`` takes the mean (usually ``mean(data, axis, keepdims=True)``)
as its second argument, as TVM's internal ``_variance`` op does.

``argmax``/``argmin`` return ``int32`` indices (TVM's index dtype: the dtype of the data's
shape, int32 for shapes written with Python ints). As TVM's ``GetReduceAxes``, an ``axis``
that is None or empty reduces every axis whatever ``exclude`` says, and a scalar is an
error; ``exclude`` with every axis listed reduces none (the indices are then 0). Over several axes
the index is the flat (row-major) position within the reduced axes, as TVM's topi
computes it; ``select_last_index=True`` picks the last of equal extremes (ONNX's
``select_last_index``), otherwise the first::

    argmax(%x, axis=[1], keepdims=True)   /* %x: Tensor[(2, 5), float32] -> Tensor[(2, 1), int32] */
"""
from __future__ import annotations

import numpy as np

from ...errors import TypeInferenceError
from ..op import OpPattern
from ..types import TensorType
from ._util import broadcast_shape, broadcasts_to, kernel, norm_axes, reg, tensor_arg

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
            if m.dtype != t.dtype or (broadcast_shape(t.shape, m.shape) != t.shape if t.is_static and m.is_static
                                      else not broadcasts_to(m.shape, t.shape)):
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


def _extreme(fn, highest: bool):
    """``np.max``/``np.min``, whose reduction over no element is ONNX's identity (the lowest
    value for a maximum, the highest for a minimum) instead of numpy's error: an axis whose
    size is a size variable may be empty at run time."""
    def run(x, axis, keepdims):
        if x.size or not any(x.shape[a] == 0 for a in axis):
            return fn(x, axis=axis, keepdims=keepdims)
        if x.dtype.kind == "b":
            ident = not highest
        elif x.dtype.kind in "iu":
            ident = np.iinfo(x.dtype).min if highest else np.iinfo(x.dtype).max
        else:
            ident = -np.inf if highest else np.inf
        return fn(x, axis=axis, keepdims=keepdims, initial=ident)

    return run


for _name, _fn, _doc in [
    ("sum", np.sum, "Sum over axes."),
    ("mean", _mean, "Arithmetic mean over axes."),
    ("max", _extreme(np.max, True), "Maximum over axes (over no element: the dtype's lowest value)."),
    ("min", _extreme(np.min, False), "Minimum over axes (over no element: the dtype's highest value)."),
    ("prod", np.prod, "Product over axes."),
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


# -- argmax / argmin -----------------------------------------------------------------
_ARG_ATTRS = (("axis", None), ("keepdims", False), ("select_last_index", False), ("exclude", False))


def arg_axes(name: str, axis, ndim: int, exclude: bool) -> tuple:
    """The axes ``argmax``/``argmin`` reduce, as TVM's ``GetReduceAxes``: every axis when
    ``axis`` is None or empty (``exclude`` is then ignored), else ``axis`` (or, with
    ``exclude``, the others). A rank-0 tensor has nothing to reduce: an error, as in TVM."""
    if ndim == 0:
        raise TypeInferenceError(f"{name}: the data is a scalar; argmax/argmin need a tensor of rank 1 or more")
    if axis is None or (isinstance(axis, tuple) and not axis):
        return tuple(range(ndim))
    return norm_axes(name, axis, ndim, exclude)


def _arg_rel(name: str):
    def rel(types: list, attrs) -> TensorType:
        t = tensor_arg(name, types, 0, "data")
        axes = arg_axes(name, attrs.axis, t.ndim, bool(attrs.exclude))
        for a in axes:
            if t.shape[a] == 0:
                raise TypeInferenceError(f"{name}: cannot reduce the empty axis {a} of {t}")
        return TensorType(reduce_shape(t.shape, axes, bool(attrs.keepdims)), "int32")

    rel.__name__ = f"{name}_rel"
    return rel


def _arg_kernel(name: str, fn):
    @kernel
    def run(args: list, attrs) -> np.ndarray:
        x = args[0]
        axes = arg_axes(name, attrs.axis, x.ndim, bool(attrs.exclude))
        keep = [i for i in range(x.ndim) if i not in axes]
        flat = np.transpose(x, keep + list(axes)).reshape([x.shape[i] for i in keep] + [-1])
        if attrs.select_last_index:
            n = flat.shape[-1]
            idx = n - 1 - fn(flat[..., ::-1], axis=-1)
        else:
            idx = fn(flat, axis=-1)
        if attrs.keepdims:
            idx = idx.reshape(reduce_shape(x.shape, axes, True))
        return np.asarray(idx).astype("int32")

    return run


reg("argmax", 1, _arg_rel("argmax"), _arg_kernel("argmax", np.argmax), attrs=_ARG_ATTRS, pattern=R,
    summary="Index (int32) of the maximum over axes (first one, or the last with select_last_index).")
reg("argmin", 1, _arg_rel("argmin"), _arg_kernel("argmin", np.argmin), attrs=_ARG_ATTRS, pattern=R,
    summary="Index (int32) of the minimum over axes (first one, or the last with select_last_index).")
