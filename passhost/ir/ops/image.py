"""``image.resize2d`` (pattern INJECTIVE), TVM's ``Resize2DAttrs`` and topi's arithmetic.

Each output coordinate ``x`` maps to an input coordinate by
``coordinate_transformation_mode`` (``scale = in / out``, computed in float32 as TVM does):

* ``half_pixel``: ``(x + 0.5) * scale - 0.5``; ``pytorch_half_pixel``: the same, 0 when out is 1
* ``align_corners``: ``x * (in - 1) / (out - 1)``; ``asymmetric``: ``x * scale``
* ``tf_half_pixel_for_nn``: ``(x + 0.5) * scale``
* ``tf_crop_and_resize``: ``roi`` ``[start_h, start_w, end_h, end_w]`` (fractions of
  ``in - 1``); points outside the input take ``extrapolation_value``
* ``half_pixel_symmetric`` (ONNX opset 19): ``half_pixel`` shifted so the output's centre
  maps to the input's centre when ``scales`` makes the output length fractional

Two attributes beyond TVM's carry what ONNX's ``Resize`` can say and TVM's cannot:

* ``scales`` ``[s_h, s_w]``: map coordinates with these output/input ratios instead of
  ``out / in`` (ONNX ``scales`` whose output length ``in x s`` is not whole, e.g. 0.6 of 4
  rows is 2.4: 2 rows, sampled 1/0.6 apart); None (the default) is TVM's ``out / in``
* ``antialias`` (ONNX opset 18): when downsampling, ``linear`` and ``cubic`` stretch their
  filter by ``in / out`` so every input pixel contributes (the taps outside the image clamp
  to the border, or are dropped with ``cubic_exclude``), weights normalised to sum to 1

``method`` ``nearest_neighbor`` rounds the coordinate with ``rounding_method``
(``round`` halves to even, ``round_prefer_floor``, ``round_prefer_ceil``, ``floor``,
``ceil``; empty: ``round`` for align_corners, else ``floor``, as topi); ``linear`` is
bilinear; ``cubic`` uses the ``cubic_alpha`` spline (``cubic_exclude`` drops taps outside
the image and renormalises). Taps outside the image are clamped to the border::

    image.resize2d(%x, size=[8, 8], roi=[0f, 0f, 0f, 0f], method="nearest_neighbor", rounding_method="")
    /* (1, 3, 4, 4) -> (1, 3, 8, 8) */

``size`` may hold symbolic dimensions (a resize relative to a dynamic input), which the
output type takes as they are; the kernel sees them bound to ints::

    image.resize2d(%x, size=[2*h, 2*w])   /* (n, 3, h, w) -> (n, 3, 2*h, 2*w) */

The kernel builds one weight matrix per spatial axis (``out x in``) and contracts the
data with both, so all three methods share one path.
"""
from __future__ import annotations

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..dims import Dim
from ..op import OpPattern
from ..types import TensorType, check_dtype
from ._util import kernel, reg, tensor_arg
from .layout import layout_axes, layout_index, parse_layout
from .nn import surely_le

OP = "image.resize2d"
METHODS = ("nearest_neighbor", "linear", "cubic")
MODES = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "tf_half_pixel_for_nn",
         "tf_crop_and_resize", "half_pixel_symmetric")
ROUNDING = ("", "round", "round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
F = np.float32


def _rel(types: list, attrs) -> TensorType:
    data = tensor_arg(OP, types, 0, "data")
    n_, c_, h_, w_ = layout_index(attrs.layout, "NCHW", OP)
    if data.ndim != 4:
        raise TypeInferenceError(f"{OP}: data must be 4-D ({attrs.layout}), got {data}")
    shape = list(data.shape)
    shape[h_], shape[w_] = attrs.size
    return TensorType(tuple(shape), attrs.out_dtype or data.dtype)


def in_coords(out: int, size: int, mode: str, start: float, end: float, ratio: float = 0.0) -> np.ndarray:
    """The input coordinate of each output index along one axis (float32). ``ratio``: the
    output/input scale to map with, ONNX's way (divided by, as onnxruntime does, so a
    coordinate that lands on a rounding tie lands there too); 0: ``out / size``, TVM's
    way (multiplied by ``size / out``, as topi does)."""
    x = np.arange(out, dtype=F)
    if ratio:
        r = F(ratio)
        width = r * F(size)  # the output length, fractional
        half = (x + F(0.5)) / r - F(0.5)
        if mode == "half_pixel_symmetric":  # (onnxruntime's order of operations)
            return F(size) / F(2) * (F(1) - F(out) / width) + (x + F(0.5)) / r - F(0.5)
        if mode in ("half_pixel", "pytorch_half_pixel"):
            return half if mode == "half_pixel" or out > 1 else np.zeros(out, F)
        if mode == "asymmetric":
            return x / r
        if mode == "tf_half_pixel_for_nn":
            return (x + F(0.5)) / r
    else:
        scale = F(size) / F(out)
        width = F(out)
        if mode in ("half_pixel", "half_pixel_symmetric"):  # (symmetric: no shift for a whole length)
            return (x + F(0.5)) * scale - F(0.5)
        if mode == "pytorch_half_pixel":
            return (x + F(0.5)) * scale - F(0.5) if out > 1 else np.zeros(out, F)
        if mode == "asymmetric":
            return scale * x
        if mode == "tf_half_pixel_for_nn":
            return (x + F(0.5)) * scale
    if mode == "align_corners":
        return F(size - 1) / (width - F(1)) * x if out > 1 else np.zeros(out, F)
    # tf_crop_and_resize
    if out > 1:
        return F(start * (size - 1)) + x * F(end - start) * F(size - 1) / (width - F(1))
    return np.full(out, F(0.5 * (start + end) * (size - 1)), F)


def _nearest(c: np.ndarray, rounding: str) -> np.ndarray:
    if rounding == "round":
        return np.round(c)
    if rounding == "round_prefer_floor":
        return np.ceil(c - F(0.5))
    if rounding == "round_prefer_ceil":
        return np.floor(c + F(0.5))
    if rounding == "floor":
        return np.floor(c + F(1e-5))
    return np.ceil(c - F(1e-5))  # ceil


def _cubic_weights(t: np.ndarray, a: float) -> list:
    t2, t3 = t * t, t * t * t
    return [a * (t3 - 2 * t2 + t), (a + 2) * t3 - (3 + a) * t2 + 1,
            -(a + 2) * t3 + (3 + 2 * a) * t2 - a * t, -a * t3 + a * t2]


def _cubic_kernel(d: np.ndarray, a: float) -> np.ndarray:
    """The cubic convolution kernel at distances ``|d|`` (Keys, with ``a``)."""
    d = np.abs(d)
    d2, d3 = d * d, d * d * d
    return np.where(d <= 1, (a + 2) * d3 - (a + 3) * d2 + 1,
                    np.where(d < 2, a * d3 - 5 * a * d2 + 8 * a * d - 4 * a, 0.0))


def _antialias_taps(c: np.ndarray, size: int, attrs, ratio: float) -> tuple:
    """``(index, weight)`` arrays (outputs x taps) of an antialiased linear or cubic filter:
    ONNX's reference ``_linear_coeffs_antialias``/``_cubic_coeffs_antialias`` -- the
    filter stretched by ``1 / min(ratio, 1)``, its taps the nearest ones to each coordinate
    (the left one first), weights normalised to sum to 1."""
    s = min(ratio, 1.0)
    base = np.floor(c).astype("int64")
    frac = (c - base).astype("float64")
    whole = frac == 0  # an integral coordinate counts as the right end of the interval left of it
    base[whole] -= 1
    frac[whole] = 1.0
    reach = 1 if attrs.method == "linear" else 2
    first = int(np.floor(-reach / s) + 1)
    offsets = np.arange(first, 2 - first)
    dist = (offsets[None, :] - frac[:, None]) * s
    if attrs.method == "linear":
        weight = np.clip(1.0 - np.abs(dist), 0.0, 1.0)
    else:
        weight = _cubic_kernel(dist, float(attrs.cubic_alpha))
    weight = weight / weight.sum(axis=1, keepdims=True)
    index = base[:, None] + offsets[None, :]
    if attrs.cubic_exclude:
        weight = np.where((index < 0) | (index >= size), 0.0, weight)
        weight = weight / weight.sum(axis=1, keepdims=True)
    return index, weight


def weight_matrix(out: int, size: int, attrs, start: float, end: float, ratio: float = 0.0) -> tuple:
    """``(W, outside)``: ``W[o, i]`` is input ``i``'s weight in output ``o``; ``outside``
    marks outputs that take the extrapolation value. ``ratio``: the axis's entry of
    ``scales`` (0: none)."""
    mode, method = attrs.coordinate_transformation_mode, attrs.method
    c = in_coords(out, size, mode, start, end, ratio)
    w = np.zeros((out, size), dtype="float64")
    rows = np.arange(out)
    if method == "nearest_neighbor":
        rounding = attrs.rounding_method or ("round" if mode == "align_corners" else "floor")
        idx = np.clip(_nearest(c, rounding).astype("int64"), 0, size - 1)
        w[rows, idx] = 1.0
    elif attrs.antialias:
        index, weight = _antialias_taps(c, size, attrs, ratio or out / size)
        np.add.at(w, (np.repeat(rows, index.shape[1]), np.clip(index, 0, size - 1).reshape(-1)), weight.reshape(-1))
    elif method == "linear":
        base = np.floor(c)
        frac = (c - base).astype("float64")
        base = base.astype("int64")
        np.add.at(w, (rows, np.clip(base, 0, size - 1)), 1.0 - frac)
        np.add.at(w, (rows, np.clip(base + 1, 0, size - 1)), frac)
    else:  # cubic
        base = np.floor(c)
        frac = (c - base).astype("float64")
        base = base.astype("int64")
        taps = _cubic_weights(frac, float(attrs.cubic_alpha))
        if attrs.cubic_exclude:
            taps = [np.where((base - 1 + k < 0) | (base + k > size), 0.0, taps[k]) for k in range(4)]
            total = sum(taps)
            taps = [t / total for t in taps]
        for k in range(4):
            np.add.at(w, (rows, np.clip(base - 1 + k, 0, size - 1)), taps[k])
    outside = np.zeros(out, dtype=bool)
    if mode == "tf_crop_and_resize":
        outside = (c < 0) | (c > size - 1)
    return w, outside


@kernel
def _resize2d(args: list, attrs) -> np.ndarray:
    x = args[0]
    out_dtype = attrs.out_dtype or x.dtype
    x = np.transpose(x, layout_axes(attrs.layout, "NCHW"))
    _, _, h, w = x.shape
    oh, ow = attrs.size
    roi = tuple(attrs.roi) if attrs.roi else (0.0, 0.0, 0.0, 0.0)
    sy, sx = attrs.scales or (0.0, 0.0)
    wy, out_y = weight_matrix(oh, h, attrs, roi[0], roi[2], sy)
    wx, out_x = weight_matrix(ow, w, attrs, roi[1], roi[3], sx)
    out = np.einsum("yh,nchw,xw->ncyx", wy, x.astype("float64"), wx, optimize=True)
    if out_y.any() or out_x.any():
        out[:, :, out_y, :] = attrs.extrapolation_value
        out[:, :, :, out_x] = attrs.extrapolation_value
    if np.dtype(out_dtype).kind in "iub":
        out = np.round(out)
    out = np.transpose(out, layout_axes("NCHW", attrs.layout))
    return np.ascontiguousarray(out).astype(out_dtype)


def _check(attrs) -> None:
    def bad(key, want):
        raise IRError(f"operator {OP}: attribute {key} must be {want}, got {attrs[key]!r}")

    size = attrs.size  # (a resize to a symbolic size, size=[2*h, 2*w], holds Dims)
    if not (isinstance(size, tuple) and len(size) == 2 and all(
            (type(d) is Dim and not surely_le(d, 0)) or (isinstance(d, int) and not isinstance(d, bool) and d > 0)
            for d in size)):
        bad("size", "two positive ints or dimensions (height, width)")
    roi = attrs.roi
    if roi is not None and not (isinstance(roi, tuple) and len(roi) == 4 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in roi)):
        bad("roi", "None or four numbers [start_h, start_w, end_h, end_w]")
    scales = attrs.scales
    if scales is not None and not (isinstance(scales, tuple) and len(scales) == 2 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in scales)):
        bad("scales", "None or two positive numbers [scale_h, scale_w] (output / input)")
    if attrs.antialias not in (0, 1, False, True):
        bad("antialias", "0 or 1")
    try:
        parse_layout(attrs.layout)
    except IRError as err:
        raise IRError(f"operator {OP}: attribute layout: {err}") from None
    for key, allowed in (("method", METHODS), ("coordinate_transformation_mode", MODES),
                         ("rounding_method", ROUNDING)):
        if attrs[key] not in allowed:
            bad(key, "one of " + ", ".join(repr(a) for a in allowed))
    if attrs.out_dtype:
        check_dtype(attrs.out_dtype)


reg(OP, 1, _rel, _resize2d,
    attrs=(("size", None), ("roi", None), ("layout", "NCHW"), ("method", "linear"),
           ("coordinate_transformation_mode", "half_pixel"), ("rounding_method", "round"),
           ("cubic_alpha", -0.5), ("cubic_exclude", 0), ("extrapolation_value", 0.0), ("out_dtype", ""),
           ("scales", None), ("antialias", 0)),
    pattern=OpPattern.INJECTIVE, attr_check=_check,
    summary="Resize the spatial axes (nearest, bilinear or cubic; ONNX coordinate modes).",
    extra={"data_layout_attr": "layout"})
