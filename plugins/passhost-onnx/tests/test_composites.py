"""The export's composites (passhost_onnx.composites): passhost IR back to single ONNX operators."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

import passhost
from passhost import ir, transform
from passhost_onnx.composites import COMPOSITES, composite_parts


def _hard_sigmoid(x, alpha=0.2, beta=0.5):
    return ir.clip(ir.add(ir.multiply(x, ir.const(np.float32(alpha))), ir.const(np.float32(beta))), 0.0, 1.0)


def _export(body, params, tmp_path, opset=17, o3=False):
    mod = ir.IRModule.from_expr(ir.Function(params, body))
    if o3:
        with transform.PassContext(opt_level=3):
            mod = passhost.default_pipeline(3)(mod)
    out = tmp_path / "out.onnx"
    ir.save(mod, str(out), opset=opset)
    return mod, onnx.load(str(out))


def _same_numbers(mod, model, ort_run, *inputs):
    want = ir.evaluate(mod, *inputs)
    got = ort_run(model.SerializeToString(), {p.name_hint: v for p, v in zip(mod["main"].params, inputs)})
    for g, w in zip(got, [want] if isinstance(want, np.ndarray) else want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_a_composite_never_takes_a_value_the_graph_returns(tmp_path, ort_run):
    # the multiply-add inside the hard sigmoid is an output too: no HardSigmoid may hide it
    x = ir.var("x", shape=(2, 3))
    hs = _hard_sigmoid(x)
    mod, model = _export(ir.Tuple([hs, hs.args[0]]), [x], tmp_path)
    assert sorted(n.op_type for n in model.graph.node) == ["Add", "Clip", "Mul"]
    _same_numbers(mod, model, ort_run, np.linspace(-6, 6, 6, dtype="float32").reshape(2, 3))


def test_a_value_read_outside_stays_outside_the_composite(tmp_path, ort_run):
    # exp(x) is read by the softplus and by a multiply: the softplus is not taken
    x = ir.var("x", shape=(4,))
    e = ir.exp(x)
    sp = ir.log(ir.add(e, ir.const(np.float32(1))))
    mod, model = _export(ir.multiply(sp, e), [x], tmp_path)
    assert "Softplus" not in {n.op_type for n in model.graph.node}
    _same_numbers(mod, model, ort_run, np.linspace(-3, 3, 4, dtype="float32"))


def test_an_operator_fuse_ops_split_is_still_written_back(tmp_path, ort_run):
    # -O3 puts the softplus (also an output) and x * tanh(softplus) in two fused functions
    x = ir.var("x", shape=(8,))
    sp = ir.log(ir.add(ir.exp(x), ir.const(np.float32(1))))
    mod, model = _export(ir.Tuple([sp, ir.multiply(x, ir.tanh(sp))]), [x], tmp_path, opset=18, o3=True)
    assert sorted(n.op_type for n in model.graph.node) == ["Mish", "Softplus"]
    _same_numbers(mod, model, ort_run, np.linspace(-4, 4, 8, dtype="float32"))


def test_a_matmul_of_two_inputs_comes_back_as_one_matmul(tmp_path, ort_run):
    # MatMul(a, b) of a 2-D b that is no constant imports as nn.dense(a, transpose(b)): one
    # MatMul, not Transpose + Gemm(transB=1); a transpose read elsewhere stays
    a, b = ir.var("a", shape=(4, 5)), ir.var("b", shape=(5, 3))
    mod, model = _export(ir.nn.relu(ir.nn.dense(a, ir.transpose(b, axes=(1, 0)))), [a, b], tmp_path, o3=True)
    assert [n.op_type for n in model.graph.node] == ["MatMul", "Relu"]
    rng = np.random.default_rng(0)
    _same_numbers(mod, model, ort_run, rng.standard_normal((4, 5)).astype("float32"),
                  rng.standard_normal((5, 3)).astype("float32"))
    t = ir.transpose(b, axes=(1, 0))
    _, shared = _export(ir.Tuple([ir.nn.dense(a, t), t]), [a, b], tmp_path)
    assert "Transpose" in {n.op_type for n in shared.graph.node}


def test_a_group_norm_over_a_dynamic_size_comes_back_as_layer_normalization(tmp_path, ort_run):
    """PyTorch's dynamo exporter writes GroupNorm as a reshape to (N, G, -1) and a
    LayerNormalization of scale [1] and bias [0]: over a symbolic size the import spells it
    out (nn.layer_norm's gamma needs the axis' size) and FuseRMSNorm takes its centred
    tail; the export writes the one LayerNormalization back, not eight nodes."""
    from onnx import TensorProto, helper, numpy_helper

    one, zero = (numpy_helper.from_array(np.array([v], np.float32), n) for n, v in (("g", 1.0), ("b", 0.0)))
    groups = numpy_helper.from_array(np.array([0, 2, -1], np.int64), "groups")
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "groups"], ["r"]),
         helper.make_node("LayerNormalization", ["r", "g", "b"], ["n"], axis=2, epsilon=1e-5),
         helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Reshape", ["n", "s"], ["y"])],
        "gn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4, "h", "w"])], initializer=[one, zero, groups])
    src, dst = tmp_path / "gn.onnx", tmp_path / "gn.out.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(src))
    mod = ir.load(str(src))
    with transform.PassContext(opt_level=3):
        mod = passhost.default_pipeline(3)(mod)
    ir.save(mod, str(dst))
    ops = [n.op_type for n in onnx.load(str(dst)).graph.node]
    assert ops.count("LayerNormalization") == 1 and "ReduceMean" not in ops, ops
    rng = np.random.default_rng(0)
    for shape in ((1, 4, 3, 5), (2, 4, 6, 2)):
        x = {"x": rng.standard_normal(shape).astype(np.float32)}
        np.testing.assert_allclose(ort_run(str(dst), x)[0], ort_run(str(src), x)[0], rtol=1e-5, atol=1e-5)


def test_a_composite_with_other_constants_is_left_as_arithmetic(tmp_path):
    # multiply(x, hard_sigmoid(x)) is HardSwish only with alpha 1/6 and beta 1/2
    x = ir.var("x", shape=(2, 3))
    _, model = _export(ir.multiply(x, _hard_sigmoid(x, 0.25, 0.5)), [x], tmp_path)
    assert sorted(n.op_type for n in model.graph.node) == ["HardSigmoid", "Mul"]


def test_partition_walks_a_deep_chain_without_recursion():
    x = ir.var("x", shape=(2,))
    e = x
    for _ in range(100_000):
        e = ir.negative(e)
    root = ir.infer_type(_hard_sigmoid(e))
    assert [(p.tag.name, p.root) for p in composite_parts(root, 17).values()] == [("onnx.HardSigmoid", root)]


@pytest.mark.parametrize("c", COMPOSITES, ids=lambda c: c.name)
def test_every_composite_emitter_shows_its_form(c):
    # each emitter's docstring shows the IR it takes and the ONNX node it writes
    assert c.emit.__doc__ and "->" in c.emit.__doc__


def _rules():
    import passhost.passes

    return passhost.passes.rules("ONNXComposites")


def test_check_rules_checks_every_composite():
    # passhost check-rules ONNXComposites: each composite's ONNX node against the host operators
    from passhost.ir.pattern.soundness import check_rule

    rules = _rules()
    assert [r.name for r in rules] == [c.name for c in COMPOSITES if not c.target]
    for r in rules:
        report = check_rule(r, max_seconds=2.0, min_fired=5)
        assert report.sound is True, (r.name, str(report.counterexample))


def test_check_rules_finds_an_emitter_that_writes_the_wrong_numbers():
    import dataclasses

    from passhost.ir.pattern.soundness import check_rule
    from passhost_onnx.composite_rules import CompositeRule

    c = next(c for c in COMPOSITES if c.name == "onnx.HardSigmoid")
    wrong = dataclasses.replace(c, emit=lambda em, fn, args: em.one("HardSigmoid", args, alpha=0.2, beta=0.5))
    report = check_rule(CompositeRule(wrong), max_seconds=2.0)
    assert report.sound is False and "HardSigmoid" in report.counterexample.after


def test_a_transposed_convolutions_channel_bias_joins_it(tmp_path, ort_run):
    # ConvTranspose takes a bias as Conv does: one node, not ConvTranspose + Add
    rng = np.random.RandomState(0)
    x = ir.var("x", shape=(1, 4, 5, 5))
    w = ir.const(rng.randn(4, 3, 2, 2).astype("float32"))
    body = ir.nn.bias_add(ir.nn.conv2d_transpose(x, w, strides=(2, 2), channels=3, kernel_size=(2, 2)),
                          ir.const(rng.randn(3).astype("float32")))
    mod, model = _export(body, [x], tmp_path)
    assert [n.op_type for n in model.graph.node] == ["ConvTranspose"]
    _same_numbers(mod, model, ort_run, rng.randn(1, 4, 5, 5).astype("float32"))


def test_a_batched_product_of_one_three_d_operand_reshapes_only_that_operand(tmp_path, ort_run):
    # attention's probabilities times values kept 3-D: Reshape(v) + MatMul, not a Reshape
    # of the probabilities to 3-D, the MatMul and a Reshape of its result back to 4-D
    p, v = ir.var("p", shape=("batch", 4, 6, 6)), ir.var("v", shape=("4*batch", 6, 8))
    merged = ir.reshape(p, ("4*batch", 6, 6))
    body = ir.reshape(ir.nn.batch_matmul(merged, v, transpose_b=False), ("batch", 4, 6, 8))
    mod, model = _export(body, [p, v], tmp_path)
    assert [n.op_type for n in model.graph.node] == ["Reshape", "MatMul"]
    rng = np.random.RandomState(1)
    _same_numbers(mod, model, ort_run, rng.randn(3, 4, 6, 6).astype("float32"), rng.randn(12, 6, 8).astype("float32"))


def test_a_scale_and_shift_turned_off_write_nothing_for_their_run_time_size(tmp_path, ort_run):
    # FuseLayerNorm gives a layer norm without scale and shift ones and zeros of the axis'
    # size; over a size variable nothing reads them, so no Shape, Mul or ConstantOfShape
    # of theirs is written (and a Reshape target after it reads one whole Shape)
    x = ir.var("x", shape=("n", 8, "h", "w"))
    flat = ir.reshape(x, ("n", 2, "4*h*w"))
    size = ir.dims.parse_dim("4*h*w")
    norm = ir.nn.layer_norm(flat, ir.ones([size], "float32"), ir.zeros([size], "float32"), center=False, scale=False)
    body = ir.reshape(norm, ("n", 8, "h", "w"))
    mod, model = _export(body, [x], tmp_path, o3=True)
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("Shape") <= 1 and "ConstantOfShape" not in ops and "Mul" not in ops, ops
    _same_numbers(mod, model, ort_run, np.random.RandomState(2).randn(2, 8, 3, 5).astype("float32"))
