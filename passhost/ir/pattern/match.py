"""Matching a pattern against an expression, explaining a failed match, and the operator
names a pattern's root can have (what :func:`~passhost.ir.pattern.rewrite` dispatches on)."""
from __future__ import annotations

from typing import Any, Callable, Optional

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
    """One match attempt, a backtracking search.

    ``memo`` binds each pattern node to the expression it matched, so a pattern used twice
    (``subtract(x, mean(x))``) must match the same node both times. Every choice (an
    alternative, the argument order of a commutative call) is tried with the rest of the
    match as a continuation ``k``; a binding made on a path that later fails is undone, so
    ``multiply(multiply(x, c), f(x))`` finds ``x`` in ``multiply(multiply(0.5f, %x), ...)``
    even though ``x`` could first bind the constant.
    """

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
        return self.visit(pattern, expr, _true)

    def visit(self, p: DFPattern, e: Expr, k: Callable[[], bool], label: str = "") -> bool:
        memo = self.memo
        bound = memo.get(p)
        if bound is not None:
            if bound is not e:
                return self.fail(p, e, f"this pattern already matched {_kind(bound)}, so it cannot also be {_kind(e)}")
            return k()

        def bind() -> bool:
            memo[p] = e
            if k():
                return True
            del memo[p]
            return False

        return self._visit(p, e, bind)

    def seq(self, pairs: list, i: int, k: Callable[[], bool], labels: Optional[Callable[[int], str]] = None) -> bool:
        if i == len(pairs):
            return k()
        p, e = pairs[i]
        return self.visit(p, e, lambda: self.seq(pairs, i + 1, k, labels), labels(i) if labels else "")

    # hot loop: one dispatch per pattern node tried against an expression; each pattern kind in line
    def _visit(self, p: DFPattern, e: Expr, k: Callable[[], bool]) -> bool:  # noqa: C901 - one dispatch
        t = type(p)
        if t is WildcardPattern:
            return k()
        if t is CallPattern:
            if type(e) is not Call:
                return self.fail(p, e, f"expected a call, found {_kind(e)}")
            pop = p.op
            if type(pop) is ExprPattern and isinstance(pop.expr, Op) and not (
                    type(e.op) is Op and e.op.name == pop.expr.name):
                return self.fail(p, e, f"expected a call of {pop.expr.name}, found {_kind(e)}")
            pargs, args = p.args, e.args

            def arguments() -> bool:
                if pargs is None:
                    return k()
                if len(args) != len(pargs):
                    return self.fail(p, e, f"expected {len(pargs)} arguments, found {len(args)}")
                name = e.op.name if type(e.op) is Op else "the call"
                if len(args) == 2 and type(e.op) is Op and e.op.name in COMMUTATIVE:
                    return (self.seq([(pargs[0], args[0]), (pargs[1], args[1])], 0, k, _arg_label(name, (0, 1)))
                            or self.seq([(pargs[0], args[1]), (pargs[1], args[0])], 0, k, _arg_label(name, (1, 0))))
                return self.seq(list(zip(pargs, args)), 0, k, _arg_label(name, range(len(args))))

            return self.visit(p.op, e.op, arguments)
        if t is ExprPattern:
            want = p.expr
            if isinstance(want, Op):
                if type(e) is Op and e.name == want.name:
                    return k()
                return self.fail(p, e, f"expected operator {want.name}, found {_kind(e)}")
            if e is not want:
                from ..structural import structural_equal

                if not structural_equal(e, want):
                    return self.fail(p, e, "not the given expression")
            return k()
        if t is ConstantPattern:
            return k() if type(e) is Constant else self.fail(p, e, f"expected a constant, found {_kind(e)}")
        if t is VarPattern:
            if type(e) is not Var:
                return self.fail(p, e, f"expected a variable, found {_kind(e)}")
            if p.name and e.name_hint != p.name:
                return self.fail(p, e, f"variable %{e.name_hint}, not %{p.name}")
            return k()
        if t is AltPattern:
            table = p.by_op
            if table is None:
                table = p.by_op = _op_table(p)
            if table and not self.explaining:
                return self._alt_op(table, p, e, k)
            return self.visit(p.left, e, k) or self.visit(p.right, e, k)
        if t is AttrPattern:
            return self.visit(p.pattern, e, lambda: self._attrs(p, e) and k())
        if t is DataTypePattern or t is ShapePattern or t is TypePattern:
            return self.visit(p.pattern, e, lambda: self._type(p, e) and k())
        if t is TuplePattern:
            if type(e) is not Tuple:
                return self.fail(p, e, f"expected a tuple, found {_kind(e)}")
            if p.fields is None:
                return k()
            if len(p.fields) != len(e.fields):
                return self.fail(p, e, f"expected {len(p.fields)} fields, found {len(e.fields)}")
            return self.seq(list(zip(p.fields, e.fields)), 0, k)
        if t is TupleGetItemPattern:
            if type(e) is not TupleGetItem:
                return self.fail(p, e, f"expected a tuple item, found {_kind(e)}")
            if p.index >= 0 and e.index != p.index:
                return self.fail(p, e, f"item {e.index}, wanted {p.index}")
            return self.visit(p.tuple, e.tuple_value, k)
        if t is DominatorPattern:
            return self.visit(p.child, e, lambda: self._dominates(p, e) and k())
        if t is IfPattern:
            if type(e) is not If:
                return self.fail(p, e, f"expected an if, found {_kind(e)}")
            return self.seq([(p.cond, e.cond), (p.true_branch, e.true_branch),
                             (p.false_branch, e.false_branch)], 0, k)
        if t is LetPattern:
            if type(e) is not Let:
                return self.fail(p, e, f"expected a let, found {_kind(e)}")
            return self.seq([(p.var, e.var), (p.value, e.value), (p.body, e.body)], 0, k)
        if t is FunctionPattern:
            if type(e) is not Function:
                return self.fail(p, e, f"expected a function, found {_kind(e)}")
            pairs = []
            if p.params is not None:
                if len(p.params) != len(e.params):
                    return self.fail(p, e, f"expected {len(p.params)} parameters, found {len(e.params)}")
                pairs = list(zip(p.params, e.params))
            return self.seq(pairs + [(p.body, e.body)], 0, k)
        raise IRError(f"unknown pattern node {p!r}")

    def _alt_op(self, table: dict, p: AltPattern, e: Expr, k: Callable[[], bool]) -> bool:
        """``p``, an alternation of bare operators, matched by one lookup of ``e``'s name
        instead of trying its alternatives in turn (a broadcasting rule's 30 operators
        cost 30 failed visits per call). The same as the general way: the one alternative
        that can match is visited, and the alternations on the way to it are bound to
        ``e`` while the rest of the match runs; one of those already bound (the same
        alternation used twice in the pattern) goes the general way."""
        entry = table.get(e.name) if type(e) is Op else None
        if entry is None:
            return False
        hit, path = entry
        memo = self.memo
        for q in path:
            if q in memo:
                return self.visit(p.left, e, k) or self.visit(p.right, e, k)
        for q in path:
            memo[q] = e
        if self.visit(hit, e, k):
            return True
        for q in path:
            del memo[q]
        return False

    def _attrs(self, p: AttrPattern, e: Expr) -> bool:
        attrs = e.attrs if type(e) in (Call, Function, Op) else None
        if attrs is None:
            return self.fail(p, e, f"{_kind(e)} has no attributes")
        for key, want in p.attrs.items():
            have = attrs.get(key, _MISSING) if hasattr(attrs, "get") else getattr(attrs, key, _MISSING)
            if have is _MISSING:
                return self.fail(p, e, f"no attribute {key!r}")
            if not _attr_equal(have, want):
                return self.fail(p, e, f"attribute {key}={have!r}, wanted {want!r}")
        return True

    def _type(self, p: DFPattern, e: Expr) -> bool:
        ty = _type_of(e)
        if ty is None:
            return self.fail(p, e, "the node has no type yet (set require_type or run InferType)")
        if type(p) is TypePattern:
            from ..structural import structural_equal

            return structural_equal(ty, p.type) or self.fail(p, e, f"type {ty}, wanted {p.type}")
        if not isinstance(ty, TensorType):
            return self.fail(p, e, f"type {ty} is not a tensor")
        if type(p) is DataTypePattern:
            return ty.dtype == p.dtype or self.fail(p, e, f"dtype {ty.dtype}, wanted {p.dtype}")
        shape = tuple(int(d) for d in ty.shape)
        return shape == p.shape or self.fail(p, e, f"shape {list(shape)}, wanted {list(p.shape)}")

    def _dominates(self, p: DominatorPattern, e: Expr) -> bool:
        """Walking up from ``e``'s inputs, every node either matches ``parent`` (the walk
        stops there; all such nodes must be one node) or matches ``path``."""
        stack = list(_inputs(e))
        seen: set = set()
        parent_hit = None
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if parent_hit is node or _Matcher().match(p.parent, node):
                if parent_hit is not None and parent_hit is not node:
                    return self.fail(p, e, "the paths reach more than one parent")
                parent_hit = node
                continue
            if not _Matcher().match(p.path, node):
                return self.fail(p, e, f"{_kind(node)} on a path to the parent does not match {p.path!r}")
            stack.extend(_inputs(node))
        if parent_hit is None:
            return self.fail(p, e, "no path reaches a node matching the parent")
        return self.visit(p.parent, parent_hit, _true)


def _true() -> bool:
    return True


def _op_table(p: AltPattern) -> Any:
    """For ``is_op("a") | is_op("b") | ...`` (alternatives that are all bare operator
    patterns, each name once): operator name -> (its pattern, the inner alternations on the
    way to it from ``p``); ``False`` for any other alternation."""
    table: dict = {}
    stack: list = [(p, ())]
    while stack:
        q, path = stack.pop()
        if type(q) is AltPattern:
            inner = path + (q,) if q is not p else path
            stack.append((q.right, inner))
            stack.append((q.left, inner))
        elif type(q) is ExprPattern and isinstance(q.expr, Op) and q.expr.name not in table:
            table[q.expr.name] = (q, path)
        else:
            return False
    return table


def _arg_label(op_name: str, order) -> Callable[[int], str]:
    order = tuple(order)
    return lambda i: f"arg {order[i]} of {op_name}"


class _Explainer(_Matcher):
    """A matcher that remembers where it was: every failure is recorded with the path of
    argument positions from the root (``arg 1 of add > arg 0 of multiply``), so the deepest
    one can be reported. Only :func:`explain` pays for this; matching does not."""

    __slots__ = ("path", "deepest")

    def __init__(self) -> None:
        super().__init__(explaining=True)
        self.path: tuple = ()
        self.deepest: tuple = (-1, (), None, None, "")

    def fail(self, pattern: DFPattern, expr: Expr, reason: str) -> bool:
        self.why.append((pattern, expr, reason))
        if len(self.path) > self.deepest[0]:
            self.deepest = (len(self.path), self.path, pattern, expr, reason)
        return False

    def visit(self, p: DFPattern, e: Expr, k: Callable[[], bool], label: str = "") -> bool:
        outer = self.path
        here = outer + (label,) if label else outer

        def resume() -> bool:  # the rest of the match runs at the parent's position
            inner = self.path
            self.path = outer
            try:
                return k()
            finally:
                self.path = inner

        self.path = here
        try:
            return _Matcher.visit(self, p, e, resume)
        finally:
            self.path = outer


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


def why_not(pattern: DFPattern, expr: Expr, names: Optional[dict] = None) -> str:
    """The one reason ``pattern`` does not match ``expr`` that got furthest: where (the
    argument positions from the root) and what was expected, in words, or ``""`` on a
    match. ``names`` maps nodes to their printed names (``%7``) to show what was found::

        arg 1 of multiply: expected a constant, found %7 = nn.conv2d(...)
    """
    m = _Explainer()
    if m.visit(pattern, expr, _true):
        return ""
    _, path, _, found, reason = m.deepest
    where = " > ".join(path) if path else "the root"
    if names and found is not None and found in names:
        reason = reason.rsplit(", found ", 1)[0] + f", found {names[found]}" if ", found " in reason else reason
    return f"{where}: {reason}"


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


def compile_simple(pattern: DFPattern) -> Optional[Callable[[Expr], Optional[dict]]]:
    """A matcher without backtracking for a pattern that has no choice points (no
    alternatives, no commutative operators, no dominator patterns): ``match(expr)``
    returns the bindings ``{pattern node: expr}`` or None. For other patterns, None: they
    need the backtracking :class:`_Matcher`. Both give the same answers where both apply."""
    flat = _flat_call(pattern)
    if flat is not None:
        return flat
    if not _is_simple(pattern):
        return None

    def visit(p: DFPattern, e: Expr, memo: dict) -> bool:
        bound = memo.get(p)
        if bound is not None:
            return bound is e
        t = type(p)
        if t is CallPattern:
            if type(e) is not Call:
                return False
            op = p.op.expr
            if type(e.op) is not Op or e.op.name != op.name:
                return False
            if p.args is not None:
                args = e.args
                if len(args) != len(p.args):
                    return False
                for pa, a in zip(p.args, args):
                    if not visit(pa, a, memo):
                        return False
        elif t is ConstantPattern:
            if type(e) is not Constant:
                return False
        elif t is VarPattern:
            if type(e) is not Var or (p.name and e.name_hint != p.name):
                return False
        elif t is ExprPattern:
            if e is not p.expr:
                from ..structural import structural_equal

                if not structural_equal(e, p.expr):
                    return False
        elif t is AttrPattern:
            if not visit(p.pattern, e, memo) or not _Matcher()._attrs(p, e):
                return False
        elif t is DataTypePattern or t is ShapePattern or t is TypePattern:
            if not visit(p.pattern, e, memo) or not _Matcher()._type(p, e):
                return False
        elif t is TupleGetItemPattern:
            if type(e) is not TupleGetItem or (p.index >= 0 and e.index != p.index):
                return False
            if not visit(p.tuple, e.tuple_value, memo):
                return False
        elif t is TuplePattern:
            if type(e) is not Tuple:
                return False
            if p.fields is not None:
                if len(p.fields) != len(e.fields):
                    return False
                for pf, f in zip(p.fields, e.fields):
                    if not visit(pf, f, memo):
                        return False
        elif t is not WildcardPattern:
            return False
        memo[p] = e
        return True

    def match(expr: Expr) -> Optional[dict]:
        memo: dict = {}
        return memo if visit(pattern, expr, memo) else None

    return match


def _flat_call(pattern: DFPattern) -> Optional[Callable[[Expr], Optional[dict]]]:
    """The matcher of ``is_op(name)(w1, ..., wn)`` (or ``(is_op(a) | is_op(b))(...)``) with
    distinct bare wildcards, a rule that reads its operands itself: a type, callee and
    arity test, then the bindings. The choices the general matcher has here (a commutative
    operator's argument order) cannot fail, so its first answer is this one."""
    if type(pattern) is not CallPattern or pattern.args is None:
        return None
    names = _op_names(pattern.op)
    args = tuple(pattern.args)
    if names is None or not all(type(a) is WildcardPattern for a in args) or len(set(map(id, args))) != len(args):
        return None
    ops = frozenset(Op.get(name) for name in names)
    n = len(args)
    _Call = Call

    def match(expr: Expr) -> Optional[dict]:
        if type(expr) is not _Call or expr.op not in ops or len(expr.args) != n:
            return None
        memo = dict(zip(args, expr.args))
        memo[pattern] = expr
        return memo

    return match


def _is_simple(pattern: DFPattern) -> bool:
    stack, seen = [pattern], set()
    while stack:
        p = stack.pop()
        if id(p) in seen:
            continue
        seen.add(id(p))
        t = type(p)
        if t is CallPattern:
            if type(p.op) is not ExprPattern or not isinstance(p.op.expr, Op) or p.op.expr.name in COMMUTATIVE:
                return False
            stack.extend(p.args or ())
        elif t in (AttrPattern, DataTypePattern, ShapePattern, TypePattern):
            stack.append(p.pattern)
        elif t is TupleGetItemPattern:
            stack.append(p.tuple)
        elif t is TuplePattern:
            stack.extend(p.fields or ())
        elif t not in (WildcardPattern, ConstantPattern, VarPattern, ExprPattern):
            return False
        elif t is ExprPattern and isinstance(p.expr, Op):
            return False  # a bare operator as a value: leave it to the general matcher
    return True


class _Shared(Exception):
    """A pattern node met twice: the pattern is not linear."""


def compile_linear(pattern: DFPattern) -> Optional[Callable[[Expr, list], bool]]:
    """A matcher without continuations for a *linear* pattern, one in which no node appears
    twice (so no binding constrains another), made of calls of named operators, alternatives,
    wildcards, variables, constants, tuples, their items, and attribute and type tests:
    ``match(expr, out) -> bool``, adding to ``out`` a ``(pattern node, node)`` pair for each
    wildcard, variable, call, tuple and item matched. Alternatives and a commutative call's
    two orders are tried in turn, a failed try's pairs dropped; since the parts of a linear
    pattern match independently, the first try that succeeds is the one the backtracking
    :class:`_Matcher` takes. ``None`` for any other pattern::

        add(multiply(x, c), b)   linear: one test per node, the add's two orders in turn
        multiply(x, tanh(x))     not linear (``x`` twice): the backtracking matcher's
    """
    try:
        return _linear(pattern, set())
    except _Shared:
        return None


def _linear(p: DFPattern, seen: set) -> Optional[Callable[[Expr, list], bool]]:  # noqa: C901 - one dispatch
    if id(p) in seen:
        raise _Shared
    seen.add(id(p))
    t = type(p)
    if t is WildcardPattern:
        return lambda e, out: out.append((p, e)) is None
    if t is ConstantPattern:
        return lambda e, out: type(e) is Constant
    if t is VarPattern:
        name = p.name
        return lambda e, out: type(e) is Var and (not name or e.name_hint == name) and out.append((p, e)) is None
    if t is AltPattern:
        left, right = _linear(p.left, seen), _linear(p.right, seen)
        if left is None or right is None:
            return None

        def alt(e: Expr, out: list) -> bool:
            n = len(out)
            if left(e, out):
                return True
            del out[n:]
            return right(e, out)

        return alt
    if t in (AttrPattern, DataTypePattern, ShapePattern, TypePattern):
        inner = _linear(p.pattern, seen)
        test = _Matcher()._attrs if t is AttrPattern else _Matcher()._type
        return None if inner is None else (lambda e, out: inner(e, out) and test(p, e))
    if t is CallPattern:
        return _linear_call(p, seen)
    if t is TupleGetItemPattern:
        inner = _linear(p.tuple, seen)
        index = p.index
        return None if inner is None else (lambda e, out: type(e) is TupleGetItem and (index < 0 or e.index == index)
                                           and inner(e.tuple_value, out) and out.append((p, e)) is None)
    return None


def _linear_call(p: CallPattern, seen: set) -> Optional[Callable[[Expr, list], bool]]:
    names = _op_names(p.op)
    if names is None:
        return None
    seen.add(id(p.op))
    args = None if p.args is None else [_linear(a, seen) for a in p.args]
    if args is not None and any(a is None for a in args):
        return None
    may_swap = args is not None and len(args) == 2 and bool(names & COMMUTATIVE)
    _Call, _Op = Call, Op

    def call(e: Expr, out: list) -> bool:
        if type(e) is not _Call or type(e.op) is not _Op or e.op.name not in names:
            return False
        if args is not None:
            given = e.args
            if len(given) != len(args):
                return False
            n = len(out)
            if not all(a(x, out) for a, x in zip(args, given)):
                del out[n:]
                if not (may_swap and e.op.name in COMMUTATIVE and args[0](given[1], out) and args[1](given[0], out)):
                    del out[n:]
                    return False
        out.append((p, e))
        return True

    return call
