"""CanonicalizeOps: rewrite ``nn.bias_add`` into a broadcast ``add``.

TVM's ``relay.transform.CanonicalizeOps`` (``canonicalize_ops.cc``): a function pass
(``opt_level`` 3, requires ``InferType``) that replaces every
``nn.bias_add(x, b, axis)`` by ``add(x, expand_dims(b, axis=1, num_newaxis=n-axis-1))``
for an ``n``-D ``x`` (a negative ``axis`` counts from the end); when ``n-axis-1`` is 0
the bias is added as it is, without an ``expand_dims``. The new ``add`` keeps the type
of the ``bias_add`` it replaces.

The rewrite is one :func:`passhost.ir.rewrite_post_order` walk (explicit stack, no
Python frame per node, linear in the graph size) whose rule sees the original
``bias_add`` too (its data's type gives the rank); rebuilt nodes keep their types
(``keep_types``). When there is no ``bias_add`` (:func:`passhost.ir.calls_any`, no walk
when none was ever built) the function object is returned unchanged.

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

from typing import Any, Optional

from passhost import ir
from passhost.errors import PassError
from passhost.ir import Call, Expr, Function, Op, TensorType, rewrite_post_order
from passhost.ir._gc import paused as _gc_paused
from passhost.transform import function_pass

__all__ = ["canonicalize_ops", "expand_bias_to_match_axis", "CanonicalizeOps"]

_BIAS_ADD = Op.get("nn.bias_add")
_TARGETS = frozenset({_BIAS_ADD})


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
        if not ir.calls_any(expr, _TARGETS):
            return expr  # no bias_add: nothing to rewrite
        return rewrite_post_order(expr, _rule, keep_types=True, with_original=True)


def _rule(new: Expr, old: Expr) -> Optional[Expr]:
    if type(old) is Call and old.op is _BIAS_ADD:
        return _bias_add_to_add(new, old)
    return None


@function_pass(opt_level=3, name="CanonicalizeOps", required=["InferType"], preserves_types=True)
class CanonicalizeOps:
    """Rewrite ``nn.bias_add(x, b, axis)`` into ``add(x, expand_dims(b, ...))``."""

    def transform_function(self, func: Function, mod: Any, ctx: Any) -> Function:
        if not func.has_type:  # called directly, without its required InferType
            ir.infer_type(mod)
        return canonicalize_ops(func)
