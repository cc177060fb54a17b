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

import math

import numpy as np

from ...errors import TypeInferenceError
from ..op import OpPattern
from ..types import TensorType, TupleType
from ..dims import ANY, Dim, UndecidableDim
from ._util import (check_dims_attr, dim_prod, dims_differ, format_dims, kernel, norm_axis, prod, provably_greater,
                    reg, shape_text, tensor_arg, unify_dim)

INJ, B = OpPattern.INJECTIVE, OpPattern.BROADCAST


# -- reshape ---------------------------------------------------------------------
def _list_text(values: tuple) -> str:
    if all(type(v) is int for v in values):
        return str(list(values))
    return format_dims(values)


def _may_be_positive(d) -> bool:
    """Whether a dimension (or a reshape code) can be a positive size: ints must be
    ``> 0``; a symbolic one qualifies unless it is provably ``<= 0``."""
    if type(d) is int:
        return d > 0
    try:
        return d is ANY or d > 0
    except UndecidableDim:
        return True


def _monomial(atoms: tuple):
    return Dim(((atoms, 1),)) if atoms else 1


def _exact_quotient(total, part):
    """``total // part`` where ``part`` may divide ``total`` exactly (the exact quotient
    when it provably does, a ``floordiv`` or ``?`` when that depends on the size
    variables); ``None`` when it provably does not (or ``part`` is 0)."""
    if type(total) is int and type(part) is int:
        return total // part if part and total % part == 0 else None
    if type(part) is int and part == 0:
        return None
    if type(part) is Dim and type(total) is Dim:
        # total == (c * m / c0) * part for a monomial m: the quotient is (c * m) // c0
        # (768*batch*(past + seq) over 64*batch*(past + seq): 12; 768*seq over 100*seq: none)
        m0, c0 = part.terms[0]
        for mono, c in total.terms:
            m = _monomial(mono) // _monomial(m0)
            if m is not ANY and total * c0 == part * (c * m):
                total, part = c * m, c0
                break
    if type(part) is int and type(total) is Dim:  # floordiv(768*batch, 1536) is floordiv(batch, 2)
        g = math.gcd(part, *(c for _, c in total.terms))
        if g > 1:
            total, part = total // g, part // g
    rest = total % part
    if type(rest) is int and rest != 0:
        return None
    return total // part


def reshape_shape(ishape: tuple, newshape: tuple, op: str = "reshape", allowzero: bool = False) -> tuple:
    """The output shape of ``reshape(x: ishape, newshape)`` (TVM's codes, see module doc).
    With ``allowzero`` a 0 in ``newshape`` is a dimension of size 0, not "copy the input's".

    ``ishape`` and ``newshape`` may hold symbolic dimensions (a :class:`~passhost.ir.dims.Dim`
    in ``newshape`` is a size, as a positive int is); ``-1`` is then the exact quotient of
    the element counts where it divides (``(batch, seq, 768)`` to ``[batch, seq, -1, 64]``:
    12), a ``floordiv`` where that depends on the size variables."""
    def fail(msg: str) -> TypeInferenceError:
        return TypeInferenceError(f"{op}: cannot reshape {shape_text(ishape)} to newshape={_list_text(newshape)}: "
                                  f"{msg}")

    out: list = []
    src = 0
    infer = -1
    i = 0
    n = len(newshape)
    while i < n:
        v = newshape[i]
        if type(v) is Dim:
            out.append(v)
            src += 1
            i += 1
            continue
        if v is ANY:
            raise fail("? is not a size (use -1 to infer one dimension)")
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
            d0, d1 = (x if type(x) is Dim or x is ANY else int(x) for x in newshape[i + 1:i + 3])
            if d0 == -1 and _may_be_positive(d1):
                d0 = _exact_quotient(d, d1)
                d0 = -1 if d0 is None else d0
            elif d1 == -1 and _may_be_positive(d0):
                d1 = _exact_quotient(d, d0)
                d1 = -1 if d1 is None else d1
            if not _may_be_positive(d0) or not _may_be_positive(d1) or dims_differ(d0 * d1, d):
                raise fail(f"-4 cannot split dimension {d} into ({newshape[i + 1]}, {newshape[i + 2]})")
            out.extend((d0, d1))
            src += 1
            i += 2
        else:
            raise fail(f"unknown code {v}")
        i += 1
    total = dim_prod(ishape)
    if infer >= 0:
        rest = dim_prod(out)
        quotient = _exact_quotient(total, rest)
        if quotient is None:
            raise fail(f"{total} elements cannot fill the shape")
        out[infer] = quotient
    size = dim_prod(out)
    if dims_differ(size, total):
        raise fail(f"{total} elements do not fit {size}")
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
    check_dims_attr("reshape", "newshape", attrs.newshape, "operator reshape: attribute newshape must be a list of "
                    "ints, got {v}", nonneg=False)


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
    """Without ``axis``: drop the axes of size 1 (as TVM, a symbolic dimension is kept: it
    is not known to be 1). With ``axis``: a symbolic dimension there is taken to be 1
    unless it provably is not."""
    if axis is None:
        return tuple(d for d in shape if d != 1)
    drop = set()
    for a in axis:
        k = norm_axis("squeeze", a, len(shape))
        if dims_differ(shape[k], 1):
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
    other = list(first.shape)
    for f in fields:
        if f.dtype != first.dtype:
            raise TypeInferenceError(f"{op}: dtype mismatch between {first} and {f}")
        if f.ndim != first.ndim:
            raise TypeInferenceError(f"{op}: {first} and {f} differ outside axis {attrs.axis}")
        if f.shape != first.shape:
            for i, d in enumerate(f.shape):
                e = other[i]
                if i == axis or d == e:
                    continue
                if dims_differ(d, e):
                    raise TypeInferenceError(f"{op}: {first} and {f} differ outside axis {attrs.axis}")
                other[i] = unify_dim(e, d)  # must be equal: the static one
        total += f.shape[axis]
    if len(fields) == 1:
        return first
    other[axis] = total
    shape = tuple(other)
    return TensorType(shape, first.dtype)


@kernel
def _concatenate(args: list, attrs) -> np.ndarray:
    parts = args[0]
    return np.concatenate(parts, axis=attrs.axis)


reg("concatenate", 1, _concatenate_rel, _concatenate, attrs=(("axis", 0),), pattern=INJ,
    summary="Join a tuple of tensors along an axis.")


def split_indices(dim: int, ios, op: str = "split") -> tuple:
    """Start indices of every part after the first, for ``indices_or_sections``. A
    symbolic ``dim`` fails only where it provably does not fit (a remainder that is a
    nonzero constant, an index provably past the end)."""
    if isinstance(ios, int) and not isinstance(ios, bool):
        if ios <= 0 or _remainder(dim, ios):
            raise TypeInferenceError(f"split: cannot split an axis of size {dim} into {ios} equal sections")
        step = dim // ios
        return tuple(step * k for k in range(1, ios))
    if not isinstance(ios, tuple) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ios):
        raise TypeInferenceError(f"split: indices_or_sections must be an int or a list of ints, got {ios!r}")
    prev = 0
    for i in ios:
        if i < prev or (i > dim if type(dim) is int else provably_greater(i, dim)):
            raise TypeInferenceError(f"split: indices {list(ios)} must be increasing and within 0..{dim}")
        prev = i
    return ios


def _remainder(dim, sections: int) -> bool:
    """Whether ``dim % sections`` is provably nonzero."""
    r = dim % sections
    return type(r) is int and r != 0


def _split_rel(types: list, attrs) -> TupleType:
    t = tensor_arg("split", types, 0, "data")
    axis = norm_axis("split", attrs.axis, t.ndim)
    dim = t.shape[axis]
    ios = attrs.indices_or_sections
    bounds = (0,) + split_indices(dim, ios) + (dim,)
    fields = []
    cache: dict = {}
    for lo, hi in zip(bounds, bounds[1:]):
        n = hi - lo if type(ios) is tuple else dim // ios  # equal sections: each dim // ios
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
    shape = (t.shape[0], dim_prod(t.shape[1:]))
    return t if shape == t.shape else TensorType(shape, t.dtype)


@kernel
def _batch_flatten(args: list, attrs) -> np.ndarray:
    x = args[0]
    return np.reshape(x, (x.shape[0], -1) if x.shape[0] else (0, prod(x.shape[1:])))


reg("nn.batch_flatten", 1, _batch_flatten_rel, _batch_flatten, pattern=INJ,
    summary="Flatten all axes but the first: (N, d1, d2, ...) -> (N, d1*d2*...).")
