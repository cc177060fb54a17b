"""Which first-party distribution provides which name.

Used to print an install hint when a name is not registered (for example after
``pip uninstall passhost-fold-constant``), and to settle a name clash: when a third-party
plugin registers a name this table gives to a first-party distribution (its own
``FoldConstant``, say), the first-party one keeps the name and the other is excluded.
Otherwise what is installed is what the entry points say. ``tests/test_registry.py`` keeps
it in sync with ``plugins/*/pyproject.toml``.
"""
from __future__ import annotations

from typing import Final, Mapping

__all__ = ["PASSES", "INSTRUMENTS", "FORMATS", "SUFFIXES", "EXECUTORS", "distribution_for", "owns"]

#: pass name -> distribution
PASSES: Final[Mapping[str, str]] = {
    "AnnotateSpans": "passhost-annotate-spans",
    "BackwardFoldScaleAxis": "passhost-fold-scale-axis",
    "CanonicalizeOps": "passhost-canonicalize-ops",
    "CombineParallelDense": "passhost-combine-parallel-dense",
    "ConvertLayout": "passhost-convert-layout",
    "DeadCodeElimination": "passhost-dead-code-elimination",
    "EliminateCommonSubexpr": "passhost-eliminate-common-subexpr",
    "FoldConstant": "passhost-fold-constant",
    "FoldScaleAxis": "passhost-fold-scale-axis",
    "ForwardFoldScaleAxis": "passhost-fold-scale-axis",
    "FuseDenseBias": "passhost-fuse-dense-bias",
    "FuseAttention": "passhost-fuse-llm",
    "FuseGelu": "passhost-fuse-gelu",
    "FuseLayerNorm": "passhost-fuse-layer-norm",
    "FuseOps": "passhost-fuse-ops",
    "FuseRMSNorm": "passhost-fuse-llm",
    "FuseRotaryEmbedding": "passhost-fuse-llm",
    "InferType": "passhost-infer-type",
    "Inline": "passhost-inline",
    "ONNXComposites": "passhost-onnx",
    "PrintIR": "passhost-print-ir-pass",
    "RemoveUnusedFunctions": "passhost-remove-unused-functions",
    "SimplifyExpr": "passhost-simplify-expr",
    "SimplifyInference": "passhost-simplify-inference",
    "ToANormalForm": "passhost-to-a-normal-form",
    "ToGraphNormalForm": "passhost-to-graph-normal-form",
}

#: instrument name -> distribution
INSTRUMENTS: Final[Mapping[str, str]] = {
    "op-diff": "passhost-op-diff",
    "print-ir": "passhost-print-ir",
    "report": "passhost-report",
    "timing": "passhost-timing",
    "trace": "passhost-trace",
    "verify-numerics": "passhost-verify-numerics",
}


#: format name -> distribution
FORMATS: Final[Mapping[str, str]] = {
    "onnx": "passhost-onnx",
}

#: file suffix -> the first-party format that reads it
SUFFIXES: Final[Mapping[str, str]] = {
    ".onnx": "onnx",
}

#: executor name (``passhost run --executor NAME``) -> distribution
EXECUTORS: Final[Mapping[str, str]] = {
    "dask": "passhost-dask",
}


def distribution_for(kind: str, name: str) -> str | None:
    """The first-party distribution providing pass, instrument, format or executor ``name``, if any.

    :param kind: ``"pass"``, ``"instrument"``, ``"format"`` or ``"executor"`` (other kinds have no owner)
    """
    table = {"pass": PASSES, "instrument": INSTRUMENTS, "format": FORMATS, "executor": EXECUTORS}.get(kind, {})
    return table.get(name)


def owns(kind: str, name: str, distribution: str | None) -> bool:
    """Whether ``distribution`` is the first-party distribution providing ``name``
    (names compared as pip does: case and ``-``/``_`` do not matter)."""
    owner = distribution_for(kind, name)
    return (owner is not None and distribution is not None
            and distribution.replace("_", "-").lower() == owner.replace("_", "-").lower())
