"""``slice_like`` (pattern INJECTIVE), TVM's ``SliceLikeRel``: slice ``data`` from the start
of each axis to the size of ``shape_like`` on that axis.

``axes`` lists the axes to slice (negative counts from the end of ``data``); None slices
every axis both tensors have. ``shape_like``'s size must not exceed ``data``'s on a sliced
axis (an error only where that is provable: symbolic sizes are taken as they are)::

    slice_like(%x, %y, axes=[1, 2])   /* %x: (1, 8, 8, 4), %y: (1, 5, 6, 2) -> (1, 5, 6, 4) */
"""
from __future__ import annotations

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..op import OpPattern
from ..types import TensorType
from ._util import kernel, norm_axis, provably_greater, reg, tensor_arg

OP = "slice_like"


def sliced_axes(ndim: int, like_ndim: int, axes) -> tuple:
    """The axes of ``data`` (rank ``ndim``) that ``slice_like`` slices."""
    if axes is None:
        return tuple(range(min(ndim, like_ndim)))
    if not axes:
        raise TypeInferenceError(f"{OP}: axes cannot be empty (None slices every axis)")
    out = tuple(norm_axis(OP, a, ndim, "axes") for a in axes)
    for a in out:
        if a >= like_ndim:
            raise TypeInferenceError(f"{OP}: axis {a} exceeds the rank {like_ndim} of shape_like")
    return out


def _rel(types: list, attrs) -> TensorType:
    data = tensor_arg(OP, types, 0, "data")
    like = tensor_arg(OP, types, 1, "shape_like")
    shape = list(data.shape)
    for a in sliced_axes(data.ndim, like.ndim, attrs.axes):
        if provably_greater(like.shape[a], data.shape[a]):
            raise TypeInferenceError(f"{OP}: axis {a} of shape_like {like} is longer than that of data {data}")
        shape[a] = like.shape[a]
    shape = tuple(shape)
    return data if shape == data.shape else TensorType(shape, data.dtype)


@kernel
def _slice_like(args: list, attrs) -> np.ndarray:
    x, like = args
    index = [slice(None)] * x.ndim
    for a in sliced_axes(x.ndim, like.ndim, attrs.axes):
        index[a] = slice(0, like.shape[a])
    return np.ascontiguousarray(x[tuple(index)])


def _check(attrs) -> None:
    v = attrs.axes
    if v is not None and not (isinstance(v, tuple) and all(isinstance(a, int) and not isinstance(a, bool) for a in v)):
        raise IRError(f"operator {OP}: attribute axes must be None or a list of ints, got {v!r}")


reg(OP, 2, _rel, _slice_like, attrs=(("axes", None),), pattern=OpPattern.INJECTIVE, attr_check=_check,
    summary="Slice data from the start of each axis to the size of shape_like on that axis.")
