"""DeadCodeElimination as one rule: the pass's reference semantics, in a reader's words
(:mod:`.dead_code_elimination` with :mod:`.uses` is the same pass as a hand-fused walk, the
one that runs; a property test holds the two to structurally equal results).

Bottom-up (:func:`passhost.ir.rewrite_post_order`), so that a dead binding inside a value
is gone before the value's own binding is judged, each ``let %v = value; body`` whose value
is pure (:class:`.purity.Purity`) is

* ``body``, when ``%v`` is not used in ``body``;
* with ``inline_once``: ``body`` with ``value`` for ``%v``, when ``%v`` is used once, and
  not inside a nested function (which may run many times)::

    let %a = add(%x, 1f);  let %b = multiply(%a, 2f);  negative(%x)   ->  negative(%x)

One difference, on purpose: the loop walks a shared node at most twice from the function's
root, so a binding inside a closure that is called twice counts its one use twice and is not
inlined there; this rule counts within the binding's own body and inlines it. Both compute
the same; the property test holds them to structural equality without ``inline_once`` and to
equal values (and no fewer bindings removed) with it.
"""
from __future__ import annotations

from passhost import ir
from passhost.ir import Function, Let, Var

from .purity import Purity

__all__ = ["dce_rules", "uses_of"]


def uses_of(var: Var, body: ir.Expr) -> int:
    """How often ``body`` uses ``var``: 0, 1 or 2 (= more than once, or inside a nested
    function); each shared node is counted at most twice (only 0 / 1 / many matters)."""
    count = 0
    seen: dict = {}
    stack = [(body, 1)]
    while stack:
        node, weight = stack.pop()
        if node is var:
            count += weight
            if count >= 2:
                return 2
            continue
        n = seen.get(node, 0)
        if n >= 2:
            continue
        seen[node] = n + 1
        inner = 2 if type(node) is Function else weight
        stack.extend((k, inner) for k in ir.children(node))
    return count


def dce_rules(func: Function, purity: Purity = None, inline_once: bool = False) -> Function:
    """``func`` with its dead pure bindings removed (and, with ``inline_once``, its single
    uses inlined); see the module docstring."""
    purity = purity or Purity()
    for node in ir.post_order(func):  # a call of a let-bound function is as pure as its body
        if type(node) is Let:
            purity.register_let(node)

    def rule(node):
        if type(node) is not Let or not purity.is_pure(node.value):
            return None
        n = uses_of(node.var, node.body)
        if n == 0:
            return node.body
        if n == 1 and inline_once:
            return ir.rewrite_post_order(node.body, None, memo={node.var: node.value})
        return None

    return ir.rewrite_post_order(func, rule, only=frozenset({Let}))
