"""ONNX element types <-> passhost (numpy) dtype names."""
from __future__ import annotations

import sys
from typing import Optional

import ml_dtypes  # noqa: F401  (numpy's names of bfloat16, float8_*, int4 and uint4)
import numpy as np
from onnx import TensorProto, numpy_helper

from passhost.errors import FormatError

__all__ = ["to_dtype", "to_onnx_type", "tensor_array", "raw_view", "raw_bytes", "pack4", "unpack4", "FLOAT_DTYPES"]

_TO_DTYPE = {
    TensorProto.FLOAT: "float32", TensorProto.DOUBLE: "float64", TensorProto.FLOAT16: "float16",
    TensorProto.INT8: "int8", TensorProto.INT16: "int16", TensorProto.INT32: "int32", TensorProto.INT64: "int64",
    TensorProto.UINT8: "uint8", TensorProto.UINT16: "uint16", TensorProto.UINT32: "uint32",
    TensorProto.UINT64: "uint64", TensorProto.BOOL: "bool",
    # the low-precision types: ml_dtypes' names (numpy knows them once passhost.ir is imported)
    TensorProto.BFLOAT16: "bfloat16", TensorProto.FLOAT8E4M3FN: "float8_e4m3fn",
    TensorProto.FLOAT8E4M3FNUZ: "float8_e4m3fnuz", TensorProto.FLOAT8E5M2: "float8_e5m2",
    TensorProto.FLOAT8E5M2FNUZ: "float8_e5m2fnuz", TensorProto.INT4: "int4", TensorProto.UINT4: "uint4",
}
_TO_ONNX = {v: k for k, v in _TO_DTYPE.items()}
_TO_ONNX.update({np.dtype(v): k for v, k in list(_TO_ONNX.items())})  # numpy dtypes too: no str() per tensor
#: the floating-point dtypes (numpy calls most of ml_dtypes' kind "V", not "f": test with this)
FLOAT_DTYPES = frozenset({"float16", "float32", "float64", "bfloat16", "float8_e4m3fn", "float8_e4m3fnuz",
                          "float8_e5m2", "float8_e5m2fnuz"})
#: the element types ONNX packs two to a byte (the first element in the low nibble)
_PACKED = {TensorProto.INT4: np.dtype("int4"), TensorProto.UINT4: np.dtype("uint4")}


def to_dtype(elem_type: int, what: str = "") -> str:
    """The dtype name of an ONNX element type.

    :raises FormatError: a type passhost has no dtype for (strings, complex, float4, int2 ...)
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


_RAW_DTYPES = {k: np.dtype(v) for k, v in _TO_DTYPE.items() if k not in _PACKED}


def raw_view(tensor: TensorProto, buffer, start: int = 0, end: Optional[int] = None) -> Optional[np.ndarray]:
    """The value of ``tensor`` as a read-only array over ``buffer[start:end]``, its raw
    bytes (``tensor.raw_data``, or the span of a file the reader cut them from), or
    ``None`` when numpy cannot view them in place: a type without a plain little-endian
    layout, external data, a big-endian host, or a size that does not match the dims.
    An INT4/UINT4 tensor (two elements a byte) is unpacked into a new read-only array of
    one element a byte, ml_dtypes' layout."""
    if sys.byteorder != "little" or tensor.data_location == TensorProto.EXTERNAL:
        return None
    dtype = _RAW_DTYPES.get(tensor.data_type)
    packed = _PACKED.get(tensor.data_type) if dtype is None else None
    if dtype is None and packed is None:
        return None
    shape = tuple(tensor.dims)
    count = 1
    for d in shape:
        count *= d
    size = (len(buffer) if end is None else end) - start
    if packed is not None:
        if (count + 1) // 2 != size:
            return None
        out = unpack4(np.frombuffer(buffer, dtype=np.uint8, count=size, offset=start), count, packed).reshape(shape)
        out.flags.writeable = False
        return out
    if count * dtype.itemsize != size:
        return None
    return np.frombuffer(buffer, dtype=dtype, count=count, offset=start).reshape(shape)


def unpack4(data: np.ndarray, count: int, dtype) -> np.ndarray:
    """The first ``count`` 4-bit elements of the uint8 array ``data`` (two a byte, the
    first in the low nibble, as ONNX and onnxruntime's MatMulNBits store them) as a flat
    array of ``dtype`` (``int4``, sign-extended, or ``uint4``; or ``uint8``)."""
    data = np.asarray(data, dtype=np.uint8).reshape(-1)
    nibbles = np.empty(data.size * 2, dtype=np.uint8)
    nibbles[0::2] = data & 0x0F
    nibbles[1::2] = data >> 4
    nibbles = nibbles[:count]
    if np.dtype(dtype) == np.dtype("int4"):
        return ((nibbles.astype(np.int8) ^ 8) - 8).astype(dtype)
    return nibbles.astype(dtype)


def pack4(arr: np.ndarray) -> np.ndarray:
    """An ``int4``/``uint4`` array's elements two a byte, the first in the low nibble
    (ONNX's ``raw_data`` layout): a flat uint8 array of ``ceil(size / 2)`` bytes."""
    nibbles = np.asarray(arr).reshape(-1).astype(np.int8).view(np.uint8) & 0x0F
    if nibbles.size % 2:
        nibbles = np.concatenate([nibbles, np.zeros(1, np.uint8)])
    return (nibbles[0::2] | (nibbles[1::2] << 4)).astype(np.uint8)


def raw_bytes(arr: np.ndarray) -> np.ndarray:
    """``arr`` (little-endian and C-contiguous already) as ONNX's ``raw_data`` holds it:
    itself, or packed two a byte for int4 and uint4."""
    if arr.dtype.name in ("int4", "uint4"):
        return pack4(arr)
    return arr


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
