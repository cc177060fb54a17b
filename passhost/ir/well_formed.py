"""Well-formedness: :func:`well_formed` checks the structural rules of the IR.

A module is well formed when, in every global function,

* every variable it uses is bound by a parameter or a ``let`` whose scope
  encloses the use (no free variables, no use outside the binder's scope; a
  function bound by a ``let`` may call itself through the let variable);
* no variable is bound twice (two parameters, a parameter and a ``let``, two lets);
* every ``@global`` it references is defined in the module;
* where types can be inferred: every tuple index is in range and every type
  annotation (variables, ``let`` bindings, function return types, parameters of
  called functions) agrees with the inferred type.

For example ``def @main() { %x }`` is rejected with ``free variable %x in @main``,
and ``fn (%x) { let %x = ...; ... }`` with ``%x is bound twice (as a parameter of
@main and by a let)``.

Ill-typed programs (say an ``add`` of mismatched shapes) are not malformed: when
type inference fails, the checks that need types are made on whatever parts got
typed, and the type error itself is left to :func:`~passhost.ir.infer_type`.

Like TVM's checker, a shared sub-expression is checked once, in the first scope
it is reached from.
"""
from __future__ import annotations

from typing import Optional, Union

from ..errors import PasshostError, WellFormedError
from .analysis import bound_vars
from .expr import USES_OF, Call, Constant, Expr, Function, GlobalVar, Let, TupleGetItem, Var
from .module import IRModule
from .op import Op
from .type_infer import infer_type
from .types import FuncType, TupleType
from .visitor import post_order

__all__ = ["well_formed", "well_formed_function"]

_VISIT, _BIND, _UNBIND = range(3)
_LEAVES = frozenset([Constant, Op])


def well_formed(obj: Union[IRModule, Expr]) -> bool:
    """Check that ``obj`` is well formed.

    :param obj: an :class:`IRModule` (every global function is checked; free
        variables are errors) or an expression (its own free variables are its inputs
        and allowed, as in TVM's ``well_formed(expr)``)
    :returns: ``True``
    :raises WellFormedError: naming the offending variable, index or annotation
    """
    if isinstance(obj, IRModule):
        items = [(f"@{gv.name_hint}", fn) for gv, fn in obj.items()]
        for where, fn in items:
            _check_scopes(fn, where, obj, allow_free=False)
        try:
            infer_type(obj)
        except PasshostError:
            pass  # ill-typed, not malformed: check what got typed
        for where, fn in items:
            _check_types(fn, where)
        return True
    if isinstance(obj, Expr):
        where = "the expression"
        _check_scopes(obj, where, None, allow_free=True)
        try:
            infer_type(obj)
        except PasshostError:
            pass
        _check_types(obj, where)
        return True
    raise WellFormedError(f"well_formed needs an IRModule or an expression, got {type(obj).__name__}")


def well_formed_function(fn: Function, mod: Optional[IRModule] = None, where: str = "the function",
                         typed: bool = False) -> bool:
    """:func:`well_formed`'s checks of one function as it is (no type inference first: the
    checks that need types are made where the function is typed); what verify-each runs
    after a pass on each function the pass changed.

    :param typed: also require every expression to have a ``checked_type`` (what
        verify-each checks after a pass that declares ``preserves_types``)
    :raises WellFormedError: naming the offending variable, index or annotation
    """
    _check_scopes(fn, where, mod, allow_free=False)
    _check_types(fn, where, typed)
    return True


def _check_scopes(root: Expr, where: str, mod: Optional[IRModule], allow_free: bool) -> None:
    """Scopes of variables and references to globals, with an explicit stack."""
    in_scope: dict = {}
    binder: dict = {}
    visited: set = set()
    stack: list = [(_VISIT, root)]
    push = stack.append
    pop = stack.pop
    while stack:
        kind, x = pop()
        if kind == _VISIT:
            t = type(x)
            if t is Var:
                if not in_scope.get(x):
                    if x not in set(bound_vars(root)):  # (only on the error path)
                        if allow_free:
                            continue
                        raise WellFormedError(
                            f"free variable %{x.name_hint} in {where}: bind it as a parameter or "
                            "with a let")
                    raise WellFormedError(
                        f"%{x.name_hint} is used outside the scope that binds it in {where}: "
                        "pass it as a parameter or move the use into its scope")
                continue
            if x in visited:
                continue
            visited.add(x)
            if t is Call:
                for a in reversed(x.args):
                    if type(a) not in _LEAVES:  # constants and operators have nothing to check
                        push((_VISIT, a))
                if type(x.op) is not Op:
                    push((_VISIT, x.op))
            elif t is Function:
                desc = f"as a parameter of {where if x is root and mod is not None else 'a function'}"
                push((_UNBIND, x.params))
                push((_VISIT, x.body))
                push((_BIND, (x.params, desc)))
            elif t is Let:
                push((_UNBIND, (x.var,)))
                push((_VISIT, x.body))
                if type(x.value) is Function:  # letrec: the function may call itself
                    push((_VISIT, x.value))
                    push((_BIND, ((x.var,), "by a let")))
                else:
                    push((_BIND, ((x.var,), "by a let")))
                    push((_VISIT, x.value))
            elif t is GlobalVar:
                if mod is not None and x.name_hint not in mod._by_name:
                    names = ", ".join("@" + g.name_hint for g in mod.get_global_vars())
                    raise WellFormedError(
                        f"@{x.name_hint} is referenced in {where} but not defined in the module "
                        f"(functions: {names})")
            elif t is TupleGetItem:  # (the common one-child case, unrolled)
                push((_VISIT, x.tuple_value))
            else:  # no binders: every sub-expression is a use in the same scope
                for k in reversed(USES_OF[t](x)):
                    push((_VISIT, k))
        elif kind == _BIND:
            variables, desc = x
            for v in variables:
                first = binder.get(v)
                if first is not None:
                    raise WellFormedError(
                        f"%{v.name_hint} is bound twice ({first} and {desc}) in {where}: give "
                        "each binding its own Var")
                binder[v] = desc
                in_scope[v] = in_scope.get(v, 0) + 1
        else:
            for v in x:
                in_scope[v] -= 1


def _untyped(node: Expr, where: str) -> WellFormedError:
    what = f"a call of {node.op.name}" if type(node) is Call and hasattr(node.op, "name") else \
        f"a {type(node).__name__}"
    span = node.span
    return WellFormedError(f"{what} in {where} has no type{f' (at {span})' if span else ''}, although "
                           "the pass declares it preserves types: type the nodes it builds "
                           "(ir.infer_type) or drop preserves_types")


def _check_types(root: Expr, where: str, typed: bool = False) -> None:
    """Tuple indices and annotations against the inferred types (where known); with
    ``typed``, every expression (operators aside) must have a type."""
    for node in post_order(root):
        t = type(node)
        if typed and node._checked_type is None and t is not Op:
            raise _untyped(node, where)
        if t is TupleGetItem:
            tt = node.tuple_value._checked_type
            if tt is None:
                continue
            if type(tt) is not TupleType:
                raise WellFormedError(
                    f"tuple index .{node.index} in {where} is applied to a value of type {tt}, "
                    "which is not a tuple")
            if node.index >= len(tt.fields):
                n = len(tt.fields)
                raise WellFormedError(
                    f"tuple index {node.index} in {where} is out of range for a tuple of {n} "
                    f"field{'s' if n != 1 else ''} ({tt})")
        elif t is Var:
            ann, ct = node.type_annotation, node._checked_type
            if ann is not None and ct is not None and ann != ct:
                raise WellFormedError(
                    f"%{node.name_hint} in {where} is annotated {ann} but was inferred as {ct}")
        elif t is Let:
            ann, vt = node.var.type_annotation, node.value._checked_type
            if ann is not None and vt is not None and ann != vt:
                raise WellFormedError(
                    f"let %{node.var.name_hint} in {where} is annotated {ann} but its value has "
                    f"type {vt}")
        elif t is Function:
            rt, bt = node.ret_type, node.body._checked_type
            if rt is not None and bt is not None and rt != bt:
                what = where if node is root else f"a function in {where}"
                raise WellFormedError(f"{what} is annotated to return {rt} but its body has type {bt}")
        elif t is Call:
            ft = node.op._checked_type
            if type(ft) is not FuncType:
                continue
            for i, (a, pt) in enumerate(zip(node.args, ft.arg_types)):
                at = a._checked_type
                if at is not None and at != pt:
                    raise WellFormedError(
                        f"argument {i} of a call in {where} has type {at} but the called "
                        f"function's parameter is annotated {pt}")
