"""Small builders the converters share: an op call by name, constants, static reshapes."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from passhost import ir

__all__ = ["call", "const", "reshape", "flatten_2d"]


def call(name: str, *args: ir.Expr, **attrs: Any) -> ir.Call:
    """``name(*args)`` with ``attrs`` (the operator's defaults fill the rest)."""
    return ir.Call(ir.Op.get(name), list(args), attrs)


def const(value: Any, dtype: str) -> ir.Constant:
    return ir.Constant(np.asarray(value, dtype=dtype))


def _dim(d: Any) -> Any:
    return d if type(d) is ir.Dim else int(d)


def reshape(x: ir.Expr, shape: Sequence[Any]) -> ir.Expr:
    """``reshape(x, newshape=shape)`` (dimensions may be symbolic); of a constant (an
    initializer unsqueezed, flattened or lifted to 2-D), the reshaped constant at once: the
    value the import's fold would give, without a call to type and evaluate (a view:
    nothing is copied)."""
    shape = tuple(_dim(d) for d in shape)
    if type(x) is ir.Constant and all(type(d) is int and d >= 0 for d in shape) \
            and math.prod(shape) == x.data.size:
        return ir.Constant(x.data.reshape(shape))
    return call("reshape", x, newshape=shape)


def flatten_2d(x: ir.Expr, shape: Sequence[Any], axis: int) -> ir.Expr:
    """ONNX's Flatten: ``[prod(shape[:axis]), prod(shape[axis:])]`` (symbolic products too)."""
    rows = math.prod(shape[:axis]) if axis else 1
    cols = math.prod(shape[axis:])
    if tuple(shape) == (rows, cols):
        return x
    return reshape(x, (rows, cols))
