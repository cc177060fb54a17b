"""DeadCodeElimination: remove let-bindings nobody uses (and, if asked, inline single uses).

The algorithm of TVM's ``relay.transform.DeadCodeElimination`` (``dead_code.cc``). Only
``let`` bindings are touched: in graph form an unused node cannot exist.

1. **Purity.** A binding may go only if evaluating its value has no side effect.
   Constants, variables, operators, globals and functions (as values) are pure to
   evaluate; a call is pure when its callee and arguments are and *calling* the callee
   is: an operator unless it is stateful, a global or local function whose body is pure
   (recursion is assumed pure while it is analysed), never a function parameter, a
   function taken out of a tuple, or an ``Extern`` global. ``ignore_impurity=True``
   treats everything as pure.
2. **Uses.** The host's use analysis counts each let-bound variable's uses on the live
   paths (:func:`passhost.ir.rewrite.binding_uses`, told that a pure value is dead until
   its variable is used): uses inside dead values do not count, so a whole dead chain
   disappears in one run; a use inside a nested function counts twice (the function may
   run many times); a use inside a shared sub-expression counts once per path (only 0 / 1
   / many matters).
3. **Rewrite.** Impure bindings stay; unused pure ones go; with ``inline_once`` a pure
   binding used exactly once is replaced by its value at the use: one walk of the rewrite
   engine with a rule for lets and ``bind`` for the inlined variables.

Everything is walked with explicit stacks and each node is handled a bounded number of
times, so the pass is linear (TVM's re-visiting is quadratic on long let chains) and a
100,000-deep let chain works at the default recursion limit. When no binding goes the
function object is returned unchanged.

Before::

    def @main(%x: Tensor[(3), float32]) {
      let %a = add(%x, 1f);
      let %b = multiply(%a, 2f);
      let %c = negative(%x);
      %c
    }

After ``DeadCodeElimination()``::

    def @main(%x: Tensor[(3), float32]) {
      let %c = negative(%x);
      %c
    }
"""
from __future__ import annotations

from typing import Any

from passhost.errors import PassError
from passhost.ir import Expr, Function, IRModule, Let, Var, contains_any
from passhost.ir import paused_gc as _gc_paused
from passhost.ir.rewrite import KEEP_TYPES, RuleTable, binding_uses, walk
from passhost.transform import module_pass

from .purity import Purity

__all__ = ["Purity", "count_uses", "eliminate_dead_code", "dead_code_elimination",
           "DeadCodeElimination"]

_LET = frozenset({Let})


def count_uses(func: Function, purity: Purity) -> dict:
    """``{let-bound var: 0, 1 or 2 (= more than one)}`` for the lets of ``func``, counted on
    the live paths (step 2 above): the host's :func:`~passhost.ir.rewrite.binding_uses`,
    with a pure value dead until its variable is used. Fills ``purity.let_value``."""
    return binding_uses(func, purity.is_pure, purity.let_value)


def eliminate_dead_code(func: Function, purity: Purity = None, inline_once: bool = False) -> Function:
    """Remove the unused pure let-bindings of ``func`` (inline single uses if asked).

    A function without any ``let`` (every graph-form function) is returned as it is
    after one cheap walk (``ir.contains_any(body, {Let})``): only let bindings can be dead.

    :param purity: the purity oracle (default: a fresh one without module context)
    :returns: the new function -- ``func`` itself when no binding goes
    """
    if purity is None:
        purity = Purity()
    with _gc_paused():
        if not contains_any(func.body, _LET):
            return func
        counts = count_uses(func, purity)
        drop = set()
        inline: dict = {}
        for var, c in counts.items():
            if c == 0 or (c == 1 and inline_once):
                value = purity.let_value.get(var)
                if value is not None and purity.is_pure(value):
                    if c == 0:
                        drop.add(var)
                    else:
                        inline.setdefault(value, []).append(var)
                        drop.add(var)
        if not drop:
            return func
        return _rewrite(func, drop, inline, counts)


def _rewrite(func: Function, drop: set, inline: dict, counts: dict) -> Function:
    """The rewrite, one walk of the host's engine: an inlined binding's variable is bound to its
    (rewritten) value, where its let disappears, and a dropped let -- or one only dead
    code reaches, which the use count never met -- becomes its body."""
    inlined = {var for vs in inline.values() for var in vs}

    def bind(var: Var, value: Expr):
        return value if var in inlined else None

    def drop_let(let: Let):
        var = let.var
        return let.body if var in drop or var not in counts else None

    return walk(func, RuleTable([(Let, drop_let)]), KEEP_TYPES, bind=bind if inlined else None)


def dead_code_elimination(mod: IRModule, inline_once: bool = False, ignore_impurity: bool = False) -> IRModule:
    """Run dead-code elimination over every function of ``mod``; returns a new module."""
    purity = Purity(mod, ignore_impurity)
    out = mod.copy()
    for gv, func in mod.items():
        if type(func) is Function:
            new = eliminate_dead_code(func, purity, inline_once)
            if new is not func:
                out[gv] = new
    return out


@module_pass(opt_level=1, name="DeadCodeElimination", required=["InferType"], preserves_types=True)
class DeadCodeElimination:
    """Remove unused let-bindings whose values are pure.

    Module pass, ``opt_level`` 1, requires ``InferType``. Before / after::

        let %a = add(%x, 1f);        |
        let %b = multiply(%a, 2f);   |
        let %c = negative(%x);       |  let %c = negative(%x);
        %c                           |  %c

    :param inline_once: also inline pure bindings used exactly once
    :param ignore_impurity: treat every value as pure (remove unused impure bindings too)
    """

    def __init__(self, inline_once: bool = False, ignore_impurity: bool = False) -> None:
        for name, value in (("inline_once", inline_once), ("ignore_impurity", ignore_impurity)):
            if not isinstance(value, bool):
                raise PassError(f"DeadCodeElimination: {name} must be True or False, got {value!r}",
                                "DeadCodeElimination")
        self.inline_once = inline_once
        self.ignore_impurity = ignore_impurity

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        return dead_code_elimination(mod, self.inline_once, self.ignore_impurity)
