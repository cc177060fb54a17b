"""ONNX's own per-operator test cases run through passhost: import, interpret, export, onnxruntime.

``onnx.backend.test.loader.load_model_tests(kind="node")`` builds ONNX's node test cases
in memory (a one-node model and its input/expected-output arrays each). :func:`select`
keeps those whose operators all have a converter at the case's opset; :func:`run_case`
imports a case (symbolic input dimensions bound from the test data), evaluates it with
passhost's interpreter, compares with the expected outputs, exports it and compares
onnxruntime's outputs on the export (graph optimisations off) as well.

The test ``tests/test_conformance.py`` and the script ``conformance_report.py`` (which
writes ``docs/onnx-conformance.md``) both use this module.
"""
from __future__ import annotations

import warnings
from typing import Any, Optional

import numpy as np

from .importer import STANDARD_DOMAINS
from .table import BUILTIN, lookup

__all__ = ["load_cases", "select", "run_case", "import_case", "typed", "element_types", "converted", "ops_of", "CaseFailure"]


class CaseFailure(AssertionError):
    """A case whose import, interpretation or export does not give the expected outputs."""


def load_cases() -> list:
    """ONNX's node test cases (``onnx.backend.test.loader.TestCase``), sorted by name."""
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():  # the generators overflow casts on purpose
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    return sorted(cases, key=lambda c: c.name)


def _opset(model, domain: str = "") -> int:
    for imp in model.opset_import:
        if (imp.domain or "") in ((domain,) if domain else STANDARD_DOMAINS):
            return int(imp.version)
    return 1


def ops_of(model) -> list:
    """The operator types of ``model``'s graph and of its If branches, in first-use order."""
    from .control import all_nodes

    seen: dict = {}
    for n in all_nodes(model.graph):
        seen.setdefault(n.op_type if n.domain in STANDARD_DOMAINS else f"{n.domain}.{n.op_type}", None)
    return list(seen)


def converted(model, table: dict) -> bool:
    """Whether every node of ``model`` (and of its If branches) has a converter in ``table``
    at the model's opset, or a function body the importer expands (:mod:`.functions`), or is
    an ``If``, ``Loop`` or ``Scan`` (:mod:`.control`)."""
    from .control import SUBGRAPH_OPS, all_nodes
    from .functions import Functions

    opset = _opset(model)
    functions = Functions(model)
    return all(n.domain in STANDARD_DOMAINS and (lookup(table, "", n.op_type, opset) is not None or n.op_type in SUBGRAPH_OPS
                                                 or functions.has_body(n.domain, n.op_type, opset))
               for n in all_nodes(model.graph))


def element_types(model) -> set:
    """The ONNX element types of ``model``'s inputs, outputs, initializers, Cast targets and
    Constant values."""
    from onnx import AttributeProto

    g = model.graph
    types = {vi.type.tensor_type.elem_type for vi in (*g.input, *g.output) if vi.type.HasField("tensor_type")}
    types.update(t.data_type for t in g.initializer)
    for n in g.node:
        for a in n.attribute:
            if a.name == "to" and a.type == AttributeProto.INT:
                types.add(a.i)
            elif a.type == AttributeProto.TENSOR:
                types.add(a.t.data_type)
    return types


def typed(model) -> bool:
    """Whether passhost's IR has a dtype for every element type ``model`` uses."""
    from onnx import TensorProto, helper

    from passhost.ir.types import DTYPES

    for t in element_types(model):
        if t == TensorProto.BOOL:
            continue
        try:
            name = str(helper.tensor_dtype_to_np_dtype(t))
        except Exception:  # string, bfloat16, float8, int4 ...: no numpy dtype at all
            return False
        if name not in DTYPES:
            return False
    return True


def _ort_loads(model) -> bool:
    import onnxruntime as ort

    try:
        _session(ort, model.SerializeToString())
    except Exception:  # an opset, type or operator this onnxruntime does not implement
        return False
    return True


def _session(ort, data: bytes):
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 4
    return ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])


def select(cases: list, table: Optional[dict] = None, ort_check: bool = True) -> list:
    """The cases whose operators all have a converter, whose element types passhost's IR
    has dtypes for, and (with ``ort_check``) that onnxruntime loads."""
    table = BUILTIN if table is None else table
    chosen = [c for c in cases if c.data_sets and converted(c.model, table) and typed(c.model)]
    if ort_check:
        chosen = [c for c in chosen if _ort_loads(c.model)]
    return chosen


def _inputs(case) -> list:
    model = case.model
    inits = {t.name for t in model.graph.initializer}
    return [vi.name for vi in model.graph.input if vi.name not in inits]


def _array(value: Any) -> np.ndarray:
    from onnx import TensorProto, numpy_helper

    if isinstance(value, TensorProto):
        return numpy_helper.to_array(value)
    return np.asarray(value)


def _freeze(model, names: list, feeds: list):
    """``model`` with its operand inputs made initializers: integer and scalar
    inputs and those no node reads as its first (data) input (shapes, axes, pads, scales).

    ONNX's node tests feed such operands as graph inputs; passhost's IR has static
    shapes, so, as a user of a static-shape compiler (TVM's ``freeze_params``, onnxsim)
    does, the case's values are bound at import time."""
    from onnx import numpy_helper

    out = type(model)()
    out.CopyFrom(model)
    data = {n.input[0] for n in model.graph.node if n.input}
    frozen = {n: x for n, x in zip(names, feeds) if x.dtype.kind in "iu" or x.ndim == 0 or n not in data}
    keep = [vi for vi in out.graph.input if vi.name not in frozen]
    del out.graph.input[:]
    out.graph.input.extend(keep)
    out.graph.initializer.extend(numpy_helper.from_array(x, n) for n, x in frozen.items())
    return out, frozen


def import_case(case, feeds: list) -> tuple:
    """``(module, frozen input names)``: the case imported with its input shapes bound;
    when a converter needs an operand at import time, its integer inputs are frozen."""
    from .importer import from_onnx
    from .node import ConversionError

    names = _inputs(case)
    shapes = {n: tuple(x.shape) for n, x in zip(names, feeds)}
    try:
        return from_onnx(case.model, input_shapes=shapes), ()
    except ConversionError as err:
        if "known at import time" not in str(err):
            raise
    model, frozen = _freeze(case.model, names, feeds)
    if not frozen:
        raise CaseFailure("an operand must be known at import time, and the case has no integer or scalar input "
                          "to freeze")
    shapes = {n: s for n, s in shapes.items() if n not in frozen}
    return from_onnx(model, input_shapes=shapes), tuple(frozen)


def _compare(what: str, got: list, want: list, rtol: float, atol: float) -> None:
    if len(got) != len(want):
        raise CaseFailure(f"{what}: {len(got)} outputs, expected {len(want)}")
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        w = np.asarray(w)
        if g.dtype != w.dtype:
            raise CaseFailure(f"{what}: output {i} has dtype {g.dtype}, expected {w.dtype}")
        if g.shape != w.shape:
            raise CaseFailure(f"{what}: output {i} has shape {g.shape}, expected {w.shape}")
        if w.dtype.kind in "fc":
            if not np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
                err = np.nanmax(np.abs(g.astype("float64") - w.astype("float64")))
                raise CaseFailure(f"{what}: output {i} differs (max abs error {err:.3g})")
        elif not np.array_equal(g, w):
            raise CaseFailure(f"{what}: output {i} differs")


def _flat(value: Any) -> list:
    out, stack = [], [value]
    while stack:
        v = stack.pop()
        if isinstance(v, tuple):
            stack.extend(reversed(v))
        else:
            out.append(v)
    return out


def run_case(case, export: bool = True) -> None:
    """Import, interpret, export and run ``case``; :class:`CaseFailure` (or the import's
    error) when a step fails or an output differs from ONNX's expected one."""
    from passhost import ir

    from .exporter import MAX_OPSET, MIN_OPSET, to_onnx

    names = _inputs(case)
    for inputs, outputs in case.data_sets:
        feeds = [_array(x) for x in inputs]
        outputs = [_array(x) for x in outputs]
        mod, frozen = import_case(case, feeds)
        got = _flat(ir.evaluate(mod, *[x for n, x in zip(names, feeds) if n not in frozen]))
        _compare("interpreter", got, outputs, case.rtol, case.atol)
        if not export:
            continue
        import onnxruntime as ort

        opset = min(max(_opset(case.model), MIN_OPSET), MAX_OPSET)
        exported = to_onnx(mod, opset=opset)
        sess = _session(ort, exported.SerializeToString())
        wanted = {i.name for i in sess.get_inputs()}
        got = sess.run(None, {n: x for n, x in zip(names, feeds) if n in wanted})
        _compare(f"onnxruntime on the opset-{opset} export", got, outputs, case.rtol, case.atol)
