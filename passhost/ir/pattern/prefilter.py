"""A pattern's prefilter: a cheap necessary condition the driver tests before matching.

The backtracking matcher pays for its generality (a memo, continuations, alternatives) on
every node it is offered. Most offered nodes fail on their shape alone, a few levels
down: the layer-norm rule is rooted at ``add``/``multiply`` and so is offered every batch
norm of a CNN, whose ``multiply`` reads a convolution where the rule wants a ``divide``.
:func:`prefilter` compiles the shape of the top levels of a pattern -- the operators, the
arities, where a constant or a variable must be -- into nested closures with no memo and
no bindings, which reject such a node in a few attribute reads::

    pattern   add(multiply(divide(%c, sqrt(...)) | multiply(%c, rsqrt(...)), const), const)
    offered   add(multiply(nn.conv2d(...), meta[Constant][0]), meta[Constant][1])
    prefilter rejects it at the convolution; the matcher never runs

A prefilter never rejects a node the pattern matches: it ignores what only narrows a
match (a pattern node bound twice must be the same expression, attributes, types), tries
both orders of a commutative call as the matcher does, and accepts whatever it does not
model (wildcards, given expressions, dominators, functions).
"""
from __future__ import annotations

from typing import Callable, Optional

from ..expr import Call, Constant, Expr, Tuple, TupleGetItem, Var
from ..op import Op
from .match import COMMUTATIVE, _op_names
from .nodes import (AltPattern, CallPattern, ConstantPattern, DFPattern, TupleGetItemPattern, TuplePattern, VarPattern,
                    _Refine)

__all__ = ["prefilter"]

Check = Callable[[Expr], bool]

#: how many levels below the root a prefilter looks (each level costs a test only when
#: the level above passed, so a deeper filter is cheap; the bound keeps its build small)
DEPTH = 4


def prefilter(pattern: DFPattern, depth: int = DEPTH) -> Optional[Check]:
    """The prefilter of ``pattern`` (see the module), or None when it would accept every node."""
    return _build(pattern, depth, {})


def _build(p: DFPattern, depth: int, memo: dict) -> Optional[Check]:
    key = (id(p), depth)
    if key in memo:
        return memo[key]
    memo[key] = None  # a cycle (none in well-formed patterns) accepts
    out = _compile(p, depth, memo)
    memo[key] = out
    return out


def _compile(p: DFPattern, depth: int, memo: dict) -> Optional[Check]:  # noqa: C901 - one dispatch
    while isinstance(p, _Refine):  # attributes and types only narrow the inner pattern
        p = p.pattern
    t = type(p)
    if t is ConstantPattern:
        return _is_constant
    if t is VarPattern:
        return _is_var
    if t is AltPattern:
        left, right = _build(p.left, depth, memo), _build(p.right, depth, memo)
        if left is None or right is None:
            return None
        return lambda e: left(e) or right(e)
    if t is TupleGetItemPattern:
        inner = _build(p.tuple, depth - 1, memo) if depth > 0 else None
        index = p.index
        _TGI = TupleGetItem

        def item(e: Expr) -> bool:
            return (type(e) is _TGI and (index < 0 or e.index == index)
                    and (inner is None or inner(e.tuple_value)))

        return item
    if t is CallPattern:
        return _call(p, depth, memo)
    if t is TuplePattern and p.fields is not None:
        n = len(p.fields)
        _Tuple = Tuple
        return lambda e: type(e) is _Tuple and len(e.fields) == n
    return None


def _call(p: CallPattern, depth: int, memo: dict) -> Check:
    names = _op_names(p.op)
    n = None if p.args is None else len(p.args)
    subs = [] if n is None or depth <= 0 else [_build(a, depth - 1, memo) for a in p.args]
    if all(s is None for s in subs):
        subs = []
    _Call, _Op = Call, Op

    def head(e: Expr) -> bool:
        if type(e) is not _Call:
            return False
        if names is not None and (type(e.op) is not _Op or e.op.name not in names):
            return False
        return n is None or len(e.args) == n

    if not subs:
        return head
    if n == 2:
        a, b = subs
        may_swap = names is None or bool(names & COMMUTATIVE)

        def pair(e: Expr) -> bool:
            if not head(e):
                return False
            x, y = e.args
            if (a is None or a(x)) and (b is None or b(y)):
                return True
            return (may_swap and type(e.op) is _Op and e.op.name in COMMUTATIVE
                    and (a is None or a(y)) and (b is None or b(x)))

        return pair
    tests = [(i, s) for i, s in enumerate(subs) if s is not None]

    def call(e: Expr) -> bool:
        if not head(e):
            return False
        args = e.args
        return all(s(args[i]) for i, s in tests)

    return call


def _is_constant(e: Expr) -> bool:
    return type(e) is Constant


def _is_var(e: Expr) -> bool:
    return type(e) is Var
