"""Pooling: ``nn.max_pool2d nn.avg_pool2d nn.global_avg_pool2d nn.global_max_pool2d
nn.adaptive_avg_pool2d nn.adaptive_max_pool2d`` (pattern OUT_ELEMWISE_FUSABLE).

Layouts are permutations of ``NCHW``. With ``ceil_mode`` the output size is
``ceil((H + pad_top + pad_bottom - dilated_kernel) / stride) + 1`` (TVM's formula);
the windows that run past the bottom/right padding see only real or padded
elements. ``avg_pool2d`` divides by the number of input elements in the window,
or with ``count_include_pad`` by the number of input *and declared padding*
elements in it (the extra ceil-mode border is never counted).

Adaptive pooling splits each spatial axis of size ``H`` into ``output_size`` windows,
window ``i`` covering ``[floor(i*H/OH), ceil((i+1)*H/OH))`` (TVM's and PyTorch's rule);
``output_size`` has one value (square), two, or none (keep the input size)::

    nn.adaptive_avg_pool2d(%x, output_size=[1, 1])   /* (1, 8, 7, 7) -> (1, 8, 1, 1) */
"""
from __future__ import annotations

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..op import OpPattern
from ..types import TensorType
from ._util import check_int_pair, check_pad, kernel, pad4, reg, tensor_arg
from .layout import layout_axes, layout_index, parse_layout
from .nn import _windows, surely_le

FUSABLE = OpPattern.OUT_ELEMWISE_FUSABLE


def pool_out_dim(size: int, lo: int, hi: int, k: int, stride: int, dilation: int, ceil_mode: bool) -> int:
    span = size + lo + hi - ((k - 1) * dilation + 1)
    if ceil_mode:
        return (span + stride - 1) // stride + 1
    return span // stride + 1


def _out_hw(h: int, w: int, attrs) -> tuple:
    pt, pl, pb, pr = pad4(attrs.padding)
    kh, kw = attrs.pool_size
    sh, sw = attrs.strides
    dh, dw = attrs.dilation
    ceil = bool(attrs.ceil_mode)
    return (pool_out_dim(h, pt, pb, kh, sh, dh, ceil), pool_out_dim(w, pl, pr, kw, sw, dw, ceil))


def _pool_rel(op: str):
    def rel(types: list, attrs) -> TensorType:
        data = tensor_arg(op, types, 0, "data")
        n_, c_, h_, w_ = layout_index(attrs.layout, "NCHW", op)
        out_layout = attrs.out_layout or attrs.layout
        layout_index(out_layout, "NCHW", op)
        if data.ndim != 4:
            raise TypeInferenceError(f"{op}: data must be 4-D ({attrs.layout}), got {data}")
        oh, ow = _out_hw(data.shape[h_], data.shape[w_], attrs)
        if (oh <= 0 or ow <= 0) if type(oh) is int and type(ow) is int else (surely_le(oh, 0) or surely_le(ow, 0)):
            raise TypeInferenceError(f"{op}: pool_size {list(attrs.pool_size)} does not fit the padded input {data}")
        nchw = (data.shape[n_], data.shape[c_], oh, ow)
        shape = tuple(nchw["NCHW".index(c)] for c in parse_layout(out_layout))
        return data if shape == data.shape else TensorType(shape, data.dtype)

    rel.__name__ = f"{op.replace('.', '_')}_rel"
    return rel


def _prepare(x: np.ndarray, attrs, pad_value) -> tuple:
    """NCHW windows ``(N, C, OH, OW, kh, kw)`` plus the geometry used to build them."""
    x = np.transpose(x, layout_axes(attrs.layout, "NCHW"))
    _, _, h, w = x.shape
    pt, pl, pb, pr = pad4(attrs.padding)
    kh, kw = attrs.pool_size
    (sh, sw), (dh, dw) = attrs.strides, attrs.dilation
    oh, ow = _out_hw(h, w, attrs)
    eb = max(0, (oh - 1) * sh + (kh - 1) * dh + 1 - (h + pt + pb))
    er = max(0, (ow - 1) * sw + (kw - 1) * dw + 1 - (w + pl + pr))
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb + eb), (pl, pr + er)), constant_values=pad_value)
    geometry = (h, w, pt, pl, pb, pr, eb, er, oh, ow)
    return _windows(xp, (kh, kw), attrs.strides, attrs.dilation, (oh, ow)), geometry


def _finish(out: np.ndarray, attrs, dtype) -> np.ndarray:
    out = np.transpose(out, layout_axes("NCHW", attrs.out_layout or attrs.layout))
    return np.ascontiguousarray(out).astype(dtype, copy=False)


@kernel
def _max_pool2d(args: list, attrs) -> np.ndarray:
    x = args[0]
    low = -np.inf if x.dtype.kind == "f" else (np.iinfo(x.dtype).min if x.dtype.kind in "iu" else False)
    win, _ = _prepare(x, attrs, low)
    return _finish(win.max(axis=(-2, -1)), attrs, x.dtype)


@kernel
def _avg_pool2d(args: list, attrs) -> np.ndarray:
    x = args[0]
    acc = "float64" if x.dtype.kind in "iub" else x.dtype
    win, (h, w, pt, pl, pb, pr, eb, er, oh, ow) = _prepare(x.astype(acc, copy=False), attrs, 0)
    total = win.sum(axis=(-2, -1))
    # count the elements each window covers with a 2-D mask run through the same windows
    mask = np.zeros((h + pt + pb + eb, w + pl + pr + er), dtype="float64")
    if attrs.count_include_pad:
        mask[: h + pt + pb, : w + pl + pr] = 1.0
    else:
        mask[pt: pt + h, pl: pl + w] = 1.0
    count = _windows(mask[None, None], attrs.pool_size, attrs.strides, attrs.dilation, (oh, ow)).sum(axis=(-2, -1))
    out = np.where(count > 0, total / np.maximum(count, 1.0), 0.0)
    return _finish(out, attrs, x.dtype)


def _check_pool(op: str):
    def check(attrs) -> None:
        check_int_pair(op, attrs, "pool_size")
        check_int_pair(op, attrs, "strides")
        check_int_pair(op, attrs, "dilation")
        check_pad(op, attrs)
        for key in ("layout", "out_layout"):
            v = attrs[key]
            if key == "out_layout" and v == "":
                continue
            try:
                parse_layout(v)
            except IRError as err:
                raise IRError(f"operator {op}: attribute {key}: {err}") from None

    return check


_POOL_ATTRS = (("pool_size", None), ("strides", (1, 1)), ("dilation", (1, 1)), ("padding", (0, 0)),
               ("layout", "NCHW"), ("out_layout", ""), ("ceil_mode", False))
_LAYOUT_EXTRA = {"data_layout_attr": "layout", "out_layout_attr": "out_layout"}

reg("nn.max_pool2d", 1, _pool_rel("nn.max_pool2d"), _max_pool2d, attrs=_POOL_ATTRS, pattern=FUSABLE,
    attr_check=_check_pool("nn.max_pool2d"), summary="2-D max pooling.", extra=_LAYOUT_EXTRA)
reg("nn.avg_pool2d", 1, _pool_rel("nn.avg_pool2d"), _avg_pool2d,
    attrs=_POOL_ATTRS + (("count_include_pad", False),), pattern=FUSABLE,
    attr_check=_check_pool("nn.avg_pool2d"), summary="2-D average pooling.", extra=_LAYOUT_EXTRA)


def _global_rel(op: str, out_hw=None):
    def rel(types: list, attrs) -> TensorType:
        data = tensor_arg(op, types, 0, "data")
        n_, c_, h_, w_ = layout_index(attrs.layout, "NCHW", op)
        out_layout = attrs.out_layout or attrs.layout
        layout_index(out_layout, "NCHW", op)
        if data.ndim != 4:
            raise TypeInferenceError(f"{op}: data must be 4-D ({attrs.layout}), got {data}")
        oh, ow = (1, 1) if out_hw is None else out_hw(op, data.shape[h_], data.shape[w_], attrs)
        nchw = (data.shape[n_], data.shape[c_], oh, ow)
        shape = tuple(nchw["NCHW".index(c)] for c in parse_layout(out_layout))
        return data if shape == data.shape else TensorType(shape, data.dtype)

    rel.__name__ = f"{op.replace('.', '_')}_rel"
    return rel


def _nchw(x: np.ndarray, attrs) -> np.ndarray:
    return np.transpose(x, layout_axes(attrs.layout, "NCHW"))


@kernel
def _global_avg_pool2d(args: list, attrs) -> np.ndarray:
    x = _nchw(args[0], attrs)
    acc = "float64" if x.dtype.kind in "iub" else x.dtype
    out = x.mean(axis=(2, 3), keepdims=True, dtype=acc)
    return _finish(out, attrs, x.dtype)


@kernel
def _global_max_pool2d(args: list, attrs) -> np.ndarray:
    x = _nchw(args[0], attrs)
    return _finish(x.max(axis=(2, 3), keepdims=True), attrs, x.dtype)


_GLOBAL_ATTRS = (("layout", "NCHW"), ("out_layout", ""))

reg("nn.global_avg_pool2d", 1, _global_rel("nn.global_avg_pool2d"), _global_avg_pool2d,
    attrs=_GLOBAL_ATTRS, pattern=FUSABLE,
    summary="Average over the whole spatial extent: (N, C, H, W) -> (N, C, 1, 1).", extra=_LAYOUT_EXTRA)
reg("nn.global_max_pool2d", 1, _global_rel("nn.global_max_pool2d"), _global_max_pool2d,
    attrs=_GLOBAL_ATTRS, pattern=FUSABLE,
    summary="Maximum over the whole spatial extent: (N, C, H, W) -> (N, C, 1, 1).", extra=_LAYOUT_EXTRA)


# -- adaptive pooling ------------------------------------------------------------------
def _adaptive_hw(op: str, h: int, w: int, attrs) -> tuple:
    size = attrs.output_size
    if not size:
        return h, w
    oh, ow = (size[0], size[0]) if len(size) == 1 else size
    if h == 0 or w == 0:
        raise TypeInferenceError(f"{op}: cannot pool an empty {h}x{w} input")
    return oh, ow


def adaptive_bounds(size: int, out: int) -> list:
    """``(start, end)`` of each of the ``out`` adaptive windows over ``size`` elements."""
    return [((i * size) // out, -((-(i + 1) * size) // out)) for i in range(out)]


def _adaptive_kernel(reduce_fn):
    @kernel
    def run(args: list, attrs) -> np.ndarray:
        x = _nchw(args[0], attrs)
        n, c, h, w = x.shape
        oh, ow = _adaptive_hw("adaptive pool", h, w, attrs)
        acc = "float64" if x.dtype.kind in "iub" or reduce_fn is np.mean else x.dtype
        out = np.empty((n, c, oh, ow), dtype=acc)
        for i, (h0, h1) in enumerate(adaptive_bounds(h, oh)):
            for j, (w0, w1) in enumerate(adaptive_bounds(w, ow)):
                out[:, :, i, j] = reduce_fn(x[:, :, h0:h1, w0:w1], axis=(2, 3))
        return _finish(out, attrs, x.dtype)

    return run


def _check_adaptive(op: str):
    def check(attrs) -> None:
        v = attrs.output_size
        if not isinstance(v, tuple) or len(v) > 2 or not all(
                isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in v):
            raise IRError(f"operator {op}: attribute output_size must be 0, 1 or 2 positive ints, got {v!r}")

    return check


for _name, _fn, _what in [("nn.adaptive_avg_pool2d", np.mean, "Average"),
                          ("nn.adaptive_max_pool2d", np.max, "Maximum")]:
    reg(_name, 1, _global_rel(_name, _adaptive_hw), _adaptive_kernel(_fn),
        attrs=(("output_size", ()),) + _GLOBAL_ATTRS, pattern=FUSABLE, attr_check=_check_adaptive(_name),
        summary=f"{_what} over adaptive windows giving an output_size spatial extent.", extra=_LAYOUT_EXTRA)
