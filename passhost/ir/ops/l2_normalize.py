"""``nn.l2_normalize`` (TVM registers no fusion pattern for it: OPAQUE), TVM's
``L2NormalizeAttrs`` and the decomposition ``SimplifyInference`` gives it::

    x / sqrt(maximum(sum(x * x, axis, keepdims=True), eps))

``axis`` is a list of axes (negative counts from the end); None normalises over every
axis. The type is the input's::

    nn.l2_normalize(%x, eps=0.001f, axis=[1])   /* (1, 64, 56, 56) -> (1, 64, 56, 56) */
"""
from __future__ import annotations

import numpy as np

from ...errors import IRError
from ..op import OpPattern
from ..types import TensorType
from ._util import kernel, norm_axes, reg, tensor_arg

OP = "nn.l2_normalize"


def _rel(types: list, attrs) -> TensorType:
    t = tensor_arg(OP, types, 0, "data")
    norm_axes(OP, attrs.axis, t.ndim)  # (checked: an axis out of range is an error)
    return t


@kernel
def _l2_normalize(args: list, attrs) -> np.ndarray:
    x = args[0]
    axes = norm_axes(OP, attrs.axis, x.ndim)
    wide = x.astype("float64")
    norm = np.sqrt(np.maximum(np.sum(wide * wide, axis=axes, keepdims=True), float(attrs.eps)))
    return (wide / norm).astype(x.dtype)


def _check(attrs) -> None:
    v = attrs.axis
    if v is not None and not (isinstance(v, tuple) and all(isinstance(a, int) and not isinstance(a, bool) for a in v)):
        raise IRError(f"operator {OP}: attribute axis must be None or a list of ints, got {v!r}")
    eps = attrs.eps
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise IRError(f"operator {OP}: attribute eps must be a number, got {eps!r}")


reg(OP, 1, _rel, _l2_normalize, attrs=(("eps", None), ("axis", None)), pattern=OpPattern.OPAQUE, attr_check=_check,
    summary="x / sqrt(max(sum(x * x, axis), eps)): L2 normalisation over the given axes.")
