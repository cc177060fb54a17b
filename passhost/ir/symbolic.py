"""Shape arithmetic over symbolic dimensions: :func:`fold_symbolic`.

Exporters compute reshape targets at run time from the input's shape::

    %0 = shape_of(%x, dtype="int64");               /* %x: Tensor[(batch, seq, 768), float32] */
    %1 = take(%0, 0);  %2 = take(%0, 1);
    %3 = concatenate((expand_dims(%1, axis=0), expand_dims(%2, axis=0), [12i64, 64i64]));
    reshape(%x, ...%3...)

``fold_symbolic`` evaluates such an expression with the dimensions of the types in place
of the values it cannot know: ``%3`` becomes ``shape_value(values=[batch, seq, 12, 64])``, which a
converter turns into a static ``reshape(%x, newshape=[batch, seq, 12, 64])``; a result
that is all ints becomes a constant (``take(shape_of(%x), 2)`` is ``768``). Only integer
and boolean shape arithmetic is folded: ``shape_of``, ``shape_value``, integer constants, and
``take concatenate expand_dims squeeze reshape strided_slice cast add subtract multiply
divide floor_mod mod maximum minimum`` with the comparisons, ``where``, ``logical_*``,
``sum prod max min``, ``abs negative clip broadcast_to tile ndarray_size``. Nothing is
guessed: a comparison the bounds cannot decide, a division whose operands' signs are not
known, or a ``?`` that reaches the result leaves the expression as it is (``None``).
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .dims import ANY, Dim, UndecidableDim, dmax, dmin, floordiv, floormod, provably_equal, provably_unequal
from .expr import Call, Constant, Expr, Tuple
from .op import Op
from .types import TensorType

__all__ = ["fold_symbolic", "symbolic_value"]

#: largest constant read as shape data, and largest result produced (elements)
MAX_ELEMENTS = 4096


class _Fail(Exception):
    """The expression is not shape arithmetic that folds."""


def _is_int_dtype(dtype: str) -> bool:
    return dtype.startswith("int") or dtype.startswith("uint")


def symbolic_value(expr: Expr) -> Optional[tuple]:
    """``(values, dtype)`` of ``expr`` when it is shape arithmetic: ``values`` a numpy
    object array of ints and dimensions (``?`` where a shape is not known), else ``None``."""
    try:
        return _Evaluator().value(expr)
    except (_Fail, UndecidableDim):
        return None


def fold_symbolic(expr: Expr) -> Optional[Expr]:
    """``expr`` folded: a :class:`Constant` when every value is known, a ``shape_value`` call
    when some are size-variable expressions, ``None`` when it is not foldable shape
    arithmetic (see the module doc). The result is typed.

    before:  take(shape_of(%x, dtype="int64"), 1)          /* %x: Tensor[(batch, seq, 8), float32] */
    after:   shape_value(values=seq)                         /* ty=int64 */
    """
    got = symbolic_value(expr)
    if got is None:
        return None
    values, dtype = got
    if values.ndim > 1 or values.size > MAX_ELEMENTS:
        return None
    flat = values.reshape(-1).tolist()
    if any(v is ANY for v in flat):
        return None
    if all(type(v) is int or type(v) is bool for v in flat):
        from .type_infer import infer_type
        return infer_type(Constant(np.array(values.tolist(), dtype=dtype)))
    if not _is_int_dtype(dtype):
        return None
    from .builders import shape_value
    from .type_infer import infer_type
    return infer_type(shape_value(values.tolist() if values.ndim else values.item(), dtype))


def _obj(values: Any) -> np.ndarray:
    if type(values) is np.ndarray and values.dtype == object:
        return values  # (a 0-d one would otherwise be stored inside a 0-d one)
    out = np.empty(np.shape(values), dtype=object)
    if out.ndim == 0:
        out[()] = values
    else:
        out[...] = values
    return out


# Shape arithmetic is mostly scalars and short vectors (a shape, one of its entries, a
# concatenated reshape target). The rules below build those directly from Python lists:
# numpy's general routines (np.shape of a list, np.take, np.concatenate, broadcasting)
# cost microseconds each on object arrays, many times the work. Higher ranks go the
# general way.
def _obj0(value: Any) -> np.ndarray:
    """A 0-d object array holding ``value`` (a dimension, int or bool)."""
    out = np.empty((), dtype=object)
    out[()] = value
    return out


def _obj1(items: list) -> np.ndarray:
    """A 1-D object array of ``items`` (dimensions, ints or bools; no nested lists)."""
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def _decide_cmp(a: Any, b: Any, name: str) -> bool:
    if name == "equal":
        if provably_equal(a, b):
            return True
        if provably_unequal(a, b):
            return False
        raise _Fail
    if name == "not_equal":
        return not _decide_cmp(a, b, "equal")
    if a is ANY or b is ANY:
        raise _Fail
    if name == "less":
        return bool(a < b)
    if name == "less_equal":
        return bool(a <= b)
    if name == "greater":
        return bool(a > b)
    return bool(a >= b)


def _nonneg(x: Any) -> bool:
    try:
        return bool(x >= 0)
    except UndecidableDim:
        return False


def _trunc_div(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int:
        if b == 0:
            raise _Fail
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b > 0) else -q
    if a is ANY or b is ANY:
        return ANY
    if _nonneg(a) and type(b) is int and b > 0:
        return floordiv(a, b)
    if _nonneg(a) and type(b) is Dim and _nonneg(b - 1):
        return floordiv(a, b)
    if type(b) is Dim:  # an exact quotient (heads / heads, 2*n / n): the same for every nonzero b
        q = floordiv(a, b)
        if q is not ANY and q * b == a:
            return q
    raise _Fail


def _trunc_mod(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int:
        if b == 0:
            raise _Fail
        return int(np.fmod(a, b))
    if a is ANY or b is ANY:
        return ANY
    if _nonneg(a) and type(b) is int and b > 0:
        return floormod(a, b)
    raise _Fail


def _floor_mod(a: Any, b: Any) -> Any:
    """``a mod b`` (the divisor's sign). A divisor is never 0, so a size variable divisor is
    at least 1, and ``-1 mod n`` is ``n - 1`` (``torch.roll``'s shift of one, exported)."""
    if a is ANY or b is ANY:
        return ANY
    if type(a) is int and type(b) is Dim:
        if a == 0:
            return 0
        if a == -1 and _nonneg(b):
            return b - 1
    return floormod(a, b)


def _elementwise(fn, *arrays: np.ndarray) -> np.ndarray:
    shape = ()
    for a in arrays:  # scalars and vectors of one length: no general broadcasting
        if a.ndim > 1 or (a.ndim == 1 and shape and a.shape != shape):
            break
        if a.ndim == 1:
            shape = a.shape
    else:
        if not shape:
            return _obj0(fn(*[a[()] for a in arrays]))
        n = shape[0]
        return _obj1([fn(*items) for items in zip(*[a.tolist() if a.ndim else [a[()]] * n for a in arrays])])
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    parts = [np.broadcast_to(a, shape).reshape(-1) for a in arrays]
    out = [fn(*items) for items in zip(*parts)]
    return _obj(np.array(out, dtype=object).reshape(shape)) if shape else _obj(out[0])


_CMP = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")


class _Evaluator:
    def __init__(self) -> None:
        self.memo: dict = {}

    def value(self, root: Expr) -> tuple:
        stack = [(root, False)]
        memo = self.memo
        while stack:
            node, ready = stack.pop()
            if node in memo:
                continue
            kids = self._children(node)
            if not ready and kids:
                stack.append((node, True))
                stack.extend((k, False) for k in kids if k not in memo)
                continue
            memo[node] = self._eval(node)
        return memo[root]

    def _children(self, node: Expr) -> list:
        """The operands to evaluate first; a node that is not shape arithmetic fails here,
        before anything above it is walked."""
        t = type(node)
        if t is Tuple:
            return list(node.fields)
        if t is Call:
            if type(node.op) is not Op or node.op.name not in _RULES:
                raise _Fail
            if node.op.name in ("shape_of", "ndarray_size"):
                return []
            return list(node.args)
        if t is not Constant:
            raise _Fail
        return []

    def _eval(self, node: Expr) -> Any:
        t = type(node)
        if t is Constant:
            data = node.data
            if data.dtype.kind not in "iub" or data.size > MAX_ELEMENTS:
                raise _Fail
            return (data.astype(object), data.dtype.name)
        if t is Tuple:
            return tuple(self.memo[f] for f in node.fields)
        if t is not Call or type(node.op) is not Op:
            raise _Fail
        fn = _RULES.get(node.op.name)
        if fn is None:
            raise _Fail
        return fn(self, node)

    def arg(self, node: Call, i: int) -> tuple:
        v = self.memo[node.args[i]]
        if type(v) is not tuple or len(v) != 2 or type(v[0]) is not np.ndarray:
            raise _Fail
        return v


# -- the rules ---------------------------------------------------------------------------
def _shape_of(ev: _Evaluator, node: Call) -> tuple:
    t = node.args[0]._checked_type
    if type(t) is not TensorType:
        raise _Fail
    return (_obj1(list(t.shape)), node.attrs["dtype"])


def _ndarray_size(ev: _Evaluator, node: Call) -> tuple:
    t = node.args[0]._checked_type
    if type(t) is not TensorType:
        raise _Fail
    total: Any = 1
    for d in t.shape:
        total = total * d
    return (_obj(total), node.attrs["dtype"])


def _shape_value(ev: _Evaluator, node: Call) -> tuple:
    values = node.attrs["values"]
    return (_obj1(list(values)) if type(values) is tuple else _obj0(values), node.attrs["dtype"])


def _take(ev: _Evaluator, node: Call) -> tuple:
    data, dtype = ev.arg(node, 0)
    idx, idx_dtype = ev.arg(node, 1)
    if not _is_int_dtype(idx_dtype) or any(type(i) is not int for i in idx.reshape(-1)):
        raise _Fail
    axis = node.attrs.get("axis")
    if node.attrs.get("batch_dims", 0):
        raise _Fail
    if data.ndim == 1 and idx.ndim <= 1 and axis in (None, 0, -1):  # an entry or entries of a shape
        items = data.tolist()
        n = len(items)
        picks = [idx[()]] if idx.ndim == 0 else idx.tolist()
        for i in picks:
            if i < -n or i >= n:
                raise _Fail
        if idx.ndim == 0:
            return (_obj0(items[picks[0]]), dtype)
        return (_obj1([items[i] for i in picks]), dtype)
    if axis is None:
        data = data.reshape(-1)
        axis = 0
    n = data.shape[axis]
    idx = np.array(idx.tolist(), dtype=np.int64)
    if (idx < -n).any() or (idx >= n).any():
        raise _Fail
    idx = np.where(idx < 0, idx + n, idx)
    return (_obj(np.take(data, idx, axis=axis)), dtype)


def _concatenate(ev: _Evaluator, node: Call) -> tuple:
    parts = ev.memo[node.args[0]]
    if type(parts) is not tuple or not parts or any(type(p) is not tuple or len(p) != 2 for p in parts):
        raise _Fail
    dtype = parts[0][1]
    if node.attrs["axis"] in (0, -1) and all(p[0].ndim == 1 for p in parts):
        items: list = []
        for p in parts:
            items.extend(p[0].tolist())
        return (_obj1(items), dtype)
    return (_obj(np.concatenate([p[0] for p in parts], axis=node.attrs["axis"])), dtype)


def _expand_dims(ev: _Evaluator, node: Call) -> tuple:
    data, dtype = ev.arg(node, 0)
    axis = node.attrs["axis"]
    shape = list(data.shape)
    at = axis if axis >= 0 else axis + data.ndim + 1
    if not 0 <= at <= data.ndim:
        raise _Fail
    shape[at:at] = [1] * node.attrs["num_newaxis"]
    return (data.reshape(shape), dtype)


def _squeeze(ev: _Evaluator, node: Call) -> tuple:
    data, dtype = ev.arg(node, 0)
    axis = node.attrs["axis"]
    return (_obj(np.squeeze(data, axis=None if axis is None else tuple(axis))), dtype)


def _reshape(ev: _Evaluator, node: Call) -> tuple:
    data, dtype = ev.arg(node, 0)
    t = node._checked_type
    if type(t) is not TensorType or not t.is_static:
        raise _Fail
    return (_obj(data.reshape(t.shape)), dtype)


def _strided_slice(ev: _Evaluator, node: Call) -> tuple:
    data, dtype = ev.arg(node, 0)
    a = node.attrs
    begin, end, strides = a["begin"], a["end"], a["strides"]
    if any(type(v) is not int for v in tuple(begin) + tuple(end) + tuple(strides)) \
            or a.get("slice_mode", "end") != "end":
        raise _Fail
    axes = a.get("axes") or tuple(range(len(begin)))
    index = [slice(None)] * data.ndim
    for k, ax in enumerate(axes):
        step = strides[k] if k < len(strides) else strides[-1] if strides else 1
        index[ax] = slice(begin[k], end[k], step)
    return (_obj(data[tuple(index)]), dtype)


def _cast(ev: _Evaluator, node: Call) -> tuple:
    data, dtype = ev.arg(node, 0)
    to = node.attrs["dtype"]
    if _is_int_dtype(to) and (_is_int_dtype(dtype) or dtype == "bool"):
        return (_elementwise(lambda v: int(v) if type(v) is bool else v, data), to)
    if to == "bool":
        return (_elementwise(lambda v: not _decide_cmp(v, 0, "equal"), data), to)
    if all(type(v) is int for v in data.reshape(-1)):
        return (data, to)
    raise _Fail


def _binary(fn):
    def rule(ev: _Evaluator, node: Call) -> tuple:
        a, dtype = ev.arg(node, 0)
        b, _ = ev.arg(node, 1)
        if not (_is_int_dtype(dtype) or dtype == "bool"):
            raise _Fail
        return (_elementwise(fn, a, b), dtype)

    return rule


def _compare(name: str):
    def rule(ev: _Evaluator, node: Call) -> tuple:
        a, dtype = ev.arg(node, 0)
        b, _ = ev.arg(node, 1)
        if not (_is_int_dtype(dtype) or dtype == "bool"):
            raise _Fail
        return (_elementwise(lambda x, y: _decide_cmp(x, y, name), a, b), "bool")

    return rule


def _logical(fn):
    def rule(ev: _Evaluator, node: Call) -> tuple:
        arrays = [ev.arg(node, i)[0] for i in range(len(node.args))]
        for arr in arrays:
            if any(type(v) is not bool for v in arr.reshape(-1)):
                raise _Fail
        return (_elementwise(fn, *arrays), "bool")

    return rule


def _where(ev: _Evaluator, node: Call) -> tuple:
    c, _ = ev.arg(node, 0)
    a, dtype = ev.arg(node, 1)
    b, _ = ev.arg(node, 2)
    if any(type(v) is not bool for v in c.reshape(-1)):
        raise _Fail
    return (_elementwise(lambda k, x, y: x if k else y, c, a, b), dtype)


def _reduce(fn):
    def rule(ev: _Evaluator, node: Call) -> tuple:
        data, dtype = ev.arg(node, 0)
        if not _is_int_dtype(dtype) or node.attrs.get("exclude"):
            raise _Fail
        axis = node.attrs.get("axis")
        axes = tuple(range(data.ndim)) if axis is None else tuple(a % max(data.ndim, 1) for a in axis)
        if axes != tuple(range(data.ndim)):
            raise _Fail
        items = data.reshape(-1).tolist()
        if not items:
            raise _Fail
        total = items[0]
        for v in items[1:]:
            total = fn(total, v)
        out = _obj(total)
        if node.attrs.get("keepdims"):
            out = _obj(np.reshape(out, (1,) * data.ndim))
        return (out, dtype)

    return rule


def _unary(fn):
    def rule(ev: _Evaluator, node: Call) -> tuple:
        data, dtype = ev.arg(node, 0)
        if not _is_int_dtype(dtype):
            raise _Fail
        return (_elementwise(fn, data), dtype)

    return rule


def _abs(v: Any) -> Any:
    if type(v) is int:
        return abs(v)
    if _nonneg(v):
        return v
    raise _Fail


def _clip(ev: _Evaluator, node: Call) -> tuple:
    data, dtype = ev.arg(node, 0)
    lo, hi = node.attrs["a_min"], node.attrs["a_max"]
    if not _is_int_dtype(dtype):
        raise _Fail
    return (_elementwise(lambda v: dmin(dmax(v, int(lo)), int(hi)), data), dtype)


def _broadcast_to(ev: _Evaluator, node: Call) -> tuple:
    data, dtype = ev.arg(node, 0)
    shape = node.attrs["shape"]
    if any(type(d) is not int for d in shape):
        raise _Fail
    return (_obj(np.broadcast_to(data, tuple(shape))), dtype)


def _tile(ev: _Evaluator, node: Call) -> tuple:
    data, dtype = ev.arg(node, 0)
    reps = node.attrs["reps"]
    if any(type(d) is not int for d in reps):
        raise _Fail
    return (_obj(np.tile(data, tuple(reps))), dtype)


def _no_any(fn):
    def run(a: Any, b: Any) -> Any:
        if a is ANY or b is ANY:
            return ANY
        return fn(a, b)

    return run


_RULES = {
    "shape_of": _shape_of,
    "ndarray_size": _ndarray_size,
    "shape_value": _shape_value,
    "take": _take,
    "concatenate": _concatenate,
    "expand_dims": _expand_dims,
    "squeeze": _squeeze,
    "reshape": _reshape,
    "strided_slice": _strided_slice,
    "cast": _cast,
    "add": _binary(lambda a, b: a + b),
    "subtract": _binary(lambda a, b: a - b),
    "multiply": _binary(lambda a, b: a * b),
    "divide": _binary(_trunc_div),
    "floor_mod": _binary(_floor_mod),
    "mod": _binary(_trunc_mod),
    "maximum": _binary(_no_any(dmax)),
    "minimum": _binary(_no_any(dmin)),
    "where": _where,
    "logical_and": _logical(lambda a, b: a and b),
    "logical_or": _logical(lambda a, b: a or b),
    "logical_xor": _logical(lambda a, b: a != b),
    "logical_not": _logical(lambda a: not a),
    "sum": _reduce(lambda a, b: a + b),
    "prod": _reduce(lambda a, b: a * b),
    "max": _reduce(_no_any(dmax)),
    "min": _reduce(_no_any(dmin)),
    "abs": _unary(_abs),
    "negative": _unary(lambda v: -v),
    "clip": _clip,
    "broadcast_to": _broadcast_to,
    "tile": _tile,
}
for _name in _CMP:
    _RULES[_name] = _compare(_name)
