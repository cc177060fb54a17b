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


def _qoperator_model(per_channel: bool, with_bias: bool, bits: int = 8):
    """float x -> QuantizeLinear -> QLinearConv -> QLinearConv -> DequantizeLinear, and a
    QLinearMatMul of the flattened result: the shape ORT's QOperator quantizer writes.
    ``bits``: the int8 weights span [-127, 127] (8) or [-64, 64] (7, onnxruntime's
    ``reduce_range``)."""
    rng = np.random.default_rng(3)
    c, m = 3, 4
    top = 127 if bits == 8 else 64
    w1 = rng.integers(-top, top + 1, (m, c, 3, 3)).astype(np.int8)
    w2 = rng.integers(-top, top + 1, (m, m, 1, 1)).astype(np.int8)
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


def _qoperator_exact(model, x, with_bias, qref):
    """ONNX's definition of :func:`_qoperator_model` on ``x``, by hand: ``[y, mm]``, and
    how far onnxruntime may be from each where its u8 x s8 products saturate (see
    :func:`_qoperator_bound`)."""
    k = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    q = qref.quantize(x, k["xs"], k["xz"])
    c1 = qref.qlinear_conv(q, k["xs"], k["xz"], k["w1"], k["ws1"], k["wz1"], k["ys1"], k["yz1"],
                           bias=k["b1"] if with_bias else None, pads=(1, 1, 1, 1), strides=(2, 2))
    c2 = qref.qlinear_conv(c1, k["ys1"], k["yz1"], k["w2"], k["ws2"], k["wz2"], k["ys2"], k["yz2"])
    rf = c2.max(axis=(2, 3)).reshape(1, -1)
    mm = qref.qlinear_matmul(rf, k["ys2"], k["yz2"], k["mw"], k["mws"], k["mwz"], k["mys"], k["myz"])
    exact = [qref.dequantize(c2, k["ys2"], k["yz2"]), mm]
    return exact, _qoperator_bound(k, q, c1, c2, qref)


def _qoperator_bound(k, q, c1, c2, qref):
    """onnxruntime's distance from the exact answer, derived element by element: its u8 x
    s8 convolutions may saturate int16 pair sums (``qref.u8s8_saturation_bound``), the
    second convolution then also reads the first's error (each step of it times the
    weight), ReduceMax passes on the largest error of its window, and the u8 x u8
    QLinearMatMul (exact in onnxruntime: no u8 x u8 kernel adds pairs in int16) scales
    its input's error by the weights. With 7-bit weights every term is 0."""
    m1 = qref.multiplier(k["xs"], k["ws1"], k["ys1"])
    cols1 = qref.im2col(q, (3, 3), (1, 1, 1, 1), (2, 2), int(k["xz"]))
    b1 = qref.u8s8_saturation_bound(cols1, k["w1"].reshape(len(k["w1"]), -1), m1)
    m2 = qref.multiplier(k["ys1"], k["ws2"], k["ys2"])
    cols2 = qref.im2col(c1, (1, 1), (0, 0, 0, 0), (1, 1), 0)
    spread = qref.im2col(b1, (1, 1), (0, 0, 0, 0), (1, 1), 0)
    b2 = qref.u8s8_saturation_bound(cols2, k["w2"].reshape(len(k["w2"]), -1), m2, spread=spread)
    brf = b2.max(axis=(2, 3)).reshape(1, -1)
    err = brf @ np.abs(k["mw"].astype(np.int64) - int(k["mwz"]))
    bmm = np.where(err > 0, np.floor(err * float(qref.multiplier(k["ys2"], k["mws"], k["mys"]))) + 1, 0)
    # (y is c2 dequantized: b2 steps of ys2, and where they differ, the float32 rounding of
    # the two products)
    y_max = np.float32(float(k["ys2"]) * 255)
    return [np.where(b2 > 0, b2 * float(k["ys2"]) + 2 * float(np.spacing(y_max)), 0), bmm]


@pytest.mark.parametrize("bits", [7, 8])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_qlinear_operators_give_the_exact_numbers_and_export_as_themselves(bits, per_channel, with_bias, tmp_path,
                                                                         ort_quantized, qref):
    """passhost's import, -O3 and export give ONNX's exact numbers; onnxruntime gives them
    too with 7-bit weights, and within the derived saturation bound with 8-bit ones."""
    model = _qoperator_model(per_channel, with_bias, bits)
    src = tmp_path / "q.onnx"
    onnx.save(model, str(src))
    x = np.random.default_rng(0).uniform(-2.5, 2.5, (1, 3, 8, 8)).astype(np.float32)
    exact, bound = _qoperator_exact(model, x, with_bias, qref)
    if bits == 7:
        assert not any(b.any() for b in bound)
        bound, why = 0, "7-bit weights: no int16 pair of u8 x s8 products can saturate"
    else:
        assert any(b.any() for b in bound)  # (the bound is not vacuous: some product may saturate)
        why = "int16 saturation of u8 x s8 pairs without VNNI, propagated (_qoperator_bound)"
    mod = ir.load(str(src))
    assert {"qnn.conv2d", "qnn.requantize"} <= set(ir.count_ops(mod["main"]))
    ort_quantized(str(src), {"x": x}, exact, ir.evaluate(mod, x), bound=bound, why=why, saturates=bits == 8)
    ops = _o3_and_save(mod, tmp_path / "out.onnx")
    out = str(tmp_path / "out.onnx")
    ort_quantized(out, {"x": x}, exact, ir.evaluate(ir.load(out), x), bound=bound, why=why, saturates=bits == 8)
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


def _softmax(v, axis):
    e = np.exp(v - v.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _quantized_squeezenet_exact(path, x, qref) -> np.ndarray:
    """ONNX's definition of an ORT-quantized SqueezeNet, node by node: the integer
    convolutions exact, the quantization in float32, max pools and concats exact; the
    average and the softmax (float operators ONNX defines only up to rounding) in float64,
    and quantized only where no value lies near a rounding tie."""
    model = onnx.load(str(path))
    vals = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    vals[model.graph.input[0].name] = x
    for n in model.graph.node:
        a = [vals[i] if i else None for i in n.input]
        attrs = {at.name: helper.get_attribute_value(at) for at in n.attribute}
        op = (n.domain, n.op_type)
        if op == ("", "QuantizeLinear"):
            out = qref.quantize(*a)
        elif op == ("", "DequantizeLinear"):
            out = qref.dequantize(*a)
        elif op == ("", "QLinearConv"):
            assert attrs.get("group", 1) == 1 and set(attrs.get("dilations", [1])) == {1}
            out = qref.qlinear_conv(*a[:8], bias=a[8] if len(a) > 8 else None, pads=attrs["pads"],
                                    strides=attrs["strides"])
        elif op == ("", "Relu"):
            out = np.maximum(a[0], 0)
        elif op == ("", "MaxPool"):
            assert not any(attrs.get("pads", [0])) and not attrs.get("ceil_mode", 0)
            win = np.lib.stride_tricks.sliding_window_view(a[0], attrs["kernel_shape"], axis=(2, 3))
            out = win[:, :, ::attrs["strides"][0], ::attrs["strides"][1]].max(axis=(-2, -1))
        elif op == ("", "Concat"):
            out = np.concatenate(a, axis=attrs["axis"])
        elif op == ("", "Dropout"):
            out = a[0]
        elif op == ("", "GlobalAveragePool"):
            out = a[0].astype(np.float64).mean(axis=(2, 3), keepdims=True)
        elif op == ("", "Softmax"):
            out = _softmax(a[0].astype(np.float64), attrs.get("axis", 1)).astype(np.float32)
        elif op == (_MS, "QLinearConcat"):
            parts = [qref.dequantize(*a[i:i + 3]) for i in range(2, len(a), 3)]
            out = qref.quantize(np.concatenate(parts, axis=attrs["axis"]), a[0], a[1])
        elif op == (_MS, "QLinearGlobalAveragePool"):
            mean = qref.dequantize(*a[:3]).astype(np.float64).mean(axis=(2, 3), keepdims=True)
            out = qref.quantize(mean, a[3], a[4], ulps=_ULPS)
        elif op == (_MS, "QLinearSoftmax"):
            probs = _softmax(qref.dequantize(*a[:3]).astype(np.float64), attrs.get("axis", -1))
            # (a float32 softmax sums 1,000 exponentials: up to about 2**10 roundings)
            out = qref.quantize(probs, a[3], a[4], ulps=2 ** 10)
        else:
            raise AssertionError(f"no reference for {n.domain}.{n.op_type}")
        vals[n.output[0]] = out
    return [vals[o.name] for o in model.graph.output]


def test_an_ort_quantized_squeezenet_runs_the_same_and_keeps_its_shape(zoo, tmp_path, ort_quantized, qref):
    """onnxruntime's own quantizer (QOperator format, its convolutions, 7-bit weights):
    passhost's import, interpreter, -O3 and export give ONNX's numbers, exact up to the
    float softmax at the end, in a model with the original's quantized operators; so does
    onnxruntime, whose integer products cannot saturate with these weights."""
    q, name, rng = _ort_quantized_squeezenet(zoo, tmp_path, op_types_to_quantize=["Conv"], per_channel=True,
                                             reduce_range=True)
    original = collections.Counter(n.op_type for n in onnx.load(str(q)).graph.node)
    assert original["QLinearConv"] == 26
    x = rng.uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)
    exact = _quantized_squeezenet_exact(q, x, qref)
    why = "7-bit weights (exact integer products); the float average and softmax at the end: float32 rounding"
    mod = ir.load(str(q))
    ort_quantized(str(q), {name: x}, exact, ir.evaluate(mod, x), bound=1e-6, passhost_tol=1e-6, why=why)
    ops = _o3_and_save(mod, tmp_path / "out.onnx")
    out = str(tmp_path / "out.onnx")
    ort_quantized(out, {name: x}, exact, ir.evaluate(ir.load(out), x), bound=1e-6, passhost_tol=1e-6, why=why)
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
    """Each com.microsoft quantized operator the QOperator quantizer writes, each reading
    the two quantized inputs (so that no operator reads another's rounding)."""
    rng = np.random.default_rng(5)

    def c(name, value):
        return numpy_helper.from_array(value, name)

    inits = [c("xs", np.array(0.03, np.float32)), c("xz", np.uint8(120)),
             c("rs", np.array(0.04, np.float32)), c("rz", np.uint8(125)),
             c("as", np.array(0.05, np.float32)), c("az", np.uint8(128)),
             c("ms", np.array(0.08, np.float32)), c("mz", np.uint8(110)),
             c("ss", np.array(1 / 256, np.float32)), c("sz", np.uint8(0)),
             c("ls", np.array(0.04, np.float32)), c("lz", np.uint8(100)),
             c("ps", np.array(0.0347, np.float32)), c("pz", np.uint8(125)),
             c("gw", rng.integers(-64, 65, (6, 72)).astype(np.int8)),
             c("gws", rng.uniform(0.005, 0.02, 6).astype(np.float32)), c("gwz", np.zeros(6, np.int8)),
             c("gb", rng.integers(-500, 500, 6).astype(np.int32)),
             c("gs", np.array(0.1, np.float32)), c("gz", np.uint8(130)),
             c("cs", np.array(0.05, np.float32)), c("cz", np.uint8(127))]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["q"]),
        helper.make_node("QuantizeLinear", ["y", "rs", "rz"], ["r"]),
        helper.make_node("QLinearAdd", ["q", "xs", "xz", "r", "rs", "rz", "as", "az"], ["a"], domain=_MS),
        helper.make_node("QLinearMul", ["q", "xs", "xz", "r", "rs", "rz", "ms", "mz"], ["m"], domain=_MS),
        helper.make_node("QLinearSigmoid", ["q", "xs", "xz", "ss", "sz"], ["s"], domain=_MS),
        helper.make_node("QLinearLeakyRelu", ["r", "rs", "rz", "ls", "lz"], ["l"], domain=_MS, alpha=0.1),
        helper.make_node("QLinearConcat", ["cs", "cz", "q", "xs", "xz", "r", "rs", "rz"], ["cat"], domain=_MS,
                         axis=1),
        helper.make_node("QLinearAveragePool", ["q", "xs", "xz", "ps", "pz"], ["p"], domain=_MS,
                         kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("QLinearGlobalAveragePool", ["r", "rs", "rz", "ps", "pz"], ["g"], domain=_MS,
                         channels_last=0),
        helper.make_node("Flatten", ["q"], ["qf"]),
        helper.make_node("QGemm", ["qf", "xs", "xz", "gw", "gws", "gwz", "gb", "gs", "gz"], ["out"], domain=_MS,
                         transB=1),
        helper.make_node("QGemm", ["qf", "xs", "xz", "gw", "gws", "gwz"], ["f"], domain=_MS, transB=1,
                         alpha=0.5),
    ]
    u8 = TensorProto.UINT8
    outputs = [("a", u8, [1, 2, 6, 6]), ("m", u8, [1, 2, 6, 6]), ("s", u8, [1, 2, 6, 6]), ("l", u8, [1, 2, 6, 6]),
               ("cat", u8, [1, 4, 6, 6]), ("p", u8, [1, 2, 3, 3]), ("g", u8, [1, 2, 1, 1]), ("out", u8, [1, 6]),
               ("f", TensorProto.FLOAT, [1, 6])]
    graph = helper.make_graph(nodes, "contrib", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, 6, 6])
                                                 for n in ("x", "y")],
                              [helper.make_tensor_value_info(*o) for o in outputs], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(_MS, 1)])


#: float32 roundings a value ONNX defines through a transcendental or a mean may carry: the
#: exact answer must keep it farther than that from a rounding tie (``qref.quantize``)
_ULPS = 16


def _contrib_exact(model, x, y, qref):
    """Each operator's definition (com.microsoft's documentation): its float operator on the
    dequantized inputs, quantized; add, multiply, leaky relu and concat in float32 (each
    one IEEE operation, so exact), the sigmoid and the means in float64 with no value
    near a tie; QGemm the exact integer product, requantized (or dequantized for ``f``)."""
    k = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    q, r = qref.quantize(x, k["xs"], k["xz"]), qref.quantize(y, k["rs"], k["rz"])
    dq, dr = qref.dequantize(q, k["xs"], k["xz"]), qref.dequantize(r, k["rs"], k["rz"])
    windows = np.lib.stride_tricks.sliding_window_view(dq.astype(np.float64), (2, 2), axis=(2, 3))[:, :, ::2, ::2]
    acc = qref.matmul_integer(q.reshape(1, -1), k["gw"].T, k["xz"], k["gwz"]).astype(np.int64)
    product = qref.multiplier(k["xs"], k["gws"], np.float32(1))
    return [qref.quantize(dq + dr, k["as"], k["az"]),
            qref.quantize(dq * dr, k["ms"], k["mz"]),
            qref.quantize(1 / (1 + np.exp(-dq.astype(np.float64))), k["ss"], k["sz"], ulps=_ULPS),
            qref.quantize(np.where(dr < 0, dr * np.float32(0.1), dr), k["ls"], k["lz"]),
            qref.quantize(np.concatenate([dq, dr], axis=1), k["cs"], k["cz"]),
            qref.quantize(windows.mean(axis=(-2, -1)), k["ps"], k["pz"], ulps=_ULPS),
            qref.quantize(dr.astype(np.float64).mean(axis=(2, 3), keepdims=True), k["ps"], k["pz"], ulps=_ULPS),
            qref.requantize(acc + k["gb"], qref.multiplier(k["xs"], k["gws"], k["gs"]), k["gz"], axis=-1),
            acc.astype(np.float32) * (product * np.float32(0.5))]


def test_onnxruntimes_quantized_contrib_operators_import_with_their_definitions(tmp_path, ort_quantized, qref):
    """com.microsoft QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu,
    QLinearConcat, QLinearAveragePool, QLinearGlobalAveragePool and QGemm (requantized, and
    with a float output): each is its float operator between a dequantize and a quantize;
    passhost gives that definition exactly, before and after -O3 and an export to standard
    ONNX, and onnxruntime within one quantization step (it computes some in fixed point or
    with tables)."""
    model = _contrib_model()
    src = tmp_path / "contrib.onnx"
    onnx.save(model, str(src))
    rng = np.random.default_rng(2)
    feeds = {"x": rng.uniform(-3, 3, (1, 2, 6, 6)).astype(np.float32),
             "y": rng.uniform(-3, 3, (1, 2, 6, 6)).astype(np.float32)}
    exact = _contrib_exact(model, feeds["x"], feeds["y"], qref)
    # each quantized output is one rounding of a value onnxruntime computes within float32
    # error of the exact one (other operation order, a table, fixed point), so it can land
    # on the other side of a tie: one step; f, a float product of an exact integer, within
    # a few float32 roundings (its scales multiplied in another order)
    bound = [1] * 8 + [np.abs(exact[8]) * 2.0 ** -20]
    why = "one rounding of a value computed in another float32 order, or from a table"
    mod = ir.load(str(src))
    ort_quantized(str(src), feeds, exact, ir.evaluate(mod, *feeds.values()), bound=bound, why=why)
    ops = _o3_and_save(mod, tmp_path / "out.onnx")
    out = str(tmp_path / "out.onnx")
    assert not any(n.domain for n in onnx.load(out).graph.node)
    # (the two QGemm share one integer product: EliminateCommonSubexpr merged them)
    assert ops["MatMulInteger"] == 1 and "Sigmoid" in ops and "Concat" in ops
    # the export's own float operators (Sigmoid, AveragePool) in onnxruntime: the same bound
    ort_quantized(out, feeds, exact, ir.evaluate(ir.load(out), *feeds.values()), bound=bound, why=why)


def test_a_fully_quantized_squeezenet_imports_and_runs_with_the_definitions_numbers(zoo, tmp_path, ort_quantized,
                                                                                    qref):
    """onnxruntime's QOperator quantizer on every operator type (7-bit weights):
    QLinearConv, and the com.microsoft QLinearConcat, QLinearGlobalAveragePool and
    QLinearSoftmax. passhost gives ONNX's definition of each exactly, before and after -O3
    and the export."""
    q, name, rng = _ort_quantized_squeezenet(zoo, tmp_path, reduce_range=True)
    model = onnx.load(str(q))
    original = collections.Counter((n.domain, n.op_type) for n in model.graph.node)
    assert original[(_MS, "QLinearConcat")] == 8 and original[(_MS, "QLinearGlobalAveragePool")] == 1
    # The quantizer's QLinearSoftmax runs along the last axis, of length 1: every output is
    # the same whatever the network computes. The pooled scores before it are the
    # network's answer, so they are an output too.
    pool = next(n for n in model.graph.node if n.op_type == "QLinearGlobalAveragePool")
    model.graph.output.append(helper.make_tensor_value_info(pool.output[0], TensorProto.INT8, [1, 1000, 1, 1]))
    onnx.save(model, str(q))
    x = rng.uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)
    exact = _quantized_squeezenet_exact(q, x, qref)
    assert len(np.unique(exact[1])) > 10
    # The pooled scores are int8 steps, the softmax's output steps of 1/256. onnxruntime
    # computes the concats and the average in fixed point: each may round a value a step
    # the other way, and a step in a concat goes on through the next convolutions. Not
    # derived: STEPS held on AVX-512 VNNI and on AVX2 (emulated).
    why = "QLinearConcat/GlobalAveragePool in fixed point, a step carried through the following layers"
    bound = [0, 1]
    mod = ir.load(str(q))
    ort_quantized(str(q), {name: x}, exact, ir.evaluate(mod, x), bound=bound, why=why)
    ops = _o3_and_save(mod, tmp_path / "out.onnx")
    assert ops["QLinearConv"] == 26 and ops["Concat"] == 8
    out = str(tmp_path / "out.onnx")
    ort_quantized(out, {name: x}, exact, ir.evaluate(ir.load(out), x), bound=bound, why=why)


@pytest.mark.parametrize("op, attrs", [("QLinearGlobalAveragePool", {}),
                                       ("QLinearAveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]})])
def test_channels_last_quantized_pooling_gives_the_definitions_numbers(op, attrs, tmp_path, ort_quantized, qref):
    # (scales 0.05 and 0.0437: with 0.04 a mean of 20 values over 0.04 would land on exact
    # halves, whose rounding ONNX leaves to float error)
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "s"), numpy_helper.from_array(np.uint8(7), "z"),
             numpy_helper.from_array(np.array(0.0437, np.float32), "ys"), numpy_helper.from_array(np.uint8(3), "yz")]
    out_shape = [1, 1, 1, 3] if op == "QLinearGlobalAveragePool" else [1, 5, 4, 3]
    graph = helper.make_graph(
        [helper.make_node(op, ["x", "s", "z", "ys", "yz"], ["y"], domain=_MS, channels_last=1, **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 5, 4, 3])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, out_shape)], initializer=inits)
    src = tmp_path / "pool.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(_MS, 1)]),
              str(src))
    x = np.random.default_rng(4).integers(0, 256, (1, 5, 4, 3)).astype(np.uint8)
    v = qref.dequantize(x, 0.05, np.uint8(7)).astype(np.float64)  # NHWC
    if op == "QLinearGlobalAveragePool":
        mean = v.mean(axis=(1, 2), keepdims=True)
    else:  # 3 x 3 windows, the padding not counted (count_include_pad=0)
        padded = np.pad(v, ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=np.nan)
        windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))
        mean = np.nanmean(windows, axis=(-2, -1))
    exact = qref.quantize(mean, 0.0437, np.uint8(3), axis=-1, ulps=_ULPS)
    got = ir.evaluate(ir.load(str(src)), x)
    ort_quantized(str(src), {"x": x}, [exact], [got], bound=1,
                  why="an integer sum times a float32 multiplier in onnxruntime, one rounding: a step at a tie")


def _reference_with_exact_quantization(model, feeds, qref) -> list:
    """``model`` run by ONNX's reference evaluator (``onnx.reference``), its
    DynamicQuantizeLinear, MatMulInteger and DequantizeLinear (the last missing there at
    opset 13) by ``qref``."""
    from onnx.reference import ReferenceEvaluator
    from onnx.reference.op_run import OpRun

    class DynamicQuantizeLinear(OpRun):
        op_domain = ""

        def _run(self, x):
            return qref.dynamic_quantize(x)

    class MatMulInteger(OpRun):
        op_domain = ""

        def _run(self, a, b, a_zero=None, b_zero=None):
            zero = np.zeros((), np.int64)
            return (qref.matmul_integer(a, b, zero if a_zero is None else a_zero,
                                        zero if b_zero is None else b_zero),)

    class DequantizeLinear(OpRun):
        op_domain = ""

        def _run(self, x, scale, zero=None, axis=None, block_size=None, output_dtype=None):
            return (qref.dequantize(x, scale, np.zeros((), x.dtype) if zero is None else zero, 1 if axis is None
                                    else axis),)

    evaluator = ReferenceEvaluator(model, new_ops=[DynamicQuantizeLinear, MatMulInteger, DequantizeLinear])
    return evaluator.run(None, feeds)


def test_a_dynamically_quantized_bert_keeps_its_integer_products(tmp_path, ort_quantized, qref):
    """``onnxruntime.quantization.quantize_dynamic``, the usual int8 path for transformers:
    DynamicQuantizeLinear (its ONNX function body), MatMulInteger with int8 weights (7 bits,
    ``reduce_range``). The import, -O3 and export give ONNX's numbers (its reference
    evaluator, the quantization exact), and every MatMulInteger survives with its int8
    weight."""
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
                                      weight_type=quantization.QuantType.QInt8, reduce_range=True)
    q = onnx.load(str(tmp_path / "q.onnx"))
    integer = sum(n.op_type == "MatMulInteger" for n in q.graph.node)
    assert integer == 12
    rng = np.random.default_rng(0)
    feeds = {vi.name: rng.integers(0, 100, [d.dim_value for d in vi.type.tensor_type.shape.dim]).astype(np.int64)
             for vi in q.graph.input}
    exact = _reference_with_exact_quantization(q, feeds, qref)
    # Between the exact integer products run float operators (layer norms, softmax, Erf,
    # the float MatMuls of attention) that ONNX defines only up to rounding and that each
    # runtime sums and approximates in its own order: rtol and atol 1e-5. (A float
    # difference that moved a DynamicQuantizeLinear rounding tie would move one activation
    # a step, far more; none does on these inputs, on AVX-512 VNNI or AVX2.)
    tol = [1e-5 + 1e-5 * np.abs(e) for e in exact]
    why = "float operators between the exact integer products, each runtime's own summation order"
    mod = ir.load(str(tmp_path / "q.onnx"))
    ort_quantized(str(tmp_path / "q.onnx"), feeds, exact, ir.evaluate(mod, *feeds.values()), bound=tol,
                  passhost_tol=tol, why=why)
    ops = _o3_and_save(mod, tmp_path / "out.onnx")
    assert ops["MatMulInteger"] == integer
    out = onnx.load(str(tmp_path / "out.onnx"))
    int8_weights = [t for t in out.graph.initializer if t.data_type == TensorProto.INT8 and len(t.dims) == 2]
    assert len(int8_weights) == integer
    ort_quantized(str(tmp_path / "out.onnx"), feeds, exact,
                  ir.evaluate(ir.load(str(tmp_path / "out.onnx")), *feeds.values()), bound=tol, passhost_tol=tol,
                  why=why)


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
def test_a_1d_quantized_convolution_goes_through_the_2d_operator(op, tmp_path, ort_quantized, qref):
    """Conv1d of an int8 audio model: the length axis becomes the width of a height-1
    image, as for the float Conv. Its int8 weights span [-127, 127], so onnxruntime's
    kernels may saturate without VNNI: it is held to the bound derived for each element."""
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
    x2, w2, pads = x[:, :, None, :], w[:, :, None, :], (0, 2, 0, 2)
    cols = qref.im2col(x2, (1, 5), pads, (1, 2), 120)
    if op == "QLinearConv":
        exact = qref.qlinear_conv(x2, 0.05, np.uint8(120), w2, 0.01, np.int8(0), 0.2, np.uint8(128), pads=pads,
                                  strides=(1, 2))
        bound = qref.u8s8_saturation_bound(cols, w.reshape(4, -1), qref.multiplier(0.05, 0.01, 0.2))
    else:
        exact = qref.conv_integer(x2, w2, np.uint8(120), np.int8(0), pads=pads, strides=(1, 2))
        bound = qref.u8s8_saturation_bound(cols, w.reshape(4, -1))
    exact, bound = exact.reshape(1, 4, 8), bound.reshape(1, 4, 8)
    assert bound.any()  # (some products may saturate: the bound is not vacuous)
    why = "int16 saturation of u8 x s8 pairs without VNNI (qref.u8s8_saturation_bound)"
    mod = ir.load(str(src))
    ort_quantized(str(src), {"x": x}, [exact], [ir.evaluate(mod, x)], bound=bound, why=why, saturates=True)
    ops = _o3_and_save(mod, tmp_path / "out.onnx")
    assert ops[op] == 1
    out = str(tmp_path / "out.onnx")
    ort_quantized(out, {"x": x}, [exact], [ir.evaluate(ir.load(out), x)], bound=bound, why=why, saturates=True)
