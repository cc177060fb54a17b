"""ToGraphNormalForm: remove every ``let`` (TVM's ``to_graph_normal_form.cc``).

Each ``let %v = value; body`` becomes ``body`` with the (converted) ``value`` in place of
``%v``: the result is a DAG in which a value used several times is shared by object
identity. A value that mentions its own variable (a recursive local function) cannot be
substituted into itself; uses of such a variable become ``let %v = value; %v``, as in
TVM. There is no purity check (TVM has none either).

It is one rule over the host's driver (``ir.rewrite_post_order``): ``bind`` gives each
let variable its rewritten value, which the driver substitutes in the let's body, where
the let disappears. Linear; explicit stack; unchanged sub-graphs keep
their identity and their types.

Before::

    def @main(%x: Tensor[(3), float32]) {
      let %a = add(%x, 1f);
      let %b = multiply(%a, %a);
      %b
    }

After ``ToGraphNormalForm()``::

    def @main(%x: Tensor[(3), float32]) {
      %0 = add(%x, 1f);
      multiply(%0, %0)
    }
"""
from __future__ import annotations

from typing import Any, Optional

from passhost.ir import Expr, Function, Let, Var, free_vars, rewrite_post_order
from passhost.ir import paused_gc as _gc_paused
from passhost.transform import function_pass

__all__ = ["to_graph_normal_form", "ToGraphNormalForm"]

def _substitute(var: Var, value: Expr) -> Optional[Expr]:
    """What replaces ``var`` in its let's body: the value, or ``let %v = value; %v`` for a
    recursive local function (one that mentions its own variable cannot be substituted
    into itself), shared by every use."""
    if type(value) is Function and var in free_vars(value):
        return Let(var, value, var)
    return value


def to_graph_normal_form(expr: Expr) -> Expr:
    """``expr`` (usually a function) without ``let`` bindings."""
    with _gc_paused():
        return rewrite_post_order(expr, None, keep_types=True, bind=_substitute)  # (every let goes through bind)


@function_pass(opt_level=1, name="ToGraphNormalForm", preserves_types=True)
class ToGraphNormalForm:
    """Remove every ``let``: substitute its value for its variable (a shared DAG node).

    Function pass, ``opt_level`` 1. Before / after::

        let %a = add(%x, 1f);        |  %0 = add(%x, 1f);
        let %b = multiply(%a, %a);   |  multiply(%0, %0)
        %b                           |
    """

    def transform_function(self, func: Function, mod: Any, ctx: Any) -> Function:
        return to_graph_normal_form(func)
