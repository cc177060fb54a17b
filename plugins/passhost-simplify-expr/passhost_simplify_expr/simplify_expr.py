"""SimplifyExpr: TVM's ``SimplifyExpr`` rewrites, each a rule over :mod:`passhost.ir.pattern`::

    reshape(reshape(%x, newshape=[6]), newshape=[3, 2])   ->  reshape(%x, newshape=[3, 2])
    reshape(%x, newshape=[2, 3])      /* %x: (2, 3) */    ->  %x
    transpose(transpose(%x, axes=[1, 0]), axes=[1, 0])    ->  %x
    multiply(%x, 1f), add(%x, 0f), subtract(%x, 0f), divide(%x, 1f), add(%x, zeros(...))  ->  %x
    nn.bias_add(%x, meta[relay.Constant][0] /* all zeros */)                             ->  %x
    cast(cast(%x, dtype="int32"), dtype="float32")  /* %x: int8 */  ->  cast(%x, dtype="float32")
    cast(%x, dtype="float32")         /* %x: float32 */   ->  %x
    nn.pad(%x, 0f, pad_width=[[0, 0], [0, 0]])            ->  %x
    divide(%x, broadcast_to(%y, shape=[n, 3]))  /* %x: (n, 3) */  ->  divide(%x, %y)
    where(%c, %x, full(0f, shape=[n, 3]))       /* %x: (n, 3) */  ->  where(%c, %x, 0f)
    zeros_like(%x), ones_like(%x), full_like(%x, %v)      ->  zeros(...), ones(...), full(%v, ...)

An identity is removed only when the result has exactly ``%x``'s type (a constant that
broadcasts ``%x`` to a larger shape, or changes its dtype, is kept). ``x * 0`` is *not*
rewritten to zeros: it is NaN for infinite or NaN ``x``. A cast of a cast is shortened only
when the first cast loses nothing (its dtype holds every value of ``%x``'s).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from passhost import ir
from passhost.ir.pattern import DFPatternCallback, is_op, wildcard
from passhost.transform import pattern_pass

__all__ = ["SimplifyExpr", "simplify_rules", "ConsecutiveReshape", "RedundantReshape", "TransposeChain",
           "EliminateIdentity", "CastOfCast", "NoOpCast", "NoOpPad", "ConcretizeLike",
           "BroadcastOperand"]

_RESHAPES = ("reshape", "expand_dims", "squeeze", "nn.batch_flatten")


def _ty(e: ir.Expr) -> Optional[ir.TensorType]:
    t = e.checked_type
    return t if isinstance(t, ir.TensorType) else None


class ConsecutiveReshape(DFPatternCallback):
    """``reshape(reshape-like(x))`` -> one ``reshape`` to the final shape."""

    def __init__(self) -> None:
        super().__init__(require_type=True, name="consecutive_reshape")
        self.x = wildcard()
        inner = (is_op("reshape") | is_op("expand_dims") | is_op("squeeze") | is_op("nn.batch_flatten")
                 | is_op("contrib_reverse_reshape"))
        self.pattern = (is_op("reshape") | is_op("expand_dims") | is_op("squeeze")
                        | is_op("contrib_reverse_reshape"))(inner(self.x))

    def callback(self, pre, post, node_map):
        x, out = _ty(node_map[self.x][0]), _ty(post)
        if x is None or out is None or ir.dims.has_any(out.shape):  # (? cannot be a target)
            return None
        return ir.reshape(node_map[self.x][0], tuple(out.shape))


class RedundantReshape(DFPatternCallback):
    """A reshape-like call whose result has its input's shape -> the input."""

    def __init__(self) -> None:
        super().__init__(require_type=True, name="redundant_reshape")
        self.x = wildcard()
        self.pattern = (is_op("reshape") | is_op("expand_dims") | is_op("squeeze"))(self.x)

    def callback(self, pre, post, node_map):
        x = node_map[self.x][0]
        t = _ty(x)
        # (two ?s of equal types may still be split differently: (?, ?) -> (?, ?))
        return x if t is not None and t == _ty(post) and sum(d is ir.ANY for d in t.shape) <= 1 else None


class TransposeChain(DFPatternCallback):
    """``transpose(transpose(x, a), b)`` -> ``transpose(x, a∘b)``, or ``x`` if that is the identity."""

    def __init__(self) -> None:
        super().__init__(require_type=True, name="transpose_chain")
        self.x, self.inner = wildcard(), None
        self.inner = is_op("transpose")(self.x)
        self.pattern = is_op("transpose")(self.inner)

    def callback(self, pre, post, node_map):
        x = node_map[self.x][0]
        t = _ty(x)
        if t is None:
            return None
        nd = len(t.shape)

        def perm(axes):
            return list(range(nd))[::-1] if axes is None else [int(a) % nd for a in axes]

        first, second = perm(node_map[self.inner][0].attrs.axes), perm(post.attrs.axes)
        composed = [first[i] for i in second]
        return x if composed == list(range(nd)) else ir.transpose(x, composed)


def _filled_with(e: ir.Expr, value: float) -> bool:
    """``e`` is a constant (or ``zeros``/``ones``/``*_like``) all of whose elements equal ``value``."""
    if isinstance(e, ir.Constant):
        d = e.data
        if d.size == 0 or d.flat[0] != value:  # the usual answer, without a reduction
            return False
        return d.size == 1 or bool(np.all(d == value))
    if isinstance(e, ir.Call) and isinstance(e.op, ir.Op):
        name = e.op.name
        return (value == 0 and name in ("zeros", "zeros_like")) or (value == 1 and name in ("ones", "ones_like"))
    return False


class EliminateIdentity(DFPatternCallback):
    """``x * 1``, ``x / 1``, ``x + 0``, ``x - 0``, ``nn.bias_add(x, zeros)`` -> ``x`` when the
    result has ``x``'s type (PyTorch initialises attention's projection biases to zeros)."""

    def __init__(self) -> None:
        super().__init__(require_type=True, name="eliminate_identity")
        self.x, self.c = wildcard(), wildcard()
        self.pattern = (is_op("multiply") | is_op("divide") | is_op("add") | is_op("subtract")
                        | is_op("nn.bias_add"))(self.x, self.c)

    def callback(self, pre, post, node_map):
        x, c = node_map[self.x][0], node_map[self.c][0]
        name = post.op.name
        if name in ("divide", "subtract", "nn.bias_add") and post.args[0] is not x:
            return None  # 1 / x and 0 - x are not identities
        unit = 1.0 if name in ("multiply", "divide") else 0.0
        if name in ("add", "multiply") and not _filled_with(c, unit):
            x, c = c, x  # (the match may have bound them either way round: 0 + x is x too)
        if not _filled_with(c, unit) or _ty(x) is None or _ty(x) != _ty(post):
            return None
        return x


_FLOAT8 = {"float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"}
#: dtype -> the dtypes that hold every one of its values exactly. bfloat16 and float16
#: hold each other's values only in part (bfloat16 has the range, float16 the digits), so
#: float32 -> bfloat16 -> float32 or float16 -> bfloat16 is a rounding, never folded away.
#: Every float8 value is a float16 and a bfloat16 value (NaN included); a uint4 value is a
#: float8 e4m3 value, not always an e5m2 one (9 is not).
_WIDENS = {
    "bool": {"int4", "uint4", "int8", "int16", "int32", "int64", "uint8", "float16", "bfloat16", "float32",
             "float64"} | _FLOAT8,
    "int4": {"int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"} | _FLOAT8,
    "uint4": {"int8", "uint8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
              "float8_e4m3fn", "float8_e4m3fnuz"},
    "int8": {"int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"},
    "uint8": {"int16", "int32", "int64", "uint16", "uint32", "uint64", "float16", "bfloat16", "float32",
              "float64"},
    "int16": {"int32", "int64", "float32", "float64"},
    "int32": {"int64", "float64"},
    **dict.fromkeys(sorted(_FLOAT8), {"float16", "bfloat16", "float32", "float64"}),
    "float16": {"float32", "float64"},
    "bfloat16": {"float32", "float64"},
    "float32": {"float64"},
}


class CastOfCast(DFPatternCallback):
    """``cast(cast(x, t1), t2)`` -> ``cast(x, t2)`` when ``t1`` holds every value of ``x``'s dtype."""

    def __init__(self) -> None:
        super().__init__(require_type=True, name="cast_of_cast")
        self.x = wildcard()
        self.inner = is_op("cast")(self.x)
        self.pattern = is_op("cast")(self.inner)

    def callback(self, pre, post, node_map):
        x = node_map[self.x][0]
        t = _ty(x)
        mid = node_map[self.inner][0].attrs.dtype
        if t is None or not (mid == t.dtype or mid in _WIDENS.get(t.dtype, ())):
            return None
        if post.attrs.dtype == t.dtype:
            return x
        return ir.cast(x, post.attrs.dtype, saturate=post.attrs.saturate)  # (the outer cast's saturation)


class NoOpCast(DFPatternCallback):
    """``cast(x, dtype)`` where ``x`` already has that dtype -> ``x``."""

    def __init__(self) -> None:
        super().__init__(require_type=True, name="no_op_cast")
        self.x = wildcard()
        self.pattern = is_op("cast")(self.x)

    def callback(self, pre, post, node_map):
        x = node_map[self.x][0]
        t = _ty(x)
        return x if t is not None and t.dtype == post.attrs.dtype else None


class NoOpPad(DFPatternCallback):
    """``nn.pad(x, v, pad_width=[[0, 0], ...])`` -> ``x``: nothing added on any side, whatever
    the pad value and mode (PyTorch writes one for ``F.pad(x, (0, 0))``)."""

    def __init__(self) -> None:
        super().__init__(require_type=True, name="no_op_pad")
        self.x = wildcard()
        self.pattern = is_op("nn.pad")(self.x, wildcard())

    def callback(self, pre, post, node_map):
        x = node_map[self.x][0]
        if any(w != 0 for pair in post.attrs.pad_width for w in pair):
            return None
        return x if _ty(x) is not None and _ty(x) == _ty(post) else None

    def examples(self, rng):
        """Pads of zero widths (random instances give random widths), in every mode."""
        dims = tuple(int(d) for d in rng.randint(1, 5, size=rng.randint(1, 4)))
        x = ir.var("x", shape=dims)
        mode = str(rng.choice(["constant", "edge", "reflect"]))
        return [ir.Function([x], ir.nn.pad(x, [(0, 0)] * len(dims), pad_value=float(rng.randn()), pad_mode=mode))]


class ConcretizeLike(DFPatternCallback):
    """``zeros_like(x)``/``ones_like(x)``/``full_like(x, v)`` -> ``zeros``/``ones``/``full`` of
    ``x``'s static shape and dtype (the result no longer depends on ``x``)."""

    def __init__(self) -> None:
        super().__init__(require_type=True, name="concretize_like")
        self.x, self.v = wildcard(), wildcard()
        self.pattern = is_op("zeros_like")(self.x) | is_op("ones_like")(self.x) | is_op("full_like")(self.x, self.v)

    def callback(self, pre, post, node_map):
        t = _ty(post)
        if t is None or ir.dims.has_any(t.shape):  # a symbolic shape is an attribute too; ? is not
            return None
        shape = tuple(t.shape)
        name = post.op.name
        if name == "zeros_like":
            return ir.zeros(shape, t.dtype)
        if name == "ones_like":
            return ir.ones(shape, t.dtype)
        return ir.Call(ir.Op.get("full"), [node_map[self.v][0]], {"shape": shape, "dtype": t.dtype})


#: operators that broadcast their operands elementwise, numpy's way
_BROADCASTING = ("add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "bitwise_and",
                 "floor_mod", "mod", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
                 "logical_and", "logical_or", "logical_xor", "bitwise_or", "bitwise_xor", "left_shift", "right_shift")


def _broadcast(shapes: list) -> Optional[tuple]:
    """numpy broadcasting of ``shapes`` (static or symbolic); None where it is not decided."""
    n = max(len(s) for s in shapes)
    out = []
    for i in range(n):
        d = 1
        for s in shapes:
            j = i - n + len(s)
            if j < 0 or s[j] is not ir.ANY and s[j] == d:
                continue
            d = s[j] if d == 1 else ir.broadcast_dim(d, s[j])
            if d is None or d is ir.ANY:
                return None
        out.append(d)
    return tuple(out)


def _shape(e: ir.Expr) -> Optional[tuple]:
    if isinstance(e, ir.Constant):
        return tuple(e.data.shape)
    t = _ty(e)
    return None if t is None else tuple(t.shape)


def _unbroadcast(e: ir.Expr, dtype: str) -> Optional[ir.Expr]:
    """What ``e`` broadcasts: ``y`` of ``broadcast_to(y, S)``, the scalar of a fill."""
    if not isinstance(e, ir.Call) or not isinstance(e.op, ir.Op):
        return None
    name = e.op.name
    if name == "broadcast_to":
        return e.args[0]
    if name in ("zeros", "ones"):
        return ir.const(0 if name == "zeros" else 1, dtype)
    if name == "full" and isinstance(e.args[0], ir.Constant) and e.args[0].data.ndim == 0:
        return ir.const(e.args[0].data, dtype) if e.args[0].data.dtype == dtype else None
    return None


class BroadcastOperand(DFPatternCallback):
    """An operand of a broadcasting operator that is ``broadcast_to(y, S)`` or a fill (``full``,
    ``zeros``, ``ones``) -> ``y`` or the fill's scalar, when the operator's result keeps its shape
    (the operator broadcasts anyway; a fill of a symbolic shape otherwise costs its shape's
    arithmetic at run time)."""

    def __init__(self) -> None:
        super().__init__(require_type=True, name="broadcast_operand")
        alts = is_op(_BROADCASTING[0])
        for name in _BROADCASTING[1:]:
            alts = alts | is_op(name)
        # an operand is a broadcast or a fill (what _unbroadcast takes apart), so that the
        # pattern's prefilter turns away the usual call, whose operands are neither, by
        # their operators alone (the callback would find nothing to do there)
        fill = (is_op("broadcast_to")(wildcard()) | is_op("zeros")() | is_op("ones")()
                | is_op("full")(wildcard()))
        w = wildcard
        self.pattern = (alts(fill, w()) | alts(w(), fill) | is_op("where")(fill, w(), w())
                        | is_op("where")(w(), fill, w()) | is_op("where")(w(), w(), fill))

    def callback(self, pre, post, node_map):
        out = _ty(post)
        args = list(post.args)
        shapes = [_shape(a) for a in args]
        if out is None or None in shapes:
            return None
        changed = False
        for i, a in enumerate(args):
            src = _unbroadcast(a, _ty(a).dtype)
            inner = None if src is None else _shape(src)
            if inner is not None and _broadcast(shapes[:i] + [inner] + shapes[i + 1:]) == tuple(out.shape):
                args[i], shapes[i], changed = src, inner, True
        return ir.Call(post.op, args, post.attrs) if changed else None

    def examples(self, rng):
        """A broadcast or a fill beside an operand of the full shape, on either side."""
        dims = tuple(int(d) for d in rng.randint(1, 5, size=rng.randint(1, 4)))
        x = ir.var("x", shape=dims)
        small = tuple(d if rng.rand() < 0.5 else 1 for d in dims[rng.randint(len(dims)):])
        y = ir.var("y", shape=small)
        kind = rng.randint(3)
        wide = (ir.broadcast_to(y, dims) if kind == 0 else ir.zeros(dims, "float32") if kind == 1 else
                ir.full(ir.const(float(rng.randn())), dims, "float32"))
        op = [ir.add, ir.subtract, ir.multiply, ir.maximum][rng.randint(4)]
        params = [x, y] if kind == 0 else [x]
        if rng.rand() < 0.3:
            return [ir.Function(params, ir.where(ir.greater(x, ir.const(0.0)), x, wide))]
        return [ir.Function(params, op(x, wide) if rng.rand() < 0.5 else op(wide, x))]


def simplify_rules() -> list:
    """The rules of SimplifyExpr, in the order they are tried."""
    return [ConsecutiveReshape(), RedundantReshape(), TransposeChain(), EliminateIdentity(), CastOfCast(),
            NoOpCast(), NoOpPad(), ConcretizeLike(), BroadcastOperand()]


def SimplifyExpr():  # noqa: N802 - TVM-style pass constructor
    """Algebraic simplifications of TVM's SimplifyExpr: reshape and transpose chains,
    identities (``x*1``, ``x+0``, ``x-0``, ``x/1``), casts of casts and no-op casts, and
    ``*_like`` calls made concrete."""
    return pattern_pass("SimplifyExpr", simplify_rules, opt_level=0, doc=SimplifyExpr.__doc__)
