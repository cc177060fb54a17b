"""Traversals: post-order walks, TVM-style visitors and mutators.

Nothing here recurses per node: every walk keeps its own explicit stack, so a
100,000-deep chain works at Python's default recursion limit.

Two styles are offered:

* :class:`ExprVisitor` / :class:`ExprMutator` — TVM's style. Override
  ``visit_call`` etc. and call ``self.visit(child)`` inside. Before a node's
  ``visit_*`` runs, all of its children have already been visited (an explicit
  post-order pre-pass), so ``self.visit(child)`` only reads the memo and never
  recurses. Exception: when a subclass overrides ``visit_function``, the body of
  a function is visited when that override calls ``self.visit(fn.body)``, so any
  state it sets up first is in effect for the body.
* :func:`~passhost.ir.rewrite_post_order` (the rewrite engine, :mod:`passhost.ir.rewrite`) — the fast functional
  style the built-in passes use: a callback receives each node with its children already
  rewritten (and, on request, the original node too, with the replacements typed like
  the originals).
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional

from ._gc import gc_paused
from .expr import CHILDREN_OF as _CHILDREN_OF
from .expr import Call, Constant, Expr, Function, GlobalVar, If, Let, Tuple, TupleGetItem, Var, set_span
from .expr import rebuild as _rebuild
from .op import Op

__all__ = [
    "children",
    "keep_checked_type",
    "post_order",
    "post_order_visit",
    "with_children",
    "ExprVisitor",
    "ExprMutator",
    "ExprFunctor",
]


def children(node: Expr) -> tuple:
    """The direct sub-expressions of ``node`` in canonical (evaluation) order, as its
    class's ``FIELDS`` list them:

    Call: callee, args; Function: params, body; Let: var, value, body;
    If: cond, then, else; Tuple: fields; TupleGetItem: tuple. Leaves: ``()``.
    """
    return _CHILDREN_OF[type(node)](node)


def keep_checked_type(old: Expr, new: Expr, kids: Optional[Iterable[Expr]] = None) -> Expr:
    """Give ``new``, a rebuild of ``old``, the ``checked_type`` of ``old`` when ``new`` has
    none yet and every child in ``kids`` (default: ``children(new)``) is typed or an
    ``Op`` — as TVM's copy-on-write rebuild keeps ``checked_type`` — so type inference
    afterwards only has to type genuinely new nodes. Returns ``new``.

    For type-preserving rewrites (constant folding, CSE, dead-code elimination) that
    rebuild a node because a child was replaced by an equally typed one.
    """
    ty = old._checked_type
    if ty is not None and new._checked_type is None:
        for k in children(new) if kids is None else kids:
            if k._checked_type is None and type(k) is not Op:
                return new
        new._set_checked_type(ty)
    return new


#: post_order's stack marker: the entry below it is a node whose children are all listed
_FIN = object()


@gc_paused
def post_order(root: Expr, skip: Optional[Callable[[Expr], bool]] = None,
               visited: Optional[set] = None) -> list:
    """Every node reachable from ``root``, each once, children before parents,
    siblings left to right.

    :param skip: nodes for which ``skip(node)`` is true are listed but their
        children are not entered
    :param visited: nodes to treat as already walked (not listed, not entered);
        the set is updated in place
    """
    # One explicit stack of bare nodes: a node is entered (marked seen, its children
    # pushed above it) when first popped, and listed when the _FIN marker pushed above
    # it comes back to the top. No tuple per entry, one set operation per node; leaves
    # are listed as soon as they are popped.
    order: list = []
    append = order.append
    seen = set() if visited is None else visited
    add = seen.add
    stack = [root]
    push = stack.append
    pop = stack.pop
    FIN = _FIN
    _Call, _Var, _Constant, _Op, _Let, _TGI = Call, Var, Constant, Op, Let, TupleGetItem
    children_of = _CHILDREN_OF
    push_all = stack.extend
    while stack:
        node = pop()
        if node is FIN:
            append(pop())
            continue
        if node in seen:
            continue
        add(node)
        t = type(node)
        if t is _Var or t is _Constant or t is _Op:
            append(node)
            continue
        if skip is not None and skip(node):
            append(node)
            continue
        push(node)
        push(FIN)
        if t is _Call:
            args = node.args
            if len(args) == 2:
                a, b = args
                if b not in seen:
                    push(b)
                if a not in seen:
                    push(a)
            else:
                for i in range(len(args) - 1, -1, -1):
                    a = args[i]
                    if a not in seen:
                        push(a)
            op = node.op
            if op not in seen:
                push(op)
        elif t is _Let:  # (unrolled: let chains are long)
            push(node.body)
            push(node.value)
            push(node.var)
        elif t is _TGI:  # (unrolled: every batch_norm and split is read through one)
            push(node.tuple_value)
        else:
            push_all(children_of[t](node)[::-1])
    return order


def post_order_visit(expr: Expr, fn: Callable[[Expr], object]) -> None:
    """Call ``fn(node)`` on every node reachable from ``expr`` (operators and
    variables included), each once, in post-order — TVM's ``post_order_visit``."""
    for node in post_order(expr):
        fn(node)


def with_children(node: Expr, new: tuple) -> Expr:
    """``node`` rebuilt with the children ``new`` (same order as :func:`children`).
    Returns ``node`` itself when nothing changed, so unchanged sub-graphs keep their
    identity (and their inferred types); a rebuilt node keeps ``node``'s source span."""
    out = _rebuilt(node, new if type(new) is tuple else tuple(new))
    if out is not node:
        span = node.span
        if span is not None:
            set_span(out, span)
    return out


def _rebuilt(node: Expr, new: tuple) -> Expr:
    t = type(node)
    if t is Call:
        op = new[0]
        args = new[1:]
        if op is node.op and all(a is b for a, b in zip(args, node.args)):
            return node
        return Call(op, args, node.attrs if type(op) is type(node.op) else None)
    if _CHILDREN_OF[t](node) == new:  # element by element: identity first, and Expr == is identity
        return node
    return _rebuild(node, new)


class ExprFunctor:
    """Dispatch on node type to ``visit_<kind>`` methods, memoised per node."""

    _DISPATCH = {
        Var: "visit_var",
        Constant: "visit_constant",
        Call: "visit_call",
        Function: "visit_function",
        Tuple: "visit_tuple",
        TupleGetItem: "visit_tuple_getitem",
        Let: "visit_let",
        If: "visit_if",
        GlobalVar: "visit_global_var",
        Op: "visit_op",
    }

    def __init__(self) -> None:
        self.memo_map: dict = {}

    def _function_is_barrier(self) -> bool:
        base = ExprMutator if isinstance(self, ExprMutator) else ExprVisitor
        return type(self).visit_function is not getattr(base, "visit_function", None)

    def visit(self, expr: Expr):
        """Visit ``expr`` (memoised: each node is visited once)."""
        memo = self.memo_map
        try:
            return memo[expr]
        except KeyError:
            pass
        except TypeError:
            raise TypeError(f"visit() needs an IR expression, got {type(expr).__name__}") from None
        dispatch = self._DISPATCH
        skip = (lambda n: type(n) is Function) if self._function_is_barrier() else None
        for node in post_order(expr, skip=skip, visited=set(memo)):
            if node in memo:
                continue
            if skip is not None and type(node) is Function and node is not expr:
                # visited later, when the enclosing node's visitor asks for it
                continue
            try:
                name = dispatch[type(node)]
            except KeyError:
                raise TypeError(f"cannot visit {type(node).__name__}") from None
            memo[node] = getattr(self, name)(node)
        if expr not in memo:  # a function reached only through a barrier
            memo[expr] = getattr(self, dispatch[type(expr)])(expr)
        return memo[expr]


class ExprVisitor(ExprFunctor):
    """Visit every node once. Override ``visit_<kind>`` to act on nodes.

    The default methods visit children (memo hits when entered through :meth:`visit`).
    """

    def visit_var(self, var: Var) -> None:
        return None

    def visit_constant(self, const: Constant) -> None:
        return None

    def visit_global_var(self, gv: GlobalVar) -> None:
        return None

    def visit_op(self, op: Op) -> None:
        return None

    def visit_children(self, node: Expr) -> None:
        """Visit the children of ``node`` in order (what every interior default does)."""
        for c in children(node):
            self.visit(c)

    visit_call = visit_tuple = visit_tuple_getitem = visit_function = visit_let = visit_if = visit_children


class ExprMutator(ExprFunctor):
    """Rebuild an expression; override ``visit_<kind>`` to replace nodes.

    Default methods rebuild a node from its visited children and return the very
    same node when no child changed, so unchanged sub-graphs keep their identity.
    """

    def visit_var(self, var: Var) -> Expr:
        return var

    def visit_constant(self, const: Constant) -> Expr:
        return const

    def visit_global_var(self, gv: GlobalVar) -> Expr:
        return gv

    def visit_op(self, op: Op) -> Expr:
        return op

    def visit_children(self, node: Expr) -> Expr:
        """``node`` rebuilt from its visited children (itself when none changed; a rebuilt
        node keeps its span): what every interior default does."""
        return with_children(node, tuple([self.visit(c) for c in children(node)]))

    visit_call = visit_tuple = visit_tuple_getitem = visit_function = visit_let = visit_if = visit_children


def __getattr__(name: str):
    # ``passhost.ir.visitor.rewrite_post_order`` is where the driver used to live; it is
    # in the rewrite engine now (which builds on this module), and found here on first use
    if name == "rewrite_post_order":
        from .rewrite import rewrite_post_order

        return rewrite_post_order
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
