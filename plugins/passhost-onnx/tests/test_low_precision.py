"""ONNX's BFLOAT16, FLOAT8* and INT4/UINT4 tensors in and out of passhost (issue 34 §2).

Weights of every type are read from a file (raw bytes viewed in place, or unpacked for
the 4-bit types) and written back (streamed by the writer, or held in the message by
``to_onnx``) bit for bit, int4 packed two a byte as ONNX packs them; ``Cast``'s
``saturate`` survives the round trip.
"""
from __future__ import annotations

import ml_dtypes  # noqa: F401  (numpy's names of the types)
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from passhost import ir
from passhost_onnx import from_onnx, to_onnx
from passhost_onnx.dtypes import pack4, raw_view, to_dtype, to_onnx_type, unpack4

TYPES = {
    TensorProto.BFLOAT16: "bfloat16", TensorProto.FLOAT8E4M3FN: "float8_e4m3fn",
    TensorProto.FLOAT8E4M3FNUZ: "float8_e4m3fnuz", TensorProto.FLOAT8E5M2: "float8_e5m2",
    TensorProto.FLOAT8E5M2FNUZ: "float8_e5m2fnuz", TensorProto.INT4: "int4", TensorProto.UINT4: "uint4",
}


def test_the_types_map_both_ways():
    for elem, name in TYPES.items():
        assert to_dtype(elem) == name
        assert to_onnx_type(name) == elem
        assert to_onnx_type(np.dtype(name)) == elem
        assert np.dtype(helper.tensor_dtype_to_np_dtype(elem)).name == name  # onnx's own numpy type


def _values(name: str, shape: tuple, rng) -> np.ndarray:
    if name == "int4":
        return rng.randint(-8, 8, size=shape).astype(name)
    if name == "uint4":
        return rng.randint(0, 16, size=shape).astype(name)
    return (rng.randn(*shape) * 10).astype(name)


@pytest.mark.parametrize("count", [1, 2, 7, 64])
def test_int4_packing_is_onnxs(count):
    rng = np.random.RandomState(count)
    for name in ("int4", "uint4"):
        arr = _values(name, (count,), rng)
        assert pack4(arr).tobytes() == numpy_helper.from_array(arr).raw_data
        back = unpack4(pack4(arr), count, name)
        assert back.dtype.name == name and np.array_equal(back.astype("int8"), arr.astype("int8"))
        tensor = numpy_helper.from_array(arr.reshape(1, count), "w")
        view = raw_view(tensor, tensor.raw_data)
        assert view.shape == (1, count) and not view.flags.writeable
        assert np.array_equal(view.astype("int8"), arr.reshape(1, count).astype("int8"))


def _model(rng) -> tuple:
    """A model joining a weight of every type to the input cast to that type (each weight
    is kept as it is: nothing folds it)."""
    inits, nodes, inputs, outputs, arrays = [], [], [], [], {}
    for elem, name in TYPES.items():
        shape = (3, 5) if name not in ("int4", "uint4") else (3, 7)  # (odd: a half-filled last byte)
        arr = _values(name, shape, rng)
        arrays[f"w_{name}"] = arr
        inits.append(numpy_helper.from_array(arr, f"w_{name}"))
        inputs.append(helper.make_tensor_value_info(f"x_{name}", TensorProto.FLOAT, list(shape)))
        nodes.append(helper.make_node("Cast", [f"x_{name}"], [f"c_{name}"], to=elem))
        nodes.append(helper.make_node("Concat", [f"c_{name}", f"w_{name}"], [f"y_{name}"], axis=0))
        outputs.append(helper.make_tensor_value_info(f"y_{name}", elem, [6, shape[1]]))
    graph = helper.make_graph(nodes, "low", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model, arrays


def test_weights_of_every_type_read_and_write_bit_for_bit(tmp_path):
    rng = np.random.RandomState(0)
    model, arrays = _model(rng)
    path = tmp_path / "low.onnx"
    onnx.save(model, str(path))
    mod = ir.load(str(path))  # the reader: raw bytes viewed, 4-bit types unpacked
    consts = {c.data.dtype.name: c.data for c in _constants(mod)}
    for name, arr in arrays.items():
        got = consts[name[2:]]
        assert got.tobytes() == arr.tobytes(), name
    xs = [(rng.randn(3, 7) * 4).astype("float32")[:, :arrays[n].shape[1]] for n in arrays]
    want = _reference(model, xs)
    got = ir.evaluate(mod, *xs)
    for g, w in zip(got, want):
        assert np.array_equal(np.asarray(g).astype("float64"), np.asarray(w).astype("float64"), equal_nan=True)
    for written in (_saved(mod, tmp_path / "out.onnx"), to_onnx(mod, opset=21)):  # the writer, the message
        onnx.checker.check_model(written)
        values = {t.name: numpy_helper.to_array(t) for t in written.graph.initializer}
        for name, arr in arrays.items():
            assert values[name].dtype == arr.dtype and values[name].tobytes() == arr.tobytes(), name


def _saved(mod, path):
    ir.save(mod, str(path), opset=21)
    return onnx.load(str(path))


def _constants(mod) -> list:
    found: list = []
    ir.post_order_visit(mod["main"], lambda e: found.append(e) if isinstance(e, ir.Constant) else None)
    return found


def _reference(model, xs):
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(model).run(None, {vi.name: x for vi, x in zip(model.graph.input, xs)})


@pytest.mark.parametrize("saturate", [0, 1, None])
def test_cast_to_float8_keeps_its_saturation(saturate):
    attrs = {} if saturate is None else {"saturate": saturate}
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E4M3FN, **attrs)
    graph = helper.make_graph([node], "c", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FN, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    mod = from_onnx(model)
    x = np.array([1e4, -np.inf, np.nan, 0.3], "float32")
    got = ir.evaluate(mod, x).astype("float32")
    assert (got[0] == 448) == (saturate != 0)
    out = to_onnx(mod, opset=21)
    cast = [n for n in out.graph.node if n.op_type == "Cast"][0]
    written = {a.name: helper.get_attribute_value(a) for a in cast.attribute}
    assert written.get("saturate", 1) == (0 if saturate == 0 else 1)


def test_bfloat16_converters_that_ask_for_a_types_range():
    """Clip with one bound (the other is the type's limit), MaxPool over a dynamic axis (the
    pad is the type's lowest value) and ``keep_params`` (bfloat16 weights are float weights)."""
    w = numpy_helper.from_array(np.array([0.5, -1, 2], "bfloat16"), "w")
    lo = numpy_helper.from_array(np.array(0, "bfloat16"), "lo")
    ax = numpy_helper.from_array(np.array([1], np.int64), "ax")
    nodes = [helper.make_node("Add", ["x", "w"], ["a"]), helper.make_node("Clip", ["a", "lo"], ["c"]),
             helper.make_node("Unsqueeze", ["c", "ax"], ["c3"]),
             helper.make_node("MaxPool", ["c3"], ["p"], kernel_shape=[2], pads=[1, 1])]
    graph = helper.make_graph(nodes, "b", [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, ["n", 3])],
                              [helper.make_tensor_value_info("p", TensorProto.BFLOAT16, ["n", 1, 4])], [w, lo, ax])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    x = np.array([[1, 2, -3], [-4, 0.25, 6]], "bfloat16")
    c = np.maximum(x.astype("float32") + np.array([0.5, -1, 2], "float32"), 0)  # (exact in bfloat16 here)
    padded = np.pad(c, ((0, 0), (1, 1)), constant_values=-np.inf)
    want = np.maximum(padded[:, :-1], padded[:, 1:])[:, None, :]
    got = ir.evaluate(from_onnx(model), x)
    assert got.dtype.name == "bfloat16" and np.array_equal(got.astype("float32"), want.astype("float32"))
    mod, params = from_onnx(model, keep_params=True)
    assert {"w", "lo"} <= set(params) and params["w"].dtype.name == "bfloat16"



#: (operator, input shapes, extra initializers, attributes) of the float16 kernel check
_FP16_CASES = [
    ("Softmax", [(64, 50)], [], {}), ("Tanh", [(64, 50)], [], {}), ("Exp", [(64, 50)], [], {}),
    ("Erf", [(64, 50)], [], {}), ("Sigmoid", [(64, 50)], [], {}), ("Gelu", [(64, 50)], [], {}),
    ("Div", [(64, 50), (64, 50)], [], {}), ("MatMul", [(32, 300), (300, 40)], [], {}),
    ("ReduceSum", [(64, 300)], [], {"keepdims": 0}), ("ReduceMean", [(64, 300)], [], {"keepdims": 0}),
    ("LayerNormalization", [(64, 50)], [("g", np.ones(50)), ("b", np.zeros(50))], {"epsilon": 1e-5}),
    ("Conv", [(1, 3, 16, 16), (4, 3, 3, 3)], [], {}), ("AveragePool", [(1, 3, 16, 16)], [], {"kernel_shape": [3, 3]}),
    ("CumSum", [(4, 300)], [("ax", np.array(1, np.int64))], {}),
]


@pytest.mark.parametrize("op,shapes,inits,attrs", _FP16_CASES, ids=[c[0] for c in _FP16_CASES])
def test_float16_kernels_round_as_onnxruntime_does(op, shapes, inits, attrs):
    """passhost's float16 result is onnxruntime's (CPU, optimisations off) on almost every
    element, and within two float16 steps on all: both compute in float32 and round once
    (Gelu: onnxruntime's is up to two steps off that; it is one operator in passhost)."""
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.RandomState(0)
    names = [f"i{k}" for k in range(len(shapes))]
    tensors = [numpy_helper.from_array(v if v.dtype == np.int64 else v.astype(np.float16), n) for n, v in inits]
    node = helper.make_node(op, names + [t.name for t in tensors], ["y"], **attrs)
    graph = helper.make_graph([node], "h", [helper.make_tensor_value_info(n, TensorProto.FLOAT16, s)
                                            for n, s in zip(names, shapes)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)], tensors)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    xs = [(rng.randn(*s) * 2).astype(np.float16) for s in shapes]
    want = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"]).run(
        None, dict(zip(names, xs)))[0]
    got = ir.evaluate(from_onnx(model), *xs)
    assert got.dtype == np.float16 and got.shape == want.shape
    assert np.mean(got == want) >= 0.98
    step = np.spacing(np.maximum(np.abs(want), np.float16(2 ** -14)))
    assert np.all(np.abs(got.astype(np.float64) - want) <= 2 * step.astype(np.float64))
