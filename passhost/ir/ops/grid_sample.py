"""``image.grid_sample`` (pattern INJECTIVE, as TVM's): sample the data at the points a
grid gives, TVM's signature and grid layout::

    image.grid_sample(%data: (N, C, H, W), %grid: (N, 2, Ho, Wo), method="bilinear",
                      padding_mode="zeros", align_corners=True)   /* -> (N, C, Ho, Wo) */

``grid[:, 0]`` is the x (width) coordinate and ``grid[:, 1]`` the y (height), in
``[-1, 1]``; with 3-D data (``layout`` ``NCDHW``) the grid is ``(N, 3, Do, Ho, Wo)``, x, y, z.
A coordinate maps to ``(g + 1) / 2 * (size - 1)`` with ``align_corners``, else to
``((g + 1) * size - 1) / 2``. ``method``: ``nearest`` (halves round to even), ``bilinear``
(linear in every spatial axis) or ``bicubic`` (``A = -0.75``). ``padding_mode``: ``zeros``
(taps outside read 0), ``border`` (coordinates and taps clamp to the edge; bicubic clamps
its taps only, as onnxruntime does) or
``reflection`` (reflected at the edges: the pixel centres with ``align_corners``, else
the image border), as ONNX's ``GridSample`` defines them.
"""
from __future__ import annotations

import itertools

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..op import OpPattern
from ..types import TensorType
from ._util import kernel, reg, tensor_arg
from .nn import differ, static_of

OP = "image.grid_sample"
METHODS = ("nearest", "bilinear", "bicubic")
PADDING = ("zeros", "border", "reflection")


def _rel(types: list, attrs) -> TensorType:
    data = tensor_arg(OP, types, 0, "data")
    grid = tensor_arg(OP, types, 1, "grid")
    nd = data.ndim - 2
    if nd not in (2, 3) or attrs.layout != ("NCHW" if nd == 2 else "NCDHW"):
        raise TypeInferenceError(f"{OP}: data must be NCHW or NCDHW as the layout says ({attrs.layout}), got {data}")
    if grid.ndim != data.ndim or differ(grid.shape[0], data.shape[0]) or differ(grid.shape[1], nd) \
            or grid.dtype != data.dtype:
        raise TypeInferenceError(f"{OP}: the grid {grid} must be (N, {nd}, *out) of the data's batch and dtype "
                                 f"({data})")
    return TensorType((static_of(data.shape[0], grid.shape[0]), data.shape[1]) + grid.shape[2:], data.dtype)


def _reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    span = hi - lo
    if span <= 0:
        return np.zeros_like(x) + lo
    below = x < lo
    d = np.where(below, lo - x, x - hi)
    n = np.floor(d / span)
    r = d - n * span
    even = (n % 2) == 0
    inside = (x >= lo) & (x <= hi)
    out = np.where(below, np.where(even, lo + r, hi - r), np.where(even, hi - r, lo + r))
    return np.where(inside, x, out)


def _cubic(t: np.ndarray) -> list:
    """The four tap weights of the cubic spline (A = -0.75) at fraction ``t``."""
    a = -0.75

    def near(x):
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


@kernel
def _grid_sample(args: list, attrs) -> np.ndarray:
    data, grid = args
    n, c = data.shape[:2]
    sizes = data.shape[2:]
    nd = len(sizes)
    g = grid.astype(np.float64)
    pad, corners = attrs.padding_mode, bool(attrs.align_corners)
    coords = []  # per data axis (d, h, w order), the continuous coordinate of every output point
    for axis in range(nd):
        size = sizes[axis]
        gi = g[:, nd - 1 - axis]  # the grid lists x (width) first
        x = (gi + 1) / 2 * (size - 1) if corners else ((gi + 1) * size - 1) / 2
        if pad == "border" and attrs.method != "bicubic":  # (bicubic clamps its taps only)
            x = np.clip(x, 0, size - 1)
        elif pad == "reflection":
            x = _reflect(x, 0.0, size - 1.0) if corners else _reflect(x, -0.5, size - 0.5)
        coords.append(x)
    batch = np.arange(n).reshape((n,) + (1,) * (grid.ndim - 2))
    flat = data.astype(np.float64)

    def tap(indices: list) -> np.ndarray:
        """The data at integer taps (N, *out, C), padded as ``padding_mode`` says."""
        ok = np.ones(indices[0].shape, bool)
        fixed = []
        for axis, i in enumerate(indices):
            size = sizes[axis]
            if pad == "zeros":
                ok &= (i >= 0) & (i < size)
                i = np.clip(i, 0, size - 1)
            elif pad == "border":
                i = np.clip(i, 0, size - 1)
            else:
                lo, hi = (0.0, size - 1.0) if corners else (-0.5, size - 0.5)
                i = np.clip(np.floor(_reflect(i.astype(np.float64), lo, hi)).astype(np.int64), 0, size - 1)
            fixed.append(i)
        values = flat[(batch, slice(None)) + tuple(fixed)]  # (N, *out, C): the advanced axes first
        return np.where(ok[..., None], values, 0.0)

    if attrs.method == "nearest":
        out = tap([np.rint(x).astype(np.int64) for x in coords])
    else:
        cubic = attrs.method == "bicubic"
        base = [np.floor(x).astype(np.int64) - (1 if cubic else 0) for x in coords]
        fracs = [x - np.floor(x) for x in coords]
        weights = [_cubic(t) if cubic else [1 - t, t] for t in fracs]
        out = 0.0
        for offsets in itertools.product(range(4 if cubic else 2), repeat=nd):
            w = 1.0
            for axis, k in enumerate(offsets):
                w = w * weights[axis][k]
            out = out + tap([b + k for b, k in zip(base, offsets)]) * w[..., None]
    return np.ascontiguousarray(np.moveaxis(out, -1, 1)).astype(data.dtype, copy=False)


def _check(attrs) -> None:
    if attrs.method not in METHODS:
        raise IRError(f"operator {OP}: attribute method must be one of {', '.join(METHODS)}, got {attrs.method!r}")
    if attrs.padding_mode not in PADDING:
        raise IRError(f"operator {OP}: attribute padding_mode must be one of {', '.join(PADDING)}, got "
                      f"{attrs.padding_mode!r}")
    if attrs.layout not in ("NCHW", "NCDHW"):
        raise IRError(f"operator {OP}: attribute layout must be NCHW or NCDHW, got {attrs.layout!r}")


reg(OP, 2, _rel, _grid_sample,
    attrs=(("method", "bilinear"), ("layout", "NCHW"), ("padding_mode", "zeros"), ("align_corners", True)),
    pattern=OpPattern.INJECTIVE, attr_check=_check,
    summary="Sample the data at the grid's points (nearest, bilinear, bicubic; zeros, border, reflection).")
