"""Matching a pattern against an expression, explaining a failed match, and the operator
names a pattern's root can have (what :func:`~passhost.ir.pattern.rewrite` dispatches on)."""
from __future__ import annotations

from typing import Any, Optional

from ...errors import IRError
from ..expr import Call, Constant, Expr, Function, If, Let, Tuple, TupleGetItem, Var
from ..op import Op
from ..types import TensorType, Type
from .nodes import (AltPattern, AttrPattern, CallPattern, ConstantPattern, DataTypePattern, DFPattern,
                    DominatorPattern, ExprPattern, FunctionPattern, IfPattern, LetPattern, ShapePattern,
                    TuplePattern, TupleGetItemPattern, TypePattern, VarPattern, WildcardPattern, _Refine)

#: Operators whose two arguments may be swapped: a pattern over them matches either order.
COMMUTATIVE = frozenset({"add", "multiply", "maximum", "minimum", "equal", "not_equal",
                         "logical_and", "logical_or"})


def _attr_equal(have: Any, want: Any) -> bool:
    if isinstance(want, (list, tuple)):
        if not isinstance(have, (list, tuple)) or len(have) != len(want):
            return False
        return all(_attr_equal(h, w) for h, w in zip(have, want))
    if isinstance(have, (list, tuple)):
        return False
    if isinstance(want, float) or isinstance(have, float):
        try:
            return float(have) == float(want)
        except (TypeError, ValueError):
            return False
    return have == want


def _type_of(expr: Expr) -> Optional[Type]:
    return expr._checked_type


class _Matcher:
    """One match attempt: ``memo`` binds each pattern node to the expression it matched, so
    a pattern used twice (``subtract(x, mean(x))``) must match the same node both times."""

    __slots__ = ("memo", "why", "explaining")

    def __init__(self, explaining: bool = False) -> None:
        self.memo: dict = {}
        self.why: list = []
        self.explaining = explaining

    def fail(self, pattern: DFPattern, expr: Expr, reason: str) -> bool:
        if self.explaining:
            self.why.append((pattern, expr, reason))
        return False

    def match(self, pattern: DFPattern, expr: Expr) -> bool:
        self.memo = {}
        return self.visit(pattern, expr)

    def visit(self, p: DFPattern, e: Expr) -> bool:
        bound = self.memo.get(p)
        if bound is not None:
            return bound is e or self.fail(p, e, "this pattern already matched another node")
        ok = self._visit(p, e)
        if ok:
            self.memo[p] = e
        return ok

    def _visit(self, p: DFPattern, e: Expr) -> bool:  # noqa: C901 - one dispatch over pattern kinds
        t = type(p)
        if t is WildcardPattern:
            return True
        if t is CallPattern:
            if type(e) is not Call:
                return self.fail(p, e, f"expected a call, found {_kind(e)}")
            if not self.visit(p.op, e.op):
                return False
            if p.args is None:
                return True
            args = e.args
            if len(args) != len(p.args):
                return self.fail(p, e, f"expected {len(p.args)} arguments, found {len(args)}")
            if len(args) == 2 and type(e.op) is Op and e.op.name in COMMUTATIVE:
                saved = dict(self.memo)
                if self.visit(p.args[0], args[0]) and self.visit(p.args[1], args[1]):
                    return True
                self.memo = saved
                if self.visit(p.args[0], args[1]) and self.visit(p.args[1], args[0]):
                    return True
                self.memo = saved
                return False
            return all(self.visit(pa, a) for pa, a in zip(p.args, args))
        if t is ExprPattern:
            want = p.expr
            if isinstance(want, Op):
                if type(e) is Op and e.name == want.name:
                    return True
                return self.fail(p, e, f"expected operator {want.name}, found {_kind(e)}")
            if e is want:
                return True
            from ..structural import structural_equal

            return structural_equal(e, want) or self.fail(p, e, "not the given expression")
        if t is ConstantPattern:
            return type(e) is Constant or self.fail(p, e, f"expected a constant, found {_kind(e)}")
        if t is VarPattern:
            if type(e) is not Var:
                return self.fail(p, e, f"expected a variable, found {_kind(e)}")
            return not p.name or e.name_hint == p.name or self.fail(p, e, f"variable %{e.name_hint}, not %{p.name}")
        if t is AltPattern:
            saved = dict(self.memo)
            if self.visit(p.left, e):
                return True
            self.memo = saved
            if self.visit(p.right, e):
                return True
            self.memo = saved
            return False
        if t is AttrPattern:
            if not self.visit(p.pattern, e):
                return False
            attrs = e.attrs if type(e) in (Call, Function) else (e.attrs if type(e) is Op else None)
            if attrs is None:
                return self.fail(p, e, f"{_kind(e)} has no attributes")
            for k, v in p.attrs.items():
                have = attrs.get(k, _MISSING) if hasattr(attrs, "get") else getattr(attrs, k, _MISSING)
                if have is _MISSING:
                    return self.fail(p, e, f"no attribute {k!r}")
                if not _attr_equal(have, v):
                    return self.fail(p, e, f"attribute {k}={have!r}, wanted {v!r}")
            return True
        if t is DataTypePattern or t is ShapePattern or t is TypePattern:
            if not self.visit(p.pattern, e):
                return False
            ty = _type_of(e)
            if ty is None:
                return self.fail(p, e, "the node has no type yet (set require_type or run InferType)")
            if t is TypePattern:
                from ..structural import structural_equal

                return structural_equal(ty, p.type) or self.fail(p, e, f"type {ty}, wanted {p.type}")
            if not isinstance(ty, TensorType):
                return self.fail(p, e, f"type {ty} is not a tensor")
            if t is DataTypePattern:
                return ty.dtype == p.dtype or self.fail(p, e, f"dtype {ty.dtype}, wanted {p.dtype}")
            shape = tuple(int(d) for d in ty.shape)
            return shape == p.shape or self.fail(p, e, f"shape {list(shape)}, wanted {list(p.shape)}")
        if t is TuplePattern:
            if type(e) is not Tuple:
                return self.fail(p, e, f"expected a tuple, found {_kind(e)}")
            if p.fields is None:
                return True
            if len(p.fields) != len(e.fields):
                return self.fail(p, e, f"expected {len(p.fields)} fields, found {len(e.fields)}")
            return all(self.visit(pf, f) for pf, f in zip(p.fields, e.fields))
        if t is TupleGetItemPattern:
            if type(e) is not TupleGetItem:
                return self.fail(p, e, f"expected a tuple item, found {_kind(e)}")
            if p.index >= 0 and e.index != p.index:
                return self.fail(p, e, f"item {e.index}, wanted {p.index}")
            return self.visit(p.tuple, e.tuple_value)
        if t is DominatorPattern:
            return self._dominates(p, e)
        if t is IfPattern:
            if type(e) is not If:
                return self.fail(p, e, f"expected an if, found {_kind(e)}")
            return (self.visit(p.cond, e.cond) and self.visit(p.true_branch, e.true_branch)
                    and self.visit(p.false_branch, e.false_branch))
        if t is LetPattern:
            if type(e) is not Let:
                return self.fail(p, e, f"expected a let, found {_kind(e)}")
            return self.visit(p.var, e.var) and self.visit(p.value, e.value) and self.visit(p.body, e.body)
        if t is FunctionPattern:
            if type(e) is not Function:
                return self.fail(p, e, f"expected a function, found {_kind(e)}")
            if p.params is not None:
                if len(p.params) != len(e.params):
                    return self.fail(p, e, f"expected {len(p.params)} parameters, found {len(e.params)}")
                if not all(self.visit(pp, v) for pp, v in zip(p.params, e.params)):
                    return False
            return self.visit(p.body, e.body)
        raise IRError(f"unknown pattern node {p!r}")

    def _dominates(self, p: DominatorPattern, e: Expr) -> bool:
        """``e`` matches ``child``; walking up its inputs, every node either matches ``parent``
        (the walk stops there; all such nodes must be the same one) or matches ``path``."""
        if not self.visit(p.child, e):
            return False
        stack = [a for a in _inputs(e)]
        seen: set = set()
        parent_hit = None
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            saved = dict(self.memo)
            if self.visit(p.parent, node):
                if parent_hit is not None and parent_hit is not node:
                    self.memo = saved
                    return self.fail(p, e, "the paths reach more than one parent")
                parent_hit = node
                continue
            self.memo = saved
            if not _Matcher().visit(p.path, node):
                return self.fail(p, e, f"{_kind(node)} on a path to the parent does not match {p.path!r}")
            stack.extend(_inputs(node))
        if parent_hit is None:
            return self.fail(p, e, "no path reaches a node matching the parent")
        return True


_MISSING = object()


def _inputs(e: Expr) -> list:
    if type(e) is Call:
        return list(e.args)
    if type(e) is Tuple:
        return list(e.fields)
    if type(e) is TupleGetItem:
        return [e.tuple_value]
    return []


def _kind(e: Any) -> str:
    if type(e) is Call:
        return f"a call of {e.op.name}" if type(e.op) is Op else "a call"
    if type(e) is Op:
        return f"operator {e.name}"
    if type(e) is Var:
        return f"variable %{e.name_hint}"
    return {Constant: "a constant", Tuple: "a tuple", TupleGetItem: "a tuple item", Function: "a function",
            Let: "a let", If: "an if"}.get(type(e), type(e).__name__)


def explain(pattern: DFPattern, expr: Expr) -> list:
    """Why ``pattern`` does not match ``expr``: ``[]`` when it does, else the failures met
    on the way, innermost last, each a line ``pattern: reason``."""
    m = _Matcher(explaining=True)
    if m.match(pattern, expr):
        return []
    return [f"{p!r}: {reason}" for p, _, reason in m.why]


def root_ops(pattern: DFPattern) -> Optional[frozenset]:
    """The operator names a match of ``pattern`` can have at its root, or None (any node)."""
    t = type(pattern)
    if t is CallPattern:
        return _op_names(pattern.op)
    if t is AltPattern:
        left, right = root_ops(pattern.left), root_ops(pattern.right)
        return None if left is None or right is None else left | right
    if isinstance(pattern, _Refine):
        return root_ops(pattern.pattern)
    if t is DominatorPattern:
        return root_ops(pattern.child)
    return None


def _op_names(p: DFPattern) -> Optional[frozenset]:
    if type(p) is ExprPattern and isinstance(p.expr, Op):
        return frozenset({p.expr.name})
    if type(p) is AltPattern:
        left, right = _op_names(p.left), _op_names(p.right)
        return None if left is None or right is None else left | right
    return None
