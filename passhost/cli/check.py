"""``passhost run --check``: how far the optimised model's outputs are from the original's.

Both models run on the same seeded random inputs (uniform in [-1, 1), one array per
parameter of the original ``@main``). When both files are ONNX and onnxruntime is
installed, onnxruntime runs the two files, with its graph optimisations off so it does
not hide a difference; otherwise passhost's interpreter evaluates the two modules.
The figure is the largest absolute difference over every output element.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import ir
from ..errors import PasshostError
from ..numerics import random_inputs

__all__ = ["max_difference", "flat_outputs", "signature_changes", "SignatureChanged"]


class SignatureChanged(PasshostError):
    """``--check``: the written model's inputs or outputs are not the original's."""

    exit_code = 1


def flat_outputs(value: Any) -> list:
    """A result (array or nested tuple of arrays) as a flat list of arrays."""
    out, stack = [], [value]
    while stack:
        v = stack.pop()
        if isinstance(v, (tuple, list)):
            stack.extend(reversed(v))
        else:
            out.append(np.asarray(v))
    return out


def _ort_outputs(path: str, feeds: dict) -> list:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 3  # its notes on unused initializers are not the user's business
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    return sess.run(None, {k: v for k, v in feeds.items() if k in {i.name for i in sess.get_inputs()}})


def _have_onnxruntime() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def _onnx_signature(path: str) -> list:
    import onnx

    graph = onnx.load(path, load_external_data=False).graph
    weights = {t.name for t in graph.initializer}  # (older files list their weights as inputs too)
    out = []
    for kind, values in (("input", [vi for vi in graph.input if vi.name not in weights]), ("output", graph.output)):
        for vi in values:
            t = vi.type.tensor_type
            dims = [d.dim_param or (d.dim_value if d.HasField("dim_value") else "?") for d in t.shape.dim]
            out.append((kind, vi.name, onnx.TensorProto.DataType.Name(t.elem_type), dims))
    return out


def _ir_signature(mod: ir.IRModule) -> list:
    main = mod["main"]
    out = [("input", p.name_hint, str(p.checked_type)) for p in main.params]
    return out + [("output", "", str(main.body.checked_type))]


def signature_changes(original_path: str, before: ir.IRModule, output_path: Optional[str],
                      after: ir.IRModule, specialised: bool = False) -> list:
    """How the written model's inputs and outputs differ from the original's (names,
    dtypes, ranks, symbolic dimensions as written); empty when they are the same. With
    ``specialised`` (``--input-shape``/``--bind-dim`` were given) a named dimension may
    have become a size.

    ::

        input 'input_ids': [batch_size, sequence_length] -> [1, 7]
    """
    paths = (original_path, output_path or "")
    if all(p.lower().endswith(".onnx") for p in paths):
        try:
            want, got = _onnx_signature(paths[0]), _onnx_signature(paths[1])
        except ImportError:
            want, got = _ir_signature(ir.infer_type(before)), _ir_signature(ir.infer_type(after))
    else:
        want, got = _ir_signature(ir.infer_type(before)), _ir_signature(ir.infer_type(after))
    changes = []
    for w, g in zip(want, got):
        if specialised and len(w) == 4 and w[:3] == g[:3] and len(w[3]) == len(g[3]) and all(
                a == b or (isinstance(a, str) and isinstance(b, int)) for a, b in zip(w[3], g[3])):
            continue
        if w != g:
            changes.append(f"{w[0]} {w[1]!r}: {' '.join(map(str, w[2:]))} -> {' '.join(map(str, g[2:]))}")
    if len(want) != len(got):
        changes.append(f"{len(want)} inputs and outputs -> {len(got)}")
    return changes


def max_difference(original_path: str, before: ir.IRModule, output_path: Optional[str],
                   after: ir.IRModule, seed: int = 0, specialised: bool = False) -> float:
    """The largest absolute output difference between ``before`` and ``after``; the
    signatures must agree first (:func:`signature_changes`).

    :raises SignatureChanged: an input or output changed name, dtype or shape
    """
    changes = signature_changes(original_path, before, output_path, after, specialised)
    if changes:
        raise SignatureChanged("--check: the written model's signature is not the original's: "
                               + "; ".join(changes[:3]) + ("; ..." if len(changes) > 3 else ""))
    args = random_inputs(before, seed)
    both_onnx = output_path is not None and all(p.lower().endswith(".onnx") for p in (original_path, output_path))
    if both_onnx and _have_onnxruntime():
        feeds = {p.name_hint: a for p, a in zip(before["main"].params, args)}
        want, got = _ort_outputs(original_path, feeds), _ort_outputs(output_path, feeds)
    else:
        want, got = flat_outputs(ir.evaluate(before, *args)), flat_outputs(ir.evaluate(after, *args))
    if len(want) != len(got):
        return float("inf")
    worst = 0.0
    for a, b in zip(want, got):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return float("inf")
        if a.size:
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
            worst = max(worst, float(np.nanmax(diff)) if not np.isnan(diff).all() else float("nan"))
    return worst
