"""CombineParallelDense: dense layers on one input become one dense and a split."""
from __future__ import annotations

import numpy as np
import pytest

import passhost
from passhost import ir, transform

RNG = np.random.RandomState(0)


def _w(*shape):
    return ir.const(RNG.randn(*shape).astype("float32"))


def _run(params, body, inputs, **options):
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function(params, body)))
    want = ir.evaluate(mod, *inputs)
    out = passhost.passes.CombineParallelDense(**options)(mod)
    got = ir.evaluate(out, *inputs)
    for g, w in zip(got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want]):
        # (each column is the same dot product; a matrix kernel may sum it in another order)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    return out


def test_three_projections_of_one_input_become_one_dense_and_a_split():
    x = ir.var("x", shape=(2, 5, 8))
    q, k, v = (ir.nn.bias_add(ir.nn.dense(x, _w(n, 8)), _w(n), axis=-1) for n in (16, 4, 4))
    out = _run([x], ir.Tuple([q, k, v]), [RNG.randn(2, 5, 8).astype("float32")])
    assert ir.count_ops(out["main"]) == {"nn.dense": 1, "nn.bias_add": 1, "split": 1}
    split = out["main"].body.fields[0].tuple_value
    assert [int(i) for i in split.attrs.indices_or_sections] == [16, 20] and split.attrs.axis == 2
    assert split.args[0].args[0].args[1].data.shape == (24, 8)


def test_a_bias_is_joined_only_when_every_branch_has_one():
    x = ir.var("x", shape=(3, 8))
    a, b = ir.nn.bias_add(ir.nn.dense(x, _w(4, 8)), _w(4)), ir.nn.dense(x, _w(4, 8))
    out = _run([x], ir.Tuple([a, b, ir.nn.dense(x, _w(2, 8))]), [RNG.randn(3, 8).astype("float32")])
    assert ir.count_ops(out["main"]) == {"nn.dense": 1, "split": 1, "nn.bias_add": 1}
    assert out["main"].body.fields[0].op.name == "nn.bias_add"  # the one bias stays after the split


def test_fewer_branches_than_asked_or_other_inputs_stay_apart():
    x, y = ir.var("x", shape=(3, 8)), ir.var("y", shape=(3, 8))
    body = ir.Tuple([ir.nn.dense(x, _w(4, 8)), ir.nn.dense(x, _w(4, 8)), ir.nn.dense(y, _w(4, 8))])
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([x, y], body)))
    assert ir.count_ops(passhost.passes.CombineParallelDense()(mod)["main"]) == {"nn.dense": 3}
    out = _run([x, y], body, [RNG.randn(3, 8).astype("float32")] * 2, min_num_branches=2)
    assert ir.count_ops(out["main"]) == {"nn.dense": 2, "split": 1}


def test_a_computed_weight_is_not_combined():
    x, w = ir.var("x", shape=(3, 8)), ir.var("w", shape=(4, 8))
    body = ir.Tuple([ir.nn.dense(x, w), ir.nn.dense(x, _w(4, 8)), ir.nn.dense(x, _w(4, 8))])
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([x, w], body)))
    assert ir.count_ops(passhost.passes.CombineParallelDense()(mod)["main"]) == {"nn.dense": 3}


def test_to_batch_stacks_equal_weights_into_one_batch_matmul():
    x = ir.var("x", shape=(3, 8))
    body = ir.Tuple([ir.nn.dense(x, _w(4, 8)) for _ in range(3)])
    out = _run([x], body, [RNG.randn(3, 8).astype("float32")], to_batch=True)
    assert ir.count_ops(out["main"])["nn.batch_matmul"] == 1 and "nn.dense" not in ir.count_ops(out["main"])


def test_the_branches_may_read_a_symbolic_input():
    x = ir.var("x", shape=("batch", "seq", 8))
    body = ir.Tuple([ir.nn.dense(x, _w(n, 8)) for n in (8, 4, 4)])
    out = _run([x], body, [RNG.randn(2, 3, 8).astype("float32")])
    assert tuple(map(str, out["main"].body.fields[1].checked_type.shape)) == ("batch", "seq", "4")


def test_it_runs_from_o4_after_the_fusions_and_before_fuse_ops():
    # (TVM's opt_level 4: -O3 keeps each projection's weight and name)
    names = [p.info.name for p in passhost.default_pipeline(4).passes]
    assert names.index("EliminateCommonSubexpr") < names.index("CombineParallelDense") < names.index("FuseOps")
    x = ir.var("x", shape=(2, 8))
    mod = ir.IRModule.from_expr(ir.Function([x], ir.Tuple([ir.nn.dense(x, _w(4, 8)) for _ in range(3)])))
    for level, dense in ((3, 3), (4, 1)):
        with transform.PassContext(opt_level=level):
            out = passhost.default_pipeline(level)(mod)
        assert ir.count_ops(out["main"]).get("nn.dense") == dense, level


def test_a_joined_weight_is_named_after_the_first_branchs():
    x = ir.var("x", shape=(3, 8))
    ws = [_w(4, 8) for _ in range(3)]
    for w, name in zip(ws, ("q_proj.weight", "k_proj.weight", "v_proj.weight")):
        ir.set_span(w, ir.Span("model.onnx", name=name))
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([x], ir.Tuple([ir.nn.dense(x, w) for w in ws]))))
    out = passhost.passes.CombineParallelDense()(mod)
    dense = next(e for e in ir.post_order(out["main"]) if type(e) is ir.Call and e.op.name == "nn.dense")
    assert dense.args[1].span.name == "q_proj.weight_folded"


def test_bad_options_name_the_pass():
    with pytest.raises(passhost.errors.PipelineError, match="CombineParallelDense: min_num_branches must be"):
        passhost.passes.CombineParallelDense(min_num_branches=1)


def test_a_group_of_weights_larger_than_max_bytes_stays_apart():
    # (joining copies the weights: a model larger than memory keeps its own)
    x = ir.var("x", shape=(3, 8))
    body = ir.Tuple([ir.nn.dense(x, _w(4, 8)) for _ in range(3)])  # 3 * 128 bytes
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([x], body)))
    assert ir.count_ops(passhost.passes.CombineParallelDense(max_bytes=383)(mod)["main"]) == {"nn.dense": 3}
    assert ir.count_ops(passhost.passes.CombineParallelDense(max_bytes=384)(mod)["main"]) == {"nn.dense": 1, "split": 1}
