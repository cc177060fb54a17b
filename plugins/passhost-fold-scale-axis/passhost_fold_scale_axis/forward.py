"""ForwardFoldScaleAxis: fold ``conv2d(chain(multiply(x, s)), w)`` into ``w``.

TVM's forward fold (``fold_scale_axis.cc`` + ``forward_rewrite.cc``), in two linear,
non-recursive sweeps:

1. **prepare** (reverse post-order, consumers first): every consumer sends a *demand*
   to its operands -- ``nn.conv2d`` and ``nn.conv3d`` demand their data's ``C`` axis (``groups == 1`` or
   depthwise; nothing on the weight), ``nn.dense`` (2-D data) axis 1;
   ``nn.relu``/``nn.leaky_relu`` pass their own demand on with ``require_positive``;
   ``add``/``subtract`` pass it to the operand the other one broadcasts to; every
   other consumer, and function bodies, ``let`` values and bodies, ``if`` parts and tuple
   fields, send "nothing". Demands meeting at a shared node are intersected, so one
   unfoldable consumer blocks the fold;
2. **rewrite** (post-order) with temporary *scaled values* ``(value, axes, scale)``:
   a ``multiply`` with a demand that one operand matches (``MatchBroadcastToLeftAxes``;
   a non-negative constant if required) becomes ``(other operand, axes, squeezed
   scale)``; ``relu`` of a scaled value stays scaled; ``add``/``subtract`` with a scaled
   side becomes ``op(value, other / expand(scale))``, still scaled; ``conv2d`` (``conv3d``) of a
   scaled value becomes ``conv2d(value, multiply(w, expand_dims(scale, ...)))`` (scale
   along the kernel's ``I`` axis, ``O`` for depthwise); ``dense`` ``dense(value,
   multiply(w, scale))``. A scaled value reaching any other consumer is *realised* as
   ``multiply(value, expand(scale))``.

   The sweep is one :func:`passhost.ir.rewrite_post_order` walk (replacements typed
   like the nodes they replace). Its memo holds expressions only: a scaled node maps to
   its ``value``, and the scaled value itself is kept beside it, keyed by the original
   node, for the rules of its consumers. Only rule operators ever consume a scaled
   node -- any other consumer sends "nothing", which wins the intersection, so the
   node never gets a demand and is never scaled -- and a rule that does not apply
   realises its scaled arguments (as does the end of the walk for the root).

Before::

    %0 = multiply(%x, meta[relay.Constant][0] /* (4, 1, 1), all > 0 */);
    %1 = nn.relu(%0);
    %2 = add(%1, %b);
    nn.conv2d(%2, %w, padding=[1, 1, 1, 1], channels=2, kernel_size=[3, 3])

After ``ForwardFoldScaleAxis()``::

    %0 = squeeze(meta[relay.Constant][0], axis=[1, 2]);
    %1 = expand_dims(%0, axis=1, num_newaxis=2);
    %2 = nn.relu(%x);
    %3 = divide(%b, %1);
    %4 = expand_dims(%0, axis=1, num_newaxis=2);
    %5 = add(%2, %3);
    %6 = multiply(%w, %4);
    nn.conv2d(%5, %6, padding=[1, 1, 1, 1], channels=2, kernel_size=[3, 3])
"""
from __future__ import annotations

from typing import Optional

from passhost import ir
from passhost.ir import (
    Call,
    Expr,
    Function,
    If,
    Let,
    Op,
    Tuple,
    post_order,
    rewrite_post_order,
)
from passhost.ir import paused_gc as _gc_paused
from passhost.ir import type_of

from ._common import (
    ADDSUB_OPS,
    CONVS,
    DENSE,
    FOLD_SOURCES,
    MULTIPLY,
    RELU_OPS,
    conv_axes,
    dequantized_weight,
    intersect,
    is_all_positive_constant,
    match_broadcast_to_left_axes,
    reshape_or_expand_to_match_axis,
    tensor_type,
    type_like,
)

__all__ = ["forward_fold_scale_axis"]

_NAME = "ForwardFoldScaleAxis"


class _Scaled:
    """TVM's ``ScaledExpr``: the real value is ``value`` scaled by ``scale`` on ``axes``."""

    __slots__ = ("value", "axes", "scale", "shape")

    def __init__(self, value: Expr, axes: tuple, scale: Expr, shape: tuple) -> None:
        self.value = value
        self.axes = axes
        self.scale = scale
        self.shape = shape  # the shape of the scaled value (for realising it)


def _realize(e: object) -> Expr:
    if type(e) is _Scaled:
        return ir.multiply(e.value, reshape_or_expand_to_match_axis(e.scale, e.shape, e.axes))
    return e  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------
# 1. prepare
# ---------------------------------------------------------------------------------------


def _prep(call: Call, out: Optional[tuple]) -> Optional[list]:
    """``FScaleAxisForwardPrep``: the demands sent to the arguments, or ``None`` for an
    operator without a rule (every argument then gets "nothing")."""
    op = call.op
    if op in RELU_OPS:
        return [None if out is None else (out[0], True)]
    if op in ADDSUB_OPS:
        if out is not None:
            tl = tensor_type(call.args[0], _NAME)
            tr = tensor_type(call.args[1], _NAME)
            if match_broadcast_to_left_axes(tl, tr, out[0])[0]:
                return [out, None]
            if match_broadcast_to_left_axes(tr, tl, out[0])[0]:
                return [None, out]
        return [None, None]
    if (op in CONVS or op is DENSE) and dequantized_weight(call.args[1]):
        return [None, None]  # (a quantized weight: see dequantized_weight)
    if op in CONVS:
        found = conv_axes(call, "data_layout")
        return [None if found is None else ((found[0],), False), None]
    if op is DENSE:
        data = type_of(call.args[0])
        ok = data is not None and len(data.shape) == 2
        return [((1,), False) if ok else None, None]
    return None


def _prepare(order: list, root: Expr) -> dict:
    demands: dict = {root: None}

    def update(node: Expr, msg: Optional[tuple]) -> None:
        if node in demands:
            demands[node] = intersect(demands[node], msg)
        else:
            demands[node] = msg

    for node in reversed(order):
        t = type(node)
        if t is Call:
            msgs = _prep(node, demands.get(node)) if type(node.op) is Op else None
            if msgs is None:
                for a in node.args:
                    update(a, None)
            else:
                for a, m in zip(node.args, msgs):
                    update(a, m)
        elif t is Function:
            update(node.body, None)
        elif t is Let:
            update(node.value, None)
            update(node.body, None)
        elif t is If:
            update(node.cond, None)
            update(node.true_branch, None)
            update(node.false_branch, None)
        elif t is Tuple:
            for f in node.fields:
                update(f, None)
    return demands


# ---------------------------------------------------------------------------------------
# 2. rewrite
# ---------------------------------------------------------------------------------------


def _rewrite_call(call: Call, new_args: list, demand: Optional[tuple]) -> Optional[object]:
    """``FScaleAxisForwardRewrite`` of one call: a new expression, a :class:`_Scaled`,
    or ``None`` (no rule applies: rebuild with realised arguments)."""
    op = call.op
    if op is MULTIPLY:
        if demand is None or not demand[0] or any(type(a) is _Scaled for a in new_args):
            return None
        axes, positive = demand
        tl = tensor_type(call.args[0], _NAME)
        tr = tensor_type(call.args[1], _NAME)
        lhs, rhs = new_args
        shape = tuple(tensor_type(call, _NAME).shape)
        ok, s = match_broadcast_to_left_axes(tl, tr, axes, rhs)
        if ok and (not positive or is_all_positive_constant(rhs)):
            return _Scaled(lhs, axes, s, shape)
        ok, s = match_broadcast_to_left_axes(tr, tl, axes, lhs)
        if ok and (not positive or is_all_positive_constant(lhs)):
            return _Scaled(rhs, axes, s, shape)
        return None
    if op in RELU_OPS:
        x = new_args[0]
        if type(x) is not _Scaled:
            return None
        return _Scaled(Call(op, [x.value], call.attrs), x.axes, x.scale, x.shape)
    if op in ADDSUB_OPS:
        sl, sr = new_args
        if (type(sl) is _Scaled) == (type(sr) is _Scaled):
            return None
        tl = tensor_type(call.args[0], _NAME)
        tr = tensor_type(call.args[1], _NAME)
        if type(sl) is _Scaled:
            if not match_broadcast_to_left_axes(tl, tr, sl.axes)[0]:
                return None
            other = ir.divide(sr, reshape_or_expand_to_match_axis(sl.scale, tl.shape, sl.axes))
            return _Scaled(Call(op, [sl.value, other], call.attrs), sl.axes, sl.scale, sl.shape)
        if not match_broadcast_to_left_axes(tr, tl, sr.axes)[0]:
            return None
        other = ir.divide(sl, reshape_or_expand_to_match_axis(sr.scale, tr.shape, sr.axes))
        return _Scaled(Call(op, [other, sr.value], call.attrs), sr.axes, sr.scale, sr.shape)
    if op in CONVS or op is DENSE:
        data, weight = new_args
        if type(data) is not _Scaled or type(weight) is _Scaled:
            return None
        if op is DENSE:
            return Call(op, [data.value, ir.multiply(weight, data.scale)], call.attrs)
        found = conv_axes(call, "data_layout")
        if found is None:
            return None
        _, o_axis, i_axis, depthwise = found
        axis = o_axis if depthwise else i_axis
        wscale = ir.expand_bias_to_match_axis(data.scale, len(call.attrs.kernel_layout), (axis,))
        return Call(op, [data.value, ir.multiply(weight, wscale)], call.attrs)
    return None


_RULE_OPS = RELU_OPS | ADDSUB_OPS | CONVS | {MULTIPLY, DENSE}


def forward_fold_scale_axis(expr: Expr) -> Expr:
    """Fold per-channel multiplies before ``conv2d``/``conv3d``/``dense`` into their weights (see the
    module docstring). An untyped ``expr`` is type-inferred first (in place).

    :returns: the rewritten expression -- ``expr`` itself when nothing folds
    """
    with _gc_paused():
        if not expr.has_type:
            ir.infer_type(expr)
        if not ir.calls_any(expr, FOLD_SOURCES):
            return expr  # no conv2d/dense: nothing can fold
        order = post_order(expr)
        demands = _prepare(order, expr)
        if not any(m is not None and m[0] for m in demands.values()):
            return expr  # no demand anywhere: nothing can fold
        scaled: dict = {}  # original node -> its _Scaled (the memo holds the _Scaled's value)
        sget = scaled.get
        rule_ops = _RULE_OPS

        def rule(new: Expr, old: Expr) -> Optional[Expr]:
            if type(old) is not Call or old.op not in rule_ops:
                return None
            new_args = [sget(a) or n for a, n in zip(old.args, new.args)]
            res = _rewrite_call(old, new_args, demands.get(old))
            if res is None:
                if any(type(a) is _Scaled for a in new_args):
                    return old.with_args(tuple(_realize(a) for a in new_args))
                return None
            if type(res) is _Scaled:
                scaled[old] = res
                return type_like(old, res.value)
            return res

        out = rewrite_post_order(expr, rule, with_original=True, type_like=True, order=order)
        root = sget(expr)
        return out if root is None else _realize(root)
