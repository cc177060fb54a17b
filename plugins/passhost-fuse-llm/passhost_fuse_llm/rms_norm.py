"""FuseRMSNorm: the RMS normalisation that Llama, Qwen2, Mistral and T5 exports spell out in
six operators becomes one ``nn.rms_norm`` (ONNX's ``RMSNormalization``, opset 23)::

    %v = mean(power(%x, 2f), axis=[-1], keepdims=True);    /* or multiply(%x, %x) */
    %n = multiply(%x, divide(1f, sqrt(add(%v, 1e-06f))));  /* or rsqrt(...), or divide(%x, sqrt(...)) */
    multiply(%gamma, %n)
    ->  nn.rms_norm(%x, %gamma, epsilon=1e-06f)

The mean may reduce several trailing axes (every axis from the first it reduces to the last);
``gamma`` is any tensor of the data's dtype that broadcasts against those axes only. Without
``gamma`` the normalisation fuses with a ``[1f]`` scale, and a scale multiplied afterwards joins
it (``ScaleIntoRMSNorm``). A graph that is close but not equal stays: an epsilon outside the
square root, an exponent other than 2, a mean without ``keepdims`` or over leading axes, two
different ``x``.

A half-precision model (Hugging Face's ``x.to(float32)`` ... ``weight * x.to(input_dtype)``,
exported in float16 or bfloat16) normalises in float32 between two casts and scales after the
cast back; once the float32 part is fused, ``HalfRMSNorm`` takes the casts and the scale in::

    %w = nn.rms_norm(cast(%x, dtype="float32"), 1f, epsilon=1e-06f);  /* %x: float16 */
    multiply(%gamma, cast(%w, dtype="float16"))
    ->  nn.rms_norm(%x, %gamma, epsilon=1e-06f)

exactly: ``nn.rms_norm`` on half data is that computation (it rounds the normalised value to
the half type, then multiplies by ``gamma`` in it; ONNX's ``RMSNormalization`` is defined so).
A residual stream kept in float32 (normalised there, cast to the half type after) stays as it is.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from passhost import ir
from passhost.ir.pattern import DFPatternCallback, is_constant, is_op, wildcard
from passhost.transform import pattern_pass

from ._shared import is_float_tensor, same, scalar, shape_of

__all__ = ["RMSNormRule", "ScaleIntoRMSNorm", "HalfRMSNorm", "FuseRMSNorm"]


def _trailing_axes(mean: ir.Call, ndim: int) -> Optional[int]:
    """The first axis of a keepdims mean over the trailing axes ``axis..ndim-1``, else None."""
    a = mean.attrs
    if not a.keepdims or a.exclude or a.axis is None:
        return None
    axes = sorted({int(x) % ndim for x in a.axis})
    return axes[0] if axes == list(range(axes[0], ndim)) else None


def _broadcasts_on_tail(scale: ir.Expr, tail: tuple, dtype: str) -> bool:
    """``scale`` has ``dtype`` and broadcasts against the normalised axes ``tail`` only."""
    ty = ir.type_of(scale)
    if not isinstance(ty, ir.TensorType) or ty.dtype != dtype or len(ty.shape) > len(tail):
        return False
    return all(d == 1 or same(d, t) for d, t in zip(tuple(ty.shape)[::-1], tail[::-1]))


class RMSNormRule(DFPatternCallback):
    """``x / sqrt(mean(x^2) + eps) * gamma`` over trailing axes -> ``nn.rms_norm``."""

    def __init__(self) -> None:
        super().__init__(require_type=True, name="decomposed_rms_norm")
        self.x, self.two, self.eps, self.one, self.gamma = (wildcard(), is_constant(), is_constant(), is_constant(),
                                                            wildcard())
        square = is_op("power")(self.x, self.two) | is_op("multiply")(self.x, self.x)
        self.mean = is_op("mean")(square)
        shifted = is_op("add")(self.mean, self.eps)
        self.norm = (is_op("multiply")(self.x, is_op("divide")(self.one, is_op("sqrt")(shifted)))
                     | is_op("multiply")(self.x, is_op("rsqrt")(shifted))
                     | is_op("divide")(self.x, is_op("sqrt")(shifted)))
        self.pattern = is_op("multiply")(self.norm, self.gamma) | self.norm

    def callback(self, pre, post, node_map):
        x = node_map[self.x][0]
        if not is_float_tensor(x) or not shape_of(x):
            return None
        shape, dtype = shape_of(x), ir.type_of(x).dtype
        axis = _trailing_axes(node_map[self.mean][0], len(shape))
        if axis is None:
            return None
        if self.two in node_map and scalar(node_map[self.two][0]) != 2.0:
            return None
        if self.one in node_map and scalar(node_map[self.one][0]) != 1.0:
            return None
        eps = scalar(node_map[self.eps][0])
        if eps is None or not eps >= 0:
            return None
        if self.gamma in node_map:
            gamma = node_map[self.gamma][0]
            if not _broadcasts_on_tail(gamma, shape[axis:], dtype):
                return None
        else:
            gamma = ir.const(np.ones(1, dtype))
        return ir.nn.rms_norm(x, gamma, axis=axis - len(shape), epsilon=eps)

    def examples(self, rng):
        """Decomposed RMS normalisations of random sizes, in the spellings exporters write."""
        dims = tuple(int(d) for d in rng.randint(1, 6, size=rng.randint(2, 4)))
        x = ir.var("x", shape=dims)
        n_axes = 1 if rng.rand() < 0.7 else 2
        axes = list(range(len(dims) - n_axes, len(dims)))
        square = ir.power(x, ir.const(2.0)) if rng.rand() < 0.5 else ir.multiply(x, x)
        shifted = ir.add(ir.mean(square, axis=[a - len(dims) for a in axes], keepdims=True),
                         ir.const(float(rng.choice([1e-6, 1e-5, 0.5]))))
        kind = rng.randint(3)
        norm = (ir.multiply(x, ir.divide(ir.const(1.0), ir.sqrt(shifted))) if kind == 0 else
                ir.multiply(x, ir.rsqrt(shifted)) if kind == 1 else ir.divide(x, ir.sqrt(shifted)))
        params = [x]
        if rng.rand() < 0.8:
            g = ir.var("g", shape=dims[-n_axes:])
            params.append(g)
            norm = ir.multiply(g, norm) if rng.rand() < 0.5 else ir.multiply(norm, g)
        return [ir.Function(params, norm)]


class ScaleIntoRMSNorm(DFPatternCallback):
    """``multiply(nn.rms_norm(x, ones), scale)`` -> ``nn.rms_norm(x, scale)``, and with a constant
    ``gamma`` and a constant scale along the normalised axes ``nn.rms_norm(x, gamma * scale)``:
    the scale a normalisation fused without ``gamma`` left outside (exactly: ``1 * s`` is ``s``)."""

    def __init__(self) -> None:
        super().__init__(require_type=True, name="scale_into_rms_norm")
        self.gamma, self.scale = wildcard(), wildcard()
        self.norm = is_op("nn.rms_norm")(wildcard(), self.gamma)
        self.pattern = is_op("multiply")(self.norm, self.scale)

    def callback(self, pre, post, node_map):
        norm, gamma, scale = node_map[self.norm][0], node_map[self.gamma][0], node_map[self.scale][0]
        shape = shape_of(norm)
        if shape is None:
            return None
        tail = shape[int(norm.attrs.axis) % len(shape):]
        dtype = ir.type_of(norm).dtype
        if not _broadcasts_on_tail(scale, tail, dtype):
            return None
        if isinstance(gamma, ir.Constant) and np.all(gamma.data == 1):
            new = scale  # (the op broadcasts it as the product with ones would be)
        elif isinstance(gamma, ir.Constant) and isinstance(scale, ir.Constant) and not _is_half(dtype):
            # (in a half type the two products round twice: gamma * scale once would differ)
            new = ir.const((gamma.data * scale.data).astype(dtype))
        else:
            return None
        return ir.Call(norm.op, [norm.args[0], new], norm.attrs)

    def examples(self, rng):
        d = int(rng.randint(1, 6))
        x = ir.var("x", shape=(2, d))
        norm = ir.nn.rms_norm(x, ir.const(np.ones(1, "float32")), epsilon=1e-6)
        s = ir.var("s", shape=(d,)) if rng.rand() < 0.5 else ir.const(rng.randn(d).astype("float32"))
        params = [x] + ([s] if isinstance(s, ir.Var) else [])
        return [ir.Function(params, ir.multiply(norm, s) if rng.rand() < 0.5 else ir.multiply(s, norm))]


def _is_half(dtype: str) -> bool:
    """A float type narrower than float32 (float16, bfloat16, float8): nn.rms_norm rounds twice."""
    return np.dtype(dtype).itemsize < 4


def _is_ones(e: ir.Expr) -> bool:
    return isinstance(e, ir.Constant) and e.data.size >= 1 and bool(np.all(e.data == 1))


class HalfRMSNorm(DFPatternCallback):
    """``multiply(cast(nn.rms_norm(cast(x, "float32"), ones), half), gamma)`` with ``x`` of that
    half type -> ``nn.rms_norm(x, gamma)`` (without the product: ``gamma`` of ones in the half
    type). The same bits: the half-precision operator normalises ``x`` widened to float32,
    rounds to the half type and multiplies there."""

    def __init__(self) -> None:
        super().__init__(require_type=True, name="half_rms_norm")
        self.x, self.ones, self.gamma = wildcard(), is_constant(), wildcard()
        self.wide = is_op("cast")(self.x)
        self.norm = is_op("nn.rms_norm")(self.wide, self.ones)
        self.back = is_op("cast")(self.norm)
        self.pattern = is_op("multiply")(self.back, self.gamma) | self.back

    def callback(self, pre, post, node_map):
        x, norm = node_map[self.x][0], node_map[self.norm][0]
        if not is_float_tensor(x) or not shape_of(x):
            return None
        dtype = ir.type_of(x).dtype
        if (not _is_half(dtype) or ir.type_of(node_map[self.wide][0]).dtype != "float32"
                or ir.type_of(node_map[self.back][0]).dtype != dtype or not _is_ones(node_map[self.ones][0])):
            return None
        shape = shape_of(x)
        if self.gamma in node_map:
            gamma = node_map[self.gamma][0]
            if not _broadcasts_on_tail(gamma, shape[int(norm.attrs.axis) % len(shape):], dtype):
                return None
        else:
            gamma = ir.const(np.ones(1, dtype))
        return ir.Call(norm.op, [x, gamma], norm.attrs)

    def examples(self, rng):
        """Hugging Face's half-precision RMSNorm, the float32 part already fused (as
        RMSNormRule leaves it), in float16 or bfloat16, with or without its weight."""
        dtype = str(rng.choice(["float16", "bfloat16"]))
        dims = tuple(int(d) for d in rng.randint(1, 6, size=rng.randint(2, 4)))
        x = ir.var("x", shape=dims, dtype=dtype)
        eps = float(rng.choice([1e-6, 1e-5]))
        back = ir.cast(ir.nn.rms_norm(ir.cast(x, "float32"), ir.const(np.ones(1, "float32")), epsilon=eps), dtype)
        if rng.rand() < 0.2:
            return [ir.Function([x], back)]
        g = ir.var("g", shape=dims[-1:], dtype=dtype)
        return [ir.Function([x, g], ir.multiply(g, back) if rng.rand() < 0.5 else ir.multiply(back, g))]


def FuseRMSNorm():  # noqa: N802 - TVM-style pass constructor
    """Turn the decomposed RMS normalisation (Llama, Qwen2, T5) into nn.rms_norm."""
    return pattern_pass("FuseRMSNorm", lambda: [RMSNormRule(), ScaleIntoRMSNorm(), HalfRMSNorm()], opt_level=1,
                        doc=__doc__)
