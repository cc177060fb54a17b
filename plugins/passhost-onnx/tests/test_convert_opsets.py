"""Converters at the older opsets ONNX's node cases no longer build (Slice and Pad with
attributes, Upsample, Resize-10, LogSoftmax's 2-D coercion), 1-D convolution and pooling
lifted to 2-D, and PRelu with a per-channel slope: onnxruntime on the original model is the
reference, for passhost's interpreter and for onnxruntime on the export."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from passhost import ir
from passhost_onnx import ConversionError, from_onnx, to_onnx


def _model(node, x_shape, y_shape, opset, inits=()):
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    return model


_W1 = np.random.RandomState(3).randn(4, 2, 3).astype("float32")

CASES = {
    "slice_attrs_opset9": (helper.make_node("Slice", ["x"], ["y"], starts=[1, -1], ends=[3, -100], axes=[1, 2]),
                           (2, 4, 5), None, 9, ()),
    "pad_attrs_opset2_reflect": (helper.make_node("Pad", ["x"], ["y"], pads=[0, 0, 1, 2, 0, 0, 2, 1],
                                                  mode="reflect"), (1, 2, 4, 5), None, 2, ()),
    "pad_attrs_opset10_value": (helper.make_node("Pad", ["x"], ["y"], pads=[0, 1, 0, 2], value=1.5),
                                (3, 4), None, 10, ()),
    "upsample_opset7_nearest": (helper.make_node("Upsample", ["x"], ["y"], scales=[1.0, 1.0, 2.0, 3.0]),
                                (1, 2, 3, 3), None, 7, ()),
    "upsample_opset9_linear": (helper.make_node("Upsample", ["x", "s"], ["y"], mode="linear"),
                               (1, 2, 3, 3), None, 9, (("s", np.asarray([1, 1, 2, 2], "float32")),)),
    "resize_opset10_nearest": (helper.make_node("Resize", ["x", "s"], ["y"]), (1, 2, 3, 4), None, 10,
                               (("s", np.asarray([1, 1, 2, 1.5], "float32")),)),
    "log_softmax_opset11_coerced": (helper.make_node("LogSoftmax", ["x"], ["y"], axis=1), (2, 3, 4), None, 11, ()),
    "conv_1d": (helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 2], strides=[2]), (1, 2, 9), None, 13,
                (("w", _W1),)),
    "conv_transpose_1d": (helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2], output_padding=[1]),
                          (1, 4, 5), None, 13, (("w", _W1),)),
    "max_pool_1d_ceil": (helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3], strides=[2], ceil_mode=1),
                         (1, 2, 8), None, 13, ()),
    "prelu_channel_slope": (helper.make_node("PRelu", ["x", "s"], ["y"]), (2, 3, 4, 4), None, 9,
                            (("s", np.asarray([[[0.1]], [[0.2]], [[0.3]]], "float32")),)),
    "argmax_int64": (helper.make_node("ArgMax", ["x"], ["y"], axis=-1, keepdims=0), (3, 4), None, 13, ()),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_converter_matches_onnxruntime(name, ort_run):
    node, x_shape, y_shape, opset, inits = CASES[name]
    model = _model(node, x_shape, y_shape, opset, inits)
    if name == "argmax_int64":
        model.graph.output[0].type.tensor_type.elem_type = TensorProto.INT64
    x = np.random.RandomState(0).randn(*x_shape).astype("float32")
    want = ort_run(model.SerializeToString(), {"x": x})[0]
    mod = from_onnx(model)
    got = ir.evaluate(mod, x)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ort_run(to_onnx(mod).SerializeToString(), {"x": x})[0], want, rtol=1e-5, atol=1e-5)


def test_prelu_with_channel_slope_becomes_nn_prelu():
    node, x_shape, y_shape, opset, inits = CASES["prelu_channel_slope"]
    assert "nn.prelu" in str(from_onnx(_model(node, x_shape, y_shape, opset, inits)))


def test_training_mode_dropout_is_refused_not_imported_as_identity():
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y"])
    model = _model(node, (2, 3), (2, 3), 13, (("r", np.asarray(0.5, "float32")), ("t", np.asarray(True))))
    with pytest.raises(ConversionError, match="training-mode Dropout"):
        from_onnx(model)
