"""FuseLayerNorm: the layer normalisation that exporters and SimplifyInference spell out
in nine operators becomes one ``nn.layer_norm`` again::

    %m = mean(%x, axis=[-1], keepdims=True);
    %d = subtract(%x, %m);
    %v = mean(power(%d, 2f), axis=[-1], keepdims=True);    /* or variance(%x, %m, ...) */
    %n = divide(%d, sqrt(add(%v, 1e-05f)));                 /* or multiply(%d, rsqrt(...)) */
    add(multiply(%n, %gamma), %beta)
    ->  nn.layer_norm(%x, %gamma, %beta, axis=-1, epsilon=1e-05f)

The same over every spatial axis of ``NC...`` data (``mean(%x, axis=[2, 3])``), with
``gamma``/``beta`` along the channels, is the instance normalisation ``nn.instance_norm``
(``InstanceNormalization``, which SimplifyInference writes out the same way).

A normalisation with no scale and shift (``%n`` alone: PyTorch's initial ones and zeros,
which SimplifyExpr removes as identities, or ``elementwise_affine=False``) becomes
``nn.layer_norm`` with ones and zeros, and a constant multiplied or added afterwards joins
its ``gamma`` and ``beta`` (ScaleIntoLayerNorm, ShiftIntoLayerNorm).

It is one rule over :mod:`passhost.ir.pattern`. A graph that is close but not equal is
left alone: both means must reduce the same single axis with ``keepdims``, the exponent
must be 2, epsilon must sit inside the square root, and ``gamma``/``beta`` must be
constants that broadcast along that axis only (one value is repeated). Without ``beta``
the bias is zeros, and a constant added to a ``nn.layer_norm`` later joins its bias.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from passhost import ir
from passhost.ir.pattern import DFPatternCallback, is_constant, is_op, wildcard
from passhost.transform import pattern_pass

__all__ = ["LayerNormRule", "ScaleIntoLayerNorm", "ShiftIntoLayerNorm", "FuseLayerNorm"]


def _scalar(c: ir.Expr) -> Optional[float]:
    """A one-value float constant as a Python float, shortest-printed at its own precision
    (float32 ``1e-5`` is ``1e-05``, not ``9.999999747378752e-06``)."""
    if isinstance(c, ir.Constant) and c.data.size == 1 and (c.data.dtype.kind == "f" or c.data.dtype.name == "bfloat16"):
        return float(str(c.data.reshape(())))
    return None


def _reduced(call: ir.Call, ndim: int) -> Optional[tuple]:
    """The axes a keepdims reduction ``call`` reduces, sorted and non-negative."""
    a = call.attrs
    if not a.keepdims or a.exclude or a.axis is None:
        return None
    return tuple(sorted({int(x) % ndim for x in a.axis}))


def _along(c: ir.Expr, ndim: int, axis: int, size: int) -> Optional[ir.Constant]:
    """``c`` as a 1-D constant of ``size`` values, if it broadcasts along ``axis`` only
    (a single value is repeated)."""
    if not isinstance(c, ir.Constant) or c.data.ndim > ndim:
        return None
    if c.data.size == 1:
        return ir.Constant(np.full(size, c.data.reshape(()), dtype=c.data.dtype))
    if c.data.size != size:
        return None
    shape = (1,) * (ndim - c.data.ndim) + tuple(c.data.shape)
    if any(d != 1 for i, d in enumerate(shape) if i != axis):
        return None
    return ir.Constant(np.ascontiguousarray(c.data.reshape(size)))


class LayerNormRule(DFPatternCallback):
    """``(x - mean) / sqrt(var + eps) * gamma + beta`` over the last axis -> ``nn.layer_norm``;
    over every spatial axis of ``NC...`` data -> ``nn.instance_norm``."""

    def __init__(self) -> None:
        super().__init__(require_type=True, name="decomposed_layer_norm")
        self.x, self.eps, self.gamma, self.beta, self.two = (wildcard(), is_constant(), is_constant(),
                                                              is_constant(), is_constant())
        self.mean = is_op("mean")(self.x)
        self.centered = is_op("subtract")(self.x, self.mean)
        squared = is_op("power")(self.centered, self.two) | is_op("multiply")(self.centered, self.centered)
        self.var = is_op("mean")(squared) | is_op("variance")(self.x, self.mean)
        shifted = is_op("add")(self.var, self.eps)
        norm = (is_op("divide")(self.centered, is_op("sqrt")(shifted))
                | is_op("multiply")(self.centered, is_op("rsqrt")(shifted)))
        scaled = is_op("multiply")(norm, self.gamma)
        self.pattern = is_op("add")(scaled, self.beta) | scaled | norm

    def callback(self, pre, post, node_map):
        x = node_map[self.x][0]
        ty = x.checked_type
        if not isinstance(ty, ir.TensorType) or not ty.shape or not ty.dtype.startswith(("float", "bfloat")):
            return None
        nd = len(ty.shape)
        axes = _reduced(node_map[self.mean][0], nd)
        var = node_map[self.var][0]
        if axes is None or _reduced(var, nd) != axes:
            return None
        if axes == (nd - 1,):  # layer norm: scale and shift along the normalised axis
            norm, axis = ir.nn.layer_norm, nd - 1
        elif nd >= 3 and axes == tuple(range(2, nd)):  # instance norm: along the channels
            norm, axis = ir.nn.instance_norm, 1
        else:
            return None
        if var.op.name == "variance" and var.attrs.unbiased:
            return None
        if self.two in node_map and _scalar(node_map[self.two][0]) != 2.0:
            return None
        eps = _scalar(node_map[self.eps][0])
        if eps is None or not eps >= 0:
            return None
        size = ty.shape[axis]
        if type(size) is not int:  # no constant has a symbolic axis' size: ones and zeros of it
            if size is ir.ANY or self.gamma in node_map or self.beta in node_map:
                return None
            return norm(x, ir.ones([size], ty.dtype), ir.zeros([size], ty.dtype),
                        axis=-1 if norm is ir.nn.layer_norm else 1, epsilon=eps, center=False, scale=False)
        gamma = (_along(node_map[self.gamma][0], nd, axis, size) if self.gamma in node_map
                 else ir.Constant(np.ones(size, dtype=ty.dtype)))
        beta = (_along(node_map[self.beta][0], nd, axis, size) if self.beta in node_map
                else ir.Constant(np.zeros(size, dtype=ty.dtype)))
        if gamma is None or beta is None or gamma.data.dtype != ty.dtype or beta.data.dtype != ty.dtype:
            return None
        return norm(x, gamma, beta, axis=-1 if norm is ir.nn.layer_norm else 1, epsilon=eps)


class ScaleIntoLayerNorm(DFPatternCallback):
    """``multiply(nn.layer_norm(x, g, b), c)`` with ``c`` constant along the normalised axis ->
    ``nn.layer_norm(x, g * c, b * c)`` (the scale a rule without ``gamma`` left outside; with
    the ones and zeros that rule gives, ``g * c`` is ``c`` and ``b * c`` zero, exactly)."""

    def __init__(self) -> None:
        super().__init__(require_type=True, name="scale_into_layer_norm")
        self.gamma, self.beta, self.scale = is_constant(), is_constant(), is_constant()
        self.norm = (is_op("nn.layer_norm") | is_op("nn.instance_norm"))(wildcard(), self.gamma, self.beta)
        self.pattern = is_op("multiply")(self.norm, self.scale)

    def callback(self, pre, post, node_map):
        norm = node_map[self.norm][0]
        if not (norm.attrs.center and norm.attrs.scale):
            return None
        ty = norm.checked_type
        nd = len(ty.shape)
        size = ty.shape[int(norm.attrs.axis) % nd]
        if type(size) is not int:
            return None
        scale = _along(node_map[self.scale][0], nd, int(norm.attrs.axis) % nd, size)
        gamma, beta = node_map[self.gamma][0], node_map[self.beta][0]
        if (scale is None or scale.data.dtype != ty.dtype or gamma.data.shape != (size,)
                or beta.data.shape != (size,)):
            return None
        return ir.Call(norm.op, [norm.args[0], ir.Constant(gamma.data * scale.data),
                                 ir.Constant(beta.data * scale.data)], norm.attrs)


class ShiftIntoLayerNorm(DFPatternCallback):
    """``add(nn.layer_norm(x, g, b), c)`` with ``c`` constant along the normalised axis ->
    ``nn.layer_norm(x, g, b + c)`` (the shift a rule without ``beta`` left outside)."""

    def __init__(self) -> None:
        super().__init__(require_type=True, name="shift_into_layer_norm")
        self.beta, self.shift = is_constant(), is_constant()
        self.norm = (is_op("nn.layer_norm") | is_op("nn.instance_norm"))(wildcard(), is_constant(), self.beta)
        self.pattern = is_op("add")(self.norm, self.shift)

    def callback(self, pre, post, node_map):
        norm = node_map[self.norm][0]
        if not norm.attrs.center:  # without center the bias is not added: nothing to join
            return None
        ty = norm.checked_type
        nd = len(ty.shape)
        axis = int(norm.attrs.axis) % nd
        size = ty.shape[axis]
        if type(size) is not int:
            return None
        shift = _along(node_map[self.shift][0], nd, axis, size)
        beta = node_map[self.beta][0]
        if shift is None or shift.data.dtype != ty.dtype or beta.data.shape != (size,):
            return None
        return ir.Call(norm.op, [norm.args[0], norm.args[1], ir.Constant(beta.data + shift.data)], norm.attrs)


def FuseLayerNorm():  # noqa: N802 - TVM-style pass constructor
    """Turn the decomposed layer normalisation (mean, subtract, power or variance, add
    epsilon, sqrt, divide, scale, shift) back into ``nn.layer_norm``."""
    return pattern_pass("FuseLayerNorm", lambda: [LayerNormRule(), ScaleIntoLayerNorm(), ShiftIntoLayerNorm()],
                        opt_level=1,
                        doc=FuseLayerNorm.__doc__)
