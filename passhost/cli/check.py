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
from ..numerics import random_inputs

__all__ = ["max_difference", "flat_outputs"]


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


def max_difference(original_path: str, before: ir.IRModule, output_path: Optional[str],
                   after: ir.IRModule, seed: int = 0) -> float:
    """The largest absolute output difference between ``before`` and ``after``."""
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
