"""FoldConstant: evaluate, at compile time, every operator call whose arguments are constants.

The algorithm of TVM's ``relay.transform.FoldConstant`` (``fold_constant.cc``), as a
single post-order rewrite with an explicit stack (a 100,000-deep chain folds at the
default recursion limit, in time linear in the graph size):

* nothing inside a function marked ``Primitive=1`` is touched;
* a call is left alone when it has no arguments, its callee is not an operator, the
  operator is stateful (``nn.dropout``) or non-computational (``on_device``, ``qnn.*``
  unless ``fold_qnn``), or it is ``device_copy``;
* ``shape_of`` / ``ndarray_size`` of a tensor whose static shape is fully known become
  constants even when the tensor itself is not constant (a rank-0 input gives the empty
  shape ``[]`` and size 1 -- TVM's answer there is meaningless, see TVM-NOTES §4.2);
* a call whose arguments are all constants (or tuples of constants) is evaluated with
  the operator's host kernel (``op.compute``); a tuple result becomes a ``Tuple`` of
  ``Constant`` nodes;
* ``let %v = <constant>; body`` substitutes the constant for ``%v`` and drops the binding;
* ``if`` with a constant condition becomes the branch taken;
* ``(a, b, ...).i`` of a literal tuple becomes its field, constant or not.

The loop runs over :func:`passhost.ir.post_order` rather than through
``rewrite_post_order``: a let's variable must be mapped to its folded value *between*
rewriting the value and rewriting the body, which a generic rebuild cannot do; the
specialised loop also builds no intermediate call for a call that folds.

Rebuilt nodes keep the type of the node they replace (as TVM's copy-on-write does),
and when nothing folds the very same expression object is returned, so the type
inference that follows every function pass has nothing to do.

Before (the example of ``tests/python/relay/test_pass_fold_constant.py``)::

    def @main(%x: Tensor[(1, 2, 3), float32]) {
      %0 = add(meta[relay.Constant][0], meta[relay.Constant][0]);
      %1 = multiply(%0, 2f);
      %2 = add(%x, %1);
      add(%2, meta[relay.Constant][0])
    }

After ``FoldConstant()``::

    def @main(%x: Tensor[(1, 2, 3), float32]) -> Tensor[(1, 2, 3), float32] {
      %0 = add(%x, meta[relay.Constant][0] /* ty=Tensor[(3), float32] */) /* ty=Tensor[(1, 2, 3), float32] */;
      add(%0, meta[relay.Constant][1] /* ty=Tensor[(3), float32] */) /* ty=Tensor[(1, 2, 3), float32] */
    }
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from passhost.errors import PassError, PasshostError
from passhost.ir import (
    Call,
    Constant,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Op,
    TensorType,
    Tuple,
    TupleGetItem,
    TupleType,
    Var,
    infer_type,
    keep_checked_type,
    is_primitive,
    post_order,
)
from passhost.ir._gc import paused as _gc_paused
from passhost.transform import function_pass

__all__ = [
    "fold_constant",
    "is_primitive",
    "is_simple_constant",
    "is_complex_constant",
    "evaluate_call",
    "FoldConstant",
]

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
_LEAVES = (Var, Constant, Op, GlobalVar)


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
            value.flags.writeable = False  # a fresh kernel result: no need for Constant to copy it
        const = Constant(value)
        if type(ty) is TensorType and tuple(ty.shape) == const.data.shape:
            const._set_checked_type(ty)
        return const
    # nested tuples, built with an explicit stack
    root: list = []
    stack: list = [(value, ty, root, False, None)]
    while stack:
        val, t, sink, ready, parts = stack.pop()
        if not isinstance(val, tuple):
            c = Constant(val)
            if type(t) is TensorType and tuple(t.shape) == c.data.shape:
                c._set_checked_type(t)
            sink.append(c)
        elif ready:
            tup = Tuple(parts)
            if type(t) is TupleType and all(p.has_type for p in parts):
                tup._set_checked_type(t)
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
    with np.errstate(all="ignore"):
        return _evaluate(call.op, call.args, call.attrs, ty)


def _evaluate(op: Op, call_args: Any, attrs: Any, ty: Any) -> Expr:
    # the caller silences numpy floating-point warnings (once per fold, not per call)
    args = [a.data if type(a) is Constant else _value(a) for a in call_args]
    try:
        out = op._def.compute(args, attrs)
    except PasshostError:
        raise
    except Exception as exc:  # a kernel rejecting its inputs: report which op
        raise PassError(
            f"FoldConstant: evaluating operator {op.name} on constant arguments failed "
            f"({type(exc).__name__}: {exc}); check the call's argument shapes and attributes",
            "FoldConstant",
        ) from exc
    return _as_expr(out, ty)


def _static_shape(orig_arg: Expr, new_arg: Expr) -> Optional[tuple]:
    """The fully known static shape of a tensor argument, or ``None``."""
    ty = orig_arg._checked_type or new_arg._checked_type
    if ty is None:
        e = _unwrap(new_arg)
        if type(e) is Constant:
            return tuple(e.data.shape)
        try:  # an untyped program: type the argument (its free variables need annotations)
            ty = infer_type(orig_arg)._checked_type
        except PasshostError:
            return None
    if type(ty) is not TensorType:
        return None
    shape = tuple(ty.shape)
    if all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in shape):
        return tuple(int(d) for d in shape)
    return None


def _fold_shape_op(call: Call, orig: Call) -> Optional[Expr]:
    shape = _static_shape(orig.args[0], call.args[0])
    if shape is None:
        return None
    dtype = call.attrs.get("dtype", "int32")
    if call.op.name in _SHAPE_OF:
        data = np.array(shape, dtype="int32").astype(dtype)
    else:
        data = np.array(int(np.prod(shape, dtype=np.int64)), dtype="int32").astype(dtype)
    return _as_expr(data, orig._checked_type)


#: what :func:`_fold_call` does with a call of an operator
_SKIP, _EVALUATE, _SHAPE = 0, 1, 2


def _op_kind(op: Op, fold_qnn: bool) -> int:
    d = op._def
    if d.stateful:
        return _SKIP
    name = op.name
    if name in _SHAPE_OF or name in _NDARRAY_SIZE:
        return _SHAPE
    if name in _NEVER_FOLD or d.compute is None or _non_computational(op, fold_qnn):
        return _SKIP
    return _EVALUATE


def _rebuild_call(node: Call, args: tuple) -> Call:
    """``node`` with new ``args``, keeping its type when every argument is typed."""
    return node.with_args(args)



def _fold_call(call: Call, orig: Call, kind: int) -> Optional[Expr]:
    """The replacement of an operator call (arguments already folded), or ``None``."""
    if kind == _EVALUATE:
        for a in call.args:
            t = type(a)
            if t is Constant:
                continue
            # only a tuple or an on_device annotation can still be a complex constant
            if (t is not Tuple and not (t is Call and type(a.op) is Op and a.op.name == "on_device")) \
                    or not is_complex_constant(a):
                return None
        return _evaluate(call.op, call.args, call.attrs, orig._checked_type)
    if kind == _SHAPE:
        return _fold_shape_op(call, orig)
    return None


# ---------------------------------------------------------------------------------------
# the rewrite
# ---------------------------------------------------------------------------------------


def fold_constant(expr: Expr, fold_qnn: bool = False) -> Expr:
    """Fold the constants of ``expr`` (usually a ``Function``); see the module docstring.

    :param fold_qnn: also evaluate ``qnn.*`` operators (non-computational otherwise)
    :returns: the folded expression -- ``expr`` itself when nothing folds
    """
    if is_primitive(expr):
        return expr
    with _gc_paused(), np.errstate(all="ignore"):
        return _fold(expr, fold_qnn)


def _fold(expr: Expr, fold_qnn: bool) -> Expr:
    order = post_order(expr, skip=is_primitive)
    # let-bound values, so the constant a value folds to can replace its variable
    # before the let body is rebuilt
    let_vars: dict = {}
    # lets whose value is a variable or constant: resolved when the bound variable is
    # met (the value variable is final by then, though it may have been listed earlier)
    leaf_valued: dict = {}
    for node in order:
        if type(node) is Let:
            value = node.value
            let_vars.setdefault(value, []).append(node.var)
            if type(value) in _LEAVES:
                leaf_valued[node.var] = value
    memo: dict = {}
    get = memo.get
    kinds: dict = {}  # Op -> _SKIP / _EVALUATE / _SHAPE, decided once per operator
    _Call, _Let, _Tuple, _TGI, _Function, _If, _Constant, _Op = (
        Call, Let, Tuple, TupleGetItem, Function, If, Constant, Op)
    for node in order:
        t = type(node)
        if t is _Call:
            op = node.op
            nop = get(op, op)
            args = node.args
            nargs = None
            allc = True  # every (new) argument a Constant
            dead = False  # some argument that cannot be a constant (no Constant/Tuple/Call)
            for i, a in enumerate(args):
                na = get(a, a)
                if na is not a:
                    if nargs is None:
                        nargs = list(args)
                    nargs[i] = na
                ta = type(na)
                if ta is not _Constant:
                    allc = False
                    if ta is not _Call and ta is not _Tuple:
                        dead = True
            if nargs is None and nop is op:
                new = node
            elif allc and type(nop) is _Op and kinds.get(nop) == _EVALUATE:
                # folds: evaluate straight from the new arguments, no intermediate Call
                memo[node] = new = _evaluate(nop, nargs, node.attrs, node._checked_type)
                if node in let_vars:
                    for var in let_vars[node]:
                        memo[var] = new
                continue
            elif nop is op:
                new = _rebuild_call(node, tuple(nargs))
            else:
                new = keep_checked_type(node, Call(nop, args if nargs is None else nargs,
                                             node.attrs if type(nop) is type(op) else None),
                                  args if nargs is None else nargs)
            if type(nop) is _Op and args:
                kind = kinds.get(nop)
                if kind is None:
                    kind = kinds[nop] = _op_kind(nop, fold_qnn)
                if kind and not (dead and kind == _EVALUATE):
                    folded = _fold_call(new, node, kind)
                    if folded is not None:
                        new = folded
        elif t in _LEAVES:
            if leaf_valued:
                lv = leaf_valued.get(node)
                if lv is not None:
                    nv = get(lv, lv)
                    if is_simple_constant(nv):
                        memo[node] = nv
            if node not in let_vars:
                continue
            new = get(node, node)
        elif t is _Let:
            value = get(node.value, node.value)
            body = get(node.body, node.body)
            if is_simple_constant(value):
                new = body  # the variable was already replaced by the constant
            elif value is node.value and body is node.body:
                new = node
            else:
                new = keep_checked_type(node, Let(node.var, value, body), (value, body))
        elif t is _TGI:
            tv = get(node.tuple_value, node.tuple_value)
            inner = _unwrap(tv)
            if type(inner) is _Tuple and node.index < len(inner.fields):
                new = inner.fields[node.index]
            elif tv is node.tuple_value:
                new = node
            else:
                new = keep_checked_type(node, TupleGetItem(tv, node.index), (tv,))
        elif t is _Tuple:
            fields = node.fields
            nfields = [get(f, f) for f in fields]
            if all(a is b for a, b in zip(nfields, fields)):
                new = node
            else:
                new = keep_checked_type(node, Tuple(nfields), nfields)
        elif t is _If:
            cond = get(node.cond, node.cond)
            then = get(node.true_branch, node.true_branch)
            other = get(node.false_branch, node.false_branch)
            c = _unwrap(cond)
            if type(c) is _Constant:
                new = then if c.data.tobytes()[:1] not in (b"", b"\x00") else other
            elif cond is node.cond and then is node.true_branch and other is node.false_branch:
                new = node
            else:
                new = keep_checked_type(node, If(cond, then, other), (cond, then, other))
        elif t is _Function:
            if is_primitive(node):
                continue
            body = get(node.body, node.body)
            if body is node.body:
                new = node
            else:
                new = keep_checked_type(node, Function(node.params, body, node.ret_type, node.attrs), (body,))
        else:  # pragma: no cover - every node kind is handled above
            raise PassError(f"FoldConstant: unknown node kind {t.__name__}", "FoldConstant")
        if new is not node:
            memo[node] = new
        if node in let_vars and is_simple_constant(new):
            for var in let_vars[node]:
                memo[var] = new
    return get(expr, expr)


# ---------------------------------------------------------------------------------------
# the pass
# ---------------------------------------------------------------------------------------


@function_pass(opt_level=2, name="FoldConstant")
class FoldConstant:
    """Fold constant sub-expressions: evaluate operator calls whose arguments are constants.

    Function pass, ``opt_level`` 2. Before / after::

        %0 = add(meta[relay.Constant][0], meta[relay.Constant][0]);   |
        %1 = multiply(%0, 2f);                                        |
        %2 = add(%x, %1);                                             |  %0 = add(%x, meta[relay.Constant][0]);
        add(%2, meta[relay.Constant][0])                              |  add(%0, meta[relay.Constant][1])

    :param fold_qnn: also evaluate ``qnn.*`` operators (default ``False``, as in TVM)
    """

    def __init__(self, fold_qnn: bool = False) -> None:
        if not isinstance(fold_qnn, bool):
            raise PassError(f"FoldConstant: fold_qnn must be True or False, got {fold_qnn!r}",
                            "FoldConstant")
        self.fold_qnn = fold_qnn

    def transform_function(self, func: Function, mod: Any, ctx: Any) -> Function:
        return fold_constant(func, fold_qnn=self.fold_qnn)
