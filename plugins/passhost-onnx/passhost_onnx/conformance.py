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

__all__ = ["load_cases", "select", "run_case", "import_case", "typed", "element_types", "converted", "ops_of", "CaseFailure",
           "symbolic_model", "import_symbolic", "run_case_symbolic", "NAMINGS", "symbolic_failures"]


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

    from passhost.ir import DTYPES

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
        if w.dtype.kind in "fc" or w.dtype.name in _LOW_FLOATS:
            if w.dtype.name in _LOW_FLOATS:  # (ml_dtypes' floats: numpy's allclose wants float64)
                g, w = g.astype("float64"), w.astype("float64")
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
        sess = _session(ort, ort_feedable(exported).SerializeToString())
        wanted = {i.name for i in sess.get_inputs()}
        got = sess.run(None, {n: _ort_array(x) for n, x in zip(names, feeds) if n in wanted})
        got = [np.asarray(g).astype(w.dtype) if w.dtype.name in _ML_DTYPES else g for g, w in zip(got, outputs)]
        _compare(f"onnxruntime on the opset-{opset} export", got, outputs, case.rtol, case.atol)


#: ml_dtypes' types, which onnxruntime's Python API neither takes nor returns
_LOW_FLOATS = frozenset(["bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"])
_ML_DTYPES = _LOW_FLOATS | {"int4", "uint4"}


def _ort_array(x: np.ndarray) -> np.ndarray:
    """``x`` as onnxruntime's Python API takes it: an ml_dtypes array as float32 (exact)."""
    return x.astype("float32") if x.dtype.name in _ML_DTYPES else x


def ort_feedable(model):
    """``model`` with each graph input and output of an ml_dtypes type (bfloat16, float8,
    int4, uint4), which onnxruntime's Python API cannot feed or fetch, made float32 and
    cast to and from its type inside the graph (every value of these types is exact in
    float32). Other models come back as they are."""
    from onnx import TensorProto, helper

    low = {TensorProto.BFLOAT16, TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FNUZ, TensorProto.FLOAT8E5M2,
           TensorProto.FLOAT8E5M2FNUZ, TensorProto.INT4, TensorProto.UINT4}
    g = model.graph

    def changed(vi) -> bool:
        return vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type in low

    if not any(changed(vi) for vi in (*g.input, *g.output)):
        return model
    out = type(model)()
    out.CopyFrom(model)
    g = out.graph
    casts, renamed = [], {}
    for vi in g.input:
        if changed(vi):
            inner = vi.name + "__typed"
            renamed[vi.name] = inner
            casts.append(helper.make_node("Cast", [vi.name], [inner], to=vi.type.tensor_type.elem_type))
            vi.type.tensor_type.elem_type = TensorProto.FLOAT
    for n in g.node:
        n.input[:] = [renamed.get(x, x) for x in n.input]
    tail = []
    for vi in g.output:
        if changed(vi):
            src = renamed.get(vi.name, vi.name)
            outer = vi.name + "__float"
            tail.append(helper.make_node("Cast", [src], [outer], to=TensorProto.FLOAT))
            vi.name = outer
            vi.type.tensor_type.elem_type = TensorProto.FLOAT
    nodes = casts + list(g.node) + tail
    del g.node[:]
    g.node.extend(nodes)
    return out


# -- the symbolic mode ---------------------------------------------------------------------

#: how :func:`symbolic_model` names the dynamic axes: ``strict`` gives every axis of every
#: input its own variable; ``shared`` one per (axis counted from the last, size), as exporters
#: name the axes that broadcast together alike
NAMINGS = ("strict", "shared")


def _dim_name(input_name: str, axis: int, x, naming: str = "strict") -> str:
    if naming == "shared":
        return f"a{x.ndim - 1 - axis}_{x.shape[axis]}"
    base = "".join(ch if ch.isalnum() else "_" for ch in input_name) or "x"
    return f"d{axis}_{base}"


def symbolic_model(model, names: list, feeds: list, naming: str = "strict"):
    """``model`` with every axis of size 2 or more of its inputs ``names`` (of values
    ``feeds``) made dynamic, a ``dim_param`` each. Axes of size 0 and 1 stay static (a 1 is
    what decides numpy's broadcasting, and exporters keep it).

    ``naming="strict"``: ``d<axis>_<input>``, one variable per axis of each input, even where
    the case's sizes agree. A converter must then prove what it assumes (that two inputs
    broadcast, that a product's inner sizes agree) or leave it to the relations and the
    kernels; two such variables broadcast to ``?``, which the converters must carry on with.
    This finds the most bugs. ``naming="shared"``: ``a<k>_<size>``, one variable per axis
    counted from the last and size, so that axes which broadcast together share it, as an
    exporter's ``batch`` and ``seq`` are shared (a product's inner sizes still differ: ``a0_k``
    against ``a1_k``). It is what real models meet: shape arithmetic that folds."""
    out = type(model)()
    out.CopyFrom(model)
    by_name = dict(zip(names, feeds))
    for vi in out.graph.input:
        x = by_name.get(vi.name)
        if x is None or not vi.type.HasField("tensor_type"):
            continue
        shape = vi.type.tensor_type.shape
        if len(shape.dim) != x.ndim:
            continue
        for axis, d in enumerate(shape.dim):
            if x.shape[axis] >= 2:
                d.Clear()
                d.dim_param = _dim_name(vi.name, axis, x, naming)
    return out


def import_symbolic(case, feeds: list, naming: str = "strict") -> tuple:
    """``(module, frozen input names)``: the case imported with its inputs' sizes of 2 or
    more dynamic (:func:`symbolic_model`) and no input shapes given. An input whose value a
    converter needs at import time (a Reshape's target, a Pad's pads, TopK's k: what a user
    would bind) is made an initializer, one at a time, and the rest stay dynamic."""
    from .importer import from_onnx
    from .node import ConversionError
    from onnx import numpy_helper

    names = _inputs(case)
    values = dict(zip(names, feeds))
    frozen: list = []
    model = case.model
    while True:
        rest = [n for n in names if n not in frozen]
        try:
            return from_onnx(symbolic_model(model, rest, [values[n] for n in rest], naming)), tuple(frozen)
        except ConversionError as err:
            needed = getattr(err, "needed", None)
            if needed is not None:  # Node.need_const of one of the case's inputs
                more = [needed] if needed in values and needed not in frozen else []
            elif "computed from the model's data" in str(err):  # from an input, through a function body:
                more = [n for n, x in values.items()  # its integer and scalar inputs
                        if n not in frozen and (x.dtype.kind in "iu" or x.ndim == 0)]
            elif "known at import time" in str(err) and "size variables" not in str(err):  # another converter's
                more = [n for n in _freeze(case.model, names, feeds)[1] if n not in frozen]
            else:
                more = []
            if not more:
                raise
        frozen.extend(more)
        model = type(case.model)()
        model.CopyFrom(case.model)
        keep = [vi for vi in model.graph.input if vi.name not in frozen]
        del model.graph.input[:]
        model.graph.input.extend(keep)
        model.graph.initializer.extend(numpy_helper.from_array(values[n], n) for n in frozen)


def run_case_symbolic(case, naming: str = "strict") -> None:
    """Import ``case`` with dynamic input sizes (:func:`import_symbolic`), check that they
    stayed size variables, evaluate it on the case's inputs (the variables bind from them)
    and compare with ONNX's expected outputs as :func:`run_case` does."""
    from passhost import ir

    g = case.model.graph
    for what, values in (("input", g.input), ("output", g.output)):
        for vi in values:
            if not vi.type.HasField("tensor_type"):
                raise CaseFailure(f"graph {what} {vi.name!r} is not a tensor (a sequence or an optional): "
                                  "passhost imports sequences inside a graph only, as tuples")
    names = _inputs(case)
    for inputs, outputs in case.data_sets:
        feeds = [_array(x) for x in inputs]
        outputs = [_array(x) for x in outputs]
        mod, frozen = import_symbolic(case, feeds, naming)
        params = mod["main"].params
        for p, (n, x) in zip(params, [(n, x) for n, x in zip(names, feeds) if n not in frozen]):
            shape = p.checked_type.shape
            for axis, d in enumerate(shape):
                if x.shape[axis] >= 2 and not (type(d) is ir.Dim and d.name == _dim_name(n, axis, x, naming)):
                    raise CaseFailure(f"input {n!r}: axis {axis} imported as {d}, not as its size variable")
        got = _flat(ir.evaluate(mod, *[x for n, x in zip(names, feeds) if n not in frozen]))
        _compare("interpreter (symbolic)", got, outputs, case.rtol, case.atol)


# -- the symbolic mode's expected failures -------------------------------------------------
# Each is (reason, a piece of the error the case must fail with): a case that fails for
# another reason is a failure, one that passes an unexpected pass.

_NOT_TENSOR = ("a sequence- or optional-typed graph input or output: passhost imports sequences inside a graph "
               "only (as tuples), as in the static mode", "is not a tensor (a sequence or an optional)")
_STATIC = {  # failing here for the static mode's reason (known_failures.py)
    "test_scan_sum": ("Scan of opset 8 (a batch axis and sequence_lens); passhost unrolls or loops over the Scan of "
                      "opset 9 on", "Scan of opset 8"),
    **dict.fromkeys(["test_dft_inverse", "test_dft_inverse_opset19"], (
        "the expected output was computed before the spectrum was rounded to float32: its imaginary parts are "
        "exactly 0 where a float32 input leaves ~2e-6 (atol 1e-7); the static mode misses it too",
        "output 0 differs")),
    **dict.fromkeys(["test_training_dropout", "test_training_dropout_default", "test_training_dropout_default_mask",
                     "test_training_dropout_mask"], (
        "training-mode Dropout draws a random mask; passhost imports models for inference", "training-mode Dropout")),
    "test_celu_bfloat16": ("bfloat16 Celu, one bfloat16 step from the expected output (known_failures.py)",
                           "output 0 differs"),
}
_HALF_ROUNDING = dict.fromkeys(  # failing here for the static mode's reason (known_failures.py)
    ["test_attention_4d_causal_fp16", "test_attention_4d_causal_fp16_expanded"],
    ("float16 softmax rounded once, as onnxruntime does, not at each numpy step (known_failures.py)",
     "output 0 differs"))
_SIZE_DEPENDENT = {  # what a dynamic size makes inexpressible, in both namings
    **dict.fromkeys([f"test_affine_grid_{d}d{k}" for d in (2, 3) for k in ("", "_align_corners", "_expanded",
                                                                         "_align_corners_expanded")], (
        "AffineGrid's function body chooses its 2-D or 3-D computation with an If on the length of its size input, "
        "which is a dynamic axis here: the two branches give results of different ranks, and passhost's if has one "
        "type", "the branches of an if have different types")),
    **dict.fromkeys([f"test_causal_conv_with_state_{k}" for k in (
        "basic", "decode_step", "fp16", "kernel_size_one", "short_input_no_past_state", "silu", "silu_fp16",
        "silu_with_past_state", "swish_alias", "with_bias", "with_bias_and_past_state", "with_past_state")], (
        "CausalConvWithState is a depthwise convolution whose group is the channel count: with the input's channels "
        "and the weight's rows both dynamic, ONNX's schema builds no body for it (a Conv's group is an attribute, "
        "a number)", "builds none for these")),
    "test_convtranspose_autopad_same": (
        "SAME padding of a transposed convolution reaches in x stride with a padding of stride - kernel size "
        "(ONNX's formula): with the weight's kernel size dynamic the padding is a dimension, and passhost's "
        "conv2d_transpose padding is static", "the padding that gives output_shape"),
    **dict.fromkeys(["test_convtranspose_kernel_shape", "test_convtranspose_output_shape"], (
        "a static output_shape with a dynamic input: the padding that reaches it depends on the input's size, and "
        "passhost's conv2d_transpose padding is static", "the padding that gives output_shape")),
    **dict.fromkeys(["test_gathernd_example_float32", "test_gathernd_example_int32"], (
        "GatherND's result has rank data.rank - M + indices.rank - 1, M the length of the indices' last axis, which "
        "is dynamic here: the result's rank would depend on a size", "symbolic number of coordinates")),
    **dict.fromkeys([f"test_resize_{d}_sizes_nearest_not_{k}" for d in ("downsample", "upsample")
                     for k in ("larger", "smaller")], (
        "keep_aspect_ratio_policy scales every axis by the smaller (larger) of the float ratios sizes / input size "
        "and rounds: with the input's sizes dynamic, which ratio wins and the rounded size are no integer "
        "expression of them", "keep_aspect_ratio_policy")),
}
_GQA = ("the Attention (FlexAttention) function body expands the keys and values by the grouped-query interleave "
        "factor Where(q_heads != kv_heads and q_heads % kv_heads == 0, q_heads / kv_heads, 1): with the query's and "
        "the key's head counts different size variables the condition is undecidable, and a shape cannot hold a "
        "choice between two sizes, so the Expand target is computed from data", "Expanded' (opset")
_ATTENTION_STRICT = (
    "the Attention (FlexAttention) function body expands the keys and values to a target computed from the inputs' "
    "shapes: with every axis of each input its own size variable, the grouped-query interleave factor (a Where over "
    "two independent head counts) or a head size reshaped with -1 (not an exact quotient of independent sizes: ?) "
    "is no dimension passhost can write, so the Expand target is computed from data", "Expanded' (opset")
_GQA_CASES = ["test_attention_4d_gqa" + k + e for k in (
    "", "_attn_mask", "_causal", "_causal_nonpad_decode", "_causal_nonpad_decode_fp16", "_scaled", "_softcap",
    "_with_past_and_present", "_with_past_and_present_fp16") for e in ("", "_expanded")] + [
    "test_attention_local_window_gqa_rank4_mask", "test_attention_local_window_gqa_rank4_mask_expanded",
    "test_flexattention_gqa_expanded_ver26"]


def _multi_head_attention(case) -> bool:
    """An Attention or FlexAttention case (the operator, or its body inlined: ``_expanded``)
    whose query has more than one head: 4-D, its axis 1; 3-D, the ``q_num_heads`` attribute,
    or where the body is inlined (the heads a constant of its Reshape), any."""
    from .control import all_nodes

    if not case.name.startswith(("test_attention_", "test_flexattention_")):
        return False
    query = _array(case.data_sets[0][0][0])
    if query.ndim == 4:
        return query.shape[1] > 1
    heads = [a.i for n in all_nodes(case.model.graph) for a in n.attribute if a.name == "q_num_heads"]
    return any(h > 1 for h in heads) or any(n.op_type == "Reshape" for n in case.model.graph.node)


def _attention_imported(case) -> bool:
    """A case of one ``Attention`` node that imports as ``nn.attention`` in the symbolic modes
    (:func:`.convert_attention.maps`) -- without a mask: the mask's length is a size variable
    of its own there, not provably the keys' (a shorter mask ONNX pads), so that goes to the body."""
    from onnx.helper import get_attribute_value

    from .convert_attention import maps

    nodes = case.model.graph.node
    if len(nodes) != 1 or nodes[0].op_type != "Attention":
        return False
    n = nodes[0]
    if len(n.input) > 3 and n.input[3]:
        return False
    attrs = {a.name: get_attribute_value(a) for a in n.attribute}
    return maps(attrs, [x or None for x in n.input], list(n.output), _array(case.data_sets[0][0][0]).dtype.name)


def symbolic_failures(cases: list, naming: str) -> dict:
    """``{case name: (reason, a piece of its error)}``: the cases of ``cases`` that the
    symbolic mode with ``naming`` fails for a known reason."""
    out: dict = {}
    for case in cases:
        g = case.model.graph
        if any(not vi.type.HasField("tensor_type") for vi in (*g.input, *g.output)):
            out[case.name] = _NOT_TENSOR
        elif case.name in _STATIC:
            out[case.name] = _STATIC[case.name]
        elif case.name in _SIZE_DEPENDENT:
            out[case.name] = _SIZE_DEPENDENT[case.name]
        elif _attention_imported(case):  # (nn.attention: no function body, none of its Expand targets)
            continue
        elif naming == "shared" and case.name in _GQA_CASES:
            out[case.name] = _GQA
        elif naming == "strict" and _multi_head_attention(case):
            out[case.name] = _ATTENTION_STRICT
        elif case.name in _HALF_ROUNDING:  # (strict: the attention reason above comes first)
            out[case.name] = _HALF_ROUNDING[case.name]
    return out
