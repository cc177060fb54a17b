"""Helpers shared by the forward and backward folds (TVM's ``pattern_utils.h`` parts).

* a *message* is ``(axes, require_positive)`` -- the sorted axes that could absorb a
  scale and whether the scale must be a non-negative constant -- or ``None`` ("cannot
  fold"); :func:`intersect` merges two of them;
* :func:`match_broadcast_to_left_axes` is ``MatchBroadcastToLeftAxes``;
* :func:`reshape_or_expand_to_match_axis` (over the host's
  ``ir.expand_bias_to_match_axis``) puts a
  squeezed scale back into broadcasting position;
* :func:`is_all_positive_constant` is ``IsAllPositiveConstant``;
* :func:`conv_axes` reads the channel axes of a ``nn.conv2d``/``nn.conv3d`` call's layouts.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from passhost import ir
from passhost.errors import PassError
from passhost.ir import Call, Constant, Expr, Op, TensorType, children
from passhost.ir import set_checked_type, type_of

__all__ = [
    "Message",
    "intersect",
    "tensor_type",
    "match_broadcast_to_left_axes",
    "reshape_to_match_axis",
    "reshape_or_expand_to_match_axis",
    "is_all_positive_constant",
    "conv_axes",
    "type_like",
    "RELU_OPS",
    "ADDSUB_OPS",
    "MULTIPLY",
    "CONV2D",
    "CONV3D",
    "CONVS",
    "DENSE",
    "FOLD_SOURCES",
    "dequantized_weight",
]

#: the operators both directions have rules for
RELU_OPS = frozenset({Op.get("nn.relu"), Op.get("nn.leaky_relu")})
ADDSUB_OPS = frozenset({Op.get("add"), Op.get("subtract")})
MULTIPLY = Op.get("multiply")
CONV2D = Op.get("nn.conv2d")
CONV3D = Op.get("nn.conv3d")
#: the convolutions folded through (TVM registers the same rules for both)
CONVS = frozenset({CONV2D, CONV3D})
DENSE = Op.get("nn.dense")
#: only these calls start a fold (every other rule passes a message/demand on)
FOLD_SOURCES = frozenset({CONV2D, CONV3D, DENSE})

#: ``(axes, require_positive)``; ``None`` stands for TVM's null message
Message = tuple

_DEQUANTIZE = frozenset({Op.get("qnn.dequantize")})


def dequantized_weight(weight: Expr) -> bool:
    """Whether a convolution's or dense's ``weight`` is computed by ``qnn.dequantize`` (an
    integer weight): a scale folded into it cannot reach the integer constant (FoldConstant
    leaves ``qnn.*`` alone), so it would only multiply the dequantized weight at every run,
    and hide the dequantize from runtimes that fuse it into their integer product. Neither
    direction folds into such a weight."""
    return ir.calls_any(weight, _DEQUANTIZE)

_PEEL = frozenset(Op.get(n) for n in ("expand_dims", "reshape", "transpose", "squeeze"))
_POSITIVE_DTYPES = frozenset({"float32", "float64", "int8", "int32", "uint8", "uint32"})


def intersect(lhs: Optional[Message], rhs: Optional[Message]) -> Optional[Message]:
    """Merge two messages: axes intersected, ``require_positive`` or-ed; ``None`` wins."""
    if lhs is None or rhs is None:
        return None
    keep = set(rhs[0])
    return (tuple(a for a in lhs[0] if a in keep), lhs[1] or rhs[1])


def tensor_type(expr: Expr, who: str) -> TensorType:
    """The inferred tensor type of an original (typed) node."""
    ty = type_of(expr)
    if type(ty) is not TensorType:
        raise PassError(f"{who}: expected a typed tensor expression, got type {ty}; "
                        f"run InferType before {who}", who)
    return ty


def match_broadcast_to_left_axes(tlhs: TensorType, trhs: TensorType, axes: Sequence[int],
                                 rhs: Optional[Expr] = None) -> tuple:
    """TVM's ``MatchBroadcastToLeftAxes``: can ``rhs`` (type ``trhs``) broadcast against
    ``tlhs`` with its non-1 dimensions exactly on ``axes`` (equal to ``tlhs``'s there)?

    :param rhs: when given, also build the scale as a tensor over ``axes`` only:
        ``squeeze(rhs, axis=[the 1-dims])``; a rank-0 ``rhs`` is broadcast to the axes'
        sizes (TVM: ``repeat(expand_dims(rhs, 0, k), ...)``; passhost has no ``repeat``
        operator, so ``multiply(rhs, ones)`` with a constant of ones)
    :returns: ``(matches, squeezed rhs or None)``
    """
    ls, rs = tlhs.shape, trhs.shape
    if len(ls) < len(rs):
        return False, None
    base = len(ls) - len(rs)
    if not rs and rhs is not None and axes:
        if any(type(ls[a]) is not int for a in axes):  # a scale along a symbolic axis: not folded
            return False, None
        ones = np.ones(tuple(ls[a] for a in axes), dtype=trhs.dtype)
        return True, ir.multiply(rhs, Constant(ones))
    j = 0
    squeeze = []
    naxes = len(axes)
    for i in range(len(ls)):
        if j < naxes and i == axes[j]:
            if i < base or ls[i] != rs[i - base]:
                return False, None
            j += 1
        elif i >= base:
            if rs[i - base] != 1:
                return False, None
            squeeze.append(i - base)
    if rhs is not None and squeeze:
        rhs = ir.squeeze(rhs, axis=squeeze)
    return True, rhs


def reshape_to_match_axis(scale: Expr, shape: Sequence[int], axes: Sequence[int]) -> Expr:
    """TVM's ``ReshapeToMatchAxis``: ``reshape(scale, [shape[i] if i in axes else 1])``."""
    return ir.reshape(scale, [d if i in axes else 1 for i, d in enumerate(shape)])


def reshape_or_expand_to_match_axis(scale: Expr, shape: Sequence[int], axes: Sequence[int]) -> Expr:
    """One axis: ``ir.expand_bias_to_match_axis``; several: :func:`reshape_to_match_axis`."""
    if len(axes) > 1:
        return reshape_to_match_axis(scale, shape, axes)
    return ir.expand_bias_to_match_axis(scale, len(shape), axes)


def is_all_positive_constant(expr: Expr) -> bool:
    """TVM's ``IsAllPositiveConstant``: a constant (seen through ``expand_dims``,
    ``reshape``, ``transpose``, ``squeeze``) of dtype float32/float64/int8/int32/uint8/
    uint32 whose elements are all ``>= 0``."""
    while type(expr) is Call and expr.op in _PEEL:
        expr = expr.args[0]
    if type(expr) is not Constant or expr.dtype not in _POSITIVE_DTYPES:
        return False
    data = expr.data
    # the smallest element (NaN if there is one, and NaN >= 0 is false), without the
    # temporary array and the reduction machinery of np.all(data >= 0)
    return data.size == 0 or bool(data.min() >= 0)


#: (layout, kernel layout) -> (C axis, O axis, I axis), or () when TVM does not fold
_LAYOUT_AXES: dict = {}


def conv_axes(call: Call, layout_attr: str) -> Optional[tuple]:
    """For a ``nn.conv2d`` or ``nn.conv3d`` call: ``(channel axis of layout_attr's layout, kernel O axis,
    kernel I axis, is_depthwise)``, or ``None`` when TVM does not fold through it
    (grouped but not depthwise, or a blocked layout -- passhost's convolutions have none).

    :param layout_attr: ``"data_layout"`` (forward) or ``"out_layout"`` (backward; an
        empty ``out_layout`` means the data layout)
    """
    attrs = call.attrs  # item access: Attrs' attribute access is a slow __getattr__ fallback
    layout = attrs.get(layout_attr) or attrs["data_layout"]
    kernel_layout = attrs["kernel_layout"]
    axes = _LAYOUT_AXES.get((layout, kernel_layout))
    if axes is None:
        if not (layout.isupper() and kernel_layout.isupper()) or "C" not in layout:
            axes = ()
        else:
            axes = (layout.index("C"), kernel_layout.index("O"), kernel_layout.index("I"))
        if len(_LAYOUT_AXES) < 256:
            _LAYOUT_AXES[(layout, kernel_layout)] = axes
    if not axes:
        return None
    wty = type_of(call.args[1])
    if type(wty) is not TensorType:
        return None
    groups = attrs["groups"]
    shape = wty.shape
    depthwise = shape[axes[1]] == groups and shape[axes[2]] == 1  # weight O == groups, I == 1
    if groups != 1 and not depthwise:
        return None
    return axes[0], axes[1], axes[2], depthwise


def type_like(old: Expr, new: Expr) -> Expr:
    """Type ``new``, which replaces ``old`` and has its type (both folds preserve every
    shape), without a second full inference: a rebuilt node whose children are typed
    takes ``old``'s type; a new sub-expression over typed nodes is inferred locally (only
    its untyped nodes are visited). So the InferType after the pass has nothing to redo.
    """
    if new.has_type:
        return new
    for c in children(new):
        if not c.has_type and type(c) is not Op:
            ir.infer_type(new)
            return new
    if old.has_type:
        set_checked_type(new, old.checked_type)
    return new

