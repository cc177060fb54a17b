"""Reading an ONNX file without copying the weights through protobuf (the twin of :mod:`.writer`).

``onnx.load`` parses the whole file into protobuf's memory, a first copy of every weight,
and reading a tensor's ``raw_data`` hands out a second. Most of an ONNX file is weight
bytes, so those copies cost more than the rest of the import. The reader walks the
protobuf framing of the file instead (a few thousand fields: the model's, the graph's and
each initializer's, never the bytes of a weight)::

    ModelProto  = <model fields>  graph(7) = len | <graph fields>  initializer(5) = len | tensor ...
    TensorProto = <name, data_type, dims, ...>  raw_data(9) = len | bytes of the array

and cuts every initializer's ``raw_data`` field out. What is left (the model, the graph, and
each initializer's header) is small and parsed by protobuf as usual; each weight becomes
a read-only numpy array over the file's bytes, in place. A file of a megabyte or more is
mapped (:func:`passhost.weights.map_file`), not read: a weight is read from disk only when
a kernel reads its values, and one nothing changes is copied to the output file by the
kernel. Weights in external-data files are mapped the same way (:mod:`.external`). Since
the framing is walked without protobuf, an inline model above protobuf's 2 GB limit reads
too.

The result equals ``onnx.load``'s: the initializers whose bytes are handed out as arrays
keep their header (name, type, dims) in the model and lose only ``raw_data``; every other
tensor is as protobuf reads it. A file whose framing is not the plain one above (the graph
field twice, a tensor with ``raw_data`` twice, a group, a truncated field) is parsed whole
by protobuf, which merges or rejects it exactly as ``onnx.load`` would.
"""
from __future__ import annotations

import os
from typing import Any, Optional

import onnx

from passhost import weights

from .dtypes import raw_view
from .external import map_external
from .model_fields import external_layout

__all__ = ["read_model", "MAP_FILE"]

_GRAPH = 7         # ModelProto.graph
_INITIALIZER = 5   # GraphProto.initializer
_RAW_DATA = 9      # TensorProto.raw_data
#: ``data_location: EXTERNAL`` as it appears on the wire (field 14, varint 1); a model whose
#: small part does not hold these two bytes has no tensor in external data
_EXTERNAL_MARK = bytes([(14 << 3) | 0, 1])


#: above this many bytes outside the initializers' raw data, and more than those, the file is parsed whole
_WHOLE = 1 << 20
#: a model file of at least this many bytes is mapped rather than read
MAP_FILE = 1 << 20


class _Unusual(Exception):
    """The framing is not the plain one; protobuf reads the file whole."""


def _varint(buf: bytes, pos: int, end: int) -> tuple:
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise _Unusual
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes, pos: int, end: int) -> list:
    """``(field, wire type, start, value start, end)`` of each field of the message in ``buf[pos:end]``."""
    out = []
    append = out.append
    while pos < end:
        start = pos
        key = buf[pos]  # one-byte keys and lengths (almost all of them) are read inline
        if key < 0x80:
            pos += 1
        else:
            key, pos = _varint(buf, pos, end)
        wire = key & 7
        if wire == 2:
            if pos >= end:
                raise _Unusual
            n = buf[pos]
            if n < 0x80:
                value = pos + 1
            else:
                n, value = _varint(buf, pos, end)
            pos = value + n
        elif wire == 0:
            value = pos
            _, pos = _varint(buf, pos, end)
        elif wire == 1:
            value = pos
            pos += 8
        elif wire == 5:
            value = pos
            pos += 4
        else:  # groups (3, 4) and invalid wire types
            raise _Unusual
        if pos > end:
            raise _Unusual
        append((key >> 3, wire, start, value, pos))
    return out


def _raw_data(buf: bytes, pos: int, end: int) -> Optional[tuple]:
    """``(start, value start, end)`` of the one ``raw_data`` field of the TensorProto in
    ``buf[pos:end]``; ``None`` when it has none, or more than one, or one not
    length-delimited. (:func:`_fields` specialised: one call per initializer, no tuple per
    field.)"""
    found = None
    seen = 0
    while pos < end:
        start = pos
        key = buf[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = _varint(buf, pos, end)
        wire = key & 7
        if wire == 2:
            if pos >= end:
                raise _Unusual
            n = buf[pos]
            if n < 0x80:
                value = pos + 1
            else:
                n, value = _varint(buf, pos, end)
            pos = value + n
            if key >> 3 == _RAW_DATA:
                seen += 1
                found = (start, value, pos)
        else:
            if key >> 3 == _RAW_DATA:
                seen += 2  # raw_data that is not length-delimited: leave the tensor whole
            if wire == 0:  # (dims, data_type: skipped byte by byte, no call)
                while True:
                    if pos >= end:
                        raise _Unusual
                    pos += 1
                    if buf[pos - 1] < 0x80:
                        break
            elif wire == 1:
                pos += 8
            elif wire == 5:
                pos += 4
            else:  # groups (3, 4) and invalid wire types
                raise _Unusual
        if pos > end:
            raise _Unusual
    return found if seen == 1 else None


def _key_and_length(field: int, n: int) -> bytes:
    """The key of a length-delimited field ``field`` and the varint ``n``."""
    out = bytearray([(field << 3) | 2])
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _split(data: bytes) -> tuple:
    """The model without its initializers' ``raw_data`` (as bytes), and the ``(start, end)``
    of each initializer's raw bytes in ``data`` (``None`` where the tensor is left whole).
    The pieces are views of ``data``, joined once: the small part is copied once."""
    view = memoryview(data)
    top = _fields(data, 0, len(data))
    graphs = [f for f in top if f[0] == _GRAPH]
    if len(graphs) != 1 or graphs[0][1] != 2:
        raise _Unusual
    graph_field = graphs[0]
    graph_parts, spans = [], []
    for field, wire, start, value, end in _fields(data, graph_field[3], graph_field[4]):
        if field != _INITIALIZER or wire != 2:
            graph_parts.append(view[start:end])
            continue
        raw = _raw_data(data, value, end)
        if raw is None:
            graph_parts.append(view[start:end])
            spans.append(None)
            continue
        r_start, r_value, r_end = raw
        graph_parts += [_key_and_length(_INITIALIZER, (r_start - value) + (end - r_end)),
                        view[value:r_start], view[r_end:end]]
        spans.append((r_value, r_end))
    cut = sum(e - s for s, e in (x for x in spans if x is not None))
    if len(data) - cut > max(cut, _WHOLE):  # the weights are elsewhere (in Constant nodes, say): a copy
        raise _Unusual                      # of the rest would cost more than protobuf's whole parse
    rest = [view[start:end] for field, _, start, _, end in top if field != _GRAPH]
    rest.append(_key_and_length(_GRAPH, sum(len(p) for p in graph_parts)))
    return b"".join(rest + graph_parts), spans


def _parse(data: bytes) -> onnx.ModelProto:
    model = onnx.ModelProto()
    model.ParseFromString(data)
    return model


def _contents(path: str) -> Any:
    """The bytes of the file ``path``: read, or mapped (:func:`passhost.weights.map_file`)
    when it is large, so that its weights are viewed in the mapping and read only where a
    kernel reads them."""
    if os.stat(path).st_size >= MAP_FILE:
        return weights.map_file(path)
    with open(path, "rb") as f:
        return f.read()


def read_model(path: str, layout: Optional[dict] = None) -> tuple:
    """``(model, arrays)``: the ONNX model in the file ``path`` and, for each initializer
    whose bytes were not copied, its value (``{name: read-only array}``); those
    initializers hold no ``raw_data`` in ``model``. Weights in the file are views of its
    bytes (read, or mapped for a file of :data:`MAP_FILE` bytes or more); weights in
    external-data files beside it are views of those files, mapped (:mod:`.external`).
    ``layout``, when given, receives ``{initializer name: external file}`` for the weights
    kept outside the model. Raises what protobuf raises on a malformed file, and
    :class:`~passhost.errors.FormatError` for external data that is missing or out of place."""
    data = _contents(path)
    try:
        small, spans = _split(data)
    except _Unusual:
        model, spans, small = _parse(bytes(data) if not isinstance(data, bytes) else data), [], None
    else:
        model = _parse(small)
    arrays: dict = {}
    for tensor, span in zip(model.graph.initializer, spans):
        if span is None:
            continue
        view = raw_view(tensor, data, *span)
        if view is not None:
            arrays[tensor.name] = view
        else:  # a type or size numpy cannot view: the tensor as protobuf would hold it
            tensor.raw_data = data[span[0]:span[1]]
    if small is None or _EXTERNAL_MARK in small:
        if layout is not None:
            layout.update(external_layout(model))
        map_external(model, os.path.dirname(os.path.abspath(path)), arrays)
    return model, arrays


def full_model(model: onnx.ModelProto, arrays: Optional[dict]) -> onnx.ModelProto:
    """``model`` with the bytes of ``arrays`` put back into its initializers (a copy; for
    the rare step that needs the whole model, such as onnx's shape inference)."""
    if not arrays:
        return model
    whole = onnx.ModelProto()
    whole.CopyFrom(model)
    for tensor in whole.graph.initializer:
        arr = arrays.get(tensor.name)
        if arr is not None and not tensor.HasField("raw_data"):
            tensor.raw_data = arr.tobytes()
    return whole
