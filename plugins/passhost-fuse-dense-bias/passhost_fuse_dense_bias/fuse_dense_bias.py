"""FuseDenseBias: ``MatMul`` + ``Add`` as exporters write a linear layer becomes the
dense layer with a bias that TVM's backends and pattern tables look for::

    add(nn.matmul(%x, %w), %b)          /* %w: (K, N) constant, %b: (N) or (1, .., N) */
    add(%b, nn.dense(%x, %wt))
    ->  nn.bias_add(nn.dense(%x, %wt), %b, axis=-1)

It is legal only when the bias varies along the output's last axis alone and has the
product's dtype, and (for ``nn.matmul``) when the weight is a constant 2-D matrix, which
is transposed once into ``nn.dense``'s ``(units, in)`` layout. A bias that broadcasts
along another axis, or a weight that is computed, is left alone.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from passhost import ir
from passhost.ir.pattern import DFPatternCallback, is_op, wildcard
from passhost.transform import pattern_pass

__all__ = ["DenseBiasRule", "FuseDenseBias"]


def _bias_vector(b: ir.Expr, ndim: int, units: int, dtype: str) -> Optional[ir.Expr]:
    ty = b.checked_type
    if not isinstance(ty, ir.TensorType) or ty.dtype != dtype or len(ty.shape) > ndim or not ty.is_static:
        return None
    shape = tuple(ty.shape)
    if not shape or shape[-1] != units or any(d != 1 for d in shape[:-1]):
        return None
    if len(shape) == 1:
        return b
    if isinstance(b, ir.Constant):
        return ir.Constant(np.ascontiguousarray(b.data.reshape(units)))
    return ir.reshape(b, (units,))


class DenseBiasRule(DFPatternCallback):
    """``add(dense-or-matmul(x, w), b)`` -> ``nn.bias_add(nn.dense(x, w'), b, axis=-1)``."""

    def __init__(self) -> None:
        super().__init__(require_type=True, name="matmul_add_to_dense_bias")
        self.x, self.w, self.b = wildcard(), wildcard(), wildcard()
        self.product = is_op("nn.dense")(self.x, self.w) | is_op("nn.matmul")(self.x, self.w)
        self.pattern = is_op("add")(self.product, self.b)

    def callback(self, pre, post, node_map):
        product = node_map[self.product][0]
        out = product.checked_type
        if not isinstance(out, ir.TensorType) or not out.shape or type(out.shape[-1]) is not int:
            return None
        bias = _bias_vector(node_map[self.b][0], len(out.shape), out.shape[-1], out.dtype)
        if bias is None:
            return None
        if product.op.name == "nn.matmul":
            a = product.attrs
            w = node_map[self.w][0]
            if a.transpose_a or not isinstance(w, ir.Constant) or w.data.ndim != 2 or a.out_dtype:
                return None
            weight = w if a.transpose_b else ir.Constant(np.ascontiguousarray(w.data.T))
            product = ir.nn.dense(node_map[self.x][0], weight)
        return ir.nn.bias_add(product, bias, axis=-1)


def FuseDenseBias():  # noqa: N802 - TVM-style pass constructor
    """Turn ``add(nn.matmul(x, W), b)`` / ``add(nn.dense(x, W), b)`` with a bias along the
    last axis into ``nn.bias_add(nn.dense(x, W), b, axis=-1)``."""
    return pattern_pass("FuseDenseBias", lambda: [DenseBiasRule()], opt_level=1, doc=FuseDenseBias.__doc__)
