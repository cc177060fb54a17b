"""FuseRotaryEmbedding: Hugging Face's rotary position embedding, ``x * cos + rotate_half(x) *
sin`` with ``cos`` and ``sin`` the two halves of one angle table repeated, becomes one
``nn.rotary_embedding`` (ONNX's ``RotaryEmbedding``, opset 23) that reads the half table::

    %t = ...;                                                  /* angles, (batch, seq, 8) */
    %c = reshape(cos(concatenate((%t, %t), axis=-1)), newshape=[batch, 1, seq, 16]);
    %s = reshape(sin(concatenate((%t, %t), axis=-1)), newshape=[batch, 1, seq, 16]);
    %h = concatenate((negative(strided_slice(%q, begin=[8], end=[16], axes=[3])),
                      strided_slice(%q, begin=[0], end=[8], axes=[3])), axis=-1);
    add(multiply(%q, %c), multiply(%h, %s))                    /* %q: (batch, heads, seq, 16) */
    ->  nn.rotary_embedding(%q, reshape(cos(%t), [batch, seq, 8]), reshape(sin(%t), [batch, seq, 8]))

The numbers are the same value for value (``x1 * c + (-x2) * s`` is ``x1 * c - x2 * s`` in IEEE
arithmetic). The rule checks what makes it so: the two slices are the halves of the last axis
of the same 4-D ``x``; ``cos`` and ``sin`` reach a ``concatenate((t, t))`` along the last axis
through element-wise operators (``cos``, ``sin``, ``cast``, ``negative``, a scalar ``multiply`` or
``divide``, Hugging Face's ``attention_scaling``) and reshapes that keep the last axis, and
broadcast against ``x`` as ``(batch or 1, 1, seq, head)``. Anything else (an interleaved
rotation, tables that are not two equal halves) stays as it is.
"""
from __future__ import annotations

from typing import Optional

from passhost import ir
from passhost.ir.pattern import DFPatternCallback, is_op, is_tuple, wildcard
from passhost.transform import pattern_pass

from ._shared import is_float_tensor, same, scalar, shape_of

__all__ = ["RotaryRule", "FuseRotaryEmbedding", "half_of_repeated"]

_ELEMENTWISE = {"cos", "sin", "cast", "negative"}
_SCALAR_BINARY = {"multiply", "divide"}
_VIEWS = {"reshape", "expand_dims", "squeeze"}


def last_axis_range(call: ir.Call, in_shape: tuple) -> Optional[tuple]:
    """``(start, stop)`` of a ``strided_slice`` that cuts the last axis only, with stride 1."""
    a = call.attrs
    if a.slice_mode != "end":
        return None
    out_shape = shape_of(call)
    nd = len(in_shape)
    if out_shape is None or len(out_shape) != nd or not all(same(i, o) for i, o in zip(in_shape[:-1], out_shape[:-1])):
        return None
    axes = list(range(len(a.begin))) if a.axes is None else [int(x) % nd for x in a.axes]
    if nd - 1 not in axes:
        return None
    i = axes.index(nd - 1)
    strides = list(a.strides or (1,))
    stride = strides[i] if i < len(strides) else (strides[-1] if len(strides) == 1 else 1)
    begin = a.begin[i]
    if stride != 1 or type(begin) is not int or type(out_shape[-1]) is not int or type(in_shape[-1]) is not int:
        return None
    begin = begin + in_shape[-1] if begin < 0 else begin
    return begin, begin + out_shape[-1]


def half_of_repeated(e: ir.Expr, width: int) -> Optional[tuple]:
    """For ``e`` whose last axis (of size ``width``) is ``concat(h, h)``: ``(expr, shape)`` of
    ``h`` with ``e``'s element-wise operators applied, else ``None``. ``e`` may reach the
    concatenation through element-wise operators and reshapes that keep the last axis; the
    reshapes are left out (they only regroup the leading axes, in the same row-major order), so
    the result has the shape of ``h``, to be reshaped as the caller needs."""
    chain = []
    node = e
    while True:
        if not isinstance(node, ir.Call):
            return None
        name = node.op.name
        if name == "concatenate":
            fields = node.args[0]
            shape = shape_of(node)
            if (isinstance(fields, ir.Tuple) and len(fields.fields) == 2 and fields.fields[0] is fields.fields[1]
                    and shape and int(node.attrs.axis) % len(shape) == len(shape) - 1):
                half = fields.fields[0]
                break
            return None
        shape, inner = shape_of(node), shape_of(node.args[0])
        if shape is None or inner is None or not shape or not inner or shape[-1] != width or inner[-1] != width:
            return None
        if name in _ELEMENTWISE or name in _VIEWS:
            if name in _VIEWS and any(d is ir.ANY for d in shape):
                return None
            at = 0
        elif name in _SCALAR_BINARY:  # a scalar constant on one side (divide: the divisor)
            at = next((i for i in (0, 1) if _scalar_other(node, i, len(shape))), None)
            if at is None or (name == "divide" and at != 0):
                return None
        else:
            return None
        chain.append((node, at))
        node = node.args[at]
    out = half
    for call, at in reversed(chain):  # rebuild from the half up: the same element-wise operators
        if call.op.name in _VIEWS:
            continue
        args = list(call.args)
        args[at] = out
        if len(args) == 2:  # the scalar as a 0-d constant: it broadcasts against any rank
            c = args[1 - at]
            args[1 - at] = ir.const(c.data.reshape(()))
        out = ir.Call(call.op, args, call.attrs)
    return out, shape_of(half)


def _scalar_other(call: ir.Call, at: int, ndim: int) -> bool:
    """The argument of ``call`` other than ``at`` is a one-value float constant of rank at most ``ndim``."""
    other = call.args[1 - at]
    return scalar(other) is not None and other.data.ndim <= ndim


class RotaryRule(DFPatternCallback):
    """``x * cos + concat(-x2, x1) * sin`` with halved tables -> ``nn.rotary_embedding``."""

    def __init__(self) -> None:
        super().__init__(require_type=True, name="rotate_half_rotary")
        self.x, self.cos, self.sin = wildcard(), wildcard(), wildcard()
        self.x1, self.x2 = is_op("strided_slice")(self.x), is_op("strided_slice")(self.x)
        self.turned = is_op("concatenate")(is_tuple([is_op("negative")(self.x2), self.x1]))
        self.pattern = is_op("add")(is_op("multiply")(self.x, self.cos), is_op("multiply")(self.turned, self.sin))

    def callback(self, pre, post, node_map):
        x = node_map[self.x][0]
        shape = shape_of(x)
        if not is_float_tensor(x, 4) or type(shape[3]) is not int or shape[3] % 2:
            return None
        head = shape[3]
        turned = node_map[self.turned][0]
        if int(turned.attrs.axis) % 4 != 3:
            return None
        if (last_axis_range(node_map[self.x2][0], shape) != (head // 2, head)
                or last_axis_range(node_map[self.x1][0], shape) != (0, head // 2)):
            return None
        tables = []
        for p in (self.cos, self.sin):
            table = node_map[p][0]
            tshape = shape_of(table)
            if tshape is None or ir.type_of(table).dtype != ir.type_of(x).dtype or len(tshape) > 4:
                return None
            full = (1,) * (4 - len(tshape)) + tshape  # right-aligned against (batch, heads, seq, head)
            if (full[1] != 1 or full[3] != head or not same(full[2], shape[2])
                    or not (full[0] == 1 or same(full[0], shape[0]))):
                return None
            half = half_of_repeated(table, head)
            if half is None:
                return None
            expr, hshape = half
            want = (full[0], full[2], head // 2)
            tables.append(expr if len(hshape) == 3 and all(same(a, b) for a, b in zip(hshape, want))
                          else ir.reshape(expr, list(want)))
        return ir.nn.rotary_embedding(x, *tables)

    def examples(self, rng):
        """Rotary embeddings of random sizes as Hugging Face's models write them."""
        b, h, s, half = (int(v) for v in rng.randint(1, 4, size=4))
        head = 2 * half
        x = ir.var("x", shape=(b, h, s, head))
        t = ir.var("t", shape=(b if rng.rand() < 0.7 else 1, s, half))
        table = ir.concatenate([t, t], axis=-1)
        scaling = rng.rand() < 0.3

        def angle(fn):
            out = fn(table)
            if scaling:
                out = ir.multiply(out, ir.const(float(rng.choice([1.0, 0.5, 1.25]))))
            return ir.expand_dims(out, axis=1) if rng.rand() < 0.5 else ir.reshape(out, (t.type_annotation.shape[0], 1,
                                                                                          s, head))

        c, sn = angle(ir.cos), angle(ir.sin)
        x2 = ir.strided_slice(x, begin=[half], end=[head], axes=[3])
        x1 = ir.strided_slice(x, begin=[0, 0, 0, 0], end=[b, h, s, half], strides=[1, 1, 1, 1])
        turned = ir.concatenate([ir.negative(x2), x1], axis=-1)
        out = ir.add(ir.multiply(x, c), ir.multiply(turned, sn))
        return [ir.Function([x, t], out)]


def FuseRotaryEmbedding():  # noqa: N802 - TVM-style pass constructor
    """Turn Hugging Face's rotary position embedding (x * cos + rotate_half(x) * sin) into nn.rotary_embedding."""
    return pattern_pass("FuseRotaryEmbedding", lambda: [RotaryRule()], opt_level=1, doc=__doc__)
