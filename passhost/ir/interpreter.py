"""The numpy reference interpreter: :func:`evaluate`.

Runs a module's ``main`` (or a function) on numpy arrays. Operator calls run the
op's numpy kernel (``OpDef.compute``); function literals become closures that
capture the values of their free variables; calls of closures, globals and
``Primitive=1`` functions start a new activation. Within an activation each node
is evaluated once (a memo keyed by node identity), and only the taken branch of an
``if`` is evaluated. An explicit task stack replaces Python recursion, both for
nested expressions and for nested calls, so a 100,000-deep chain runs at the
default recursion limit::

    >>> x = ir.var("x", shape=(2,))
    >>> ir.evaluate(ir.IRModule.from_expr(ir.add(x, x)), np.ones(2, "float32"))
    array([2., 2.], dtype=float32)
"""
from __future__ import annotations

from typing import Any, Optional, Union

import numpy as np

from ..errors import EvaluationError, PasshostError
from ._gc import paused
from .analysis import free_vars
from .dims import bind_shape, substitute_value, value_has_dims
from .expr import Attrs, Call, Constant, Expr, Function, GlobalVar, If, Let, Tuple, TupleGetItem, Var
from .module import IRModule
from .op import Op
from .ops._util import quiet_kernels
from .type_infer import infer_type
from .types import DTYPES, FuncType, TensorType, TupleType, Type

__all__ = ["evaluate", "Closure"]


class Closure:
    """A function value: a :class:`Function` plus the values of its free variables."""

    __slots__ = ("func", "env", "name")

    def __init__(self, func: Function, env: dict, name: str = "a function") -> None:
        self.func = func
        self.env = env
        self.name = name

    def __repr__(self) -> str:
        return f"Closure({self.name})"


def evaluate(mod_or_func: Union[IRModule, Expr], *args: Any) -> Any:
    """Evaluate ``mod_or_func`` on ``args`` with numpy.

    :param mod_or_func: an :class:`IRModule` (its ``main`` runs; other functions are
        reachable through their GlobalVars), a :class:`Function`, or a closed
        expression (evaluated without arguments)
    :param args: one numpy array (or scalar) per parameter, in order; numpy arrays
        must match the parameter type exactly, Python numbers and lists are
        converted to the parameter's dtype when that loses no kind (int → float is
        fine, float → int is not)
    :returns: an ndarray, or a (possibly nested) tuple of them (a program whose result
        is a function returns a :class:`Closure`)
    :raises EvaluationError: wrong arguments, an operator without a kernel, a kernel
        that fails or returns the wrong shape or dtype
    """
    mod: Optional[IRModule] = None
    if isinstance(mod_or_func, IRModule):
        mod = mod_or_func
        if "main" not in mod:
            raise EvaluationError(mod._missing("main") + ": evaluate runs @main")
        if any(f._checked_type is None for f in mod._funcs.values()):
            mod = infer_type(mod)
        func: Expr = mod["main"]
        fname = "@main"
    elif isinstance(mod_or_func, Expr):
        func = mod_or_func
        if func._checked_type is None:
            infer_type(func)
        fname = "the function"
    else:
        raise EvaluationError(
            f"evaluate needs an IRModule or an expression, got {type(mod_or_func).__name__}")

    if type(func) is Function:
        params = func.params
        if len(args) != len(params):
            names = ", ".join("%" + p.name_hint for p in params)
            raise EvaluationError(
                f"{fname} takes {len(params)} argument{'s' if len(params) != 1 else ''}"
                f"{' (' + names + ')' if names else ''}, got {len(args)}")
        sizes: dict = {}
        env = {p: _convert_arg(a, p, sizes) for p, a in zip(params, args)}
        body = func.body
    else:
        if args:
            raise EvaluationError(
                f"a {type(func).__name__} expression takes no arguments, got {len(args)}: "
                "wrap it in a Function to pass inputs")
        env = {}
        sizes = {}
        body = func
        if type(body) is Call and type(body.op) is Op and all(type(a) is Constant for a in body.args):
            # one operator on constants (an importer's or a folder's usual question): its
            # kernel alone, checked as the machine checks it, without the machine's set-up
            with quiet_kernels():
                return _CONSTANTS.apply_op(body.op, body, [a.data for a in body.args])
    with quiet_kernels(), paused():
        return _Machine(mod, sizes).run(body, env)


def _convert_arg(value: Any, param: Var, sizes: dict) -> Any:
    ty = param._checked_type or param.type_annotation
    return _convert(value, ty, f"%{param.name_hint}", sizes)


def _shape_matches(arr: np.ndarray, ty: TensorType, where: str, sizes: dict) -> bool:
    """Whether ``arr``'s shape fits ``ty``'s, binding ``ty``'s size variables in ``sizes``;
    a conflict with an earlier binding is an error naming the variable."""
    if ty.is_static:
        return arr.shape == ty.shape
    problem = bind_shape(ty.shape, arr.shape, sizes, f"argument {where}")
    if problem is not None:
        raise EvaluationError(problem)
    return True


def _convert(value: Any, ty: Type, where: str, sizes: dict) -> Any:
    if type(ty) is TupleType:
        if not isinstance(value, (tuple, list)) or len(value) != len(ty.fields):
            raise EvaluationError(
                f"argument {where}: expected a tuple of {len(ty.fields)} values ({ty}), "
                f"got {type(value).__name__}")
        return tuple(_convert(v, t, f"{where}.{i}", sizes) for i, (v, t) in enumerate(zip(value, ty.fields)))
    if type(ty) is FuncType:
        if isinstance(value, Closure):
            return value
        raise EvaluationError(f"argument {where}: expected a function ({ty}), got {type(value).__name__}")
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        if arr.dtype.name != ty.dtype or not _shape_matches(arr, ty, where, sizes):
            raise EvaluationError(
                f"argument {where}: expected {ty}, got shape {arr.shape} {arr.dtype.name}")
        return arr
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as e:
        raise EvaluationError(f"argument {where}: expected {ty}, got {type(value).__name__} ({e})") from None
    if arr.dtype == object or not np.can_cast(arr.dtype, ty.dtype, casting="same_kind"):
        raise EvaluationError(
            f"argument {where}: expected {ty}, got {type(value).__name__} of dtype {arr.dtype.name}")
    if not _shape_matches(arr, ty, where, sizes):
        raise EvaluationError(f"argument {where}: expected {ty}, got shape {arr.shape} {arr.dtype.name}")
    return arr.astype(ty.dtype)


_EVAL, _APPLY, _TUPLE, _GETITEM, _LET, _IF, _COPY = range(7)

#: numpy dtype objects by name (``ndarray.dtype.name`` is slow: it runs Python code)
_NP_DTYPES = {name: np.dtype(name) for name in DTYPES}


def _check_result(op: Op, value: Any, ty: Optional[Type], sizes: dict) -> Any:
    """Normalise a kernel result and check it against the call's inferred type (a size
    variable not bound yet is bound by it)."""
    if isinstance(value, (tuple, list)):
        value = tuple(np.asarray(v) for v in value)
        if ty is not None:
            if type(ty) is not TupleType or len(ty.fields) != len(value):
                raise EvaluationError(
                    f"the kernel of {op.name} returned {len(value)} values but the call has type {ty}")
            for v, t in zip(value, ty.fields):
                _check_tensor(op, v, t, sizes)
        return value
    value = np.asarray(value)
    if ty is not None:
        _check_tensor(op, value, ty, sizes)
    return value


def _check_tensor(op: Op, arr: np.ndarray, ty: Type, sizes: dict) -> None:
    if type(ty) is not TensorType:
        return
    if arr.dtype == _NP_DTYPES[ty.dtype]:
        if arr.shape == ty.shape:
            return
        if not ty.is_static:
            problem = bind_shape(ty.shape, arr.shape, sizes, f"the result of {op.name}")
            if problem is None:
                return
            raise EvaluationError(f"{problem}: the kernel disagrees with the call's type {ty} under the "
                                  f"bindings {_bindings(sizes)}")
    raise EvaluationError(
        f"the kernel of {op.name} returned shape {arr.shape} {arr.dtype.name} but the call has "
        f"type {ty}: fix the kernel or the type relation")


def _bindings(sizes: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(sizes.items())) or "(none)"


#: id(attrs) -> (attrs, whether they hold a symbolic dimension)
_SYMBOLIC_ATTRS: dict = {}


def _has_dims(attrs: Any) -> bool:
    if not attrs:
        return False
    known = _SYMBOLIC_ATTRS.get(id(attrs))
    if known is not None and known[0] is attrs:
        return known[1]
    flag = any(value_has_dims(v) for v in attrs.values())
    if len(_SYMBOLIC_ATTRS) > 65536:
        _SYMBOLIC_ATTRS.clear()
    _SYMBOLIC_ATTRS[id(attrs)] = (attrs, flag)
    return flag


class _Machine:
    """One evaluation: the task stack plus per-module caches."""

    def __init__(self, mod: Optional[IRModule], sizes: Optional[dict] = None) -> None:
        self.mod = mod
        self.sizes = {} if sizes is None else sizes
        self.globals: dict = {}
        self.free: dict = {}

    def global_closure(self, gv: GlobalVar) -> Closure:
        clo = self.globals.get(gv)
        if clo is None:
            mod = self.mod
            if mod is None:
                raise EvaluationError(
                    f"@{gv.name_hint} is a global function: evaluate the IRModule that defines it")
            fn = mod._funcs.get(gv)
            if fn is None:
                own = mod._by_name.get(gv.name_hint)
                if own is None:
                    raise EvaluationError(mod._missing(gv.name_hint))
                fn = mod._funcs[own]
            clo = Closure(fn, {}, f"@{gv.name_hint}")
            self.globals[gv] = clo
        return clo

    def closure(self, fn: Function, memo: dict, rec: Optional[Var] = None) -> Closure:
        """A closure of ``fn`` over ``memo``; ``rec`` (the let variable ``fn`` is bound
        to, if any) may be used inside ``fn`` to call itself."""
        fv = self.free.get(fn)
        if fv is None:
            fv = self.free[fn] = free_vars(fn)
        env: dict = {}
        clo = Closure(fn, env)
        for v in fv:
            if v is rec:
                env[v] = clo
                continue
            try:
                env[v] = memo[v]
            except KeyError:
                raise EvaluationError(
                    f"a function literal uses %{v.name_hint}, which has no value where the "
                    "function is created") from None
        return clo

    # hot loop: one step per node evaluated; the kinds of node are handled in line
    def run(self, root: Expr, env: dict) -> Any:
        memo = env
        stack: list = [(_EVAL, root, memo, None)]
        push = stack.append
        pop = stack.pop
        _Call, _Constant, _Var, _Op = Call, Constant, Var, Op
        while stack:
            kind, node, memo, extra = pop()
            if kind == _EVAL:
                if node in memo:
                    continue
                t = type(node)
                if t is _Call:
                    push((_APPLY, node, memo, None))
                    for a in reversed(node.args):
                        if a not in memo:
                            push((_EVAL, a, memo, None))
                    op = node.op
                    if type(op) is not _Op and op not in memo:
                        push((_EVAL, op, memo, None))
                elif t is _Constant:
                    memo[node] = node.data
                elif t is _Var:
                    raise EvaluationError(
                        f"%{node.name_hint} has no value: it is a free variable or used outside the "
                        "scope that binds it; make it a parameter of the evaluated function")
                elif t is GlobalVar:
                    memo[node] = self.global_closure(node)
                elif t is Function:
                    memo[node] = self.closure(node, memo)
                elif t is Tuple:
                    push((_TUPLE, node, memo, None))
                    for f in reversed(node.fields):
                        push((_EVAL, f, memo, None))
                elif t is TupleGetItem:
                    push((_GETITEM, node, memo, None))
                    push((_EVAL, node.tuple_value, memo, None))
                elif t is Let:
                    value = node.value
                    push((_LET, node, memo, None))
                    if type(value) is Function:  # may refer to itself through the let variable
                        if value not in memo:
                            memo[value] = self.closure(value, memo, node.var)
                    else:
                        push((_EVAL, value, memo, None))
                elif t is If:
                    push((_IF, node, memo, None))
                    push((_EVAL, node.cond, memo, None))
                elif t is _Op:
                    raise EvaluationError(
                        f"operator {node.name} is used as a value: operators can only be called")
                else:
                    raise EvaluationError(f"cannot evaluate a {t.__name__}")
            elif kind == _APPLY:
                op = node.op
                args = [memo[a] for a in node.args]
                if type(op) is _Op:
                    memo[node] = self.apply_op(op, node, args)
                    continue
                clo = memo[op]
                if type(clo) is not Closure:
                    raise EvaluationError(
                        f"cannot call a value of type {type(clo).__name__}: only functions can be called")
                fn = clo.func
                if len(args) != len(fn.params):
                    raise EvaluationError(
                        f"{clo.name} takes {len(fn.params)} arguments, got {len(args)}")
                inner = dict(clo.env)
                for p, v in zip(fn.params, args):
                    inner[p] = v
                body = fn.body
                push((_COPY, node, memo, (body, inner)))
                push((_EVAL, body, inner, None))
            elif kind == _COPY:
                src, src_memo = extra
                memo[node] = src_memo[src]
            elif kind == _LET:
                memo[node.var] = memo[node.value]
                push((_COPY, node, memo, (node.body, memo)))
                push((_EVAL, node.body, memo, None))
            elif kind == _IF:
                branch = node.true_branch if bool(memo[node.cond]) else node.false_branch
                push((_COPY, node, memo, (branch, memo)))
                push((_EVAL, branch, memo, None))
            elif kind == _TUPLE:
                memo[node] = tuple([memo[f] for f in node.fields])
            else:  # _GETITEM
                value = memo[node.tuple_value]
                if type(value) is not tuple or node.index >= len(value):
                    raise EvaluationError(
                        f"tuple index {node.index} is out of range for a value of "
                        f"{len(value) if type(value) is tuple else 'non-tuple'} fields")
                memo[node] = value[node.index]
        return env[root]

    def apply_op(self, op: Op, node: Call, args: list) -> Any:
        kernel = op._def.compute
        if kernel is None:
            raise EvaluationError(
                f"operator {op.name} has no compute kernel, so it cannot be evaluated: give its "
                "OpDef a compute function")
        attrs = node.attrs
        if _has_dims(attrs):
            try:
                attrs = Attrs({k: substitute_value(v, self.sizes) for k, v in attrs.items()})
            except PasshostError as e:
                raise EvaluationError(f"in call to {op.name}: {e} (bound: {_bindings(self.sizes)})") from None
        try:
            value = kernel(args, attrs)
        except PasshostError as e:
            raise EvaluationError(f"in call to {op.name}: {e}") from e
        except Exception as e:
            raise EvaluationError(f"in call to {op.name}: the kernel failed with {type(e).__name__}: {e}") from e
        return _check_result(op, value, node._checked_type, self.sizes)


#: the machine of :func:`evaluate`'s one-operator-on-constants path (no size variables:
#: a call whose attributes need one fails in its attribute substitution)
_CONSTANTS = _Machine(None)
