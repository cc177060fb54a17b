"""``nn.rms_norm``: root-mean-square normalisation (ONNX's ``RMSNormalization``, opset 23),
what Llama, Qwen2, Mistral and T5 put before every block::

    nn.rms_norm(%x, %gamma, axis=-1, epsilon=1e-06f)
    ==  %x / sqrt(mean(%x * %x, axes=[axis, ..., -1]) + epsilon) * %gamma

Every axis from ``axis`` to the last is normalised (ONNX's convention); ``gamma`` broadcasts
against those axes. Half-precision data (float16, bfloat16, float8) is normalised in float32,
the normalised value is rounded to the data's dtype, and the product with ``gamma`` is taken in
that dtype -- two roundings, as ONNX's function body of ``RMSNormalization`` (``stash_type=1``:
``Cast`` to float32, ``Div``, ``Cast`` back, ``Mul(Normalized, Scale)``) and Hugging Face's
``weight * x.to(input_dtype)`` have it::

    nn.rms_norm(%x: float16, %g: float16)
    ==  multiply(cast(nn.rms_norm(cast(%x, "float32"), 1f), "float16"), %g)

The normalised value is ``x * (1 / sqrt(mean + epsilon))``, as onnxruntime's kernel and
PyTorch's export of ``x * torch.rsqrt(...)`` compute it (ONNX's function body divides: at most
one float32 step apart). onnxruntime's CPU provider rounds a half-precision RMS normalisation
once, after the product -- its ``RMSNormalization`` kernel, and Hugging Face's graph too, where
it runs the float16 ``Mul`` in float32 and drops the ``Cast`` pair around it.
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
    normalised = xf * (wide.type(1) / np.sqrt(mean_square + wide.type(attrs.epsilon)))
    if wide == x.dtype:
        return normalised * gamma
    # rounded to the half type, then scaled in it (the product of two half values is exact in
    # float32, so one rounding of it is the half type's own product)
    rounded = normalised.astype(x.dtype).astype(wide)
    return (rounded * gamma.astype(wide, copy=False)).astype(x.dtype)


reg(_OP, 2, _rel, _rms_norm, attrs=(("axis", -1), ("epsilon", 1e-5)), pattern=OpPattern.OPAQUE,
    attr_check=_check, summary="RMS normalisation over the axes from axis on, times gamma (ONNX RMSNormalization).")
