"""Ranges, scans, sorting and encodings: ``arange cumsum cumprod topk one_hot ndarray_size``.

Names and attributes are Relay's. ``arange`` takes its bounds as attributes (the output
shape follows from them), so it has no arguments, as ``zeros`` has; the bounds of an
integer range may be dimensions (size variables or expressions over them, never ``?``)::

    arange(start=0f, stop=5f, step=2f, dtype="float32")        /* ty=Tensor[(3), float32] */
    arange(start=0, stop=seq, step=1, dtype="int64")           /* ty=Tensor[(seq), int64] */
    cumsum(%x, axis=1, exclusive=True)                           /* running sums, each without itself */
    topk(%x, k=2)                                                /* (values, indices), largest first */
    one_hot(%i, 1f, 0f, depth=4)                                 /* a new last axis of 4 */
    ndarray_size(%x, dtype="int64")                              /* a scalar: the element count */
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..op import OpPattern
from ..types import TensorType, TupleType, check_dtype
from ..dims import ANY, Dim, UndecidableDim, dmax
from ._util import dim_prod, kernel, norm_axis, provably_greater, reg, tensor_arg

OPAQUE, INJECTIVE = OpPattern.OPAQUE, OpPattern.INJECTIVE


def _dtype_check(op: str, key: str = "dtype", allow_empty: bool = False):
    def check(attrs) -> None:
        value = attrs[key]
        if allow_empty and not value:
            return
        try:
            check_dtype(value)
        except IRError as err:
            raise IRError(f"operator {op}: attribute {key}: {err}") from None

    return check


# -- arange -------------------------------------------------------------------------------
def _arange_len(attrs):
    """The element count; an integer range may have symbolic bounds (``stop=seq``): then
    ``max(ceil((stop - start) / step), 0)`` in integer arithmetic, ``?`` where a symbolic
    step's sign or quotient is not known."""
    start, stop, step = attrs.start, attrs.stop, attrs.step
    if stop is None:
        start, stop = 0, start
    if type(start) is not Dim and type(stop) is not Dim and type(step) is not Dim:
        return max(int(math.ceil((stop - start) / step)), 0)
    try:
        if step > 0:
            return dmax((stop - start + step - 1) // step, 0)
        return dmax((start - stop - step - 1) // -step, 0)
    except UndecidableDim:
        return ANY


def _arange_check(attrs) -> None:
    symbolic = False
    for key in ("start", "stop", "step"):
        v = attrs[key]
        if v is ANY:
            raise IRError(f"operator arange: attribute {key} is ?: a bound must be a number or a known dimension "
                          "(an int or a size-variable expression such as seq)")
        if type(v) is Dim:
            symbolic = True
        elif v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise IRError(f"operator arange: attribute {key} must be a number, got {v!r}")
    if attrs.start is None:
        raise IRError("operator arange: attribute start is required")
    if symbolic:
        floats = [k for k in ("start", "stop", "step") if type(attrs[k]) is float]
        if floats:
            raise IRError(f"operator arange: a symbolic bound needs an integer range, but {floats[0]}="
                          f"{attrs[floats[0]]!r} is a float")
    if type(attrs.step) is not Dim and not attrs.step:
        raise IRError("operator arange: attribute step must not be 0")
    _dtype_check("arange")(attrs)


def _arange_rel(types: list, attrs) -> TensorType:
    return TensorType((_arange_len(attrs),), attrs.dtype)


@kernel
def _arange(args: list, attrs) -> np.ndarray:
    start = 0 if attrs.stop is None else attrs.start
    n = _arange_len(attrs)
    return (start + np.arange(n, dtype="float64") * attrs.step).astype(attrs.dtype)


reg("arange", 0, _arange_rel, _arange, attrs=(("start", None), ("stop", None), ("step", 1), ("dtype", "float32")),
    pattern=OPAQUE, attr_check=_arange_check,
    summary="Evenly spaced values in [start, stop) (stop omitted: [0, start)).")


# -- cumsum -------------------------------------------------------------------------------
def _scan_rel(op: str):
    def rel(types: list, attrs) -> TensorType:
        data = tensor_arg(op, types, 0, "data")
        dtype = attrs.dtype or data.dtype
        if attrs.axis is None:
            return TensorType((dim_prod(data.shape),), dtype)
        norm_axis(op, attrs.axis, data.ndim)
        return TensorType(data.shape, dtype)

    rel.__name__ = f"{op}_rel"
    return rel


def _scan_input(x: np.ndarray, attrs) -> tuple:
    """``(data, axis, dtype)`` of a scan: ``axis`` None scans the flattened data."""
    if attrs.axis is None:
        return x.reshape(-1), 0, attrs.dtype or x.dtype.name
    return x, attrs.axis % x.ndim, attrs.dtype or x.dtype.name


@kernel
def _cumsum(args: list, attrs) -> np.ndarray:
    x, axis, dtype = _scan_input(args[0], attrs)
    out = np.cumsum(x, axis=axis, dtype=dtype)
    if attrs.exclusive:
        out = out - x.astype(dtype)
    return out.astype(dtype, copy=False)


@kernel
def _cumprod(args: list, attrs) -> np.ndarray:
    x, axis, dtype = _scan_input(args[0], attrs)
    out = np.cumprod(x, axis=axis, dtype=dtype)
    if attrs.exclusive:  # each product without its own element: shifted by one, 1 first
        ones = np.ones(x.shape[:axis] + (1,) + x.shape[axis + 1:], dtype)
        out = np.concatenate([ones, np.delete(out, -1, axis=axis)], axis=axis) if x.shape[axis] else out
    return out.astype(dtype, copy=False)


reg("cumprod", 1, _scan_rel("cumprod"), _cumprod, attrs=(("axis", None), ("dtype", ""), ("exclusive", False)),
    pattern=OPAQUE, attr_check=_dtype_check("cumprod", allow_empty=True),
    summary="Running products along an axis (None: of the flattened data); exclusive leaves each element out.")
reg("cumsum", 1, _scan_rel("cumsum"), _cumsum, attrs=(("axis", None), ("dtype", ""), ("exclusive", False)),
    pattern=OPAQUE, attr_check=_dtype_check("cumsum", allow_empty=True),
    summary="Running sums along an axis (None: of the flattened data); exclusive leaves each element out.")


# -- topk ---------------------------------------------------------------------------------
def _topk_check(attrs) -> None:
    if attrs.ret_type not in ("both", "values", "indices"):
        raise IRError(f"operator topk: ret_type must be 'both', 'values' or 'indices', got {attrs.ret_type!r}")
    if isinstance(attrs.k, bool) or not isinstance(attrs.k, int) or attrs.k < 0:
        raise IRError(f"operator topk: k must be a non-negative int, got {attrs.k!r}")
    _dtype_check("topk")(attrs)


def _topk_rel(types: list, attrs):
    data = tensor_arg("topk", types, 0, "data")
    axis = norm_axis("topk", attrs.axis, data.ndim)
    k = attrs.k or data.shape[axis]
    if provably_greater(k, data.shape[axis]):
        raise TypeInferenceError(f"topk: k={k} is larger than axis {axis} of {data}")
    shape = data.shape[:axis] + (k,) + data.shape[axis + 1:]
    values, indices = TensorType(shape, data.dtype), TensorType(shape, attrs.dtype)
    return {"both": TupleType([values, indices]), "values": values, "indices": indices}[attrs.ret_type]


@kernel
def _topk(args: list, attrs):
    x = args[0]
    axis = attrs.axis % x.ndim
    k = attrs.k or x.shape[axis]
    keys = x if attrs.is_ascend else -x.astype("float64") if x.dtype.kind != "b" else ~x
    order = np.argsort(keys, axis=axis, kind="stable")  # ties: the smaller index first
    idx = np.take(order, np.arange(k), axis=axis)
    values = np.take_along_axis(x, idx, axis=axis)
    indices = idx.astype(attrs.dtype)
    return {"both": (values, indices), "values": values, "indices": indices}[attrs.ret_type]


reg("topk", 1, _topk_rel, _topk,
    attrs=(("k", 1), ("axis", -1), ("ret_type", "both"), ("is_ascend", False), ("dtype", "int32")),
    pattern=OPAQUE, attr_check=_topk_check,
    summary="The k largest (is_ascend: smallest) values along an axis and their indices; ties keep index order.")


# -- one_hot ------------------------------------------------------------------------------
def _one_hot_check(attrs) -> None:
    if isinstance(attrs.depth, bool) or not isinstance(attrs.depth, int) or attrs.depth < 0:
        raise IRError(f"operator one_hot: depth must be a non-negative int, got {attrs.depth!r}")
    _dtype_check("one_hot")(attrs)


def _one_hot_rel(types: list, attrs) -> TensorType:
    indices = tensor_arg("one_hot", types, 0, "indices")
    if indices.dtype.startswith(("float", "bool")):
        raise TypeInferenceError(f"one_hot: indices must be integers, got {indices.dtype}")
    for i, what in ((1, "on_value"), (2, "off_value")):
        t = tensor_arg("one_hot", types, i, what)
        if t.ndim != 0:
            raise TypeInferenceError(f"one_hot: {what} must be a scalar, got {t}")
    axis = norm_axis("one_hot", attrs.axis, indices.ndim, extra=1)
    shape = indices.shape[:axis] + (attrs.depth,) + indices.shape[axis:]
    return TensorType(shape, attrs.dtype)


@kernel
def _one_hot(args: list, attrs) -> np.ndarray:
    indices, on, off = args
    axis = attrs.axis % (indices.ndim + 1)
    hot = np.expand_dims(indices, axis) == np.arange(attrs.depth).reshape(
        (-1,) + (1,) * (indices.ndim - axis))
    return np.where(hot, on, off).astype(attrs.dtype)


reg("one_hot", 3, _one_hot_rel, _one_hot, attrs=(("depth", None), ("axis", -1), ("dtype", "float32")),
    pattern=INJECTIVE, attr_check=_one_hot_check,
    summary="on_value where a new axis of depth positions equals the index, off_value elsewhere.")


# -- ndarray_size -------------------------------------------------------------------------
def _size_rel(types: list, attrs) -> TensorType:
    tensor_arg("ndarray_size", types, 0, "data")
    return TensorType((), attrs.dtype)


@kernel
def _size(args: list, attrs) -> np.ndarray:
    return np.asarray(args[0].size, dtype=attrs.dtype)


reg("ndarray_size", 1, _size_rel, _size, attrs=(("dtype", "int32"),), pattern=OPAQUE,
    attr_check=_dtype_check("ndarray_size"), summary="The number of elements of a tensor, as a scalar.")
