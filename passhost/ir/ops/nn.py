"""Neural-network operators: ``nn.conv2d nn.dense nn.bias_add nn.prelu nn.softmax nn.batch_norm
nn.dropout nn.layer_norm nn.instance_norm`` (pooling lives in :mod:`.pool`).

Convolution supports any data layout that permutes ``NCHW`` (``NCHW``, ``NHWC`` ...)
and any kernel layout that permutes ``OIHW`` (``OIHW``, ``HWIO``, ``HWOI`` ...), with
strides, dilation, 1/2/4-value padding ``(top, left, bottom, right)`` and groups
(depthwise included). The kernel is vectorised: a sliding-window view of the
padded input contracted with the weight (``tensordot``; one ``einsum`` for groups).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ...errors import IRError, TypeInferenceError
from ..dims import UndecidableDim, provably_unequal
from ..op import OpPattern
from ..types import TensorType, TupleType
from ._util import (check_int_pair, check_pad, kernel, norm_axis, pad4, reg, tensor_arg, vector_type)
from .layout import layout_axes, layout_index, parse_layout

FUSABLE, B, OPAQUE = OpPattern.OUT_ELEMWISE_FUSABLE, OpPattern.BROADCAST, OpPattern.OPAQUE


# -- symbolic dimensions: what holds for every binding ---------------------------------
# A relation raises on symbolic dimensions only for what is wrong for every binding of the
# size variables. Hot relations keep a static fast path: ``a != b and differ(a, b)`` costs
# one comparison when two ints (or two identical dimensions) agree.
def surely_le(a, b) -> bool:
    """``a <= b`` for every binding of the size variables (for ints: ``a <= b``); a
    comparison the bounds cannot decide, or one with ``?``, is not sure."""
    if type(a) is int and type(b) is int:
        return a <= b
    try:
        return bool(a <= b)
    except UndecidableDim:
        return False


def surely_lt(a, b) -> bool:
    """``a < b`` for every binding of the size variables (for ints: ``a < b``)."""
    if type(a) is int and type(b) is int:
        return a < b
    try:
        return bool(a < b)
    except UndecidableDim:
        return False


def differ(a, b) -> bool:
    """``a != b`` for every binding: two dimensions that must agree are a mismatch only
    then (``n`` and ``64`` may agree; ``3`` and ``4``, ``n`` and ``n + 1`` never do)."""
    if type(a) is int and type(b) is int:
        return a != b
    return provably_unequal(a, b)


def indivisible(a, b: int) -> bool:
    """``a % b != 0`` for every binding (``b`` a positive int)."""
    if type(a) is int:
        return a % b != 0
    return provably_unequal(a % b, 0)


def static_of(a, b):
    """Of two dimensions known to agree, the static one if either is (else ``a``)."""
    return b if type(a) is not int and type(b) is int else a


def channel_vector(op: str, types: list, i: int, dim, dtype: str, what: str, reason: str,
                   cache=None) -> TensorType:
    """:func:`._util.vector_type`, except that a length that may be ``dim`` is accepted (a
    ``(64,)`` bias for data of ``c`` channels, a ``(c,)`` one for 64): the static check
    and its error otherwise."""
    try:
        return vector_type(op, types, i, dim, dtype, what, reason, cache)
    except TypeInferenceError:
        t = types[i]
        if not (type(t) is TensorType and t.dtype == dtype and len(t.shape) == 1 and not differ(t.shape[0], dim)):
            raise
    if cache is not None and cache[0] is None:
        cache[0] = t
    return t


# -- conv2d ------------------------------------------------------------------------
def conv_out_dim(size: int, pad_lo: int, pad_hi: int, k: int, stride: int, dilation: int) -> int:
    return (size + pad_lo + pad_hi - dilation * (k - 1) - 1) // stride + 1


def _conv2d_rel(types: list, attrs) -> TensorType:
    op = "nn.conv2d"
    data = tensor_arg(op, types, 0, "data")
    get = attrs.__getitem__  # (attrs is a dict: item reads skip its attribute fallback)
    data_layout, kernel_layout = get("data_layout"), get("kernel_layout")
    n_, c_, h_, w_ = layout_index(data_layout, "NCHW", op)
    o_, i_, kh_, kw_ = layout_index(kernel_layout, "OIHW", op)
    out_layout = get("out_layout") or data_layout
    if out_layout != "NCHW":
        layout_index(out_layout, "NCHW", op)
    if data.ndim != 4:
        raise TypeInferenceError(f"{op}: data must be 4-D ({data_layout}), got {data}")
    groups = get("groups")
    in_ch = data.shape[c_]
    if in_ch % groups != 0 and indivisible(in_ch, groups):
        raise TypeInferenceError(f"{op}: data has {in_ch} input channels, not divisible by groups={groups}")
    weight = types[1]
    channels, kernel_size = get("channels"), get("kernel_size")
    if weight is None:
        if channels is None or kernel_size is None:
            raise TypeInferenceError(
                f"{op}: the weight's type is unknown and cannot be derived; give the weight a type "
                "annotation or set channels and kernel_size")
        dims = [0, 0, 0, 0]
        dims[o_], dims[i_] = channels, in_ch // groups
        dims[kh_], dims[kw_] = kernel_size
        weight = types[1] = TensorType(dims, data.dtype)
    weight = tensor_arg(op, types, 1, "the weight")
    if weight.ndim != 4:
        raise TypeInferenceError(f"{op}: the weight must be 4-D ({kernel_layout}), got {weight}")
    if weight.dtype != data.dtype:
        raise TypeInferenceError(f"{op}: dtype mismatch between the data {data} and the weight {weight}")
    ws = weight.shape
    if ws[i_] * groups != in_ch and differ(ws[i_] * groups, in_ch):
        raise TypeInferenceError(
            f"{op}: data has {in_ch} input channels but the weight expects {ws[i_] * groups} "
            f"(weight {weight} in layout {kernel_layout}, groups={groups})")
    out_ch = ws[o_]
    if out_ch % groups != 0 and indivisible(out_ch, groups):
        raise TypeInferenceError(f"{op}: the weight's {out_ch} output channels are not divisible by groups={groups}")
    if channels is not None and channels != out_ch:
        if differ(channels, out_ch):
            raise TypeInferenceError(
                f"{op}: channels={channels} but the weight {weight} has {out_ch} output channels")
        out_ch = channels  # (an int: the weight's is symbolic)
    kh, kw = ws[kh_], ws[kw_]
    if kernel_size is not None and tuple(kernel_size) != (kh, kw):
        if differ(kernel_size[0], kh) or differ(kernel_size[1], kw):
            raise TypeInferenceError(f"{op}: kernel_size={list(kernel_size)} but the weight {weight} is {kh}x{kw}")
        kh, kw = kernel_size
    pt, pl, pb, pr = pad4(get("padding"))
    sh, sw = get("strides")
    dh, dw = get("dilation")
    oh = conv_out_dim(data.shape[h_], pt, pb, kh, sh, dh)
    ow = conv_out_dim(data.shape[w_], pl, pr, kw, sw, dw)
    if (oh <= 0 or ow <= 0) if type(oh) is int and type(ow) is int else (surely_le(oh, 0) or surely_le(ow, 0)):
        raise TypeInferenceError(f"{op}: the {kh}x{kw} kernel (dilation {dh}x{dw}) does not fit the padded input {data}")
    nchw = (data.shape[n_], out_ch, oh, ow)
    shape = nchw if out_layout == "NCHW" else tuple(nchw["NCHW".index(c)] for c in parse_layout(out_layout))
    return TensorType(shape, get("out_dtype") or data.dtype)


def _windows(x: np.ndarray, kernel: tuple, strides: tuple, dilation: tuple, out: tuple) -> np.ndarray:
    """``(N, C, *out, *kernel)`` view of the windows of a padded ``N, C, *spatial`` array
    (2-D: ``(N, C, OH, OW, kh, kw)``; 3-D as well)."""
    axes = tuple(range(2, 2 + len(kernel)))
    win = sliding_window_view(x, tuple((k - 1) * d + 1 for k, d in zip(kernel, dilation)), axis=axes)
    step = tuple(slice(None, None, s) for s in strides) + tuple(slice(None, None, d) for d in dilation)
    return win[(slice(None), slice(None)) + step][(slice(None), slice(None)) + tuple(slice(0, o) for o in out)]


@kernel
def _conv2d(args: list, attrs) -> np.ndarray:
    x, w = args
    out_dtype = attrs.out_dtype or x.dtype
    x = np.transpose(x, layout_axes(attrs.data_layout, "NCHW"))
    w = np.transpose(w, layout_axes(attrs.kernel_layout, "OIHW"))
    if np.dtype(out_dtype) != x.dtype:
        x, w = x.astype(out_dtype), w.astype(out_dtype)
    pt, pl, pb, pr = pad4(attrs.padding)
    n, c, h, wd = x.shape
    o, ig, kh, kw = w.shape
    oh = conv_out_dim(h, pt, pb, kh, attrs.strides[0], attrs.dilation[0])
    ow = conv_out_dim(wd, pl, pr, kw, attrs.strides[1], attrs.dilation[1])
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    win = _windows(xp, (kh, kw), attrs.strides, attrs.dilation, (oh, ow))
    g = attrs.groups
    if g == 1:
        out = np.tensordot(win, w, axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)
    else:
        wing = win.reshape(n, g, c // g, oh, ow, kh, kw)
        wg = w.reshape(g, o // g, ig, kh, kw)
        out = np.einsum("ngchwij,gocij->ngohw", wing, wg, optimize=True).reshape(n, o, oh, ow)
    out = np.transpose(out, layout_axes("NCHW", attrs.out_layout or attrs.data_layout))
    return np.ascontiguousarray(out).astype(out_dtype, copy=False)


def _check_layout_attr(op: str, attrs, key: str, allow_empty: bool = False) -> None:
    v = attrs[key]
    if allow_empty and v == "":
        return
    try:
        parse_layout(v)
    except IRError as err:
        raise IRError(f"operator {op}: attribute {key}: {err}") from None


def _check_conv2d(attrs) -> None:
    op = "nn.conv2d"
    check_int_pair(op, attrs, "strides")
    check_int_pair(op, attrs, "dilation")
    check_int_pair(op, attrs, "kernel_size", allow_none=True)
    check_pad(op, attrs)
    g = attrs.groups
    if isinstance(g, bool) or not isinstance(g, int) or g < 1:
        raise IRError(f"operator {op}: attribute groups must be a positive int, got {g!r}")
    ch = attrs.channels
    if ch is not None and (isinstance(ch, bool) or not isinstance(ch, int) or ch < 1):
        raise IRError(f"operator {op}: attribute channels must be a positive int or None, got {ch!r}")
    for key in ("data_layout", "kernel_layout"):
        _check_layout_attr(op, attrs, key)
    _check_layout_attr(op, attrs, "out_layout", allow_empty=True)


reg("nn.conv2d", 2, _conv2d_rel, _conv2d,
    attrs=(("strides", (1, 1)), ("padding", (0, 0)), ("dilation", (1, 1)), ("groups", 1),
           ("channels", None), ("kernel_size", None), ("data_layout", "NCHW"),
           ("kernel_layout", "OIHW"), ("out_layout", ""), ("out_dtype", "")),
    pattern=FUSABLE, attr_check=_check_conv2d,
    summary="2-D convolution (strides, padding, dilation, groups; NCHW/NHWC data, OIHW/HWIO kernels).",
    extra={"data_layout_attr": "data_layout", "kernel_layout_attr": "kernel_layout",
           "out_layout_attr": "out_layout"})


# -- dense / bias_add ----------------------------------------------------------------
def _dense_rel(types: list, attrs) -> TensorType:
    op = "nn.dense"
    data = tensor_arg(op, types, 0, "data")
    if data.ndim < 1:
        raise TypeInferenceError(f"{op}: data must have at least one axis, got {data}")
    k = data.shape[-1]
    if types[1] is None:
        if attrs.units is None:
            raise TypeInferenceError(f"{op}: the weight's type is unknown; give it a type annotation or set units")
        types[1] = TensorType((attrs.units, k), data.dtype)
    weight = tensor_arg(op, types, 1, "the weight")
    if weight.ndim != 2 or (weight.shape[1] != k and differ(weight.shape[1], k)):
        raise TypeInferenceError(f"{op}: data {data} has {k} input features but the weight {weight} "
                                 f"expects shape (units, {k})")
    if weight.dtype != data.dtype:
        raise TypeInferenceError(f"{op}: dtype mismatch between the data {data} and the weight {weight}")
    units = weight.shape[0]
    if attrs.units is not None and attrs.units != units:
        if differ(attrs.units, units):
            raise TypeInferenceError(f"{op}: units={attrs.units} but the weight {weight} has {units} rows")
        units = attrs.units  # (an int: the weight's is symbolic)
    return TensorType(data.shape[:-1] + (units,), attrs.out_dtype or data.dtype)


@kernel
def _dense(args: list, attrs) -> np.ndarray:
    x, w = args
    dtype = attrs.out_dtype or x.dtype
    if np.dtype(dtype) != x.dtype:
        x, w = x.astype(dtype), w.astype(dtype)
    return np.matmul(x, w.T).astype(dtype, copy=False)


reg("nn.dense", 2, _dense_rel, _dense, attrs=(("units", None), ("out_dtype", "")), pattern=FUSABLE,
    summary="Fully connected layer: data @ weight.T with weight (units, in_features).")


def _bias_add_rel(types: list, attrs) -> TensorType:
    op = "nn.bias_add"
    data = tensor_arg(op, types, 0, "data")
    axis = norm_axis(op, attrs.axis, data.ndim)
    dim = data.shape[axis]
    channel_vector(op, types, 1, dim, data.dtype, "the bias",
                   f"the data {data} has {dim} elements on axis {attrs.axis}")
    return data


@kernel
def _bias_add(args: list, attrs) -> np.ndarray:
    x, b = args
    axis = attrs.axis % x.ndim
    return (x + b.reshape((-1,) + (1,) * (x.ndim - axis - 1))).astype(x.dtype, copy=False)


reg("nn.bias_add", 2, _bias_add_rel, _bias_add, attrs=(("axis", 1),), pattern=B,
    summary="Add a 1-D bias along an axis.", extra={"channel_axis_attr": "axis"})


# -- prelu ---------------------------------------------------------------------------
def _prelu_rel(types: list, attrs) -> TensorType:
    op = "nn.prelu"
    data = tensor_arg(op, types, 0, "data")
    axis = norm_axis(op, attrs.axis, data.ndim)
    dim = data.shape[axis]
    channel_vector(op, types, 1, dim, data.dtype, "alpha",
                   f"the data {data} has {dim} elements on axis {attrs.axis}")
    return data


@kernel
def _prelu(args: list, attrs) -> np.ndarray:
    x, alpha = args
    axis = attrs.axis % x.ndim
    return np.where(x < 0, x * _bcast(alpha, x.ndim, axis), x).astype(x.dtype, copy=False)


reg("nn.prelu", 2, _prelu_rel, _prelu, attrs=(("axis", 1),), pattern=B,
    summary="Parametric ReLU: x if x >= 0 else alpha[c] * x, alpha along an axis.",
    extra={"channel_axis_attr": "axis"})


# -- softmax -------------------------------------------------------------------------
def _along_axis_rel(name: str):
    """The relation of an operator that keeps its data's type and reads one ``axis``."""
    def rel(types: list, attrs) -> TensorType:
        data = tensor_arg(name, types, 0, "data")
        norm_axis(name, attrs.axis, data.ndim)
        return data

    rel.__name__ = f"{name.replace('.', '_')}_rel"
    return rel


@kernel
def _softmax(args: list, attrs) -> np.ndarray:
    x = args[0]
    e = np.exp(x - np.max(x, axis=attrs.axis, keepdims=True))
    return (e / np.sum(e, axis=attrs.axis, keepdims=True)).astype(x.dtype, copy=False)


reg("nn.softmax", 1, _along_axis_rel("nn.softmax"), _softmax, attrs=(("axis", -1),), pattern=FUSABLE,
    summary="Softmax along an axis.", extra={"channel_axis_attr": "axis"})


@kernel
def _log_softmax(args: list, attrs) -> np.ndarray:
    x = args[0]
    shifted = x - np.max(x, axis=attrs.axis, keepdims=True)
    return (shifted - np.log(np.sum(np.exp(shifted), axis=attrs.axis, keepdims=True))).astype(x.dtype, copy=False)


reg("nn.log_softmax", 1, _along_axis_rel("nn.log_softmax"), _log_softmax, attrs=(("axis", -1),), pattern=OPAQUE,
    summary="Log of the softmax along an axis.", extra={"channel_axis_attr": "axis"})


# -- local response normalisation ----------------------------------------------------------
def _lrn_rel(types: list, attrs) -> TensorType:
    data = tensor_arg("nn.lrn", types, 0, "data")
    norm_axis("nn.lrn", attrs.axis, data.ndim)
    if isinstance(attrs.size, bool) or not isinstance(attrs.size, int) or attrs.size < 1:
        raise TypeInferenceError(f"nn.lrn: size must be a positive int, got {attrs.size!r}")
    return data


@kernel
def _lrn(args: list, attrs) -> np.ndarray:
    """``x / (bias + alpha / size * sum(x^2 over size neighbours on axis)) ^ beta``;
    the window holds ``(size - 1) // 2`` channels before and the rest after (TVM's and
    ONNX's LRN)."""
    x = args[0]
    axis = attrs.axis % x.ndim
    sq = np.moveaxis(x.astype(np.float64) ** 2, axis, 0)
    before = (attrs.size - 1) // 2
    after = attrs.size - 1 - before
    padded = np.concatenate([np.zeros((before,) + sq.shape[1:]), sq, np.zeros((after,) + sq.shape[1:])])
    csum = np.concatenate([np.zeros((1,) + sq.shape[1:]), np.cumsum(padded, axis=0)])
    window = csum[attrs.size:] - csum[:-attrs.size]
    scale = np.moveaxis((attrs.bias + attrs.alpha / attrs.size * window) ** attrs.beta, 0, axis)
    return (x / scale).astype(x.dtype, copy=False)


reg("nn.lrn", 1, _lrn_rel, _lrn,
    attrs=(("size", 5), ("axis", 1), ("bias", 2.0), ("alpha", 1e-4), ("beta", 0.75)), pattern=OpPattern.OPAQUE,
    summary="Local response normalisation across the channels of an axis.", extra={"channel_axis_attr": "axis"})


# -- normalisations --------------------------------------------------------------------
def _norm_rel(op: str, nparams: int, tuple_out: bool):
    names = ("gamma", "beta", "moving_mean", "moving_var")[:nparams]

    def rel(types: list, attrs):
        data = tensor_arg(op, types, 0, "data")
        axis = norm_axis(op, attrs.axis, data.ndim)
        dim = data.shape[axis]
        cache = [None]
        reason = f"the data {data} has {dim} channels on axis {attrs.axis}"
        vec = None
        for i, name in enumerate(names, start=1):
            vec = channel_vector(op, types, i, dim, data.dtype, name, reason, cache)
        if tuple_out:
            return TupleType([data, vec, vec])
        return data

    rel.__name__ = f"{op.replace('.', '_')}_rel"
    return rel


def _bcast(v: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    return v.reshape((-1,) + (1,) * (ndim - axis - 1))


def _affine(x, gamma, beta, attrs, axis) -> np.ndarray:
    if attrs.scale:
        x = x * _bcast(gamma, x.ndim, axis)
    if attrs.center:
        x = x + _bcast(beta, x.ndim, axis)
    return x


@kernel
def _batch_norm(args: list, attrs) -> tuple:
    x, gamma, beta, mean, var = args
    axis = attrs.axis % x.ndim
    inv = 1.0 / np.sqrt(var.astype("float64") + attrs.epsilon)
    out = (x - _bcast(mean, x.ndim, axis)) * _bcast(inv, x.ndim, axis).astype(x.dtype)
    out = _affine(out, gamma, beta, attrs, axis)
    return out.astype(x.dtype, copy=False), mean, var


def _check_norm(op: str):
    def check(attrs) -> None:
        eps = attrs.epsilon
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or eps < 0:
            raise IRError(f"operator {op}: attribute epsilon must be a non-negative float, got {eps!r}")

    return check


_NORM_ATTRS = (("epsilon", 1e-5), ("center", True), ("scale", True))

reg("nn.batch_norm", 5, _norm_rel("nn.batch_norm", 4, True), _batch_norm,
    attrs=(("axis", 1),) + _NORM_ATTRS, pattern=FUSABLE, attr_check=_check_norm("nn.batch_norm"),
    summary="Batch normalisation (inference): (out, moving_mean, moving_var).",
    extra={"channel_axis_attr": "axis"})


def _normalize(x: np.ndarray, axes: tuple, eps: float) -> np.ndarray:
    xf = x.astype("float64")
    mu = xf.mean(axis=axes, keepdims=True)
    var = np.square(xf - mu).mean(axis=axes, keepdims=True)
    return (xf - mu) / np.sqrt(var + eps)


@kernel
def _layer_norm(args: list, attrs) -> np.ndarray:
    x, gamma, beta = args
    axis = attrs.axis % x.ndim
    out = _affine(_normalize(x, (axis,), attrs.epsilon), gamma, beta, attrs, axis)
    return out.astype(x.dtype, copy=False)


@kernel
def _instance_norm(args: list, attrs) -> np.ndarray:
    x, gamma, beta = args
    axis = attrs.axis % x.ndim
    axes = tuple(i for i in range(1, x.ndim) if i != axis)
    out = _affine(_normalize(x, axes, attrs.epsilon), gamma, beta, attrs, axis)
    return out.astype(x.dtype, copy=False)


reg("nn.layer_norm", 3, _norm_rel("nn.layer_norm", 2, False), _layer_norm,
    attrs=(("axis", -1),) + _NORM_ATTRS, pattern=OPAQUE, attr_check=_check_norm("nn.layer_norm"),
    summary="Layer normalisation over one axis, with per-axis gamma and beta.",
    extra={"channel_axis_attr": "axis"})
reg("nn.instance_norm", 3, _norm_rel("nn.instance_norm", 2, False), _instance_norm,
    attrs=(("axis", 1),) + _NORM_ATTRS, pattern=OPAQUE, attr_check=_check_norm("nn.instance_norm"),
    summary="Instance normalisation over all axes but the batch and channel axes.",
    extra={"channel_axis_attr": "axis"})


# -- dropout ---------------------------------------------------------------------------
def _dropout_rel(types: list, attrs) -> TupleType:
    data = tensor_arg("nn.dropout", types, 0, "data")
    return TupleType([data, data])


@kernel
def _dropout(args: list, attrs) -> tuple:
    x = args[0]
    return x, np.ones_like(x)


def _check_rate(attrs) -> None:
    r = attrs.rate
    if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0 <= r < 1:
        raise IRError(f"operator nn.dropout: attribute rate must be a float in [0, 1), got {r!r}")


reg("nn.dropout", 1, _dropout_rel, _dropout, attrs=(("rate", 0.5),), pattern=OPAQUE, stateful=True,
    attr_check=_check_rate, summary="Dropout (identity at inference); yields (output, mask).")
