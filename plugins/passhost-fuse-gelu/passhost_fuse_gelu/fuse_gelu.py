"""FuseGelu: the erf-based GELU, as exporters and Relay's ONNX importer write it, becomes
one ``nn.gelu``::

    multiply(multiply(%x, 0.5f), add(erf(multiply(%x, 0.707107f)), 1f))
    multiply(multiply(%x, add(erf(divide(%x, 1.41421f)), 1f)), 0.5f)      /* PyTorch's export */
    ->  nn.gelu(%x)

and so does its tanh approximation (GPT-2's ``gelu_new``, ``approximate="tanh"`` in PyTorch)::

    multiply(multiply(%x, 0.5f), add(tanh(multiply(add(%x, multiply(power(%x, 3f), 0.044715f)),
                                                   0.797885f)), 1f))
    ->  nn.gelu(%x, approximate="tanh")

The three factors ``x``, ``0.5`` and ``1 + erf(x / sqrt(2))`` may be multiplied in any
order and grouping (``multiply`` and ``add`` match either argument order). The
constants must be scalars equal to 0.5, 1 and 1/sqrt(2) (or sqrt(2) under ``divide``) to
float32 precision (the tanh form: 0.5, 1, 0.044715 and sqrt(2/pi), the cube as ``power(x, 3)``
or ``x * x * x``); anything else, such as another scale, is left alone.
"""
from __future__ import annotations

import math
from typing import Optional

from passhost import ir
from passhost.ir.pattern import is_op, rule
from passhost.transform import pattern_pass

__all__ = ["FuseGelu", "gelu_rules"]

_RTOL = 1e-5


#: a constant of a half type is the float rounded to it: within one step (its unit in the last place)
_HALF_RTOL = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}


def _is(c: ir.Expr, value: float, ndim: int) -> bool:
    if not isinstance(c, ir.Constant) or c.data.size != 1 or c.data.ndim > ndim:
        return False
    name = c.data.dtype.name
    if c.data.dtype.kind != "f" and name != "bfloat16":
        return False
    return math.isclose(float(c.data.reshape(())), value, rel_tol=_HALF_RTOL.get(name, _RTOL))


def _erf_factor(x, one, k_mul, k_div):
    inner = is_op("multiply")(x, k_mul) | is_op("divide")(x, k_div)
    return is_op("add")(is_op("erf")(inner), one)


def _check(x: ir.Expr, half: ir.Expr, one: ir.Expr, k_mul: Optional[ir.Expr] = None,
           k_div: Optional[ir.Expr] = None) -> bool:
    ty = x.checked_type
    if not isinstance(ty, ir.TensorType) or not ty.dtype.startswith(("float", "bfloat")):
        return False
    nd = len(ty.shape)
    scale_ok = _is(k_mul, 1 / math.sqrt(2), nd) if k_mul is not None else _is(k_div, math.sqrt(2), nd)
    return scale_ok and _is(half, 0.5, nd) and _is(one, 1.0, nd)


def _replace(x, **_):
    return ir.nn.gelu(x)


def _tanh_factor(x, one, k_cube, k_outer, three):
    cube = is_op("power")(x, three) | is_op("multiply")(x, is_op("multiply")(x, x))
    inner = is_op("add")(x, is_op("multiply")(cube, k_cube))
    return is_op("add")(is_op("tanh")(is_op("multiply")(inner, k_outer)), one)


def _check_tanh(x: ir.Expr, half: ir.Expr, one: ir.Expr, k_cube: ir.Expr, k_outer: ir.Expr,
                three: Optional[ir.Expr] = None) -> bool:
    ty = x.checked_type
    if not isinstance(ty, ir.TensorType) or not ty.dtype.startswith(("float", "bfloat")):
        return False
    nd = len(ty.shape)
    return (_is(half, 0.5, nd) and _is(one, 1.0, nd) and _is(k_cube, 0.044715, nd)
            and _is(k_outer, math.sqrt(2 / math.pi), nd) and (three is None or _is(three, 3.0, nd)))


def _replace_tanh(x, **_):
    return ir.nn.gelu(x, approximate="tanh")


def _grouped_x_half(x, half, factor):
    return is_op("multiply")(is_op("multiply")(x, half), factor)


def _grouped_x_erf(x, half, factor):
    return is_op("multiply")(is_op("multiply")(x, factor), half)


def _grouped_half_erf(x, half, factor):
    return is_op("multiply")(x, is_op("multiply")(factor, half))


def gelu_rules() -> list:
    """One rule per grouping of the three factors, for the erf form and for the tanh one."""
    out = []
    for shape in (_grouped_x_half, _grouped_x_erf, _grouped_half_erf):
        def pattern(x, half, one, k_mul, k_div, _shape=shape):
            return _shape(x, half, _erf_factor(x, one, k_mul, k_div))

        out.append(rule(pattern, _replace, _check, name="erf_gelu" + shape.__name__.replace("_grouped", "")))
    for shape in (_grouped_x_half, _grouped_x_erf, _grouped_half_erf):
        def pattern(x, half, one, k_cube, k_outer, three, _shape=shape):
            return _shape(x, half, _tanh_factor(x, one, k_cube, k_outer, three))

        r = rule(pattern, _replace_tanh, _check_tanh, name="tanh_gelu" + shape.__name__.replace("_grouped", ""))
        r.examples = _tanh_examples(shape)  # (its constants are not among the checker's special values)
        out.append(r)
    return out


def _tanh_examples(shape):
    """``examples(rng)`` for check-rules: the tanh GELU of random shapes in this grouping."""
    def build(x, half, factor):
        if shape is _grouped_x_half:
            return ir.multiply(ir.multiply(x, half), factor)
        if shape is _grouped_x_erf:
            return ir.multiply(ir.multiply(x, factor), half)
        return ir.multiply(x, ir.multiply(factor, half))

    def examples(rng):
        x = ir.var("x", shape=tuple(int(d) for d in rng.randint(1, 5, size=rng.randint(1, 4))))
        c = ir.const
        cube = ir.power(x, c(3.0)) if rng.rand() < 0.5 else ir.multiply(x, ir.multiply(x, x))
        inner = ir.multiply(ir.add(x, ir.multiply(cube, c(0.044715))), c(math.sqrt(2 / math.pi)))
        return [ir.Function([x], build(x, c(0.5), ir.add(ir.tanh(inner), c(1.0))))]

    return examples


def FuseGelu():  # noqa: N802 - TVM-style pass constructor
    """Turn the erf-based GELU ``x * 0.5 * (1 + erf(x / sqrt(2)))`` and its tanh
    approximation, in any grouping of their factors, into ``nn.gelu``."""
    return pattern_pass("FuseGelu", gelu_rules, opt_level=1, doc=FuseGelu.__doc__)
