"""Shaping a per-axis tensor so that it broadcasts against a bigger one (TVM's
``ExpandBiasToMatchAxis``), the step every pass that unpacks a bias, a batch norm or a
folded scale takes::

    expand_bias_to_match_axis(%b, 4, 1)        # %b: Tensor[(16), float32], NCHW channels
    ->  expand_dims(%b, axis=1, num_newaxis=2)  # Tensor[(16, 1, 1), float32]
"""
from __future__ import annotations

from typing import Sequence, Union

from .expr import Call, Expr
from .op import Op

__all__ = ["expand_bias_to_match_axis"]


def expand_bias_to_match_axis(bias: Expr, ndim: int, axes: Union[int, Sequence[int]]) -> Expr:
    """``bias``, laid over ``axes`` (non-negative, increasing) of an ``ndim``-D tensor, with
    the size-1 axes added that make it broadcast there: after the last axis
    ``ndim - axes[-1] - 1`` of them, between two axes as many as lie between them. A
    tensor that needs none is returned as it is."""
    if isinstance(axes, int):
        axes = (axes,)
    expand_dims = Op.get("expand_dims")
    for i in range(len(axes), 0, -1):
        num = ndim - axes[i - 1] - 1 if i == len(axes) else axes[i] - axes[i - 1] - 1
        if num > 0:
            bias = Call(expand_dims, (bias,), {"axis": i, "num_newaxis": int(num)})
    return bias
