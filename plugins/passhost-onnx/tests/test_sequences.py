"""ONNX sequence operators as tuples (passhost_onnx.convert_sequence), against onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from passhost import ir
from passhost.errors import FormatError
from passhost_onnx import from_onnx, to_onnx


def _ints(name, value):
    return numpy_helper.from_array(np.asarray(value, dtype=np.int64), name)


def _model(nodes, outputs, inits=(), shape=(2, 3)):
    g = helper.make_graph(nodes, "seq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info(o, t, None) for o, t in outputs], initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _check(model, x, ort_run):
    want = ort_run(model.SerializeToString(), {"x": x})
    mod = from_onnx(model)
    got = ir.evaluate(mod, x)
    got = [got] if isinstance(got, np.ndarray) else list(got)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    for g, w in zip(ort_run(to_onnx(mod).SerializeToString(), {"x": x}), want):
        np.testing.assert_allclose(g, w, rtol=1e-6)


@pytest.mark.parametrize("split,keepdims", [(None, 0), (None, 1), (2, 1), ([1, 3], 1)])
def test_split_at_insert_erase_length_and_concat(split, keepdims, ort_run):
    inits = [_ints("one", 1), _ints("neg", -1)]
    inputs = ["x"] + (["sp"] if split is not None else [])
    if split is not None:
        inits.append(_ints("sp", split))
    nodes = [helper.make_node("SplitToSequence", inputs, ["s"], axis=1, keepdims=keepdims),
             helper.make_node("SequenceAt", ["s", "one"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("SequenceInsert", ["s", "r", "neg"], ["s2"]),
             helper.make_node("SequenceErase", ["s2", "one"], ["s3"]),
             helper.make_node("SequenceLength", ["s3"], ["n"]),
             helper.make_node("ConcatFromSequence", ["s3"], ["y"], axis=-1, new_axis=int(not keepdims))]
    model = _model(nodes, [("y", TensorProto.FLOAT), ("n", TensorProto.INT64)], inits, shape=(2, 4))
    _check(model, np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32), ort_run)


def test_a_loop_appending_to_a_sequence_unrolls_into_a_growing_tuple(ort_run):
    # seq = []; for i in range(3): seq.append(x * i);  y = stack(seq)   (PyTorch's scripted list append)
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["f"], to=TensorProto.FLOAT), helper.make_node("Mul", ["x", "f"], ["xi"]),
         helper.make_node("SequenceInsert", ["seq_in", "xi"], ["seq_out"]),
         helper.make_node("Identity", ["c"], ["c_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_sequence_value_info("seq_in", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_sequence_value_info("seq_out", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("SequenceEmpty", [], ["empty"], dtype=TensorProto.FLOAT),
             helper.make_node("Loop", ["m", "t", "empty"], ["seq"], body=body),
             helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=0, new_axis=1)]
    model = _model(nodes, [("y", TensorProto.FLOAT)], [_ints("m", 3), numpy_helper.from_array(np.array(True), "t")])
    _check(model, np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32), ort_run)


def test_sequence_errors_name_the_node():
    nodes = [helper.make_node("SplitToSequence", ["x"], ["s"], axis=1),
             helper.make_node("SequenceAt", ["s", "five"], ["y"], name="at")]
    with pytest.raises(FormatError, match=r"SequenceAt node 'at' \(opset 17\): position 5 is outside a sequence of 3"):
        from_onnx(_model(nodes, [("y", TensorProto.FLOAT)], [_ints("five", 5)]))
    out = helper.make_model(helper.make_graph(
        [helper.make_node("SplitToSequence", ["x"], ["s"], axis=1)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)]),
        opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(FormatError, match=r"graph output 's' is a sequence"):
        from_onnx(out)
