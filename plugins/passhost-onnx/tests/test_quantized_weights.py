"""Quantized weights through import, -O3 and export (issue 34 §3): blocked QDQ
(``DequantizeLinear`` with ``block_size``, opset 21) of int8, int4 and uint4 weights, and
onnxruntime's ``com.microsoft.MatMulNBits``.

Every model keeps its integer weights: no float constant as large as a weight appears in
the optimised module, the exported file is no larger than the original but for a few
hundred bytes of node overhead, and onnxruntime's outputs on the export equal its outputs
on the original. onnxruntime at ``ORT_ENABLE_ALL`` turns ``DequantizeLinear -> MatMul``
into its own ``MatMulNBits`` and quantizes the activations to int8 (differing from the
float product by ~0.4%), so the interpreter is compared with onnxruntime at
``ORT_DISABLE_ALL``, where both compute the float product.
"""
from __future__ import annotations

import copy
import logging
from pathlib import Path

import ml_dtypes  # noqa: F401
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import passhost
from passhost import ir, transform
from passhost.errors import FormatError

ort = pytest.importorskip("onnxruntime")

K1, N1, K2, N2, BLOCK = 64, 96, 96, 32, 32
#: bytes an export may add to a model's own: node and value names, opset records
SLACK = 512


def _float_model() -> onnx.ModelProto:
    rng = np.random.RandomState(0)
    w1, w2 = rng.randn(K1, N1).astype(np.float32), rng.randn(K2, N2).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", K1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", N2])],
                              [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


def _qdq_model() -> onnx.ModelProto:
    """``x @ DQ(int8, blocked) -> Relu -> @ DQ(int4, blocked)``, built by hand."""
    rng = np.random.RandomState(1)
    w8 = rng.randint(-128, 128, size=(K1, N1)).astype(np.int8)
    s8 = (rng.rand(K1 // BLOCK, N1) * 0.02 + 0.001).astype(np.float32)
    z8 = rng.randint(-3, 3, size=(K1 // BLOCK, N1)).astype(np.int8)
    w4 = rng.randint(-8, 8, size=(K2, N2)).astype("int4")
    s4 = (rng.rand(K2 // BLOCK, N2) * 0.1 + 0.01).astype(np.float32)
    z4 = rng.randint(-2, 2, size=(K2 // BLOCK, N2)).astype("int4")
    inits = [numpy_helper.from_array(a, n) for a, n in
             ((w8, "w8"), (s8, "s8"), (z8, "z8"), (w4, "w4"), (s4, "s4"), (z4, "z4"))]
    nodes = [helper.make_node("DequantizeLinear", ["w8", "s8", "z8"], ["W1"], axis=0, block_size=BLOCK),
             helper.make_node("MatMul", ["x", "W1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("DequantizeLinear", ["w4", "s4", "z4"], ["W2"], axis=0, block_size=BLOCK),
             helper.make_node("MatMul", ["r", "W2"], ["y"])]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", K1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", N2])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    return model


def _nbits_model(fmt: str) -> onnx.ModelProto:
    """The float model through onnxruntime's MatMulNBitsQuantizer (4 bits, blocks of 32,
    asymmetric): ``QOperator`` writes MatMulNBits, ``QDQ`` blocked uint4 DequantizeLinear."""
    quantizer = pytest.importorskip("onnxruntime.quantization.matmul_nbits_quantizer")
    from onnxruntime.quantization import QuantFormat

    cfg = quantizer.DefaultWeightOnlyQuantConfig(block_size=BLOCK, is_symmetric=False,
                                                 quant_format=getattr(QuantFormat, fmt))
    logging.disable(logging.INFO)
    try:
        q = quantizer.MatMulNBitsQuantizer(copy.deepcopy(_float_model()), algo_config=cfg)
        q.process()
    finally:
        logging.disable(logging.NOTSET)
    return q.model.model


MODELS = {"qdq-int8-int4": _qdq_model, "matmul_nbits": lambda: _nbits_model("QOperator"),
          "ort-qdq-uint4": lambda: _nbits_model("QDQ")}


def _run(path: Path, x: np.ndarray, level) -> np.ndarray:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = level
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def _optimise(mod):
    with transform.PassContext(opt_level=3):
        return passhost.default_pipeline(3)(mod)


def _float_constants(mod) -> list:
    """The float constants of ``mod`` holding at least as many elements as the smallest weight."""
    found: list = []

    def visit(e):
        if isinstance(e, ir.Constant) and e.data.dtype.name in ("float32", "float64", "float16", "bfloat16") \
                and e.data.size >= K2 * N2 // 2:
            found.append(e.data.shape)

    for gv in mod.functions:
        ir.post_order_visit(mod[gv.name_hint], visit)
    return found


@pytest.mark.parametrize("name", sorted(MODELS))
def test_quantized_weights_survive_o3_and_export(name, tmp_path):
    src, dst = tmp_path / "model.onnx", tmp_path / "out.onnx"
    model = MODELS[name]()
    onnx.save(model, str(src))
    mod = ir.load(str(src))
    out = _optimise(mod)
    assert not _float_constants(out), "a weight was dequantized into a float constant"
    ir.save(out, str(dst))
    assert dst.stat().st_size <= src.stat().st_size + SLACK, (src.stat().st_size, dst.stat().st_size)
    written = onnx.load(str(dst))
    before = sorted((n.op_type, n.domain) for n in model.graph.node if n.op_type in ("DequantizeLinear", "MatMulNBits"))
    after = sorted((n.op_type, n.domain) for n in written.graph.node if n.op_type in ("DequantizeLinear", "MatMulNBits"))
    assert before == after
    x = np.random.RandomState(2).randn(3, K1).astype(np.float32)
    for level in (ort.GraphOptimizationLevel.ORT_DISABLE_ALL, ort.GraphOptimizationLevel.ORT_ENABLE_ALL):
        np.testing.assert_allclose(_run(dst, x, level), _run(src, x, level), rtol=1e-6, atol=1e-5)
    want = _run(src, x, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    np.testing.assert_allclose(ir.evaluate(mod, x), want, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(ir.evaluate(out, x), want, rtol=1e-5, atol=1e-4)


def test_matmul_nbits_is_written_back_as_it_came(tmp_path):
    model = _nbits_model("QOperator")
    src, dst = tmp_path / "model.onnx", tmp_path / "out.onnx"
    onnx.save(model, str(src))
    mod = ir.load(str(src))
    assert {c.op.name for c in _calls(mod)} >= {"onnx.matmul_nbits"}
    ir.save(_optimise(mod), str(dst))
    written = onnx.load(str(dst))
    old = [n for n in model.graph.node if n.op_type == "MatMulNBits"]
    new = [n for n in written.graph.node if n.op_type == "MatMulNBits"]
    assert len(old) == len(new) == 2
    values = {t.name: numpy_helper.to_array(t) for t in written.graph.initializer}
    originals = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for a, b in zip(old, new):
        assert a.domain == b.domain == "com.microsoft"
        assert {x.name: helper.get_attribute_value(x) for x in a.attribute} == \
            {x.name: helper.get_attribute_value(x) for x in b.attribute}
        for i, j in zip(a.input[1:], b.input[1:]):  # B, scales, zero points: the same bytes
            assert values[j].dtype == originals[i].dtype and values[j].tobytes() == originals[i].tobytes()


def _calls(mod) -> list:
    found: list = []
    ir.post_order_visit(mod["main"], lambda e: found.append(e) if isinstance(e, ir.Call)
                        and isinstance(e.op, ir.Op) else None)
    return found


def test_fold_constant_dequantizes_a_weight_only_when_asked(tmp_path):
    path = tmp_path / "model.onnx"
    onnx.save(_qdq_model(), str(path))
    mod = ir.load(str(path))
    dq = [c for c in _calls(mod) if c.op.name == "qnn.dequantize"]
    assert len(dq) == 2 and all(isinstance(a, ir.Constant) for c in dq for a in c.args)
    assert {c.args[0].data.dtype.name for c in dq} == {"int8", "int4"}
    kept = passhost.passes.FoldConstant()(mod)
    assert len([c for c in _calls(kept) if c.op.name == "qnn.dequantize"]) == 2 and not _float_constants(kept)
    folded = passhost.passes.FoldConstant(fold_qnn=True)(mod)
    assert not [c for c in _calls(folded) if c.op.name == "qnn.dequantize"] and _float_constants(folded)
    for p in ("FoldScaleAxis", "SimplifyExpr", "CanonicalizeOps", "SimplifyInference"):
        assert not _float_constants(passhost.passes.FoldConstant()(passhost.passes.get(p)(mod))), p


def test_fold_scale_axis_leaves_a_dequantized_weight_alone(tmp_path):
    """A per-channel scale after a quantized product stays where it is: folded into the
    weight it could only multiply the dequantized weight at every run (and hide the
    DequantizeLinear -> MatMul pair that runtimes fuse into an integer product)."""
    model = _qdq_model()
    g = model.graph
    g.initializer.append(numpy_helper.from_array(np.linspace(0.5, 2, N2).astype(np.float32), "ch"))
    g.node.append(helper.make_node("Mul", ["y", "ch"], ["z"]))
    g.output[0].name = "z"
    src, dst = tmp_path / "model.onnx", tmp_path / "out.onnx"
    onnx.save(model, str(src))
    out = _optimise(ir.load(str(src)))
    assert not _float_constants(out)
    ir.save(out, str(dst))
    nodes = onnx.load(str(dst)).graph.node
    producer = {o: n for n in nodes for o in n.output}
    muls = [n for n in nodes if n.op_type == "Mul"]
    assert len(muls) == 1 and producer[muls[0].input[0]].op_type in ("Gemm", "MatMul")
    x = np.random.RandomState(3).randn(2, K1).astype(np.float32)
    level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    np.testing.assert_allclose(_run(dst, x, level), _run(src, x, level), rtol=1e-6, atol=1e-5)


def test_blocked_quantisation_needs_opset_21(tmp_path):
    path = tmp_path / "model.onnx"
    onnx.save(_qdq_model(), str(path))
    mod = ir.load(str(path))
    with pytest.raises(FormatError, match="opset 21"):
        passhost_onnx_to_onnx(mod, 19)


def passhost_onnx_to_onnx(mod, opset):
    from passhost_onnx import to_onnx

    return to_onnx(mod, opset=opset)


def test_a_half_precision_scale_is_written_as_it_is():
    """DequantizeLinear with a float16 scale (opset 19+) gives float16 and exports with its
    float16 scale, no Cast around it."""
    w = np.arange(-8, 8, dtype=np.int8).reshape(4, 4)
    s = np.array([0.5, 0.25, 2, 1], np.float16)
    nodes = [helper.make_node("DequantizeLinear", ["w", "s"], ["W"], axis=1),
             helper.make_node("MatMul", ["x", "W"], ["y"])]
    graph = helper.make_graph(nodes, "h", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 4])],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(s, "s")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    from passhost_onnx import from_onnx, to_onnx

    out = to_onnx(_optimise(from_onnx(model)), opset=21)
    assert [n.op_type for n in out.graph.node if n.op_type in ("DequantizeLinear", "Cast")] == ["DequantizeLinear"]
    scale = {t.name: t for t in out.graph.initializer}[[n for n in out.graph.node
                                                        if n.op_type == "DequantizeLinear"][0].input[1]]
    assert scale.data_type == TensorProto.FLOAT16
    x = np.random.RandomState(0).randn(2, 4).astype(np.float16)
    sess = [ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]) for m in (model, out)]
    np.testing.assert_allclose(*[s.run(None, {"x": x})[0].astype(np.float32) for s in sess], rtol=1e-3)


def test_quantized_modules_print_and_parse_back(tmp_path):
    path = tmp_path / "model.onnx"
    for name in ("qdq-int8-int4", "matmul_nbits"):
        onnx.save(MODELS[name](), str(path))
        mod = ir.load(str(path))
        text = mod.astext(show_meta_data=True)
        assert ir.structural_equal(ir.parse(text)["main"], mod["main"])  # (module attrs are not text)


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_a_float8_weight_stays_float8(dtype):
    """DequantizeLinear of a float8 weight (opset 19) is ``qnn.dequantize`` of the float8
    constant, not a float32 weight; onnxruntime's CPU provider cannot run it, so onnx's
    reference implementation checks the numbers."""
    from onnx.reference import ReferenceEvaluator

    from passhost_onnx import from_onnx, to_onnx

    elem = {"float8_e4m3fn": TensorProto.FLOAT8E4M3FN, "float8_e5m2": TensorProto.FLOAT8E5M2}[dtype]
    rng = np.random.RandomState(4)
    w = (rng.randn(K1, N1) * 8).astype(dtype)
    nodes = [helper.make_node("DequantizeLinear", ["w", "s"], ["W"], axis=1),
             helper.make_node("MatMul", ["x", "W"], ["y"])]
    graph = helper.make_graph(nodes, "f8", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, K1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, N1])],
                              [numpy_helper.from_array(w, "w"),
                               numpy_helper.from_array((rng.rand(N1) * 0.1).astype(np.float32), "s")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    out = _optimise(from_onnx(model))
    assert not _float_constants(out)
    written = to_onnx(out, opset=21)
    assert {t.data_type for t in written.graph.initializer} >= {elem}
    x = rng.randn(3, K1).astype(np.float32)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(ir.evaluate(out, x), want, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(ReferenceEvaluator(written).run(None, {"x": x})[0], want, rtol=1e-5, atol=1e-4)
