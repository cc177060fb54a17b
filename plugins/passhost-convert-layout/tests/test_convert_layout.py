"""ConvertLayout: before/expected cases for each rule (desired conv, agnostic ops, pools,
channel axes, broadcasts with expand_dims, reductions, transforms back), option errors,
semantics on random programs, a 100,000-deep chain, and the ResNet-18 op-diff seed."""
from __future__ import annotations

import numpy as np
import pytest

import passhost
from passhost import ir
from passhost.errors import PassError
from passhost.testing import assert_semantics_preserved, check_pass, random_graph, random_inputs
from passhost.transform import PassContext, Sequential
from passhost_convert_layout import ConvertLayout, convert_layout_function, expand_primal

NHWC = {"nn.conv2d": ["NHWC", "HWIO"]}
X = ir.TensorType((1, 3, 8, 8), "float32")
W = ir.TensorType((4, 3, 3, 3), "float32")


def _lt(e, src, dst):
    return ir.layout_transform(e, src, dst)


def _conv_nhwc(x, w, **kw):
    return ir.nn.conv2d(_lt(x, "NCHW", "NHWC"), _lt(w, "OIHW", "HWIO"), data_layout="NHWC",
                        kernel_layout="HWIO", **kw)


def _run(before, desired=NHWC):
    return ConvertLayout(desired_layouts=desired)


def test_registered_with_tvm_info():
    p = passhost.passes.ConvertLayout(desired_layouts=NHWC)
    assert p.info.name == "ConvertLayout" and p.info.opt_level == 3
    assert tuple(p.info.required) == ("InferType", "CanonicalizeOps")


def test_expand_primal_matches_tvm():
    assert expand_primal("C", "NC") == "NC"
    assert expand_primal("CHW", "NHWC") == "NCHW"
    assert expand_primal("C", "NHWC") == "NHWC"


def test_conv_relu_then_transform_back_before_batch_flatten():
    x, w = ir.var("x", X), ir.var("w", W)
    before = ir.Function([x, w], ir.nn.batch_flatten(ir.nn.relu(ir.nn.conv2d(x, w, padding=(1, 1)))))
    c = _conv_nhwc(x, w, padding=(1, 1))
    expected = ir.Function([x, w], ir.nn.batch_flatten(_lt(ir.nn.relu(c), "NHWC", "NCHW")))
    check_pass(_run(before, {"nn.conv2d": ["NHWC", "default"]}), before, expected)


def test_a_rank_changing_broadcast_op_gets_its_input_in_the_original_layout():
    """expand_dims is a broadcast-pattern op, but its 5-D result is in no 4-D layout: it
    must read the conv output transformed back (before: the 4-D layout was carried over
    and a layout_transform NHWC->NCHW was put on the 5-D tensor, a type error)."""
    x, w = ir.var("x", X), ir.var("w", W)
    before = ir.Function([x, w], ir.expand_dims(ir.nn.conv2d(x, w, padding=(1, 1)), axis=4))
    c = _conv_nhwc(x, w, padding=(1, 1))
    expected = ir.Function([x, w], ir.expand_dims(_lt(c, "NHWC", "NCHW"), axis=4))
    check_pass(_run(before), before, expected)


def test_conv_already_in_desired_layout_is_unchanged():
    x = ir.var("x", ir.TensorType((1, 8, 8, 3), "float32"))
    w = ir.var("w", ir.TensorType((3, 3, 3, 4), "float32"))
    before = ir.Function([x, w], ir.nn.relu(ir.nn.conv2d(x, w, data_layout="NHWC", kernel_layout="HWIO")))
    check_pass(_run(before), before, None)


def test_pool_batch_norm_and_residual_add_adapt():
    x, w = ir.var("x", X), ir.var("w", W)
    w2 = ir.var("w2", ir.TensorType((4, 4, 1, 1), "float32"))
    g = [ir.var(n, ir.TensorType((4,), "float32")) for n in ("g", "b", "m", "v")]
    c1 = ir.nn.conv2d(x, w, padding=(1, 1))
    bn = ir.TupleGetItem(ir.nn.batch_norm(c1, *g), 0)
    c2 = ir.nn.conv2d(bn, w2)
    p = ir.nn.max_pool2d(ir.add(c2, c1), pool_size=(2, 2), strides=(2, 2))
    before = ir.Function([x, w, w2] + g, p)
    e1 = _conv_nhwc(x, w, padding=(1, 1))
    ebn = ir.TupleGetItem(ir.nn.batch_norm(e1, *g, axis=3), 0)
    e2 = ir.nn.conv2d(ebn, _lt(w2, "OIHW", "HWIO"), data_layout="NHWC", kernel_layout="HWIO")
    ep = ir.nn.max_pool2d(ir.add(e2, e1), pool_size=(2, 2), strides=(2, 2), layout="NHWC")
    expected = ir.Function([x, w, w2] + g, _lt(ep, "NHWC", "NCHW"))
    check_pass(_run(before), before, expected)


def test_a_pool_sets_layout_and_out_layout_as_tvm_does():
    """TVM's PoolInferCorrectLayout (an adapting pool) sets ``layout`` only and keeps a pool
    whose ``out_layout`` is set in its layout; convert_pooling (a desired pool) sets both."""
    x, w = ir.var("x", X), ir.var("w", W)
    before = ir.Function([x, w], ir.nn.avg_pool2d(ir.nn.conv2d(x, w, padding=(1, 1)), pool_size=(2, 2)))
    ep = ir.nn.avg_pool2d(_conv_nhwc(x, w, padding=(1, 1)), pool_size=(2, 2), layout="NHWC")
    check_pass(_run(before), before, ir.Function([x, w], _lt(ep, "NHWC", "NCHW")))
    fixed = ir.Function([x, w], ir.nn.avg_pool2d(ir.nn.conv2d(x, w), pool_size=(2, 2), out_layout="NCHW"))
    ep = ir.nn.avg_pool2d(_lt(_conv_nhwc(x, w), "NHWC", "NCHW"), pool_size=(2, 2), out_layout="NCHW")
    check_pass(_run(fixed), fixed, ir.Function([x, w], ep))
    before = ir.Function([x], ir.nn.max_pool2d(x, pool_size=(2, 2)))
    ep = ir.nn.max_pool2d(_lt(x, "NCHW", "NHWC"), pool_size=(2, 2), layout="NHWC", out_layout="NHWC")
    check_pass(_run(before, {"nn.max_pool2d": ["NHWC"]}), before, ir.Function([x], _lt(ep, "NHWC", "NCHW")))


def test_transpose_absorbs_the_conversion():
    """The transpose reads the converted tensor with new axes and returns what it did
    before: no layout_transform back (TVM has a layout rule for transpose)."""
    x, w = ir.var("x", X), ir.var("w", W)
    before = ir.Function([x, w], ir.transpose(ir.nn.relu(ir.nn.conv2d(x, w)), axes=(0, 2, 3, 1)))
    expected = ir.Function([x, w], ir.transpose(ir.nn.relu(_conv_nhwc(x, w)), axes=[0, 1, 2, 3]))
    check_pass(_run(before), before, expected)
    before = ir.Function([x, w], ir.transpose(ir.nn.conv2d(x, w)))  # axes=None reverses
    expected = ir.Function([x, w], ir.transpose(_conv_nhwc(x, w), axes=[2, 1, 3, 0]))
    check_pass(_run(before), before, expected)


def test_squeeze_keeps_the_converted_order_of_the_remaining_axes():
    x = ir.var("x", ir.TensorType((1, 3, 1, 8), "float32"))
    w = ir.var("w", ir.TensorType((4, 3, 1, 3), "float32"))
    before = ir.Function([x, w], ir.nn.relu(ir.squeeze(ir.nn.conv2d(x, w, padding=(0, 1)), axis=[2])))
    c = _conv_nhwc(x, w, padding=(0, 1))
    expected = ir.Function([x, w], _lt(ir.nn.relu(ir.squeeze(c, axis=[1])), "NWC", "NCW"))
    check_pass(_run(before), before, expected)
    before = ir.Function([x, w], ir.squeeze(ir.nn.conv2d(x, w, padding=(0, 1))))  # every unit axis
    expected = ir.Function([x, w], _lt(ir.squeeze(c, axis=[0, 1]), "WC", "CW"))
    check_pass(_run(before), before, expected)


def test_concatenate_and_split_follow_the_channel_axis():
    x, w = ir.var("x", X), ir.var("w", W)
    c1 = ir.nn.conv2d(x, w, padding=(1, 1))
    c2 = ir.nn.relu(c1)
    cat = ir.concatenate(ir.Tuple([c1, c2]), axis=1)
    parts = ir.split(cat, 2, axis=-3)
    before = ir.Function([x, w], ir.add(ir.TupleGetItem(parts, 0), ir.TupleGetItem(parts, 1)))
    e1 = _conv_nhwc(x, w, padding=(1, 1))
    ecat = ir.concatenate(ir.Tuple([e1, ir.nn.relu(e1)]), axis=3)
    eparts = ir.split(ecat, 2, axis=3)
    expected = ir.Function([x, w], _lt(ir.add(ir.TupleGetItem(eparts, 0), ir.TupleGetItem(eparts, 1)),
                                       "NHWC", "NCHW"))
    check_pass(_run(before), before, expected)


def test_a_split_used_whole_is_transformed_back_field_by_field():
    x, w = ir.var("x", X), ir.var("w", W)
    before = ir.Function([x, w], ir.split(ir.nn.conv2d(x, w, padding=(1, 1)), 2, axis=1))
    es = ir.split(_conv_nhwc(x, w, padding=(1, 1)), 2, axis=3)
    expected = ir.Function([x, w], ir.Tuple([_lt(ir.TupleGetItem(es, i), "NHWC", "NCHW") for i in range(2)]))
    check_pass(_run(before), before, expected)


@pytest.mark.parametrize("seed", range(40))
def test_the_layout_rules_keep_the_numbers(seed):
    """conv -> (transpose | squeeze | concatenate | split | pool) -> ..., random attributes."""
    rng = np.random.RandomState(seed)
    x = ir.var("x", ir.TensorType((1, 3, 1, 6), "float32"))
    w = ir.var("w", ir.TensorType((4, 3, 1, 3), "float32"))
    c = ir.nn.relu(ir.nn.conv2d(x, w, padding=(0, 1)))
    kind = seed % 5
    if kind == 0:
        out = ir.transpose(c, axes=tuple(int(a) for a in rng.permutation(4)))
    elif kind == 1:
        out = ir.squeeze(c, axis=[int(rng.choice([0, 2, -4, -2]))])
    elif kind == 2:
        out = ir.concatenate(ir.Tuple([c, ir.exp(c)]), axis=int(rng.randint(-4, 4)))
    elif kind == 3:
        parts = ir.split(c, [int(rng.randint(1, 4))], axis=1)
        out = ir.multiply(ir.TupleGetItem(parts, 1), ir.const(2.0))
    else:
        out = ir.nn.avg_pool2d(c, pool_size=(1, 2), strides=(1, 2))
    before = ir.IRModule.from_expr(ir.Function([x, w], ir.add(out, ir.const(1.0))))
    assert_semantics_preserved(lambda m: ir.IRModule({"main": convert_layout_function(m["main"], NHWC)}),
                               before, seed=seed)


def test_lower_rank_broadcast_operand_gets_expand_dims_and_transform():
    x, w = ir.var("x", X), ir.var("w", W)
    k = ir.const(np.arange(4, dtype="float32").reshape(4, 1, 1))
    before = ir.Function([x, w], ir.multiply(ir.nn.conv2d(x, w), k))
    ek = _lt(ir.expand_dims(k, 0, 1), "NCHW", "NHWC")
    expected = ir.Function([x, w], _lt(ir.multiply(_conv_nhwc(x, w), ek), "NHWC", "NCHW"))
    check_pass(_run(before), before, expected)


def test_dense_bias_gets_expand_dims_only():
    d = ir.var("d", ir.TensorType((1, 6), "float32"))
    wd = ir.var("wd", ir.TensorType((5, 6), "float32"))
    b = ir.var("b", ir.TensorType((5,), "float32"))
    before = ir.Function([d, wd, b], ir.nn.softmax(ir.add(ir.nn.dense(d, wd), b)))
    expected = ir.Function([d, wd, b], ir.nn.softmax(ir.add(ir.nn.dense(d, wd), ir.expand_dims(b, 0, 1))))
    check_pass(_run(before), before, expected)


def test_scalar_operand_and_reduction_axes():
    x, w = ir.var("x", X), ir.var("w", W)
    c = ir.nn.conv2d(x, w)
    before = ir.Function([x, w], ir.mean(ir.add(c, ir.const(1.0)), axis=[2, 3], keepdims=True))
    ec = ir.add(_conv_nhwc(x, w), ir.const(1.0))
    expected = ir.Function([x, w], _lt(ir.mean(ec, axis=[1, 2], keepdims=True), "NHWC", "NCHW"))
    check_pass(_run(before), before, expected)


def test_reduction_without_keepdims_keeps_the_converted_order_of_the_remaining_axes():
    """TVM's ReduceInferCorrectLayout: the sum runs on the converted tensor and its result
    is laid out HWC (CHW originally), transformed back where it is used (before: the
    conv's output was transformed back before the sum)."""
    x, w = ir.var("x", X), ir.var("w", W)
    before = ir.Function([x, w], ir.sum(ir.nn.conv2d(x, w), axis=[0]))
    expected = ir.Function([x, w], _lt(ir.sum(_conv_nhwc(x, w), axis=[0]), "HWC", "CHW"))
    check_pass(_run(before), before, expected)
    before = ir.Function([x, w], ir.sum(ir.nn.conv2d(x, w), axis=[1], exclude=True))  # exclude: the kept axes move
    expected = ir.Function([x, w], ir.sum(_conv_nhwc(x, w), axis=[3], exclude=True))
    check_pass(_run(before), before, expected)


def test_shared_value_is_transformed_back_once():
    x, w = ir.var("x", X), ir.var("w", W)
    c = ir.nn.conv2d(x, w)
    before = ir.Function([x, w], ir.Tuple([ir.nn.batch_flatten(c), ir.reshape(c, (1, -1))]))
    back = _lt(_conv_nhwc(x, w), "NHWC", "NCHW")
    expected = ir.Function([x, w], ir.Tuple([ir.nn.batch_flatten(back), ir.reshape(back, (1, -1))]))
    out = check_pass(_run(before), before, expected)
    fields = out["main"].body.fields
    assert fields[0].args[0] is fields[1].args[0]


@pytest.mark.parametrize("bad, match", [
    ({}, "non-empty dict"),
    ({"nn.relu": ["NHWC"]}, "no data layout attribute"),
    ({"nn.nope": ["NHWC"]}, "unknown operator"),
    ({"nn.conv2d": "NHWC"}, r"\[data_layout"),
    ({"nn.conv2d": ["NCHW4c", "OIHW"]}, "not supported"),
    ({"nn.conv2d": ["CHWN", "default"]}, "no default kernel layout"),
])
def test_bad_desired_layouts(bad, match):
    with pytest.raises(PassError, match=match):
        ConvertLayout(desired_layouts=bad)


def test_running_without_desired_layouts_is_a_clear_error():
    x = ir.var("x", X)
    with pytest.raises(PassError, match="needs desired_layouts"):
        ConvertLayout()(ir.IRModule.from_expr(ir.Function([x], x)))


@pytest.mark.parametrize("seed", range(200))
def test_semantics_on_random_programs(seed):
    mod = random_graph(seed, 20)
    out = assert_semantics_preserved(
        lambda m: ir.IRModule({"main": convert_layout_function(m["main"], NHWC)}), mod, seed=seed)
    ir.infer_type(out)
    if any(type(n) is ir.Call and getattr(n.op, "name", "") == "nn.conv2d" for n in ir.post_order(mod["main"])):
        assert any(type(n) is ir.Call and n.attrs.get("data_layout") == "NHWC" for n in ir.post_order(out["main"]))


def test_semantics_through_the_pass_context_with_required_passes():
    mod = random_graph(7, 25)
    with PassContext(opt_level=3):
        assert_semantics_preserved(Sequential([ConvertLayout(desired_layouts=NHWC)]), mod, seed=7)


def test_deep_chain_at_default_recursion_limit():
    x, w = ir.var("x", X), ir.var("w", W)
    e = ir.nn.conv2d(x, w)
    for _ in range(100_000):
        e = ir.nn.relu(e)
    f = ir.infer_type(ir.IRModule.from_expr(ir.Function([x, w], ir.nn.batch_flatten(e))))["main"]
    out = convert_layout_function(f, NHWC)
    counts = ir.count_ops(out)
    assert counts["layout_transform"] == 3 and counts["nn.relu"] == 100_000


def test_resnet18_op_diff_matches_the_tvm_seed():
    mod, params = passhost.testing.resnet(18)
    mod = ir.IRModule({"main": ir.bind_params_by_name(mod["main"], params)})
    inst = passhost.instruments.get("op-diff")
    seq = Sequential([passhost.passes.FoldConstant(), ConvertLayout(desired_layouts=NHWC),
                      passhost.passes.FoldConstant()])
    with PassContext(opt_level=3, instruments=[inst]):
        out = seq(mod)
    assert inst.get_pass_to_op_diff() == [
        (1, "CanonicalizeOps", {"add": 1, "nn.bias_add": -1}),
        (1, "ConvertLayout", {"expand_dims": 1, "layout_transform": 23}),
        (1, "FoldConstant", {"expand_dims": -1, "layout_transform": -21}),
        (0, "sequential", {"add": 1, "layout_transform": 2, "nn.bias_add": -1}),
    ]
    data = random_inputs(mod, 0)
    want = ir.evaluate(mod, *data)
    got = ir.evaluate(out, *data)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
