"""Quantized operators (QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger): onnxruntime's
numbers bit for bit, through -O3, and an export that keeps the model's own operators."""
from __future__ import annotations

import collections
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import passhost
from passhost import ir, transform


def _o3_and_save(mod, path):
    with transform.PassContext(opt_level=3):
        mod = passhost.default_pipeline(3)(mod)
    ir.save(mod, str(path))
    return collections.Counter(n.op_type for n in onnx.load(str(path)).graph.node)


def _qoperator_model(per_channel: bool, with_bias: bool):
    """float x -> QuantizeLinear -> QLinearConv -> QLinearConv -> DequantizeLinear, and a
    QLinearMatMul of the flattened result: the shape ORT's QOperator quantizer writes."""
    rng = np.random.default_rng(3)
    c, m = 3, 4
    w1 = rng.integers(-127, 128, (m, c, 3, 3)).astype(np.int8)
    w2 = rng.integers(-127, 128, (m, m, 1, 1)).astype(np.int8)
    ws1 = (rng.uniform(0.002, 0.01, m) if per_channel else np.array(0.004)).astype(np.float32)
    inits = [
        numpy_helper.from_array(np.array(0.02, np.float32), "xs"), numpy_helper.from_array(np.uint8(128), "xz"),
        numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(ws1, "ws1"),
        numpy_helper.from_array(np.zeros(ws1.shape, np.int8), "wz1"),
        numpy_helper.from_array(np.array(0.05, np.float32), "ys1"), numpy_helper.from_array(np.uint8(120), "yz1"),
        numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(np.array(0.003, np.float32), "ws2"),
        numpy_helper.from_array(np.int8(0), "wz2"),
        numpy_helper.from_array(np.array(0.07, np.float32), "ys2"), numpy_helper.from_array(np.uint8(131), "yz2"),
        numpy_helper.from_array(rng.integers(-300, 300, m).astype(np.int32), "b1"),
        numpy_helper.from_array(rng.integers(0, 256, (m, 5)).astype(np.uint8), "mw"),
        numpy_helper.from_array(np.array(0.01, np.float32), "mws"), numpy_helper.from_array(np.uint8(127), "mwz"),
        numpy_helper.from_array(np.array(0.2, np.float32), "mys"), numpy_helper.from_array(np.uint8(100), "myz"),
        numpy_helper.from_array(np.array([1, m], np.int64), "flat"),
    ]
    bias = ["b1"] if with_bias else []
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["q"]),
        helper.make_node("QLinearConv", ["q", "xs", "xz", "w1", "ws1", "wz1", "ys1", "yz1"] + bias, ["c1"],
                         pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("QLinearConv", ["c1", "ys1", "yz1", "w2", "ws2", "wz2", "ys2", "yz2"], ["c2"]),
        helper.make_node("DequantizeLinear", ["c2", "ys2", "yz2"], ["y"]),
        helper.make_node("ReduceMax", ["c2"], ["r"], axes=[2, 3], keepdims=1),
        helper.make_node("Reshape", ["r", "flat"], ["rf"]),
        helper.make_node("QLinearMatMul", ["rf", "ys2", "yz2", "mw", "mws", "mwz", "mys", "myz"], ["mm"]),
    ]
    graph = helper.make_graph(nodes, "q", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, m, 4, 4]),
                               helper.make_tensor_value_info("mm", TensorProto.UINT8, [1, 5])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_qlinear_operators_give_onnxruntimes_numbers_and_export_as_themselves(per_channel, with_bias, tmp_path,
                                                                               ort_run):
    src = tmp_path / "q.onnx"
    onnx.save(_qoperator_model(per_channel, with_bias), str(src))
    x = np.random.default_rng(0).uniform(-2.5, 2.5, (1, 3, 8, 8)).astype(np.float32)
    want_y, want_mm = ort_run(str(src), {"x": x})
    mod = ir.load(str(src))
    assert {"qnn.conv2d", "qnn.requantize"} <= set(ir.count_ops(mod["main"]))
    got_y, got_mm = ir.evaluate(mod, x)
    np.testing.assert_array_equal(got_mm, want_mm)
    np.testing.assert_array_equal(got_y, want_y)
    ops = _o3_and_save(mod, tmp_path / "out.onnx")
    out_y, out_mm = ort_run(str(tmp_path / "out.onnx"), {"x": x})
    np.testing.assert_array_equal(out_mm, want_mm)
    np.testing.assert_array_equal(out_y, want_y)
    # the convolutions come back as the model's own QLinearConv, the quantization as Q/DQ
    assert ops["QLinearConv"] == 2 and ops["QuantizeLinear"] >= 1 and ops["DequantizeLinear"] == 1
    assert not {"ConvInteger", "Round", "Clip", "Div"} & set(ops)


def _ort_quantized_squeezenet(zoo, tmp_path, **options):
    """The model zoo's SqueezeNet quantized by onnxruntime (QOperator format, ``options``
    for ``quantize_static``): ``(path, input name, rng)``."""
    quantization = pytest.importorskip("onnxruntime.quantization")
    model = onnx.load(zoo["squeezenet"])
    inits = {t.name for t in model.graph.initializer}
    keep = [i for i in model.graph.input if i.name not in inits]
    del model.graph.input[:]
    model.graph.input.extend(keep)
    model.ir_version = max(model.ir_version, 4)
    onnx.save(model, str(tmp_path / "f.onnx"))
    rng = np.random.default_rng(0)
    name = keep[0].name

    class Reader(quantization.CalibrationDataReader):
        def __init__(self):
            self.left = 2

        def get_next(self):
            self.left -= 1
            return {name: rng.uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)} if self.left >= 0 else None

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantization.quantize_static(str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx"), Reader(),
                                     quant_format=quantization.QuantFormat.QOperator, **options)
    return tmp_path / "q.onnx", name, rng


def test_an_ort_quantized_squeezenet_runs_the_same_and_keeps_its_shape(zoo, tmp_path, ort_run):
    """onnxruntime's own quantizer (QOperator format, its convolutions): passhost's import,
    interpreter, -O3 and export give onnxruntime's outputs exactly, in a model with the
    original's quantized operators."""
    q, name, rng = _ort_quantized_squeezenet(zoo, tmp_path, op_types_to_quantize=["Conv"], per_channel=True)
    original = collections.Counter(n.op_type for n in onnx.load(str(q)).graph.node)
    assert original["QLinearConv"] == 26
    x = rng.uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)
    want = ort_run(str(q), {name: x})[0]
    mod = ir.load(str(q))
    np.testing.assert_allclose(ir.evaluate(mod, x), want, rtol=0, atol=1e-6)  # (a float softmax at the end)
    ops = _o3_and_save(mod, tmp_path / "out.onnx")
    np.testing.assert_array_equal(ort_run(str(tmp_path / "out.onnx"), {name: x})[0], want)
    for op in ("QLinearConv", "QuantizeLinear", "DequantizeLinear"):
        assert ops[op] == original[op], (op, ops, original)


def test_a_requantize_that_is_not_a_qlinear_conv_exports_as_its_arithmetic(tmp_path, ort_run):
    """``qnn.requantize`` of an integer value that no convolution made: Cast, Mul and a
    QuantizeLinear of scale 1, with the same numbers (halves to even, saturation)."""
    x = ir.var("x", shape=(2, 6), dtype="int32")
    y = ir.Call(ir.Op.get("qnn.requantize"),
                [x, ir.const(np.float32(0.5)), ir.const(np.int32(0)), ir.const(np.float32(1.0)),
                 ir.const(np.int8(3))], {"out_dtype": "int8"})
    mod = ir.IRModule.from_expr(ir.Function([x], y))
    data = np.array([[1, 3, 5, -1, -3, -5], [400, -400, 0, 7, 250, -250]], np.int32)  # halves, saturation
    got = ir.evaluate(mod, data)
    np.testing.assert_array_equal(got, np.array([[3, 5, 5, 3, 1, 1], [127, -128, 3, 7, 127, -122]], np.int8))
    ir.save(mod, str(tmp_path / "r.onnx"))
    ops = [n.op_type for n in onnx.load(str(tmp_path / "r.onnx")).graph.node]
    assert ops == ["Cast", "Mul", "QuantizeLinear"]
    np.testing.assert_array_equal(ort_run(str(tmp_path / "r.onnx"), {"x": data})[0], got)


@pytest.mark.parametrize("rounding, want", [("TONEAREST_EVEN", [0, 2, -2, 2, -2]), ("UPWARD", [1, 2, -1, 3, -2]),
                                             ("TONEAREST", [1, 2, -2, 3, -3])])
def test_requantize_rounds_halves_as_its_rounding_says(rounding, want):
    x = ir.var("x", shape=(5,), dtype="int32")
    y = ir.Call(ir.Op.get("qnn.requantize"),
                [x, ir.const(np.float32(0.5)), ir.const(np.int32(0)), ir.const(np.float32(1.0)),
                 ir.const(np.int32(0))], {"rounding": rounding, "out_dtype": "int32"})
    got = ir.evaluate(ir.Function([x], y), np.array([1, 3, -3, 5, -5], np.int32))
    np.testing.assert_array_equal(got, np.array(want, np.int32))


def test_the_quantized_operators_print_and_parse_back():
    x = ir.var("x", shape=(1, 2, 5, 5), dtype="uint8")
    conv = ir.Call(ir.Op.get("qnn.conv2d"),
                   [x, ir.const(np.ones((3, 2, 3, 3), np.int8)), ir.const(np.uint8(128)),
                    ir.const(np.zeros(3, np.int8)), ir.const(np.float32(0.02)), ir.const(np.full(3, 0.01, np.float32))],
                   {"padding": (1, 1, 1, 1), "channels": 3, "kernel_size": (3, 3)})
    req = ir.Call(ir.Op.get("qnn.requantize"),
                  [conv, ir.const(np.full(3, 2e-4, np.float32)), ir.const(np.int32(0)), ir.const(np.float32(0.05)),
                   ir.const(np.uint8(7))], {"axis": 1, "out_dtype": "uint8"})
    mod = ir.IRModule.from_expr(ir.Function([x], req))
    back = ir.parse(ir.astext(mod))
    assert ir.structural_equal(ir.infer_type(back)["main"], ir.infer_type(mod)["main"])
    data = np.random.default_rng(1).integers(0, 256, (1, 2, 5, 5)).astype(np.uint8)
    np.testing.assert_array_equal(ir.evaluate(back, data), ir.evaluate(mod, data))


@pytest.mark.parametrize("args, message", [
    (("float32", "int8", "uint8", "int8"), "the data must be an integer tensor"),
    (("uint8", "int8", "int8", "int8"), "each zero point must have its tensor's dtype"),
])
def test_qnn_conv2d_names_what_is_wrong_with_its_operands(args, message):
    data, kernel, izp, kzp = args
    x = ir.var("x", shape=(1, 2, 5, 5), dtype=data)
    conv = ir.Call(ir.Op.get("qnn.conv2d"),
                   [x, ir.const(np.ones((3, 2, 3, 3), kernel)), ir.const(np.zeros((), izp)),
                    ir.const(np.zeros((), kzp)), ir.const(np.float32(1)), ir.const(np.float32(1))])
    with pytest.raises(passhost.errors.TypeInferenceError, match=message):
        ir.infer_type(ir.Function([x], conv))


# -- onnxruntime's com.microsoft quantized operators -----------------------------------------

_MS = "com.microsoft"


def _contrib_model():
    """Each com.microsoft quantized operator the QOperator quantizer writes, chained."""
    rng = np.random.default_rng(5)

    def c(name, value):
        return numpy_helper.from_array(value, name)

    inits = [c("xs", np.array(0.03, np.float32)), c("xz", np.uint8(120)),
             c("as", np.array(0.05, np.float32)), c("az", np.uint8(128)),
             c("ms", np.array(0.08, np.float32)), c("mz", np.uint8(110)),
             c("ss", np.array(1 / 256, np.float32)), c("sz", np.uint8(0)),
             c("ls", np.array(0.04, np.float32)), c("lz", np.uint8(100)),
             c("ps", np.array(0.035, np.float32)), c("pz", np.uint8(125)),
             c("gw", rng.integers(-127, 128, (6, 4)).astype(np.int8)),
             c("gws", rng.uniform(0.005, 0.02, 6).astype(np.float32)), c("gwz", np.zeros(6, np.int8)),
             c("gb", rng.integers(-500, 500, 6).astype(np.int32)),
             c("gs", np.array(0.1, np.float32)), c("gz", np.uint8(130)),
             c("cs", np.array(0.05, np.float32)), c("cz", np.uint8(127))]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["q"]),
        helper.make_node("QuantizeLinear", ["y", "xs", "xz"], ["r"]),
        helper.make_node("QLinearAdd", ["q", "xs", "xz", "r", "xs", "xz", "as", "az"], ["a"], domain=_MS),
        helper.make_node("QLinearMul", ["a", "as", "az", "r", "xs", "xz", "ms", "mz"], ["m"], domain=_MS),
        helper.make_node("QLinearSigmoid", ["m", "ms", "mz", "ss", "sz"], ["s"], domain=_MS),
        helper.make_node("QLinearLeakyRelu", ["a", "as", "az", "ls", "lz"], ["l"], domain=_MS, alpha=0.1),
        helper.make_node("QLinearConcat", ["cs", "cz", "s", "ss", "sz", "l", "ls", "lz"], ["cat"], domain=_MS,
                         axis=1),
        helper.make_node("QLinearAveragePool", ["cat", "cs", "cz", "ps", "pz"], ["p"], domain=_MS,
                         kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("QLinearGlobalAveragePool", ["p", "ps", "pz", "ps", "pz"], ["g"], domain=_MS,
                         channels_last=0),
        helper.make_node("Flatten", ["g"], ["gf"]),
        helper.make_node("QGemm", ["gf", "ps", "pz", "gw", "gws", "gwz", "gb", "gs", "gz"], ["out"], domain=_MS,
                         transB=1),
        helper.make_node("QGemm", ["gf", "ps", "pz", "gw", "gws", "gwz"], ["f"], domain=_MS, transB=1,
                         alpha=0.5),
    ]
    graph = helper.make_graph(nodes, "contrib", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, 6, 6])
                                                 for n in ("x", "y")],
                              [helper.make_tensor_value_info("out", TensorProto.UINT8, [1, 6]),
                               helper.make_tensor_value_info("f", TensorProto.FLOAT, [1, 6]),
                               helper.make_tensor_value_info("cat", TensorProto.UINT8, [1, 4, 6, 6])],
                              initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(_MS, 1)])


def _within_a_step(got, want, step_of_float=None):
    if got.dtype == np.uint8:
        assert np.abs(got.astype(int) - want.astype(int)).max() <= 1
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=step_of_float)


def test_onnxruntimes_quantized_contrib_operators_import_within_a_quantization_step(tmp_path, ort_run):
    """com.microsoft QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu,
    QLinearConcat, QLinearAveragePool, QLinearGlobalAveragePool and QGemm (requantized, and
    with a float output): each its float operator between a dequantize and a quantize,
    within one quantization step of onnxruntime (which computes some in fixed point or
    with tables); the export is standard ONNX with the same numbers."""
    src = tmp_path / "contrib.onnx"
    onnx.save(_contrib_model(), str(src))
    rng = np.random.default_rng(2)
    feeds = {"x": rng.uniform(-3, 3, (1, 2, 6, 6)).astype(np.float32),
             "y": rng.uniform(-3, 3, (1, 2, 6, 6)).astype(np.float32)}
    want = ort_run(str(src), feeds)
    mod = ir.load(str(src))
    got = ir.evaluate(mod, *feeds.values())
    step = 0.1 * 0.5  # QGemm's float output: within a step of its input scale product
    for g, w in zip(got, want):
        _within_a_step(g, w, step)
    ops = _o3_and_save(mod, tmp_path / "out.onnx")
    assert not any(n.domain for n in onnx.load(str(tmp_path / "out.onnx")).graph.node)
    # (the two QGemm share one integer product: EliminateCommonSubexpr merged them)
    assert ops["MatMulInteger"] == 1 and "Sigmoid" in ops and "Concat" in ops
    for g, w in zip(ort_run(str(tmp_path / "out.onnx"), feeds), got):
        _within_a_step(g, w, step)


def test_a_fully_quantized_squeezenet_imports_and_runs_as_onnxruntime_does(zoo, tmp_path, ort_run):
    """onnxruntime's QOperator quantizer on every operator type: QLinearConv, and the
    com.microsoft QLinearConcat, QLinearGlobalAveragePool and QLinearSoftmax."""
    q, name, rng = _ort_quantized_squeezenet(zoo, tmp_path)
    original = collections.Counter((n.domain, n.op_type) for n in onnx.load(str(q)).graph.node)
    assert original[(_MS, "QLinearConcat")] == 8 and original[(_MS, "QLinearGlobalAveragePool")] == 1
    x = rng.uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)
    want = ort_run(str(q), {name: x})[0]
    mod = ir.load(str(q))
    # the softmax output has scale 1/256; onnxruntime's QLinearSoftmax works from a table of
    # exponentials, so allow a few of its steps
    np.testing.assert_allclose(ir.evaluate(mod, x), want, rtol=0, atol=4 / 256)
    ops = _o3_and_save(mod, tmp_path / "out.onnx")
    assert ops["QLinearConv"] == 26 and ops["Concat"] == 8
    np.testing.assert_allclose(ort_run(str(tmp_path / "out.onnx"), {name: x})[0], want, rtol=0, atol=4 / 256)


@pytest.mark.parametrize("op, attrs", [("QLinearGlobalAveragePool", {}),
                                       ("QLinearAveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]})])
def test_channels_last_quantized_pooling_matches_onnxruntime(op, attrs, tmp_path, ort_run):
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "s"), numpy_helper.from_array(np.uint8(7), "z"),
             numpy_helper.from_array(np.array(0.04, np.float32), "ys"), numpy_helper.from_array(np.uint8(3), "yz")]
    out_shape = [1, 1, 1, 3] if op == "QLinearGlobalAveragePool" else [1, 5, 4, 3]
    graph = helper.make_graph(
        [helper.make_node(op, ["x", "s", "z", "ys", "yz"], ["y"], domain=_MS, channels_last=1, **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 5, 4, 3])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, out_shape)], initializer=inits)
    src = tmp_path / "pool.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(_MS, 1)]),
              str(src))
    x = np.random.default_rng(4).integers(0, 256, (1, 5, 4, 3)).astype(np.uint8)
    want = ort_run(str(src), {"x": x})[0]
    got = ir.evaluate(ir.load(str(src)), x)
    assert got.shape == want.shape
    _within_a_step(got, want)


def test_a_dynamically_quantized_bert_keeps_its_integer_products(tmp_path, ort_run):
    """``onnxruntime.quantization.quantize_dynamic``, the usual int8 path for transformers:
    DynamicQuantizeLinear (its ONNX function body), MatMulInteger with int8 weights. The
    import, -O3 and export give onnxruntime's outputs, and every MatMulInteger survives
    with its int8 weight."""
    quantization = pytest.importorskip("onnxruntime.quantization")
    from passhost_onnx.bert import make_bert

    model = make_bert(layers=2, hidden=64, heads=4, ffn=128)
    for vi in model.graph.input:
        for i, d in enumerate(vi.type.tensor_type.shape.dim):
            if not d.dim_value:
                d.dim_value = 1 if i == 0 else 16
    onnx.save(model, str(tmp_path / "bert.onnx"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantization.quantize_dynamic(str(tmp_path / "bert.onnx"), str(tmp_path / "q.onnx"),
                                      weight_type=quantization.QuantType.QInt8)
    q = onnx.load(str(tmp_path / "q.onnx"))
    integer = sum(n.op_type == "MatMulInteger" for n in q.graph.node)
    assert integer == 12
    rng = np.random.default_rng(0)
    feeds = {vi.name: rng.integers(0, 100, [d.dim_value for d in vi.type.tensor_type.shape.dim]).astype(np.int64)
             for vi in q.graph.input}
    want = ort_run(str(tmp_path / "q.onnx"), feeds)
    mod = ir.load(str(tmp_path / "q.onnx"))
    got = ir.evaluate(mod, *feeds.values())
    for g, w in zip([got] if isinstance(got, np.ndarray) else got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    ops = _o3_and_save(mod, tmp_path / "out.onnx")
    assert ops["MatMulInteger"] == integer
    out = onnx.load(str(tmp_path / "out.onnx"))
    int8_weights = [t for t in out.graph.initializer if t.data_type == TensorProto.INT8 and len(t.dims) == 2]
    assert len(int8_weights) == integer
    for g, w in zip(ort_run(str(tmp_path / "out.onnx"), feeds), want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("inputs, shapes, message", [
    (["x", "w"], {"x": [1, 2, 5, 5], "w": []}, r"its weight \(input 1\) must be 4-D"),
    (["x", "w", "", "wz"], {"x": [1, 2, 5, 5], "w": [3, 2, 3, 3], "wz": [2]},
     r"input 3 \(a scale or zero point\) must be a scalar or 3 values, one per output channel"),
])
def test_a_malformed_conv_integer_is_named_with_what_is_wrong(inputs, shapes, message):
    from passhost.errors import FormatError
    from passhost_onnx import from_onnx

    elem = {"x": TensorProto.UINT8, "w": TensorProto.INT8, "wz": TensorProto.INT8}
    graph = helper.make_graph([helper.make_node("ConvInteger", inputs, ["y"])], "g",
                              [helper.make_tensor_value_info(n, elem[n], s) for n, s in shapes.items()],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, None)])
    with pytest.raises(FormatError, match=message):
        from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)]))


@pytest.mark.parametrize("attrs, message", [({}, "has no axis attribute, which QLinearConcat needs"),
                                            ({"axis": "x"}, "its axis attribute must be an int, got 'x'")])
def test_a_contrib_operators_bad_attribute_is_named(attrs, message):
    from passhost.errors import FormatError
    from passhost_onnx import from_onnx

    inits = [numpy_helper.from_array(np.array(0.1, np.float32), "s"), numpy_helper.from_array(np.uint8(3), "z")]
    node = helper.make_node("QLinearConcat", ["s", "z", "a", "s", "z", "b", "s", "z"], ["y"], domain=_MS, **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, TensorProto.UINT8, [1, 2])
                                            for n in ("a", "b")],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(_MS, 1)])
    with pytest.raises(FormatError, match=message):
        from_onnx(model)


@pytest.mark.parametrize("op", ["QLinearConv", "ConvInteger"])
def test_a_1d_quantized_convolution_goes_through_the_2d_operator(op, tmp_path, ort_run):
    """Conv1d of an int8 audio model: the length axis becomes the width of a height-1
    image, as for the float Conv."""
    rng = np.random.default_rng(6)
    w = rng.integers(-127, 128, (4, 3, 5)).astype(np.int8)
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "xs"), numpy_helper.from_array(np.uint8(120), "xz"),
             numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(0.01, np.float32), "ws"),
             numpy_helper.from_array(np.int8(0), "wz"), numpy_helper.from_array(np.array(0.2, np.float32), "ys"),
             numpy_helper.from_array(np.uint8(128), "yz")]
    inputs = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"] if op == "QLinearConv" else ["x", "w", "xz", "wz"]
    out_type = TensorProto.UINT8 if op == "QLinearConv" else TensorProto.INT32
    graph = helper.make_graph([helper.make_node(op, inputs, ["y"], pads=[2, 2], strides=[2])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 3, 16])],
                              [helper.make_tensor_value_info("y", out_type, [1, 4, 8])], initializer=inits)
    src = tmp_path / "c1d.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(src))
    x = rng.integers(0, 256, (1, 3, 16)).astype(np.uint8)
    want = ort_run(str(src), {"x": x})[0]
    mod = ir.load(str(src))
    np.testing.assert_array_equal(ir.evaluate(mod, x), want)
    ops = _o3_and_save(mod, tmp_path / "out.onnx")
    assert ops[op] == 1
    np.testing.assert_array_equal(ort_run(str(tmp_path / "out.onnx"), {"x": x})[0], want)
