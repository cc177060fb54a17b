"""FoldConstant's predicates and evaluation: which calls fold, and their values as IR.

Shared by the rewrite (:mod:`._walk`) and the public helpers re-exported from
:mod:`.fold_constant`.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from passhost.errors import PassError, PasshostError
from passhost.ir import (
    Call,
    Constant,
    Expr,
    GlobalVar,
    Op,
    TensorType,
    Tuple,
    TupleType,
    Var,
    infer_type,
)
from passhost.ir import fold_symbolic, quiet_kernels, set_checked_type, type_of
from passhost.weights import adopt

#: operators whose value depends only on the static shape of their argument
_SHAPE_OF = frozenset({"shape_of", "vm.shape_of"})
_NDARRAY_SIZE = frozenset({"ndarray_size"})
#: never evaluated (when the shape rules above do not apply)
_NEVER_FOLD = frozenset({"device_copy"}) | _SHAPE_OF | _NDARRAY_SIZE
#: TVM's ``TNonComputational`` operators
_NON_COMPUTATIONAL = frozenset({
    "on_device", "call_lowered", "vm.shape_of", "vm.invoke_tvm_op", "vm.reshape_tensor",
    "memory.alloc_storage", "memory.alloc_tensor", "memory.kill", "parser.MetaRef",
})
_LEAF_TYPES = frozenset({Var, Constant, Op, GlobalVar})


# ---------------------------------------------------------------------------------------
# predicates
# ---------------------------------------------------------------------------------------


def _is_on_device(expr: Expr) -> bool:
    return type(expr) is Call and type(expr.op) is Op and expr.op.name == "on_device" and len(expr.args) == 1


def _unwrap(expr: Expr) -> Expr:
    """``expr`` without ``on_device`` annotations around it."""
    while _is_on_device(expr):
        expr = expr.args[0]
    return expr


def is_simple_constant(expr: Expr) -> bool:
    """A ``Constant``, possibly wrapped in ``on_device`` annotations."""
    return type(expr) is Constant or type(_unwrap(expr)) is Constant


def is_complex_constant(expr: Expr) -> bool:
    """A simple constant or a ``Tuple`` whose fields are all complex constants."""
    stack = [expr]
    while stack:
        e = _unwrap(stack.pop())
        t = type(e)
        if t is Tuple:
            stack.extend(e.fields)
        elif t is not Constant:
            return False
    return True


def _non_computational(op: Op, fold_qnn: bool) -> bool:
    name = op.name
    qnn = name.startswith("qnn.")
    if qnn and fold_qnn:
        return False
    return qnn or name in _NON_COMPUTATIONAL or bool(op.definition.extra.get("non_computational", False))


# ---------------------------------------------------------------------------------------
# evaluation
# ---------------------------------------------------------------------------------------


def _value(expr: Expr) -> Any:
    """The numpy value of a complex constant (tuples become Python tuples)."""
    e = _unwrap(expr)
    if type(e) is Constant:
        return e.data
    # a tuple of constants: build bottom-up with an explicit stack
    out: dict = {}
    stack: list = [(e, False)]
    while stack:
        node, ready = stack.pop()
        node = _unwrap(node)
        if type(node) is Constant:
            out[node] = node.data
        elif ready:
            out[node] = tuple(out[_unwrap(f)] for f in node.fields)
        else:
            stack.append((node, True))
            stack.extend((f, False) for f in node.fields)
    return out[e]


def _as_expr(value: Any, ty: Any) -> Expr:
    """A kernel result as IR: an array becomes a ``Constant``, a tuple a ``Tuple`` of them.

    ``ty`` is the type of the call being replaced (or ``None``); new nodes are typed
    with it so an already-typed program stays typed.
    """
    if not isinstance(value, tuple):
        if type(value) is np.ndarray and value.flags.writeable:
            # a fresh kernel result: no need for Constant to copy it (past the memory
            # budget of passhost.weights.spill_to_disk, it goes to the scratch file)
            value = adopt(value)
        const = Constant(value)
        if type(ty) is TensorType and tuple(ty.shape) == const.data.shape:
            set_checked_type(const, ty)
        return const
    # nested tuples, built with an explicit stack
    root: list = []
    stack: list = [(value, ty, root, False, None)]
    while stack:
        val, t, sink, ready, parts = stack.pop()
        if not isinstance(val, tuple):
            c = Constant(val)
            if type(t) is TensorType and tuple(t.shape) == c.data.shape:
                set_checked_type(c, t)
            sink.append(c)
        elif ready:
            tup = Tuple(parts)
            if type(t) is TupleType and all(p.has_type for p in parts):
                set_checked_type(tup, t)
            sink.append(tup)
        else:
            parts = []
            stack.append((val, t, sink, True, parts))
            ftypes = t.fields if type(t) is TupleType and len(t.fields) == len(val) else (None,) * len(val)
            for v, ft in reversed(list(zip(val, ftypes))):
                stack.append((v, ft, parts, False, None))
    return root[0]


def evaluate_call(call: Call, ty: Any = None) -> Expr:
    """Evaluate an operator call whose arguments are all complex constants with the
    operator's host kernel; return the result as a ``Constant`` (or ``Tuple`` of them).

    :param ty: the call's type, given to the new nodes (``None`` leaves them untyped)
    :raises PassError: if the kernel fails on these arguments
    """
    with quiet_kernels():
        return _evaluate(call.op, call.args, call.attrs, ty)


def _evaluate(op: Op, call_args: Any, attrs: Any, ty: Any) -> Expr:
    # the caller silences numpy floating-point warnings (once per fold, not per call)
    return _as_expr(_compute(op, call_args, attrs), ty)


def _compute(op: Op, call_args: Any, attrs: Any) -> Any:
    """The kernel result (array or tuple) of ``op`` on complex-constant arguments."""
    args = [a.data if type(a) is Constant else _value(a) for a in call_args]
    try:
        return op.compute(args, attrs)
    except PasshostError:
        raise
    except Exception as exc:  # a kernel rejecting its inputs: report which op
        raise PassError(
            f"FoldConstant: evaluating operator {op.name} on constant arguments failed "
            f"({type(exc).__name__}: {exc}); check the call's argument shapes and attributes",
            "FoldConstant",
        ) from exc


def _static_shape(orig_arg: Expr, new_arg: Expr) -> Optional[tuple]:
    """The fully known static shape of a tensor argument, or ``None``."""
    ty = type_of(orig_arg) or type_of(new_arg)
    if ty is None:
        e = _unwrap(new_arg)
        if type(e) is Constant:
            return tuple(e.data.shape)
        try:  # an untyped program: type the argument (its free variables need annotations)
            ty = type_of(infer_type(orig_arg))
        except PasshostError:
            return None
    if type(ty) is not TensorType:
        return None
    shape = tuple(ty.shape)
    if all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in shape):
        return tuple(int(d) for d in shape)
    return None


def _fold_shape_op(call: Call, orig: Call) -> Optional[Expr]:
    """``shape_of``/``ndarray_size`` of a static shape: a constant; of a symbolic one
    without ``?``: a ``shape_value`` (its dimensions), which shape arithmetic folds further.

    before:  shape_of(%x, dtype="int64")               /* %x: Tensor[(batch, seq, 8), float32] */
    after:   shape_value(values=[batch, seq, 8])
    """
    shape = _static_shape(orig.args[0], call.args[0])
    if shape is None:
        folded = fold_symbolic(orig if call is orig else call)
        return folded if folded is not None and type(folded) is Call else None
    dtype = call.attrs.get("dtype", "int32")
    if call.op.name in _SHAPE_OF:
        data = np.array(shape, dtype="int32").astype(dtype)
    else:
        data = np.array(int(np.prod(shape, dtype=np.int64)), dtype="int32").astype(dtype)
    return _as_expr(data, type_of(orig))


#: what the rewrite does with a call of an operator (decided once per operator and fold)
_SKIP, _EVALUATE, _SHAPE = 0, 1, 2


def _op_kind(op: Op, fold_qnn: bool) -> int:
    d = op.definition
    if d.stateful:
        return _SKIP
    name = op.name
    if name in _SHAPE_OF or name in _NDARRAY_SIZE:
        return _SHAPE
    if name in _NEVER_FOLD or d.compute is None or _non_computational(op, fold_qnn):
        return _SKIP
    return _EVALUATE


def _all_complex(args: Any) -> bool:
    """Whether every (folded) argument is a complex constant."""
    for a in args:
        if type(a) is not Constant and not is_complex_constant(a):
            return False
    return True
