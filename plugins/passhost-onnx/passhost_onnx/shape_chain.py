"""The shape scaffolding of a dynamic model, evaluated as the import reads it.

Exporters compute reshape targets at run time from the input's shape, a few nodes per
target (GPT-2 with its cache: 40 Gathers, 58 Unsqueezes and 33 Concats in 553 nodes)::

    s = Shape(x); b = Gather(s, 0); t = Unsqueeze(b, [0]); c = Concat(t, [12], [64], axis=0)

With the model's dynamic axes the values are size-variable expressions: the import
folds each such node to a ``shape_value`` (or a constant when every entry is an int),
which the converter of the ``Reshape`` reads. The general way builds the operator call,
types it and folds it (:func:`passhost.ir.fold_symbolic`). :func:`shape_node` computes
the same value straight from the inputs' values, for the plain forms of ``Gather``,
``Unsqueeze``, ``Squeeze`` and ``Concat`` on scalars and vectors whose values are known
(``shape_value`` calls and small integer constants, at least one a ``shape_value``),
and builds the same typed node the fold does. Any other form goes the general way
(returns ``None``), with its checks and errors.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from passhost import ir

__all__ = ["shape_node", "SHAPE_OPS"]

#: the operators :func:`shape_node` evaluates
SHAPE_OPS = frozenset({"Gather", "Unsqueeze", "Squeeze", "Concat"})

#: the largest value (elements) taken here; below what the fold takes (4096), so that a
#: value the fold would leave alone never comes here: larger ones go the general way
MAX_ELEMENTS = 1024

_SHAPE_VALUE = ir.Op.get("shape_value")
_INTS = ("int64", "int32", "int16", "int8", "uint8")  # shape_value's dtypes


def _value(x: Any) -> Optional[tuple]:
    """``(items, ndim, dtype, symbolic)`` of a scalar or vector whose value the import
    knows (a ``shape_value`` call or a small integer constant), else ``None``."""
    if type(x) is ir.Call:
        if x.op is not _SHAPE_VALUE:
            return None
        values = x.attrs["values"]
        if type(values) is tuple:
            return list(values), 1, x.attrs["dtype"], True
        return [values], 0, x.attrs["dtype"], True
    if type(x) is ir.Constant:
        data = x.data
        if data.ndim > 1 or data.dtype.kind not in "iu" or data.size > MAX_ELEMENTS:
            return None
        return data.reshape(-1).tolist(), data.ndim, _dtype_name(data.dtype), False
    return None


#: numpy dtype -> its name (``dtype.name`` is a Python property of several microseconds)
_NAMES: dict = {}


def _dtype_name(dtype: np.dtype) -> str:
    name = _NAMES.get(dtype)
    if name is None:
        name = _NAMES[dtype] = dtype.name
    return name


def _axes(n: Any, inputs: list, opset: int, since: int) -> Optional[list]:
    """The ``axes`` of an Unsqueeze/Squeeze: the attribute before ``since``, the constant
    second input from it; ``None`` when absent or not a plain list of ints."""
    if opset < since:
        for a in n.attribute:
            if a.name == "axes":
                return list(a.ints) if a.type == a.INTS else None
        return None
    if len(inputs) < 2 or type(inputs[1]) is not ir.Constant:
        return None
    data = inputs[1].data
    if data.dtype.kind not in "iu" or data.ndim > 1:
        return None
    return data.reshape(-1).tolist()


def _int_attr(n: Any, name: str) -> Optional[int]:
    for a in n.attribute:
        if a.name == name:
            return int(a.i) if a.type == a.INT else None
    return None


def _result(items: list, ndim: int, dtype: str) -> Optional[ir.Expr]:
    """What :func:`passhost.ir.fold_symbolic` makes of a value: a typed constant when every
    entry is an int, else a typed ``shape_value``."""
    if len(items) > MAX_ELEMENTS:
        return None
    if all(type(v) is int for v in items):
        return ir.infer_type(ir.Constant(np.array(items if ndim else items[0], dtype=dtype)))
    if dtype not in _INTS:
        return None
    return ir.infer_type(ir.shape_value(items if ndim else items[0], dtype))


def shape_node(n: Any, op_type: str, inputs: list, opset: int) -> Optional[ir.Expr]:
    """The typed value of ONNX node ``n`` (one of :data:`SHAPE_OPS`, standard domain, its
    converter the built-in one) when it is shape arithmetic of a plain form over known
    values, as the general way (convert, type, fold) would give it; else ``None``."""
    if len(n.output) != 1 or not n.output[0]:
        return None
    values = [None if x is None else _value(x) for x in inputs]
    if not any(v is not None and v[3] for v in values):
        return None  # (all constants: the general way folds them with the interpreter)
    if op_type == "Gather":
        if len(values) != 2 or values[0] is None or values[1] is None or values[1][3]:
            return None
        (data, dnd, dtype, _), (idx, ind, _, _) = values
        axis = _int_attr(n, "axis")
        if dnd != 1 or (axis is not None and axis not in (0, -1)) or len(n.attribute) > (axis is not None):
            return None
        size = len(data)
        if any(i < -size or i >= size for i in idx):
            return None
        return _result([data[i] for i in idx], ind, dtype)
    if op_type == "Concat":
        axis = _int_attr(n, "axis")
        parts = [v for v in values if v is not None]
        if axis not in (0, -1) or len(n.attribute) != 1 or len(parts) != sum(x is not None for x in inputs) \
                or not parts or any(v[1] != 1 or v[2] != parts[0][2] for v in parts):
            return None
        items: list = []
        for v in parts:
            items.extend(v[0])
        return _result(items, 1, parts[0][2])
    data = values[0] if values else None
    if data is None or not data[3]:
        return None
    items, nd, dtype, _ = data
    if op_type == "Unsqueeze":
        axes = _axes(n, inputs, opset, 13)
        if nd != 0 or axes is None or len(axes) != 1 or axes[0] not in (0, -1):
            return None
        return _result(items, 1, dtype)
    if op_type == "Squeeze":
        axes = _axes(n, inputs, opset, 13)
        if nd != 1 or len(items) != 1 or (axes is not None and (len(axes) != 1 or axes[0] not in (0, -1))):
            return None
        if axes is None and (len(inputs) > 1 and inputs[1] is not None or len(n.attribute)):
            return None  # (axes given in a form not read above)
        return _result(items, 0, dtype)
    return None
