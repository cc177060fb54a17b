"""Slicing, indexing and tiling: ``strided_slice take gather broadcast_to tile repeat``.

``strided_slice`` follows TVM: ``begin``/``end``/``strides`` apply to ``axes`` (all
axes from 0 when ``axes`` is None; missing trailing entries take the whole axis);
indices are clamped as Python slices are (a negative index counts from the end, an
out-of-range one is clamped); with ``slice_mode="size"`` ``end`` holds sizes (``-1``:
to the end) and strides are ignored. An empty range gives a size-0 axis (as ONNX
``Slice`` does)::

    strided_slice(%x, begin=[1], end=[3], strides=[1], axes=[1])   /* (4, 5) -> (4, 2) */

``take`` selects along ``axis`` (the flattened data when None) with ``mode``
``"clip"`` (clamp indices into range), ``"wrap"`` (modulo) or ``"fast"`` (no
adjustment: negative indices count from the end, out-of-range ones fail);
``batch_dims`` leading axes are shared by data and indices.
"""
from __future__ import annotations

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..op import OpPattern
from ..types import TensorType
from ..dims import UndecidableDim, dmax, dmin, is_static
from ._util import (broadcast_shape, broadcasts_to, check_dims_attr, dims_differ, format_dims, kernel, norm_axis, prod,
                    provably_greater, reg, shape_text, tensor_arg, unify_dim)

INJ, B = OpPattern.INJECTIVE, OpPattern.BROADCAST
#: TVM's "to the end" value for a missing or open end
MAX_INDEX = 2 ** 63 - 1


def _is_ints(v, allow_none: bool = False) -> bool:
    if v is None:
        return allow_none
    return isinstance(v, tuple) and all(isinstance(i, int) and not isinstance(i, bool) for i in v)


# -- strided_slice ---------------------------------------------------------------------
#: an int bound at least this large is past the end of any axis (no tensor has 2**62
#: elements along one axis), one at most its negative before the start: it clamps without a
#: ``min``/``max`` of a symbolic dimension (the importers write 2**63 - 1 or -2**62)
_HUGE = 2 ** 62


def _slice_params(ndim: int, attrs, op: str) -> tuple:
    """``(axes, begin, end, strides, size_mode)`` of a ``strided_slice``, checked and, with
    ``axes`` None, completed to every axis."""
    begin, end = list(attrs.begin), list(attrs.end)
    strides = list(attrs.strides) if attrs.strides else [1]
    size_mode = attrs.slice_mode == "size"
    if attrs.axes is not None:
        axes = [norm_axis(op, a, ndim) for a in attrs.axes]
        if not len(axes) == len(begin) == len(end) == len(strides):
            raise TypeInferenceError(
                f"{op}: axes, begin, end and strides must have the same length, got axes={list(attrs.axes)}, "
                f"begin={_text(begin)}, end={_text(end)}, strides={strides}")
        if len(set(axes)) != len(axes):
            raise TypeInferenceError(f"{op}: axes {list(attrs.axes)} name an axis twice")
    else:
        if max(len(begin), len(end), len(strides)) > ndim:
            raise TypeInferenceError(
                f"{op}: begin={_text(begin)}, end={_text(end)}, strides={strides} have more entries than the "
                f"rank-{ndim} data")
        axes = list(range(ndim))
        strides += [1] * (ndim - len(strides))
        begin += [0 if strides[i] > 0 else MAX_INDEX for i in range(len(begin), ndim)]
        end += [MAX_INDEX if strides[i] > 0 else -MAX_INDEX for i in range(len(end), ndim)]
    for i, a in enumerate(axes):
        if not size_mode and strides[i] == 0:
            raise TypeInferenceError(f"{op}: the stride for axis {a} is 0")
    return axes, begin, end, strides, size_mode


def _text(values: list) -> str:
    return str(values) if all(type(v) is int for v in values) else format_dims(values)


def slice_plan(shape: tuple, attrs, op: str = "strided_slice") -> tuple:
    """One ``slice`` per axis (canonical start/stop/step) for ``strided_slice`` (a static
    ``shape`` and int bounds: the kernel's, after the attributes are bound)."""
    ndim = len(shape)
    axes, begin, end, strides, size_mode = _slice_params(ndim, attrs, op)
    plan = [slice(None)] * ndim
    for i, a in enumerate(axes):
        step = 1 if size_mode else strides[i]
        b, e = begin[i], end[i]
        if size_mode:
            e = MAX_INDEX if e < 0 else b + e
        start, stop, step = slice(b, e, step).indices(shape[a])
        plan[a] = slice(start, stop if stop >= 0 else None, step)
    return tuple(plan)


def _clamped(x, n, lo, hi):
    """Python's normalisation of one slice bound ``x`` on an axis of ``n``: a negative int
    counts from the end (a symbolic bound never does), then clamped into ``[lo, hi]``."""
    if type(x) is int:
        if x >= _HUGE:
            return hi
        if x <= -_HUGE:
            return lo
        if x < 0:
            x = x + n
    return dmax(lo, dmin(x, hi))


def _ordered(lo, hi) -> bool:
    """Whether slice bounds ``lo <= hi`` provably stay in order once normalised and
    clamped: both count from the start (ints >= 0 or dimensions) or both from the end
    (negative ints), and ``lo <= hi`` (the normalisation and the clamp keep the order)."""
    if (type(lo) is int and lo < 0) != (type(hi) is int and hi < 0):
        return False
    try:
        return lo <= hi
    except UndecidableDim:
        return False


def _slice_len(n, b, e, step: int):
    """``len(range(n)[b:e:step])`` for dimensions: ``n``, ``b`` and ``e`` may be symbolic."""
    if type(n) is int and type(b) is int and type(e) is int:
        return len(range(*slice(b, e, step).indices(n)))
    if step > 0:
        if type(b) is int and -_HUGE < b < 0 and type(e) is int and e >= _HUGE:
            diff = dmin(-b, n)  # the last -b elements: n - max(n + b, 0)
        else:
            diff = _clamped(e, n, 0, n) - _clamped(b, n, 0, n)
            if not _ordered(b, e):
                diff = dmax(diff, 0)
    else:
        diff = _clamped(b, n, -1, n - 1) - _clamped(e, n, -1, n - 1)
        if not _ordered(e, b):
            diff = dmax(diff, 0)
    s = abs(step)
    return diff if s == 1 else (diff + s - 1) // s


def sliced_shape(shape: tuple, attrs, op: str = "strided_slice") -> tuple:
    """The output shape of ``strided_slice`` on ``shape``; the shape and the ``begin``/``end``
    bounds may be symbolic (clamped with ``min``/``max`` where their bounds do not decide)."""
    ndim = len(shape)
    axes, begin, end, strides, size_mode = _slice_params(ndim, attrs, op)
    out = list(shape)
    for i, a in enumerate(axes):
        step = 1 if size_mode else strides[i]
        b, e = begin[i], end[i]
        if size_mode:
            e = MAX_INDEX if type(e) is int and e < 0 else b + e
        out[a] = _slice_len(shape[a], b, e, step)
    return tuple(out)


def _strided_slice_rel(types: list, attrs) -> TensorType:
    t = tensor_arg("strided_slice", types, 0, "data")
    shape = sliced_shape(t.shape, attrs)
    return t if shape == t.shape else TensorType(shape, t.dtype)


@kernel
def _strided_slice(args: list, attrs) -> np.ndarray:
    x = args[0]
    return np.require(x[slice_plan(x.shape, attrs)], requirements="C")


def _check_strided_slice(attrs) -> None:
    op = "operator strided_slice"
    for key in ("begin", "end"):
        check_dims_attr("strided_slice", key, attrs[key], f"{op}: attribute {key} must be a list of ints, got {{v}}",
                        nonneg=False)
    if not _is_ints(attrs.strides, allow_none=True):
        raise IRError(f"{op}: attribute strides must be a list of ints, got {attrs.strides!r}")
    if not _is_ints(attrs.axes, allow_none=True):
        raise IRError(f"{op}: attribute axes must be None or a list of ints, got {attrs.axes!r}")
    if attrs.slice_mode not in ("end", "size"):
        raise IRError(f"{op}: attribute slice_mode must be \"end\" or \"size\", got {attrs.slice_mode!r}")


reg("strided_slice", 1, _strided_slice_rel, _strided_slice,
    attrs=(("begin", None), ("end", None), ("strides", None), ("slice_mode", "end"), ("axes", None)),
    pattern=INJ, attr_check=_check_strided_slice,
    summary="Slice with begin/end/strides per axis (Python-style clamping; slice_mode end or size).")


# -- take ----------------------------------------------------------------------------
def _take_geometry(dshape: tuple, ishape: tuple, attrs, op: str = "take") -> tuple:
    """``(axis, batch_dims, output shape)``; ``axis`` None means the flattened data."""
    if attrs.axis is None:
        return None, 0, ishape
    axis = norm_axis(op, attrs.axis, len(dshape))
    b = attrs.batch_dims
    if b < 0:
        b += len(ishape)
    if not 0 <= b <= min(axis, len(ishape)):
        raise TypeInferenceError(
            f"{op}: batch_dims={attrs.batch_dims} must lie in 0..{min(axis, len(ishape))} "
            f"(axis {axis}, rank-{len(ishape)} indices)")
    batch = tuple(dshape[:b])
    if batch != tuple(ishape[:b]):
        if any(map(dims_differ, batch, ishape)):
            raise TypeInferenceError(
                f"{op}: the first {b} (batch) axes of the data {shape_text(dshape)} and the indices "
                f"{shape_text(ishape)} differ")
        batch = tuple(map(unify_dim, batch, ishape))
    return axis, b, batch + tuple(dshape[b:axis]) + tuple(ishape[b:]) + tuple(dshape[axis + 1:])


def _take_rel(types: list, attrs) -> TensorType:
    data = tensor_arg("take", types, 0, "data")
    idx = tensor_arg("take", types, 1, "the indices")
    if not idx.dtype.startswith(("int", "uint")):
        raise TypeInferenceError(f"take: the indices must be integers, got {idx}")
    _, _, shape = _take_geometry(data.shape, idx.shape, attrs)
    return data if shape == data.shape else TensorType(shape, data.dtype)


def _adjust(idx: np.ndarray, n: int, mode: str) -> np.ndarray:
    idx = idx.astype("int64")
    if mode == "clip":
        return np.clip(idx, 0, n - 1)
    if mode == "wrap":
        return np.mod(idx, n)
    return idx


@kernel
def _take(args: list, attrs) -> np.ndarray:
    x, idx = args
    axis, b, shape = _take_geometry(x.shape, idx.shape, attrs)
    if axis is None:
        x, axis = x.reshape(-1), 0
    idx = _adjust(idx, x.shape[axis], attrs.mode)
    if b == 0:
        return np.take(x, idx, axis=axis)
    nb = prod(x.shape[:b])
    xs = x.reshape((nb,) + x.shape[b:])
    ids = idx.reshape((nb,) + idx.shape[b:])
    parts = [np.take(xs[i], ids[i], axis=axis - b) for i in range(nb)]
    return np.stack(parts).reshape(shape) if parts else np.zeros(shape, x.dtype)


def _check_take(attrs) -> None:
    if attrs.mode not in ("clip", "wrap", "fast"):
        raise IRError(f"operator take: attribute mode must be \"clip\", \"wrap\" or \"fast\", got {attrs.mode!r}")
    for key in ("batch_dims", "axis"):
        v = attrs[key]
        if (v is not None or key == "batch_dims") and (isinstance(v, bool) or not isinstance(v, int)):
            raise IRError(f"operator take: attribute {key} must be an int, got {v!r}")


reg("take", 2, _take_rel, _take, attrs=(("batch_dims", 0), ("axis", None), ("mode", "clip")), pattern=INJ,
    attr_check=_check_take, summary="Select elements along an axis at integer indices (mode clip, wrap, fast).")


# -- gather ------------------------------------------------------------------------------
def _gather_rel(types: list, attrs) -> TensorType:
    op = "gather"
    data = tensor_arg(op, types, 0, "data")
    idx = tensor_arg(op, types, 1, "the indices")
    if not idx.dtype.startswith(("int", "uint")):
        raise TypeInferenceError(f"{op}: the indices must be integers, got {idx}")
    axis = norm_axis(op, attrs.axis, data.ndim)
    if idx.ndim != data.ndim or any(i != d and provably_greater(i, d)
                                    for k, (i, d) in enumerate(zip(idx.shape, data.shape)) if k != axis):
        raise TypeInferenceError(f"{op}: the indices {idx} must have the data's rank and fit the data {data} "
                                 f"outside axis {attrs.axis}")
    return TensorType(idx.shape, data.dtype)


@kernel
def _gather(args: list, attrs) -> np.ndarray:
    x, idx = args
    axis = attrs.axis % x.ndim
    sub = tuple(slice(0, n) if k != axis else slice(None) for k, n in enumerate(idx.shape))
    return np.take_along_axis(x[sub], idx.astype("int64"), axis=axis)


reg("gather", 2, _gather_rel, _gather, attrs=(("axis", 0),), pattern=INJ,
    summary="out[i][j] = data[i][indices[i][j]] along an axis (ONNX GatherElements; negative indices count from the end).")


# -- broadcast_to / tile / repeat ------------------------------------------------------------
def _broadcast_to_rel(types: list, attrs) -> TensorType:
    t = tensor_arg("broadcast_to", types, 0, "data")
    shape = tuple(attrs.shape)
    if is_static(shape) and t.is_static:
        if broadcast_shape(t.shape, shape) != shape:
            raise TypeInferenceError(f"broadcast_to: cannot broadcast {t} to the shape {list(shape)}")
    else:
        if not broadcasts_to(t.shape, shape):
            raise TypeInferenceError(f"broadcast_to: cannot broadcast {t} to the shape {format_dims(shape)}")
        # a target dimension that the data's non-1 static one must equal is that one
        lead = len(shape) - t.ndim
        shape = tuple(s if i < lead or type(s) is int or type(t.shape[i - lead]) is not int
                      or t.shape[i - lead] == 1 else t.shape[i - lead] for i, s in enumerate(shape))
    return t if shape == t.shape else TensorType(shape, t.dtype)


@kernel
def _broadcast_to(args: list, attrs) -> np.ndarray:
    return np.require(np.broadcast_to(args[0], tuple(attrs.shape)), requirements="C")


def _check_shape_attr(op: str):
    def check(attrs) -> None:
        check_dims_attr(op, "shape", attrs.shape,
                        f"operator {op}: attribute shape must be a list of non-negative ints, got {{v}}")

    return check


reg("broadcast_to", 1, _broadcast_to_rel, _broadcast_to, attrs=(("shape", None), ("dtype", "")), pattern=B,
    attr_check=_check_shape_attr("broadcast_to"), summary="Broadcast to a given shape (numpy rules).")


def _tile_shape(shape: tuple, reps: tuple) -> tuple:
    n = max(len(shape), len(reps))
    shape = (1,) * (n - len(shape)) + tuple(shape)
    reps = (1,) * (n - len(reps)) + tuple(reps)
    return tuple(d * r for d, r in zip(shape, reps))


def _tile_rel(types: list, attrs) -> TensorType:
    t = tensor_arg("tile", types, 0, "data")
    shape = _tile_shape(t.shape, attrs.reps)
    return t if shape == t.shape else TensorType(shape, t.dtype)


@kernel
def _tile(args: list, attrs) -> np.ndarray:
    return np.tile(args[0], tuple(attrs.reps))


def _check_reps(attrs) -> None:
    check_dims_attr("tile", "reps", attrs.reps,
                    "operator tile: attribute reps must be a list of non-negative ints, got {v}")


reg("tile", 1, _tile_rel, _tile, attrs=(("reps", None),), pattern=B, attr_check=_check_reps,
    summary="Repeat the whole tensor reps[i] times along each axis (numpy.tile).")


def _repeat_rel(types: list, attrs) -> TensorType:
    t = tensor_arg("repeat", types, 0, "data")
    axis = norm_axis("repeat", attrs.axis, t.ndim)
    shape = t.shape[:axis] + (t.shape[axis] * attrs.repeats,) + t.shape[axis + 1:]
    return t if shape == t.shape else TensorType(shape, t.dtype)


@kernel
def _repeat(args: list, attrs) -> np.ndarray:
    return np.repeat(args[0], attrs.repeats, axis=attrs.axis)


def _check_repeat(attrs) -> None:
    r = attrs.repeats
    if isinstance(r, bool) or not isinstance(r, int) or r < 1:
        raise IRError(f"operator repeat: attribute repeats must be a positive int, got {r!r}")


reg("repeat", 1, _repeat_rel, _repeat, attrs=(("repeats", None), ("axis", None)), pattern=B,
    attr_check=_check_repeat, summary="Repeat each element along an axis (numpy.repeat).")
