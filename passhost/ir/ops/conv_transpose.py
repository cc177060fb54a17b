"""``nn.conv2d_transpose`` (pattern OUT_ELEMWISE_FUSABLE), TVM's ``Conv2DTransposeAttrs``.

The weight is ``IOHW`` by default: ``(in_channels, out_channels / groups, kh, kw)``
(any permutation works through ``kernel_layout``; the data layout is any permutation of
``NCHW``). The output size per spatial axis is
``(in - 1) * stride + (k - 1) * dilation + 1 - pad_before - pad_after + output_padding``
(ONNX ``ConvTranspose``'s formula); ``padding`` holds 1, 2 or 4 values
``(top, left, bottom, right)``, ``output_padding`` adds rows/columns at the bottom/right::

    nn.conv2d_transpose(%x, %w, strides=[2, 2], padding=[1, 1, 1, 1], output_padding=[1, 1])
    /* (1, 8, 4, 4) with w (8, 3, 3, 3) -> (1, 3, 8, 8) */

The kernel scatters each weight tap: for tap ``(i, j)`` the contribution of input pixel
``(h, w)`` lands on output ``(h * sh + i * dh - pad_top, w * sw + j * dw - pad_left)``.
"""
from __future__ import annotations

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..op import OpPattern
from ..types import TensorType
from ._util import check_int_pair, check_pad, kernel, pad4, reg, tensor_arg
from .layout import layout_axes, layout_index, parse_layout
from .nn import differ, indivisible, static_of, surely_le

OP = "nn.conv2d_transpose"


def transpose_out_dim(size: int, k: int, stride: int, dilation: int, lo: int, hi: int, extra: int) -> int:
    return (size - 1) * stride + (k - 1) * dilation + 1 - lo - hi + extra


def _rel(types: list, attrs) -> TensorType:
    data = tensor_arg(OP, types, 0, "data")
    n_, c_, h_, w_ = layout_index(attrs.data_layout, "NCHW", OP)
    i_, o_, kh_, kw_ = layout_index(attrs.kernel_layout, "IOHW", OP)
    out_layout = attrs.out_layout or attrs.data_layout
    layout_index(out_layout, "NCHW", OP)
    if data.ndim != 4:
        raise TypeInferenceError(f"{OP}: data must be 4-D ({attrs.data_layout}), got {data}")
    groups = attrs.groups
    in_ch = data.shape[c_]
    if in_ch % groups != 0 and indivisible(in_ch, groups):
        raise TypeInferenceError(f"{OP}: data has {in_ch} input channels, not divisible by groups={groups}")
    if types[1] is None:
        if attrs.channels is None or attrs.kernel_size is None:
            raise TypeInferenceError(f"{OP}: the weight's type is unknown; give the weight a type annotation "
                                     "or set channels and kernel_size")
        if attrs.channels % groups:
            raise TypeInferenceError(f"{OP}: channels={attrs.channels} is not divisible by groups={groups}")
        dims = [0, 0, 0, 0]
        dims[i_], dims[o_] = in_ch, attrs.channels // groups
        dims[kh_], dims[kw_] = attrs.kernel_size
        types[1] = TensorType(dims, data.dtype)
    weight = tensor_arg(OP, types, 1, "the weight")
    if weight.ndim != 4:
        raise TypeInferenceError(f"{OP}: the weight must be 4-D ({attrs.kernel_layout}), got {weight}")
    if weight.dtype != data.dtype:
        raise TypeInferenceError(f"{OP}: dtype mismatch between the data {data} and the weight {weight}")
    ws = weight.shape
    if ws[i_] != in_ch and differ(ws[i_], in_ch):
        raise TypeInferenceError(f"{OP}: data has {in_ch} input channels but the weight {weight} "
                                 f"(layout {attrs.kernel_layout}) has {ws[i_]}")
    out_ch = ws[o_] * groups
    if attrs.channels is not None and attrs.channels != out_ch:
        if differ(attrs.channels, out_ch):
            raise TypeInferenceError(f"{OP}: channels={attrs.channels} but the weight {weight} gives "
                                     f"{out_ch} output channels (groups={groups})")
        out_ch = static_of(out_ch, attrs.channels)
    kh, kw = ws[kh_], ws[kw_]
    ks = attrs.kernel_size
    if ks is not None and tuple(ks) != (kh, kw):
        if differ(ks[0], kh) or differ(ks[1], kw):
            raise TypeInferenceError(f"{OP}: kernel_size={list(ks)} but the weight {weight} is {kh}x{kw}")
        kh, kw = static_of(kh, ks[0]), static_of(kw, ks[1])
    pt, pl, pb, pr = pad4(attrs.padding)
    (sh, sw), (dh, dw), (oph, opw) = attrs.strides, attrs.dilation, attrs.output_padding
    oh = transpose_out_dim(data.shape[h_], kh, sh, dh, pt, pb, oph)
    ow = transpose_out_dim(data.shape[w_], kw, sw, dw, pl, pr, opw)
    if (oh <= 0 or ow <= 0) if type(oh) is int and type(ow) is int else (surely_le(oh, 0) or surely_le(ow, 0)):
        raise TypeInferenceError(f"{OP}: padding {list(attrs.padding)} leaves no output for {data}")
    nchw = (data.shape[n_], out_ch, oh, ow)
    shape = tuple(nchw["NCHW".index(c)] for c in parse_layout(out_layout))
    return TensorType(shape, attrs.out_dtype or data.dtype)


def scatter_taps(x: np.ndarray, w: np.ndarray, groups: int, strides: tuple, dilation: tuple, lo: tuple,
                 out: tuple) -> np.ndarray:
    """The transposed convolution of ``x`` (``N, C, *spatial``) with ``w`` (``C, O/groups,
    *kernel``) for any number of spatial axes, cropped at ``lo`` to ``out``: each weight tap
    scatters ``x`` times its channel matrix onto a strided grid of the output."""
    n, c = x.shape[:2]
    og = w.shape[1]
    spatial, taps = x.shape[2:], w.shape[2:]
    full = tuple(max((s - 1) * st + (k - 1) * d + 1, p + o)
                 for s, k, st, d, p, o in zip(spatial, taps, strides, dilation, lo, out))
    buf = np.zeros((n, groups * og) + full, dtype=x.dtype)
    xg = x.reshape((n, groups, c // groups) + spatial)
    wg = w.reshape((groups, c // groups, og) + taps)
    for tap in np.ndindex(*taps):
        contrib = np.einsum("ngc...,gco->ngo...", xg, wg[(Ellipsis,) + tap], optimize=True)
        where = tuple(slice(t * d, t * d + (s - 1) * st + 1, st)
                      for t, d, s, st in zip(tap, dilation, spatial, strides))
        buf[(slice(None), slice(None)) + where] += contrib.reshape((n, groups * og) + spatial)
    return buf[(slice(None), slice(None)) + tuple(slice(p, p + o) for p, o in zip(lo, out))]


@kernel
def _conv2d_transpose(args: list, attrs) -> np.ndarray:
    x, w = args
    out_dtype = attrs.out_dtype or x.dtype
    x = np.transpose(x, layout_axes(attrs.data_layout, "NCHW"))
    w = np.transpose(w, layout_axes(attrs.kernel_layout, "IOHW"))
    acc = "float64" if np.dtype(out_dtype).kind in "iub" else out_dtype
    x, w = x.astype(acc, copy=False), w.astype(acc, copy=False)
    pt, pl, pb, pr = pad4(attrs.padding)
    (sh, sw), (dh, dw), (oph, opw) = attrs.strides, attrs.dilation, attrs.output_padding
    oh = transpose_out_dim(x.shape[2], w.shape[2], sh, dh, pt, pb, oph)
    ow = transpose_out_dim(x.shape[3], w.shape[3], sw, dw, pl, pr, opw)
    out = scatter_taps(x, w, attrs.groups, (sh, sw), (dh, dw), (pt, pl), (oh, ow))
    out = np.transpose(out, layout_axes("NCHW", attrs.out_layout or attrs.data_layout))
    return np.ascontiguousarray(out).astype(out_dtype, copy=False)


def _check(attrs) -> None:
    check_int_pair(OP, attrs, "strides")
    check_int_pair(OP, attrs, "dilation")
    check_int_pair(OP, attrs, "output_padding", positive=False)
    check_int_pair(OP, attrs, "kernel_size", allow_none=True)
    check_pad(OP, attrs)
    g = attrs.groups
    if isinstance(g, bool) or not isinstance(g, int) or g < 1:
        raise IRError(f"operator {OP}: attribute groups must be a positive int, got {g!r}")
    ch = attrs.channels
    if ch is not None and (isinstance(ch, bool) or not isinstance(ch, int) or ch < 1):
        raise IRError(f"operator {OP}: attribute channels must be a positive int or None, got {ch!r}")
    for key in ("data_layout", "kernel_layout", "out_layout"):
        v = attrs[key]
        if key == "out_layout" and v == "":
            continue
        try:
            parse_layout(v)
        except IRError as err:
            raise IRError(f"operator {OP}: attribute {key}: {err}") from None


reg(OP, 2, _rel, _conv2d_transpose,
    attrs=(("channels", None), ("kernel_size", None), ("strides", (1, 1)), ("output_padding", (0, 0)),
           ("padding", (0, 0)), ("dilation", (1, 1)), ("groups", 1), ("data_layout", "NCHW"),
           ("kernel_layout", "IOHW"), ("out_layout", ""), ("out_dtype", "")),
    pattern=OpPattern.OUT_ELEMWISE_FUSABLE, attr_check=_check,
    summary="Transposed 2-D convolution (deconvolution); IOHW weights by default.",
    extra={"data_layout_attr": "data_layout", "kernel_layout_attr": "kernel_layout",
           "out_layout_attr": "out_layout"})
