"""Image builders: ``ir.image.resize2d`` and ``ir.image.grid_sample`` (TVM's ``relay.image``)."""
from __future__ import annotations

from typing import Any, Optional

from ..errors import IRError
from .builders import _call, _ints
from .expr import Call, Expr

__all__ = ["resize2d", "grid_sample"]


def resize2d(data: Expr, size: Any, roi: Optional[Any] = None, layout: str = "NCHW", method: str = "linear",
             coordinate_transformation_mode: str = "half_pixel", rounding_method: str = "",
             cubic_alpha: float = -0.5, cubic_exclude: int = 0, extrapolation_value: float = 0.0,
             out_dtype: str = "", scales: Optional[Any] = None, antialias: int = 0) -> Call:
    """``image.resize2d``: resize the H and W axes of ``data`` to ``size`` (TVM's defaults:
    ``roi`` None means ``[0, 0, 0, 0]``; an empty ``rounding_method`` means ``round`` for
    ``align_corners`` and ``floor`` otherwise). Beyond TVM: ``scales`` ``[s_h, s_w]`` maps
    coordinates with these output/input ratios instead of ``size / input size`` (ONNX's
    fractional scales), and ``antialias=1`` widens the linear and cubic filters when
    downsampling (ONNX opset 18)."""
    hw = _ints(size, "resize2d size")
    if len(hw) == 1:
        hw = hw * 2
    if len(hw) != 2:
        raise IRError(f"resize2d size must be one or two ints, got {size!r}")
    try:
        box = (0.0,) * 4 if roi is None else tuple(float(v) for v in roi)
    except (TypeError, ValueError):
        raise IRError(f"resize2d roi must be four numbers, got {roi!r}") from None
    try:
        ratios = None if scales is None else tuple(float(v) for v in scales)
    except (TypeError, ValueError):
        raise IRError(f"resize2d scales must be two numbers, got {scales!r}") from None
    return _call("image.resize2d", (data,), {
        "size": hw, "roi": box, "layout": layout, "method": method,
        "coordinate_transformation_mode": coordinate_transformation_mode, "rounding_method": rounding_method,
        "cubic_alpha": float(cubic_alpha), "cubic_exclude": int(cubic_exclude),
        "extrapolation_value": float(extrapolation_value), "out_dtype": out_dtype, "scales": ratios,
        "antialias": int(antialias)})


def grid_sample(data: Expr, grid: Expr, method: str = "bilinear", layout: str = "NCHW", padding_mode: str = "zeros",
                align_corners: bool = True) -> Call:
    """``image.grid_sample``: sample ``data`` at ``grid``'s points; ``grid`` is ``(N, 2, Ho, Wo)``
    (``(N, 3, Do, Ho, Wo)`` with ``layout="NCDHW"``), x first, in ``[-1, 1]``."""
    return _call("image.grid_sample", (data, grid), {"method": method, "layout": layout,
                                                     "padding_mode": padding_mode, "align_corners": bool(align_corners)})
