"""FoldConstant's rewrite: one explicit-stack walk that rewrites each node once.

A node is rewritten as soon as all its children are: ``memo`` maps every walked node to
its rewrite (itself when unchanged) and doubles as the walk's "done" set. Popping a node
whose children are not all done pushes it back with the missing children on top, so
they are rewritten first, left to right -- the order of :func:`passhost.ir.post_order`.
A ``let``'s variable is bound to its value's constant between rewriting the value and
walking the body. Leaves (variables, constants, operators, globals) enter ``memo`` as
themselves when first met, unless a ``let`` bound them to a constant before.

Calls of operators -- nearly every node of real programs -- are handled inline in the
loop, with one- and two-argument calls unrolled; every other node kind goes through
:func:`_other`. No Python frame per node beyond that, no recursion: a 100,000-deep
chain folds at the default recursion limit.
"""
from __future__ import annotations

from typing import Any, Optional

from passhost.errors import PassError
from passhost.ir import (
    Call,
    Constant,
    Expr,
    Function,
    If,
    Let,
    Op,
    Tuple,
    TupleGetItem,
    is_primitive,
    keep_checked_type,
)

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
    is_simple_constant,
)

__all__ = ["_fold"]


def _fold(expr: Expr, fold_qnn: bool) -> Expr:
    """The folded ``expr`` (``expr`` itself when nothing folds); see the module docstring.

    The caller pauses the GC and silences numpy floating-point warnings.
    """
    memo: dict = {}
    get = memo.get
    kinds: dict = {}  # Op -> _SKIP / _EVALUATE / _SHAPE, decided once per operator
    kget = kinds.get
    # (op, id(attrs), *constant arguments) -> (kernel result, attrs): a kernel is a pure
    # function of its arguments and attributes (stateful operators never fold), so the
    # same call on the same constant nodes is computed once; each use still gets its own
    # Constant node (they share the read-only array). ``attrs`` in the value keeps the
    # id in the key valid.
    cache: dict = {}
    cget = cache.get
    # whether an ``on_device`` call was met: until then a Call argument cannot be a
    # (complex) constant, so calls with call arguments skip the exact check
    ondev = False
    stack: list = [expr]
    push = stack.append
    pop = stack.pop
    leaves = _LEAF_TYPES
    _Call, _Constant, _Tuple, _Op = Call, Constant, Tuple, Op
    EVALUATE, SHAPE = _EVALUATE, _SHAPE
    while stack:
        node = pop()
        if node in memo:
            continue
        if type(node) is _Call:
            op = node.op
            if type(op) is _Op:
                kind = kget(op)
                if kind is None:
                    kind = kinds[op] = _op_kind(op, fold_qnn)
                    if op.name == "on_device":
                        ondev = True
                args = node.args
                if len(args) == 2:
                    a, b = args
                    na = get(a)
                    nb = get(b)
                    if na is None or nb is None:
                        if nb is None and type(b) in leaves:
                            memo[b] = nb = b
                        if na is None and type(a) in leaves:
                            memo[a] = na = a
                        if na is None or nb is None:
                            push(node)
                            if nb is None:
                                push(b)
                            if na is None:
                                push(a)
                            continue
                    if kind == EVALUATE:
                        ta = type(na)
                        tb = type(nb)
                        if (ta is _Constant and tb is _Constant) or (
                                (ondev or ta is _Tuple or tb is _Tuple) and _all_complex((na, nb))):
                            cargs: Any = (na, nb)
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
                elif len(args) == 1:
                    a = args[0]
                    na = get(a)
                    if na is None:
                        if type(a) in leaves:
                            memo[a] = na = a
                        else:
                            push(node)
                            push(a)
                            continue
                    if kind == EVALUATE:
                        ta = type(na)
                        if ta is _Constant or ((ondev or ta is _Tuple) and _all_complex((na,))):
                            cargs = (na,)
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
                    cargs = args if nargs is None else nargs
                    if kind == EVALUATE and not (args and _all_complex(cargs)):
                        memo[node] = node if nargs is None else node.with_args(nargs)
                        continue
                    new = node if nargs is None else node.with_args(nargs)
                if kind == EVALUATE:  # every argument a (complex) constant: evaluate
                    attrs = node.attrs
                    key = (op, id(attrs), *cargs)
                    hit = cget(key)
                    if hit is None:
                        value = _compute(op, cargs, attrs)
                        cache[key] = (value, attrs)
                    else:
                        value = hit[0]
                    memo[node] = _as_expr(value, node._checked_type)
                    continue
                if kind == SHAPE and args:
                    folded = _fold_shape_op(new, node)
                    if folded is not None:
                        new = folded
                memo[node] = new
                continue
        if type(node) not in leaves:  # (only the root can be a leaf here)
            _other(node, memo, push)
    return get(expr, expr)


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
