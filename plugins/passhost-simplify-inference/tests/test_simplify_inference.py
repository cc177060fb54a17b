"""SimplifyInference: TVM's batch_norm test, layer/instance norm, dropout, the cases left
alone, semantics on random programs and a 100,000-deep chain."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import passhost
from passhost import ir
from passhost.testing import assert_semantics_preserved, check_pass, random_graph, random_inputs
from passhost.transform import PassContext, Sequential
from passhost_simplify_inference import SimplifyInference, simplify_inference

F32 = "float32"


def _simple_bn(x, gamma, beta, mean, var, axis, epsilon, shape, dtype=F32):
    """The expected unpacking, written as TVM's test writes it."""
    scale = ir.multiply(ir.divide(ir.const(1, dtype), ir.sqrt(ir.add(var, ir.const(epsilon, dtype)))), gamma)
    shift = ir.add(ir.multiply(ir.negative(mean), scale), beta)
    num_newaxis = len(shape) - (axis + 1)
    if num_newaxis:
        scale = ir.expand_dims(scale, axis=1, num_newaxis=num_newaxis)
        shift = ir.expand_dims(shift, axis=1, num_newaxis=num_newaxis)
    return ir.add(ir.multiply(x, scale), shift)


def test_registered_with_tvm_info():
    p = passhost.passes.SimplifyInference()
    assert p.info.name == "SimplifyInference" and p.info.opt_level == 0
    assert tuple(p.info.required) == ("InferType",)
    info = passhost.passes.info("SimplifyInference")
    assert info.distribution == "passhost-simplify-inference"


@pytest.mark.parametrize("dim,axis,nstep", [(2, 1, 1), (4, 1, 1), (4, 0, 3)])
def test_simplify_batchnorm_tvm(dim, axis, nstep):
    """``test_simplify_batchnorm``: each step bn(y + 1)[0] then dropout."""
    eps = 0.01
    t1 = ir.TensorType(tuple(10 for _ in range(dim)), F32)
    t2 = ir.TensorType((10,), F32)
    x = ir.var("x", t1)
    beta, gamma = ir.var("beta", t2), ir.var("gamma", t2)
    moving_var, moving_mean = ir.var("moving_var", t2), ir.var("moving_mean", t2)
    y1 = y2 = x
    for _ in range(nstep):
        y1 = ir.nn.batch_norm(ir.add(y1, ir.const(1, F32)), gamma, beta, moving_mean, moving_var,
                              epsilon=eps, axis=axis)[0]
        y1 = ir.nn.dropout(y1)
        y2 = _simple_bn(ir.add(y2, ir.const(1, F32)), gamma, beta, moving_mean, moving_var,
                        axis=axis, epsilon=eps, shape=t1.shape)
    params = [x, gamma, beta, moving_mean, moving_var]
    check_pass(SimplifyInference(), ir.Function(params, y1), ir.Function(params, y2))


def test_batch_norm_without_scale_and_center():
    x = ir.var("x", shape=(1, 3, 4, 4))
    g, b, m, v = (ir.var(n, shape=(3,)) for n in "gbmv")
    before = ir.Function([x, g, b, m, v], ir.nn.batch_norm(x, g, b, m, v, scale=False, center=False)[0])
    scale = ir.divide(ir.const(1.0), ir.sqrt(ir.add(v, ir.const(1e-5))))
    shift = ir.multiply(ir.negative(m), scale)
    body = ir.add(ir.multiply(x, ir.expand_dims(scale, 1, 2)), ir.expand_dims(shift, 1, 2))
    check_pass(SimplifyInference(), before, ir.Function([x, g, b, m, v], body))


def test_batch_norm_last_axis_has_no_expand_dims():
    x = ir.var("x", shape=(2, 5, 3))
    g, b, m, v = (ir.var(n, shape=(3,)) for n in "gbmv")
    before = ir.Function([x, g, b, m, v], ir.nn.batch_norm(x, g, b, m, v, axis=-1)[0])
    scale = ir.multiply(ir.divide(ir.const(1.0), ir.sqrt(ir.add(v, ir.const(1e-5)))), g)
    shift = ir.add(ir.multiply(ir.negative(m), scale), b)
    check_pass(SimplifyInference(), before, ir.Function([x, g, b, m, v], ir.add(ir.multiply(x, scale), shift)))


def test_batch_norm_other_outputs_keep_the_call():
    """Only item 0 is rewritten; items 1 and 2 still read the batch_norm call."""
    x = ir.var("x", shape=(1, 2, 3, 3))
    g, b, m, v = (ir.var(n, shape=(2,)) for n in "gbmv")
    bn = ir.nn.batch_norm(x, g, b, m, v)
    before = ir.Function([x, g, b, m, v], ir.Tuple([bn[0], bn[1], bn[2]]))
    out = check_pass(SimplifyInference(), before,
                     ir.Function([x, g, b, m, v], ir.Tuple([
                         _simple_bn(x, g, b, m, v, 1, 1e-5, (1, 2, 3, 3)), bn[1], bn[2]])))
    assert ir.count_ops(out["main"]).get("nn.batch_norm") == 1


def test_dropout_item_zero_is_its_input_and_the_mask_stays():
    x = ir.var("x", shape=(4, 4))
    r = ir.nn.relu(x)
    d = ir.nn.dropout(r)
    mask_call = d.tuple_value
    before = ir.Function([x], ir.Tuple([ir.exp(d), ir.TupleGetItem(mask_call, 1)]))
    expected = ir.Function([x], ir.Tuple([ir.exp(r), ir.TupleGetItem(mask_call, 1)]))
    check_pass(SimplifyInference(), before, expected)


@pytest.mark.parametrize("axis", [-1, 1])
def test_layer_norm(axis):
    x = ir.var("x", shape=(2, 3, 4))
    n = 4 if axis == -1 else 3
    g, b = ir.var("g", shape=(n,)), ir.var("b", shape=(n,))
    before = ir.Function([x, g, b], ir.nn.layer_norm(x, g, b, axis=axis, epsilon=1e-3))
    mean = ir.mean(x, (axis,), keepdims=True)
    var = ir.variance(x, mean, (axis,), keepdims=True)
    out = ir.divide(ir.subtract(x, mean), ir.sqrt(ir.add(var, ir.const(1e-3))))
    nax = 3 - (axis % 3) - 1
    ge = ir.expand_dims(g, 1, nax) if nax else g
    be = ir.expand_dims(b, 1, nax) if nax else b
    check_pass(SimplifyInference(), before, ir.Function([x, g, b], ir.add(ir.multiply(out, ge), be)))


def test_instance_norm():
    x = ir.var("x", shape=(2, 3, 4, 5))
    g, b = ir.var("g", shape=(3,)), ir.var("b", shape=(3,))
    before = ir.Function([x, g, b], ir.nn.instance_norm(x, g, b, epsilon=1e-4, center=False))
    mean = ir.mean(x, (2, 3), keepdims=True)
    var = ir.variance(x, mean, (2, 3), keepdims=True)
    out = ir.divide(ir.subtract(x, mean), ir.sqrt(ir.add(var, ir.const(1e-4, "float32"))))
    check_pass(SimplifyInference(), before, ir.Function([x, g, b], ir.multiply(out, ir.expand_dims(g, 1, 2))))


def test_norms_evaluate_like_the_operators():
    rng = np.random.RandomState(3)
    x = ir.var("x", shape=(2, 3, 4, 5))
    g, b = ir.var("g", shape=(3,)), ir.var("b", shape=(3,))
    m, v = ir.var("m", shape=(3,)), ir.var("v", shape=(3,))
    body = ir.Tuple([ir.nn.batch_norm(x, g, b, m, v, epsilon=1e-3)[0],
                     ir.nn.instance_norm(x, g, b),
                     ir.nn.layer_norm(x, ir.var("g2", shape=(5,)), ir.var("b2", shape=(5,)))])
    func = ir.Function(ir.free_vars(body), body)
    inputs = {p.name_hint: rng.uniform(0.1, 1.0, size=p.type_annotation.shape).astype(F32) for p in func.params}
    out = assert_semantics_preserved(SimplifyInference(), func, inputs, rtol=1e-4, atol=1e-5)
    ops = ir.count_ops(out["main"])
    assert not {"nn.batch_norm", "nn.instance_norm", "nn.layer_norm"} & set(ops)


def test_unchanged_function_is_the_same_object():
    x = ir.var("x", shape=(2, 2))
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([x], ir.nn.relu(ir.add(x, x)))))
    assert SimplifyInference()(mod)["main"] is mod["main"]
    # batch_norm items other than 0 are not rewritten either
    g = ir.var("g", shape=(2,))
    bn = ir.nn.batch_norm(x, g, g, g, g)
    check_pass(SimplifyInference(), ir.Function([x, g], bn[1]))


def test_norms_behind_a_let_or_in_a_nested_function_are_still_found():
    x = ir.var("x", shape=(2, 3))
    v = ir.var("v")
    body = ir.Let(v, ir.nn.dropout(ir.nn.relu(x)), ir.exp(v))
    out = simplify_inference(ir.infer_type(ir.Function([x], body)))
    assert out.body.value.op.name == "nn.relu"
    inner = ir.Function([x], ir.nn.layer_norm(x, ir.const(np.ones(3, "float32")), ir.const(np.zeros(3, "float32"))))
    outer = ir.infer_type(ir.Function([x], ir.Tuple([ir.nn.relu(x), inner])))
    out = simplify_inference(outer)
    assert out is not outer and "nn.layer_norm" not in ir.count_ops(out)


def test_untyped_input_is_typed_first():
    x = ir.var("x", shape=(1, 2, 2, 2))
    g = ir.var("g", shape=(2,))
    func = ir.Function([x, g], ir.nn.batch_norm(x, g, g, g, g)[0])
    out = simplify_inference(func)
    assert "nn.batch_norm" not in ir.count_ops(out)


def test_runs_in_a_sequential_at_opt_level_0():
    x = ir.var("x", shape=(1, 2, 2, 2))
    g = ir.var("g", shape=(2,))
    mod = ir.IRModule.from_expr(ir.Function([x, g], ir.nn.batch_norm(x, g, g, g, g)[0]))
    with PassContext(opt_level=0):
        out = Sequential([SimplifyInference()])(mod)
    assert "nn.batch_norm" not in ir.count_ops(out["main"])


@pytest.mark.parametrize("seed", range(200))
def test_random_programs_keep_their_meaning(seed):
    mod = random_graph(seed, num_nodes=20, lets=seed % 3 == 0, tuples=seed % 4 == 0)
    out = assert_semantics_preserved(SimplifyInference(), mod, random_inputs(mod, seed), rtol=1e-4, atol=1e-4)
    assert "nn.batch_norm" not in ir.count_ops(out["main"]) or _has_other_bn_items(out["main"])
    assert_types_match_fresh_inference(out)


def assert_types_match_fresh_inference(mod):
    """The pass types its new nodes itself; they must be what inference from scratch gives."""
    text = mod.astext(show_meta_data=True)
    assert all(n.has_type for n in ir.post_order(mod["main"]) if not isinstance(n, ir.Op))
    assert ir.infer_type(ir.parse(text)).astext(show_meta_data=True) == text


def _has_other_bn_items(func):
    return any(isinstance(n, ir.TupleGetItem) and n.index != 0 for n in ir.post_order(func))


def test_deep_chain_at_default_recursion_limit():
    """100,000 dropouts under a batch_norm: one walk, no recursion."""
    limit = sys.getrecursionlimit()
    x = ir.var("x", shape=(1, 2, 2))
    g = ir.var("g", shape=(2,))
    y = ir.nn.batch_norm(x, g, g, g, g)[0]
    for _ in range(100_000):
        y = ir.nn.dropout(ir.nn.relu(y))
    mod = ir.IRModule.from_expr(ir.Function([x, g], y))
    out = SimplifyInference()(mod)
    ops = ir.count_ops(out["main"])
    assert ops["nn.relu"] == 100_000 and "nn.dropout" not in ops and "nn.batch_norm" not in ops
    assert sys.getrecursionlimit() == limit


def test_scalar_constants_are_fresh_nodes_with_the_right_values():
    """The scalars share one read-only array per (value, dtype); each replacement still
    gets its own Constant node, and another epsilon or dtype gets another value."""
    x = ir.var("x", shape=(1, 2, 3, 3))
    h = ir.var("h", shape=(1, 2, 3, 3), dtype="float16")
    g = ir.var("g", shape=(2,))
    gh = ir.var("gh", shape=(2,), dtype="float16")
    bns = [ir.nn.batch_norm(x, g, g, g, g, epsilon=1e-5)[0], ir.nn.batch_norm(x, g, g, g, g, epsilon=1e-5)[0],
           ir.nn.batch_norm(x, g, g, g, g, epsilon=1e-3)[0], ir.nn.batch_norm(h, gh, gh, gh, gh, epsilon=1e-5)[0]]
    out = simplify_inference(ir.infer_type(ir.Function([x, h, g, gh], ir.Tuple(bns))))
    consts = [n for n in ir.post_order(out) if isinstance(n, ir.Constant)]
    assert len(consts) == len({id(c) for c in consts}) == 8  # eps and 1 per batch_norm
    values = sorted((c.dtype, float(c.data)) for c in consts)
    eps32, eps16 = float(np.float32(1e-5)), float(np.float16(np.float32(1e-5)))
    assert values == sorted([("float32", eps32), ("float32", eps32), ("float32", float(np.float32(1e-3))),
                             ("float16", eps16)] + [("float32", 1.0)] * 3 + [("float16", 1.0)])
    assert all(not c.data.flags.writeable for c in consts)
