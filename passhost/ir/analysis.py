"""Small analyses over expressions: free variables, bound variables, op counts, which
operators are called, fused kernels, and whether a pass changed a module."""
from __future__ import annotations

from .expr import Call, Constant, Expr, Function, GlobalVar, Let, Var
from .module import IRModule
from .op import Op
from .structural import structural_hash
from .visitor import children, post_order

__all__ = ["free_vars", "bound_vars", "all_vars", "count_ops", "calls_any", "is_primitive", "module_changed"]


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
    further work; otherwise :func:`~passhost.ir.structural_hash` decides."""
    if before is after:
        return False
    b, a = dict(before.items()), dict(after.items())
    if b.keys() == a.keys() and all(a[k] is f for k, f in b.items()):
        return False
    return structural_hash(before) != structural_hash(after)


_LEAVES = (Var, Constant, Op, GlobalVar)


def calls_any(root: Expr, ops: frozenset) -> bool:
    """Does any node reachable from ``root`` (callees and nested functions included)
    call one of the operators in ``ops``? One cheap unordered walk with an explicit
    stack, stopping at the first hit — so a pass can return its input untouched when it
    has nothing to act on."""
    seen: set = set()
    add = seen.add
    stack = [root]
    pop = stack.pop
    push = stack.append
    extend = stack.extend
    _Call, leaves = Call, _LEAVES
    while stack:
        node = pop()
        if node in seen:
            continue
        add(node)
        t = type(node)
        if t is _Call:
            op = node.op
            if op in ops:
                return True
            if type(op) is not Op:
                push(op)
            extend(node.args)
        elif t not in leaves:
            extend(children(node))
    return False
