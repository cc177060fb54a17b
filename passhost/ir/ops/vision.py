"""``vision.roi_align`` and ``vision.roi_pool`` (pattern OUT_ELEMWISE_FUSABLE), TVM's
``ROIAlignRel``/``ROIPoolRel`` and topi's kernels, in ``NCHW`` and ``NHWC``.

``rois`` is ``(R, 5)``: ``[batch_index, w_start, h_start, w_end, h_end]`` in input-image
coordinates, scaled by ``spatial_scale``. The output has one ``pooled_size`` map per
region: ``(R, C, PH, PW)`` (``NCHW``) or ``(R, PH, PW, C)`` (``NHWC``).

* ``roi_align`` splits each region (at least 1x1) into ``PH x PW`` bins and samples each
  bin on a ``sample_ratio`` square grid (``sample_ratio <= 0``: ``ceil(region / pooled)``
  points per axis), bilinearly (a point more than one pixel outside the map reads 0); the
  bin is the mean (``mode="avg"``) or maximum (``"max"``) of its samples.
* ``roi_pool`` rounds the region to whole pixels and takes the maximum of each bin
  (``floor``/``ceil`` of the bin edges, clipped to the map; an empty bin is 0)::

    vision.roi_align(%x, %rois, pooled_size=[7, 7], spatial_scale=0.0625f, sample_ratio=2)
    /* %x: (1, 64, 56, 56), %rois: (32, 5) -> (32, 64, 7, 7) */
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..op import OpPattern
from ..types import TensorType
from ._util import check_int_pair, dims_differ, kernel, reg, tensor_arg

ALIGN, POOL = "vision.roi_align", "vision.roi_pool"
_LAYOUTS = ("NCHW", "NHWC")


def _roi_rel(op: str):
    def rel(types: list, attrs) -> TensorType:
        data = tensor_arg(op, types, 0, "data")
        rois = tensor_arg(op, types, 1, "rois")
        if data.ndim != 4:
            raise TypeInferenceError(f"{op}: data must be 4-D ({attrs.layout}), got {data}")
        if rois.ndim != 2 or dims_differ(rois.shape[1], 5):
            raise TypeInferenceError(f"{op}: rois must be (num_roi, 5), got {rois}")
        ph, pw = attrs.pooled_size
        if attrs.layout == "NCHW":
            shape = (rois.shape[0], data.shape[1], ph, pw)
        else:
            shape = (rois.shape[0], ph, pw, data.shape[3])
        return TensorType(shape, data.dtype)

    rel.__name__ = f"{op.replace('.', '_')}_rel"
    return rel


def _sample_weights(points: np.ndarray, size: int) -> np.ndarray:
    """``W[p, i]``: input row ``i``'s bilinear weight at each sample point (topi's
    ``_bilinear``: a point past ``-1`` or ``size`` reads nothing; others are clamped)."""
    w = np.zeros((points.size, size), dtype="float64")
    inside = (points >= -1.0) & (points <= size)
    p = np.clip(points, 0.0, size - 1)
    low = np.floor(p).astype("int64")
    frac = p - low
    rows = np.nonzero(inside)[0]
    np.add.at(w, (rows, low[rows]), 1.0 - frac[rows])
    high = low + 1
    keep = rows[high[rows] < size]
    np.add.at(w, (keep, high[keep]), frac[keep])
    return w


def _align_one(fmap: np.ndarray, roi: np.ndarray, attrs) -> np.ndarray:
    """One region of an ``NCHW`` map ``(C, H, W)`` -> ``(C, PH, PW)``."""
    ph, pw = attrs.pooled_size
    x0, y0, x1, y1 = (float(v) * attrs.spatial_scale for v in roi[1:])
    rh, rw = max(y1 - y0, 1.0), max(x1 - x0, 1.0)
    bh, bw = rh / ph, rw / pw
    if attrs.sample_ratio > 0:
        gh = gw = int(attrs.sample_ratio)
    else:
        gh, gw = int(math.ceil(rh / ph)), int(math.ceil(rw / pw))
    ys = y0 + np.arange(ph)[:, None] * bh + (np.arange(gh)[None, :] + 0.5) * bh / gh
    xs = x0 + np.arange(pw)[:, None] * bw + (np.arange(gw)[None, :] + 0.5) * bw / gw
    c, h, w = fmap.shape
    samples = np.einsum("ah,chw,bw->cab", _sample_weights(ys.reshape(-1), h), fmap, _sample_weights(xs.reshape(-1), w))
    samples = samples.reshape(c, ph, gh, pw, gw)
    if attrs.mode == "max":
        return samples.max(axis=(2, 4))
    return samples.sum(axis=(2, 4)) / (gh * gw)


def _pool_one(fmap: np.ndarray, roi: np.ndarray, attrs) -> np.ndarray:
    """One region of an ``NCHW`` map ``(C, H, W)`` -> ``(C, PH, PW)`` (topi's ``roi_pool_nchw``)."""
    ph, pw = attrs.pooled_size
    c, h, w = fmap.shape
    x0, y0, x1, y1 = (int(np.rint(float(v) * attrs.spatial_scale)) for v in roi[1:])
    bh, bw = max(y1 - y0 + 1, 1) / ph, max(x1 - x0 + 1, 1) / pw
    out = np.zeros((c, ph, pw), dtype="float64")
    eps = 1e-5
    for i in range(ph):
        hs = min(max(int(math.floor(i * bh + eps)) + y0, 0), h)
        he = min(max(int(math.ceil((i + 1) * bh - eps)) + y0, 0), h)
        for j in range(pw):
            ws = min(max(int(math.floor(j * bw + eps)) + x0, 0), w)
            we = min(max(int(math.ceil((j + 1) * bw - eps)) + x0, 0), w)
            if hs < he and ws < we:
                out[:, i, j] = fmap[:, hs:he, ws:we].max(axis=(1, 2))
    return out


def _roi_kernel(one):
    @kernel
    def run(args: list, attrs) -> np.ndarray:
        x, rois = args
        nchw = x if attrs.layout == "NCHW" else np.transpose(x, (0, 3, 1, 2))
        wide = nchw.astype("float64")
        out = np.stack([one(wide[int(r[0])], r, attrs) for r in rois]) if len(rois) else np.zeros(
            (0, nchw.shape[1]) + tuple(attrs.pooled_size))
        if attrs.layout == "NHWC":
            out = np.transpose(out, (0, 2, 3, 1))
        return np.ascontiguousarray(out).astype(x.dtype)

    return run


def _check(op: str):
    def check(attrs) -> None:
        check_int_pair(op, attrs, "pooled_size")
        scale = attrs.spatial_scale
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0:
            raise IRError(f"operator {op}: attribute spatial_scale must be a positive number, got {scale!r}")
        if attrs.layout not in _LAYOUTS:
            raise IRError(f"operator {op}: attribute layout must be 'NCHW' or 'NHWC', got {attrs.layout!r}")
        if op == ALIGN:
            if attrs.mode not in ("avg", "max"):
                raise IRError(f"operator {op}: attribute mode must be 'avg' or 'max', got {attrs.mode!r}")
            if isinstance(attrs.sample_ratio, bool) or not isinstance(attrs.sample_ratio, int):
                raise IRError(f"operator {op}: attribute sample_ratio must be an int, got {attrs.sample_ratio!r}")

    return check


_EXTRA = {"data_layout_attr": "layout"}
_FUSABLE = OpPattern.OUT_ELEMWISE_FUSABLE
reg(ALIGN, 2, _roi_rel(ALIGN), _roi_kernel(_align_one),
    attrs=(("pooled_size", None), ("spatial_scale", None), ("sample_ratio", -1), ("layout", "NCHW"), ("mode", "avg")),
    pattern=_FUSABLE, attr_check=_check(ALIGN), extra=_EXTRA,
    summary="Bilinearly sampled average (or maximum) of each region of interest over a pooled grid.")
reg(POOL, 2, _roi_rel(POOL), _roi_kernel(_pool_one),
    attrs=(("pooled_size", None), ("spatial_scale", None), ("layout", "NCHW")),
    pattern=_FUSABLE, attr_check=_check(POOL), extra=_EXTRA,
    summary="Maximum of each region of interest over a pooled grid of whole-pixel bins.")
