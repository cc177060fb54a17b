"""The import's direct evaluation of shape scaffolding (``shape_chain.shape_node``) gives
what the general way gives: the converter's call, typed, folded by ``fold_symbolic``.

Every Gather, Unsqueeze, Squeeze and Concat the fast path takes in the LLM corpus and two
dynamic PyTorch exports is also converted the general way, and the two results must be
structurally equal with equal types; and the fast path must take the plain forms it is for.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from passhost import ir
from passhost_onnx import importer, shape_chain
from passhost_onnx.node import Node

DATA = Path(__file__).parent / "data"
#: model -> the operators the fast path must take in it at least once
MODELS = {"llm/gpt2/model.onnx": {"Gather", "Unsqueeze", "Concat"},
          "llm/t5/decoder_with_past_model.onnx": {"Gather", "Unsqueeze", "Concat"},
          "torch/dynamic/decoder.dyn.ts17.onnx": {"Gather", "Unsqueeze", "Concat"},
          "torch/dynamic/causal_lm.dyn.dynamo.onnx": {"Concat"}}


def _general(n, op_type: str, inputs: list, opset: int) -> ir.Expr:
    """Node ``n`` the general way: its built-in converter, then _bind_outputs' typing and fold."""
    fn = importer.lookup(importer.BUILTIN, "", op_type, opset)
    node = Node(op_type, "", n.name, inputs, {a.name: importer._attr_value(a) for a in n.attribute},
                list(n.output), opset)
    out = fn(node)
    env: dict = {}
    importer._bind_outputs(n, out if isinstance(out, tuple) else (out,), inputs, importer._SHAPE, env, "test", None)
    return env[n.output[0]]


@pytest.mark.parametrize("path", sorted(MODELS))
def test_the_fast_path_gives_what_converting_and_folding_gives(path, monkeypatch):
    taken = []
    fast = shape_chain.shape_node

    def both(n, op_type, inputs, opset):
        got = fast(n, op_type, inputs, opset)
        if got is not None:
            want = _general(n, op_type, inputs, opset)
            assert ir.structural_equal(got, want), (n.name, got, want)
            assert got.checked_type == want.checked_type, (n.name, got.checked_type, want.checked_type)
            taken.append(op_type)
        return got

    monkeypatch.setattr(importer, "shape_node", both)
    ir.load(str(DATA / path))
    assert MODELS[path] <= set(taken)


def test_plain_forms_are_taken_and_others_go_the_general_way():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Constant", [], ["i1"], value=helper.make_tensor("i1", TensorProto.INT64, [], [1])),
        helper.make_node("Gather", ["s", "i1"], ["seq"], axis=0),
        helper.make_node("Constant", [], ["ax"], value=helper.make_tensor("ax", TensorProto.INT64, [1], [0])),
        helper.make_node("Unsqueeze", ["seq", "ax"], ["seq1"]),
        helper.make_node("Constant", [], ["rest"], value=helper.make_tensor("rest", TensorProto.INT64, [2], [2, 4])),
        helper.make_node("Concat", ["seq1", "rest"], ["target0"], axis=0),
        helper.make_node("Gather", ["s", "ax"], ["b1"], axis=0),  # a 1-D index: a vector
        helper.make_node("Concat", ["b1", "target0"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    seen = {}
    fast = shape_chain.shape_node

    def record(n, op_type, inputs, opset):
        seen[n.output[0]] = got = fast(n, op_type, inputs, opset)
        return got

    importer.shape_node, saved = record, importer.shape_node
    try:
        mod = importer.from_onnx(model)
    finally:
        importer.shape_node = saved
    assert all(seen[k] is not None for k in ("seq", "seq1", "target0", "b1", "target"))
    assert tuple(map(str, seen["target"].attrs["values"])) == ("batch", "seq", "2", "4")
    assert str(mod["main"].checked_type.ret_type) == "Tensor[(batch, seq, 2, 4), float32]"
    # an index out of range, an axis the fast path does not take: the general way (and its error)
    c = ir.infer_type(ir.Constant(np.array(5, dtype="int64")))
    sv = ir.infer_type(ir.shape_value([ir.size_var("batch"), 3], "int64"))
    gather = helper.make_node("Gather", ["s", "i"], ["o"], axis=0)
    assert shape_chain.shape_node(gather, "Gather", [sv, c], 17) is None
    concat = helper.make_node("Concat", ["a", "b"], ["o"], axis=1)
    assert shape_chain.shape_node(concat, "Concat", [sv, sv], 17) is None
