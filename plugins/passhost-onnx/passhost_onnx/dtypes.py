"""ONNX element types <-> passhost (numpy) dtype names."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto

from passhost.errors import FormatError

__all__ = ["to_dtype", "to_onnx_type"]

_TO_DTYPE = {
    TensorProto.FLOAT: "float32", TensorProto.DOUBLE: "float64", TensorProto.FLOAT16: "float16",
    TensorProto.INT8: "int8", TensorProto.INT16: "int16", TensorProto.INT32: "int32", TensorProto.INT64: "int64",
    TensorProto.UINT8: "uint8", TensorProto.UINT16: "uint16", TensorProto.UINT32: "uint32",
    TensorProto.UINT64: "uint64", TensorProto.BOOL: "bool",
}
_TO_ONNX = {v: k for k, v in _TO_DTYPE.items()}
_TO_ONNX.update({np.dtype(v): k for v, k in list(_TO_ONNX.items())})  # numpy dtypes too: no str() per tensor


def to_dtype(elem_type: int, what: str = "") -> str:
    """The dtype name of an ONNX element type.

    :raises FormatError: a type passhost has no dtype for (strings, bfloat16, float8 ...)
    """
    try:
        return _TO_DTYPE[elem_type]
    except KeyError:
        name = TensorProto.DataType.Name(elem_type) if elem_type in TensorProto.DataType.values() else elem_type
        raise FormatError(f"{what + ': ' if what else ''}ONNX element type {name} has no passhost dtype "
                          f"(supported: {', '.join(sorted(_TO_ONNX))})") from None


def to_onnx_type(dtype) -> int:
    """The ONNX element type of a dtype name (or numpy dtype)."""
    try:
        return _TO_ONNX[dtype]
    except KeyError:
        raise FormatError(f"dtype {dtype} has no ONNX element type") from None
