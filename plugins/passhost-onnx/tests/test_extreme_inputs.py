"""Activations, reductions and normalisations on inputs from -1000 to 1000 (and tiny ones):
passhost gives onnxruntime's outputs, infinities and all, on import and after ``-O3`` and
export.

The per-operator conformance cases use small inputs, where an overflow-prone decomposition
looks right. This sweep found two that did not: Softplus imported as ``log(exp(x) + 1)``
and ReduceLogSumExp as ``log(sum(exp(x)))``, both ``inf`` above 88.7 in float32.
"""
from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import passhost
from passhost import ir, transform

_ROW = [-1000, -300, -90, -20, -1, -1e-20, 0, 1e-20, 1, 20, 90, 300, 1000]
X = np.array([_ROW, _ROW[::-1]], np.float32)

CASES = [
    ("Sigmoid", {}, 13), ("Tanh", {}, 13), ("Softplus", {}, 13), ("Softsign", {}, 13), ("Elu", {}, 13),
    ("Selu", {}, 13), ("Celu", {}, 13), ("HardSigmoid", {}, 13), ("HardSwish", {}, 14), ("Mish", {}, 18),
    ("LogSoftmax", {"axis": 1}, 13), ("Softmax", {"axis": 1}, 13), ("Hardmax", {"axis": 1}, 13), ("Exp", {}, 13),
    ("Erf", {}, 13), ("Gelu", {}, 20), ("Gelu", {"approximate": "tanh"}, 20), ("ThresholdedRelu", {}, 13),
    ("LeakyRelu", {}, 13), ("ReduceLogSum", {"axes": [1]}, 13), ("ReduceLogSumExp", {"axes": [1]}, 13),
    ("ReduceLogSumExp", {"axes": [1], "keepdims": 0}, 13), ("ReduceL2", {"axes": [1]}, 13),
    ("ReduceSumSquare", {"axes": [1]}, 13), ("LpNormalization", {"axis": 1}, 13),
    ("MeanVarianceNormalization", {"axes": [1]}, 13), ("Reciprocal", {}, 13), ("Sqrt", {}, 13), ("Log", {}, 13),
    ("Cosh", {}, 13), ("Sinh", {}, 13), ("Asinh", {}, 13), ("Atan", {}, 13), ("Shrink", {"lambd": 1.0, "bias": 0.5}, 13),
]


def _label(case) -> str:
    op, attrs, _ = case
    return op + "".join(f"-{k}={v}" for k, v in attrs.items())


@pytest.mark.parametrize("case", CASES, ids=[_label(c) for c in CASES])
def test_extreme_inputs_give_onnxruntimes_outputs(case, tmp_path, ort_run):
    op, attrs, opset = case
    model = helper.make_model(helper.make_graph(
        [helper.make_node(op, ["x"], ["y"], **attrs)], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 13])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]), opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    src = tmp_path / "m.onnx"
    onnx.save(model, str(src))
    want = ort_run(str(src), {"x": X})[0]
    mod = ir.load(str(src))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (the reference itself overflows in numpy)
        got = ir.evaluate(mod, X)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)
    with transform.PassContext(opt_level=3):
        mod = passhost.default_pipeline(3)(mod)
    out = tmp_path / "out.onnx"
    ir.save(mod, str(out))
    np.testing.assert_allclose(ort_run(str(out), {"x": X})[0], want, rtol=1e-5, atol=1e-5, equal_nan=True)
