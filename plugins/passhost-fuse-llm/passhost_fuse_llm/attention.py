"""FuseAttention: scaled dot-product attention as PyTorch exports it -- the heads merged into the
batch for two ``nn.batch_matmul``, the key-value heads repeated for grouped-query attention, a
mask added, a softmax, PyTorch's guard against rows masked whole -- becomes one ``nn.attention``
(ONNX's ``Attention``, opset 23)::

    %q3 = reshape(multiply(%q, 0.5f), newshape=[4*batch, seq, 16]);            /* %q: (batch, 4, seq, 16) */
    %k4 = reshape(broadcast_to(reshape(%k, [batch, 2, 1, total, 16]), [batch, 2, 2, total, 16]),
                  [batch, 4, total, 16]);                                          /* repeat_kv, %k: 2 heads */
    %k3 = reshape(multiply(transpose(%k4, axes=[0, 1, 3, 2]), 0.5f), [4*batch, 16, total]);
    %p = nn.softmax(add(reshape(nn.batch_matmul(%q3, %k3), [batch, 4, seq, total]), %mask));
    %g = where(not_equal(%p, %p), 0f, %p);                                         /* the NaN guard */
    reshape(nn.batch_matmul(reshape(%g, [4*batch, seq, total]), reshape(... %v ...)), [batch, 4, seq, 16])
    ->  nn.attention(%q, %k, %v, %mask, scale=0.25f)

The rule reads each operand of the two products back to a 4-D ``(batch, heads, seq, head)``
tensor through what exporters put between: reshapes that merge or split the batch and head
axes, transposes of the last two axes, scalar ``multiply``/``divide`` (the scale, on the query,
the key or the scores, multiplied together), and ``repeat_kv``'s ``broadcast_to`` of a unit axis
after the key-value heads; the keys and values must be repeated alike and the probabilities
must reach the second product unscaled. The mask is whatever is added to the scores (absent: a
zero); T5's position bias is such a mask. With the guard the operator zeroes a row masked whole
as the guard does, without it (``zero_masked_rows=False``) it computes the plain softmax's NaN as
the graph did; every value is the same up to float rounding (the scale applied as
``sqrt(scale)`` to the query and the key).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from passhost import ir
from passhost.ir.pattern import DFPatternCallback, is_constant, is_op, wildcard
from passhost.transform import pattern_pass

from ._shared import is_float_tensor, same, scalar, shape_of

__all__ = ["AttentionRule", "FuseAttention", "Operand", "operand"]


@dataclass
class Operand:
    """A ``nn.batch_matmul`` operand ``(batch * heads, x, y)`` read as ``scale`` times the 4-D
    ``base`` ``(batch, heads / rep, ., .)`` with each head repeated ``rep`` times, its last two
    axes swapped when ``swapped``; ``factors`` are the scalars it was multiplied by, in turn
    (``None`` for a division), and ``widened`` says a ``cast`` from a half type to float32 was
    passed on the way (the base is then of the half type)."""

    base: ir.Expr
    rep: int
    swapped: bool
    scale: float
    factors: tuple = ()
    widened: bool = False


def _swaps_last_two(call: ir.Call) -> bool:
    shape = shape_of(call.args[0])
    axes = call.attrs.axes
    if shape is None or axes is None:
        return shape is not None and len(shape) == 2
    nd = len(shape)
    perm = [int(a) % nd for a in axes]
    return perm == list(range(nd - 2)) + [nd - 1, nd - 2]


def _scalar(c: ir.Expr) -> Optional[float]:
    """:func:`scalar`, a one-value bfloat16 constant too (numpy's kind of ml_dtypes' types is 'V')."""
    if isinstance(c, ir.Constant) and c.data.size == 1 and c.data.dtype.name == "bfloat16":
        return float(c.data.astype("float32").reshape(()))
    return scalar(c)


def _peel(node: ir.Expr, scale: float, swapped: bool, factors: list) -> tuple:
    """Strip scalar multiplies and divides and transposes of the last two axes (each multiply's
    constant appended to ``factors``, ``None`` for a divide)."""
    while isinstance(node, ir.Call):
        name = node.op.name
        if name == "multiply":
            i = next((i for i in (0, 1) if _scalar(node.args[1 - i]) is not None), None)
            if i is None or not _keeps_shape(node, node.args[i]):
                break
            scale *= _scalar(node.args[1 - i])
            factors.append(node.args[1 - i])
            node = node.args[i]
        elif name == "divide" and scalar(node.args[1]) is not None and _keeps_shape(node, node.args[0]):
            scale /= scalar(node.args[1])
            factors.append(None)
            node = node.args[0]
        elif name == "transpose" and _swaps_last_two(node):
            swapped = not swapped
            node = node.args[0]
        else:
            break
    return node, scale, swapped


def _keeps_shape(call: ir.Call, arg: ir.Expr) -> bool:
    a, b = shape_of(call), shape_of(arg)
    return a is not None and b is not None and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))


def _is_call(e: ir.Expr, *names: str) -> bool:
    return isinstance(e, ir.Call) and e.op.name in names


def _is_half(dtype: str) -> bool:
    """A float type narrower than float32 (nn.attention rounds at the function body's steps)."""
    return np.dtype(dtype).itemsize < 4


def _widening(e: ir.Expr) -> Optional[ir.Expr]:
    """``x`` for ``cast(x, "float32")`` with ``x`` of a half type (exact), else ``None``."""
    if _is_call(e, "cast") and ir.type_of(e).dtype == "float32" and is_float_tensor(e.args[0]) \
            and _is_half(ir.type_of(e.args[0]).dtype):
        return e.args[0]
    return None


def _unit_axis_inserted(call: ir.Call) -> Optional[ir.Expr]:
    """``k`` for ``expand_dims(k, axis=2)`` or a reshape ``(b, h, x, y) -> (b, h, 1, x, y)``."""
    if _is_call(call, "expand_dims") and int(call.attrs.axis) in (2, -3) and int(call.attrs.num_newaxis) == 1:
        return call.args[0]
    if _is_call(call, "reshape"):
        i, o = shape_of(call.args[0]), shape_of(call)
        if i and o and len(i) == 4 and len(o) == 5 and o[2] == 1 and all(
                same(a, b) for a, b in zip(i, o[:2] + o[3:])):
            return call.args[0]
    return None


def _repeated(node5: ir.Expr, scale: float, swapped: bool, factors: list) -> Optional[Operand]:
    """``(b, hk, rep, x, y)`` made by ``broadcast_to`` of ``(b, hk, 1, x, y)`` from a 4-D ``k``."""
    node, scale, swapped = _peel(node5, scale, swapped, factors)
    if not _is_call(node, "broadcast_to"):
        return None
    out, src = shape_of(node), shape_of(node.args[0])
    if (not out or not src or len(out) != 5 or len(src) != 5 or src[2] != 1 or type(out[2]) is not int
            or not all(same(a, b) for a, b in zip(src[:2] + src[3:], out[:2] + out[3:]))):
        return None
    rep = out[2]
    inner, scale, swapped = _peel(node.args[0], scale, swapped, factors)
    base = _unit_axis_inserted(inner) if isinstance(inner, ir.Call) else None
    if base is None:
        return None
    base, scale, swapped = _peel(base, scale, swapped, factors)
    return Operand(base, rep, swapped, scale, tuple(factors))


def operand(e3: ir.Expr) -> Optional[Operand]:
    """Read a 3-D ``nn.batch_matmul`` operand back to its 4-D tensor (see :class:`Operand`); a
    ``cast`` widening a half type to float32 (PyTorch's export of float16 SDPA puts one on the
    values) may stand at either end of the reshapes."""
    return _operand(e3, [])


def _operand(e3: ir.Expr, factors: list) -> Optional[Operand]:
    wide = _widening(e3)
    if wide is not None:
        got = _operand(wide, factors)
        if got is not None and not got.widened:
            got.widened = True
            return got
        return None
    node, scale, swapped = _peel(e3, 1.0, False, factors)
    if not _is_call(node, "reshape"):
        return None
    out, inner = shape_of(node), node.args[0]
    src = shape_of(inner)
    if not out or not src or len(out) != 3 or not all(same(a, b) for a, b in zip(src[-2:], out[-2:])):
        return None
    if len(src) == 5:
        if not same(out[0], src[0] * src[1] * src[2]):
            return None
        return _repeated(inner, scale, swapped, factors)
    if len(src) != 4 or not same(out[0], src[0] * src[1]):
        return None
    node, scale, swapped = _peel(inner, scale, swapped, factors)
    widened = _widening(node)
    if widened is not None:  # (the values widened after the repeat)
        node, scale, swapped = _peel(widened, scale, swapped, factors)
    if _is_call(node, "reshape"):  # repeat_kv's (b, hk, rep, x, y) -> (b, hk * rep, x, y)
        five, four = shape_of(node.args[0]), shape_of(node)
        if five and len(five) == 5 and four and len(four) == 4 and same(four[1], five[1] * five[2]) and all(
                same(a, b) for a, b in zip((five[0],) + five[3:], (four[0],) + four[2:])):
            rep = _repeated(node.args[0], scale, swapped, list(factors))  # (a copy: it may fail)
            if rep is not None:
                rep.widened = widened is not None
                return rep
    return Operand(node, 1, swapped, scale, tuple(factors), widened is not None)


def _where_mask(mask: ir.Expr) -> Optional[ir.Expr]:
    """``c`` for ``where(c, 0, -inf)`` (a bool ``c``), else ``None``."""
    if not _is_call(mask, "where") or ir.type_of(mask.args[0]).dtype != "bool":
        return None
    if scalar(mask.args[1]) != 0.0 or scalar(mask.args[2]) != -math.inf:
        return None
    return mask.args[0]


def orient(op: Operand, swapped: bool) -> Optional[Operand]:
    """``op`` with its last two axes swapped as ``swapped`` asks: a base that is a 4-D
    ``transpose(x, p)`` is ``swap(transpose(x, p'))``, ``p'`` being ``p`` with its last two entries
    exchanged (SimplifyExpr merges the exporters' ``[0, 2, 1, 3]`` then ``[0, 1, 3, 2]`` into
    ``transpose(x, [0, 2, 3, 1])``)."""
    if op.swapped == swapped:
        return op
    base = op.base
    if not _is_call(base, "transpose") or base.attrs.axes is None or len(base.attrs.axes) != 4:
        return None
    src = shape_of(base.args[0])
    perm = [int(a) % 4 for a in base.attrs.axes]
    perm[2], perm[3] = perm[3], perm[2]
    if src is None:
        return None
    new = ir.transpose(base.args[0], perm) if perm != [0, 1, 2, 3] else base.args[0]
    if new is not base.args[0]:
        ir.set_checked_type(new, ir.TensorType(tuple(src[i] for i in perm), ir.type_of(base).dtype))
    return Operand(new, op.rep, swapped, op.scale, op.factors, op.widened)


class AttentionRule(DFPatternCallback):
    """Two batched products around a softmax, as PyTorch exports attention -> ``nn.attention``."""

    def __init__(self) -> None:
        super().__init__(require_type=True, name="sdpa_attention")
        self.q3, self.k3, self.v3, self.mask, self.c, self.zero = (wildcard(), wildcard(), wildcard(), wildcard(),
                                                                   is_constant(), is_constant())
        self.s3 = is_op("nn.batch_matmul")(self.q3, self.k3)
        self.s4 = is_op("reshape")(self.s3)
        self.scaled = is_op("multiply")(self.s4, self.c) | is_op("divide")(self.s4, self.c)
        scores = self.scaled | self.s4
        # in a half type: the scores widened before the mask (PyTorch's export of SDPA), or the
        # masked scores widened for the softmax and its probabilities rounded back (eager)
        self.wide_scores = is_op("cast")(scores)
        added = is_op("add")(self.wide_scores | scores, self.mask) | self.wide_scores | scores
        self.wide_added = is_op("cast")(added)
        self.probs = is_op("nn.softmax")(self.wide_added | added)
        guarded = is_op("where")(is_op("not_equal")(self.probs, self.probs), self.zero, self.probs) | self.probs
        self.rounded = is_op("cast")(guarded)
        self.o3 = is_op("nn.batch_matmul")(is_op("reshape")(self.rounded | guarded), self.v3)
        self.pattern = is_op("reshape")(self.o3)

    def callback(self, pre, post, node_map):  # noqa: C901 - one check per structural fact
        out4, o3, s3 = post, node_map[self.o3][0], node_map[self.s3][0]
        shape = shape_of(out4)
        if not is_float_tensor(out4, 4):
            return None
        dtype = ir.type_of(out4).dtype
        probs = node_map[self.probs][0]
        pshape = shape_of(probs)
        if int(probs.attrs.axis) % 4 != 3 or len(pshape) != 4:
            return None
        batch, heads, q_seq, kv_seq = pshape
        if not (same(shape[0], batch) and same(shape[1], heads) and same(shape[2], q_seq)):
            return None
        if self.zero in node_map and scalar(node_map[self.zero][0]) != 0.0:
            return None
        # the probabilities reach the second product as they are: reshape (b, h, l, s) -> (b*h, l, s)
        p3 = o3.args[0]
        if o3.attrs.transpose_a or not same(shape_of(p3)[0], batch * heads):
            return None
        s4 = node_map[self.s4][0]
        if not all(same(a, b) for a, b in zip(shape_of(s4), pshape)) or not same(shape_of(s3)[0], batch * heads):
            return None
        q, k, v = operand(s3.args[0]), operand(s3.args[1]), operand(o3.args[1])
        if q is None or k is None or v is None:
            return None
        q.swapped ^= bool(s3.attrs.transpose_a)
        k.swapped ^= bool(s3.attrs.transpose_b)
        v.swapped ^= bool(o3.attrs.transpose_b)
        q, k, v = orient(q, False), orient(k, True), orient(v, False)
        if q is None or k is None or v is None or q.rep != 1 or k.rep != v.rep or v.scale != 1.0:
            return None
        qs, ks, vs = shape_of(q.base), shape_of(k.base), shape_of(v.base)
        if not (qs and ks and vs and len(qs) == len(ks) == len(vs) == 4):
            return None
        if not (same(qs[0], batch) and same(qs[1], heads) and same(qs[2], q_seq)
                and same(ks[0], batch) and same(vs[0], batch) and same(ks[1], vs[1]) and same(ks[1] * k.rep, heads)
                and same(ks[2], kv_seq) and same(vs[2], kv_seq) and same(ks[3], qs[3]) and same(vs[3], shape[3])):
            return None
        half = ir.type_of(q.base).dtype
        if _is_half(half):
            got = self._half(node_map, q, k, v, half, dtype)
            if got is None:
                return None
            scale, mask, value = got
        else:
            if any(ir.type_of(t.base).dtype != dtype or t.widened for t in (q, k, v)) or any(
                    p in node_map for p in (self.wide_scores, self.wide_added, self.rounded)):
                return None
            scale = q.scale * k.scale
            if self.scaled in node_map:
                c = scalar(node_map[self.c][0])
                scaled = node_map[self.scaled][0]
                scale = scale * c if scaled.op.name == "multiply" else scale / c
            mask, value = self._mask(node_map, dtype), v.base
        if mask is None or not scale > 0 or not math.isfinite(scale):
            return None
        mshape = shape_of(mask)
        if (mshape is None or len(mshape) > 4
                or not all(m == 1 or same(m, p) for m, p in zip(mshape[::-1], pshape[::-1]))):
            return None
        # (SDPA's guard against rows masked whole, or the plain softmax: as the graph has it)
        guarded = self.zero in node_map
        return ir.nn.attention(q.base, k.base, value, mask, scale=scale, zero_masked_rows=guarded)

    def _mask(self, node_map, dtype: str) -> Optional[ir.Expr]:
        """What is added to the scores if it is of ``dtype`` (absent: a zero), else ``None``."""
        if self.mask not in node_map:
            return ir.const(np.zeros((), dtype))
        mask = node_map[self.mask][0]
        return mask if ir.type_of(mask).dtype == dtype else None

    def _half(self, node_map, q: Operand, k: Operand, v: Operand, half: str, out: str) -> Optional[tuple]:
        """``(scale, mask, value)`` when the graph rounds where nn.attention on ``half`` data
        does (see its doc): the query and the key each multiplied once by the same constant of
        ``half`` (or neither), no scale on the scores; the mask added in ``half``, or a
        ``where(c, 0, -inf)`` added in float32 (then the bool ``c``: adding 0 or -inf rounds
        nothing); the softmax in float32 (on the widened scores, or on ``half`` data, which
        nn.softmax computes in float32 and rounds); the probabilities rounded to ``half``
        before ``half`` values, not rounded before float32 values (``out``)."""
        if self.scaled in node_map or q.widened or k.widened or ir.type_of(k.base).dtype != half:
            return None
        if len(q.factors) != len(k.factors) or len(q.factors) > 1:
            return None
        scale = 1.0
        if q.factors:
            cq, ck = q.factors[0], k.factors[0]
            if cq is None or ck is None or ir.type_of(cq).dtype != half or cq.data.reshape(()) != ck.data.reshape(()):
                return None
            scale = _scalar(cq) ** 2
        vdt = ir.type_of(v.base).dtype
        value = ir.cast(v.base, "float32") if v.widened else v.base
        if not ((vdt == half and out == half) or (out == "float32" and (v.widened or vdt == "float32"))):
            return None
        probs_dt = ir.type_of(node_map[self.probs][0]).dtype
        if probs_dt not in (half, "float32") or (self.rounded in node_map) != (probs_dt != out):
            return None
        if self.rounded in node_map and ir.type_of(node_map[self.rounded][0]).dtype != half:
            return None
        for p in (self.wide_scores, self.wide_added):
            if p in node_map and ir.type_of(node_map[p][0]).dtype != "float32":
                return None
        if self.wide_scores in node_map:  # (the mask added in float32)
            mask = _where_mask(node_map[self.mask][0]) if self.mask in node_map else ir.const(np.zeros((), half))
        else:
            mask = self._mask(node_map, half)
        return scale, mask, value

    def examples(self, rng):
        """Attention of random sizes as PyTorch exports it: SDPA with its guard and split scale
        (Llama, Qwen2, GPT-2), grouped-query heads, T5's unscaled scores plus a position bias,
        an eager scale on the scores; masks that hide whole rows; half of them in a half type
        (:meth:`half_example`)."""
        if rng.rand() < 0.5:
            return self.half_example(rng)
        b, kv, rep, lq, past = (int(v) for v in (rng.randint(1, 3), rng.randint(1, 3), rng.randint(1, 4),
                                                 rng.randint(1, 4), rng.randint(0, 3)))
        d = int(rng.choice([2, 4, 8]))
        h, total = kv * rep, lq + past
        q = ir.var("q", shape=(b, h, lq, d))
        k, v = ir.var("k", shape=(b, kv, total, d)), ir.var("v", shape=(b, kv, total, d))
        style = rng.choice(["sdpa", "t5", "eager"])
        merged = rng.rand() < 0.5  # repeat_kv's last reshape merged into the 3-D one (SimplifyExpr does)

        def repeat(x, to3):
            if rep == 1:
                return ir.reshape(x, (b * h,) + to3) if to3 else x
            five = ir.broadcast_to(ir.expand_dims(x, axis=2) if rng.rand() < 0.5 else ir.reshape(x, (b, kv, 1, total, d)),
                                   (b, kv, rep, total, d))
            if to3 and merged:
                return ir.reshape(five, (b * h,) + to3)
            four = ir.reshape(five, (b, h, total, d))
            return ir.reshape(four, (b * h,) + to3) if to3 else four

        root = math.sqrt(1 / math.sqrt(d))
        if style == "sdpa":
            q3 = ir.reshape(ir.multiply(q, ir.const(root)), (b * h, lq, d))
            k3 = ir.reshape(ir.multiply(ir.transpose(repeat(k, None), (0, 1, 3, 2)), ir.const(root)), (b * h, d, total))
            scores = ir.reshape(ir.nn.batch_matmul(q3, k3, transpose_b=False), (b, h, lq, total))
        else:
            q3 = ir.reshape(q, (b * h, lq, d))
            k3 = repeat(k, (total, d))
            scores = ir.reshape(ir.nn.batch_matmul(q3, k3, transpose_b=True), (b, h, lq, total))
            if style == "eager":
                scores = ir.divide(scores, ir.const(math.sqrt(d)))
        params = [q, k, v]
        if style == "t5":
            bias = ir.var("bias", shape=(1, h, lq, total))
            params.append(bias)
            masked = ir.add(scores, bias)
        else:
            keep = ir.var("keep", shape=(b, 1, lq, total), dtype="bool")
            params.append(keep)
            mask = ir.where(keep, ir.const(0.0), ir.const(-np.inf))
            masked = ir.add(mask, scores) if rng.rand() < 0.5 else ir.add(scores, mask)
        probs = ir.nn.softmax(masked)
        if style == "sdpa":
            probs = ir.where(ir.not_equal(probs, probs), ir.const(0.0), probs)
        out3 = ir.nn.batch_matmul(ir.reshape(probs, (b * h, lq, total)), repeat(v, (total, d)), transpose_b=False)
        return [ir.Function(params, ir.reshape(out3, (b, h, lq, d)))]


    @staticmethod
    def half_example(rng):
        """Half-precision attention of random sizes in float16 or bfloat16, the query and key
        scaled by one constant each, grouped-query heads repeated: as PyTorch exports float16
        SDPA (the scores cast to float32 before a float32 ``where`` mask, the guard, the values
        cast to float32: a float32 result), as Hugging Face's eager attention computes (a half
        mask added, the softmax in float32 between casts), or all in the half type."""
        dtype = str(rng.choice(["float16", "bfloat16"]))
        b, kv, rep, lq, past = (int(v) for v in (rng.randint(1, 3), rng.randint(1, 3), rng.randint(1, 4),
                                                 rng.randint(1, 4), rng.randint(0, 3)))
        d = int(rng.choice([4, 8, 16]))
        h, total = kv * rep, lq + past
        q = ir.var("q", shape=(b, h, lq, d), dtype=dtype)
        k, v = (ir.var(n, shape=(b, kv, total, d), dtype=dtype) for n in "kv")
        style = rng.choice(["sdpa", "eager", "half"])
        c = ir.const(np.array(rng.choice([0.5, 2 ** -0.75, 0.3]), dtype))

        def repeated(x):
            five = ir.broadcast_to(ir.reshape(x, (b, kv, 1, total, d)), (b, kv, rep, total, d))
            return ir.reshape(five, (b, h, total, d)) if rep > 1 else x

        k4 = ir.multiply(ir.transpose(repeated(k), (0, 1, 3, 2)), c)
        q3, k3 = ir.reshape(ir.multiply(q, c), (b * h, lq, d)), ir.reshape(k4, (b * h, d, total))
        scores = ir.reshape(ir.nn.batch_matmul(q3, k3, transpose_b=False), (b, h, lq, total))
        keep = ir.var("keep", shape=(b, 1, lq, total), dtype="bool")
        v4 = repeated(v)
        if style == "sdpa":
            mask = ir.where(keep, ir.const(np.zeros(1, "float32")), ir.const(np.full(1, -np.inf, "float32")))
            probs = ir.nn.softmax(ir.add(ir.cast(scores, "float32"), mask))
            probs = ir.where(ir.not_equal(probs, probs), ir.const(0.0), probs)
            v4 = ir.cast(v4, "float32")
        else:
            mask = ir.where(keep, ir.const(np.zeros((), dtype)), ir.const(np.array(-np.inf, dtype)))
            added = ir.add(scores, mask)
            if style == "eager":
                probs = ir.cast(ir.nn.softmax(ir.cast(added, "float32")), dtype)
            else:
                probs = ir.nn.softmax(added)
        out3 = ir.nn.batch_matmul(ir.reshape(probs, (b * h, lq, total)), ir.reshape(v4, (b * h, total, d)),
                                  transpose_b=False)
        return [ir.Function([q, k, v, keep], ir.reshape(out3, (b, h, lq, d)))]


def FuseAttention():  # noqa: N802 - TVM-style pass constructor
    """Turn scaled dot-product attention (two batched products around a softmax, grouped-query heads, a mask) into nn.attention."""
    from .mask import WholeScatterRule

    return pattern_pass("FuseAttention", lambda: [AttentionRule(), WholeScatterRule()], opt_level=1, doc=__doc__)
