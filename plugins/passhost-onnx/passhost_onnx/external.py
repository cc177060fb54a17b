"""Weights in external-data files: mapped in place on import, streamed out on export.

An ONNX model above protobuf's 2 GB keeps its weights in files beside it; each
initializer says where its bytes are::

    TensorProto  name: "layer0.weight"  dims: [8192, 8192]  data_location: EXTERNAL
                 external_data { location: "model.onnx.data"  offset: 4096  length: 268435456 }

``onnx.load`` reads every byte into memory. Here each file is mapped once
(:func:`passhost.weights.map_file`) and each weight becomes a read-only array over its
span: nothing is read until a kernel reads the values, and a weight nothing changes goes
from this file to the output's by a copy in the kernel. The tensor keeps its header
(name, type, dims) and loses its ``external_data``, as if its bytes had been cut out of
the model file (:mod:`.reader`).

The file is looked up as onnx does: ``location`` is a path relative to the model's
directory that stays inside it (no absolute path, no ``..`` out of it, no link out of it);
``offset`` and ``length`` must lie within the file. Anything else is one error naming the
initializer and the file.
"""
from __future__ import annotations

import os
import re
from typing import Any, Iterator

import numpy as np
import onnx

from passhost import progress, weights
from passhost.errors import FormatError
from passhost.io import atomic_writer

from .dtypes import raw_view
from .exporter import tensor_head
from .writer import payload, write_chunks

__all__ = ["map_external", "external_bytes", "LAYOUTS", "file_names", "plan", "external_heads", "write_files"]

def _entries(tensor: onnx.TensorProto) -> dict:
    return {e.key: e.value for e in tensor.external_data}


def _span(tensor: onnx.TensorProto, size: int, where: str) -> tuple:
    """``(offset, end)`` of ``tensor``'s bytes in its file of ``size`` bytes."""
    entries = _entries(tensor)
    try:
        offset = int(entries.get("offset") or 0)
        length = int(entries["length"]) if entries.get("length") else size - offset
    except ValueError:
        raise FormatError(f"initializer {tensor.name!r}: its external data's offset or length is not a number "
                          f"({entries.get('offset')!r}, {entries.get('length')!r})") from None
    if offset < 0 or length < 0 or offset + length > size:
        raise FormatError(f"initializer {tensor.name!r}: its external data ({length} bytes at offset {offset}) "
                          f"lies beyond the end of {where} ({size} bytes): the file is truncated or not this "
                          "model's")
    return offset, offset + length


def _resolve(directory: str, location: str, name: str) -> str:
    """The path of external file ``location``, checked to stay inside ``directory``."""
    if not location or os.path.isabs(location) or "\0" in location:
        raise FormatError(f"initializer {name!r}: its external data location {location!r} is not a relative path "
                          "inside the model's directory")
    path = os.path.join(directory, location)
    root = os.path.realpath(directory)
    real = os.path.realpath(path)
    if os.path.commonpath([root, real]) != root:
        raise FormatError(f"initializer {name!r}: its external data location {location!r} leads out of the "
                          "model's directory; passhost reads weights only from beside the model")
    return real


def _mapped(files: dict, directory: str, location: str, name: str):
    mm = files.get(location)
    if mm is None:
        path = _resolve(directory, location, name)
        try:
            mm = files[location] = weights.map_file(path)
        except FileNotFoundError:
            raise FormatError(f"initializer {name!r}: its external data file {location!r} is missing "
                              f"(looked for {path!r})") from None
        except OSError as err:
            raise FormatError(f"initializer {name!r}: cannot read its external data file {location!r}: "
                              f"{err.strerror or err}") from None
    return mm


def external_bytes(model: onnx.ModelProto) -> int:
    """The bytes of ``model``'s initializers that are in external files (as they say)."""
    total = 0
    for t in model.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            length = _entries(t).get("length")
            total += int(length) if length and length.isdigit() else 0
    return total


def map_external(model: onnx.ModelProto, directory: str, arrays: dict) -> None:
    """Map the external data of ``model``'s initializers: ``arrays[name]`` becomes a
    read-only array over the file for each weight numpy can view in place; a tensor it
    cannot (a 4-bit type, a big-endian host) gets its bytes as ``raw_data``. External
    tensors elsewhere (in ``Constant`` nodes, in subgraphs) are loaded as onnx loads them.

    :raises FormatError: a location outside ``directory``, a missing file, a span beyond
        the end of its file
    """
    files: dict = {}
    external = [t for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    with progress.step("import", total_bytes=external_bytes(model), total_items=len(external)) as step:
        for tensor in external:
            location = _entries(tensor).get("location", "")
            mm = _mapped(files, directory, location, tensor.name)
            start, end = _span(tensor, len(mm), repr(location))
            del tensor.external_data[:]
            tensor.data_location = onnx.TensorProto.DEFAULT
            view = raw_view(tensor, mm, start, end)
            if view is not None:
                arrays[tensor.name] = view
            else:
                tensor.raw_data = bytes(mm[start:end])
            step.advance(end - start)
    if _has_external(model):
        onnx.load_external_data_for_model(model, directory)


def _has_external(model: onnx.ModelProto) -> bool:
    """Whether a tensor of ``model`` (an initializer, a node attribute, in a subgraph
    too) still has its data in an external file; an explicit stack of graphs."""
    ext = onnx.TensorProto.EXTERNAL
    stack = [model.graph]
    while stack:
        g = stack.pop()
        if any(t.data_location == ext for t in g.initializer):
            return True
        for n in g.node:
            for a in n.attribute:
                if (a.HasField("t") and a.t.data_location == ext) or any(t.data_location == ext for t in a.tensors):
                    return True
                if a.HasField("g"):
                    stack.append(a.g)
                stack.extend(a.graphs)
    return False


# ----------------------------------------------------------------------------- writing

#: where weights go: one file beside the model, a file per weight, or inside the model file
LAYOUTS = ("one", "per-tensor", "inline")
#: weights of this many bytes or more start at a multiple of 4 kB in a shared file (a
#: page: mappable in place, and copyable block to block)
_ALIGN_FROM = 1 << 16
_ALIGN = 4096


def file_names(base: str, names: list) -> list:
    """A file name for each weight of a file-per-tensor layout, beside the model ``base``:
    ``<base>.<weight name>.data``, the name reduced to letters, digits, ``.``, ``_`` and
    ``-`` and made unique::

        ("m.onnx", ["conv1.weight", "a/b", "a:b"])  ->  m.onnx.conv1.weight.data,
                                                        m.onnx.a_b.data, m.onnx.a_b.2.data
    """
    out, seen = [], set()
    for name in names:
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:120].strip(".") or "weight"
        candidate, k = safe, 1
        while candidate.lower() in seen:
            k += 1
            candidate = f"{safe}.{k}"
        seen.add(candidate.lower())
        out.append(f"{base}.{candidate}.data")
    return out


def plan(base: str, weights: list, layout: str, inline_below: int) -> tuple:
    """``(inline, files)``: the weights that stay in the model file (``[(name, array)]``)
    and, for the others, ``{file name: [(name, array, offset, padding)]}``."""
    inline, external = [], []
    for name, arr in weights:
        size = payload(arr).nbytes
        if arr.dtype == np.bool_ or size < inline_below:
            inline.append((name, arr))
        else:
            external.append((name, arr, size))
    files: dict = {}
    if layout == "per-tensor":
        for (name, arr, _), file in zip(external, file_names(base, [n for n, _, _ in external])):
            files[file] = [(name, arr, 0, 0)]
        return inline, files
    entries, offset = [], 0
    for name, arr, size in external:
        pad = -offset % _ALIGN if size >= _ALIGN_FROM else 0
        entries.append((name, arr, offset + pad, pad))
        offset += pad + size
    if entries:
        files[base + ".data"] = entries
    return inline, files


def external_heads(files: dict) -> list:
    """The initializers that point at ``files`` (a :func:`plan`), in file order."""
    heads = []
    for file, entries in files.items():
        for name, arr, offset, _ in entries:
            t = tensor_head(name, arr if arr.dtype.byteorder != ">" else arr.view(arr.dtype.newbyteorder("<")))
            t.data_location = onnx.TensorProto.EXTERNAL
            for key, value in (("location", file), ("offset", str(offset)), ("length", str(payload(arr).nbytes))):
                e = t.external_data.add()
                e.key, e.value = key, value
            heads.append(t)
    return heads


def write_files(directory: str, files: dict, step: Any) -> None:
    """Write each data file of a :func:`plan` into ``directory`` (atomically, fsynced),
    streaming the weights: a mapped weight copied from its file by the kernel, any other
    made and written one at a time."""
    for file, entries in files.items():
        with atomic_writer(os.path.join(directory, file)) as f:
            write_chunks(f, _stream(entries, step), on_written=lambda n: step.advance(n, items=0))


def _stream(entries: list, step: Any) -> Iterator:
    for _, arr, _, pad in entries:
        if pad:
            yield bytes(pad)
        yield payload(arr)
        step.advance(0, items=1)
