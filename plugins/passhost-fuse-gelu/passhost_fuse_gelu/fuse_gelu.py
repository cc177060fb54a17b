"""FuseGelu: the erf-based GELU, as exporters and Relay's ONNX importer write it, becomes
one ``nn.gelu``::

    multiply(multiply(%x, 0.5f), add(erf(multiply(%x, 0.707107f)), 1f))
    multiply(multiply(%x, add(erf(divide(%x, 1.41421f)), 1f)), 0.5f)      /* PyTorch's export */
    ->  nn.gelu(%x)

The three factors ``x``, ``0.5`` and ``1 + erf(x / sqrt(2))`` may be multiplied in any
order and grouping (``multiply`` and ``add`` match either argument order). The
constants must be scalars equal to 0.5, 1 and 1/sqrt(2) (or sqrt(2) under ``divide``) to
float32 precision; anything else, such as a tanh approximation or another scale, is
left alone.
"""
from __future__ import annotations

import math
from typing import Optional

from passhost import ir
from passhost.ir.pattern import is_op, rule
from passhost.transform import pattern_pass

__all__ = ["FuseGelu", "gelu_rules"]

_RTOL = 1e-5


def _is(c: ir.Expr, value: float, ndim: int) -> bool:
    if not isinstance(c, ir.Constant) or c.data.size != 1 or c.data.ndim > ndim or c.data.dtype.kind != "f":
        return False
    return math.isclose(float(c.data.reshape(())), value, rel_tol=_RTOL)


def _erf_factor(x, one, k_mul, k_div):
    inner = is_op("multiply")(x, k_mul) | is_op("divide")(x, k_div)
    return is_op("add")(is_op("erf")(inner), one)


def _check(x: ir.Expr, half: ir.Expr, one: ir.Expr, k_mul: Optional[ir.Expr] = None,
           k_div: Optional[ir.Expr] = None) -> bool:
    ty = x.checked_type
    if not isinstance(ty, ir.TensorType) or not ty.dtype.startswith("float"):
        return False
    nd = len(ty.shape)
    scale_ok = _is(k_mul, 1 / math.sqrt(2), nd) if k_mul is not None else _is(k_div, math.sqrt(2), nd)
    return scale_ok and _is(half, 0.5, nd) and _is(one, 1.0, nd)


def _replace(x, **_):
    return ir.nn.gelu(x)


def _grouped_x_half(x, half, one, k_mul, k_div):
    return is_op("multiply")(is_op("multiply")(x, half), _erf_factor(x, one, k_mul, k_div))


def _grouped_x_erf(x, half, one, k_mul, k_div):
    return is_op("multiply")(is_op("multiply")(x, _erf_factor(x, one, k_mul, k_div)), half)


def _grouped_half_erf(x, half, one, k_mul, k_div):
    return is_op("multiply")(x, is_op("multiply")(_erf_factor(x, one, k_mul, k_div), half))


def gelu_rules() -> list:
    """One rule per grouping of the three factors."""
    out = []
    for shape in (_grouped_x_half, _grouped_x_erf, _grouped_half_erf):
        def pattern(x, half, one, k_mul, k_div, _shape=shape):
            return _shape(x, half, one, k_mul, k_div)

        out.append(rule(pattern, _replace, _check, name="erf_gelu" + shape.__name__.replace("_grouped", "")))
    return out


def FuseGelu():  # noqa: N802 - TVM-style pass constructor
    """Turn the erf-based GELU ``x * 0.5 * (1 + erf(x / sqrt(2)))``, in any grouping of
    its factors, into ``nn.gelu``."""
    return pattern_pass("FuseGelu", gelu_rules, opt_level=1, doc=FuseGelu.__doc__)
