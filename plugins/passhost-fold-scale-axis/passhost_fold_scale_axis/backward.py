"""BackwardFoldScaleAxis: fold ``multiply(chain(conv2d(x, w)), s)`` into ``w``.

TVM's backward fold (``fold_scale_axis.cc``), in three linear, non-recursive sweeps:

1. **prepare** (post-order): the use counts of the host's analysis
   (:func:`passhost.ir.rewrite.use_counts`), then for every call with exactly one
   consumer a *message* -- the output axes that could absorb a per-channel scale:
   ``nn.conv2d`` and ``nn.conv3d`` offer the ``C`` axis of their output layout (``groups == 1`` or
   depthwise), ``nn.dense`` (2-D output) axis 1; ``nn.relu``/``nn.leaky_relu`` pass
   their input's message on with ``require_positive``; ``add``/``subtract`` pass the
   message of the side the other side broadcasts to (or of either side when both carry
   equal axes and have equal shapes); ``nn.bias_add`` passes it when its ``axis``
   attribute equals the single axis;
2. **assign** (reverse post-order): every ``multiply(a, s)`` whose ``a`` has a message
   that ``s`` matches (``MatchBroadcastToLeftAxes``; a non-negative constant when the
   message requires it) pushes the squeezed scale ``s'`` into ``a``, and each chain op
   hands it on to the input(s) carrying the message (``multiply`` tries the left operand's
   message first, then the right one's);
3. **rebuild** (one :func:`passhost.ir.rewrite_post_order` walk over the same order,
   replacements typed like the nodes they replace): a folded ``multiply`` becomes its transformed operand; a
   ``conv2d`` receiving ``s'`` becomes ``conv2d(x, multiply(w, expand_dims(s', axis=1,
   num_newaxis=3)))`` (scale along ``O``; ``num_newaxis=4`` for ``conv3d``), ``dense`` ``dense(x, multiply(w,
   expand_dims(s', axis=1)))``; an ``add``/``subtract`` scales its other side by
   ``expand(s')`` (``multiply(b, ...)``), ``bias_add`` its bias by ``s'``.

Like TVM, the scale expression used is the ``multiply``'s original operand.

Before::

    %0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);
    %1 = add(%0, %b);
    %2 = nn.relu(%1);
    multiply(%2, meta[relay.Constant][0] /* (4, 1, 1), all > 0 */)

After ``BackwardFoldScaleAxis()``::

    %0 = squeeze(meta[relay.Constant][0], axis=[1, 2]);
    %1 = expand_dims(%0, axis=1, num_newaxis=3);
    %2 = multiply(%w, %1);
    %3 = expand_dims(%0, axis=1, num_newaxis=2);
    %4 = nn.conv2d(%x, %2, padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);
    %5 = multiply(%b, %3);
    %6 = add(%4, %5);
    nn.relu(%6)
"""
from __future__ import annotations

from typing import Optional

from passhost import ir
from passhost.ir import Call, Expr, Op, post_order, rewrite_post_order
from passhost.ir import paused_gc as _gc_paused
from passhost.ir import type_of
from passhost.ir.rewrite import use_counts

from ._common import (
    ADDSUB_OPS,
    CONVS,
    DENSE,
    FOLD_SOURCES,
    MULTIPLY,
    RELU_OPS,
    conv_axes,
    dequantized_weight,
    is_all_positive_constant,
    match_broadcast_to_left_axes,
    reshape_or_expand_to_match_axis,
    tensor_type,
)

__all__ = ["backward_fold_scale_axis"]

_NAME = "BackwardFoldScaleAxis"
_BIAS_ADD = Op.get("nn.bias_add")


# ---------------------------------------------------------------------------------------
# 1. prepare
# ---------------------------------------------------------------------------------------


def _prep(call: Call, in_msgs: list) -> Optional[tuple]:
    """``FScaleAxisBackwardPrep`` of one call, or ``None``."""
    op = call.op
    if op in RELU_OPS:
        m = in_msgs[0]
        return None if m is None else (m[0], True)
    if op in ADDSUB_OPS:
        tl = tensor_type(call.args[0], _NAME)
        tr = tensor_type(call.args[1], _NAME)
        m0, m1 = in_msgs
        if m0 is not None and match_broadcast_to_left_axes(tl, tr, m0[0])[0]:
            return m0
        if m1 is not None and match_broadcast_to_left_axes(tr, tl, m1[0])[0]:
            return m1
        if m0 is not None and m1 is not None and m0[0] == m1[0] and tuple(tl.shape) == tuple(tr.shape):
            return m0
        return None
    if (op in CONVS or op is DENSE) and dequantized_weight(call.args[1]):
        return None  # (a quantized weight: see dequantized_weight)
    if op in CONVS:
        found = conv_axes(call, "out_layout")
        return None if found is None else ((found[0],), False)
    if op is DENSE:
        out = type_of(call)
        return ((1,), False) if out is not None and len(out.shape) == 2 else None
    if op is _BIAS_ADD:
        m = in_msgs[0]
        if m is not None and len(m[0]) == 1 and call.attrs.axis == m[0][0]:
            return m
        return None
    return None


_PREP_OPS = RELU_OPS | ADDSUB_OPS | CONVS | {DENSE, _BIAS_ADD}


def _prepare(order: list, root: Expr) -> dict:
    # TVM's GetExprRefCount: how many times each call is used, from the host's use analysis
    refs = use_counts(root)
    messages: dict = {}
    for node in order:
        if type(node) is Call and node.op in _PREP_OPS and refs.get(node, 0) == 1:
            msg = _prep(node, [messages.get(a) for a in node.args])
            if msg is not None:
                messages[node] = msg
    return messages


# ---------------------------------------------------------------------------------------
# 2. assign
# ---------------------------------------------------------------------------------------


def _fold_of_multiply(call: Call, messages: dict) -> Optional[tuple]:
    """``MultiplyBackwardTransform``'s test: ``(operand, message, scale)`` or ``None``."""
    lhs, rhs = call.args
    lm = messages.get(lhs)
    if lm is not None:
        ok, s = match_broadcast_to_left_axes(tensor_type(lhs, _NAME), tensor_type(rhs, _NAME), lm[0], rhs)
        if ok and (not lm[1] or is_all_positive_constant(rhs)):
            return lhs, lm, s
        return None
    rm = messages.get(rhs)
    if rm is not None:
        ok, s = match_broadcast_to_left_axes(tensor_type(rhs, _NAME), tensor_type(lhs, _NAME), rm[0], lhs)
        if ok and (not rm[1] or is_all_positive_constant(lhs)):
            return rhs, rm, s
    return None


def _assign(order: list, messages: dict) -> tuple:
    """``{node: (message, scale)}`` for every node rewritten under a scale, and
    ``{multiply: operand}`` for every folded multiply."""
    assigned: dict = {}
    folded: dict = {}
    for node in reversed(order):
        if type(node) is not Call:
            continue
        op = node.op
        if op is MULTIPLY:
            found = _fold_of_multiply(node, messages)
            if found is not None:
                operand, msg, scale = found
                folded[node] = operand
                assigned[operand] = (msg, scale)
            continue
        got = assigned.get(node)
        if got is None:
            continue
        if op in RELU_OPS or op is _BIAS_ADD:
            assigned[node.args[0]] = got
        elif op in ADDSUB_OPS:
            lm = messages.get(node.args[0])
            rm = messages.get(node.args[1])
            if lm is not None and rm is not None and lm[0] == rm[0]:
                assigned[node.args[0]] = got
                assigned[node.args[1]] = got
            elif lm is not None:
                assigned[node.args[0]] = got
            else:
                assigned[node.args[1]] = got
    return assigned, folded


# ---------------------------------------------------------------------------------------
# 3. rebuild
# ---------------------------------------------------------------------------------------


def _transform(node: Call, new_args: list, got: tuple, messages: dict) -> Expr:
    """The rewrite of a call that receives the scale (its arguments already rebuilt)."""
    msg, scale = got
    axes = msg[0]
    op = node.op
    if op in RELU_OPS:
        return Call(op, new_args, node.attrs)
    if op in ADDSUB_OPS:
        lm = messages.get(node.args[0])
        rm = messages.get(node.args[1])
        lhs, rhs = new_args
        if lm is not None and rm is not None and lm[0] == rm[0]:
            pass
        elif lm is not None:
            shape = tensor_type(node.args[0], _NAME).shape
            rhs = ir.multiply(rhs, reshape_or_expand_to_match_axis(scale, shape, axes))
        else:
            shape = tensor_type(node.args[1], _NAME).shape
            lhs = ir.multiply(lhs, reshape_or_expand_to_match_axis(scale, shape, axes))
        return Call(op, [lhs, rhs], node.attrs)
    if op is _BIAS_ADD:
        return Call(op, [new_args[0], ir.multiply(new_args[1], scale)], node.attrs)
    if op in CONVS:
        o_axis = conv_axes(node, "out_layout")[1]
        wscale = ir.expand_bias_to_match_axis(scale, len(node.attrs.kernel_layout), (o_axis,))
        return Call(op, [new_args[0], ir.multiply(new_args[1], wscale)], node.attrs)
    # nn.dense: the weight is (units, in); scale its rows
    wscale = ir.expand_bias_to_match_axis(scale, 2, (0,))
    return Call(op, [new_args[0], ir.multiply(new_args[1], wscale)], node.attrs)


def backward_fold_scale_axis(expr: Expr) -> Expr:
    """Fold per-channel multiplies after ``conv2d``/``conv3d``/``dense`` into their weights (see the
    module docstring). An untyped ``expr`` is type-inferred first (in place).

    :returns: the rewritten expression -- ``expr`` itself when nothing folds
    """
    with _gc_paused():
        if not expr.has_type:
            ir.infer_type(expr)
        if not ir.calls_any(expr, FOLD_SOURCES):
            return expr  # no conv2d/dense: nothing can fold
        order = post_order(expr)
        messages = _prepare(order, expr)
        if not messages:
            return expr
        assigned, folded = _assign(order, messages)
        if not folded:
            return expr

        def rule(new: Expr, old: Expr) -> Optional[Expr]:
            if type(old) is not Call:
                return None
            operand = folded.get(old)
            if operand is not None:  # the multiply becomes its (transformed) operand
                return new.args[0] if operand is old.args[0] else new.args[1]
            got = assigned.get(old)
            if got is not None:
                return _transform(old, list(new.args), got, messages)
            return None

        return rewrite_post_order(expr, rule, with_original=True, type_like=True, order=order)
