"""Neural-network builders: ``ir.nn.conv2d``, ``ir.nn.batch_norm`` ... (TVM's ``relay.nn``).

As in TVM's Python API, convolution and pooling padding is normalised to four
values ``(top, left, bottom, right)``, so ``conv2d(x, w)`` prints
``nn.conv2d(%x, %w, padding=[0, 0, 0, 0])``.
"""
from __future__ import annotations

from typing import Any, Optional

from ..errors import IRError
from .builders import _call, _expr, _ints, _op, add, clip, multiply
from .expr import Call, Expr, TupleGetItem

__all__ = [
    "conv2d", "relu", "leaky_relu", "batch_norm", "layer_norm", "instance_norm", "dense", "bias_add",
    "max_pool2d", "avg_pool2d", "global_avg_pool2d", "batch_flatten", "softmax", "dropout", "lrn",
    "global_max_pool2d", "adaptive_avg_pool2d", "adaptive_max_pool2d", "pad", "prelu",
    "hard_sigmoid", "hard_swish", "matmul", "batch_matmul", "conv2d_transpose", "log_softmax", "gelu",
    "conv3d", "conv3d_transpose", "max_pool3d", "avg_pool3d", "deformable_conv2d", "modulated_deformable_conv2d",
    "max_pool2d_with_argmax", "max_unpool2d", "l2_normalize", "upsampling", "upsampling3d",
    "rms_norm", "rotary_embedding", "attention",
]


def _repeat(value: Any, n: int, what: str) -> tuple:
    """``n`` ints: one int (or a 1-list) repeated, or ``n`` given."""
    v = _ints(value, what)
    if len(v) == 1:
        return v * n
    if len(v) != n:
        raise IRError(f"{what} must be an int or {('two', 'three')[n - 2]} ints, got {value!r}")
    return v


def _pair(value: Any, what: str) -> tuple:
    return _repeat(value, 2, what)


def _padding(value: Any, n: int, what: str, sides: str) -> tuple:
    """TVM's ``get_pad_tuple2d``/``3d``: 1 value → all sides, ``n`` → both sides of each
    axis, ``2n`` → as given (all begins, then all ends)."""
    v = _ints(value, what)
    if len(v) == 1:
        return v * (2 * n)
    if len(v) == n:
        return v + v
    if len(v) == 2 * n:
        return v
    raise IRError(f"{what} must have 1, {n} or {2 * n} values ({sides}), got {value!r}")


def _pad4(value: Any, what: str) -> tuple:
    return _padding(value, 2, what, "top, left, bottom, right")


def conv2d(data: Expr, weight: Expr, strides: Any = (1, 1), padding: Any = (0, 0), dilation: Any = (1, 1),
           groups: int = 1, channels: Optional[int] = None, kernel_size: Any = None,
           data_layout: str = "NCHW", kernel_layout: str = "OIHW", out_layout: str = "",
           out_dtype: str = "") -> Call:
    """2-D convolution ``nn.conv2d``."""
    attrs = {
        "strides": _pair(strides, "conv2d strides"),
        "padding": _pad4(padding, "conv2d padding"),
        "dilation": _pair(dilation, "conv2d dilation"),
        "groups": int(groups),
        "channels": None if channels is None else int(channels),
        "kernel_size": None if kernel_size is None else _pair(kernel_size, "conv2d kernel_size"),
        "data_layout": data_layout, "kernel_layout": kernel_layout,
        "out_layout": out_layout, "out_dtype": out_dtype,
    }
    return _call("nn.conv2d", (data, weight), attrs)


def relu(data: Expr) -> Call:
    """``nn.relu``: max(x, 0)."""
    return _call("nn.relu", (data,))


def leaky_relu(data: Expr, alpha: float = 0.01) -> Call:
    """``nn.leaky_relu``: x if x > 0 else alpha * x."""
    return _call("nn.leaky_relu", (data,), {"alpha": float(alpha)})


def _norm_attrs(axis: int, epsilon: float, center: bool, scale: bool) -> dict:
    return {"axis": int(axis), "epsilon": float(epsilon), "center": bool(center), "scale": bool(scale)}


def batch_norm(data: Expr, gamma: Expr, beta: Expr, moving_mean: Expr, moving_var: Expr, axis: int = 1,
               epsilon: float = 1e-5, center: bool = True, scale: bool = True) -> Call:
    """``nn.batch_norm`` — the tuple-valued call ``(out, mean, var)``; ``call[0]`` is the output."""
    return _call("nn.batch_norm", (data, gamma, beta, moving_mean, moving_var),
                 _norm_attrs(axis, epsilon, center, scale))


def layer_norm(data: Expr, gamma: Expr, beta: Expr, axis: int = -1, epsilon: float = 1e-5,
               center: bool = True, scale: bool = True) -> Call:
    """``nn.layer_norm`` over one axis."""
    return _call("nn.layer_norm", (data, gamma, beta), _norm_attrs(axis, epsilon, center, scale))


def instance_norm(data: Expr, gamma: Expr, beta: Expr, axis: int = 1, epsilon: float = 1e-5,
                  center: bool = True, scale: bool = True) -> Call:
    """``nn.instance_norm`` over the spatial axes of each sample and channel."""
    return _call("nn.instance_norm", (data, gamma, beta), _norm_attrs(axis, epsilon, center, scale))


def dense(data: Expr, weight: Expr, units: Optional[int] = None, out_dtype: str = "") -> Call:
    """``nn.dense``: ``data @ weight.T`` with ``weight`` of shape (units, in_features)."""
    return _call("nn.dense", (data, weight), {"units": None if units is None else int(units),
                                              "out_dtype": out_dtype})


def bias_add(data: Expr, bias: Expr, axis: int = 1) -> Call:
    """``nn.bias_add``: add a 1-D ``bias`` along ``axis``."""
    return _call("nn.bias_add", (data, bias), {"axis": int(axis)})


def _pool_attrs(pool_size, strides, dilation, padding, layout, out_layout, ceil_mode, name) -> dict:
    return {
        "pool_size": _pair(pool_size, f"{name} pool_size"),
        "strides": _pair(strides, f"{name} strides"),
        "dilation": _pair(dilation, f"{name} dilation"),
        "padding": _pad4(padding, f"{name} padding"),
        "layout": layout, "out_layout": out_layout, "ceil_mode": bool(ceil_mode),
    }


def max_pool2d(data: Expr, pool_size: Any = (1, 1), strides: Any = (1, 1), dilation: Any = (1, 1),
               padding: Any = (0, 0), layout: str = "NCHW", out_layout: str = "",
               ceil_mode: bool = False) -> Call:
    """``nn.max_pool2d``."""
    return _call("nn.max_pool2d", (data,), _pool_attrs(pool_size, strides, dilation, padding, layout,
                                                      out_layout, ceil_mode, "max_pool2d"))


def avg_pool2d(data: Expr, pool_size: Any = (1, 1), strides: Any = (1, 1), dilation: Any = (1, 1),
               padding: Any = (0, 0), layout: str = "NCHW", out_layout: str = "",
               ceil_mode: bool = False, count_include_pad: bool = False) -> Call:
    """``nn.avg_pool2d``."""
    attrs = _pool_attrs(pool_size, strides, dilation, padding, layout, out_layout, ceil_mode, "avg_pool2d")
    attrs["count_include_pad"] = bool(count_include_pad)
    return _call("nn.avg_pool2d", (data,), attrs)


def global_avg_pool2d(data: Expr, layout: str = "NCHW", out_layout: str = "") -> Call:
    """``nn.global_avg_pool2d``: (N, C, H, W) → (N, C, 1, 1)."""
    return _call("nn.global_avg_pool2d", (data,), {"layout": layout, "out_layout": out_layout})


def batch_flatten(data: Expr) -> Call:
    """``nn.batch_flatten``: (N, ...) → (N, prod(...))."""
    return _call("nn.batch_flatten", (data,))


def softmax(data: Expr, axis: int = -1) -> Call:
    """``nn.softmax`` along ``axis``."""
    return _call("nn.softmax", (data,), {"axis": int(axis)})


def log_softmax(data: Expr, axis: int = -1) -> Call:
    """``nn.log_softmax`` along ``axis``: ``x - max - log(sum(exp(x - max)))``."""
    return _call("nn.log_softmax", (data,), {"axis": int(axis)})


def gelu(data: Expr, approximate: str = "none") -> Call:
    """``nn.gelu``: ``0.5 * x * (1 + erf(x / sqrt(2)))``; ``approximate="tanh"`` uses the tanh form."""
    return _call("nn.gelu", (data,), {"approximate": str(approximate)})


def dropout(data: Expr, rate: float = 0.5) -> TupleGetItem:
    """``nn.dropout(data).0`` — the op yields (output, mask) and is stateful."""
    return TupleGetItem(Call(_op("nn.dropout"), (data,), {"rate": float(rate)}), 0)


def global_max_pool2d(data: Expr, layout: str = "NCHW", out_layout: str = "") -> Call:
    """``nn.global_max_pool2d``: (N, C, H, W) → (N, C, 1, 1)."""
    return _call("nn.global_max_pool2d", (data,), {"layout": layout, "out_layout": out_layout})


def _adaptive(name: str, what: str):
    def build(data: Expr, output_size: Any = None, layout: str = "NCHW", out_layout: str = "") -> Call:
        size = () if output_size is None else _ints(output_size, f"{name} output_size")
        return _call(f"nn.{name}", (data,), {"output_size": size, "layout": layout, "out_layout": out_layout})

    build.__name__ = build.__qualname__ = name
    build.__doc__ = (f"``nn.{name}``: {what} over adaptive windows; ``output_size`` is one int "
                     "(square), two, or None (keep the input size).")
    return build


adaptive_avg_pool2d = _adaptive("adaptive_avg_pool2d", "average")
adaptive_max_pool2d = _adaptive("adaptive_max_pool2d", "maximum")


def pad(data: Expr, pad_width: Any, pad_value: Any = 0, pad_mode: str = "constant") -> Call:
    """``nn.pad``: pad each axis by a ``(before, after)`` pair; ``pad_value`` (a number or a
    scalar expression) is the second argument, as in TVM; ``pad_mode`` is ``constant``,
    ``edge`` or ``reflect``."""
    try:
        widths = tuple((int(lo), int(hi)) for lo, hi in pad_width)
    except (TypeError, ValueError):
        raise IRError(f"pad pad_width must be a list of (before, after) pairs, got {pad_width!r}") from None
    return _call("nn.pad", (data, pad_value), {"pad_width": widths, "pad_mode": pad_mode})


def prelu(data: Expr, alpha: Expr, axis: int = 1) -> Call:
    """``nn.prelu``: x if x >= 0 else alpha * x, with a 1-D ``alpha`` along ``axis``."""
    return _call("nn.prelu", (data, alpha), {"axis": int(axis)})


def hard_sigmoid(data: Expr, alpha: float = 0.2, beta: float = 0.5) -> Call:
    """ONNX ``HardSigmoid`` as TVM's importer decomposes it (Relay has no such op)::

        clip(add(multiply(%x, 0.2f), 0.5f), a_min=0f, a_max=1f)
    """
    return clip(add(multiply(data, _expr(float(alpha), (data,))), _expr(float(beta), (data,))), 0.0, 1.0)


def hard_swish(data: Expr) -> Call:
    """ONNX ``HardSwish``, ``x * hard_sigmoid(x, 1/6, 0.5)``, decomposed as TVM's importer does::

        multiply(%x, clip(add(multiply(%x, 0.16666667f), 0.5f), a_min=0f, a_max=1f))
    """
    return multiply(data, hard_sigmoid(data, 1.0 / 6.0, 0.5))


def matmul(tensor_a: Expr, tensor_b: Expr, units: Optional[int] = None, out_dtype: str = "",
           transpose_a: bool = False, transpose_b: bool = False) -> Call:
    """``nn.matmul``: ``tensor_a @ tensor_b`` with a 2-D ``tensor_b`` and optional transposes."""
    return _call("nn.matmul", (tensor_a, tensor_b), {
        "units": None if units is None else int(units), "out_dtype": out_dtype,
        "transpose_a": bool(transpose_a), "transpose_b": bool(transpose_b)})


def batch_matmul(tensor_a: Expr, tensor_b: Expr, out_dtype: str = "", transpose_a: bool = False,
                 transpose_b: bool = True) -> Call:
    """``nn.batch_matmul`` of 3-D tensors; ``transpose_b`` defaults to True as in TVM's Python API
    (``y`` given as ``(B, J, K)``)."""
    return _call("nn.batch_matmul", (tensor_a, tensor_b), {
        "out_dtype": out_dtype, "transpose_a": bool(transpose_a), "transpose_b": bool(transpose_b)})


def conv2d_transpose(data: Expr, weight: Expr, strides: Any = (1, 1), padding: Any = (0, 0),
                     dilation: Any = (1, 1), groups: int = 1, channels: Optional[int] = None,
                     kernel_size: Any = None, data_layout: str = "NCHW", kernel_layout: str = "IOHW",
                     out_layout: str = "", output_padding: Any = (0, 0), out_dtype: str = "") -> Call:
    """``nn.conv2d_transpose`` (TVM's argument order); the weight is ``IOHW``:
    ``(in_channels, out_channels / groups, kh, kw)``."""
    attrs = {
        "channels": None if channels is None else int(channels),
        "kernel_size": None if kernel_size is None else _pair(kernel_size, "conv2d_transpose kernel_size"),
        "strides": _pair(strides, "conv2d_transpose strides"),
        "output_padding": _pair(output_padding, "conv2d_transpose output_padding"),
        "padding": _pad4(padding, "conv2d_transpose padding"),
        "dilation": _pair(dilation, "conv2d_transpose dilation"),
        "groups": int(groups), "data_layout": data_layout, "kernel_layout": kernel_layout,
        "out_layout": out_layout, "out_dtype": out_dtype,
    }
    return _call("nn.conv2d_transpose", (data, weight), attrs)


def _deformable_attrs(strides, padding, dilation, deformable_groups, groups, channels, kernel_size, name) -> dict:
    return {"strides": _pair(strides, f"{name} strides"), "padding": _pad4(padding, f"{name} padding"),
            "dilation": _pair(dilation, f"{name} dilation"), "deformable_groups": int(deformable_groups),
            "groups": int(groups), "channels": None if channels is None else int(channels),
            "kernel_size": None if kernel_size is None else _pair(kernel_size, f"{name} kernel_size")}


def deformable_conv2d(data: Expr, offset: Expr, weight: Expr, strides: Any = (1, 1), padding: Any = (0, 0),
                      dilation: Any = (1, 1), deformable_groups: int = 1, groups: int = 1,
                      channels: Optional[int] = None, kernel_size: Any = None) -> Call:
    """``nn.deformable_conv2d`` (TVM's argument order: data, offset, weight): every tap samples
    ``data`` at its offset (``(N, deformable_groups*kh*kw*2, OH, OW)``, ``(dy, dx)`` pairs)."""
    return _call("nn.deformable_conv2d", (data, offset, weight), _deformable_attrs(
        strides, padding, dilation, deformable_groups, groups, channels, kernel_size, "deformable_conv2d"))


def modulated_deformable_conv2d(data: Expr, offset: Expr, weight: Expr, mask: Expr, strides: Any = (1, 1),
                                padding: Any = (0, 0), dilation: Any = (1, 1), deformable_groups: int = 1,
                                groups: int = 1, channels: Optional[int] = None, kernel_size: Any = None) -> Call:
    """``nn.modulated_deformable_conv2d``: :func:`deformable_conv2d` with each sample scaled
    by ``mask`` (``(N, deformable_groups*kh*kw, OH, OW)``; DCN v2)."""
    return _call("nn.modulated_deformable_conv2d", (data, offset, weight, mask), _deformable_attrs(
        strides, padding, dilation, deformable_groups, groups, channels, kernel_size, "modulated_deformable_conv2d"))


def max_pool2d_with_argmax(data: Expr, pool_size: Any = (1, 1), strides: Any = (1, 1), dilation: Any = (1, 1),
                           padding: Any = (0, 0), ceil_mode: bool = False, storage_order: int = 0) -> Call:
    """``nn.max_pool2d_with_argmax`` (NCHW): ``call[0]`` the pooled values, ``call[1]`` where
    each came from (its index in the whole input, row-major; ``storage_order=1``:
    column-major within each plane)."""
    return _call("nn.max_pool2d_with_argmax", (data,), {
        "pool_size": _pair(pool_size, "max_pool2d_with_argmax pool_size"),
        "strides": _pair(strides, "max_pool2d_with_argmax strides"),
        "dilation": _pair(dilation, "max_pool2d_with_argmax dilation"),
        "padding": _pad4(padding, "max_pool2d_with_argmax padding"), "ceil_mode": bool(ceil_mode),
        "storage_order": int(storage_order)})


def max_unpool2d(data: Expr, indices: Expr, output_size: Any, pool_size: Any = (1, 1), strides: Any = (1, 1),
                 padding: Any = (0, 0)) -> Call:
    """``nn.max_unpool2d``: ``data`` written at ``indices`` of a zero tensor the size the
    inverted pooling's input had (its attributes give it), at the top left of
    ``output_size`` (N, C, H, W)."""
    return _call("nn.max_unpool2d", (data, indices), {
        "output_size": tuple(int(d) for d in output_size), "pool_size": _pair(pool_size, "max_unpool2d pool_size"),
        "strides": _pair(strides, "max_unpool2d strides"), "padding": _pad4(padding, "max_unpool2d padding")})


def lrn(data: Expr, size: int = 5, axis: int = 1, bias: float = 2.0, alpha: float = 1e-4,
        beta: float = 0.75) -> Call:
    """``nn.lrn``: ``data / (bias + alpha / size * sum of squares over size channels) ^ beta``."""
    return _call("nn.lrn", (data,), {"size": int(size), "axis": int(axis), "bias": float(bias),
                                     "alpha": float(alpha), "beta": float(beta)})


def _triple(value: Any, what: str) -> tuple:
    return _repeat(value, 3, what)


def _pad6(value: Any, what: str) -> tuple:
    return _padding(value, 3, what, "front, top, left, back, bottom, right")


def conv3d(data: Expr, weight: Expr, strides: Any = (1, 1, 1), padding: Any = (0, 0, 0), dilation: Any = (1, 1, 1),
           groups: int = 1, channels: Optional[int] = None, kernel_size: Any = None) -> Call:
    """3-D convolution ``nn.conv3d`` (NCDHW data, OIDHW weight)."""
    return _call("nn.conv3d", (data, weight), {
        "strides": _triple(strides, "conv3d strides"), "padding": _pad6(padding, "conv3d padding"),
        "dilation": _triple(dilation, "conv3d dilation"), "groups": int(groups),
        "channels": None if channels is None else int(channels),
        "kernel_size": None if kernel_size is None else _triple(kernel_size, "conv3d kernel_size")})


def conv3d_transpose(data: Expr, weight: Expr, strides: Any = (1, 1, 1), padding: Any = (0, 0, 0),
                     dilation: Any = (1, 1, 1), groups: int = 1, channels: Optional[int] = None,
                     kernel_size: Any = None, output_padding: Any = (0, 0, 0), out_dtype: str = "") -> Call:
    """``nn.conv3d_transpose`` (NCDHW data, IODHW weight: ``(in_channels, out_channels /
    groups, kd, kh, kw)``)."""
    return _call("nn.conv3d_transpose", (data, weight), {
        "channels": None if channels is None else int(channels),
        "kernel_size": None if kernel_size is None else _triple(kernel_size, "conv3d_transpose kernel_size"),
        "strides": _triple(strides, "conv3d_transpose strides"), "padding": _pad6(padding, "conv3d_transpose padding"),
        "output_padding": _triple(output_padding, "conv3d_transpose output_padding"),
        "dilation": _triple(dilation, "conv3d_transpose dilation"), "groups": int(groups), "out_dtype": out_dtype})


def _pool3d_attrs(pool_size, strides, dilation, padding, ceil_mode, name) -> dict:
    return {"pool_size": _triple(pool_size, f"{name} pool_size"), "strides": _triple(strides, f"{name} strides"),
            "dilation": _triple(dilation, f"{name} dilation"), "padding": _pad6(padding, f"{name} padding"),
            "ceil_mode": bool(ceil_mode)}


def max_pool3d(data: Expr, pool_size: Any = (1, 1, 1), strides: Any = (1, 1, 1), dilation: Any = (1, 1, 1),
               padding: Any = (0, 0, 0), ceil_mode: bool = False) -> Call:
    """``nn.max_pool3d`` (NCDHW)."""
    return _call("nn.max_pool3d", (data,), _pool3d_attrs(pool_size, strides, dilation, padding, ceil_mode,
                                                        "max_pool3d"))


def avg_pool3d(data: Expr, pool_size: Any = (1, 1, 1), strides: Any = (1, 1, 1), dilation: Any = (1, 1, 1),
               padding: Any = (0, 0, 0), ceil_mode: bool = False, count_include_pad: bool = False) -> Call:
    """``nn.avg_pool3d`` (NCDHW)."""
    attrs = _pool3d_attrs(pool_size, strides, dilation, padding, ceil_mode, "avg_pool3d")
    attrs["count_include_pad"] = bool(count_include_pad)
    return _call("nn.avg_pool3d", (data,), attrs)


def l2_normalize(data: Expr, eps: float, axis: Optional[Any] = None) -> Call:
    """``nn.l2_normalize``: ``data / sqrt(max(sum(data * data, axis), eps))`` (``axis``: a
    list of axes; None: every axis)."""
    return _call("nn.l2_normalize", (data,), {"eps": float(eps),
                                              "axis": None if axis is None else _ints(axis, "l2_normalize axis")})


def upsampling(data: Expr, scale_h: float = 1, scale_w: float = 1, layout: str = "NCHW",
               method: str = "nearest_neighbor", align_corners: bool = False) -> Call:
    """``nn.upsampling``: H and W resized to ``round(size * scale)`` (``method``
    ``nearest_neighbor``, ``bilinear`` or ``bicubic``)."""
    return _call("nn.upsampling", (data,), {"scale_h": float(scale_h), "scale_w": float(scale_w), "layout": layout,
                                            "method": method, "align_corners": bool(align_corners)})


def upsampling3d(data: Expr, scale_d: float, scale_h: float, scale_w: float, layout: str = "NCDHW",
                 method: str = "nearest_neighbor", coordinate_transformation_mode: str = "half_pixel") -> Call:
    """``nn.upsampling3d``: D, H and W resized to ``round(size * scale)`` (``method``
    ``nearest_neighbor`` or ``trilinear``)."""
    return _call("nn.upsampling3d", (data,), {
        "scale_d": float(scale_d), "scale_h": float(scale_h), "scale_w": float(scale_w), "layout": layout,
        "method": method, "coordinate_transformation_mode": coordinate_transformation_mode})


def rms_norm(data: Expr, gamma: Expr, axis: int = -1, epsilon: float = 1e-5) -> Call:
    """``nn.rms_norm``: ``data / sqrt(mean(data * data) + epsilon) * gamma`` over the axes from
    ``axis`` to the last (ONNX ``RMSNormalization``)."""
    return _call("nn.rms_norm", (data, gamma), {"axis": int(axis), "epsilon": float(epsilon)})


def rotary_embedding(data: Expr, cos: Expr, sin: Expr, interleaved: bool = False, rotary_dim: int = 0) -> Call:
    """``nn.rotary_embedding``: the first ``rotary_dim`` values (all when 0) of each head of
    ``data`` (batch, heads, seq, head) turned by ``cos``/``sin`` (batch, seq, rotary_dim / 2)
    (ONNX ``RotaryEmbedding``)."""
    return _call("nn.rotary_embedding", (data, cos, sin),
                 {"interleaved": bool(interleaved), "rotary_dim": int(rotary_dim)})


def attention(query: Expr, key: Expr, value: Expr, mask: Optional[Expr] = None,
              scale: Optional[float] = None, zero_masked_rows: bool = True) -> Call:
    """``nn.attention``: ``softmax((q * sqrt(scale)) @ (k * sqrt(scale))^T + mask) @ v`` over
    (batch, heads, seq, head) tensors, key-value heads shared by groups of query heads (ONNX
    ``Attention``); ``mask`` None is a scalar float32 zero, ``scale`` None ``1 / sqrt(head)``;
    ``zero_masked_rows=False`` leaves out the guard that makes a row masked whole zeros."""
    from .builders import const

    return _call("nn.attention", (query, key, value, const(0.0, "float32") if mask is None else mask),
                 {"scale": None if scale is None else float(scale), "zero_masked_rows": bool(zero_masked_rows)})
