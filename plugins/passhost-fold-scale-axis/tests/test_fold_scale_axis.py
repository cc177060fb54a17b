"""FoldScaleAxis: TVM's ``test_pass_fold_scale_axis.py`` cases (simple layouts), the
cases left alone, semantics on random programs and 100,000-deep chains."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import passhost
from passhost import ir
from passhost.errors import OptionError, PassNotFound, PluginLoadError
from passhost.testing import assert_semantics_preserved, check_pass, random_graph, random_inputs
from passhost.transform import PassContext, Sequential
from passhost_fold_scale_axis import (
    BackwardFoldScaleAxis,
    FoldScaleAxis,
    ForwardFoldScaleAxis,
    backward_fold_scale_axis,
    forward_fold_scale_axis,
)
from passhost_fold_scale_axis._common import intersect, is_all_positive_constant, match_broadcast_to_left_axes

F32 = "float32"
RNG = np.random.RandomState(7)


def positive(shape):
    return RNG.uniform(0.5, 1, size=shape).astype(F32)


def conv(x, w, channels, **kw):
    return ir.nn.conv2d(x, w, channels=channels, kernel_size=(3, 3), padding=(1, 1), **kw)


def typed_weight(before, name="weight"):
    """A fresh variable with the type inference gives ``before``'s parameter ``name``."""
    func = ir.infer_type(ir.IRModule.from_expr(before))["main"]
    p = next(p for p in func.params if p.name_hint == name)
    return ir.var(name, p.checked_type)


# ---------------------------------------------------------------------------------------
# registration
# ---------------------------------------------------------------------------------------


def test_registered_with_tvm_info():
    fsa = passhost.passes.FoldScaleAxis()
    assert isinstance(fsa, Sequential)
    assert fsa.info.name == "FoldScaleAxis" and fsa.info.opt_level == 0
    assert [p.info.name for p in fsa.passes] == ["BackwardFoldScaleAxis", "ForwardFoldScaleAxis", "FoldConstant"]
    assert fsa.passes[2].info.opt_level == 2
    assert type(fsa.passes[2]) is type(passhost.passes.FoldConstant())  # the registry's own pass
    for name in ("BackwardFoldScaleAxis", "ForwardFoldScaleAxis"):
        p = passhost.passes.get(name)
        assert p.info.opt_level == 3 and tuple(p.info.required) == ("InferType",)
        assert passhost.passes.info(name).distribution == "passhost-fold-scale-axis"
    with pytest.raises(OptionError, match="has no option 'scale'; it takes no options"):
        passhost.passes.FoldScaleAxis(scale=2)


def test_built_while_the_registry_loads_it_looks_fold_constant_up_when_run(monkeypatch):
    """The registry builds every entry once while loading, when it cannot be asked for
    FoldConstant; that Sequential gets a stand-in resolving FoldConstant at run time."""
    real_get = passhost.passes.get

    def loading(name, **options):
        raise PluginLoadError("a plugin used the plugin registry while plugins were loading")

    monkeypatch.setattr(passhost.passes, "get", loading)
    fsa = FoldScaleAxis()
    monkeypatch.setattr(passhost.passes, "get", real_get)
    assert [p.info.name for p in fsa.passes][2] == "FoldConstant"
    x = ir.var("x", shape=(1, 2, 4, 4))
    w = ir.const(positive((3, 2, 1, 1)))
    mod = ir.IRModule.from_expr(ir.Function([x], ir.multiply(ir.nn.conv2d(x, w, channels=3, kernel_size=(1, 1)),
                                                             ir.const(positive((3, 1, 1))))))
    with PassContext(opt_level=3):
        out = fsa(mod)["main"]
    assert ir.count_ops(out) == {"nn.conv2d": 1}


def test_without_fold_constant_installed_it_builds_but_running_names_the_distribution(monkeypatch):
    def missing(name, **options):
        raise PassNotFound(f"pass '{name}' is not installed; it is provided by the distribution "
                           "'passhost-fold-constant' (pip install passhost-fold-constant)")

    monkeypatch.setattr(passhost.passes, "get", missing)
    fsa = FoldScaleAxis()                       # building (e.g. --print-pipeline) works
    assert [p.info.name for p in fsa.passes] == ["BackwardFoldScaleAxis", "ForwardFoldScaleAxis", "FoldConstant"]
    x = ir.var("x", shape=(1, 2, 4, 4))
    mod = ir.IRModule.from_expr(ir.Function([x], ir.nn.relu(x)))
    with pytest.raises(PassNotFound, match="passhost-fold-constant"):
        fsa(mod)


def test_children_need_opt_level_3_inside_the_sequential():
    x = ir.var("x", shape=(2, 4, 10, 10))
    w = ir.const(positive((8, 4, 3, 3)))
    s = ir.const(positive((8, 1, 1)))
    mod = ir.IRModule.from_expr(ir.Function([x], ir.multiply(conv(x, w, 8), s)))
    with PassContext(opt_level=2):
        assert "multiply" in ir.count_ops(FoldScaleAxis()(mod)["main"])
    with PassContext(opt_level=3):
        out = FoldScaleAxis()(mod)["main"]
    assert ir.count_ops(out) == {"nn.conv2d": 1}  # the trailing FoldConstant computed the weight


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------


def test_match_broadcast_to_left_axes():
    t4 = ir.TensorType((2, 4, 10, 10))
    ok, s = match_broadcast_to_left_axes(t4, ir.TensorType((4, 1, 1)), (1,), ir.var("s"))
    assert ok and s.op.name == "squeeze" and tuple(s.attrs.axis) == (1, 2)
    assert match_broadcast_to_left_axes(t4, ir.TensorType((4, 10, 1)), (1,))[0] is False
    assert match_broadcast_to_left_axes(t4, ir.TensorType((3, 1, 1)), (1,))[0] is False
    assert match_broadcast_to_left_axes(ir.TensorType((4,)), t4, (0,))[0] is False
    v = ir.var("v")
    ok, s = match_broadcast_to_left_axes(t4, ir.TensorType((4, 1, 1)), (1,), None)
    assert ok and s is None
    ok, s = match_broadcast_to_left_axes(ir.TensorType((1, 10, 10, 4)), ir.TensorType((4,)), (3,), v)
    assert ok and s is v  # nothing to squeeze
    # a rank-0 scale: only with a value to build, broadcast to the axes' sizes
    assert match_broadcast_to_left_axes(t4, ir.TensorType(()), (1,))[0] is False
    ok, s = match_broadcast_to_left_axes(t4, ir.TensorType(()), (1,), ir.const(2.0))
    assert ok and ir.evaluate(ir.Function([], s)).tolist() == [2.0] * 4


def test_intersect_and_positivity():
    assert intersect(((1, 2), False), ((2, 3), True)) == ((2,), True)
    assert intersect(None, ((1,), False)) is None and intersect(((1,), False), None) is None
    c = ir.const(positive((4, 1, 1)))
    assert is_all_positive_constant(ir.expand_dims(ir.squeeze(c, axis=[1, 2]), 1, 2))
    assert not is_all_positive_constant(ir.const(-positive((4,))))
    assert not is_all_positive_constant(ir.var("s", shape=(4,)))
    assert not is_all_positive_constant(ir.const(np.ones(4, dtype="float16")))
    assert not is_all_positive_constant(ir.negative(c))


# ---------------------------------------------------------------------------------------
# forward (TVM's tests)
# ---------------------------------------------------------------------------------------


def test_fold_fwd_simple():
    x = ir.var("x", shape=(2, 4, 10, 10))
    in_bias = ir.var("in_bias", shape=(4, 1, 1))
    in_scale = ir.const(positive((4, 1, 1)))
    weight = ir.var("weight")
    y = conv(ir.add(ir.nn.relu(ir.multiply(x, in_scale)), in_bias), weight, 2)
    before = ir.Function([x, weight, in_bias], y)
    w = typed_weight(before)
    sq = ir.squeeze(in_scale, axis=[1, 2])
    b2 = ir.divide(in_bias, ir.expand_dims(sq, axis=1, num_newaxis=2))
    body = conv(ir.add(ir.nn.relu(x), b2), ir.multiply(w, ir.expand_dims(sq, axis=1, num_newaxis=2)), 2)
    check_pass(ForwardFoldScaleAxis(), before, ir.Function([x, w, in_bias], body))


def test_fold_fwd_dual_path_depthwise_nhwc():
    """Two depthwise NHWC convs consume the scaled value: scale along the kernel's O axis."""
    x = ir.var("x", shape=(2, 4, 10, 3))
    weight = ir.var("weight", shape=(3, 3, 1, 3))
    in_bias = ir.var("in_bias", shape=(3,))
    in_scale = ir.const(positive((3,)))
    kw = dict(data_layout="NHWC", kernel_layout="HWIO", groups=3)
    y = ir.subtract(ir.nn.relu(ir.multiply(in_scale, x)), in_bias)
    before = ir.Function([x, weight, in_bias], ir.add(conv(y, weight, 3, **kw), conv(y, weight, 3, **kw)))
    y2 = ir.subtract(ir.nn.relu(x), ir.divide(in_bias, in_scale))
    body = ir.add(conv(y2, ir.multiply(weight, in_scale), 3, **kw), conv(y2, ir.multiply(weight, in_scale), 3, **kw))
    check_pass(ForwardFoldScaleAxis(), before, ir.Function([x, weight, in_bias], body))


def test_fold_fwd_fail_scaled_value_has_another_consumer():
    x = ir.var("x", shape=(2, 11, 10, 4))
    weight = ir.var("weight")
    xs = ir.multiply(x, ir.const(positive((4,))))
    y1 = conv(ir.nn.leaky_relu(xs, alpha=0.1), weight, 4, data_layout="NHWC", kernel_layout="HWIO")
    body = ir.add(y1, xs)
    check_pass(ForwardFoldScaleAxis(), ir.Function(ir.free_vars(body), body))


def test_fold_fwd_a_declining_rule_realises_its_scaled_argument(monkeypatch):
    """The forward sweep's safety net: a rule that does not apply to a call with a scaled
    argument gets it realised as ``multiply(value, expand(scale))``, typed, same meaning."""
    from passhost_fold_scale_axis import forward

    x = ir.var("x", shape=(2, 4, 10, 10))
    in_bias = ir.var("in_bias", shape=(4, 1, 1))
    in_scale = ir.const(positive((4, 1, 1)))
    weight = ir.var("weight", shape=(2, 4, 3, 3))
    before = ir.Function([x, weight, in_bias],
                         conv(ir.add(ir.nn.relu(ir.multiply(x, in_scale)), in_bias), weight, 2))
    orig = forward._rewrite_call
    monkeypatch.setattr(forward, "_rewrite_call",
                        lambda call, args, demand: None if call.op.name == "nn.relu" else orig(call, args, demand))
    out = assert_semantics_preserved(ForwardFoldScaleAxis(), before, seed=3, rtol=1e-4, atol=1e-4)
    assert_types_match_fresh_inference(out)
    sq = ir.squeeze(in_scale, axis=[1, 2])
    realised = ir.nn.relu(ir.multiply(x, ir.expand_dims(sq, axis=1, num_newaxis=2)))
    expected = ir.Function([x, weight, in_bias], conv(ir.add(realised, in_bias), weight, 2))
    ir.assert_structural_equal(out["main"].body, ir.infer_type(ir.IRModule.from_expr(expected))["main"].body)


@pytest.mark.parametrize("scale", ["var", "negative"])
def test_fold_fwd_relu_fail(scale):
    x = ir.var("x", shape=(2, 11, 10, 4))
    weight = ir.var("weight")
    s = ir.var("in_scale", shape=(4,)) if scale == "var" else ir.const(-positive((4,)))
    xs = ir.multiply(x, s)
    y1 = conv(ir.nn.relu(xs), weight, 4, data_layout="NHWC", kernel_layout="HWIO")
    body = ir.add(y1, xs)
    check_pass(ForwardFoldScaleAxis(), ir.Function(ir.free_vars(body), body))


def test_fold_fwd_relu_fail_even_with_a_single_consumer():
    x = ir.var("x", shape=(1, 4, 6, 6))
    s = ir.const(-positive((4, 1, 1)))
    body = conv(ir.nn.relu(ir.multiply(x, s)), ir.var("w"), 2)
    check_pass(ForwardFoldScaleAxis(), ir.Function(ir.free_vars(body), body))


def test_fold_fwd_let_fail():
    x = ir.var("x", shape=(2, 11, 10, 4))
    weight = ir.var("weight")
    in_bias = ir.var("in_bias", shape=(4,))
    xs = ir.add(ir.nn.relu(ir.multiply(x, ir.const(positive((4,))))), in_bias)
    x_var = ir.var("x_var")
    y1 = conv(x_var, weight, 4, data_layout="NHWC", kernel_layout="HWIO")
    check_pass(ForwardFoldScaleAxis(), ir.Function([x, weight, in_bias], ir.Let(x_var, xs, ir.add(y1, xs))))


def test_fold_fwd_negative_scale():
    """No relu in between: a negative scale folds."""
    x = ir.var("x", shape=(2, 4, 10, 10))
    weight = ir.var("weight")
    in_scale = ir.const(-positive((4, 1, 1)))
    before = ir.Function([x, weight], conv(ir.multiply(x, in_scale), weight, 4))
    w = typed_weight(before)
    sq = ir.squeeze(in_scale, axis=[1, 2])
    expected = ir.Function([x, w], conv(x, ir.multiply(w, ir.expand_dims(sq, axis=1, num_newaxis=2)), 4))
    check_pass(ForwardFoldScaleAxis(), before, expected)


@pytest.mark.parametrize("data_shape,weight_shape", [((2, 4), (3, 4)), ((3, 5), (4, 5))])
def test_fold_fwd_dense(data_shape, weight_shape):
    x = ir.var("x", shape=data_shape)
    weight = ir.var("weight", shape=weight_shape)
    in_bias = ir.var("in_bias", shape=(data_shape[1],))
    in_scale = ir.const(positive((data_shape[1],)))
    before = ir.Function([x, weight, in_bias],
                         ir.nn.dense(ir.add(ir.nn.relu(ir.multiply(x, in_scale)), in_bias), weight))
    body = ir.nn.dense(ir.add(ir.nn.relu(x), ir.divide(in_bias, in_scale)), ir.multiply(weight, in_scale))
    check_pass(ForwardFoldScaleAxis(), before, ir.Function([x, weight, in_bias], body))


def test_fold_fwd_notes_example():
    """TVM-NOTES §4.7: conv2d(add(relu(x * s), b), w) with s:(C,1,1) positive."""
    x = ir.var("x", shape=(1, 3, 8, 8))
    b = ir.var("b", shape=(3, 1, 1))
    w = ir.var("w", shape=(5, 3, 3, 3))
    s = ir.const(positive((3, 1, 1)))
    before = ir.Function([x, b, w], conv(ir.add(ir.nn.relu(ir.multiply(x, s)), b), w, 5))
    sq = ir.squeeze(s, axis=[1, 2])
    body = conv(ir.add(ir.nn.relu(x), ir.divide(b, ir.expand_dims(sq, 1, 2))), ir.multiply(w, ir.expand_dims(sq, 1, 2)), 5)
    check_pass(ForwardFoldScaleAxis(), before, ir.Function([x, b, w], body))


def test_fold_fwd_grouped_conv_is_left_alone():
    x = ir.var("x", shape=(1, 4, 6, 6))
    w = ir.var("w", shape=(4, 2, 3, 3))
    body = conv(ir.multiply(x, ir.const(positive((4, 1, 1)))), w, 4, groups=2)
    check_pass(ForwardFoldScaleAxis(), ir.Function([x, w], body))


# ---------------------------------------------------------------------------------------
# backward (TVM's tests)
# ---------------------------------------------------------------------------------------


def test_fold_bwd_simple():
    x = ir.var("x", shape=(2, 4, 10, 10))
    weight = ir.var("weight")
    out_bias = ir.var("out_bias", shape=(8,))
    out_scale = ir.const(positive((8, 1, 1)))
    y = ir.nn.relu(ir.add(conv(x, weight, 8), ir.expand_dims(out_bias, axis=1, num_newaxis=2)))
    before = ir.Function([x, weight, out_bias], ir.multiply(y, out_scale))
    w = typed_weight(before)
    sq = ir.squeeze(out_scale, axis=[1, 2])
    c = conv(x, ir.multiply(w, ir.expand_dims(sq, axis=1, num_newaxis=3)), 8)
    b = ir.multiply(ir.expand_dims(out_bias, axis=1, num_newaxis=2), ir.expand_dims(sq, axis=1, num_newaxis=2))
    check_pass(BackwardFoldScaleAxis(), before, ir.Function([x, w, out_bias], ir.nn.relu(ir.add(c, b))))


def test_fold_bwd_dual_path():
    x = ir.var("x", shape=(2, 4, 10, 10))
    weight = ir.var("weight")
    out_bias = ir.var("out_bias", shape=(8,))
    out_scale = ir.const(positive((8, 1, 1)))
    y = ir.add(ir.nn.relu(conv(x, weight, 8)), ir.nn.relu(conv(x, weight, 8)))
    before = ir.Function([x, weight, out_bias], ir.multiply(y, out_scale))
    w = typed_weight(before)
    sq = ir.squeeze(out_scale, axis=[1, 2])

    def folded():
        return conv(x, ir.multiply(w, ir.expand_dims(sq, axis=1, num_newaxis=3)), 8)

    expected = ir.Function([x, w, out_bias], ir.add(ir.nn.relu(folded()), ir.nn.relu(folded())))
    check_pass(BackwardFoldScaleAxis(), before, expected)


def test_fold_bwd_dual_consumer():
    x = ir.var("x", shape=(2, 4, 10, 10))
    weight = ir.var("weight")
    out_bias = ir.var("out_bias", shape=(4,))
    out_scale = ir.const(positive((4, 1, 1)))
    y0 = ir.nn.relu(ir.multiply(conv(x, weight, 4), out_scale))
    y1 = ir.nn.relu(ir.multiply(conv(y0, weight, 4), out_scale))
    y2 = ir.nn.relu(ir.multiply(conv(y0, weight, 4), out_scale))
    before = ir.Function([x, weight, out_bias], ir.add(y1, y2))
    w = typed_weight(before)

    def folded(data):
        sq = ir.squeeze(out_scale, axis=[1, 2])
        return conv(data, ir.multiply(w, ir.expand_dims(sq, axis=1, num_newaxis=3)), 4)

    e0 = ir.nn.relu(folded(x))
    expected = ir.Function([x, w, out_bias], ir.add(ir.nn.relu(folded(e0)), ir.nn.relu(folded(e0))))
    check_pass(BackwardFoldScaleAxis(), before, expected)


def test_fold_bwd_fail_axes_differ():
    """One conv has out_layout CNHW: the two add branches scale different axes."""
    x = ir.var("x", shape=(4, 4, 10, 10))
    weight = ir.var("weight")
    out_bias = ir.var("out_bias", shape=(4, 1, 1))
    y1 = ir.nn.relu(conv(x, weight, 4))
    y2 = ir.nn.relu(conv(x, weight, 4, out_layout="CNHW"))
    before = ir.Function([x, weight, out_bias], ir.multiply(ir.add(y1, y2), ir.const(positive((4, 1, 1)))))
    check_pass(BackwardFoldScaleAxis(), before)


def test_fold_bwd_fail_conv_output_used_twice():
    x = ir.var("x", shape=(4, 4, 10, 10))
    weight = ir.var("weight")
    out_bias = ir.var("out_bias", shape=(4, 1, 1))
    y1 = conv(x, weight, 4)
    y2 = ir.nn.relu(y1)
    before = ir.Function([x, weight, out_bias], ir.add(ir.multiply(y1, ir.const(positive((4, 1, 1)))), y2))
    check_pass(BackwardFoldScaleAxis(), before)


@pytest.mark.parametrize("scale", ["var", "negative"])
def test_fold_bwd_relu_fail(scale):
    x = ir.var("x", shape=(4, 4, 10, 10))
    s = ir.var("in_scale", shape=(4, 1, 1)) if scale == "var" else ir.const(-positive((4, 1, 1)))
    body = ir.multiply(ir.nn.relu(conv(x, ir.var("weight"), 4)), s)
    check_pass(BackwardFoldScaleAxis(), ir.Function(ir.free_vars(body), body))


def test_fold_bwd_negative_scale():
    x = ir.var("x", shape=(2, 4, 10, 10))
    weight = ir.var("weight")
    out_scale = ir.const(-positive((8, 1, 1)))
    before = ir.Function([x, weight], ir.multiply(conv(x, weight, 8), out_scale))
    w = typed_weight(before)
    sq = ir.squeeze(out_scale, axis=[1, 2])
    expected = ir.Function([x, w], conv(x, ir.multiply(w, ir.expand_dims(sq, axis=1, num_newaxis=3)), 8))
    check_pass(BackwardFoldScaleAxis(), before, expected)


@pytest.mark.parametrize("data_shape,weight_shape", [((2, 4), (3, 4)), ((3, 5), (4, 5))])
def test_fold_bwd_dense(data_shape, weight_shape):
    x = ir.var("x", shape=data_shape)
    weight = ir.var("weight", shape=weight_shape)
    in_bias = ir.var("in_bias", shape=(weight_shape[0],))
    in_scale = ir.const(positive((weight_shape[0],)))
    before = ir.Function([x, weight, in_bias],
                         ir.multiply(ir.nn.relu(ir.add(ir.nn.dense(x, weight), in_bias)), in_scale))
    body = ir.nn.relu(ir.add(ir.nn.dense(x, ir.multiply(weight, ir.expand_dims(in_scale, axis=1))),
                             ir.multiply(in_bias, in_scale)))
    check_pass(BackwardFoldScaleAxis(), before, ir.Function([x, weight, in_bias], body))


def test_fold_bwd_bias_add():
    x = ir.var("x", shape=(2, 4, 10, 10))
    weight = ir.var("weight")
    out_bias = ir.var("out_bias", shape=(4,))
    out_scale = ir.const(positive((4, 1, 1)))
    before = ir.Function([x, weight, out_bias],
                         ir.multiply(ir.nn.relu(ir.nn.bias_add(conv(x, weight, 4), out_bias)), out_scale))
    w = typed_weight(before)
    sq = ir.squeeze(out_scale, axis=[1, 2])
    c = conv(x, ir.multiply(w, ir.expand_dims(sq, axis=1, num_newaxis=3)), 4)
    expected = ir.Function([x, w, out_bias], ir.nn.relu(ir.nn.bias_add(c, ir.multiply(out_bias, sq))))
    check_pass(BackwardFoldScaleAxis(), before, expected)


def test_fold_bwd_bias_add_axis_must_equal_the_message_axis():
    """As TVM compares the attribute as written: bias_add(axis=-1) after dense does not pass."""
    x = ir.var("x", shape=(2, 4))
    w = ir.var("w", shape=(3, 4))
    b = ir.var("b", shape=(3,))
    body = ir.multiply(ir.nn.bias_add(ir.nn.dense(x, w), b, axis=-1), ir.const(positive((3,))))
    check_pass(BackwardFoldScaleAxis(), ir.Function([x, w, b], body))


def test_fold_bwd_notes_example():
    """TVM-NOTES §4.7: relu(add(conv2d(x, w), b_e)) * s with s:(C,1,1)."""
    x = ir.var("x", shape=(1, 3, 8, 8))
    w = ir.var("w", shape=(6, 3, 3, 3))
    b = ir.var("b", shape=(6, 1, 1))
    s = ir.const(positive((6, 1, 1)))
    before = ir.Function([x, w, b], ir.multiply(ir.nn.relu(ir.add(conv(x, w, 6), b)), s))
    sq = ir.squeeze(s, axis=[1, 2])
    body = ir.nn.relu(ir.add(conv(x, ir.multiply(w, ir.expand_dims(sq, 1, 3)), 6),
                             ir.multiply(b, ir.expand_dims(sq, 1, 2))))
    check_pass(BackwardFoldScaleAxis(), before, ir.Function([x, w, b], body))


def _bound(func, params):
    return ir.IRModule.from_expr(ir.bind_params_by_name(func, params))


def test_fold_bwd_simple_constant():
    """A scalar scale after relu(conv + bias) folds away entirely (all-zero parameters)."""
    data = ir.var("data", shape=(1, 3, 20, 20))
    weight, bias = ir.var("weight", shape=(16, 3, 3, 3)), ir.var("in_bias", shape=(16, 1, 1))
    params = {"weight": np.zeros((16, 3, 3, 3), F32), "in_bias": np.zeros((16, 1, 1), F32)}
    y = ir.nn.relu(ir.add(ir.nn.conv2d(data, weight, kernel_size=(3, 3), channels=16, padding=(1, 1)), bias))
    before = _bound(ir.Function([data, weight, bias], ir.multiply(y, ir.const(2.0))), params)
    expected = _bound(ir.Function([data, weight, bias], y), params)
    with PassContext(opt_level=3):
        check_pass(Sequential([passhost.passes.InferType(), FoldScaleAxis()]), before, expected)


def test_fold_batch_norm():
    """TVM's ``test_fold_batch_norm``: SimplifyInference, FoldConstant, FoldScaleAxis leave
    ``conv2d(data, zeros(16, 3, 3, 3)) + zeros(16, 1, 1)``."""
    data = ir.var("data", shape=(1, 3, 32, 32))
    names = ["weight", "bn_gamma", "bn_beta", "bn_mean", "bn_var"]
    weight, gamma, beta, mean, var = (ir.var(n) for n in names)
    c = ir.nn.conv2d(data, weight, kernel_size=(3, 3), channels=16, padding=(1, 1))
    bn = ir.nn.batch_norm(c, gamma, beta, mean, var)[0]
    func = ir.infer_type(ir.Function([data, weight, gamma, beta, mean, var], bn))
    params = {p.name_hint: np.zeros(p.checked_type.shape, F32) for p in func.params[1:]}
    mod = _bound(func, params)
    remove_bn = Sequential([passhost.passes.InferType(), passhost.passes.SimplifyInference(),
                            passhost.passes.FoldConstant(), FoldScaleAxis()])
    d2 = ir.var("data", shape=(1, 3, 32, 32))
    body = ir.add(ir.nn.conv2d(d2, ir.const(np.zeros((16, 3, 3, 3), F32)), kernel_size=(3, 3), channels=16,
                               padding=(1, 1)), ir.const(np.zeros((16, 1, 1), F32)))
    with PassContext(opt_level=3):
        check_pass(remove_bn, mod, ir.Function([d2], body))


# ---------------------------------------------------------------------------------------
# whole-function behaviour
# ---------------------------------------------------------------------------------------


def test_nothing_to_fold_returns_the_same_function():
    x = ir.var("x", shape=(1, 4, 6, 6))
    func = ir.infer_type(ir.Function([x], ir.nn.relu(ir.multiply(x, ir.const(2.0)))))
    assert backward_fold_scale_axis(func) is func
    assert forward_fold_scale_axis(func) is func


def test_untyped_input_is_typed_first():
    x = ir.var("x", shape=(1, 4, 6, 6))
    w = ir.var("w", shape=(2, 4, 3, 3))
    out = backward_fold_scale_axis(ir.Function([x, w], ir.multiply(conv(x, w, 2), ir.const(positive((2, 1, 1))))))
    assert ir.count_ops(out)["multiply"] == 1 and out.body.op.name == "nn.conv2d"


def assert_types_match_fresh_inference(mod):
    """The pass types its new nodes itself; they must be what inference from scratch gives."""
    text = mod.astext(show_meta_data=True)
    assert all(n.has_type for n in ir.post_order(mod["main"]) if not isinstance(n, ir.Op))
    assert ir.infer_type(ir.parse(text)).astext(show_meta_data=True) == text


def _fold_pipeline():
    P = passhost.passes
    return Sequential([P.SimplifyInference(), P.FoldConstant(), FoldScaleAxis()])


@pytest.mark.parametrize("seed", range(200))
def test_random_programs_keep_their_meaning(seed):
    kinds = None if seed % 2 else ["binary", "unary", "conv2d", "batch_norm", "bias_add", "dense"]
    mod = random_graph(seed, num_nodes=20, lets=seed % 5 == 0, tuples=seed % 7 == 0, kinds=kinds)
    inputs = random_inputs(mod, seed)
    typed = ir.infer_type(passhost.passes.SimplifyInference()(mod))
    out = assert_semantics_preserved(BackwardFoldScaleAxis(), typed, inputs, rtol=1e-4, atol=1e-4)
    assert_types_match_fresh_inference(out)
    out = assert_semantics_preserved(ForwardFoldScaleAxis(), typed, inputs, rtol=1e-4, atol=1e-4)
    assert_types_match_fresh_inference(out)
    with PassContext(opt_level=3):
        assert_semantics_preserved(_fold_pipeline(), mod, inputs, rtol=1e-4, atol=1e-4)


def test_random_programs_do_fold():
    """The property test above is not vacuous: many of its programs change."""
    changed = 0
    for seed in range(0, 200, 2):
        mod = random_graph(seed, num_nodes=20, lets=seed % 5 == 0, tuples=seed % 7 == 0,
                           kinds=["binary", "unary", "conv2d", "batch_norm", "bias_add", "dense"])
        typed = ir.infer_type(passhost.passes.SimplifyInference()(mod))
        f = typed["main"]
        changed += backward_fold_scale_axis(f) is not f or forward_fold_scale_axis(f) is not f
    assert changed >= 20


def _scale_program(seed):
    """A random chain of the shapes the folds look for: per-channel multiplies (positive,
    negative, scalar or variable scales) before/after convs, relus, bias adds and adds,
    some values shared by two consumers."""
    rnd = np.random.RandomState(seed)
    c = int(rnd.choice([2, 3, 4]))
    x = ir.var("x", shape=(1, c, 5, 5))
    params = [x]
    y = x
    for i in range(int(rnd.randint(3, 9))):
        k = rnd.randint(7)
        if k == 0:
            cout = int(rnd.choice([2, 3, 4]))
            w = ir.const(rnd.uniform(-1, 1, size=(cout, c, 3, 3)).astype(F32))
            y = ir.nn.conv2d(y, w, channels=cout, kernel_size=(3, 3), padding=(1, 1))
            c = cout
        elif k == 1:
            kind = rnd.randint(4)
            if kind == 0:
                s = ir.const(positive((c, 1, 1)))
            elif kind == 1:
                s = ir.const(rnd.uniform(-1, 1, size=(c, 1, 1)).astype(F32))
            elif kind == 2:
                s = ir.const(float(rnd.uniform(0.5, 2)))
            else:
                s = ir.var(f"s{i}", shape=(c, 1, 1))
                params.append(s)
            y = ir.multiply(y, s) if rnd.randint(2) else ir.multiply(s, y)
        elif k == 2:
            y = ir.nn.relu(y)
        elif k == 3:
            y = ir.add(y, ir.const(rnd.uniform(-1, 1, size=(c, 1, 1)).astype(F32)))
        elif k == 4:
            y = ir.nn.bias_add(y, ir.const(rnd.uniform(-1, 1, size=(c,)).astype(F32)))
        elif k == 5:
            y = ir.subtract(y, ir.const(0.5))
        else:
            y = ir.nn.leaky_relu(y, alpha=0.2)
        if rnd.randint(4) == 0:
            # a second consumer of this value
            y = ir.add(ir.nn.relu(y), y)
    cout = int(rnd.choice([2, 3]))
    w = ir.const(rnd.uniform(-1, 1, size=(cout, c, 1, 1)).astype(F32))
    y = ir.nn.conv2d(y, w, channels=cout, kernel_size=(1, 1))
    y = ir.multiply(y, ir.const(positive((cout, 1, 1))))
    return ir.IRModule.from_expr(ir.Function(params, y))


@pytest.mark.parametrize("seed", range(200))
def test_random_scale_programs_keep_their_meaning(seed):
    mod = _scale_program(seed)
    inputs = random_inputs(mod, seed)
    out = assert_semantics_preserved(BackwardFoldScaleAxis(), mod, inputs, rtol=1e-4, atol=1e-4)
    assert_types_match_fresh_inference(out)
    out = assert_semantics_preserved(ForwardFoldScaleAxis(), mod, inputs, rtol=1e-4, atol=1e-4)
    assert_types_match_fresh_inference(out)
    with PassContext(opt_level=3):
        assert_semantics_preserved(FoldScaleAxis(), mod, inputs, rtol=1e-4, atol=1e-4)


def test_random_scale_programs_do_fold():
    changed = 0
    for seed in range(200):
        f = ir.infer_type(_scale_program(seed))["main"]
        changed += backward_fold_scale_axis(f) is not f or forward_fold_scale_axis(f) is not f
    assert changed >= 150


def test_deep_chains_at_default_recursion_limit():
    """100,000 relus between a conv and its scale (backward) and between a scale and a
    conv (forward): one walk each, no recursion."""
    limit = sys.getrecursionlimit()
    x = ir.var("x", shape=(1, 2, 3, 3))
    w = ir.var("w", shape=(2, 2, 1, 1))
    s = ir.const(positive((2, 1, 1)))
    y = ir.nn.conv2d(x, w, channels=2, kernel_size=(1, 1))
    for _ in range(100_000):
        y = ir.nn.relu(y)
    mod = ir.IRModule.from_expr(ir.Function([x, w], ir.multiply(y, s)))
    out = BackwardFoldScaleAxis()(mod)["main"]
    assert out.body.op.name == "nn.relu" and ir.count_ops(out)["multiply"] == 1

    z = ir.multiply(x, s)
    for _ in range(100_000):
        z = ir.nn.relu(z)
    mod = ir.IRModule.from_expr(ir.Function([x, w], ir.nn.conv2d(z, w, channels=2, kernel_size=(1, 1))))
    out = ForwardFoldScaleAxis()(mod)["main"]
    assert out.body.args[1].op.name == "multiply"
    assert ir.count_ops(out)["nn.relu"] == 100_000 and ir.count_ops(out)["multiply"] == 1
    assert sys.getrecursionlimit() == limit
