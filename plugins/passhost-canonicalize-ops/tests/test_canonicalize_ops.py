"""CanonicalizeOps: bias_add on every axis kind, the cases left alone, semantics on random
programs and a 100,000-deep chain."""
from __future__ import annotations

import sys

import pytest

import passhost
from passhost import ir
from passhost.testing import assert_semantics_preserved, check_pass, random_graph, random_inputs
from passhost.transform import PassContext, Sequential
from passhost_canonicalize_ops import CanonicalizeOps, canonicalize_ops


def test_registered_with_tvm_info_and_not_default():
    p = passhost.passes.CanonicalizeOps()
    assert p.info.name == "CanonicalizeOps" and p.info.opt_level == 3
    assert tuple(p.info.required) == ("InferType",)
    assert passhost.passes.info("CanonicalizeOps").distribution == "passhost-canonicalize-ops"
    names = [q.info.name for q in passhost.default_pipeline(3).passes]
    assert "CanonicalizeOps" not in names


@pytest.mark.parametrize("shape,axis,num_newaxis", [
    ((1, 4, 5, 5), 1, 2),     # NCHW: expand_dims(b, axis=1, num_newaxis=2)
    ((1, 5, 5, 4), 3, 0),     # NHWC: no expand_dims
    ((2, 4), -1, 0),          # dense output, negative axis
    ((4, 3, 2), 0, 2),
    ((3, 4, 2), -2, 1),
])
def test_bias_add_becomes_add(shape, axis, num_newaxis):
    x = ir.var("x", shape=shape)
    b = ir.var("b", shape=(shape[axis],))
    before = ir.Function([x, b], ir.nn.relu(ir.nn.bias_add(x, b, axis=axis)))
    bias = ir.expand_dims(b, axis=1, num_newaxis=num_newaxis) if num_newaxis else b
    out = check_pass(CanonicalizeOps(), before, ir.Function([x, b], ir.nn.relu(ir.add(x, bias))))
    assert "nn.bias_add" not in ir.count_ops(out["main"])


def test_nested_bias_adds_and_a_constant_bias():
    x = ir.var("x", shape=(1, 3, 2, 2))
    c = ir.const([1.0, 2.0, 3.0])
    inner = ir.nn.bias_add(x, c)
    before = ir.Function([x], ir.nn.bias_add(ir.exp(inner), c))
    e1 = ir.add(x, ir.expand_dims(c, 1, 2))
    expected = ir.Function([x], ir.add(ir.exp(e1), ir.expand_dims(c, 1, 2)))
    check_pass(CanonicalizeOps(), before, expected)


def test_result_is_typed_without_reinference():
    x = ir.var("x", shape=(1, 3, 2, 2))
    b = ir.var("b", shape=(3,))
    func = ir.infer_type(ir.Function([x, b], ir.nn.bias_add(x, b)))
    out = canonicalize_ops(func)
    assert out.body.has_type and out.body.args[1].has_type
    assert out.body.checked_type == ir.TensorType((1, 3, 2, 2), "float32")
    assert out.body.args[1].checked_type == ir.TensorType((3, 1, 1), "float32")


def test_unchanged_without_bias_add():
    x = ir.var("x", shape=(1, 3, 2, 2))
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([x], ir.add(x, ir.const(1.0)))))
    assert CanonicalizeOps()(mod)["main"] is mod["main"]
    check_pass(CanonicalizeOps(), ir.Function([x], ir.nn.relu(x)))


def test_runs_only_at_opt_level_3_in_a_sequential():
    x = ir.var("x", shape=(2, 3))
    b = ir.var("b", shape=(3,))
    mod = ir.IRModule.from_expr(ir.Function([x, b], ir.nn.bias_add(x, b, axis=1)))
    seq = Sequential([CanonicalizeOps()])
    with PassContext(opt_level=2):
        assert "nn.bias_add" in ir.count_ops(seq(mod)["main"])
    with PassContext(opt_level=3):
        assert "nn.bias_add" not in ir.count_ops(seq(mod)["main"])


@pytest.mark.parametrize("seed", range(200))
def test_random_programs_keep_their_meaning(seed):
    mod = random_graph(seed, num_nodes=20, lets=seed % 3 == 0, tuples=seed % 4 == 0)
    out = assert_semantics_preserved(CanonicalizeOps(), mod, random_inputs(mod, seed), rtol=1e-5, atol=1e-5)
    assert "nn.bias_add" not in ir.count_ops(out["main"])
    assert_types_match_fresh_inference(out)


def assert_types_match_fresh_inference(mod):
    """The pass types its new nodes itself; they must be what inference from scratch gives."""
    text = mod.astext(show_meta_data=True)
    assert all(n.has_type for n in ir.post_order(mod["main"]) if not isinstance(n, ir.Op))
    assert ir.infer_type(ir.parse(text)).astext(show_meta_data=True) == text


def test_deep_chain_at_default_recursion_limit():
    limit = sys.getrecursionlimit()
    x = ir.var("x", shape=(1, 2, 2))
    b = ir.var("b", shape=(2,))
    y = x
    for _ in range(100_000):
        y = ir.nn.bias_add(y, b)
    mod = ir.IRModule.from_expr(ir.Function([x, b], y))
    out = CanonicalizeOps()(mod)
    ops = ir.count_ops(out["main"])
    assert ops == {"add": 100_000, "expand_dims": 100_000}
    assert sys.getrecursionlimit() == limit
