"""A scatter over every position: PyTorch's slice assignment of a whole tensor
(``mask[:, :, :, :n] = mask[:, :, :, :n].masked_fill(...)`` in T5's decoder, with ``n`` the full
length) is exported as ``ScatterND`` whose indices are the grid of every position of the data, in
place; that writes each element once with its own update, so the result is the updates::

    %i = transpose(concatenate((reshape(broadcast_to(%b, [n, 1, s, s]), [n, 1, s, s, 1]),   /* %b: arange(n) */
                                reshape(broadcast_to(0, [n, 1, s, s]), [n, 1, s, s, 1]),
                                reshape(broadcast_to(reshape(arange(s), [s, 1]), [n, 1, s, s]), [n, 1, s, s, 1]),
                                reshape(broadcast_to(arange(s), [n, 1, s, s]), [n, 1, s, s, 1])), axis=-1),
                   axes=[4, 0, 1, 2, 3]);
    scatter_nd(%data, %i, %updates)          /* %data, %updates: (n, 1, s, s) */
    ->  %updates

Each index component must be the position along its own axis -- ``arange(0, size)`` (through
reshapes of unit axes, a slice of all of it, ``broadcast_to`` the data's shape) or zeros for an
axis of size 1 -- and the updates must have the data's shape; anything else stays.
"""
from __future__ import annotations

import numpy as np

from passhost import ir
from passhost.ir.pattern import DFPatternCallback, is_op, wildcard

from ._shared import same, shape_of

__all__ = ["WholeScatterRule"]


def _non_unit(shape: tuple) -> list:
    return [i for i, d in enumerate(shape) if not (type(d) is int and d == 1)]


def _through_unit_moves(x: ir.Expr) -> ir.Expr:
    """``x`` without the reshapes that move only unit axes and the slices that keep all of a
    1-D tensor (the values keep their order: one axis at most is longer than 1)."""
    while isinstance(x, ir.Call):
        name, src, out = x.op.name, shape_of(x.args[0]) if x.args else None, shape_of(x)
        if src is None or out is None:
            break
        if name in ("reshape", "expand_dims", "squeeze") and len(_non_unit(src)) <= 1 and len(_non_unit(out)) <= 1:
            x = x.args[0]
        elif name == "strided_slice" and len(src) == 1 and same(src[0], out[0]) and _from_zero(x):
            x = x.args[0]
        else:
            break
    return x


def _from_zero(call: ir.Call) -> bool:
    a = call.attrs
    begin, strides = list(a.begin or [0]), list(a.strides or [1])
    return begin == [0] and strides == [1]


def _positions(x: ir.Expr, shape: tuple, axis: int) -> bool:
    """``x`` broadcast to ``shape`` holds each element's index along ``axis``."""
    if isinstance(x, ir.Call) and x.op.name == "broadcast_to":
        target = shape_of(x)
        if target is None or len(target) != len(shape) or not all(same(a, b) for a, b in zip(target, shape)):
            return False
        x = x.args[0]
    xs = shape_of(x)
    if xs is None or len(xs) > len(shape) or ir.type_of(x).dtype not in ("int64", "int32"):
        return False
    aligned = (1,) * (len(shape) - len(xs)) + xs
    if any(i != axis for i in _non_unit(aligned)):
        return False
    if type(shape[axis]) is int and shape[axis] == 1:
        return isinstance(x, ir.Constant) and not np.any(x.data)
    if not same(aligned[axis], shape[axis]):
        return False
    x = _through_unit_moves(x)
    if isinstance(x, ir.Constant):
        return bool(np.array_equal(x.data.reshape(-1), np.arange(x.data.size)))
    if isinstance(x, ir.Call) and x.op.name == "arange":
        a = x.attrs
        return type(a.start) is int and a.start == 0 and type(a.step) is int and a.step == 1
    return False


class WholeScatterRule(DFPatternCallback):
    """``scatter_nd(data, grid of every position, updates)`` -> ``updates`` (see the module doc)."""

    def __init__(self) -> None:
        super().__init__(require_type=True, name="whole_scatter")
        self.fields = wildcard()
        self.grid = is_op("transpose")(is_op("concatenate")(self.fields))
        self.pattern = is_op("scatter_nd")(wildcard(), self.grid, wildcard())

    def callback(self, pre, post, node_map):
        data, _, updates = post.args
        shape, ushape = shape_of(data), shape_of(updates)
        if (shape is None or ushape is None or len(shape) != len(ushape) or post.attrs.mode != "update"
                or not all(same(a, b) for a, b in zip(shape, ushape))):
            return None
        grid = node_map[self.grid][0]
        k = len(shape)
        concat = grid.args[0]
        if list(grid.attrs.axes or []) != [k] + list(range(k)) or int(concat.attrs.axis) not in (-1, k):
            return None
        fields = concat.args[0]
        if not isinstance(fields, ir.Tuple) or len(fields.fields) != k:
            return None
        return updates if all(self._component(f, shape, i) for i, f in enumerate(fields.fields)) else None

    @staticmethod
    def _component(f: ir.Expr, shape: tuple, axis: int) -> bool:
        """``f`` is ``(shape..., 1)``: the positions along ``axis`` with a unit axis appended."""
        fs = shape_of(f)
        if fs is None or len(fs) != len(shape) + 1 or fs[-1] != 1 or not all(same(a, b) for a, b in zip(fs, shape)):
            return False
        if not (isinstance(f, ir.Call) and f.op.name in ("reshape", "expand_dims")):
            return False
        return _positions(f.args[0], shape, axis)

    def examples(self, rng):
        """T5's mask assignment of random sizes: the grid of a (batch, 1, seq, seq) tensor, the
        batch index from arange, the unit axis from zeros, the rows as a column, the columns
        through a full slice."""
        b, s = int(rng.randint(1, 4)), int(rng.randint(1, 5))
        shape = (b, 1, s, s)
        data, updates = ir.var("data", shape=shape), ir.var("updates", shape=shape)

        def field(x):
            return ir.reshape(ir.broadcast_to(x, shape), shape + (1,))

        rows = ir.reshape(ir.arange(0, s, dtype="int64"), (s, 1))
        cols = ir.strided_slice(ir.arange(0, s, dtype="int64"), [0], [s], [1])
        batch = ir.reshape(ir.arange(0, b, dtype="int64"), (b, 1, 1, 1))
        zero = ir.const(np.zeros((1, 1, 1), "int64"), dtype="int64")
        grid = ir.transpose(ir.concatenate([field(batch), field(zero), field(rows), field(cols)], axis=-1),
                            (4, 0, 1, 2, 3))
        return [ir.Function([data, updates], ir.scatter_nd(data, grid, updates))]
