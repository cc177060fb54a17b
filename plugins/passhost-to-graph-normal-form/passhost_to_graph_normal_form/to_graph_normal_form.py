"""ToGraphNormalForm: remove every ``let`` (TVM's ``to_graph_normal_form.cc``).

Each ``let %v = value; body`` becomes ``body`` with the (converted) ``value`` in place of
``%v``: the result is a DAG in which a value used several times is shared by object
identity. A value that mentions its own variable (a recursive local function) cannot be
substituted into itself; uses of such a variable become ``let %v = value; %v``, as in
TVM. There is no purity check (TVM has none either).

One post-order sweep: a let's value is finished before any node of its body is rebuilt,
so every use of ``%v`` is replaced as it is met. Linear; explicit stack; unchanged
sub-graphs keep their identity.

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

from typing import Any

from passhost.errors import PassError
from passhost.ir import (
    Call,
    Constant,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Op,
    Tuple,
    TupleGetItem,
    Var,
    post_order,
)
from passhost.ir import paused_gc as _gc_paused
from passhost.transform import function_pass

__all__ = ["to_graph_normal_form", "ToGraphNormalForm"]


def to_graph_normal_form(expr: Expr) -> Expr:
    """``expr`` (usually a function) without ``let`` bindings."""
    with _gc_paused():
        order = post_order(expr)
        let_of: dict = {}
        for node in order:
            if type(node) is Let:
                let_of[node.var] = node
        if not let_of:
            return expr
        new_of: dict = {}
        recursive: dict = {}  # let -> its ``let %v = value; %v`` wrapper (None until built)

        def resolve(e: Expr) -> Expr:
            seen = 0
            while type(e) is Var:
                let = let_of.get(e)
                if let is None:
                    return e
                value = let.value
                if let in recursive:
                    w = recursive[let]
                    if w is None:
                        if value not in new_of and type(value) is not Var:
                            return e  # a use inside its own (unfinished) value
                        w = recursive[let] = Let(e, resolve(value), e)
                    return w
                if type(value) is Var:
                    e = value
                    seen += 1
                    if seen > len(let_of):
                        return e  # ``let %a = %a``-style cycle: keep the variable
                    continue
                tv = type(value)
                if tv is Constant or tv is Op or tv is GlobalVar:
                    return value
                done = new_of.get(value)
                if done is None:
                    recursive[let] = None
                    return e
                return done
            return new_of.get(e, e)

        for node in order:
            t = type(node)
            if t is Var or t is Constant or t is Op or t is GlobalVar:
                continue
            if t is Let:
                new: Expr = resolve(node.body)
            elif t is Call:
                op = resolve(node.op)
                args = [resolve(a) for a in node.args]
                if op is node.op and all(a is b for a, b in zip(args, node.args)):
                    new = node
                else:
                    new = Call(op, args, node.attrs if type(op) is type(node.op) else None)
            elif t is Tuple:
                fields = [resolve(f) for f in node.fields]
                new = node if all(a is b for a, b in zip(fields, node.fields)) else Tuple(fields)
            elif t is TupleGetItem:
                tv = resolve(node.tuple_value)
                new = node if tv is node.tuple_value else TupleGetItem(tv, node.index)
            elif t is If:
                kids = (resolve(node.cond), resolve(node.true_branch), resolve(node.false_branch))
                new = node if (kids[0] is node.cond and kids[1] is node.true_branch
                               and kids[2] is node.false_branch) else If(*kids)
            elif t is Function:
                body = resolve(node.body)
                new = node if body is node.body else Function(node.params, body, node.ret_type, node.attrs)
            else:  # pragma: no cover - every node kind is handled above
                raise PassError(f"ToGraphNormalForm: unknown node kind {t.__name__}", "ToGraphNormalForm")
            new_of[node] = new
        return resolve(expr)


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
