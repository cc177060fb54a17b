"""Data layouts (``"NCHW"``, ``"NHWC"``, ``"OIHW"``, ``"HWIO"`` ...) and ``layout_transform``.

A layout is a string of distinct upper-case letters, one per axis. Two layouts
with the same letters are permutations of each other; :func:`layout_axes` gives
the ``np.transpose`` axes converting one into the other. Split layouts such as
``NCHW4c`` are not supported (``layout_transform`` says so).

Passes may import these helpers: ``from passhost.ir.ops.layout import parse_layout, layout_axes``.
"""
from __future__ import annotations

import functools

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..op import OpPattern
from ..types import TensorType
from ._util import kernel, reg, tensor_arg

__all__ = ["parse_layout", "layout_axes", "layout_index", "transform_shape"]


@functools.lru_cache(maxsize=256)
def parse_layout(layout: str) -> tuple:
    """The axis letters of ``layout``.

    :raises IRError: if it is not a string of distinct upper-case letters
    """
    if not isinstance(layout, str) or not layout:
        raise IRError(f"a layout must be a non-empty string such as 'NCHW', got {layout!r}")
    letters = tuple(layout)
    if not all("A" <= c <= "Z" for c in letters) or len(set(letters)) != len(letters):
        raise IRError(
            f"layout {layout!r} is not supported: use distinct upper-case axis letters "
            "such as 'NCHW', 'NHWC', 'OIHW' or 'HWIO' (split layouts like 'NCHW4c' are not supported)")
    return letters


@functools.lru_cache(maxsize=256)
def layout_axes(src: str, dst: str) -> tuple:
    """Axes ``p`` with ``np.transpose(x_in_src, p)`` laid out as ``dst``.

    :raises IRError: if the layouts are not permutations of the same letters
    """
    a, b = parse_layout(src), parse_layout(dst)
    if sorted(a) != sorted(b):
        raise IRError(f"cannot convert layout {src!r} to {dst!r}: they must have the same axis letters")
    return tuple(a.index(c) for c in b)


def layout_index(layout: str, letters: str, op: str = "") -> tuple:
    """Positions of each of ``letters`` in ``layout`` (e.g. N, C, H, W in ``"NHWC"``).

    A type relation asks this of every convolution it types, so the answers are remembered
    (only valid ones: at most the permutations of ``letters``).

    :raises TypeInferenceError: if the layout lacks one of them or has extra axes
    """
    key = (layout, letters)
    known = _INDEX.get(key)
    if known is not None:
        return known
    try:
        axes = parse_layout(layout)
    except IRError as err:
        raise TypeInferenceError(f"{op}: {err}") from None
    if sorted(axes) != sorted(letters):
        raise TypeInferenceError(f"{op}: layout {layout!r} must be a permutation of {letters!r}")
    known = _INDEX[key] = tuple(axes.index(c) for c in letters)
    return known


_INDEX: dict = {}


def transform_shape(shape: tuple, src: str, dst: str) -> tuple:
    """``shape`` (laid out as ``src``) laid out as ``dst``."""
    return tuple(shape[i] for i in layout_axes(src, dst))


def _layout_transform_rel(types: list, attrs) -> TensorType:
    op = "layout_transform"
    t = tensor_arg(op, types, 0, "data")
    src, dst = attrs.src_layout, attrs.dst_layout
    try:
        axes = layout_axes(src, dst)
    except IRError as err:
        raise TypeInferenceError(f"{op}: {err}") from None
    if len(axes) != t.ndim:
        raise TypeInferenceError(f"{op}: src_layout {src!r} has {len(axes)} axes but the data is {t}")
    if axes == tuple(range(t.ndim)):
        return t
    return TensorType(tuple(t.shape[i] for i in axes), t.dtype)


@kernel
def _layout_transform(args: list, attrs) -> np.ndarray:
    return np.require(np.transpose(args[0], layout_axes(attrs.src_layout, attrs.dst_layout)), requirements="C")


def _check_layouts(attrs) -> None:
    for key in ("src_layout", "dst_layout"):
        v = attrs[key]
        if not isinstance(v, str) or not v:
            raise IRError(f"operator layout_transform: attribute {key} must be a layout string "
                          f"such as 'NCHW', got {v!r}")


reg("layout_transform", 1, _layout_transform_rel, _layout_transform,
    attrs=(("src_layout", None), ("dst_layout", None)), pattern=OpPattern.INJECTIVE,
    attr_check=_check_layouts, summary="Permute the axes of a tensor from one data layout to another.",
    extra={"layout_attrs": ("src_layout", "dst_layout")})
