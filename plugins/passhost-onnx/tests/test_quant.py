"""QuantizeLinear / DequantizeLinear import as float arithmetic with ONNX's rounding and
saturation, and export so that onnxruntime gives the original model's numbers."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from passhost import ir
from passhost.errors import FormatError
from passhost_onnx.importer import from_onnx


def _qdq_model(qtype, axis_scales: bool, opset=13):
    c = 3
    scale = np.array([0.05, 0.1, 0.02], np.float32) if axis_scales else np.array(0.05, np.float32)
    zp_values = np.array([3, -2, 0]) if axis_scales else np.array(1)
    if qtype == TensorProto.UINT8:
        zp_values = zp_values + 120
    zp = zp_values.astype(helper.tensor_dtype_to_np_dtype(qtype))
    inits = [numpy_helper.from_array(scale, "s"), numpy_helper.from_array(zp, "zp")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], axis=1),
             helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], axis=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, c, 4]),
                               helper.make_tensor_value_info("q", qtype, [2, c, 4])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("qtype", [TensorProto.INT8, TensorProto.UINT8])
@pytest.mark.parametrize("axis_scales", [False, True])
def test_a_qdq_pair_gives_onnxruntimes_numbers(qtype, axis_scales, tmp_path, ort_run):
    model = _qdq_model(qtype, axis_scales)
    src = tmp_path / "qdq.onnx"
    onnx.save(model, str(src))
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((2, 3, 4)) * 8).astype(np.float32)
    x[0, 0, :3] = [0.025, 0.075, -0.025]  # halves of the scale: round to even
    x[1, 2, 0] = 1e6                         # saturates
    want_y, want_q = ort_run(str(src), {"x": x})
    mod = ir.load(str(src))
    got_y, got_q = ir.evaluate(mod, x)
    # (exact by construction: QuantizeLinear is one float32 division and a rounding, the
    # same on every instruction set; it is not among conftest's ISA_DEPENDENT kernels)
    np.testing.assert_array_equal(got_q, want_q)
    np.testing.assert_allclose(got_y, want_y, rtol=1e-6)
    ir.save(mod, str(tmp_path / "out.onnx"))
    out_y, out_q = ort_run(str(tmp_path / "out.onnx"), {"x": x})
    np.testing.assert_array_equal(out_q, want_q)
    np.testing.assert_allclose(out_y, want_y, rtol=1e-6)


def test_a_per_axis_scale_of_the_wrong_length_is_named():
    model = _qdq_model(TensorProto.INT8, True)
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 5
    for vi in model.graph.output:
        vi.type.tensor_type.shape.dim[1].dim_value = 5
    with pytest.raises(FormatError, match=r"QuantizeLinear node 'q' \(opset 13\): a per-axis scale or zero point "
                                          r"must have shape \(5,\) for axis 1, got \(3,\)"):
        from_onnx(model)


def test_a_qdq_convolution_keeps_its_pairs_and_int8_weights_through_o3(tmp_path, ort_run):
    """QuantizeLinear/DequantizeLinear are ``qnn.quantize``/``qnn.dequantize``: no pass folds
    them (TVM's FoldConstant leaves ``qnn.*`` alone, and so does the import), so the
    exported model still has the pairs a runtime turns into an int8 convolution, and its
    weights stay int8."""
    import passhost
    from passhost import transform

    rng = np.random.default_rng(0)
    w = rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    inits = [numpy_helper.from_array(np.array(0.02, np.float32), "s"), numpy_helper.from_array(np.uint8(128), "z"),
             numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.full(4, 0.01, np.float32), "ws"),
             numpy_helper.from_array(np.zeros(4, np.int8), "wz")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["dq"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"], axis=0),
             helper.make_node("Conv", ["dq", "wf"], ["c"]), helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])], initializer=inits)
    src = tmp_path / "qdq_conv.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(src))
    x = rng.uniform(-3, 3, (1, 3, 8, 8)).astype(np.float32)
    want = ort_run(str(src), {"x": x})[0]
    with transform.PassContext(opt_level=3):
        mod = passhost.default_pipeline(3)(ir.load(str(src)))
    ir.save(mod, str(tmp_path / "out.onnx"))
    out = onnx.load(str(tmp_path / "out.onnx"))
    assert [n.op_type for n in out.graph.node] == ["QuantizeLinear", "DequantizeLinear", "DequantizeLinear", "Conv",
                                                   "Relu"]
    weights = {tuple(t.dims): numpy_helper.to_array(t).dtype.name for t in out.graph.initializer}
    assert weights[(4, 3, 3, 3)] == "int8"  # the weight stays int8 behind its DequantizeLinear
    # (exact by construction: the same float operators on the same values, one thread)
    np.testing.assert_array_equal(ort_run(str(tmp_path / "out.onnx"), {"x": x})[0], want)
