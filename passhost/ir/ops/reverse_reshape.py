"""``contrib_reverse_reshape`` (pattern INJECTIVE; ``ir.reverse_reshape``), TVM's
``ReverseReshapeRel``: ``reshape`` with its special codes (``0`` copy, ``-1`` infer,
``-2`` copy the rest, ``-3`` merge two) read from the right instead of the left.

The shape is that of ``reshape`` applied to the reversed input shape with the reversed
``newshape``, reversed back; the data moves as ``reshape`` moves it (row-major)::

    contrib_reverse_reshape(%x, newshape=[-1, 0])   /* (10, 5, 4) -> (50, 4) */
    reshape(%x, newshape=[-1, 0])                   /* (10, 5, 4) -> (40, 5) */
"""
from __future__ import annotations

import numpy as np

from ..op import OpPattern
from ..types import TensorType
from ._util import check_dims_attr, kernel, reg, tensor_arg
from .transform import reshape_shape

OP = "contrib_reverse_reshape"


def reverse_reshape_shape(shape: tuple, newshape: tuple) -> tuple:
    """The output shape of ``contrib_reverse_reshape(x: shape, newshape)``."""
    return tuple(reversed(reshape_shape(tuple(reversed(shape)), tuple(reversed(newshape)), OP)))


def _rel(types: list, attrs) -> TensorType:
    t = tensor_arg(OP, types, 0, "data")
    shape = reverse_reshape_shape(t.shape, attrs.newshape)
    return t if shape == t.shape else TensorType(shape, t.dtype)


@kernel
def _reverse_reshape(args: list, attrs) -> np.ndarray:
    x = args[0]
    return np.reshape(x, reverse_reshape_shape(x.shape, attrs.newshape))


def _check(attrs) -> None:
    check_dims_attr(OP, "newshape", attrs.newshape, f"operator {OP}: attribute newshape must be a list of "
                    "ints, got {v}", nonneg=False)


reg(OP, 1, _rel, _reverse_reshape, attrs=(("newshape", None),), pattern=OpPattern.INJECTIVE, attr_check=_check,
    summary="reshape with the special codes of newshape read from the right.")
