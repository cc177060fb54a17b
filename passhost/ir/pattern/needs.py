"""The operators a pattern's every match must call: what lets the driver skip a function whole.

A match of ``add(nn.dense(%x, %w), %b)`` calls ``add`` *and* ``nn.dense``; a match of
``add(nn.dense(%x, %w) | nn.matmul(%x, %w), %b)`` calls ``add`` and one of ``nn.dense`` and
``nn.matmul``. :func:`needed_ops` gives these as *clauses*, a tuple of operator-name sets
each of which every match meets::

    needed_ops(add(nn.dense(x, w) | nn.matmul(x, w), b))   ->  ({"add"}, {"nn.dense", "nn.matmul"})

A function that calls no operator of some clause (``ir.called_ops``, remembered per
function) holds no match, so :func:`passhost.ir.pattern.rewrite` returns it untouched
without a sweep: a transformer fusion run over a CNN costs one set test. The clauses are
a necessary condition only: they leave out what they do not model (attributes, types,
dominator paths, function patterns), and an alternative keeps only clauses both of its
sides imply (each clause of one side joined with each of the other's, at most
:data:`MAX_CLAUSES` of them).
"""
from __future__ import annotations

from .match import _op_names
from .nodes import (AltPattern, CallPattern, DFPattern, DominatorPattern, IfPattern, LetPattern, TupleGetItemPattern,
                    TuplePattern, _Refine)

__all__ = ["needed_ops", "MAX_CLAUSES"]

#: clauses an alternative keeps (any subset of the clauses is still a necessary condition)
MAX_CLAUSES = 16


def needed_ops(pattern: DFPattern) -> tuple:
    """The clauses of ``pattern`` (see the module): a tuple of frozensets of operator names."""
    return tuple(sorted(_needs(pattern, {}), key=_shortest_first))


def _needs(p: DFPattern, memo: dict) -> frozenset:
    """A frozenset of clauses (frozensets of names); patterns are small trees with shared
    leaves, so the recursion is shallow and each node is computed once."""
    key = id(p)
    got = memo.get(key)
    if got is not None:
        return got
    memo[key] = frozenset()  # a cycle (none in well-formed patterns) needs nothing
    out = _simplest(_compute(p, memo))
    memo[key] = out
    return out


def _compute(p: DFPattern, memo: dict) -> frozenset:
    while isinstance(p, _Refine):  # attributes and types only narrow the inner pattern
        p = p.pattern
    t = type(p)
    if t is CallPattern:
        out = set()
        names = _op_names(p.op)
        if names is not None:
            out.add(names)
        for a in p.args or ():
            out |= _needs(a, memo)
        return frozenset(out)
    if t is AltPattern:
        left, right = _needs(p.left, memo), _needs(p.right, memo)
        joined = _simplest(frozenset(a | b for a in left for b in right))
        return frozenset(sorted(joined, key=_shortest_first)[:MAX_CLAUSES])
    if t is TupleGetItemPattern:
        return _needs(p.tuple, memo)
    if t is TuplePattern:
        return frozenset().union(*(_needs(f, memo) for f in p.fields or ()))
    if t is DominatorPattern:
        return _needs(p.child, memo)
    if t is IfPattern or t is LetPattern:  # every part must match
        parts = (getattr(p, slot) for slot in t.__slots__)
        return frozenset().union(*(_needs(q, memo) for q in parts if isinstance(q, DFPattern)))
    return frozenset()  # wildcards, variables, constants, given expressions, functions


def _shortest_first(clause: frozenset) -> tuple:
    return len(clause), sorted(clause)


def _simplest(clauses: frozenset) -> frozenset:
    """``clauses`` without those another clause implies (a superset of a clause is weaker)."""
    if len(clauses) < 2:
        return clauses
    return frozenset(c for c in clauses if not any(d < c for d in clauses))
