"""Shape-changing (injective) operators: ``reshape transpose expand_dims squeeze
concatenate split nn.batch_flatten``.

``reshape`` follows TVM's ``newshape`` codes: a positive value is a dimension,
``0`` copies the input dimension at the same position, ``-1`` is inferred,
``-2`` copies all remaining dimensions, ``-3`` merges two input dimensions and
``-4, a, b`` splits one input dimension into ``a * b`` (one of them may be -1).
With ``allowzero=True`` (ONNX's ``Reshape`` attribute, which TVM's reshape carries too) a
``0`` is a dimension of size zero instead::

    reshape(%x: (0, 3, 4), newshape=[3, 4, 0], allowzero=True)   /* -> (3, 4, 0) */
"""
from __future__ import annotations

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..op import OpPattern
from ..types import TensorType, TupleType
from ._util import kernel, norm_axis, prod, reg, tensor_arg

INJ, B = OpPattern.INJECTIVE, OpPattern.BROADCAST


# -- reshape ---------------------------------------------------------------------
def reshape_shape(ishape: tuple, newshape: tuple, op: str = "reshape", allowzero: bool = False) -> tuple:
    """The output shape of ``reshape(x: ishape, newshape)`` (TVM's codes, see module doc).
    With ``allowzero`` a 0 in ``newshape`` is a dimension of size 0, not "copy the input's"."""
    def fail(msg: str) -> TypeInferenceError:
        return TypeInferenceError(f"{op}: cannot reshape {tuple(ishape)} to newshape={list(newshape)}: {msg}")

    out: list = []
    src = 0
    infer = -1
    i = 0
    n = len(newshape)
    while i < n:
        v = newshape[i]
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise fail(f"{v!r} is not an int")
        if v > 0:
            out.append(int(v))
            src += 1
        elif v == 0 and allowzero:
            out.append(0)
            src += 1
        elif v == 0:
            if src >= len(ishape):
                raise fail("0 refers past the last input dimension")
            out.append(ishape[src])
            src += 1
        elif v == -1:
            if infer >= 0:
                raise fail("only one -1 is allowed")
            infer = len(out)
            out.append(1)
            src += 1
        elif v == -2:
            out.extend(ishape[src:])
            src = len(ishape)
        elif v == -3:
            if src + 1 >= len(ishape):
                raise fail("-3 needs two input dimensions")
            out.append(ishape[src] * ishape[src + 1])
            src += 2
        elif v == -4:
            if i + 2 >= n or src >= len(ishape):
                raise fail("-4 must be followed by two values and refer to an input dimension")
            d = ishape[src]
            d0, d1 = int(newshape[i + 1]), int(newshape[i + 2])
            if d0 == -1 and d1 > 0 and d % d1 == 0:
                d0 = d // d1
            elif d1 == -1 and d0 > 0 and d % d0 == 0:
                d1 = d // d0
            if d0 <= 0 or d1 <= 0 or d0 * d1 != d:
                raise fail(f"-4 cannot split dimension {d} into ({newshape[i + 1]}, {newshape[i + 2]})")
            out.extend((d0, d1))
            src += 1
            i += 2
        else:
            raise fail(f"unknown code {v}")
        i += 1
    total = prod(ishape)
    if infer >= 0:
        rest = prod(out)
        if rest == 0 or total % rest:
            raise fail(f"{total} elements cannot fill the shape")
        out[infer] = total // rest
    if prod(out) != total:
        raise fail(f"{total} elements do not fit {prod(out)}")
    return tuple(out)


def _reshape_rel(types: list, attrs) -> TensorType:
    t = tensor_arg("reshape", types, 0, "data")
    shape = reshape_shape(t.shape, attrs.newshape, allowzero=bool(attrs.allowzero))
    return t if shape == t.shape else TensorType(shape, t.dtype)


@kernel
def _reshape(args: list, attrs) -> np.ndarray:
    x = args[0]
    return np.reshape(x, reshape_shape(x.shape, attrs.newshape, allowzero=bool(attrs.allowzero)))


def _check_newshape(attrs) -> None:
    v = attrs.newshape
    if not isinstance(v, tuple) or not all(isinstance(d, int) and not isinstance(d, bool) for d in v):
        raise IRError(f"operator reshape: attribute newshape must be a list of ints, got {v!r}")


reg("reshape", 1, _reshape_rel, _reshape, attrs=(("newshape", None), ("allowzero", False)), pattern=INJ,
    attr_check=_check_newshape, summary="Give a tensor a new shape with the same number of elements.")


# -- transpose -------------------------------------------------------------------
def transpose_axes(ndim: int, axes, op: str = "transpose") -> tuple:
    if axes is None:
        return tuple(range(ndim - 1, -1, -1))
    if len(axes) != ndim:
        raise TypeInferenceError(f"{op}: axes {list(axes)} do not match a rank-{ndim} tensor")
    perm = tuple(norm_axis(op, a, ndim) for a in axes)
    if sorted(perm) != list(range(ndim)):
        raise TypeInferenceError(f"{op}: axes {list(axes)} are not a permutation of 0..{ndim - 1}")
    return perm


def _transpose_rel(types: list, attrs) -> TensorType:
    t = tensor_arg("transpose", types, 0, "data")
    perm = transpose_axes(t.ndim, attrs.axes)
    if perm == tuple(range(t.ndim)):
        return t
    return TensorType(tuple(t.shape[i] for i in perm), t.dtype)


@kernel
def _transpose(args: list, attrs) -> np.ndarray:
    x = args[0]
    out = np.transpose(x, transpose_axes(x.ndim, attrs.axes))
    # a contiguous view (a matrix's transpose: Fortran order) is kept, not copied
    return out if out.flags.c_contiguous or out.flags.f_contiguous else np.ascontiguousarray(out)


reg("transpose", 1, _transpose_rel, _transpose, attrs=(("axes", None),), pattern=INJ,
    summary="Permute the axes (reverse them when axes is None).")


# -- expand_dims / squeeze -------------------------------------------------------
def _expand_shape(shape: tuple, axis: int, num: int) -> tuple:
    a = norm_axis("expand_dims", axis, len(shape), extra=1)
    return shape[:a] + (1,) * num + shape[a:]


def _expand_dims_rel(types: list, attrs) -> TensorType:
    t = tensor_arg("expand_dims", types, 0, "data")
    num = attrs.num_newaxis
    if isinstance(num, bool) or not isinstance(num, int) or num < 0:
        raise TypeInferenceError(f"expand_dims: num_newaxis must be a non-negative int, got {num!r}")
    shape = _expand_shape(t.shape, attrs.axis, num)
    return t if shape == t.shape else TensorType(shape, t.dtype)


@kernel
def _expand_dims(args: list, attrs) -> np.ndarray:
    x = args[0]
    return np.reshape(x, _expand_shape(x.shape, attrs.axis, attrs.num_newaxis))


reg("expand_dims", 1, _expand_dims_rel, _expand_dims, attrs=(("axis", None), ("num_newaxis", 1)),
    pattern=B, summary="Insert num_newaxis size-1 axes at position axis.")


def _squeeze_shape(shape: tuple, axis) -> tuple:
    if axis is None:
        return tuple(d for d in shape if d != 1)
    drop = set()
    for a in axis:
        k = norm_axis("squeeze", a, len(shape))
        if shape[k] != 1:
            raise TypeInferenceError(f"squeeze: axis {a} has size {shape[k]}, only size-1 axes can be squeezed")
        drop.add(k)
    return tuple(d for i, d in enumerate(shape) if i not in drop)


def _squeeze_rel(types: list, attrs) -> TensorType:
    t = tensor_arg("squeeze", types, 0, "data")
    shape = _squeeze_shape(t.shape, attrs.axis)
    return t if shape == t.shape else TensorType(shape, t.dtype)


@kernel
def _squeeze(args: list, attrs) -> np.ndarray:
    x = args[0]
    return np.reshape(x, _squeeze_shape(x.shape, attrs.axis))


reg("squeeze", 1, _squeeze_rel, _squeeze, attrs=(("axis", None),), pattern=INJ,
    summary="Remove size-1 axes (all of them when axis is None).")


# -- concatenate / split -----------------------------------------------------------
def _concatenate_rel(types: list, attrs) -> TensorType:
    op = "concatenate"
    tt = types[0]
    if type(tt) is not TupleType:
        what = "unknown" if tt is None else str(tt)
        raise TypeInferenceError(f"{op}: the argument must be a tuple of tensors, got {what}")
    if not tt.fields:
        raise TypeInferenceError(f"{op}: cannot concatenate an empty tuple")
    fields = []
    for i, f in enumerate(tt.fields):
        if type(f) is not TensorType:
            raise TypeInferenceError(f"{op}: field {i} must be a tensor, got {f}")
        fields.append(f)
    first = fields[0]
    if first.ndim == 0:
        raise TypeInferenceError(f"{op}: cannot concatenate scalars ({first})")
    axis = norm_axis(op, attrs.axis, first.ndim)
    total = 0
    for f in fields:
        if f.dtype != first.dtype:
            raise TypeInferenceError(f"{op}: dtype mismatch between {first} and {f}")
        if f.ndim != first.ndim or any(d != e for i, (d, e) in enumerate(zip(f.shape, first.shape)) if i != axis):
            raise TypeInferenceError(f"{op}: {first} and {f} differ outside axis {attrs.axis}")
        total += f.shape[axis]
    if len(fields) == 1:
        return first
    shape = first.shape[:axis] + (total,) + first.shape[axis + 1:]
    return TensorType(shape, first.dtype)


@kernel
def _concatenate(args: list, attrs) -> np.ndarray:
    parts = args[0]
    return np.concatenate(parts, axis=attrs.axis)


reg("concatenate", 1, _concatenate_rel, _concatenate, attrs=(("axis", 0),), pattern=INJ,
    summary="Join a tuple of tensors along an axis.")


def split_indices(dim: int, ios, op: str = "split") -> tuple:
    """Start indices of every part after the first, for ``indices_or_sections``."""
    if isinstance(ios, int) and not isinstance(ios, bool):
        if ios <= 0 or dim % ios:
            raise TypeInferenceError(f"split: cannot split an axis of size {dim} into {ios} equal sections")
        step = dim // ios
        return tuple(step * k for k in range(1, ios))
    if not isinstance(ios, tuple) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ios):
        raise TypeInferenceError(f"split: indices_or_sections must be an int or a list of ints, got {ios!r}")
    prev = 0
    for i in ios:
        if i < prev or i > dim:
            raise TypeInferenceError(f"split: indices {list(ios)} must be increasing and within 0..{dim}")
        prev = i
    return ios


def _split_rel(types: list, attrs) -> TupleType:
    t = tensor_arg("split", types, 0, "data")
    axis = norm_axis("split", attrs.axis, t.ndim)
    dim = t.shape[axis]
    bounds = (0,) + split_indices(dim, attrs.indices_or_sections) + (dim,)
    fields = []
    cache: dict = {}
    for lo, hi in zip(bounds, bounds[1:]):
        n = hi - lo
        ft = cache.get(n)
        if ft is None:
            ft = cache[n] = TensorType(t.shape[:axis] + (n,) + t.shape[axis + 1:], t.dtype)
        fields.append(ft)
    return TupleType(fields)


@kernel
def _split(args: list, attrs) -> tuple:
    x = args[0]
    axis = attrs.axis
    idx = split_indices(x.shape[axis], attrs.indices_or_sections)
    return tuple(np.ascontiguousarray(p) for p in np.split(x, idx, axis=axis))


reg("split", 1, _split_rel, _split, attrs=(("indices_or_sections", None), ("axis", 0)), pattern=INJ,
    summary="Split a tensor along an axis into equal sections or at indices (tuple result).")


# -- batch_flatten -----------------------------------------------------------------
def _batch_flatten_rel(types: list, attrs) -> TensorType:
    t = tensor_arg("nn.batch_flatten", types, 0, "data")
    if t.ndim == 0:
        raise TypeInferenceError(f"nn.batch_flatten: the data must have a batch axis, got {t}")
    shape = (t.shape[0], prod(t.shape[1:]))
    return t if shape == t.shape else TensorType(shape, t.dtype)


@kernel
def _batch_flatten(args: list, attrs) -> np.ndarray:
    x = args[0]
    return np.reshape(x, (x.shape[0], -1) if x.shape[0] else (0, prod(x.shape[1:])))


reg("nn.batch_flatten", 1, _batch_flatten_rel, _batch_flatten, pattern=INJ,
    summary="Flatten all axes but the first: (N, d1, d2, ...) -> (N, d1*d2*...).")
