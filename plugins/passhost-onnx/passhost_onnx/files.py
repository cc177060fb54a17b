"""Reading and writing ``.onnx`` files: the ``onnx`` format's load and save."""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Iterable, Mapping, Optional

import onnx

from passhost.errors import FormatError, UsageError
from passhost.io import atomic_writer

from .dtypes import to_onnx_type
from .exporter import MAX_OPSET, MIN_OPSET, export_parts, to_onnx
from .emit_llm import fused_opset
from .importer import from_onnx
from .shape_report import shape_notes
from .reader import read_model
from .writer import chunks_size, encode, write_chunks

__all__ = ["load", "save", "TWO_GB"]

#: protobuf's limit on one message: above it, weights must go to external data
TWO_GB = 2 ** 31 - 1


def _extra_converters() -> list:
    from passhost.formats import converters

    return [("" if e.domain == "ai.onnx" else e.domain, e.op_type, e.since, e.convert) for e in converters("onnx")]


def load(path: str, *, input_shapes: Optional[Mapping] = None, keep_params: bool = False,
         keep_ops: Iterable[str] = (), bind_dims: Optional[Mapping] = None) -> Any:
    """Read ``path`` (external data next to it is loaded too) and import it (``keep_ops``:
    standard operators kept as they are; ``bind_dims``: size variables specialised; see
    :func:`.importer.from_onnx`)."""
    layout: dict = {}
    try:
        model, arrays = read_model(path, layout)
    except FileNotFoundError:
        raise UsageError(f"cannot read {path!r}: No such file or directory") from None
    except OSError as err:
        raise UsageError(f"cannot read {path!r}: {err.strerror or err}") from None
    except Exception as err:  # protobuf's DecodeError & co.: not an ONNX model
        raise FormatError(f"cannot read {path!r}: it is not a valid ONNX model ({type(err).__name__}: "
                          f"{' '.join(str(err).split()) or 'malformed protobuf'})") from None
    if not model.graph.node and not model.graph.output:
        raise FormatError(f"cannot read {path!r}: it holds no ONNX graph (empty or not an ONNX model)")
    try:
        out = from_onnx(model, input_shapes=input_shapes, keep_params=keep_params,
                        extra_converters=_extra_converters(), source=os.path.basename(path), arrays=arrays,
                        keep_ops=keep_ops, bind_dims=bind_dims)
    except FormatError as err:
        raise FormatError(f"{path}: {err}") from None
    if layout:  # the weights' files, so that the export writes them the same way
        mod = out[0] if keep_params else out
        mod.attrs["onnx.external_data"] = tuple(sorted(set(layout.values())))
    return out


def default_opset(mod: Any) -> int:
    """The opset a model is written at when none is asked for: the one it was imported
    from (``mod.attrs["onnx.opset"]``) brought into 13..23, else 17."""
    source = getattr(mod, "attrs", {}).get("onnx.opset")
    if isinstance(source, int) and not isinstance(source, bool):
        return min(max(source, MIN_OPSET), MAX_OPSET)
    return 17


def save(mod: Any, path: str, *, opset: Optional[int] = None, external_data: Optional[bool] = None,
         check: bool = True, target: str = "") -> list:
    """Export ``mod`` and write it to ``path`` atomically; returns notes on the written graph
    (the ``Shape`` nodes that stay and why: :func:`.shape_report.shape_notes`).

    :param opset: the ONNX opset (13 to 23); by default the opset the model was imported
        from (raised to 13, lowered to 23), or 17 for a model that did not come from ONNX;
        with ``target="onnxruntime"`` at least 23 when the module calls an operator whose
        standard form needs it (``nn.rms_norm``, ``nn.rotary_embedding``, ``nn.attention``:
        what the LLM fusions make), since onnxruntime runs opset 23
    :param external_data: weights go to ``<path>.data`` beside the model; done anyway when
        the model would pass protobuf's 2 GB limit. By default the input's layout is kept: a
        model read with external data is written with external data (one file per tensor
        if it had that), one read whole is written whole
    :param check: run ``onnx.checker.check_model`` before the model replaces ``path`` (while
        it is flushed to disk); a model it rejects replaces nothing
    :param target: ``"onnxruntime"``: the model is for onnxruntime (the opset as above, and its
        ``com.microsoft`` operators where they measured faster: :mod:`.emit_llm`); ``""``
        standard ONNX at the model's own opset
    """
    if opset is None:
        opset = default_opset(mod)
        if target == "onnxruntime":
            opset = max(opset, fused_opset(mod) or 0)
    files = tuple(getattr(mod, "attrs", {}).get("onnx.external_data", ()))
    per_tensor = len(files) > 1
    if external_data is None:
        external_data = bool(files)
    skeleton, weights = export_parts(mod, opset=opset, target=target)
    chunks = None if external_data else encode(skeleton, weights)
    if chunks is not None and chunks_size(chunks) < TWO_GB:
        # the checker runs while the written model is flushed to disk; if it fails,
        # nothing is replaced
        verify = (lambda: _check(_structure(skeleton, weights).SerializeToString(), path)) if check else None
        try:
            with atomic_writer(path, verify=verify) as f:
                write_chunks(f, chunks)
        except OSError as err:
            raise UsageError(f"cannot write {path!r}: {err.strerror or err}") from None
        return shape_notes(skeleton.graph)
    model = to_onnx(mod, opset=opset, target=target)
    _save_external(model, path, check, per_tensor)
    return shape_notes(model.graph)


def _structure(skeleton: Any, weights: list) -> Any:
    """The model to check without its weight bytes: every initializer is declared as a graph
    input of its type instead. The checker then sees every node, attribute, opset and name;
    the weight bytes themselves are framed by :mod:`.writer`, whose output the tests load
    with onnx and run in onnxruntime. (``skeleton`` itself gets the inputs: it has been
    encoded already, and nothing reads it afterwards.)"""
    inputs = skeleton.graph.input
    for name, arr in weights:
        vi = inputs.add()
        vi.name = name
        tensor_type = vi.type.tensor_type
        tensor_type.elem_type = to_onnx_type(arr.dtype)
        dims = tensor_type.shape.dim
        if not arr.shape:
            tensor_type.shape.SetInParent()
        for d in arr.shape:
            dims.add().dim_value = d
    return skeleton


def _check(model: Any, path: str) -> None:
    try:
        onnx.checker.check_model(model, full_check=False)
    except onnx.checker.ValidationError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else "invalid model"
        raise FormatError(f"the exported model for {path!r} fails onnx.checker: {first}") from None


def _save_external(model: Any, path: str, check: bool, per_tensor: bool = False) -> None:
    """Model and ``<name>.data`` (with ``per_tensor``: one file per weight, named for it)
    written in a temporary directory beside ``path``, checked there, then moved into place
    (the data first: a reader never sees a model whose data is missing)."""
    directory = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    location = base + ".data"
    try:
        tmp = tempfile.mkdtemp(prefix=f".{base}.", dir=directory)
    except OSError as err:
        raise UsageError(f"cannot write {path!r}: {err.strerror or err}") from None
    try:
        tmp_model = os.path.join(tmp, base)
        onnx.save_model(model, tmp_model, save_as_external_data=True, all_tensors_to_one_file=not per_tensor,
                        location=location, size_threshold=1024)
        if check:
            try:
                onnx.checker.check_model(tmp_model)
            except onnx.checker.ValidationError as err:
                raise FormatError(f"the exported model for {path!r} fails onnx.checker: "
                                  f"{str(err).strip().splitlines()[0]}") from None
        for name in sorted(os.listdir(tmp)):  # the data first (one file, or one per weight)
            if name != base:
                os.replace(os.path.join(tmp, name), os.path.join(directory, name))
        os.replace(tmp_model, path)
    except OSError as err:
        raise UsageError(f"cannot write {path!r}: {err.strerror or err}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
