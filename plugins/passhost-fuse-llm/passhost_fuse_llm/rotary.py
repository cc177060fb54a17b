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
broadcast against ``x`` as ``(batch or 1, 1, seq, head)``. Anything else (tables that are not
two equal halves, slices of other sizes) stays as it is.

Two more forms fuse (``interleaved`` and ``rotary_dim``, ONNX's ``interleaved`` and
``rotary_embedding_dim``):

- GPT-J's ``rotate_every_two``, the pairs ``(x[2i], x[2i + 1])``: ``stack((-x[..., 1::2],
  x[..., 0::2]), -1)`` flattened, the tables ``repeat_interleave(t, 2)``, on ``(batch, seq,
  heads, head)`` data (GPT-J rotates before its heads' transpose; the rule then writes the
  operator between two transposes, which the transpose after it cancels)::

      %e = strided_slice(%x, begin=[0], end=[8], strides=[2], axes=[3]);   /* and %o from 1 */
      %t = reshape(concatenate((reshape(negative(%o), [b, s, h, 4, 1]), reshape(%e, [b, s, h, 4, 1])),
                               axis=-1), [b, s, h, 8]);
      add(multiply(%x, %cos2), multiply(%t, %sin2))     /* %cos2: (b, s, 1, 8), c0 c0 c1 c1 ... */
      ->  transpose(nn.rotary_embedding(transpose(%x, [0, 2, 1, 3]), %cos, %sin, interleaved=True),
                    [0, 2, 1, 3])

- a rotation of the first ``r`` values of each head only (Phi's ``partial_rotary_factor``, GPT-J's
  and GPT-NeoX's ``rotary_dim``), the rest passed through::

      concatenate((nn.rotary_embedding(strided_slice(%x, 0:8), %c, %s), strided_slice(%x, 8:16)), axis=-1)
      ->  nn.rotary_embedding(%x, %c, %s, rotary_dim=8)

Both are value for value the operator's kernel (the same products and sums, concatenated).
"""
from __future__ import annotations

from typing import Optional

from passhost import ir
from passhost.ir.pattern import DFPatternCallback, is_op, is_tuple, wildcard
from passhost.transform import pattern_pass

from ._shared import is_float_tensor, same, scalar, shape_of

__all__ = ["RotaryRule", "InterleavedRotaryRule", "PartialRotaryRule", "FuseRotaryEmbedding", "half_of_repeated",
           "half_of_interleaved"]

_ELEMENTWISE = {"cos", "sin", "cast", "negative"}
_SCALAR_BINARY = {"multiply", "divide"}
_VIEWS = {"reshape", "expand_dims", "squeeze"}


def last_axis_range(call: ir.Call, in_shape: tuple) -> Optional[tuple]:
    """``(start, stop)`` of a ``strided_slice`` that cuts the last axis only, with stride 1
    (:func:`last_axis_step` of stride 1, the axis' size static)."""
    step = last_axis_step(call, in_shape)
    if step is None or step[1] != 1 or type(in_shape[-1]) is not int:
        return None
    begin, _, length = step
    return begin, begin + length


def half_of_repeated(e: ir.Expr, width: int) -> Optional[tuple]:
    """For ``e`` whose last axis (of size ``width``) is ``concat(h, h)``: ``(expr, shape)`` of
    ``h`` with ``e``'s element-wise operators applied, else ``None``. ``e`` may reach the
    concatenation through element-wise operators and reshapes that keep the last axis; the
    reshapes are left out (they only regroup the leading axes, in the same row-major order), so
    the result has the shape of ``h``, to be reshaped as the caller needs."""
    return _half_table(e, width, _repeated)


def half_of_interleaved(e: ir.Expr, width: int) -> Optional[tuple]:
    """As :func:`half_of_repeated` for a table whose last axis is ``h`` with every value twice
    in a row (``repeat_interleave(h, 2)``: ``reshape(tile(reshape(h, [..., w/2, 1]), [1, ..., 2]),
    [..., w])``, or a ``concatenate`` of the column with itself for the ``tile``)."""
    return _half_table(e, width, _interleaved)


def _repeated(node: ir.Call, width: int) -> Optional[ir.Expr]:
    """``h`` of ``node`` = ``concatenate((h, h), axis=-1)``."""
    if node.op.name != "concatenate":
        return None
    fields = node.args[0]
    shape = shape_of(node)
    if (isinstance(fields, ir.Tuple) and len(fields.fields) == 2 and fields.fields[0] is fields.fields[1]
            and shape and int(node.attrs.axis) % len(shape) == len(shape) - 1):
        return fields.fields[0]
    return None


def _interleaved(node: ir.Call, width: int) -> Optional[ir.Expr]:
    """``h`` of ``node`` = ``reshape(tile(column(h), [1, ..., 1, 2]), [..., width])`` (or the
    column concatenated with itself), ``column(h)`` a reshape or ``expand_dims`` of ``h`` of shape
    ``h.shape + (1,)``."""
    if node.op.name != "reshape" or not isinstance(node.args[0], ir.Call):
        return None
    pairs = node.args[0]
    out, pshape = shape_of(node), shape_of(pairs)
    if out is None or pshape is None or len(pshape) != len(out) + 1 or pshape[-2:] != (width // 2, 2):
        return None
    if pairs.op.name == "tile":
        reps = [int(r) for r in pairs.attrs.reps]
        if reps != [1] * (len(pshape) - 1) + [2]:
            return None
        column = pairs.args[0]
    elif pairs.op.name == "concatenate":
        column = _repeated(pairs, 2)
        if column is None:
            return None
    else:
        return None
    if not isinstance(column, ir.Call) or column.op.name not in ("reshape", "expand_dims"):
        return None
    half, cshape = column.args[0], shape_of(column)
    hshape = shape_of(half)
    if hshape is None or cshape is None or cshape[-1] != 1 or not hshape or hshape[-1] != width // 2:
        return None
    # the column is h with axes of size 1 put in (its values in the same order)
    kept, hkept = [d for d in cshape[:-1] if d != 1], [d for d in hshape if d != 1]
    if len(kept) != len(hkept) or not all(same(a, b) for a, b in zip(kept, hkept)):
        return None
    if not all(same(a, b) for a, b in zip(out[:-1], pshape[:-2])):
        return None
    return half


def _half_table(e: ir.Expr, width: int, base) -> Optional[tuple]:
    chain = []
    node = e
    while True:
        if not isinstance(node, ir.Call):
            return None
        half = base(node, width)
        if half is not None:
            break
        name = node.op.name
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

#: where the heads and the sequence are in the rotated data: (batch, heads, seq, head), the
#: operator's layout, or (batch, seq, heads, head), GPT-J's before its transpose
_BHSD, _BSHD = (1, 2), (2, 1)
_SWAP = (0, 2, 1, 3)


def half_tables(tables: list, x: ir.Expr, half_of, layouts: tuple) -> Optional[tuple]:
    """``([cos, sin], layout)``: the half tables ``(batch or 1, seq, width / 2)`` of the full
    ``tables`` that broadcast against the 4-D ``x`` (of last axis ``width``) in one of ``layouts``
    (the heads' axis of size 1), read by ``half_of``; ``None`` if they do not."""
    shape = shape_of(x)
    width = shape[3]
    for heads, seq in layouts:
        out = []
        for table in tables:
            tshape = shape_of(table)
            if tshape is None or ir.type_of(table).dtype != ir.type_of(x).dtype or len(tshape) > 4:
                return None
            full = (1,) * (4 - len(tshape)) + tshape  # right-aligned against x
            if (full[heads] != 1 or full[3] != width or not same(full[seq], shape[seq])
                    or not (full[0] == 1 or same(full[0], shape[0]))):
                break
            half = half_of(table, width)
            if half is None:
                return None
            expr, hshape = half
            want = (full[0], full[seq], width // 2)
            out.append(expr if len(hshape) == 3 and all(same(a, b) for a, b in zip(hshape, want))
                       else ir.reshape(expr, list(want)))
        else:
            return out, (heads, seq)
    return None


def _rotary_in(layout: tuple, x: ir.Expr, tables: list, **attrs) -> ir.Expr:
    """``nn.rotary_embedding`` of ``x`` in ``layout``: between two transposes for GPT-J's."""
    if layout == _BHSD:
        return ir.nn.rotary_embedding(x, *tables, **attrs)
    return ir.transpose(ir.nn.rotary_embedding(ir.transpose(x, _SWAP), *tables, **attrs), _SWAP)


def last_axis_step(call: ir.Call, in_shape: tuple) -> Optional[tuple]:
    """``(begin, stride, length)`` of a ``strided_slice`` that cuts the last axis only."""
    a = call.attrs
    out_shape = shape_of(call)
    nd = len(in_shape)
    if (a.slice_mode != "end" or out_shape is None or len(out_shape) != nd
            or not all(same(i, o) for i, o in zip(in_shape[:-1], out_shape[:-1]))):
        return None
    axes = list(range(len(a.begin))) if a.axes is None else [int(v) % nd for v in a.axes]
    if nd - 1 not in axes:
        return None
    i = axes.index(nd - 1)
    strides = list(a.strides or (1,))
    stride = strides[i] if i < len(strides) else (strides[-1] if len(strides) == 1 else 1)
    begin = a.begin[i]
    if type(begin) is not int or type(stride) is not int or type(out_shape[-1]) is not int:
        return None
    return (begin + in_shape[-1] if begin < 0 else begin), stride, out_shape[-1]



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
        found = half_tables([node_map[self.cos][0], node_map[self.sin][0]], x, half_of_repeated, (_BHSD,))
        return None if found is None else ir.nn.rotary_embedding(x, *found[0])

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


class InterleavedRotaryRule(DFPatternCallback):
    """GPT-J's ``x * cos2 + rotate_every_two(x) * sin2`` -> ``nn.rotary_embedding(interleaved=True)``."""

    def __init__(self) -> None:
        super().__init__(require_type=True, name="interleaved_rotary")
        self.x, self.cos, self.sin = wildcard(), wildcard(), wildcard()
        self.odd, self.even = is_op("strided_slice")(self.x), is_op("strided_slice")(self.x)

        def column(e):
            return is_op("reshape")(e) | is_op("expand_dims")(e)

        self.neg_col, self.even_col = column(is_op("negative")(self.odd)), column(self.even)
        self.stack = is_op("concatenate")(is_tuple([self.neg_col, self.even_col]))
        self.turned = is_op("reshape")(self.stack)
        self.pattern = is_op("add")(is_op("multiply")(self.x, self.cos), is_op("multiply")(self.turned, self.sin))

    def callback(self, pre, post, node_map):
        x = node_map[self.x][0]
        shape = shape_of(x)
        if not is_float_tensor(x, 4) or type(shape[3]) is not int or shape[3] % 2:
            return None
        rot = shape[3]
        if (last_axis_step(node_map[self.even][0], shape) != (0, 2, rot // 2)
                or last_axis_step(node_map[self.odd][0], shape) != (1, 2, rot // 2)):
            return None
        pairs = shape[:3] + (rot // 2,)
        stack = node_map[self.stack][0]
        if int(stack.attrs.axis) % 5 != 4 or not all(same(a, b) for a, b in zip(shape_of(stack), pairs + (2,))):
            return None
        for col in (self.neg_col, self.even_col):
            cshape = shape_of(node_map[col][0])
            if len(cshape) != 5 or cshape[4] != 1:
                return None
        if not all(same(a, b) for a, b in zip(shape_of(node_map[self.turned][0]), shape)):
            return None
        found = half_tables([node_map[self.cos][0], node_map[self.sin][0]], x, half_of_interleaved, (_BHSD, _BSHD))
        return None if found is None else _rotary_in(found[1], x, found[0], interleaved=True)

    def examples(self, rng):
        """GPT-J's rotation of random sizes, on (batch, seq, heads, rot) or (batch, heads, seq, rot)."""
        b, h, s, half = (int(v) for v in rng.randint(1, 4, size=4))
        rot = 2 * half
        gptj = rng.rand() < 0.6
        x = ir.var("x", shape=(b, s, h, rot) if gptj else (b, h, s, rot))
        t = ir.var("t", shape=(b, s, half))

        def table(fn):
            col = ir.reshape(fn(t), (b, s, 1, half, 1)) if gptj else ir.expand_dims(fn(t), axis=-1)
            rows = (b, s, 1, rot) if gptj else (b, s, rot)
            out = ir.reshape(ir.tile(col, [1] * (len(rows)) + [2]), rows)
            return out if gptj else ir.expand_dims(out, axis=1)

        odd = ir.strided_slice(x, begin=[1], end=[rot], strides=[2], axes=[3])
        even = ir.strided_slice(x, begin=[0], end=[rot], strides=[2], axes=[3])
        stack = ir.concatenate([ir.expand_dims(ir.negative(odd), axis=-1), ir.expand_dims(even, axis=-1)], axis=-1)
        turned = ir.reshape(stack, x.type_annotation.shape)
        return [ir.Function([x, t], ir.add(ir.multiply(x, table(ir.cos)), ir.multiply(turned, table(ir.sin))))]


class PartialRotaryRule(DFPatternCallback):
    """``concatenate((rotary(x[..., :r]), x[..., r:]))`` -> ``nn.rotary_embedding(x, rotary_dim=r)``,
    the rotation also between GPT-J's two transposes."""

    def __init__(self) -> None:
        super().__init__(require_type=True, name="partial_rotary")
        self.x, self.c, self.s = wildcard(), wildcard(), wildcard()
        self.front, self.rest = is_op("strided_slice")(self.x), is_op("strided_slice")(self.x)
        self.plain = is_op("nn.rotary_embedding")(self.front, self.c, self.s)
        self.inner = is_op("nn.rotary_embedding")(is_op("transpose")(self.front), self.c, self.s)
        self.swapped = is_op("transpose")(self.inner)
        self.pattern = is_op("concatenate")(is_tuple([self.plain | self.swapped, self.rest]))

    def callback(self, pre, post, node_map):
        x = node_map[self.x][0]
        shape = shape_of(x)
        if not is_float_tensor(x, 4) or type(shape[3]) is not int:
            return None
        head = shape[3]
        cat = node_map[self.pattern][0]
        front = last_axis_step(node_map[self.front][0], shape)
        if int(cat.attrs.axis) % 4 != 3 or front is None or front[:2] != (0, 1) or front[2] >= head:
            return None
        rot = front[2]
        if last_axis_step(node_map[self.rest][0], shape) != (rot, 1, head - rot):
            return None
        if self.swapped in node_map:
            outer, call = node_map[self.swapped][0], node_map[self.inner][0]
            if any(tuple(int(a) for a in t.attrs.axes or ()) != _SWAP for t in (outer, call.args[0])):
                return None
            layout = _BSHD
        else:
            call, layout = node_map[self.plain][0], _BHSD
        if int(call.attrs.rotary_dim) not in (0, rot):
            return None
        return _rotary_in(layout, x, [node_map[self.c][0], node_map[self.s][0]],
                          interleaved=bool(call.attrs.interleaved), rotary_dim=rot)

    def examples(self, rng):
        """The operator on the first ``r`` values of each head, the rest passed through."""
        b, h, s, half = (int(v) for v in rng.randint(1, 4, size=4))
        rot = 2 * half
        head = rot + 2 * int(rng.randint(1, 3))
        gptj = rng.rand() < 0.4
        x = ir.var("x", shape=(b, s, h, head) if gptj else (b, h, s, head))
        c, sn = ir.var("c", shape=(b, s, half)), ir.var("sn", shape=(b, s, half))
        front = ir.strided_slice(x, begin=[0], end=[rot], axes=[3])
        interleaved = bool(rng.rand() < 0.5)
        if gptj:
            turned = ir.transpose(ir.nn.rotary_embedding(ir.transpose(front, _SWAP), c, sn, interleaved=interleaved),
                                  _SWAP)
        else:
            turned = ir.nn.rotary_embedding(front, c, sn, interleaved=interleaved)
        rest = ir.strided_slice(x, begin=[rot], end=[head], axes=[3])
        return [ir.Function([x, c, sn], ir.concatenate([turned, rest], axis=-1))]


def FuseRotaryEmbedding():  # noqa: N802 - TVM-style pass constructor
    """Turn Hugging Face's rotary position embedding (x * cos + rotate_half(x) * sin) into nn.rotary_embedding."""
    return pattern_pass("FuseRotaryEmbedding", lambda: [RotaryRule(), InterleavedRotaryRule(), PartialRotaryRule()],
                        opt_level=1, doc=__doc__)
