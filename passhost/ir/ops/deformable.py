"""``nn.deformable_conv2d`` (TVM's, DCN v1) and ``nn.modulated_deformable_conv2d`` (DCN v2,
with a mask), pattern OUT_ELEMWISE_FUSABLE: a 2-D convolution whose every tap samples the
input at a learned offset from its grid position, bilinearly, zero outside the image::

    nn.deformable_conv2d(%x, %offset, %w, padding=[1, 1, 1, 1], kernel_size=[3, 3], channels=8)
    /* x (1, 4, 8, 8), offset (1, 18, 8, 8), w (8, 4, 3, 3) -> (1, 8, 8, 8) */

``offset`` is ``(N, deformable_groups * kh * kw * 2, OH, OW)``, ordered group, kernel row,
kernel column, then ``(dy, dx)``; the modulated form's ``mask`` is ``(N,
deformable_groups * kh * kw, OH, OW)`` and scales each sample. Data NCHW, weights OIHW
(the only layouts here); ``groups`` and ``deformable_groups`` split the input channels.
"""
from __future__ import annotations

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..op import OpPattern
from ..types import TensorType
from ._util import check_int_pair, check_pad, kernel, pad4, reg, tensor_arg
from .nn import conv_out_dim, differ, indivisible, static_of


def _rel_for(op: str, masked: bool):
    def rel(types: list, attrs) -> TensorType:
        data = tensor_arg(op, types, 0, "data")
        offset = tensor_arg(op, types, 1, "the offset")
        weight = tensor_arg(op, types, 2, "the weight")
        if data.ndim != 4 or weight.ndim != 4 or offset.ndim != 4:
            raise TypeInferenceError(f"{op}: data, offset and weight must be 4-D (NCHW, OIHW), got {data}, {offset}, "
                                     f"{weight}")
        n, c, h, w = data.shape
        o, i, kh, kw = weight.shape
        g, dg = attrs.groups, attrs.deformable_groups
        if indivisible(c, g) or indivisible(c, dg) or differ(i * g, c) or indivisible(o, g) \
                or weight.dtype != data.dtype:
            raise TypeInferenceError(f"{op}: the weight {weight} does not fit the data {data} with groups={g}, "
                                     f"deformable_groups={dg}")
        pt, pl, pb, pr = pad4(attrs.padding)
        oh = conv_out_dim(h, pt, pb, kh, attrs.strides[0], attrs.dilation[0])
        ow = conv_out_dim(w, pl, pr, kw, attrs.strides[1], attrs.dilation[1])
        want = (n, dg * kh * kw * 2, oh, ow)
        if offset.ndim != 4 or any(differ(a, b) for a, b in zip(offset.shape, want)) or offset.dtype != data.dtype:
            raise TypeInferenceError(f"{op}: the offset must be {data.dtype}[{n}, {dg * kh * kw * 2}, {oh}, {ow}] "
                                     f"(deformable_groups x kh x kw x 2 channels), got {offset}")
        n, oh, ow = static_of(n, offset.shape[0]), static_of(oh, offset.shape[2]), static_of(ow, offset.shape[3])
        if masked:
            mask = tensor_arg(op, types, 3, "the mask")
            want = (n, dg * kh * kw, oh, ow)
            if mask.ndim != 4 or any(differ(a, b) for a, b in zip(mask.shape, want)) or mask.dtype != data.dtype:
                raise TypeInferenceError(f"{op}: the mask must be {data.dtype}[{n}, {dg * kh * kw}, {oh}, {ow}], "
                                         f"got {mask}")
        if attrs.channels is not None:
            if differ(attrs.channels, o):
                raise TypeInferenceError(f"{op}: channels={attrs.channels} but the weight {weight} has {o}")
            o = static_of(o, attrs.channels)
        return TensorType((n, o, oh, ow), attrs.out_dtype or data.dtype)
    return rel


def _sample(x: np.ndarray, y: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """Bilinear samples of ``x`` (``C, H, W``) at rows ``y`` and columns ``xs`` (same shape
    ``S``), zero outside the image: ``C x S``."""
    _, h, w = x.shape
    y0, x0 = np.floor(y).astype(np.int64), np.floor(xs).astype(np.int64)
    out = 0.0
    for dy in (0, 1):
        for dx in (0, 1):
            yy, xx = y0 + dy, x0 + dx
            weight = (1 - np.abs(y - yy)) * (1 - np.abs(xs - xx))
            inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
            vals = x[:, np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)]
            out = out + vals * np.where(inside, weight, 0.0)
    return out


def _compute(args: list, attrs) -> np.ndarray:
    x, offset, w = (a.astype(np.float64) for a in args[:3])
    n, c, h, wd = x.shape
    o, i, kh, kw = w.shape
    g, dg = attrs.groups, attrs.deformable_groups
    oh, ow = offset.shape[2:]
    pt, pl, _, _ = pad4(attrs.padding)
    (sh, sw), (dh, dw) = attrs.strides, attrs.dilation
    offset = offset.reshape(n, dg, kh, kw, 2, oh, ow)
    mask = args[3].astype(np.float64).reshape(n, dg, kh, kw, oh, ow) if len(args) == 4 else None
    rows = (np.arange(oh) * sh - pt)[:, None]
    cols = (np.arange(ow) * sw - pl)[None, :]
    per = c // dg
    # columns[b, channel, a, b2, oh, ow]: the sampled input of every tap
    columns = np.empty((n, c, kh, kw, oh, ow))
    for b in range(n):
        for k in range(dg):
            for a in range(kh):
                for e in range(kw):
                    y = rows + a * dh + offset[b, k, a, e, 0]
                    xs = cols + e * dw + offset[b, k, a, e, 1]
                    s = _sample(x[b, k * per:(k + 1) * per], y, xs)
                    columns[b, k * per:(k + 1) * per, a, e] = s if mask is None else s * mask[b, k, a, e]
    cols_g = columns.reshape(n, g, c // g, kh, kw, oh, ow)
    w_g = w.reshape(g, o // g, i, kh, kw)
    out = np.einsum("ngcijhw,gocij->ngohw", cols_g, w_g, optimize=True).reshape(n, o, oh, ow)
    return out.astype(attrs.out_dtype or args[0].dtype)


def _check_for(op: str):
    def check(attrs) -> None:
        check_int_pair(op, attrs, "strides")
        check_int_pair(op, attrs, "dilation")
        check_int_pair(op, attrs, "kernel_size", allow_none=True)
        check_pad(op, attrs)
        for key in ("groups", "deformable_groups"):
            v = attrs[key]
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise IRError(f"operator {op}: attribute {key} must be a positive int, got {v!r}")
        for key, want in (("data_layout", "NCHW"), ("kernel_layout", "OIHW"), ("out_layout", "NCHW")):
            if attrs[key] not in (want, ""):
                raise IRError(f"operator {op}: attribute {key} must be {want!r}, got {attrs[key]!r}")
    return check


_ATTRS = (("strides", (1, 1)), ("padding", (0, 0)), ("dilation", (1, 1)), ("deformable_groups", 1), ("groups", 1),
          ("channels", None), ("kernel_size", None), ("data_layout", "NCHW"), ("kernel_layout", "OIHW"),
          ("out_layout", ""), ("out_dtype", ""))

for _op, _n, _summary in (
        ("nn.deformable_conv2d", 3, "Deformable 2-D convolution (DCN v1): each tap samples the input at an offset."),
        ("nn.modulated_deformable_conv2d", 4, "Deformable 2-D convolution with a mask scaling each sample (DCN v2).")):
    reg(_op, _n, _rel_for(_op, _n == 4), kernel(_compute), attrs=_ATTRS, pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
        attr_check=_check_for(_op), summary=_summary)
