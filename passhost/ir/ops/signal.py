"""``dft``: the discrete Fourier transform along the last axis, as TVM's ``dft`` -- the
real and imaginary parts as two tensors in, the same two out (a tuple); pattern OPAQUE::

    dft(%re, %im, inverse=False)   /* (2, 8), (2, 8) -> ((2, 8), (2, 8)) */

``X[k] = sum_n x[n] * exp(-2 pi i k n / N)``; with ``inverse`` the sign is ``+`` and the
sum is divided by ``N`` (ONNX's ``DFT`` and numpy's ``ifft``). Audio front ends (spectra,
``STFT``) import through it.
"""
from __future__ import annotations

import numpy as np

from ...errors import TypeInferenceError
from ..op import OpPattern
from ..types import TensorType, TupleType, is_float
from ._util import dims_differ, kernel, reg, tensor_arg, unify_dim

_OP = "dft"


def _rel(types: list, attrs) -> TupleType:
    re = tensor_arg(_OP, types, 0, "the real part")
    im = tensor_arg(_OP, types, 1, "the imaginary part")
    if re != im:
        if re.dtype != im.dtype or re.ndim != im.ndim or any(map(dims_differ, re.shape, im.shape)):
            raise TypeInferenceError(f"{_OP}: the real part {re} and the imaginary part {im} differ")
        re = TensorType(tuple(map(unify_dim, re.shape, im.shape)), re.dtype)  # equal: the static ones
    if not is_float(re.dtype):
        raise TypeInferenceError(f"{_OP}: the data must be floating point, got {re}")
    if re.ndim < 1:
        raise TypeInferenceError(f"{_OP}: the data needs an axis to transform, got {re}")
    return TupleType([re, re])


@kernel
def _dft(args: list, attrs) -> tuple:
    re, im = args
    z = re.astype("float64") + 1j * im.astype("float64")
    out = np.fft.ifft(z, axis=-1) if attrs.inverse else np.fft.fft(z, axis=-1)
    return out.real.astype(re.dtype), out.imag.astype(re.dtype)


reg(_OP, 2, _rel, _dft, attrs=(("inverse", False),), pattern=OpPattern.OPAQUE,
    summary="Discrete Fourier transform along the last axis (real and imaginary parts in, a tuple of both out).")
