"""Small analyses over expressions: free variables, bound variables, op counts, which
operators are called, fused kernels, and whether a pass changed a module."""
from __future__ import annotations

from typing import Optional

from ..errors import IRError
from ._gc import paused
from .expr import Call, Constant, Expr, Function, Let, Var
from .facts import CALLED_OPS, OPS_EVER_CALLED
from .module import IRModule
from .op import Op
from .structural import structural_hash
from .visitor import children, post_order

__all__ = ["free_vars", "bound_vars", "all_vars", "count_ops", "calls_any", "called_ops", "contains_any", "is_primitive",
           "module_changed"]


def bound_vars(expr: Expr) -> list:
    """Variables bound inside ``expr`` (function parameters and let variables), in
    post-order of their binders."""
    out: list = []
    seen: set = set()
    for node in post_order(expr):
        t = type(node)
        if t is Function:
            for p in node.params:
                if p not in seen:
                    seen.add(p)
                    out.append(p)
        elif t is Let:
            if node.var not in seen:
                seen.add(node.var)
                out.append(node.var)
    return out


def all_vars(expr: Expr) -> list:
    """Every variable reachable from ``expr``, in post-order."""
    return [n for n in post_order(expr) if type(n) is Var]


def free_vars(expr: Expr) -> list:
    """Variables used in ``expr`` but not bound in it, in order of first occurrence
    in a left-to-right depth-first walk (TVM's ``relay.analysis.free_vars``)."""
    bound = set(bound_vars(expr))
    return [v for v in all_vars(expr) if v not in bound]


def count_ops(expr: Expr) -> dict:
    """``{op_name: number of calls}`` over every call reachable from ``expr``."""
    counts: dict = {}
    for node in post_order(expr):
        if type(node) is Call and type(node.op) is Op:
            name = node.op.name
            counts[name] = counts.get(name, 0) + 1
    return counts


def is_primitive(expr: Expr) -> bool:
    """Whether ``expr`` is a function marked ``Primitive`` (non-zero): a fused kernel,
    which graph-level passes keep as it is (use it as ``post_order(..., skip=is_primitive)``)."""
    return type(expr) is Function and bool(expr.attrs.get("Primitive", 0))


def module_changed(before: IRModule, after: IRModule) -> bool:
    """Whether ``after`` differs from ``before`` (e.g. the module a pass returned): the same
    module object, or a module holding the same function objects, is unchanged without
    further work; otherwise the structural hashes, and then the sharing, decide. Two graphs
    that print the same tree but share differently differ: merging duplicate
    ``exp(%x)`` calls into one (what EliminateCommonSubexpr does) is a change::

        before: add(exp(%x), exp(%x))      after: %0 = exp(%x); add(%0, %0)     -> changed
    """
    if before is after:
        return False
    b, a = dict(before.items()), dict(after.items())
    if b.keys() == a.keys() and all(a[k] is f for k, f in b.items()):
        return False
    if structural_hash(before) != structural_hash(after):
        return True
    by_name = {gv.name_hint: f for gv, f in a.items()}
    return any(f is not by_name.get(gv.name_hint) and not _same_sharing(f, by_name.get(gv.name_hint))
               for gv, f in b.items())


def _same_sharing(x: Expr, y: Optional[Expr]) -> bool:
    """For two graphs whose trees are equal: is there a node-for-node match that keeps every
    edge? Their distinct nodes, in post order, must pair up one to one. Constants and
    operators are leaves whose copies mean nothing (a printed and re-parsed ``2f`` is a new
    object per use), so they are left out."""
    if y is None:
        return False
    ox = [n for n in post_order(x) if type(n) not in _LEAVES]
    oy = [n for n in post_order(y) if type(n) not in _LEAVES]
    if len(ox) != len(oy):
        return False
    m = dict(zip(ox, oy))
    for p, q in zip(ox, oy):
        if type(p) is not type(q):
            return False
        kp, kq = children(p), children(q)
        if len(kp) != len(kq):
            return False
        for c, d in zip(kp, kq):
            if type(c) in _LEAVES:
                if type(d) is not type(c):
                    return False
            elif m.get(c) is not d:
                return False
    return True


_LEAVES = (Constant, Op)


def calls_any(root: Expr, ops: frozenset) -> bool:
    """Does any node reachable from ``root`` (callees and nested functions included)
    call one of the operators in ``ops``? One cheap unordered walk with an explicit
    stack, stopping at the first hit -- so a pass can return its input untouched when it
    has nothing to act on. Operators no :class:`Call` of this process was ever built with
    need no walk at all (``facts.OPS_EVER_CALLED``).

    When ``root`` is a :class:`Function` and the walk finds no hit, it has seen every
    operator the function calls; that set is remembered (weakly, per function object), so
    any later question about the same function -- from the next pass, for other
    operators -- is answered without a walk.
    """
    if ops.isdisjoint(OPS_EVER_CALLED):
        return False  # no call of these operators was ever built, so none is reachable
    if type(root) is Function:
        known = CALLED_OPS.get(root)
        if known is not None:
            return not known.isdisjoint(ops)
    found = _walk_ops(root, ops)
    if found is None:
        return True
    if type(root) is Function:
        CALLED_OPS[root] = found
    return False


def contains_any(root: Expr, classes: frozenset) -> bool:
    """Is any node reachable from ``root`` (callees, nested functions and ``If`` branches
    included) an instance of one of the node ``classes`` (``Let``, ``If``, ...)? One
    unordered walk with an explicit stack, each node pushed once, stopping at the first
    such node -- so a pass with nothing to act on can return its input untouched::

        contains_any(fn, frozenset({ir.Let}))   # DeadCodeElimination: a let to remove?

    It is its own loop rather than :func:`calls_any`'s with a class test added: collecting
    the operators on the way made the let-free case of DeadCodeElimination 1.7x slower
    on a 100k chain.
    """
    if Op in classes:
        raise IRError("contains_any looks for node classes; ask for operators with calls_any")
    kinds = frozenset(classes)
    seen: set = set()
    add = seen.add
    stack = [root]
    pop = stack.pop
    push = stack.append
    _Call, _Op = Call, Op
    leaves = (Var, Constant, Op)
    while stack:
        node = pop()
        t = type(node)
        if t in kinds:
            return True
        if t is _Call:
            op = node.op
            if type(op) is not _Op and op not in seen:
                add(op)
                push(op)
            args = node.args
            if len(args) == 2:
                a, b = args
                if a not in seen:
                    add(a)
                    push(a)
                if b not in seen:
                    add(b)
                    push(b)
            else:
                for a in args:
                    if a not in seen:
                        add(a)
                        push(a)
        elif t in leaves:
            continue
        else:
            for a in children(node):
                if a not in seen:
                    add(a)
                    push(a)
    return False


def called_ops(fn: Function) -> frozenset:
    """Every operator called anywhere under the function ``fn`` (remembered per function,
    as :func:`calls_any` does)."""
    known = CALLED_OPS.get(fn)
    if known is None:
        known = CALLED_OPS[fn] = _walk_ops(fn, frozenset())
    return known


def _walk_ops(root: Expr, stop: frozenset):
    """The operators called under ``root`` as a frozenset, or ``None`` as soon as one of
    ``stop`` is found. Each node is marked seen when it is first pushed, so a node shared
    by many consumers (and every variable and constant) is pushed once."""
    found: set = set()
    fadd = found.add
    seen = {root}
    add = seen.add
    stack = [root]
    pop = stack.pop
    push = stack.append
    _Call, _Op, _Var, _Constant = Call, Op, Var, Constant
    with paused():
        while stack:
            node = pop()
            t = type(node)
            if t is _Call:
                op = node.op
                if type(op) is _Op:
                    if op not in found:
                        if op in stop:
                            return None
                        fadd(op)
                elif op not in seen:
                    add(op)
                    push(op)
                args = node.args
                if len(args) == 2:
                    a, b = args
                    if a not in seen:
                        add(a)
                        push(a)
                    if b not in seen:
                        add(b)
                        push(b)
                else:
                    for a in args:
                        if a not in seen:
                            add(a)
                            push(a)
            elif t is not _Var and t is not _Constant:
                for c in children(node):
                    if c not in seen:
                        add(c)
                        push(c)
    return frozenset(found)
