"""Pooling: ``nn.max_pool2d nn.avg_pool2d nn.global_avg_pool2d`` (pattern OUT_ELEMWISE_FUSABLE).

Layouts are permutations of ``NCHW``. With ``ceil_mode`` the output size is
``ceil((H + pad_top + pad_bottom - dilated_kernel) / stride) + 1`` (TVM's formula);
the windows that run past the bottom/right padding see only real or padded
elements. ``avg_pool2d`` divides by the number of input elements in the window,
or with ``count_include_pad`` by the number of input *and declared padding*
elements in it (the extra ceil-mode border is never counted).
"""
from __future__ import annotations

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..op import OpPattern
from ..types import TensorType
from ._util import check_int_pair, check_pad, kernel, pad4, reg, tensor_arg
from .layout import layout_axes, layout_index, parse_layout
from .nn import _windows

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
        if oh <= 0 or ow <= 0:
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
    return _windows(xp, kh, kw, attrs.strides, attrs.dilation, oh, ow), geometry


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
    count = _windows(mask[None, None], *attrs.pool_size, attrs.strides, attrs.dilation, oh, ow).sum(axis=(-2, -1))
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


def _global_rel(types: list, attrs) -> TensorType:
    op = "nn.global_avg_pool2d"
    data = tensor_arg(op, types, 0, "data")
    n_, c_, h_, w_ = layout_index(attrs.layout, "NCHW", op)
    out_layout = attrs.out_layout or attrs.layout
    layout_index(out_layout, "NCHW", op)
    if data.ndim != 4:
        raise TypeInferenceError(f"{op}: data must be 4-D ({attrs.layout}), got {data}")
    nchw = (data.shape[n_], data.shape[c_], 1, 1)
    shape = tuple(nchw["NCHW".index(c)] for c in parse_layout(out_layout))
    return data if shape == data.shape else TensorType(shape, data.dtype)


@kernel
def _global_avg_pool2d(args: list, attrs) -> np.ndarray:
    x = args[0]
    x = np.transpose(x, layout_axes(attrs.layout, "NCHW"))
    acc = "float64" if x.dtype.kind in "iub" else x.dtype
    out = x.mean(axis=(2, 3), keepdims=True, dtype=acc)
    return _finish(out, attrs, x.dtype)


reg("nn.global_avg_pool2d", 1, _global_rel, _global_avg_pool2d,
    attrs=(("layout", "NCHW"), ("out_layout", "")), pattern=FUSABLE,
    summary="Average over the whole spatial extent: (N, C, H, W) -> (N, C, 1, 1).", extra=_LAYOUT_EXTRA)
