"""ToANormalForm: bind every non-atomic sub-expression with ``let`` (TVM's ``to_a_normal_form.cc``).

1. **Scopes.** The function body, each ``if`` branch and each nested (non-primitive)
   function body is a scope. Every sub-expression is placed in the **lowest common
   ancestor scope of all its uses**: a shared value used only inside one branch is bound
   in that branch, one used by both branches is hoisted above the ``if``.
2. **Binding.** Calls, tuples, tuple projections, ``if``\\ s, nested non-primitive
   functions and constants are bound to fresh variables ``x_<N>`` (one process-wide
   counter, like TVM's ``Var::GenSym``) in their scope, in evaluation order (arguments
   left to right, then the callee). Variables, globals and operators are atomic;
   primitive functions are kept as they are. An existing ``let`` keeps its variable for
   its (converted) value. A scope's result is bound too and the scope ends in that
   variable; a shared sub-expression is bound once and then referenced.

Scopes are computed in one reverse post-order sweep (each node's scope is the LCA of
the scopes its users propose) and the bindings are emitted with an explicit stack, so
the pass is linear and a 100,000-deep chain works at the default recursion limit.

Before::

    def @main(%x: Tensor[(3), float32], %c: bool) {
      %0 = add(%x, 1f);
      if (%c) { multiply(%0, %0) } else { %x }
    }

After ``ToANormalForm()``::

    def @main(%x: Tensor[(3), float32], %c: bool) {
      let %x_0 = 1f;
      let %x_1 = add(%x, %x_0);
      let %x_3 = if (%c) {
        let %x_2 = multiply(%x_1, %x_1);
        %x_2
      } else {
        %x
      };
      %x_3
    }
"""
from __future__ import annotations

import itertools
from typing import Any, Optional

from passhost.errors import PassError
from passhost.ir import (
    Call,
    Constant,
    Expr,
    Function,
    GlobalVar,
    If,
    IRModule,
    Let,
    Op,
    Tuple,
    TupleGetItem,
    Var,
    is_primitive,
    post_order,
)
from passhost.ir import paused_gc as _gc_paused
from passhost.transform import module_pass

__all__ = ["fresh_var", "is_primitive", "to_a_normal_form_function", "to_a_normal_form", "ToANormalForm"]

_COUNTER = itertools.count()

#: atoms: used directly, never bound (unless they are a ``let``'s value)
_ATOMS = (Var, Op, GlobalVar)


def fresh_var(type_annotation: Any = None) -> Var:
    """A fresh variable ``x_<N>`` (process-wide counter, as TVM's ``Var::GenSym``)."""
    return Var(f"x_{next(_COUNTER)}", type_annotation)


class _Scope:
    __slots__ = ("parent", "depth", "lets")

    def __init__(self, parent: Optional["_Scope"]) -> None:
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.lets: list = []

    def get(self, result: Expr) -> Expr:
        """The scope as an expression: its bindings around ``result``."""
        expr = result
        for var, value in reversed(self.lets):
            expr = Let(var, value, expr)
        return expr


def _lca(a: _Scope, b: _Scope) -> _Scope:
    while a.depth > b.depth:
        a = a.parent
    while b.depth > a.depth:
        b = b.parent
    while a is not b:
        a = a.parent
        b = b.parent
    return a


def _compute_scopes(body: Expr, root: _Scope) -> tuple:
    """``({node: scope}, {(node, i): sub-scope})`` for every node under ``body``."""
    order = post_order(body, skip=is_primitive)
    scope: dict = {body: root}
    subs: dict = {}
    for i in range(len(order) - 1, -1, -1):
        node = order[i]
        t = type(node)
        if t in _ATOMS or t is Constant or is_primitive(node):
            continue
        s = scope[node]
        if t is If:
            kids = ((node.cond, s), (node.true_branch, subs.setdefault((node, 1), _Scope(s))),
                    (node.false_branch, subs.setdefault((node, 2), _Scope(s))))
        elif t is Function:
            kids = ((node.body, subs.setdefault((node, 0), _Scope(s))),)
        elif t is Call:
            kids = [(a, s) for a in node.args]
            kids.append((node.op, s))
        elif t is Tuple:
            kids = [(f, s) for f in node.fields]
        elif t is TupleGetItem:
            kids = ((node.tuple_value, s),)
        elif t is Let:
            kids = ((node.value, s), (node.body, s))
        else:  # pragma: no cover - every node kind is handled above
            raise PassError(f"ToANormalForm: unknown node kind {t.__name__}", "ToANormalForm")
        for kid, ks in kids:
            tk = type(kid)
            if tk is Var or tk is Op or tk is GlobalVar:
                continue
            old = scope.get(kid)
            scope[kid] = ks if old is None or old is ks else _lca(old, ks)
    return scope, subs


def to_a_normal_form_function(func: Function) -> Function:
    """``func`` in A-normal form (primitive functions are returned unchanged)."""
    if is_primitive(func):
        return func
    with _gc_paused():
        root = _Scope(None)
        scope, subs = _compute_scopes(func.body, root)
        memo: dict = {}
        scope_of_let: dict = {}

        def atom(e: Expr) -> Expr:
            t = type(e)
            if t is Var or t is Op or t is GlobalVar or is_primitive(e):
                return e
            return memo[e]

        # tasks: (node, let var or None, stage); stage 0 = enter, 1 = build
        stack: list = [(func.body, None, 0)]
        push = stack.append
        while stack:
            node, v, stage = stack.pop()
            t = type(node)
            if stage == 0:
                if t is Var or t is Op or t is GlobalVar or is_primitive(node) or node in memo:
                    if v is not None:
                        s = scope.get(node) or scope_of_let[v]
                        s.lets.append((v, atom(node)))
                    continue
                push((node, v, 1))
                if t is Call:
                    push((node.op, None, 0))
                    for a in reversed(node.args):
                        push((a, None, 0))
                elif t is Tuple:
                    for f in reversed(node.fields):
                        push((f, None, 0))
                elif t is TupleGetItem:
                    push((node.tuple_value, None, 0))
                elif t is If:
                    push((node.false_branch, None, 0))
                    push((node.true_branch, None, 0))
                    push((node.cond, None, 0))
                elif t is Function:
                    push((node.body, None, 0))
                elif t is Let:
                    scope_of_let[node.var] = scope[node]
                    push((node.body, None, 0))
                    push((node.value, node.var, 0))
                continue
            # stage 1: children done
            if t is Let:
                result = atom(node.body)
                memo[node] = result
                if v is not None:
                    scope[node].lets.append((v, result))
                continue
            if t is Call:
                op = atom(node.op)
                new: Expr = Call(op, [atom(a) for a in node.args],
                                 node.attrs if type(op) is type(node.op) else None)
            elif t is Constant:
                new = node
            elif t is Tuple:
                new = Tuple([atom(f) for f in node.fields])
            elif t is TupleGetItem:
                new = TupleGetItem(atom(node.tuple_value), node.index)
            elif t is If:
                new = If(atom(node.cond), subs[(node, 1)].get(atom(node.true_branch)),
                         subs[(node, 2)].get(atom(node.false_branch)))
            elif t is Function:
                new = Function(node.params, subs[(node, 0)].get(atom(node.body)), node.ret_type, node.attrs)
            else:  # pragma: no cover - every node kind is handled above
                raise PassError(f"ToANormalForm: unknown node kind {t.__name__}", "ToANormalForm")
            var = v if v is not None else fresh_var()
            scope[node].lets.append((var, new))
            memo[node] = var
        return Function(func.params, root.get(atom(func.body)), func.ret_type, func.attrs)


def to_a_normal_form(mod: IRModule) -> IRModule:
    """Every function of ``mod`` (except ``Compiler`` and primitive ones) in A-normal form."""
    out = mod.copy()
    for gv, func in mod.items():
        if type(func) is Function and not func.attrs.get("Compiler"):
            out[gv] = to_a_normal_form_function(func)
    return out


@module_pass(opt_level=1, name="ToANormalForm")
class ToANormalForm:
    """Bind every non-atomic sub-expression to a ``let`` variable, each in the lowest
    scope that covers all its uses.

    Module pass, ``opt_level`` 1. Before / after::

        %0 = add(%x, 1f);           |  let %x_0 = 1f;
        multiply(%0, %0)            |  let %x_1 = add(%x, %x_0);
                                    |  let %x_2 = multiply(%x_1, %x_1);
                                    |  %x_2
    """

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        return to_a_normal_form(mod)
