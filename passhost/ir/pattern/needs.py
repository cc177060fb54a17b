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
    """The clauses of ``pattern`` (see the module): a tuple of frozensets of operator names.

    Remembered by the pattern's structure (the part of it the clauses read): rule passes
    build their patterns afresh on every run, and the join of a large alternation's
    clauses is the costly part (1.4 ms a run for the rules of ``-O3`` on a Llama)."""
    try:
        sid = _structure(pattern, {})
    except _Uncached:
        return tuple(sorted(_needs(pattern, {}), key=_shortest_first))
    out = _BY_STRUCTURE.get(sid)
    if out is None:
        out = _BY_STRUCTURE[sid] = tuple(sorted(_needs(pattern, {}), key=_shortest_first))
    return out


#: a pattern node's structure (a tuple over its children's numbers) -> its number; and the
#: clauses of a pattern by its root's number. Numbers stand for subtrees, so a structure
#: stays a flat tuple however deep the pattern. Both stop growing at _MAX_STRUCTURES.
_NUMBERS: dict = {}
_BY_STRUCTURE: dict = {}
_MAX_STRUCTURES = 1 << 16
_VISITING = -1


class _Uncached(Exception):
    """A pattern with a cycle, or the table full: clauses computed, not remembered."""


def _structure(p: DFPattern, memo: dict) -> int:
    """The number of ``p``'s structure: what :func:`_compute` reads of it (attributes and
    types ignored, operator names of callees, the shape of the rest)."""
    got = memo.get(id(p))
    if got is not None:
        if got == _VISITING:
            raise _Uncached
        return got
    memo[id(p)] = _VISITING
    q = p
    while isinstance(q, _Refine):
        q = q.pattern
    t = type(q)
    if t is CallPattern:
        parts: tuple = (0, _op_names(q.op), None if q.args is None else tuple(_structure(a, memo) for a in q.args))
    elif t is AltPattern:
        parts = (1, _structure(q.left, memo), _structure(q.right, memo))
    elif t is TupleGetItemPattern:
        parts = (2, _structure(q.tuple, memo))
    elif t is TuplePattern:
        parts = (3, tuple(_structure(f, memo) for f in q.fields or ()))
    elif t is DominatorPattern:
        parts = (4, _structure(q.child, memo))
    elif t is IfPattern or t is LetPattern:
        parts = (5, tuple(_structure(x, memo) for x in (getattr(q, slot) for slot in t.__slots__)
                          if isinstance(x, DFPattern)))
    else:
        parts = (6,)
    number = _NUMBERS.get(parts)
    if number is None:
        if len(_NUMBERS) >= _MAX_STRUCTURES:
            raise _Uncached
        number = _NUMBERS[parts] = len(_NUMBERS)
    memo[id(p)] = number
    return number


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
