"""Vision builders: ``ir.vision.roi_align`` and ``ir.vision.roi_pool`` (TVM's ``relay.vision``)."""
from __future__ import annotations

from typing import Any

from .builders import _call, _ints
from .expr import Call, Expr

__all__ = ["roi_align", "roi_pool"]


def _pooled(pooled_size: Any) -> tuple:
    hw = _ints(pooled_size, "pooled_size")
    return hw * 2 if len(hw) == 1 else hw


def roi_align(data: Expr, rois: Expr, pooled_size: Any, spatial_scale: float, sample_ratio: int = -1,
              layout: str = "NCHW", mode: str = "avg") -> Call:
    """``vision.roi_align``: each region of ``rois`` ``(R, 5)`` bilinearly sampled and averaged
    (``mode="max"``: maximised) over a ``pooled_size`` grid."""
    return _call("vision.roi_align", (data, rois), {
        "pooled_size": _pooled(pooled_size), "spatial_scale": float(spatial_scale),
        "sample_ratio": int(sample_ratio), "layout": layout, "mode": mode})


def roi_pool(data: Expr, rois: Expr, pooled_size: Any, spatial_scale: float, layout: str = "NCHW") -> Call:
    """``vision.roi_pool``: the maximum of each region of ``rois`` ``(R, 5)`` over a
    ``pooled_size`` grid of whole-pixel bins."""
    return _call("vision.roi_pool", (data, rois), {
        "pooled_size": _pooled(pooled_size), "spatial_scale": float(spatial_scale), "layout": layout})
