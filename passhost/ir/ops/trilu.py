"""``trilu``: the upper or lower triangle of the last two axes (TVM's ``relay.trilu``, ONNX's
``Trilu``); the rest is zeros. ``k`` (a scalar int64 argument) moves the diagonal up (> 0)
or down (< 0). A causal mask over a sequence of run-time length is one call::

    trilu(%ones, 1i64, upper=True)      /* %ones: Tensor[(seq, seq), bool] */
    ->  True where column - row >= 1, False elsewhere
"""
from __future__ import annotations

import numpy as np

from ...errors import TypeInferenceError
from ..op import OpPattern
from ..types import TensorType
from ._util import kernel, reg, tensor_arg


def _rel(types: list, attrs) -> TensorType:
    data = tensor_arg("trilu", types, 0, "data")
    if len(data.shape) < 2:
        raise TypeInferenceError(f"trilu: the data {data} needs at least two axes (the matrix's)")
    if types[1] is None:
        types[1] = TensorType((), "int64")
    k = tensor_arg("trilu", types, 1, "k")
    if k.shape != () or not k.dtype.startswith("int"):
        raise TypeInferenceError(f"trilu: k must be an integer scalar, got {k}")
    return data


@kernel
def _trilu(args: list, attrs) -> np.ndarray:
    data, k = args
    k = int(k)
    rows, cols = data.shape[-2:]
    keep = np.triu(np.ones((rows, cols), bool), k) if attrs.upper else np.tril(np.ones((rows, cols), bool), k)
    return np.where(keep, data, np.zeros((), data.dtype))


reg("trilu", 2, _rel, _trilu, attrs=(("upper", True),), pattern=OpPattern.INJECTIVE,
    summary="The upper (or lower) triangle of the last two axes, k diagonals over; zeros elsewhere.")
