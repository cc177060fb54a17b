"""Writing an ONNX file without copying the weights through protobuf.

``SerializeToString`` of a model holding its weights copies every weight twice (into the
message, then into the bytes) and costs as much time as the disk write. ONNX files are
plain protobuf, and protobuf lets a message's fields come in any order, so the writer
serialises the small part (the model and graph without initializers, and each
initializer's header) with protobuf and streams each weight's bytes straight from its
numpy array, framed by hand::

    ModelProto  = <model fields>  graph(7) = len | <graph fields>  initializer(5) = len | tensor ...
    TensorProto = <name, data_type, dims>  raw_data(9) = len | bytes of the array

The result is byte-for-byte a valid ModelProto (``onnx.load`` reads it; the tests compare
it with ``to_onnx``'s message).
"""
from __future__ import annotations

from typing import Any, BinaryIO, Callable, Iterable, Optional

import numpy as np
import onnx

from passhost.io import write_buffers

from .dtypes import raw_bytes, to_onnx_type
from .exporter import little_endian, tensor_head

__all__ = ["write_model", "encoded_size", "encode", "write_chunks", "chunks_size", "payload", "Lazy"]

_GRAPH = (7 << 3) | 2         # ModelProto.graph
_INITIALIZER = (5 << 3) | 2   # GraphProto.initializer
_RAW_DATA = (9 << 3) | 2      # TensorProto.raw_data
_INITIALIZER_TAG, _RAW_DATA_TAG = bytes([_INITIALIZER]), bytes([_RAW_DATA])


_ONE_BYTE = [bytes([i]) for i in range(128)]


def _varint(n: int) -> bytes:
    if n < 128:
        return _ONE_BYTE[n]
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _head(name: str, arr: np.ndarray) -> bytes:
    """``tensor_head(name, arr).SerializeToString()`` for a non-bool array, framed by hand
    (protobuf's own message costs 4 µs a weight): dims(1), data_type(2), name(8). (The
    dtype's byte order does not matter: the bytes written are little-endian.)"""
    encoded = name.encode("utf-8")
    parts = [b"\x08" + _varint(d) for d in arr.shape]
    parts += [b"\x10", _varint(to_onnx_type(arr.dtype)), b"\x42", _varint(len(encoded)), encoded]
    return b"".join(parts)


class Lazy:
    """A weight's bytes made only when they are written (a byte swap, 4-bit packing): one
    weight's conversion in memory at a time."""

    __slots__ = ("arr", "nbytes")

    def __init__(self, arr: np.ndarray, nbytes: int) -> None:
        self.arr = arr
        self.nbytes = nbytes

    def make(self) -> np.ndarray:
        return raw_bytes(little_endian(self.arr))


def payload(arr: np.ndarray) -> Any:
    """What :func:`write_chunks` writes for ``arr``: the array itself (mapped or in
    memory, in C order or not), or a :class:`Lazy` conversion."""
    if arr.dtype.name in ("int4", "uint4"):
        return Lazy(arr, (arr.size + 1) // 2)
    if arr.dtype.byteorder == ">":
        return Lazy(arr, arr.nbytes)
    return arr


def _tensor_parts(name: str, arr: np.ndarray) -> list:
    """The chunks of one ``initializer`` field: framing bytes and the weight's bytes."""
    if arr.dtype == np.bool_:  # tiny masks: protobuf encodes them
        body = [tensor_head(name, arr).SerializeToString()]
        size = len(body[0])
    else:
        raw = payload(arr)
        typed = arr if arr.dtype.byteorder != ">" else arr.view(arr.dtype.newbyteorder("<"))
        head = b"".join((_head(name, typed), _RAW_DATA_TAG, _varint(raw.nbytes)))
        body = [head, raw]
        size = len(head) + raw.nbytes
    return [_INITIALIZER_TAG + _varint(size), *body]


_SMALL = 1 << 16  # arrays below this many bytes are copied into the framing run


def _parts(model: onnx.ModelProto, weights: list) -> list:
    graph = model.graph
    outer = onnx.ModelProto()
    outer.CopyFrom(model)
    outer.ClearField("graph")
    inits = [c for name, arr in weights for c in _tensor_parts(name, arr)]
    graph_bytes = graph.SerializeToString()
    graph_size = len(graph_bytes) + chunks_size(inits)
    return _coalesce([outer.SerializeToString(), bytes([_GRAPH]) + _varint(graph_size), graph_bytes, *inits])


def _small_bytes(c: Any) -> bytes:
    return c.make().tobytes() if isinstance(c, Lazy) else c.tobytes()


def _coalesce(parts: list) -> list:
    """Runs of framing bytes and small arrays joined into one bytes object each: one
    write per large weight, not five per tensor."""
    out: list = []
    run: list = []
    for c in parts:
        if isinstance(c, bytes) or c.nbytes < _SMALL:
            run.append(c if isinstance(c, bytes) else _small_bytes(c))
        else:
            if run:
                out.append(b"".join(run))
                run = []
            out.append(c)
    if run:
        out.append(b"".join(run))
    return out


def encode(model: onnx.ModelProto, weights: list) -> list:
    """The chunks of the file (bytes, and large weights as they are): pass them to
    :func:`write_chunks`; ``sum`` of their sizes is the file size. Nothing is read from a
    weight: its bytes are made as they are written."""
    return _parts(model, weights)


def chunks_size(chunks: list) -> int:
    return sum(len(c) if isinstance(c, bytes) else c.nbytes for c in chunks)


def write_chunks(f: BinaryIO, chunks: Iterable, on_written: Optional[Callable[[int], None]] = None) -> int:
    """Write :func:`encode`'s chunks to the open binary file ``f``, each weight's bytes
    made (or copied from its file) as it is written; returns the bytes written."""
    return write_buffers(f, (c.make() if isinstance(c, Lazy) else c for c in chunks), on_written=on_written)


def encoded_size(model: onnx.ModelProto, weights: list) -> int:
    """The size in bytes of the file :func:`write_model` writes."""
    return chunks_size(_parts(model, weights))


def write_model(f: BinaryIO, model: onnx.ModelProto, weights: list) -> int:
    """Write ``model`` (without initializers) and ``weights`` (``[(name, array)]``) to the
    open binary file ``f`` as one ModelProto; returns the bytes written."""
    return write_chunks(f, _parts(model, weights))
