"""Builders: ir.var / ir.const forms and dtype rules, one builder per op, padding normalisation."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from passhost import ir
from passhost.errors import IRError
from passhost.ir import TensorType


def test_var_forms():
    x = ir.var("x")
    assert isinstance(x, ir.Var) and x.name_hint == "x" and x.type_annotation is None
    assert ir.var("s", "int64").type_annotation == TensorType((), "int64")
    assert ir.var("t", shape=(1, 3)).type_annotation == TensorType((1, 3), "float32")
    assert ir.var("t", shape=[2], dtype="int8").type_annotation == TensorType((2,), "int8")
    ty = TensorType((4, 4), "float16")
    assert ir.var("u", ty).type_annotation is ty
    with pytest.raises(IRError, match="unknown dtype"):
        ir.var("bad", "float31")
    with pytest.raises(IRError, match="shape="):
        ir.var("bad", (1, 2))


@pytest.mark.parametrize("value,dtype", [
    (1.5, "float32"), (2, "int32"), (True, "bool"), (np.float64(1.0), "float32"),
    (np.int64(3), "int32"), (np.array([1.0, 2.0]), "float32"), (np.array([1, 2]), "int32"),
    ([1, 2], "int32"), ([1.0], "float32"), (np.float16(1.0), "float16"), (np.array([1], "uint8"), "uint8"),
])
def test_const_default_dtypes(value, dtype):
    c = ir.const(value)
    assert isinstance(c, ir.Constant)
    assert c.dtype == dtype
    np.testing.assert_array_equal(c.data, np.asarray(value))


def test_const_explicit_dtype_and_scalar():
    c = ir.const(1, "float32")
    assert c.dtype == "float32" and c.is_scalar and c.data.item() == 1.0
    c = ir.const([1.5, 2.5], dtype="float64")
    assert c.dtype == "float64" and c.data.shape == (2,)
    assert not c.data.flags.writeable
    with pytest.raises(IRError, match="unknown dtype"):
        ir.const(1, "complex64")


UNARY = ["negative", "exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh"]
BINARY = ["add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "less", "greater", "equal"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_builders(name):
    x = ir.var("x")
    call = getattr(ir, name)(x)
    assert call.op is ir.Op.get(name) and call.args == (x,) and call.attrs == {}


@pytest.mark.parametrize("name", BINARY)
def test_binary_builders(name):
    x, y = ir.var("x"), ir.var("y")
    call = getattr(ir, name)(x, y)
    assert call.op is ir.Op.get(name) and call.args == (x, y)


def test_binary_builder_lifts_numbers_to_the_sibling_dtype():
    x = ir.var("x", shape=(2,), dtype="float16")
    call = ir.add(x, 1)
    assert isinstance(call.args[1], ir.Constant) and call.args[1].dtype == "float16"
    assert ir.multiply(ir.var("y"), 2.0).args[1].dtype == "float32"
    assert ir.multiply(ir.var("y"), 2).args[1].dtype == "float32"
    assert ir.add(ir.var("i", shape=(2,), dtype="int32"), 2).args[1].dtype == "int32"
    with pytest.raises(IRError, match="expressions or numbers"):
        ir.add(x, "one")


def test_shape_builders_attrs():
    x = ir.var("x")
    assert ir.reshape(x, [1, -1]).attrs.newshape == (1, -1)
    assert ir.reshape(x, 6).attrs.newshape == (6,)
    assert ir.transpose(x).attrs.axes is None
    assert ir.transpose(x, [1, 0]).attrs.axes == (1, 0)
    e = ir.expand_dims(x, axis=2, num_newaxis=2)
    assert (e.attrs.axis, e.attrs.num_newaxis) == (2, 2)
    assert ir.squeeze(x).attrs.axis is None
    assert ir.squeeze(x, 0).attrs.axis == (0,)
    s = ir.split(x, 3, axis=1)
    assert s.attrs.indices_or_sections == 3 and s.attrs.axis == 1
    assert ir.split(x, [1, 2]).attrs.indices_or_sections == (1, 2)
    lt = ir.layout_transform(x, "NCHW", "NHWC")
    assert (lt.attrs.src_layout, lt.attrs.dst_layout) == ("NCHW", "NHWC")
    assert ir.cast(x, "int8").attrs.dtype == "int8"
    c = ir.clip(x, 0, 6)
    assert c.attrs.a_min == 0.0 and isinstance(c.attrs.a_min, float)
    assert ir.shape_of(x).attrs.dtype == "int32"
    assert ir.stop_fusion(x).op.name == "annotation.stop_fusion"
    assert ir.where(ir.var("c"), x, x).op.name == "where"


def test_concatenate_accepts_list_tuple_or_tuple_expr():
    x, y = ir.var("x"), ir.var("y")
    for data in ([x, y], (x, y)):
        call = ir.concatenate(data, axis=1)
        assert len(call.args) == 1 and isinstance(call.args[0], ir.Tuple)
        assert call.args[0].fields == (x, y) and call.attrs.axis == 1
    tup = ir.Tuple([x, y])
    assert ir.concatenate(tup).args[0] is tup
    with pytest.raises(IRError, match="concatenate"):
        ir.concatenate(3)


def test_reduce_builders():
    x = ir.var("x")
    for name in ("sum", "mean", "max", "min"):
        call = getattr(ir, name)(x, axis=1, keepdims=True)
        assert call.op.name == name
        assert dict(call.attrs) == {"axis": (1,), "keepdims": True, "exclude": False}
    assert ir.sum(x).attrs.axis is None
    assert ir.mean(x, axis=[0, 2], exclude=True).attrs.exclude is True
    var = ir.variance(x, ir.var("m"), axis=1, unbiased=True)
    assert var.attrs.unbiased is True and var.attrs.axis == (1,)


def test_conv2d_builder_normalises_like_tvm():
    x, w = ir.var("x"), ir.var("w")
    call = ir.nn.conv2d(x, w)
    assert call.op.name == "nn.conv2d" and call.args == (x, w)
    assert call.attrs.padding == (0, 0, 0, 0)  # printed even though "no padding"
    assert call.attrs.padding != ir.Op.get("nn.conv2d").attr_defaults.padding
    call = ir.nn.conv2d(x, w, strides=2, padding=3, channels=64, kernel_size=7)
    assert call.attrs.strides == (2, 2) and call.attrs.padding == (3, 3, 3, 3)
    assert call.attrs.kernel_size == (7, 7) and call.attrs.channels == 64
    assert ir.nn.conv2d(x, w, padding=(1, 2)).attrs.padding == (1, 2, 1, 2)
    assert ir.nn.conv2d(x, w, padding=[1, 2, 3, 4]).attrs.padding == (1, 2, 3, 4)
    with pytest.raises(IRError, match="1, 2 or 4 values"):
        ir.nn.conv2d(x, w, padding=(1, 2, 3))
    nhwc = ir.nn.conv2d(x, w, data_layout="NHWC", kernel_layout="HWIO", groups=2)
    assert (nhwc.attrs.data_layout, nhwc.attrs.kernel_layout, nhwc.attrs.groups) == ("NHWC", "HWIO", 2)


def test_pool_builders_normalise_padding():
    x = ir.var("x")
    mp = ir.nn.max_pool2d(x, pool_size=(3, 3), strides=(2, 2), padding=(1, 1))
    assert mp.attrs.pool_size == (3, 3) and mp.attrs.padding == (1, 1, 1, 1)
    assert ir.nn.max_pool2d(x).attrs.padding == (0, 0, 0, 0)
    ap = ir.nn.avg_pool2d(x, 2, 2, ceil_mode=True, count_include_pad=True)
    assert ap.attrs.pool_size == (2, 2) and ap.attrs.ceil_mode is True and ap.attrs.count_include_pad is True
    g = ir.nn.global_avg_pool2d(x, layout="NHWC")
    assert g.attrs.layout == "NHWC"


def test_nn_builders():
    x, g, b, m, v = (ir.var(n) for n in "xgbmv")
    bn = ir.nn.batch_norm(x, g, b, m, v, epsilon=2e-5, scale=False)
    assert isinstance(bn, ir.Call) and bn.op.name == "nn.batch_norm" and bn.args == (x, g, b, m, v)
    assert bn.attrs.epsilon == 2e-5 and bn.attrs.scale is False and bn.attrs.axis == 1
    item = bn[0]
    assert isinstance(item, ir.TupleGetItem) and item.tuple_value is bn and item.index == 0
    assert ir.TupleGetItem(bn, 0).tuple_value is bn
    assert ir.nn.dense(x, g, units=1000).attrs.units == 1000
    assert ir.nn.dense(x, g).attrs.units is None
    assert ir.nn.bias_add(x, b, axis=-1).attrs.axis == -1
    assert ir.nn.relu(x).op.name == "nn.relu"
    assert ir.nn.batch_flatten(x).op.name == "nn.batch_flatten"
    assert ir.nn.softmax(x).attrs.axis == -1 and ir.nn.softmax(x, 2).attrs.axis == 2
    lr = ir.nn.leaky_relu(x)
    assert lr.attrs.alpha == 0.01 and lr.attrs.alpha != ir.Op.get("nn.leaky_relu").attr_defaults.alpha
    assert ir.nn.layer_norm(x, g, b).attrs.axis == -1
    assert ir.nn.instance_norm(x, g, b, epsilon=1e-3).attrs.epsilon == 1e-3
    d = ir.nn.dropout(x, rate=0.25)
    assert isinstance(d, ir.TupleGetItem) and d.index == 0
    assert d.tuple_value.op.name == "nn.dropout" and d.tuple_value.attrs.rate == 0.25


def test_builders_all_is_exported():
    from passhost.ir import builders

    for name in builders.__all__:
        assert getattr(ir, name) is getattr(builders, name)
    for name in ir.nn.__all__:
        assert callable(getattr(ir.nn, name))


CORE_OPS = [
    "add", "subtract", "multiply", "divide", "negative", "exp", "log", "sqrt", "rsqrt", "power", "maximum",
    "minimum", "reshape", "transpose", "expand_dims", "squeeze", "concatenate", "sum", "mean",
    "layout_transform", "nn.conv2d", "nn.relu", "nn.batch_norm", "nn.dense", "nn.bias_add", "nn.max_pool2d",
    "nn.avg_pool2d", "nn.global_avg_pool2d", "nn.batch_flatten", "nn.softmax", "nn.dropout", "cast",
    "sigmoid", "tanh", "clip", "split", "shape_of", "variance", "max", "min", "less", "greater", "equal",
    "where", "nn.leaky_relu", "nn.layer_norm", "nn.instance_norm", "annotation.stop_fusion",
]


def test_every_core_op_registered_on_plain_import():
    script = ("import passhost.ir as ir\n"
              f"names = {CORE_OPS!r}\n"
              "for n in names:\n"
              "    assert ir.Op.get(n).name == n, n\n"
              "print(len(names))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(len(CORE_OPS))


def test_op_get_unknown_suggests():
    with pytest.raises(IRError, match="nn.conv2d"):
        ir.Op.get("nn.conv2")


def test_expand_bias_to_match_axis_lays_a_per_axis_tensor_over_a_bigger_one():
    from passhost import ir

    b = ir.var("b", shape=(16,), dtype="float32")
    got = ir.expand_bias_to_match_axis(b, 4, 1)  # NCHW channels: (16, 1, 1)
    assert ir.astext(got, show_meta_data=False).strip().endswith("expand_dims(%b, axis=1, num_newaxis=2)")
    assert ir.expand_bias_to_match_axis(b, 4, 3) is b  # the last axis: broadcasts as it is
    two = ir.var("s", shape=(3, 5), dtype="float32")
    out = ir.infer_type(ir.add(ir.var("x", shape=(2, 3, 7, 5), dtype="float32"),
                               ir.expand_bias_to_match_axis(two, 4, (1, 3))))
    assert out.checked_type.shape == (2, 3, 7, 5)
    assert ir.infer_type(ir.expand_bias_to_match_axis(two, 4, [1, 2])).checked_type.shape == (3, 5, 1)
