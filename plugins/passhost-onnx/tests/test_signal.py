"""DFT and STFT (passhost_onnx.convert_signal) against ONNX's reference implementation
(the interpreter) and onnxruntime (the exported model)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from passhost import ir
from passhost.errors import FormatError
from passhost_onnx import from_onnx, to_onnx


def _model(node, x_shape, inits=(), opset=17):
    g = helper.make_graph([node], "sig", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _ints(name, value):
    return numpy_helper.from_array(np.asarray(value, dtype=np.int64), name)


def _check(model, x, ort_run, export_opset=None):
    want, = ReferenceEvaluator(model).run(None, {"x": x})
    mod = from_onnx(model)
    scale = float(np.abs(want).max()) or 1.0
    np.testing.assert_allclose(ir.evaluate(mod, x), want, rtol=1e-5, atol=1e-5 * scale)
    out = to_onnx(mod, opset=export_opset or max(17, model.opset_import[0].version))
    onnx.checker.check_model(out)
    got, = ort_run(out.SerializeToString(), {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5 * scale)  # (onnxruntime's FFT is float32)


@pytest.mark.parametrize("shape,attrs,length", [
    ((2, 16, 1), {}, None),                              # a real signal, axis 1
    ((2, 16, 2), {}, None),                              # a complex one
    ((3, 10, 6, 1), {"axis": 2}, None),
    ((2, 16, 1), {"onesided": 1}, None),
    ((2, 12, 1), {}, 16),                                # padded with zeros
    ((2, 12, 2), {"inverse": 1}, 8),                     # cut, inverse
    ((2, 9, 2), {"inverse": 1, "onesided": 1}, None),    # a one-sided spectrum back to a real signal
    ((2, 5, 2), {"inverse": 1, "onesided": 1}, 7),
])
@pytest.mark.parametrize("opset", [17, 20])
def test_dft_matches_onnxs_reference_and_onnxruntime(shape, attrs, length, opset, ort_run):
    attrs = dict(attrs)
    inputs, inits = ["x"], []
    if length is not None:
        inputs.append("n")
        inits.append(_ints("n", length))
    if opset >= 20 and "axis" in attrs:
        inputs += [""] * (2 - len(inputs)) + ["axis"]
        inits.append(_ints("axis", attrs.pop("axis")))
    elif opset >= 20:
        attrs.pop("axis", None)
        inputs += [""] * (2 - len(inputs)) + ["axis"]
        inits.append(_ints("axis", 1))
    model = _model(helper.make_node("DFT", inputs, ["y"], **attrs), shape, inits, opset)
    x = np.random.default_rng(len(shape) + (length or 0)).standard_normal(shape).astype(np.float32)
    _check(model, x, ort_run, export_opset=opset)


@pytest.mark.parametrize("window,frame", [(True, None), (False, 16), (True, 12)])
def test_stft_matches_onnxs_reference_and_onnxruntime(window, frame, ort_run):
    inputs, inits = ["x", "step"], [_ints("step", 6)]
    if window:
        inputs.append("w")
        inits.append(numpy_helper.from_array(np.hanning(frame or 16).astype(np.float32), "w"))
    if frame is not None:
        inputs += [""] * (3 - len(inputs)) + ["frame"]
        inits.append(_ints("frame", frame))
    model = _model(helper.make_node("STFT", inputs, ["y"]), (2, 64, 1), inits)
    x = np.random.default_rng(3).standard_normal((2, 64, 1)).astype(np.float32)
    _check(model, x, ort_run)


def test_signal_errors_name_the_node(tmp_path):
    bad_axis = _model(helper.make_node("DFT", ["x"], ["y"], axis=2, name="f"), (2, 8, 1))
    with pytest.raises(FormatError, match=r"DFT node 'f' \(opset 17\): axis 2 is not a signal axis"):
        from_onnx(bad_axis)
    wide = _model(helper.make_node("DFT", ["x"], ["y"], name="f"), (2, 8, 3))
    with pytest.raises(FormatError, match=r"the signal's last axis must be 1 \(real\) or 2 \(complex\), got 3"):
        from_onnx(wide)
    x = ir.var("x", shape=(2, 8))
    mod = ir.IRModule.from_expr(ir.Function([x], ir.dft(x, x)))
    with pytest.raises(FormatError, match=r"dft needs ONNX opset 17 or later"):
        ir.save(mod, str(tmp_path / "d.onnx"), opset=16)


def test_an_stft_with_a_huge_declared_signal_is_an_error_not_an_allocation():
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 10 ** 6, 1])]
    inits = [_ints("step", 1), _ints("frame", 500_000)]
    node = helper.make_node("STFT", ["x", "step", "", "frame"], ["y"], name="spec")
    model = helper.make_model(helper.make_graph([node], "s", inputs, [helper.make_tensor_value_info(
        "y", TensorProto.FLOAT, None)], initializer=inits), opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(FormatError, match=r"STFT node 'spec' \(opset 17\): 500001 frames of 500000 samples are too many"):
        from_onnx(model)
