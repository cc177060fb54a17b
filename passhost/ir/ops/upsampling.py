"""``nn.upsampling`` and ``nn.upsampling3d`` (pattern INJECTIVE), TVM's ``UpSamplingRel``
and topi's ``upsampling``: a resize of the spatial axes by ``scale_*``.

Each spatial size becomes ``round(size * scale)`` (rounding halves to even, as TVM's
constant folding of ``round`` does). A symbolic size scales exactly by a whole scale
(``2*h``) and is ``?`` for a fractional one. ``layout`` is a permutation of ``NCHW``
(``NCDHW``).

The data moves as topi resizes it: ``nn.upsampling``'s ``method`` is
``nearest_neighbor``, ``bilinear`` or ``bicubic``, with ``asymmetric`` coordinates
(``align_corners``: ``align_corners`` ones); ``nn.upsampling3d``'s is
``nearest_neighbor`` or ``trilinear`` with its ``coordinate_transformation_mode``::

    nn.upsampling(%x, scale_h=2f, scale_w=2f)   /* (1, 16, 32, 32) -> (1, 16, 64, 64) */
    nn.upsampling3d(%x, scale_d=2f, scale_h=2f, scale_w=2f, method="trilinear")   /* (1, 2, 3, 4, 4) -> (1, 2, 6, 8, 8) */
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..dims import ANY
from ..op import OpPattern
from ..types import TensorType
from ._util import kernel, reg, tensor_arg
from .image import weight_matrix
from .layout import layout_axes, layout_index, parse_layout

UP2, UP3 = "nn.upsampling", "nn.upsampling3d"
#: the resize method of each upsampling method name (topi strips "bi"/"tri")
_METHOD = {"nearest_neighbor": "nearest_neighbor", "bilinear": "linear", "bicubic": "cubic", "trilinear": "linear"}
_MODES = ("half_pixel", "align_corners", "asymmetric")


def scaled_dim(size, scale: float):
    """``round(size * scale)``: an int for an int size, ``size * k`` for a whole scale ``k``,
    else ``?``."""
    if type(size) is int:
        return int(round(size * float(scale)))
    if float(scale).is_integer():
        return size * int(scale)
    return ANY


def _spatial_rel(op: str, base: str, scales: tuple):
    def rel(types: list, attrs) -> TensorType:
        data = tensor_arg(op, types, 0, "data")
        if data.ndim != len(base):
            raise TypeInferenceError(f"{op}: data must be {len(base)}-D ({attrs.layout}), got {data}")
        where = layout_index(attrs.layout, base, op)
        shape = list(data.shape)
        for letter, key in zip(base[2:], scales):
            i = where[base.index(letter)]
            shape[i] = scaled_dim(shape[i], attrs[key])
        shape = tuple(shape)
        return data if shape == data.shape else TensorType(shape, data.dtype)

    rel.__name__ = f"{op.replace('.', '_')}_rel"
    return rel


def _resize(x: np.ndarray, layout: str, base: str, scales: tuple, method: str, mode: str) -> np.ndarray:
    """``x`` resized along the spatial axes of ``base`` by ``scales`` (one weight matrix per axis)."""
    how = SimpleNamespace(coordinate_transformation_mode=mode, method=method, rounding_method="", antialias=0,
                          cubic_alpha=-0.5, cubic_exclude=0)
    out = np.transpose(x, layout_axes(layout, base)).astype("float64")
    for k, scale in enumerate(scales):
        axis = 2 + k
        size = out.shape[axis]
        w, _ = weight_matrix(scaled_dim(size, scale), size, how, 0.0, 0.0)
        out = np.moveaxis(np.tensordot(out, w, axes=([axis], [1])), -1, axis)
    if x.dtype.kind in "iub":
        out = np.round(out)
    return np.ascontiguousarray(np.transpose(out, layout_axes(base, layout))).astype(x.dtype)


@kernel
def _upsampling(args: list, attrs) -> np.ndarray:
    mode = "align_corners" if attrs.align_corners else "asymmetric"
    return _resize(args[0], attrs.layout, "NCHW", (attrs.scale_h, attrs.scale_w), _METHOD[attrs.method], mode)


@kernel
def _upsampling3d(args: list, attrs) -> np.ndarray:
    return _resize(args[0], attrs.layout, "NCDHW", (attrs.scale_d, attrs.scale_h, attrs.scale_w),
                   _METHOD[attrs.method], attrs.coordinate_transformation_mode)


def _check(op: str, base: str, scales: tuple, methods: tuple):
    def check(attrs) -> None:
        for key in scales:
            v = attrs[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise IRError(f"operator {op}: attribute {key} must be a positive number, got {v!r}")
        try:
            letters = parse_layout(attrs.layout)
        except IRError as err:
            raise IRError(f"operator {op}: attribute layout: {err}") from None
        if sorted(letters) != sorted(base):
            raise IRError(f"operator {op}: attribute layout must be a permutation of {base}, got {attrs.layout!r}")
        if attrs.method not in methods:
            raise IRError(f"operator {op}: attribute method must be one of {', '.join(map(repr, methods))}, "
                          f"got {attrs.method!r}")
        if op == UP3 and attrs.coordinate_transformation_mode not in _MODES:
            raise IRError(f"operator {op}: attribute coordinate_transformation_mode must be one of "
                          f"{', '.join(map(repr, _MODES))}, got {attrs.coordinate_transformation_mode!r}")

    return check


_S2, _S3 = ("scale_h", "scale_w"), ("scale_d", "scale_h", "scale_w")
reg(UP2, 1, _spatial_rel(UP2, "NCHW", _S2), _upsampling,
    attrs=(("scale_h", 1.0), ("scale_w", 1.0), ("layout", "NCHW"), ("method", "nearest_neighbor"),
           ("align_corners", False)),
    pattern=OpPattern.INJECTIVE, attr_check=_check(UP2, "NCHW", _S2, ("nearest_neighbor", "bilinear", "bicubic")),
    summary="Upsample H and W by scale_h and scale_w (nearest, bilinear or bicubic).")
reg(UP3, 1, _spatial_rel(UP3, "NCDHW", _S3), _upsampling3d,
    attrs=(("scale_d", 1.0), ("scale_h", 1.0), ("scale_w", 1.0), ("layout", "NCDHW"), ("method", "nearest_neighbor"),
           ("coordinate_transformation_mode", "half_pixel")),
    pattern=OpPattern.INJECTIVE, attr_check=_check(UP3, "NCDHW", _S3, ("nearest_neighbor", "trilinear")),
    summary="Upsample D, H and W by scale_d, scale_h and scale_w (nearest or trilinear).")
