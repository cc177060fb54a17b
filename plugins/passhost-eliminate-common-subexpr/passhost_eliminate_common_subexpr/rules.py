"""EliminateCommonSubexpr as one rule: the pass's reference semantics, in the words of a
reader (:mod:`.eliminate_common_subexpr` is the same pass as a hand-fused loop, the one that
runs; a property test holds the two to structurally equal results).

Walking the program bottom-up (:func:`passhost.ir.rewrite_post_order`), a call is replaced
by the first call seen with the same operator, equal attributes and the same arguments, and
a tuple projection by the first with the same tuple and index. Arguments are "the same" as
TVM's ``EliminateCommonSubexpr`` has it: the same node, or equal scalar constants, or tuples
field by field. A stateful operator's calls are never merged, nor calls of functions::

    %0 = add(%x, 1f);  %1 = add(%x, 1f);  multiply(%0, %1)
    ->  %0 = add(%x, 1f);  multiply(%0, %0)
"""
from __future__ import annotations

from passhost import ir
from passhost.ir import Call, Constant, Op, Tuple, TupleGetItem

__all__ = ["cse_rules"]

_TUPLE = object()
_OFFER = frozenset({Call, TupleGetItem})


def cse_rules(expr: ir.Expr) -> ir.Expr:
    """``expr`` with its common subexpressions merged (see the module docstring)."""
    tables: dict = {}   # Op -> ({key: first call}, default attrs), or False (never merged)
    scalars: dict = {}  # (dtype, bytes) -> the first scalar constant of that value
    classes: dict = {}  # (op, attrs) -> attrs equality class
    getitems: dict = {}

    def key(a):
        if type(a) is Constant:
            d = a.data
            return scalars.setdefault((d.dtype, d.tobytes()), a) if d.ndim == 0 else a
        if type(a) is Tuple:
            return (_TUPLE,) + tuple(key(f) for f in a.fields)
        return a

    def rule(node):
        if type(node) is TupleGetItem:
            first = getitems.setdefault((node.tuple_value, node.index), node)
            return None if first is node else first
        op = node.op
        entry = tables.get(op)
        if entry is None:
            entry = tables[op] = False if type(op) is not Op or op.stateful else ({}, op.attr_defaults)
        if entry is False or not node.args:
            return None
        k = tuple(key(a) for a in node.args)
        if node.attrs is not entry[1]:  # equal attrs share a class (the defaults' included)
            cls = classes.setdefault((op, node.attrs), len(classes))
            if cls != classes.setdefault((op, entry[1]), len(classes)):
                k = (cls,) + k
        first = entry[0].setdefault(k, node)
        return None if first is node else first

    return ir.rewrite_post_order(expr, rule, keep_types=True, only=_OFFER)
