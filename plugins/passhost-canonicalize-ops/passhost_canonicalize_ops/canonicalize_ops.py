"""CanonicalizeOps: rewrite ``nn.bias_add`` into a broadcast ``add``.

TVM's ``relay.transform.CanonicalizeOps`` (``canonicalize_ops.cc``): a function pass
(``opt_level`` 3, requires ``InferType``) that replaces every
``nn.bias_add(x, b, axis)`` by ``add(x, expand_dims(b, axis=1, num_newaxis=n-axis-1))``
for an ``n``-D ``x`` (a negative ``axis`` counts from the end); when ``n-axis-1`` is 0
the bias is added as it is, without an ``expand_dims``. The new ``add`` keeps the type
of the ``bias_add`` it replaces.

The rewrite is one iterative post-order walk (:func:`passhost.ir.post_order`, no
Python frame per node), linear in the graph size; when there is no ``bias_add`` the
function object is returned unchanged.

Before::

    def @main(%x: Tensor[(1, 4, 5, 5), float32], %b: Tensor[(4), float32]) {
      nn.bias_add(%x, %b)
    }

After ``CanonicalizeOps()``::

    def @main(%x: Tensor[(1, 4, 5, 5), float32], %b: Tensor[(4), float32]) -> Tensor[(1, 4, 5, 5), float32] {
      %0 = expand_dims(%b, axis=1, num_newaxis=2);
      add(%x, %0)
    }
"""
from __future__ import annotations

from typing import Any

from passhost import ir
from passhost.errors import PassError
from passhost.ir import Call, Constant, Expr, Function, GlobalVar, Op, TensorType, Var, children, post_order, with_children
from passhost.ir._gc import paused as _gc_paused
from passhost.transform import function_pass

__all__ = ["canonicalize_ops", "expand_bias_to_match_axis", "CanonicalizeOps"]

_BIAS_ADD = Op.get("nn.bias_add")
_LEAVES = (Var, Constant, Op, GlobalVar)


def expand_bias_to_match_axis(bias: Expr, ndim: int, axis: int) -> Expr:
    """TVM's ``ExpandBiasToMatchAxis`` for one axis: ``expand_dims(bias, axis=1,
    num_newaxis=ndim-axis-1)``, or ``bias`` itself when that number is 0."""
    num = ndim - axis - 1
    if num > 0:
        return ir.expand_dims(bias, axis=1, num_newaxis=num)
    return bias


def _bias_add_to_add(new: Call, old: Call) -> Expr:
    ty = old.args[0]._checked_type or new.args[0]._checked_type
    if type(ty) is not TensorType:
        raise PassError(f"CanonicalizeOps: the data of nn.bias_add has no tensor type ({ty}); "
                        "run InferType before CanonicalizeOps", "CanonicalizeOps")
    ndim = len(ty.shape)
    axis = new.attrs.axis
    if axis < 0:
        axis += ndim
    data, bias = new.args
    expanded = expand_bias_to_match_axis(bias, ndim, axis)
    out = ir.add(data, expanded)
    # keep the bias_add's type, as TVM does (ret->checked_type_ = n->checked_type_) --
    # but only when every sub-expression is typed too (the host's typing invariant)
    bty = bias._checked_type
    if old._checked_type is not None and data._checked_type is not None and type(bty) is TensorType:
        if expanded is not bias:
            expanded._set_checked_type(TensorType(tuple(bty.shape) + (1,) * (ndim - axis - 1), bty.dtype))
        out._set_checked_type(old._checked_type)
    return out


def canonicalize_ops(expr: Expr) -> Expr:
    """Replace every ``nn.bias_add`` of ``expr`` by ``add`` + ``expand_dims``.

    An untyped ``expr`` is type-inferred first (in place): the rule needs the data's rank.

    :returns: the rewritten expression -- ``expr`` itself when it has no ``bias_add``
    :raises PassError: if a ``bias_add``'s data has no tensor type
    """
    with _gc_paused():
        if not expr.has_type:
            ir.infer_type(expr)
        memo: dict = {}
        get = memo.get
        for node in post_order(expr):
            t = type(node)
            if t is Call:
                args = node.args
                nargs = None
                for i, a in enumerate(args):
                    na = get(a, a)
                    if na is not a:
                        if nargs is None:
                            nargs = list(args)
                        nargs[i] = na
                new = node if nargs is None else Call(node.op, nargs, node.attrs)
                if node.op is _BIAS_ADD:
                    new = _bias_add_to_add(new, node)
            elif t in _LEAVES:
                continue
            else:
                new = with_children(node, tuple(get(c, c) for c in children(node)))
            if new is not node:
                memo[node] = new
                _keep_type(node, new)
        return get(expr, expr)


def _keep_type(old: Expr, new: Expr) -> None:
    """A rebuilt node keeps ``old``'s type when its children are typed (the rewrite
    preserves types), so the InferType after the pass has nothing to redo."""
    ty = old._checked_type
    if ty is None or new._checked_type is not None:
        return
    for c in children(new):
        if c._checked_type is None and type(c) is not Op:
            return
    new._set_checked_type(ty)


@function_pass(opt_level=3, name="CanonicalizeOps", required=["InferType"])
class CanonicalizeOps:
    """Rewrite ``nn.bias_add(x, b, axis)`` into ``add(x, expand_dims(b, ...))``."""

    def transform_function(self, func: Function, mod: Any, ctx: Any) -> Function:
        if not func.has_type:  # called directly, without its required InferType
            ir.infer_type(mod)
        return canonicalize_ops(func)
