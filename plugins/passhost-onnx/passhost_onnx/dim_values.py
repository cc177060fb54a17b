"""Symbolic dimensions on the way out: ``dim_param`` names, and shape values computed at
run time from the graph inputs' shapes.

A size variable is bound by the inputs of ``@main``: ``batch`` is axis 0 of ``input_ids``.
Where the export needs a dimension as data (a ``Reshape`` target, an ``Expand`` shape, a
``Slice`` bound), a static one is an initializer and a symbolic one is computed::

    reshape(%x, newshape=[batch*seq, 768])      /* %x: Tensor[(batch, seq, 768), float32] */
    ->  Reshape(x, [-1, 768])                   # one unknown entry: -1, exact
    broadcast_to(%m, shape=[batch, 1, seq, seq])
    ->  b = Shape(input_ids, start=0, end=1); q = Shape(input_ids, start=1, end=2)
        Expand(m, Concat(b, [1], q, q))

(below opset 15, whose ``Shape`` has no ``start``/``end``: one ``Shape`` of the input and a
``Slice`` of it per variable). Each variable is read once per export, and each expression
computed once.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import onnx

from passhost import ir
from passhost.errors import FormatError

__all__ = ["DimValues", "dim_sources", "onnx_dims"]

#: a whole shape is read with ``Shape(tensor)`` when a Concat of its values would add this
#: many nodes (measured over the dynamic PyTorch and LLM exports: 2, 4, 5 and never did
#: worse in all, by a few nodes)
_SHAPE_OF_AT = 3


def dim_sources(main: ir.Function) -> dict:
    """``{size variable: (input name, axis, a, b)}``: where each variable of ``@main``'s
    parameters can be read, the axis' size being ``a*variable + b`` (``a = 1, b = 0`` where
    it appears alone, as it usually does; dynamo writes ``2*half_height``)."""
    out: dict = {}
    later: list = []
    for p in main.params:
        t = p.checked_type
        if type(t) is not ir.TensorType:
            continue
        for axis, d in enumerate(t.shape):
            if type(d) is not ir.Dim:
                continue
            if d.name is not None:
                out.setdefault(d.name, (p.name_hint, axis, 1, 0))
            else:
                later.append((p.name_hint, axis, d))
    for name, axis, d in later:  # a*v + b of one variable: v = (size - b) / a
        linear = _linear(d)
        if linear is not None and linear[0] not in out:
            out[linear[0]] = (name, axis, linear[1], linear[2])
    return out


def _linear(d: ir.Dim):
    """``(variable, a, b)`` when ``d`` is ``a*variable + b``, else ``None``."""
    var, a, b = None, 0, 0
    for mono, coeff in d.terms:
        if not mono:
            b += coeff
        elif len(mono) == 1 and type(mono[0]) is str and var in (None, mono[0]):
            var, a = mono[0], a + coeff
        else:
            return None
    return (var, a, b) if var is not None and a > 0 else None


def onnx_dims(shape: tuple, original: dict) -> list:
    """Dimensions for ``make_tensor_value_info``: ints, ``dim_param`` strings (a variable's
    own name, or the ``dim_param`` it was read from), ``None`` for ``?``."""
    out: list = []
    for d in shape:
        if type(d) is int:
            out.append(d)
        elif d is ir.ANY:
            out.append(None)
        else:
            text = str(d)
            out.append(original.get(text, text))
    return out


class DimValues:
    """The run-time values of symbolic dimensions in one export (see the module doc)."""

    def __init__(self, em: Any, sources: dict) -> None:
        self.em = em
        self.sources = sources
        self.shapes: dict = {}   # input name -> its Shape output
        self.cache: dict = {}    # dimension -> the name of its [1]-shaped int64 value
        #: symbolic shape -> a tensor emitted so far that has it (a target equal to a whole
        #: shape is Shape(that tensor): one node, as exporters write it)
        self.tensors: dict = {}
        self.whole: dict = {}    # symbolic shape -> its Shape output

    def seen(self, name: str, shape: tuple) -> None:
        """Tensor ``name`` of symbolic ``shape`` is emitted (its shape can be read)."""
        if not any(d is ir.ANY for d in shape):
            self.tensors.setdefault(shape, name)

    def vector(self, values: Any) -> str:
        """A 1-D int64 tensor of ``values`` (ints and dimensions)."""
        values = list(values)
        if all(type(v) is int for v in values):
            return self.em.const(np.asarray(values, dtype="int64"))
        key = tuple(values)
        if key in self.whole:
            return self.whole[key]
        if key in self.tensors and self._cost(values) >= _SHAPE_OF_AT:
            # (a Concat of values computed already costs one node too, and shares them)
            out = self.whole[key] = self.em.one("Shape", [self.tensors[key]])
            return out
        parts: list = []
        run: list = []
        for v in values:
            if type(v) is int:
                run.append(v)
                continue
            if run:
                parts.append(self.em.const(np.asarray(run, dtype="int64")))
                run = []
            parts.append(self.one(v))
        if run:
            parts.append(self.em.const(np.asarray(run, dtype="int64")))
        return parts[0] if len(parts) == 1 else self.em.one("Concat", parts, axis=0)

    def _cost(self, values: list) -> int:
        """Nodes a Concat of ``values`` would add: itself, and each value not computed yet
        (a variable's Slice, and its input's Shape the first time; an expression's ops)."""
        cost = 1
        for v in values:
            if type(v) is int or v in self.cache:
                continue
            if v is ir.ANY:
                return 1 << 30
            names = ir.dims.free_size_vars(v)
            first = 0 if self.em.opset >= 15 else 1  # (Shape then Slice, the Shape once per input)
            cost += sum(1 + first * (self.sources.get(n, ("",))[0] not in self.shapes) for n in names
                        if ir.size_var(n) not in self.cache)
            if v.name is None:
                cost += len(v.terms)
        return cost

    def scalar(self, value: Any) -> str:
        """A 0-D int64 tensor of one dimension."""
        if type(value) is int:
            return self.em.const(np.asarray(value, dtype="int64"))
        return self.em.one("Reshape", [self.one(value), self.em.const(np.asarray([], dtype="int64"))])

    def one(self, d: Any) -> str:
        """A [1]-shaped int64 tensor holding dimension ``d``."""
        if type(d) is int:
            return self.em.const(np.asarray([d], dtype="int64"))
        if d is ir.ANY:
            raise FormatError("a dimension ? has no value to write: the model's shape arithmetic depends on "
                              "data passhost cannot compute")
        known = self.cache.get(d)
        if known is not None:
            return known
        out = self._variable(d.name) if d.name is not None else self._expression(d)
        self.cache[d] = out
        return out

    def _variable(self, name: str) -> str:
        src = self.sources.get(name)
        if src is None:
            raise FormatError(f"size variable {name} appears in no input of @main on its own axis, so the "
                              "exported graph cannot read its value; bind it (--bind-dim) or give an input "
                              "that has it")
        inp, axis, a, b = src
        em = self.em
        if em.opset >= 15:
            size = em.one("Shape", [inp], start=axis, end=axis + 1)
        else:
            shape = self.shapes.get(inp)
            if shape is None:
                shape = self.shapes[inp] = em.one("Shape", [inp])
            size = em.one("Slice", [shape, em.const(np.asarray([axis], "int64")),
                                    em.const(np.asarray([axis + 1], "int64"))])
        if b:
            size = em.one("Sub", [size, self.one(b)])
        if a != 1:
            size = em.one("Div", [size, self.one(a)])
        return size

    def _expression(self, d: ir.Dim) -> str:
        total: Optional[str] = None
        constant = 0
        for mono, coeff in d.terms:
            if not mono:
                constant += coeff
                continue
            term: Optional[str] = None
            for atom in mono:
                value = self._atom(atom)
                term = value if term is None else self.em.one("Mul", [term, value])
            if coeff != 1:
                term = self.em.one("Mul", [term, self.one(coeff)])
            total = term if total is None else self.em.one("Add", [total, term])
        if constant:
            total = self.em.one("Add", [total, self.one(constant)])
        return total

    def _atom(self, atom: Any) -> str:
        if type(atom) is str:
            return self.one(ir.size_var(atom))
        kind, a, b = atom
        x, y = self.one(a), self.one(b)
        if kind == "floordiv":  # (its operand is never negative where sizes are: Div truncates)
            return self.em.one("Div", [x, y])
        if kind == "floormod":
            return self.em.one("Mod", [x, y], fmod=0)
        return self.em.one("Min" if kind == "min" else "Max", [x, y])


def reshape_target(in_shape: tuple, out_shape: tuple) -> Optional[list]:
    """A static ONNX ``Reshape`` target for ``in_shape -> out_shape`` with ONNX's ``0``
    (copy the input's dimension) and one ``-1`` where that is exact, or ``None``::

        (batch, seq, 768) -> (batch, seq, 12, 64)   gives [0, 0, 12, 64]
        (batch, seq, 768) -> (batch*seq, 768)       gives [-1, 768]
    """
    target: list = []
    unknown = []
    for i, d in enumerate(out_shape):
        if type(d) is int:
            if d == 0:
                return None  # an empty axis: ONNX reads 0 as "copy"
            target.append(d)
        elif i < len(in_shape) and d == in_shape[i] and d is not ir.ANY:
            target.append(0)
        else:
            target.append(None)
            unknown.append(i)
    if len(unknown) > 1:
        return None
    if unknown:
        target[unknown[0]] = -1
    return target


def unit_axes(in_shape: tuple, out_shape: tuple) -> Optional[tuple]:
    """``("Squeeze", axes)`` when ``out_shape`` is ``in_shape`` with some static 1s removed,
    ``("Unsqueeze", axes)`` when it is ``in_shape`` with 1s inserted, else ``None``::

        (1, batch, 4, seq, 8) -> (batch, 4, seq, 8)   gives ("Squeeze", [0])
    """
    if len(out_shape) < len(in_shape):
        short, long_, op = out_shape, in_shape, "Squeeze"
    elif len(out_shape) > len(in_shape):
        short, long_, op = in_shape, out_shape, "Unsqueeze"
    else:
        return None
    axes, j = [], 0
    for i, d in enumerate(long_):
        if j < len(short) and d == short[j] and d is not ir.ANY:
            j += 1
        elif type(d) is int and d == 1:
            axes.append(i)
        else:
            return None
    return (op, axes) if j == len(short) else None


def value_info_shape(vi: onnx.ValueInfoProto) -> list:
    """The dims of a value info as written (ints, strings, ``None``)."""
    out = []
    for d in vi.type.tensor_type.shape.dim:
        out.append(d.dim_value if d.HasField("dim_value") else (d.dim_param or None))
    return out
