"""``nn.conv3d_transpose`` (pattern OUT_ELEMWISE_FUSABLE), TVM's ``Conv3DTransposeAttrs``:
the transposed 3-D convolution of volumetric decoders (3-D U-Nets, video generators).

Data is ``NCDHW`` and the weight ``IODHW``: ``(in_channels, out_channels / groups, kd, kh,
kw)`` (the only layouts, as for the other 3-D operators). Per spatial axis the output is
``(in - 1) * stride + (k - 1) * dilation + 1 - pad_before - pad_after + output_padding``;
``padding`` holds 1, 3 or 6 values ``(front, top, left, back, bottom, right)``::

    nn.conv3d_transpose(%x, %w, strides=[2, 2, 2], padding=[1, 1, 1], output_padding=[1, 1, 1])
    /* (1, 8, 4, 4, 4) with w (8, 3, 3, 3, 3) -> (1, 3, 8, 8, 8) */

The kernel is the 2-D operator's, over three axes (:func:`.conv_transpose.scatter_taps`).
"""
from __future__ import annotations

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..op import OpPattern
from ..types import TensorType
from ._util import kernel, reg, tensor_arg
from .conv_transpose import scatter_taps, transpose_out_dim
from .nn import differ, indivisible, static_of, surely_le
from .volume import _check_common, _check_triple, pad6

OP = "nn.conv3d_transpose"


def _out(data_shape: tuple, weight_shape: tuple, attrs) -> tuple:
    p = pad6(attrs.padding)
    return tuple(transpose_out_dim(data_shape[2 + i], weight_shape[2 + i], attrs.strides[i], attrs.dilation[i],
                                   p[i], p[3 + i], attrs.output_padding[i]) for i in range(3))


def _rel(types: list, attrs) -> TensorType:
    groups = attrs.groups
    data = tensor_arg(OP, types, 0, "data")
    if data.ndim != 5:
        raise TypeInferenceError(f"{OP}: data must be 5-D (NCDHW), got {data}")
    n, c = data.shape[:2]
    if indivisible(c, groups):
        raise TypeInferenceError(f"{OP}: data has {c} input channels, not divisible by groups={groups}")
    if types[1] is None and attrs.channels is not None and attrs.kernel_size is not None:
        types[1] = TensorType((c, attrs.channels // groups) + tuple(attrs.kernel_size), data.dtype)
    weight = tensor_arg(OP, types, 1, "the weight")
    if weight.ndim != 5 or weight.dtype != data.dtype or differ(weight.shape[0], c):
        raise TypeInferenceError(f"{OP}: the weight {weight} does not fit the data {data} "
                                 "(want C x O/groups x kd x kh x kw, same dtype)")
    out_ch = weight.shape[1] * groups
    if attrs.channels is not None:
        if differ(attrs.channels, out_ch):
            raise TypeInferenceError(f"{OP}: channels={attrs.channels} but the weight {weight} gives {out_ch} "
                                     f"output channels (groups={groups})")
        out_ch = static_of(out_ch, attrs.channels)
    wshape = weight.shape
    if attrs.kernel_size is not None:
        if any(differ(k, d) for k, d in zip(attrs.kernel_size, wshape[2:])):
            raise TypeInferenceError(f"{OP}: kernel_size={list(attrs.kernel_size)} but the weight is {weight}")
        wshape = wshape[:2] + tuple(static_of(d, k) for d, k in zip(wshape[2:], attrs.kernel_size))
    out = _out(data.shape, wshape, attrs)
    if any(surely_le(d, 0) for d in out):
        raise TypeInferenceError(f"{OP}: padding {list(attrs.padding)} leaves no output for {data}")
    return TensorType((n, out_ch) + out, attrs.out_dtype or data.dtype)


@kernel
def _conv3d_transpose(args: list, attrs) -> np.ndarray:
    x, w = args
    out_dtype = attrs.out_dtype or x.dtype
    acc = "float64" if np.dtype(out_dtype).kind in "iub" else out_dtype
    x, w = x.astype(acc, copy=False), w.astype(acc, copy=False)
    out = scatter_taps(x, w, attrs.groups, attrs.strides, attrs.dilation, pad6(attrs.padding)[:3],
                       _out(x.shape, w.shape, attrs))
    return np.ascontiguousarray(out).astype(out_dtype, copy=False)


def _check(attrs) -> None:
    _check_common(OP, attrs, "kernel_size", (("data_layout", "NCDHW"), ("kernel_layout", "IODHW"),
                                             ("out_layout", "NCDHW")))
    _check_triple(OP, attrs, "output_padding", positive=False)
    if min(attrs.output_padding) < 0:
        raise IRError(f"operator {OP}: attribute output_padding must be 3 ints >= 0, got {attrs.output_padding!r}")
    g, ch = attrs.groups, attrs.channels
    if isinstance(g, bool) or not isinstance(g, int) or g < 1:
        raise IRError(f"operator {OP}: attribute groups must be a positive int, got {g!r}")
    if ch is not None and (isinstance(ch, bool) or not isinstance(ch, int) or ch < 1):
        raise IRError(f"operator {OP}: attribute channels must be a positive int or None, got {ch!r}")


reg(OP, 2, _rel, _conv3d_transpose,
    attrs=(("channels", None), ("kernel_size", None), ("strides", (1, 1, 1)), ("padding", (0, 0, 0)),
           ("output_padding", (0, 0, 0)), ("dilation", (1, 1, 1)), ("groups", 1), ("data_layout", "NCDHW"),
           ("kernel_layout", "IODHW"), ("out_layout", ""), ("out_dtype", "")),
    pattern=OpPattern.OUT_ELEMWISE_FUSABLE, attr_check=_check,
    summary="Transposed 3-D convolution (NCDHW data, IODHW weights; strides, padding, output_padding, "
            "dilation, groups).")
