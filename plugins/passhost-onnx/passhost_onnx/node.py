"""What a converter sees: one ONNX node with its inputs already converted.

A converter is ``fn(node: Node) -> Expr | tuple of Expr`` (one per ONNX output). Inputs
are typed passhost expressions (``None`` for an omitted optional input); ``node.const(i)``
is the value of an input known at import time (an initializer, a ``Constant`` node, or a
result computed from them), which is how converters read shapes, axes and pads.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from passhost import ir
from passhost.errors import FormatError

__all__ = ["Node", "ConversionError"]


def _is_shape_value(x: Any) -> bool:
    return type(x) is ir.Call and type(x.op) is ir.Op and x.op.name == "shape_value"


class ConversionError(FormatError):
    """A node the converter of its operator cannot convert (an attribute value it does not
    support, a non-constant shape ...); the message names the node."""


class Node:
    """One ONNX node during import."""

    __slots__ = ("op_type", "domain", "name", "inputs", "attrs", "outputs", "opset")

    def __init__(self, op_type: str, domain: str, name: str, inputs: list, attrs: dict, outputs: list,
                 opset: int) -> None:
        self.op_type = op_type
        self.domain = domain
        self.name = name
        self.inputs = inputs
        self.attrs = attrs
        self.outputs = outputs
        self.opset = opset

    def __repr__(self) -> str:
        return f"{self.op_type} node {self.name or self.outputs[0]!r}"

    def attr(self, name: str, default: Any = None) -> Any:
        """Attribute ``name`` (ints, floats, strings, lists, ndarrays), or ``default``."""
        return self.attrs.get(name, default)

    def error(self, message: str) -> ConversionError:
        return ConversionError(f"{self!r} (opset {self.opset}): {message}")

    def input(self, i: int) -> Optional[ir.Expr]:
        return self.inputs[i] if i < len(self.inputs) else None

    def const(self, i: int) -> Optional[np.ndarray]:
        """Input ``i``'s value when it is known at import time, else ``None``."""
        x = self.input(i)
        return x.data if isinstance(x, ir.Constant) else None

    def need_const(self, i: int, what: str) -> np.ndarray:
        """Input ``i``'s value, or a clear error."""
        value = self.const(i)
        if value is None:
            x = self.input(i)
            why = ("it depends on the size variables of the model's dynamic axes"
                   if _is_shape_value(x) else "it is computed from the model's data")
            err = self.error(f"{what} (input {i}) must be known at import time, but {why}; specialise the "
                             "model with --input-shape NAME=D1,D2,... or --bind-dim NAME=VALUE if it must stay")
            err.needed = x.name_hint if isinstance(x, ir.Var) else None  # a graph input: a caller may bind it
            raise err
        return value

    def dims(self, i: int, what: str) -> list:
        """Input ``i`` (a shape, or bounds such as a slice's) as a list of dimensions: ints,
        or size-variable expressions when it is computed from the shapes of the model's
        dynamic axes (a ``shape_value`` call). A value computed from data is an error."""
        value = self.const(i)
        if value is not None:
            return [int(v) for v in np.asarray(value).reshape(-1)]
        x = self.input(i)
        if _is_shape_value(x):
            values = x.attrs["values"]
            return list(values) if isinstance(values, tuple) else [values]
        return [int(v) for v in self.need_const(i, what).reshape(-1)]

    def type(self, i: int) -> ir.TensorType:
        t = self.inputs[i].checked_type
        if not isinstance(t, ir.TensorType):
            raise self.error(f"input {i} is not a tensor ({t})")
        return t

    def shape(self, i: int) -> tuple:
        """The shape of input ``i`` (ints, and size-variable expressions or ``?`` where the
        model's axes are dynamic)."""
        return tuple(self.type(i).shape)

    def dtype(self, i: int) -> str:
        return self.type(i).dtype

    def ndim(self, i: int) -> int:
        return len(self.type(i).shape)
