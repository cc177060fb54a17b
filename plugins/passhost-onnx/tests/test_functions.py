"""ONNX functions at import: schema function bodies and the model's local functions."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from passhost import ir
from passhost.errors import FormatError
from passhost_onnx.importer import from_onnx


def _f(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _scaled_relu_function(domain="my.lib"):
    """``ScaledRelu(x; alpha=2.0) = Relu(x) * alpha``, and ``Twice(x) = ScaledRelu(ScaledRelu(x))``
    with alpha passed through from Twice's own attribute."""
    alpha = helper.make_node("Constant", [], ["a"])
    ref = onnx.AttributeProto()
    ref.name, ref.ref_attr_name, ref.type = "value_float", "alpha", onnx.AttributeProto.FLOAT
    alpha.attribute.append(ref)
    scaled = helper.make_function(
        domain, "ScaledRelu", ["x"], ["y"],
        [helper.make_node("Relu", ["x"], ["r"]), alpha, helper.make_node("Mul", ["r", "a"], ["y"])],
        [helper.make_opsetid("", 17)], attributes=[])
    scaled.attribute_proto.append(helper.make_attribute("alpha", 2.0))
    twice = helper.make_function(
        domain, "Twice", ["x"], ["y"],
        [helper.make_node("ScaledRelu", ["x"], ["t"], domain=domain),
         helper.make_node("ScaledRelu", ["t"], ["y"], domain=domain)],
        [helper.make_opsetid("", 17), helper.make_opsetid(domain, 1)], attributes=[])
    twice_ref = onnx.AttributeProto()
    twice_ref.name, twice_ref.ref_attr_name, twice_ref.type = "alpha", "alpha", onnx.AttributeProto.FLOAT
    twice.node[1].attribute.append(twice_ref)  # the second one takes Twice's alpha, the first its default
    return [scaled, twice]


def test_local_functions_are_expanded_with_their_attributes_and_defaults(tmp_path, ort_run):
    graph = helper.make_graph([helper.make_node("Twice", ["x"], ["y"], domain="my.lib", name="twice0", alpha=3.0)],
                              "g", [_f("x", [4])], [_f("y", [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("my.lib", 1)],
                              functions=_scaled_relu_function())
    onnx.checker.check_model(model)
    path = tmp_path / "f.onnx"
    onnx.save(model, str(path))
    mod = ir.load(str(path), inline_functions=True)
    x = np.array([-1.0, 0.5, 2.0, -3.0], np.float32)
    want = np.maximum(np.maximum(x, 0) * 2.0, 0) * 3.0
    np.testing.assert_allclose(ir.evaluate(mod, x), want)
    ops = [n.op.name for n in ir.post_order(mod["main"]) if isinstance(n, ir.Call)]
    assert ops.count("nn.relu") == 2 and ops.count("multiply") == 2
    # every node of the expansion is named after the model's node it came from
    assert {n.span.name for n in ir.post_order(mod["main"]) if isinstance(n, ir.Call)} == {"twice0"}
    ir.save(mod, str(tmp_path / "out.onnx"))
    # (exact by construction: a relu and products by 2 and 3, each one IEEE operation)
    out, = ort_run(str(tmp_path / "out.onnx"), {"x": x})
    np.testing.assert_allclose(out, want)
    original, = ort_run(str(path), {"x": x})
    np.testing.assert_allclose(original, want)


def test_a_local_function_that_calls_itself_is_an_error_not_a_hang():
    loop = helper.make_function("my.lib", "Loop1", ["x"], ["y"],
                                [helper.make_node("Loop1", ["x"], ["y"], domain="my.lib")],
                                [helper.make_opsetid("my.lib", 1)])
    graph = helper.make_graph([helper.make_node("Loop1", ["x"], ["y"], domain="my.lib", name="l")],
                              "g", [_f("x", [2])], [_f("y", [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("my.lib", 1)],
                              functions=[loop])
    with pytest.raises(FormatError, match=r"Loop1 node 'l': its function bodies nest more than 32 deep"):
        from_onnx(model)


def test_a_function_body_using_an_unsupported_operator_names_the_models_node():
    body = helper.make_function("my.lib", "Odd", ["x"], ["y"], [helper.make_node("Det", ["x"], ["y"])],
                                [helper.make_opsetid("", 17)])
    graph = helper.make_graph([helper.make_node("Odd", ["x"], ["y"], domain="my.lib", name="odd0")],
                              "g", [_f("x", [2, 2])], [_f("y", [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("my.lib", 1)],
                              functions=[body])
    with pytest.raises(FormatError, match=r"Odd node 'odd0': its function body uses Det \(opset 17\), which "
                                          r"passhost has no converter for"):
        from_onnx(model)


def test_an_operator_defined_by_a_schema_function_is_not_unsupported_and_runs():
    """RotaryEmbedding (opset 23) has no converter: its schema's body is imported instead."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)    # (batch, heads, sequence, head size)
    cos = rng.standard_normal((5, 2)).astype(np.float32)    # (positions, head size / 2), read at pos
    sin = rng.standard_normal((5, 2)).astype(np.float32)
    pos = np.array([[4, 0, 2]], np.int64)
    graph = helper.make_graph(
        [helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"], name="rope")], "g",
        [_f("x", [1, 2, 3, 4]), _f("cos", [5, 2]), _f("sin", [5, 2]),
         helper.make_tensor_value_info("pos", TensorProto.INT64, [1, 3])], [_f("y", [1, 2, 3, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    mod = from_onnx(model)
    from onnx.reference import ReferenceEvaluator

    want, = ReferenceEvaluator(model).run(None, {"x": x, "cos": cos, "sin": sin, "pos": pos})
    np.testing.assert_allclose(ir.evaluate(mod, x, cos, sin, pos), want, rtol=1e-6)


def test_an_expansions_names_never_take_a_name_of_the_model():
    """A model whose own tensors are named like an expansion's internals still imports right."""
    graph = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["ScaledRelu_1::r"]),
         helper.make_node("ScaledRelu", ["x"], ["y"], domain="my.lib", name="s"),
         helper.make_node("Add", ["y", "ScaledRelu_1::r"], ["z"])],
        "g", [_f("x", [3])], [_f("z", [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("my.lib", 1)],
                              functions=_scaled_relu_function()[:1])
    x = np.array([-1.0, 0.5, 2.0], np.float32)
    np.testing.assert_allclose(ir.evaluate(from_onnx(model), x), np.maximum(x, 0) * 2 - x)


def _block_model(shapes=((4, 8), (4, 8))):
    """``y = Block(Block(x, w1), w2)`` with ``Block(a, b) = Relu(MatMul(a, b))``, the weights
    initializers passed as arguments; a second graph input ``z`` of ``shapes[1]`` goes
    through its own Block call with ``w1``."""
    rng = np.random.default_rng(0)
    block = helper.make_function("my.lib", "Block", ["a", "b"], ["out"],
                                 [helper.make_node("MatMul", ["a", "b"], ["t"]), helper.make_node("Relu", ["t"], ["out"])],
                                 [helper.make_opsetid("", 17)])
    w1, w2 = (numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), n) for n in ("w1", "w2"))
    graph = helper.make_graph(
        [helper.make_node("Block", ["x", "w1"], ["h"], domain="my.lib", name="block0"),
         helper.make_node("Block", ["h", "w2"], ["y"], domain="my.lib", name="block1"),
         helper.make_node("Block", ["z", "w1"], ["v"], domain="my.lib", name="block2")],
        "g", [_f("x", list(shapes[0])), _f("z", list(shapes[1]))], [_f("y", list(shapes[0])), _f("v", list(shapes[1]))],
        initializer=[w1, w2])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("my.lib", 1)],
                             functions=[block])


def _calls(mod, name="main"):
    return [n.op.name_hint for n in ir.post_order(mod[name]) if isinstance(n, ir.Call)
            and isinstance(n.op, ir.GlobalVar)]


def test_the_graphs_calls_of_a_local_function_import_as_calls_of_a_global_function(tmp_path):
    path = tmp_path / "blocks.onnx"
    onnx.save(_block_model(), str(path))
    mod = ir.load(str(path))
    assert sorted(gv.name_hint for gv in mod.functions) == ["Block", "main"]
    assert _calls(mod) == ["Block", "Block", "Block"]  # one function: the three bodies are equal
    block = mod["Block"]
    assert block.attrs["onnx.function"] == "my.lib::Block" and [p.name_hint for p in block.params] == ["a", "b"]
    assert [n.op.name for n in ir.post_order(block) if isinstance(n, ir.Call)] == ["transpose", "nn.dense", "nn.relu"]
    assert ir.parse(ir.astext(mod)) is not None
    flat = ir.load(str(path), inline_functions=True)
    assert [gv.name_hint for gv in flat.functions] == ["main"] and not _calls(flat)
    rng = np.random.default_rng(1)
    x, z = rng.standard_normal((4, 8)).astype(np.float32), rng.standard_normal((4, 8)).astype(np.float32)
    for a, b in zip(ir.evaluate(mod, x, z), ir.evaluate(flat, x, z)):
        np.testing.assert_array_equal(a, b)


def test_calls_with_other_argument_types_get_functions_of_their_own(tmp_path):
    path = tmp_path / "blocks.onnx"
    onnx.save(_block_model(((4, 8), (2, 8))), str(path))
    mod = ir.load(str(path))
    assert sorted(gv.name_hint for gv in mod.functions) == ["Block", "Block_1", "main"]
    assert mod["Block_1"].attrs["onnx.function"] == "my.lib::Block"
    assert sorted(_calls(mod)) == ["Block", "Block", "Block_1"]


def test_local_functions_come_back_as_functions_after_O3(tmp_path, ort_run):
    from passhost.cli import main

    src, dst = tmp_path / "blocks.onnx", tmp_path / "out.onnx"
    onnx.save(_block_model(((4, 8), (2, 8))), str(src))
    assert main(["run", str(src), "-O3", "-o", str(dst)]) == 0
    out = onnx.load(str(dst))
    onnx.checker.check_model(out, full_check=True)
    assert sorted((f.domain, f.name) for f in out.functions) == [("my.lib", "Block"), ("my.lib", "Block_1")]
    assert sorted((n.domain, n.op_type) for n in out.graph.node) == [("my.lib", "Block")] * 2 + [("my.lib", "Block_1")]
    assert {f.name: [n.op_type for n in f.node] for f in out.functions}["Block"] == ["MatMul", "Relu"]
    assert {t.name for t in out.graph.initializer} == {"w1", "w2"}  # the weights stay the graph's, by name
    rng = np.random.default_rng(2)
    feeds = {"x": rng.standard_normal((4, 8)).astype(np.float32), "z": rng.standard_normal((2, 8)).astype(np.float32)}
    for a, b in zip(ort_run(str(dst), feeds), ort_run(str(src), feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    flat = tmp_path / "flat.onnx"
    assert main(["run", str(src), "-O3", "--inline-functions", "-o", str(flat)]) == 0
    assert not onnx.load(str(flat)).functions


def test_a_kept_function_over_dynamic_axes_serves_every_size(tmp_path, ort_run):
    from passhost.cli import main

    src, dst = tmp_path / "blocks.onnx", tmp_path / "out.onnx"
    onnx.save(_block_model((("n", 8), ("n", 8))), str(src))
    assert main(["run", str(src), "-O3", "-o", str(dst)]) == 0
    out = onnx.load(str(dst))
    onnx.checker.check_model(out, full_check=True)
    assert [f.name for f in out.functions] == ["Block"]
    assert [d.dim_param for d in out.graph.input[0].type.tensor_type.shape.dim] == ["n", ""]
    rng = np.random.default_rng(3)
    for n in (1, 5):
        feeds = {k: rng.standard_normal((n, 8)).astype(np.float32) for k in ("x", "z")}
        for a, b in zip(ort_run(str(dst), feeds), ort_run(str(src), feeds)):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_a_kept_function_with_attributes_and_a_nested_call(tmp_path, ort_run):
    """``Twice`` (alpha=3) calls ``ScaledRelu`` twice: kept as one function, the nested calls
    and the attributes expanded into it."""
    graph = helper.make_graph([helper.make_node("Twice", ["x"], ["y"], domain="my.lib", name="twice0", alpha=3.0)],
                              "g", [_f("x", [4])], [_f("y", [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("my.lib", 1)],
                              functions=_scaled_relu_function())
    path = tmp_path / "f.onnx"
    onnx.save(model, str(path))
    mod = ir.load(str(path))
    assert _calls(mod) == ["Twice"] and sorted(gv.name_hint for gv in mod.functions) == ["Twice", "main"]
    x = np.array([-1.0, 0.5, 2.0, -3.0], np.float32)
    want = np.maximum(np.maximum(x, 0) * 2.0, 0) * 3.0
    np.testing.assert_allclose(ir.evaluate(mod, x), want)
    ir.save(mod, str(tmp_path / "out.onnx"))
    out = onnx.load(str(tmp_path / "out.onnx"))
    onnx.checker.check_model(out, full_check=True)
    assert [(f.domain, f.name) for f in out.functions] == [("my.lib", "Twice")]
    assert [(n.domain, n.op_type, n.name) for n in out.graph.node] == [("my.lib", "Twice", "twice0")]
    np.testing.assert_allclose(ort_run(str(tmp_path / "out.onnx"), {"x": x})[0], want)
