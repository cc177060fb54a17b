"""``nn.pad`` (pattern INJECTIVE).

``pad_width`` holds one ``(before, after)`` pair per axis; the pad value is the
second argument (a scalar, cast to the data's dtype, as TVM's ``PadCompute`` does).
``pad_mode`` is ``"constant"`` (the pad value), ``"edge"`` (repeat the border element)
or ``"reflect"`` (mirror without repeating the border, numpy's and ONNX's ``reflect``).
A negative width crops that side (ONNX ``Pad`` allows it). A width may be a symbolic
dimension (``max(10, n) - n``: padding up to a size), evaluated when the sizes are bound::

    nn.pad(%x, 0f, pad_width=[[0, 0], [0, 0], [1, 1], [2, 2]])   /* (1, 3, 4, 4) -> (1, 3, 6, 8) */
"""
from __future__ import annotations

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..dims import Dim, dmin
from ..op import OpPattern
from ..types import TensorType
from ._util import kernel, reg, tensor_arg
from .nn import surely_le, surely_lt

_MODES = ("constant", "edge", "reflect")


def _pad_rel(types: list, attrs) -> TensorType:
    op = "nn.pad"
    data = tensor_arg(op, types, 0, "data")
    value = tensor_arg(op, types, 1, "the pad value")
    if value.ndim != 0:
        raise TypeInferenceError(f"{op}: the pad value must be a scalar, got {value}")
    widths = attrs.pad_width
    if len(widths) != data.ndim:
        raise TypeInferenceError(f"{op}: pad_width has {len(widths)} pairs but the data {data} has "
                                 f"{data.ndim} axes; give one (before, after) pair per axis")
    shape = []
    for axis, (d, (lo, hi)) in enumerate(zip(data.shape, widths)):
        n = d + lo + hi
        if (n < 0) if type(n) is int else surely_lt(n, 0):
            raise TypeInferenceError(f"{op}: padding axis {axis} of {data} by ({lo}, {hi}) leaves a negative size")
        if attrs.pad_mode != "constant" and (not surely_le(lo, 0) or not surely_le(hi, 0)) \
                and surely_le(d + dmin(lo, 0) + dmin(hi, 0), 0):
            raise TypeInferenceError(f"{op}: cannot {attrs.pad_mode}-pad the empty axis {axis} of {data}")
        shape.append(n)
    shape = tuple(shape)
    return data if shape == data.shape else TensorType(shape, data.dtype)


@kernel
def _pad(args: list, attrs) -> np.ndarray:
    x, value = args
    crop = tuple(slice(max(-lo, 0), x.shape[i] - max(-hi, 0)) for i, (lo, hi) in enumerate(attrs.pad_width))
    x = x[crop]
    widths = [(max(lo, 0), max(hi, 0)) for lo, hi in attrs.pad_width]
    if attrs.pad_mode == "constant":
        return np.pad(x, widths, mode="constant", constant_values=np.asarray(value).astype(x.dtype))
    return np.pad(x, widths, mode=attrs.pad_mode)


def _check_pad(attrs) -> None:
    v = attrs.pad_width
    ok = isinstance(v, tuple) and all(
        isinstance(p, tuple) and len(p) == 2 and all((isinstance(i, int) and not isinstance(i, bool)) or type(i) is Dim
                                                    for i in p)
        for p in v)
    if not ok:
        raise IRError(f"operator nn.pad: attribute pad_width must be a list of (before, after) pairs of ints or "
                      f"dimensions, got {v!r}")
    if attrs.pad_mode not in _MODES:
        raise IRError(f"operator nn.pad: attribute pad_mode must be one of {', '.join(_MODES)}, "
                      f"got {attrs.pad_mode!r}")


reg("nn.pad", 2, _pad_rel, _pad, attrs=(("pad_width", None), ("pad_mode", "constant")),
    pattern=OpPattern.INJECTIVE, attr_check=_check_pad,
    summary="Pad each axis by (before, after) with a value, the edge, or a reflection.")
