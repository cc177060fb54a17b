"""Dataflow patterns with TVM's names: match sub-graphs, rewrite them, partition them.

A pattern describes a sub-graph; ``pattern.match(expr)`` says whether ``expr`` is one::

    x = wildcard()
    pat = is_op("multiply")(x, is_constant())
    pat.match(ir.multiply(ir.var("a"), ir.const(1.0)))     # True
    pat.match(ir.multiply(ir.const(1.0), ir.var("a")))     # True: multiply is commutative

A :class:`DFPatternCallback` pairs a pattern with a replacement; :func:`rewrite` applies
callbacks bottom-up until none fires::

    class FoldMulOne(DFPatternCallback):
        def __init__(self):
            super().__init__()
            self.x = wildcard()
            self.pattern = is_op("multiply")(self.x, is_constant())

        def callback(self, pre, post, node_map):
            c = post.args[1] if isinstance(post.args[1], ir.Constant) else post.args[0]
            return node_map[self.x][0] if np.all(c.data == 1) else post

    before:  multiply(%a, 1f)          after rewrite([FoldMulOne()], e):  %a

Differences from TVM, all additive: commutative operators (``add``, ``multiply``,
``maximum``, ``minimum``, ``equal``, ``not_equal``, ``logical_and``, ``logical_or``)
match their two arguments in either order from one pattern; callbacks have a
``priority`` (higher first, then the order given); and :func:`explain` says, for a node
that did not match, which part of the pattern failed and why.

Matching is a walk over the pattern, not the graph: its cost per node is bounded by the
pattern's size, and :func:`rewrite` tries a pattern only on calls of the operators its
root can match (one dict look-up for every other node).
"""
from __future__ import annotations

from .match import COMMUTATIVE, explain, root_ops, why_not
from .nodes import (AltPattern, AttrPattern, CallPattern, ConstantPattern, DataTypePattern, DFPattern,
                    DominatorPattern, ExprPattern, FunctionPattern, IfPattern, LetPattern, ShapePattern,
                    TuplePattern, TupleGetItemPattern, TypePattern, VarPattern, WildcardPattern, dominates,
                    has_attr, has_dtype, has_shape, has_type, is_constant, is_expr, is_if, is_let, is_op,
                    is_tuple, is_tuple_get_item, is_var, wildcard)
from .partition import Part, find_parts, partition, partition_all
from .rewrite import DFPatternCallback, RewriteLimitError, rewrite, rule

__all__ = [
    "DFPattern", "WildcardPattern", "ExprPattern", "VarPattern", "ConstantPattern", "CallPattern",
    "TuplePattern", "TupleGetItemPattern", "AltPattern", "TypePattern", "DataTypePattern",
    "ShapePattern", "AttrPattern", "DominatorPattern", "IfPattern", "LetPattern", "FunctionPattern",
    "wildcard", "is_op", "is_constant", "is_var", "is_expr", "is_tuple", "is_tuple_get_item",
    "is_if", "is_let", "has_attr", "has_type", "has_dtype", "has_shape", "dominates",
    "DFPatternCallback", "rewrite", "rule", "partition", "partition_all", "find_parts", "Part", "explain", "why_not", "root_ops", "COMMUTATIVE", "RewriteLimitError",
]
