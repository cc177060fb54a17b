"""DeadCodeElimination as one rule: the pass's reference semantics, in a reader's words
(:mod:`.dead_code_elimination` is the same pass as one count of the live uses and one
rewrite, the one that runs; a property test holds the two to structurally equal results).

Bottom-up (a rule table over the rewrite engine's walk, :mod:`passhost.ir.rewrite`), so that
a dead binding inside a value is gone before the value's own binding is judged, each
``let %v = value; body`` whose value is pure (:class:`.purity.Purity`) is

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
from passhost.ir.rewrite import RuleTable, binding_uses, walk

from .purity import Purity

__all__ = ["dce_rules", "uses_of"]


def uses_of(var: Var, body: ir.Expr) -> int:
    """How often ``body`` uses ``var``: 0, 1 or 2 (= more than once, or inside a nested
    function), asked of the host's use analysis (a use inside a node shared by two parents
    counts twice: only 0 / 1 / many matters)."""
    return binding_uses(Let(var, _NOTHING, body), dead=lambda value: False).get(var, 0)


_NOTHING = ir.Tuple([])  # a value that uses nothing, to bind ``var`` over ``body`` with


def dce_rules(func: Function, purity: Purity = None, inline_once: bool = False) -> Function:
    """``func`` with its dead pure bindings removed (and, with ``inline_once``, its single
    uses inlined); see the module docstring."""
    purity = purity or Purity()
    for node in ir.post_order(func):  # a call of a let-bound function is as pure as its body
        if type(node) is Let:
            purity.register_let(node)

    rules = RuleTable()

    @rules.on(Let)
    def dead_or_used_once(let):
        if not purity.is_pure(let.value):
            return None
        n = uses_of(let.var, let.body)
        if n == 0:
            return let.body
        if n == 1 and inline_once:
            return walk(let.body, None, memo={let.var: let.value})
        return None

    return walk(func, rules)
