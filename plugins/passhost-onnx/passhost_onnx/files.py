"""Reading and writing ``.onnx`` files: the ``onnx`` format's load and save."""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Iterable, Mapping, Optional

import onnx

from passhost import progress
from passhost.errors import FormatError, UsageError
from passhost.io import atomic_writer, replace_file

from .dtypes import to_onnx_type
from .exporter import MAX_OPSET, MIN_OPSET, export_parts
from .emit_llm import fused_opset
from .external import LAYOUTS, external_heads, plan, write_files
from .importer import from_onnx
from .shape_report import shape_notes
from .reader import read_model
from .writer import chunks_size, encode, payload, write_chunks

__all__ = ["load", "save", "TWO_GB"]

#: protobuf's limit on one message: above it, weights must go to external data
TWO_GB = 2 ** 31 - 1


def _extra_converters() -> list:
    from passhost.formats import converters

    return [("" if e.domain == "ai.onnx" else e.domain, e.op_type, e.since, e.convert) for e in converters("onnx")]


def load(path: str, *, input_shapes: Optional[Mapping] = None, keep_params: bool = False,
         keep_ops: Iterable[str] = (), bind_dims: Optional[Mapping] = None, inline_functions: bool = False) -> Any:
    """Read ``path`` (external data next to it is loaded too) and import it (``keep_ops``:
    standard operators kept as they are; ``bind_dims``: size variables specialised;
    ``inline_functions``: the model's local functions expanded, not kept; see
    :func:`.importer.from_onnx`)."""
    layout: dict = {}
    try:
        model, arrays = read_model(path, layout)
    except FileNotFoundError:
        raise UsageError(f"cannot read {path!r}: No such file or directory") from None
    except FormatError as err:  # external data missing or out of place: already says which
        raise FormatError(f"cannot read {path!r}: {err}") from None
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
                        keep_ops=keep_ops, bind_dims=bind_dims, inline_functions=inline_functions)
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


def save(mod: Any, path: str, *, opset: Optional[int] = None, external_data: Any = None,
         check: bool = True, target: str = "", inline_below: int = 1024) -> list:
    """Export ``mod`` and write it to ``path`` atomically; returns notes on the written graph
    (the ``Shape`` nodes that stay and why: :func:`.shape_report.shape_notes`).

    Weights are streamed to the file, never gathered in memory: a weight still mapped from
    the file it was read from is copied from that file by the kernel, and one a pass made
    (or a transposed view the export writes in C order) is made and written one at a time.

    :param opset: the ONNX opset (13 to 23); by default the opset the model was imported
        from (raised to 13, lowered to 23), or 17 for a model that did not come from ONNX;
        with ``target="onnxruntime"`` at least 23 when the module calls an operator whose
        standard form needs it (``nn.rms_norm``, ``nn.rotary_embedding``, ``nn.attention``:
        what the LLM fusions make), since onnxruntime runs opset 23
    :param external_data: where the weights go: ``"one"`` (or ``True``) to ``<path>.data``
        beside the model, ``"per-tensor"`` to a file per weight (``<path>.<weight>.data``),
        ``"inline"`` (or ``False``) inside the model file, which above protobuf's 2 GB limit
        is ``"one"`` anyway. By default the input's layout is kept: a model read with
        external data is written with external data (one file per tensor if it had that),
        one read whole is written whole
    :param inline_below: with external data, weights of fewer bytes stay in the model file
    :param check: run ``onnx.checker.check_model`` before the model replaces ``path`` (while
        it is flushed to disk); a model it rejects replaces nothing
    :param target: ``"onnxruntime"``: the model is for onnxruntime (the opset as above, and its
        ``com.microsoft`` operators where they measured faster: :mod:`.emit_llm`); ``""``
        standard ONNX at the model's own opset
    """
    layout = _layout(mod, external_data)
    if layout != "inline" and path == "-":
        raise UsageError("a model with external data cannot go to standard output: give -o FILE")
    if opset is None:
        opset = default_opset(mod)
        if target == "onnxruntime":
            opset = max(opset, fused_opset(mod) or 0)
    skeleton, weights = export_parts(mod, opset=opset, target=target)
    chunks = encode(skeleton, weights) if layout == "inline" else None
    if chunks is not None and chunks_size(chunks) < TWO_GB:
        # the checker runs while the written model is flushed to disk; if it fails,
        # nothing is replaced
        verify = (lambda: _check(_structure(skeleton, weights).SerializeToString(), path)) if check else None
        try:
            with progress.step("export", total_bytes=chunks_size(chunks), total_items=len(weights)) as step, \
                    atomic_writer(path, verify=verify) as f:
                write_chunks(f, chunks, on_written=lambda n: step.advance(n, items=0))
        except OSError as err:
            raise UsageError(f"cannot write {path!r}: {err.strerror or err}") from None
        return shape_notes(skeleton.graph)
    _save_external(skeleton, weights, path, check, "per-tensor" if layout == "per-tensor" else "one", inline_below)
    return shape_notes(skeleton.graph)


def _layout(mod: Any, external_data: Any) -> str:
    """``"one"``, ``"per-tensor"`` or ``"inline"``: what ``external_data`` asks for, or the
    layout the module was read with (``mod.attrs["onnx.external_data"]``)."""
    if external_data is None:
        files = tuple(getattr(mod, "attrs", {}).get("onnx.external_data", ()))
        return "per-tensor" if len(files) > 1 else "one" if files else "inline"
    if external_data is True or external_data is False:
        return "one" if external_data else "inline"
    if external_data not in LAYOUTS:
        raise UsageError(f"external_data={external_data!r}: give one of {', '.join(map(repr, LAYOUTS))} "
                         "(or True/False, or None to keep the input's layout)")
    return external_data


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


def _save_external(skeleton: Any, weights: list, path: str, check: bool, layout: str, inline_below: int) -> None:
    """Model and its data files (one ``<name>.data``, or one per weight) written in a
    temporary directory beside ``path``, each streamed, fsynced and checked there, then
    moved into place (the data first: a reader never sees a model whose data is missing)."""
    target = os.path.realpath(path)
    directory, base = os.path.dirname(target), os.path.basename(target)
    inline, files = plan(base, weights, layout, inline_below)
    model = onnx.ModelProto()
    model.CopyFrom(skeleton)
    model.graph.initializer.extend(external_heads(files))
    chunks = encode(model, inline)
    verify = (lambda: _check(_structure(skeleton, weights).SerializeToString(), path)) if check else None
    try:
        tmp = tempfile.mkdtemp(prefix=f".{base}.", dir=directory)
    except OSError as err:
        raise UsageError(f"cannot write {path!r}: {err.strerror or err}") from None
    total = chunks_size(chunks) + sum(payload(a).nbytes + pad for e in files.values() for _, a, _, pad in e)
    try:
        with progress.step("export", total_bytes=total, total_items=len(weights)) as step:
            write_files(tmp, files, step)
            with atomic_writer(os.path.join(tmp, base), verify=verify) as f:
                write_chunks(f, chunks, on_written=lambda n: step.advance(n, items=0))
        for name in sorted(files):  # the data first (one file, or one per weight)
            replace_file(os.path.join(tmp, name), os.path.join(directory, name))
        replace_file(os.path.join(tmp, base), target)
    except OSError as err:
        raise UsageError(f"cannot write {path!r}: {err.strerror or err}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
