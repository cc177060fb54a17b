"""ONNX element types <-> passhost (numpy) dtype names."""
from __future__ import annotations

import sys
from typing import Optional

import numpy as np
from onnx import TensorProto, numpy_helper

from passhost.errors import FormatError

__all__ = ["to_dtype", "to_onnx_type", "tensor_array"]

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
                          f"(supported: {', '.join(sorted(_TO_DTYPE.values()))})") from None


def to_onnx_type(dtype) -> int:
    """The ONNX element type of a dtype name (or numpy dtype)."""
    try:
        return _TO_ONNX[dtype]
    except KeyError:
        raise FormatError(f"dtype {dtype} has no ONNX element type") from None


_RAW_DTYPES = {k: np.dtype(v) for k, v in _TO_DTYPE.items()}


def raw_view(tensor: TensorProto, buffer, start: int = 0, end: Optional[int] = None) -> Optional[np.ndarray]:
    """The value of ``tensor`` as a read-only array over ``buffer[start:end]``, its raw
    bytes (``tensor.raw_data``, or the span of a file the reader cut them from), or
    ``None`` when numpy cannot view them in place: a type without a plain little-endian
    layout, external data, a big-endian host, or a size that does not match the dims."""
    dtype = _RAW_DTYPES.get(tensor.data_type)
    if dtype is None or sys.byteorder != "little" or tensor.data_location == TensorProto.EXTERNAL:
        return None
    shape = tuple(tensor.dims)
    count = 1
    for d in shape:
        count *= d
    if count * dtype.itemsize != (len(buffer) if end is None else end) - start:
        return None
    return np.frombuffer(buffer, dtype=dtype, count=count, offset=start).reshape(shape)


def tensor_array(tensor: TensorProto) -> np.ndarray:
    """A ``TensorProto``'s value as a numpy array.

    A tensor held in ``raw_data`` (how exporters write weights) is viewed in place: a
    read-only array over the bytes protobuf hands out, with no second copy, which
    :class:`passhost.ir.Constant` then keeps as it is. Every other tensor (typed fields,
    external data, big-endian hosts) goes through ``onnx.numpy_helper.to_array``.
    """
    if tensor.HasField("raw_data"):
        view = raw_view(tensor, tensor.raw_data)
        if view is not None:
            return view
    return numpy_helper.to_array(tensor)
