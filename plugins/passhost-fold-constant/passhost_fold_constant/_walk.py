"""FoldConstant's rewrite: one explicit-stack walk that rewrites each node once.

A node is rewritten as soon as all its children are: ``memo`` maps every walked node to
its rewrite (itself when unchanged) and doubles as the walk's "done" set. Popping a node
whose children are not all done pushes it back with the missing children on top, so
they are rewritten first, left to right -- the order of :func:`passhost.ir.post_order`.
A ``let``'s variable is bound to its value's constant between rewriting the value and
walking the body. Leaves (variables, constants, operators, globals) are walked like any
node and enter ``memo`` as themselves, unless a ``let`` bound them to a constant before.

Calls of operators -- nearly every node of real programs -- are handled inline in the
loop, with one- and two-argument calls unrolled; every other node kind goes through
:func:`_other`. No Python frame per node beyond that, no recursion: a 100,000-deep
chain folds at the default recursion limit.
"""
from __future__ import annotations

from math import prod
from typing import Any, Optional

import numpy as np

from passhost.errors import PassError
from passhost.ir import (
    Call,
    Constant,
    Expr,
    Function,
    If,
    Let,
    Op,
    TensorType,
    Tuple,
    TupleGetItem,
    fold_symbolic,
    is_primitive,
    keep_checked_type,
)
from passhost.ir import Span, set_checked_type, set_span, type_of

from ._eval import (
    _EVALUATE,
    _LEAF_TYPES,
    _SHAPE,
    _all_complex,
    _as_expr,
    _compute,
    _fold_shape_op,
    _op_kind,
    _unwrap,
    _value,
    is_simple_constant,
)

__all__ = ["_fold", "MAX_FOLD_BYTES"]

#: a call whose value would take more bytes than this is not evaluated: a few bytes of
#: model (a ConstantOfShape or Expand of a huge declared shape) must not make the pass
#: allocate gigabytes; the call stays, and runs where the program runs
MAX_FOLD_BYTES = 1 << 30


def _too_large(ty: TensorType) -> bool:
    n = prod(ty.shape)
    # no dtype is wider than 8 bytes: most results are cleared without looking it up
    return n * 8 > MAX_FOLD_BYTES and n * np.dtype(ty.dtype).itemsize > MAX_FOLD_BYTES


class _Kinds(dict):
    """``Op -> _SKIP / _EVALUATE / _SHAPE``, decided on first lookup, once per operator
    and fold. ``maybe`` holds the node types a (complex) constant argument can have:
    ``Constant`` and ``Tuple``, and ``Call`` too once an ``on_device`` operator is met
    (children are rewritten before their parents, so an ``on_device`` argument's
    operator is always looked up before the call that receives it)."""

    __slots__ = ("fold_qnn", "maybe")

    def __init__(self, fold_qnn: bool) -> None:
        super().__init__()
        self.fold_qnn = fold_qnn
        self.maybe = {Constant, Tuple}

    def __missing__(self, op: Op) -> int:
        kind = self[op] = _op_kind(op, self.fold_qnn)
        if op.name == "on_device":
            self.maybe.add(Call)
        return kind


# hot loop: one step per node of every function FoldConstant sees; rules.py holds the same pass as rules,
# the reference
def _fold(expr: Expr, fold_qnn: bool) -> Expr:
    """The folded ``expr`` (``expr`` itself when nothing folds); see the module docstring.

    The caller pauses the GC and silences numpy floating-point warnings.
    """
    memo: dict = {}
    get = memo.get
    kinds = _Kinds(fold_qnn)
    maybe = kinds.maybe
    # (op, id(attrs), *constant arguments) -> (result, attrs): a kernel is a pure function
    # of its arguments and attributes (stateful operators never fold), so the same call
    # on the same constant nodes is computed once; each use still gets its own Constant
    # node (they share the read-only array). The result is the array of the first
    # Constant, or the first Tuple of constants. ``attrs`` keeps the id in the key valid.
    cache: dict = {}
    cget = cache.get
    svals: set = set()  # shape_value calls: integer arithmetic over them folds symbolically
    stack: list = [expr]
    push = stack.append
    pop = stack.pop
    leaves = _LEAF_TYPES
    _Call, _Constant, _Op, _ndarray, _TensorType = Call, Constant, Op, np.ndarray, TensorType
    EVALUATE, SHAPE = _EVALUATE, _SHAPE
    while stack:
        node = pop()
        if node in memo:
            continue
        if type(node) is _Call:
            op = node.op
            if type(op) is _Op:
                args = node.args
                n = len(args)
                if n == 2:
                    a, b = args
                    na = get(a)
                    nb = get(b)
                    if na is None or nb is None:  # walk the missing arguments first
                        push(node)
                        if nb is None:
                            push(b)
                        if na is None:
                            push(a)
                        continue
                    kind = kinds[op]
                    if kind == EVALUATE:
                        if type(na) in maybe and type(nb) in maybe and (
                                (type(na) is _Constant and type(nb) is _Constant) or _all_complex((na, nb))):
                            cargs: Any = (na, nb)
                        elif svals and (na in svals or nb in svals):
                            memo[node] = _symbolic(node, (na, nb), svals)
                            continue
                        elif na is a and nb is b:
                            memo[node] = node
                            continue
                        else:
                            memo[node] = node.with_args((na, nb))
                            continue
                    elif na is a and nb is b:
                        new = node
                    else:
                        new = node.with_args((na, nb))
                elif n == 1:
                    a = args[0]
                    na = get(a)
                    if na is None:
                        push(node)
                        push(a)
                        continue
                    kind = kinds[op]
                    if kind == EVALUATE:
                        if type(na) in maybe and (type(na) is _Constant or _all_complex((na,))):
                            cargs = (na,)
                        elif svals and na in svals:
                            memo[node] = _symbolic(node, (na,), svals)
                            continue
                        elif na is a:
                            memo[node] = node
                            continue
                        else:
                            memo[node] = node.with_args((na,))
                            continue
                    elif na is a:
                        new = node
                    else:
                        new = node.with_args((na,))
                else:
                    nargs = _args(node, memo, push)
                    if nargs is False:
                        continue
                    kind = kinds[op]
                    cargs = args if nargs is None else nargs
                    if kind == EVALUATE and not (args and _all_complex(cargs)):
                        if not args and op is _SHAPE_VALUE:
                            svals.add(node)
                        elif svals and any(x in svals for x in cargs):
                            memo[node] = _symbolic(node, tuple(cargs), svals)
                            continue
                        memo[node] = node if nargs is None else node.with_args(nargs)
                        continue
                    new = node if nargs is None else node.with_args(nargs)
                if kind == EVALUATE:  # every argument a (complex) constant: evaluate
                    attrs = node.attrs
                    key = (op, id(attrs), *cargs)
                    hit = cget(key)
                    ty = type_of(node)
                    if hit is None:
                        if type(ty) is _TensorType and (not ty.is_static or _too_large(ty)):
                            # left as it is: see MAX_FOLD_BYTES; a result whose shape depends on
                            # size variables (a symbolic shape attribute) is not known here
                            same = all(x is y for x, y in zip(cargs, node.args))
                            memo[node] = node if same else node.with_args(tuple(cargs))
                            continue
                        new = _as_expr(_compute(op, cargs, attrs), ty)
                        # a tensor result is kept as the read-only array the Constant holds
                        cache[key] = (new.data if type(new) is _Constant else new, attrs)
                        if type(new) is _Constant:
                            _derived_name(new, cargs, op)
                    elif type(hit[0]) is _ndarray:  # another Constant on the same array
                        new = _Constant(hit[0])
                        _derived_name(new, cargs, op)
                        if type(ty) is _TensorType and ty.shape == hit[0].shape:
                            set_checked_type(new, ty)
                    else:  # a tuple: fresh Tuple and Constant nodes, shared arrays
                        new = _as_expr(_value(hit[0]), ty)
                    memo[node] = new
                    continue
                if kind == SHAPE and args:
                    folded = _fold_shape_op(new, node)
                    if folded is not None:
                        new = folded
                        if type(new) is _Call:  # a shape_value: shape arithmetic on it folds too
                            svals.add(new)
                    else:  # a shape with a ?: its known entries still fold (take(.., i))
                        svals.add(new)
                memo[node] = new
                continue
        if type(node) in leaves:
            memo[node] = node  # first met as an argument (or the root itself)
        else:
            _other(node, memo, push)
            if svals and type(node) is Tuple:  # a tuple of shape values is shape data too
                new = get(node)
                if new is not None and type(new) is Tuple and any(f in svals for f in new.fields) \
                        and all(type(f) is _Constant or f in svals for f in new.fields):
                    svals.add(new)
    return get(expr, expr)


_SHAPE_VALUE = Op.get("shape_value")


#: operators that only move a weight's numbers: the moved weight keeps its name
_MOVES = frozenset({"transpose", "reshape", "expand_dims", "squeeze", "layout_transform"})


def _derived_name(const: Constant, args: tuple, op: Op) -> None:
    """A folded weight is named after the first named constant it was computed from, plus
    ``_folded`` (the model's name of a weight is metadata: a span), so the export writes
    ``conv1.weight_folded`` for ``conv1.weight`` with a batch norm folded in; a weight only
    moved (transposed, reshaped) keeps its name."""
    for a in args:
        span = getattr(a, "span", None)
        if span is not None and span.name:
            name = span.name
            if op.name not in _MOVES and not name.endswith("_folded"):
                name += "_folded"
            set_span(const, Span(span.source, name=name))
            return


def _symbolic(node: Call, args: tuple, svals: set) -> Expr:
    """``node`` on ``args``, some of them ``shape_value`` calls: folded as shape arithmetic
    (:func:`passhost.ir.fold_symbolic`) where every other argument is a constant, else
    rebuilt on the new arguments.

    before:  take(shape_value(values=[batch, seq, 768]), 1)
    after:   shape_value(values=seq)
    """
    same = all(x is y for x, y in zip(args, node.args))
    new = node if same else node.with_args(args)
    if all(type(x) is Constant or x in svals for x in args):
        folded = fold_symbolic(new)
        if folded is not None:
            if type(folded) is Call:
                svals.add(folded)
            return folded
    return new


def _done(x: Expr, memo: dict) -> Optional[Expr]:
    """The rewrite of ``x`` if it is done (leaves always are), else ``None``."""
    nx = memo.get(x)
    if nx is None and type(x) in _LEAF_TYPES:
        memo[x] = nx = x
    return nx


def _args(node: Call, memo: dict, push: Any) -> Any:
    """The rewritten arguments of ``node`` (any arity): a tuple, ``None`` when none
    changed, or ``False`` after pushing ``node`` back behind its missing arguments."""
    args = node.args
    new = []
    pending = []
    for a in args:
        na = _done(a, memo)
        if na is None:
            pending.append(a)
        new.append(na)
    if pending:
        push(node)
        for a in reversed(pending):
            push(a)
        return False
    for na, a in zip(new, args):
        if na is not a:
            return tuple(new)
    return None


def _other(node: Expr, memo: dict, push: Any) -> None:
    """Rewrite a node that is not a call of an operator, or push it back behind its
    missing children."""
    t = type(node)
    if t is Let:
        value = node.value
        nv = _done(value, memo)
        if nv is None:
            push(node)
            push(value)
            return
        const = is_simple_constant(nv)
        if const:
            memo[node.var] = nv  # before the body is walked
        body = node.body
        nb = _done(body, memo)
        if nb is None:
            push(node)
            push(body)
            return
        if const:
            new = nb  # the variable was replaced by the constant
        elif nv is value and nb is body:
            new = node
        else:
            new = keep_checked_type(node, Let(node.var, nv, nb), (nv, nb))
        memo[node] = new
        return
    if t is Function and is_primitive(node):
        memo[node] = node  # a fused kernel: kept as it is, never entered
        return
    if t is Call:  # a call of a function, closure or global
        kids: Any = (node.op, *node.args)
    elif t is TupleGetItem:
        kids = (node.tuple_value,)
    elif t is Tuple:
        kids = node.fields
    elif t is If:
        kids = (node.cond, node.true_branch, node.false_branch)
    elif t is Function:
        kids = (node.body,)
    else:
        raise PassError(f"FoldConstant: unknown node kind {t.__name__}; it has no rewrite rule",
                        "FoldConstant")
    new_kids = [_done(k, memo) for k in kids]
    if None in new_kids:
        push(node)
        for k, nk in zip(reversed(kids), reversed(new_kids)):
            if nk is None:
                push(k)
        return
    memo[node] = _rebuild(node, t, kids, new_kids)


def _rebuild(node: Expr, t: type, kids: Any, new_kids: list) -> Expr:
    """``node`` (not a let, not a call of an operator) from its rewritten children."""
    if t is Call:
        nop = new_kids[0]
        nargs = new_kids[1:]
        if nop is node.op and all(x is y for x, y in zip(nargs, node.args)):
            return node
        return keep_checked_type(node, Call(nop, nargs, node.attrs if type(nop) is type(node.op) else None),
                                 nargs)
    if t is TupleGetItem:
        tv = new_kids[0]
        inner = _unwrap(tv)
        if type(inner) is Tuple and node.index < len(inner.fields):
            return inner.fields[node.index]
        if tv is node.tuple_value:
            return node
        return keep_checked_type(node, TupleGetItem(tv, node.index), (tv,))
    if t is Tuple:
        if all(x is y for x, y in zip(new_kids, kids)):
            return node
        return keep_checked_type(node, Tuple(new_kids), new_kids)
    if t is If:
        cond, then, other = new_kids
        c = _unwrap(cond)
        if type(c) is Constant:
            return then if c.data.tobytes()[:1] not in (b"", b"\x00") else other
        if cond is node.cond and then is node.true_branch and other is node.false_branch:
            return node
        return keep_checked_type(node, If(cond, then, other), (cond, then, other))
    body = new_kids[0]  # a Function
    if body is node.body:
        return node
    return keep_checked_type(node, Function(node.params, body, node.ret_type, node.attrs), (body,))
