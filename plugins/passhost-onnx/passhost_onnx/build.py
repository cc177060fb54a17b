"""Small builders the converters share: an op call by name, constants, static reshapes.

Shapes may hold symbolic dimensions (size variables, expressions over them) and ``?``
(:data:`passhost.ir.ANY`, a size the import cannot know). A reshape target holding ``?``
cannot be written as sizes; :func:`reshape` writes one ``?`` as ``-1``, and the helpers
below write the usual reshapes (inserting and dropping axes of 1, merging or splitting
neighbouring axes) with Relay's codes, so that they hold for any sizes.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np

from passhost import ir
from passhost.errors import FormatError

__all__ = ["call", "const", "reshape", "flatten_2d", "static", "expand_axes", "drop_axes", "broadcast_shapes",
           "expand_to", "merge_axes", "split_axis", "positions", "arange", "zeros"]


def call(name: str, *args: ir.Expr, **attrs: Any) -> ir.Call:
    """``name(*args)`` with ``attrs`` (the operator's defaults fill the rest)."""
    return ir.Call(ir.Op.get(name), list(args), attrs)


def const(value: Any, dtype: str) -> ir.Constant:
    return ir.Constant(np.asarray(value, dtype=dtype))


def static(shape: Sequence[Any]) -> bool:
    """Whether every dimension of ``shape`` is a plain int."""
    return all(type(d) is int for d in shape)


def _dim(d: Any) -> Any:
    if type(d) is ir.Dim:
        return d
    if d is ir.ANY:
        return d
    return int(d)


def reshape(x: ir.Expr, shape: Sequence[Any]) -> ir.Expr:
    """``reshape(x, newshape=shape)`` (dimensions may be symbolic; one ``?`` is written as
    ``-1``); of a constant (an initializer unsqueezed, flattened or lifted to 2-D), the
    reshaped constant at once: the value the import's fold would give, without a call to
    type and evaluate (a view: nothing is copied)."""
    shape = tuple(_dim(d) for d in shape)
    if type(x) is ir.Constant and all(type(d) is int and d >= 0 for d in shape) \
            and math.prod(shape) == x.data.size:
        return ir.Constant(x.data.reshape(shape))
    unknown = [i for i, d in enumerate(shape) if d is ir.ANY]
    if unknown:
        if len(unknown) > 1 or any(type(d) is int and d < 0 for d in shape):
            raise FormatError(f"cannot reshape to ({', '.join(map(str, shape))}): more than one of its dimensions "
                              "is unknown (?) at import")
        shape = tuple(-1 if d is ir.ANY else d for d in shape)
    elif any(type(d) is ir.Dim for d in shape) and all(type(d) is not int or d > 0 for d in shape):
        # sizes only: a size variable bound to 0 is an empty axis, not Relay's 0 ("copy the input's")
        return call("reshape", x, newshape=shape, allowzero=True)
    return call("reshape", x, newshape=shape)


def expand_axes(x: ir.Expr, in_shape: Sequence[Any], axes: Sequence[int]) -> ir.Expr:
    """``x`` with an axis of 1 inserted at each of ``axes`` (positions in the result, sorted,
    non-negative): a reshape where the shape is known, ``expand_dims`` where it holds ``?``."""
    shape = list(in_shape)
    for a in axes:
        shape.insert(a, 1)
    if not any(d is ir.ANY for d in in_shape):
        return reshape(x, shape)
    for a in axes:
        x = call("expand_dims", x, axis=int(a), num_newaxis=1)
    return x


def drop_axes(x: ir.Expr, in_shape: Sequence[Any], axes: Sequence[int]) -> ir.Expr:
    """``x`` without its axes ``axes`` (each of size 1): a reshape where the rest is known,
    ``squeeze`` where it holds ``?``."""
    drop = set(axes)
    keep = [d for i, d in enumerate(in_shape) if i not in drop]
    if not any(d is ir.ANY for d in keep):
        return reshape(x, keep)
    return call("squeeze", x, axis=tuple(sorted(drop)))


def merge_axes(x: ir.Expr, in_shape: Sequence[Any], groups: Sequence[int]) -> ir.Expr:
    """``x`` with neighbouring axes merged: ``groups`` gives how many input axes make each
    output axis (``(1, 2, 1)`` of a 4-D input merges axes 1 and 2). Written as sizes where
    they are known, with Relay's codes (0 to copy an axis, -3 to merge two) where one is
    ``?``."""
    assert sum(groups) == len(in_shape) and all(g >= 1 for g in groups), (groups, in_shape)
    out, at = [], 0
    for g in groups:
        out.append(math.prod(in_shape[at:at + g]))
        at += g
    if not any(d is ir.ANY for d in out) or sum(1 for d in out if d is ir.ANY) == 1:
        return reshape(x, out)
    # a merge of more than two axes is done two at a time, first to last
    groups = list(groups)
    shape = list(in_shape)
    while any(g > 2 for g in groups):
        k = next(i for i, g in enumerate(groups) if g > 2)
        at = sum(groups[:k])
        codes = [0] * at + [-3] + [0] * (len(shape) - at - 2)
        x = call("reshape", x, newshape=tuple(codes))
        shape[at:at + 2] = [shape[at] * shape[at + 1]]
        groups[k] -= 1
    codes, at = [], 0
    for g in groups:
        if g == 1:
            codes.append(0 if shape[at] is ir.ANY else shape[at])
        else:
            codes.append(-3)
        at += g
    if all(c == 0 for c in codes) and len(codes) == len(shape):
        return x
    return call("reshape", x, newshape=tuple(codes))


def split_axis(x: ir.Expr, in_shape: Sequence[Any], axis: int, parts: Sequence[Any]) -> ir.Expr:
    """``x`` with axis ``axis`` split into ``parts`` (sizes whose product is that axis; at most
    one may be -1 or ``?``): sizes where known, Relay's -4 where the other axes hold ``?``."""
    out = list(in_shape[:axis]) + list(parts) + list(in_shape[axis + 1:])
    if not any(d is ir.ANY for d in out):
        return reshape(x, out)
    if len(parts) != 2:
        raise FormatError(f"cannot split axis {axis} of ({', '.join(map(str, in_shape))}) into {list(parts)} where "
                          "dimensions are unknown (?)")
    codes = [0] * axis + [-4] + [-1 if p is ir.ANY else p for p in parts] + [0] * (len(in_shape) - axis - 1)
    return call("reshape", x, newshape=tuple(codes))


def flatten_2d(x: ir.Expr, shape: Sequence[Any], axis: int) -> ir.Expr:
    """ONNX's Flatten: ``[prod(shape[:axis]), prod(shape[axis:])]`` (symbolic products too)."""
    rows = math.prod(shape[:axis]) if axis else 1
    cols = math.prod(shape[axis:])
    if tuple(shape) == (rows, cols):
        return x
    if rows is not ir.ANY or cols is not ir.ANY:
        return reshape(x, (rows, cols))
    if axis == 0:
        return reshape(x, (1, -1))
    return merge_axes(x, shape, (axis, len(shape) - axis))


def broadcast_shapes(*shapes: Sequence[Any]) -> Optional[tuple]:
    """numpy broadcasting of shapes whose dimensions may be symbolic: ``?`` where the result
    depends on the sizes, ``None`` when they provably do not broadcast."""
    if all(static(s) for s in shapes):
        try:
            return tuple(int(d) for d in np.broadcast_shapes(*(tuple(s) for s in shapes)))
        except ValueError:
            return None
    n = max(len(s) for s in shapes)
    out = [1] * n
    for s in shapes:
        s = (1,) * (n - len(s)) + tuple(s)
        for i, d in enumerate(s):
            b = ir.broadcast_dim(out[i], d)
            if b is None:
                return None
            out[i] = b
    return tuple(out)


def expand_to(x: ir.Expr, in_shape: Sequence[Any], target: Sequence[Any], dtype: str) -> ir.Expr:
    """``x`` broadcast against ``target`` (numpy's rules: ONNX's Expand). A ``broadcast_to``
    where the result is known; where it is ``?`` (a size variable of ``x`` meets one of the
    target, either of which may be 1), a product with ones of the target's shape, which
    numpy's broadcasting sizes at run time."""
    shape = broadcast_shapes(in_shape, target)
    if shape is None:
        raise FormatError(f"cannot expand an input of shape ({', '.join(map(str, in_shape))}) to "
                          f"({', '.join(map(str, target))}): the shapes do not broadcast")
    if not any(d is ir.ANY for d in shape):
        if tuple(shape) == tuple(in_shape):
            return x
        return call("broadcast_to", x, shape=tuple(shape))
    if any(d is ir.ANY for d in target):
        raise FormatError(f"cannot expand to ({', '.join(map(str, target))}): a size of the target is unknown (?)")
    if dtype == "bool":
        return call("logical_and", x, call("ones", shape=tuple(target), dtype="bool"))
    return call("multiply", x, call("ones", shape=tuple(target), dtype=dtype))


def positions(x: ir.Expr, shape: Sequence[Any], axis: int) -> ir.Expr:
    """The int64 index along ``axis`` of a tensor of ``shape`` (``x``), shaped to broadcast
    against it: a constant ``arange`` with ones elsewhere where the axis is static, an
    ``arange`` to a size variable where it is symbolic, and where it is ``?`` the running
    count along the axis of ``x`` itself (``cumsum`` of ones, minus one: the same values)."""
    n = shape[axis]
    out_shape = [1] * len(shape)
    if type(n) is int:
        out_shape[axis] = n
        return ir.Constant(np.arange(n, dtype="int64").reshape(out_shape))
    if n is not ir.ANY:
        out_shape[axis] = n
        return reshape(call("arange", start=0, stop=n, step=1, dtype="int64"), out_shape)
    ones = call("ones_like", call("cast", x, dtype="int64"))
    return call("cumsum", ones, axis=axis, exclusive=True)


def arange(n: Any, dtype: str) -> ir.Expr:
    """``0 .. n - 1``: a constant for a static ``n``, an ``arange`` call to a size variable
    expression."""
    if type(n) is int:
        return ir.Constant(np.arange(n, dtype=dtype))
    if n is ir.ANY:
        raise FormatError("a range over an unknown (?) size")
    return call("arange", start=0, stop=n, step=1, dtype=dtype)


def zeros(shape: Sequence[Any], dtype: str) -> ir.Expr:
    """Zeros of ``shape``: a constant where it is static, a ``zeros`` call where it holds size
    variables."""
    if static(shape):
        return ir.Constant(np.zeros(tuple(shape), dtype=dtype))
    if any(d is ir.ANY for d in shape):
        raise FormatError(f"zeros of an unknown (?) shape ({', '.join(map(str, shape))})")
    return call("zeros", shape=tuple(shape), dtype=dtype)
