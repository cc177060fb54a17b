"""``nn.rms_norm``: root-mean-square normalisation (ONNX's ``RMSNormalization``, opset 23),
what Llama, Qwen2, Mistral and T5 put before every block::

    nn.rms_norm(%x, %gamma, axis=-1, epsilon=1e-06f)
    ==  %x / sqrt(mean(%x * %x, axes=[axis, ..., -1]) + epsilon) * %gamma

Every axis from ``axis`` to the last is normalised (ONNX's convention); ``gamma`` broadcasts
against those axes. Half-precision data is normalised in float32, as ONNX's default
``stash_type`` has it, and the result is cast back.
"""
from __future__ import annotations

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..op import OpPattern
from ..types import TensorType
from ._util import kernel, norm_axis, reg, tensor_arg
from .nn import differ

_OP = "nn.rms_norm"


def _rel(types: list, attrs) -> TensorType:
    data = tensor_arg(_OP, types, 0, "data")
    if not data.dtype.startswith(("float", "bfloat")):
        raise TypeInferenceError(f"{_OP}: the data {data} must be floating-point")
    axis = norm_axis(_OP, attrs.axis, data.ndim)
    gamma = tensor_arg(_OP, types, 1, "gamma")
    tail = tuple(data.shape[axis:])
    if gamma.dtype != data.dtype:
        raise TypeInferenceError(f"{_OP}: gamma {gamma} must have the data's dtype {data.dtype}")
    g = tuple(gamma.shape)
    if len(g) > len(tail) or any(d != 1 and differ(d, t) for d, t in zip(g[::-1], tail[::-1])):
        raise TypeInferenceError(f"{_OP}: gamma {gamma} does not broadcast against the normalised axes "
                                 f"{tail} of the data {data} (axis={attrs.axis})")
    return data


def _check(attrs) -> None:
    eps = attrs.epsilon
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or eps < 0:
        raise IRError(f"operator {_OP}: attribute epsilon must be a non-negative float, got {eps!r}")


def compute_dtype(dtype) -> np.dtype:
    """The dtype a normalisation runs in: float32 for narrower floats, else the data's own."""
    dtype = np.dtype(dtype)
    return dtype if dtype.itemsize >= 4 else np.dtype("float32")


@kernel
def _rms_norm(args: list, attrs) -> np.ndarray:
    x, gamma = args
    axis = attrs.axis % x.ndim
    wide = compute_dtype(x.dtype)
    xf = x.astype(wide, copy=False)
    mean_square = np.mean(xf * xf, axis=tuple(range(axis, x.ndim)), keepdims=True)
    rms = np.sqrt(mean_square + wide.type(attrs.epsilon))
    return (xf / rms * gamma.astype(wide, copy=False)).astype(x.dtype, copy=False)


reg(_OP, 2, _rel, _rms_norm, attrs=(("axis", -1), ("epsilon", 1e-5)), pattern=OpPattern.OPAQUE,
    attr_check=_check, summary="RMS normalisation over the axes from axis on, times gamma (ONNX RMSNormalization).")
