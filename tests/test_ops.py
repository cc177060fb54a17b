"""Core operators: kernels against independent naive implementations, type relations,
error messages and attribute validation."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import passhost.ir.ops  # noqa: F401  (fail loudly if the op package does not import)
from passhost import ir
from passhost.errors import IRError, TypeInferenceError
from passhost.ir import OpPattern, TensorType, TupleType

RNG = np.random.default_rng(0)


def T(shape, dtype="float32"):
    return TensorType(shape, dtype)


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def run(call, *arrays):
    """Infer the call's type from the arrays, run its kernel and check shape/dtype agree."""
    types = [TupleType([T(a.shape, a.dtype.name) for a in x]) if isinstance(x, (list, tuple))
             else T(x.shape, x.dtype.name) for x in arrays]
    ty = call.op.type_rel(list(types), call.attrs)
    out = call.op.compute(list(arrays), call.attrs)
    if isinstance(ty, TupleType):
        assert isinstance(out, tuple) and len(out) == len(ty.fields)
        for o, t in zip(out, ty.fields):
            assert isinstance(o, np.ndarray) and o.shape == t.shape and o.dtype.name == t.dtype
    else:
        assert isinstance(out, np.ndarray), type(out)
        assert out.shape == ty.shape and out.dtype.name == ty.dtype, (out.shape, out.dtype, ty)
    return out


def v(name="x"):
    return ir.var(name)


# ---------------------------------------------------------------------------------------
# naive reference implementations (loops, written independently of the kernels)
# ---------------------------------------------------------------------------------------
def naive_conv2d(x, w, strides, pad, dilation, groups):
    """NCHW data, OIHW weight; pad = (top, left, bottom, right)."""
    n_, c_, h_, w_ = x.shape
    o_, ig, kh, kw = w.shape
    pt, pl, pb, pr = pad
    sh, sw = strides
    dh, dw = dilation
    xp = np.zeros((n_, c_, h_ + pt + pb, w_ + pl + pr), dtype="float64")
    xp[:, :, pt:pt + h_, pl:pl + w_] = x
    oh = (h_ + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (w_ + pl + pr - dw * (kw - 1) - 1) // sw + 1
    og = o_ // groups
    out = np.zeros((n_, o_, oh, ow))
    for n in range(n_):
        for o in range(o_):
            g = o // og
            for i in range(oh):
                for j in range(ow):
                    acc = 0.0
                    for c in range(ig):
                        for a in range(kh):
                            for b in range(kw):
                                acc += xp[n, g * ig + c, i * sh + a * dh, j * sw + b * dw] * w[o, c, a, b]
                    out[n, o, i, j] = acc
    return out


def naive_pool(x, kind, pool, strides, pad, dilation, ceil_mode, count_include_pad=False):
    """NCHW pooling by loops over every output element and window position."""
    n_, c_, h_, w_ = x.shape
    kh, kw = pool
    sh, sw = strides
    dh, dw = dilation
    pt, pl, pb, pr = pad

    def out_dim(size, lo, hi, k, s, d):
        span = size + lo + hi - (d * (k - 1) + 1)
        return (math.ceil(span / s) if ceil_mode else span // s) + 1

    oh, ow = out_dim(h_, pt, pb, kh, sh, dh), out_dim(w_, pl, pr, kw, sw, dw)
    out = np.zeros((n_, c_, oh, ow))
    for n, c, i, j in itertools.product(range(n_), range(c_), range(oh), range(ow)):
        vals, covered = [], 0
        for a in range(kh):
            for b in range(kw):
                r = i * sh - pt + a * dh
                q = j * sw - pl + b * dw
                if 0 <= r < h_ and 0 <= q < w_:
                    vals.append(x[n, c, r, q])
                if -pt <= r < h_ + pb and -pl <= q < w_ + pr:
                    covered += 1
        if kind == "max":
            out[n, c, i, j] = max(vals) if vals else -np.inf
        else:
            count = covered if count_include_pad else len(vals)
            out[n, c, i, j] = sum(vals) / count if count else 0.0
    return out


def nchw_to_nhwc(a):
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1))


def nhwc_to_nchw(a):
    return np.ascontiguousarray(a.transpose(0, 3, 1, 2))


def oihw_to_hwio(a):
    return np.ascontiguousarray(a.transpose(2, 3, 1, 0))


# ---------------------------------------------------------------------------------------
# conv2d
# ---------------------------------------------------------------------------------------
CONV_CASES = [
    # (N, C, H, W), O, (kh, kw), strides, padding (builder form), dilation, groups
    ((1, 3, 7, 7), 4, (3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((2, 4, 9, 8), 6, (3, 2), (2, 1), (1, 2, 0, 1), (1, 1), 2),
    ((1, 4, 10, 10), 4, (3, 3), (2, 2), (2, 0, 1, 3), (2, 1), 4),     # depthwise, dilation
    ((1, 2, 6, 6), 6, (1, 1), (1, 1), 0, (1, 1), 2),                  # depthwise multiplier 3
    ((1, 3, 11, 9), 2, (5, 3), (3, 2), (3, 1), (1, 2), 1),
]


@pytest.mark.parametrize("dshape,o,k,strides,padding,dilation,groups", CONV_CASES)
def test_conv2d_nchw_matches_naive(dshape, o, k, strides, padding, dilation, groups):
    x = rand(*dshape)
    w = rand(o, dshape[1] // groups, *k)
    call = ir.nn.conv2d(v(), v("w"), strides=strides, padding=padding, dilation=dilation,
                        groups=groups, channels=o, kernel_size=k)
    got = run(call, x, w)
    want = naive_conv2d(x, w, strides, call.attrs.padding, dilation, groups)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dshape,o,k,strides,padding,dilation,groups", CONV_CASES)
def test_conv2d_nhwc_hwio_matches_naive(dshape, o, k, strides, padding, dilation, groups):
    x = rand(*dshape)
    w = rand(o, dshape[1] // groups, *k)
    call = ir.nn.conv2d(v(), v("w"), strides=strides, padding=padding, dilation=dilation, groups=groups,
                        data_layout="NHWC", kernel_layout="HWIO")
    got = run(call, nchw_to_nhwc(x), oihw_to_hwio(w))
    want = naive_conv2d(x, w, strides, call.attrs.padding, dilation, groups)
    np.testing.assert_allclose(nhwc_to_nchw(got), want, rtol=1e-4, atol=1e-4)


def test_conv2d_out_layout_and_out_dtype():
    x = rand(1, 2, 5, 5)
    w = rand(3, 2, 3, 3)
    call = ir.nn.conv2d(v(), v("w"), padding=1, out_layout="NHWC", out_dtype="float64")
    got = run(call, x, w)
    assert got.dtype == np.float64 and got.shape == (1, 5, 5, 3)
    np.testing.assert_allclose(nhwc_to_nchw(got), naive_conv2d(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 1),
                               rtol=1e-5)


def test_conv2d_int8_to_int32():
    x = RNG.integers(-100, 100, (1, 2, 4, 4)).astype("int8")
    w = RNG.integers(-100, 100, (2, 2, 3, 3)).astype("int8")
    got = run(ir.nn.conv2d(v(), v("w"), out_dtype="int32"), x, w)
    want = naive_conv2d(x.astype("float64"), w.astype("float64"), (1, 1), (0, 0, 0, 0), (1, 1), 1)
    np.testing.assert_array_equal(got, want.astype("int32"))


def test_conv2d_type_relation_fills_weight():
    rel = ir.Op.get("nn.conv2d").type_rel
    call = ir.nn.conv2d(v(), v("w"), strides=2, padding=3, channels=64, kernel_size=7)
    types = [T((1, 3, 224, 224)), None]
    assert rel(types, call.attrs) == T((1, 64, 112, 112))
    assert types[1] == T((64, 3, 7, 7))
    # NHWC / HWIO, grouped
    call = ir.nn.conv2d(v(), v("w"), padding=1, groups=2, channels=8, kernel_size=3,
                        data_layout="NHWC", kernel_layout="HWIO")
    types = [T((2, 10, 12, 4)), None]
    assert rel(types, call.attrs) == T((2, 10, 12, 8))
    assert types[1] == T((3, 3, 2, 8))
    # depthwise
    call = ir.nn.conv2d(v(), v("w"), padding=1, groups=32, channels=32, kernel_size=3)
    types = [T((1, 32, 8, 8)), None]
    assert rel(types, call.attrs) == T((1, 32, 8, 8))
    assert types[1] == T((32, 1, 3, 3))


def test_conv2d_type_errors():
    rel = ir.Op.get("nn.conv2d").type_rel
    call = ir.nn.conv2d(v(), v("w"))
    with pytest.raises(TypeInferenceError, match="nn.conv2d: data has 3 input channels but the weight expects 4"):
        rel([T((1, 3, 8, 8)), T((2, 4, 3, 3))], call.attrs)
    with pytest.raises(TypeInferenceError, match="nn.conv2d: .*channels and kernel_size"):
        rel([T((1, 3, 8, 8)), None], call.attrs)
    with pytest.raises(TypeInferenceError, match="channels=5"):
        rel([T((1, 3, 8, 8)), T((4, 3, 3, 3))], ir.nn.conv2d(v(), v("w"), channels=5).attrs)
    with pytest.raises(TypeInferenceError, match="does not fit"):
        rel([T((1, 3, 2, 2)), T((4, 3, 3, 3))], call.attrs)
    with pytest.raises(TypeInferenceError, match="dtype mismatch"):
        rel([T((1, 3, 8, 8)), T((4, 3, 3, 3), "float16")], call.attrs)
    with pytest.raises(TypeInferenceError, match="not divisible by groups=2"):
        rel([T((1, 3, 8, 8)), T((4, 1, 3, 3))], ir.nn.conv2d(v(), v("w"), groups=2).attrs)


def test_conv2d_attr_checks():
    with pytest.raises(IRError, match="nn.conv2d.*strides"):
        ir.nn.conv2d(v(), v("w"), strides=(1, 0))
    with pytest.raises(IRError, match="nn.conv2d.*groups"):
        ir.nn.conv2d(v(), v("w"), groups=0)
    with pytest.raises(IRError, match="nn.conv2d.*data_layout"):
        ir.nn.conv2d(v(), v("w"), data_layout="NCHW4c")
    with pytest.raises(IRError, match="padding"):
        ir.nn.conv2d(v(), v("w"), padding=(1, 2, 3))


def test_unknown_attribute_names_op_and_known_attrs():
    with pytest.raises(IRError) as err:
        ir.Call(ir.Op.get("nn.conv2d"), [v(), v("w")], {"stride": (1, 1)})
    msg = str(err.value)
    assert "nn.conv2d" in msg and "'stride'" in msg and "strides" in msg and "kernel_layout" in msg
    with pytest.raises(IRError, match="add has no attribute 'axis'.*none"):
        ir.Call(ir.Op.get("add"), [v(), v("y")], {"axis": 1})


# ---------------------------------------------------------------------------------------
# pooling
# ---------------------------------------------------------------------------------------
POOL_CASES = [
    # pool, strides, padding, dilation, ceil_mode
    ((3, 3), (2, 2), (1, 1), (1, 1), False),
    ((3, 3), (2, 2), (1, 1), (1, 1), True),
    ((2, 3), (2, 3), (0, 1, 1, 0), (1, 1), True),
    ((2, 2), (1, 2), (1, 0, 0, 1), (2, 1), False),
    ((3, 2), (3, 2), (0, 0), (1, 1), True),
]


@pytest.mark.parametrize("pool,strides,padding,dilation,ceil_mode", POOL_CASES)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_max_pool2d_matches_naive(pool, strides, padding, dilation, ceil_mode, layout):
    x = rand(2, 3, 8, 7)
    call = ir.nn.max_pool2d(v(), pool, strides, dilation, padding, layout=layout, ceil_mode=ceil_mode)
    want = naive_pool(x, "max", pool, strides, call.attrs.padding, dilation, ceil_mode)
    got = run(call, nchw_to_nhwc(x) if layout == "NHWC" else x)
    np.testing.assert_allclose(nhwc_to_nchw(got) if layout == "NHWC" else got, want, rtol=1e-6)


@pytest.mark.parametrize("pool,strides,padding,dilation,ceil_mode", POOL_CASES)
@pytest.mark.parametrize("count_include_pad", [False, True])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_avg_pool2d_matches_naive(pool, strides, padding, dilation, ceil_mode, count_include_pad, layout):
    x = rand(1, 2, 8, 7)
    call = ir.nn.avg_pool2d(v(), pool, strides, dilation, padding, layout=layout, ceil_mode=ceil_mode,
                            count_include_pad=count_include_pad)
    want = naive_pool(x, "avg", pool, strides, call.attrs.padding, dilation, ceil_mode, count_include_pad)
    got = run(call, nchw_to_nhwc(x) if layout == "NHWC" else x)
    np.testing.assert_allclose(nhwc_to_nchw(got) if layout == "NHWC" else got, want, rtol=1e-5, atol=1e-6)


def test_pool_type_relations():
    rel = ir.Op.get("nn.max_pool2d").type_rel
    call = ir.nn.max_pool2d(v(), pool_size=3, strides=2, padding=1)
    assert rel([T((1, 64, 112, 112))], call.attrs) == T((1, 64, 56, 56))
    ceil = ir.nn.max_pool2d(v(), pool_size=3, strides=2, ceil_mode=True)
    assert rel([T((1, 1, 8, 8))], ceil.attrs) == T((1, 1, 4, 4))
    assert rel([T((1, 1, 8, 8))], ir.nn.max_pool2d(v(), pool_size=3, strides=2).attrs) == T((1, 1, 3, 3))
    nhwc = ir.nn.avg_pool2d(v(), pool_size=2, strides=2, layout="NHWC")
    assert ir.Op.get("nn.avg_pool2d").type_rel([T((1, 8, 6, 5))], nhwc.attrs) == T((1, 4, 3, 5))
    with pytest.raises(TypeInferenceError, match="nn.max_pool2d: pool_size"):
        rel([T((1, 1, 2, 2))], ir.nn.max_pool2d(v(), pool_size=3).attrs)
    with pytest.raises(TypeInferenceError, match="4-D"):
        rel([T((1, 2, 2))], call.attrs)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_global_avg_pool2d(layout):
    x = rand(2, 3, 5, 4)
    call = ir.nn.global_avg_pool2d(v(), layout=layout)
    got = run(call, nchw_to_nhwc(x) if layout == "NHWC" else x)
    got = nhwc_to_nchw(got) if layout == "NHWC" else got
    want = np.zeros((2, 3, 1, 1))
    for n, c in itertools.product(range(2), range(3)):
        want[n, c, 0, 0] = sum(float(x[n, c, i, j]) for i in range(5) for j in range(4)) / 20
    np.testing.assert_allclose(got, want, rtol=1e-5)


# ---------------------------------------------------------------------------------------
# normalisation, softmax, dense, bias_add, dropout
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("center,scale", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("axis", [1, 3, -1])
def test_batch_norm_matches_naive(center, scale, axis):
    x = rand(2, 3, 4, 3)
    c = x.shape[axis]
    gamma, beta, mean = rand(c), rand(c), rand(c)
    var = np.abs(rand(c)) + 0.1
    call = ir.nn.batch_norm(v(), v("g"), v("b"), v("m"), v("v"), axis=axis, epsilon=2e-5, center=center, scale=scale)
    out, m_out, v_out = run(call, x, gamma, beta, mean, var)
    want = np.zeros(x.shape)
    ax = axis % 4
    for idx in itertools.product(*map(range, x.shape)):
        k = idx[ax]
        y = (x[idx] - mean[k]) / math.sqrt(var[k] + 2e-5)
        if scale:
            y *= gamma[k]
        if center:
            y += beta[k]
        want[idx] = y
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(m_out, mean)
    np.testing.assert_array_equal(v_out, var)


def test_batch_norm_type_relation():
    rel = ir.Op.get("nn.batch_norm").type_rel
    attrs = ir.nn.batch_norm(v(), v("g"), v("b"), v("m"), v("v")).attrs
    types = [T((1, 64, 8, 8)), None, T((64,)), None, None]
    out = rel(types, attrs)
    assert out == TupleType([T((1, 64, 8, 8)), T((64,)), T((64,))])
    assert types[1] == types[3] == types[4] == T((64,))
    assert out.fields[0] is types[0]
    with pytest.raises(TypeInferenceError, match=r"nn.batch_norm: beta has type Tensor\[\(3\), float32\].*64"):
        rel([T((1, 64, 8, 8)), None, T((3,)), None, None], attrs)


def test_layer_and_instance_norm_match_naive():
    x = rand(2, 3, 5)
    gamma, beta = rand(5), rand(5)
    got = run(ir.nn.layer_norm(v(), v("g"), v("b"), epsilon=1e-3), x, gamma, beta)
    want = np.zeros(x.shape)
    for i, j in itertools.product(range(2), range(3)):
        row = [float(t) for t in x[i, j]]
        mu = sum(row) / 5
        var = sum((t - mu) ** 2 for t in row) / 5
        for k in range(5):
            want[i, j, k] = (row[k] - mu) / math.sqrt(var + 1e-3) * gamma[k] + beta[k]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)

    x = rand(2, 3, 4, 2)
    gamma, beta = rand(3), rand(3)
    got = run(ir.nn.instance_norm(v(), v("g"), v("b")), x, gamma, beta)
    want = np.zeros(x.shape)
    for n, c in itertools.product(range(2), range(3)):
        vals = [float(t) for t in x[n, c].ravel()]
        mu = sum(vals) / len(vals)
        var = sum((t - mu) ** 2 for t in vals) / len(vals)
        want[n, c] = (x[n, c] - mu) / math.sqrt(var + 1e-5) * gamma[c] + beta[c]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    types = [T((2, 3, 4, 2)), None, None]
    assert ir.Op.get("nn.instance_norm").type_rel(types, ir.nn.instance_norm(v(), v(), v()).attrs) is types[0]
    assert types[1] == types[2] == T((3,))


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_matches_naive(axis):
    x = rand(3, 4) * 10
    got = run(ir.nn.softmax(v(), axis=axis), x)
    want = np.zeros(x.shape)
    ax = axis % 2
    for fixed in range(x.shape[1 - ax]):
        line = [float(x[i, fixed]) if ax == 0 else float(x[fixed, i]) for i in range(x.shape[ax])]
        z = sum(math.exp(t) for t in line)
        for i, t in enumerate(line):
            want[(i, fixed) if ax == 0 else (fixed, i)] = math.exp(t) / z
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_softmax_large_values_no_warning():
    x = np.array([[1000.0, 1000.0, -1000.0]], dtype="float32")
    np.testing.assert_allclose(run(ir.nn.softmax(v()), x), [[0.5, 0.5, 0.0]], atol=1e-6)


def test_dense_and_bias_add_match_naive():
    x, w, b = rand(2, 3, 5), rand(4, 5), rand(4)
    got = run(ir.nn.dense(v(), v("w"), units=4), x, w)
    want = np.zeros((2, 3, 4))
    for i, j, u in itertools.product(range(2), range(3), range(4)):
        want[i, j, u] = sum(float(x[i, j, k]) * float(w[u, k]) for k in range(5))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    got = run(ir.nn.bias_add(v(), v("b"), axis=-1), want.astype("float32"), b)
    np.testing.assert_allclose(got, want + b, rtol=1e-5)
    y, c = rand(2, 4, 3, 3), rand(4)
    got = run(ir.nn.bias_add(v(), v("b")), y, c)
    want2 = y.copy()
    for ch in range(4):
        want2[:, ch] += c[ch]
    np.testing.assert_allclose(got, want2, rtol=1e-6)


def test_dense_and_bias_add_type_relations():
    dense = ir.Op.get("nn.dense").type_rel
    types = [T((1, 512)), None]
    assert dense(types, ir.nn.dense(v(), v("w"), units=1000).attrs) == T((1, 1000))
    assert types[1] == T((1000, 512))
    with pytest.raises(TypeInferenceError, match="nn.dense: data .* has 512 input features"):
        dense([T((1, 512)), T((10, 256))], ir.nn.dense(v(), v("w")).attrs)
    with pytest.raises(TypeInferenceError, match="units"):
        dense([T((1, 512)), None], ir.nn.dense(v(), v("w")).attrs)
    bias = ir.Op.get("nn.bias_add").type_rel
    types = [T((1, 1000)), None]
    assert bias(types, ir.nn.bias_add(v(), v("b"), axis=-1).attrs) is types[0]
    assert types[1] == T((1000,))
    with pytest.raises(TypeInferenceError, match="nn.bias_add: the bias has type"):
        bias([T((1, 8, 2, 2)), T((4,))], ir.nn.bias_add(v(), v("b")).attrs)


def test_dropout_is_stateful_identity_at_inference():
    call = ir.nn.dropout(v(), rate=0.3)
    assert isinstance(call, ir.TupleGetItem) and call.index == 0
    op = call.tuple_value.op
    assert op.name == "nn.dropout" and op.stateful and op.pattern == OpPattern.OPAQUE
    x = rand(3, 4)
    out, mask = run(call.tuple_value, x)
    np.testing.assert_array_equal(out, x)
    np.testing.assert_array_equal(mask, np.ones_like(x))
    assert op.type_rel([T((3, 4))], call.tuple_value.attrs) == TupleType([T((3, 4)), T((3, 4))])
    with pytest.raises(IRError, match="rate"):
        ir.nn.dropout(v(), rate=1.5)


# ---------------------------------------------------------------------------------------
# element-wise and broadcasting
# ---------------------------------------------------------------------------------------
def test_unary_kernels():
    x = np.array([[-2.0, -0.5, 0.0], [0.25, 1.0, 3.0]], dtype="float32")
    pos = np.abs(x) + 0.5
    cases = [
        (ir.negative, x, [[-t for t in row] for row in x.tolist()]),
        (ir.exp, x, [[math.exp(t) for t in row] for row in x.tolist()]),
        (ir.log, pos, [[math.log(t) for t in row] for row in pos.tolist()]),
        (ir.sqrt, pos, [[math.sqrt(t) for t in row] for row in pos.tolist()]),
        (ir.rsqrt, pos, [[1 / math.sqrt(t) for t in row] for row in pos.tolist()]),
        (ir.sigmoid, x, [[1 / (1 + math.exp(-t)) for t in row] for row in x.tolist()]),
        (ir.tanh, x, [[math.tanh(t) for t in row] for row in x.tolist()]),
        (ir.nn.relu, x, [[t if t > 0 else 0.0 for t in row] for row in x.tolist()]),
        (lambda e: ir.nn.leaky_relu(e, 0.1), x, [[t if t > 0 else 0.1 * t for t in row] for row in x.tolist()]),
        (lambda e: ir.clip(e, -1, 0.5), x, [[min(max(t, -1.0), 0.5) for t in row] for row in x.tolist()]),
        (ir.stop_fusion, x, x.tolist()),
    ]
    for build, arr, want in cases:
        call = build(v())
        assert call.op.pattern == (OpPattern.OPAQUE if call.op.name == "annotation.stop_fusion"
                                   else OpPattern.ELEMWISE)
        np.testing.assert_allclose(run(call, arr), want, rtol=1e-6, err_msg=call.op.name)


def test_unary_edge_values_emit_no_warnings():
    x = np.array([-1.0, 0.0, 1e30], dtype="float32")
    assert np.isnan(run(ir.log(v()), x)[0]) and run(ir.log(v()), x)[1] == -np.inf
    assert np.isinf(run(ir.exp(v()), x)[2])
    assert np.isinf(run(ir.rsqrt(v()), x)[1])


def test_binary_kernels_broadcast():
    a, b = rand(2, 1, 3), rand(4, 1) + 3.0
    for build, fn in [(ir.add, lambda p, q: p + q), (ir.subtract, lambda p, q: p - q),
                      (ir.multiply, lambda p, q: p * q), (ir.divide, lambda p, q: p / q),
                      (ir.maximum, max), (ir.minimum, min), (ir.power, lambda p, q: abs(p) ** q)]:
        left = np.abs(a) if build is ir.power else a
        got = run(build(v(), v("y")), left, b)
        want = np.zeros((2, 4, 3))
        for i, j, k in itertools.product(range(2), range(4), range(3)):
            want[i, j, k] = fn(float(a[i, 0, k]), float(b[j, 0]))
        np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=build.__name__)


def test_integer_division_truncates_and_survives_zero():
    a = np.array([7, -7, 7, -7, 1, 5], dtype="int32")
    b = np.array([2, 2, -2, -2, 0, 5], dtype="int32")
    np.testing.assert_array_equal(run(ir.divide(v(), v("y")), a, b), [3, -3, -3, 3, 0, 1])


def test_comparisons_and_where():
    a = np.array([1.0, 2.0, 3.0], dtype="float32")
    b = np.array([2.0], dtype="float32")
    for build, fn in [(ir.less, lambda p, q: p < q), (ir.greater, lambda p, q: p > q),
                      (ir.equal, lambda p, q: p == q), (ir.not_equal, lambda p, q: p != q),
                      (ir.less_equal, lambda p, q: p <= q), (ir.greater_equal, lambda p, q: p >= q)]:
        got = run(build(v(), v("y")), a, b)
        assert got.dtype == np.bool_
        assert got.tolist() == [fn(float(t), 2.0) for t in a]
    cond = np.array([[True], [False]])
    got = run(ir.where(v("c"), v(), v("y")), cond, a, np.float32(-1) * np.ones((1, 3), "float32"))
    assert got.tolist() == [[1.0, 2.0, 3.0], [-1.0, -1.0, -1.0]]


def test_cast_and_shape_of():
    x = np.array([1.7, -2.2], dtype="float32")
    got = run(ir.cast(v(), "int32"), x)
    assert got.dtype == np.int32 and got.tolist() == [1, -2]
    got = run(ir.shape_of(v()), rand(2, 5, 3))
    assert got.dtype == np.int32 and got.tolist() == [2, 5, 3]
    assert ir.Op.get("shape_of").type_rel([T((2, 5, 3))], ir.shape_of(v(), "int64").attrs) == T((3,), "int64")
    with pytest.raises(IRError, match="cast.*dtype"):
        ir.Call(ir.Op.get("cast"), [v()], {"dtype": "float31"})


def test_binary_type_relation_reuses_objects_and_fills_unknown():
    rel = ir.Op.get("add").type_rel
    big, row = T((4, 3)), T((3,))
    assert rel([big, row], ir.add(v(), v()).attrs) is big
    assert rel([row, big], ir.add(v(), v()).attrs) is big
    assert rel([big, T((4, 3))], ir.add(v(), v()).attrs) is big
    assert rel([T((4, 1)), row], None) == T((4, 3))
    types = [None, big]
    assert rel(types, None) is big and types[0] is big
    types = [big, None]
    assert rel(types, None) is big and types[1] is big
    assert ir.Op.get("less").type_rel([big, row], None) == T((4, 3), "bool")


def test_binary_type_errors():
    with pytest.raises(TypeInferenceError, match=r"add: cannot broadcast Tensor\[\(2, 3\), float32\] "
                                                 r"with Tensor\[\(4\), float32\]"):
        ir.Op.get("add").type_rel([T((2, 3)), T((4,))], None)
    with pytest.raises(TypeInferenceError, match="multiply: dtype mismatch"):
        ir.Op.get("multiply").type_rel([T((2, 3)), T((2, 3), "int32")], None)
    with pytest.raises(TypeInferenceError, match="subtract: the type of the left operand is unknown"):
        ir.Op.get("subtract").type_rel([None, None], None)
    with pytest.raises(TypeInferenceError, match="add: the right operand must be a tensor"):
        ir.Op.get("add").type_rel([T((2,)), TupleType([T((2,))])], None)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_mod_truncates_and_floor_mod_floors_as_tvm(dtype):
    """TVM's ``mod`` takes the dividend's sign (C's fmod); ``floor_mod`` the divisor's."""
    a = np.array([5, -5, 5, -5, 6], dtype=dtype)
    b = np.array([3, 3, -3, -3, 3], dtype=dtype)
    x, y = ir.var("x", shape=(5,), dtype=dtype), ir.var("y", shape=(5,), dtype=dtype)
    got_mod = ir.evaluate(ir.Function([x, y], ir.mod(x, y)), a, b)
    got_floor = ir.evaluate(ir.Function([x, y], ir.floor_mod(x, y)), a, b)
    np.testing.assert_array_equal(got_mod, np.array([2, -2, 2, -2, 0], dtype=dtype))
    np.testing.assert_array_equal(got_floor, np.array([2, 1, -1, -2, 0], dtype=dtype))
    assert got_mod.dtype == got_floor.dtype == np.dtype(dtype)
    assert ir.Op.get("mod").pattern == ir.Op.get("floor_mod").pattern == ir.OpPattern.BROADCAST


@pytest.mark.parametrize("equation, shapes", [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ij->ji", [(2, 3)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]),
    ("...ij,...jk", [(2, 1, 3, 4), (5, 4, 6)]), ("i,i", [(4,), (4,)]), ("ij,j->i", [(3, 1), (5,)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]), ("i...->...", [(2, 3, 4)]), ("ba,ca", [(2, 3), (4, 3)]),
])
def test_einsum_types_and_computes_as_numpy(equation, shapes):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    params = [ir.var(f"x{i}", shape=s) for i, s in enumerate(shapes)]
    fn = ir.infer_type(ir.Function(params, ir.einsum(params, equation)))
    want = np.einsum(equation, *arrays)
    assert tuple(fn.checked_type.ret_type.shape) == want.shape
    np.testing.assert_allclose(ir.evaluate(fn, *arrays), want, rtol=1e-5, atol=1e-6)
    assert ir.Op.get("einsum").pattern == ir.OpPattern.INJECTIVE


@pytest.mark.parametrize("equation, shapes, message", [
    ("ij,jk->ik", [(2, 3), (4, 5)], "label 'j' is 3 in one operand and 4 in another"),
    ("ij->ik", [(2, 3)], "output label 'k' is in no operand"),
    ("ijk->i", [(2, 3)], "term 'ijk' labels 3 axes, its operand has 2"),
    ("ij,jk", [(2, 3)], "has 2 operand term"),
    ("...i,...i->i", [(2, 3), (4, 3)], "do not broadcast"),
])
def test_einsum_errors_name_the_equation(equation, shapes, message):
    params = [ir.var(f"x{i}", shape=s) for i, s in enumerate(shapes)]
    with pytest.raises(TypeInferenceError, match=message):
        ir.infer_type(ir.Function(params, ir.einsum(params, equation)))


def test_gather_nd_and_scatter_nd_use_tvms_index_layout():
    rng = np.random.default_rng(0)
    data = rng.standard_normal((2, 3, 4)).astype(np.float32)
    idx = np.array([[0, 1, -1], [2, 0, 1]])            # (M=2, Y=3): coordinates on the first axis
    d, i = ir.var("d", shape=(2, 3, 4)), ir.var("i", shape=(2, 3), dtype="int64")
    got = ir.evaluate(ir.Function([d, i], ir.gather_nd(d, i)), data, idx)
    np.testing.assert_array_equal(got, data[[0, 1, 1], [2, 0, 1]])
    u = ir.var("u", shape=(3, 4))
    upd = np.ones((3, 4), np.float32)
    got = ir.evaluate(ir.Function([d, i, u], ir.scatter_nd(d, i, u, "add")), data, idx, upd)
    want = data.copy()
    np.add.at(want, ([0, 1, 1], [2, 0, 1]), upd)
    np.testing.assert_array_equal(got, want)
    with pytest.raises(TypeInferenceError, match=r"scatter_nd: updates Tensor\[\(4, 4\), float32\] must have shape "
                                                 r"\(3, 4\)"):
        ir.infer_type(ir.Function([d, i, ir.var("w", shape=(4, 4))], ir.scatter_nd(d, i, ir.var("w", shape=(4, 4)))))


@pytest.mark.parametrize("reduction", ["update", "add", "mul", "min", "max"])
def test_scatter_elements_reductions(reduction):
    data = np.arange(9, dtype=np.float32).reshape(3, 3)
    idx = np.array([[1, 0, 2], [-1, 0, 1]])
    upd = np.array([[10, 20, 30], [40, 50, 60]], np.float32)
    d, i, u = ir.var("d", shape=(3, 3)), ir.var("i", shape=(2, 3), dtype="int64"), ir.var("u", shape=(2, 3))
    got = ir.evaluate(ir.Function([d, i, u], ir.scatter_elements(d, i, u, 0, reduction)), data, idx, upd)
    want = data.copy()
    rows, cols = np.where(idx < 0, idx + 3, idx), np.broadcast_to(np.arange(3), (2, 3))
    if reduction == "update":
        want[rows, cols] = upd
    else:
        {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}[reduction].at(want, (rows, cols), upd)
    np.testing.assert_array_equal(got, want)
    with pytest.raises(IRError, match="reduction must be one of update, add, mul, min, max"):
        ir.scatter_elements(d, i, u, 0, "sum")


@pytest.mark.parametrize("name, ref", [("tan", np.tan), ("asin", np.arcsin), ("acos", np.arccos), ("atan", np.arctan),
                                       ("sinh", np.sinh), ("cosh", np.cosh), ("asinh", np.arcsinh),
                                       ("acosh", np.arccosh), ("atanh", np.arctanh)])
def test_trigonometric_and_hyperbolic_unary_ops(name, ref):
    x = np.array([0.1, 0.5, -0.7], np.float32) if name != "acosh" else np.array([1.0, 1.5, 3.0], np.float32)
    np.testing.assert_allclose(run(getattr(ir, name)(v()), x), ref(x), rtol=1e-6)
    assert ir.Op.get(name).pattern == ir.OpPattern.ELEMWISE


def test_bitwise_ops_and_shifts_as_onnx_defines_them():
    a = np.array([-8, 4, -1, 5], np.int8)
    b = np.array([1, 9, 8, -1], np.int8)
    x, y = ir.var("x", shape=(4,), dtype="int8"), ir.var("y", shape=(4,), dtype="int8")

    def ev(expr):
        return ir.evaluate(ir.Function([x, y], expr), a, b)

    np.testing.assert_array_equal(ev(ir.bitwise_and(x, y)), a & b)
    np.testing.assert_array_equal(ev(ir.bitwise_xor(x, y)), a ^ b)
    np.testing.assert_array_equal(ev(ir.bitwise_not(x)), ~a)
    # a shift by a negative amount or by 8 or more: 0, or the sign shifting right
    np.testing.assert_array_equal(ev(ir.left_shift(x, y)), np.array([-16, 0, 0, 0], np.int8))
    np.testing.assert_array_equal(ev(ir.right_shift(x, y)), np.array([-4, 0, -1, 0], np.int8))
    # a float shift types as TVM's BroadcastRel types it (issue 37); only computing it fails
    f = ir.var("f", shape=(4,))
    typed = ir.infer_type(ir.IRModule.from_expr(ir.Function([f], ir.left_shift(f, f))))
    assert typed["main"].body.checked_type == ir.TensorType((4,), "float32")
    with pytest.raises(ir.EvaluationError, match="left_shift: no kernel shifts float32"):
        ir.evaluate(typed, np.ones(4, "float32"))


def _naive_conv3d(x, w, s, p, d, g):
    xp = np.pad(x, ((0, 0), (0, 0)) + tuple((q, q) for q in p))
    _, _, dd, hh, ww = xp.shape
    o, ig, kd, kh, kw = w.shape
    out = [(size - dil * (k - 1) - 1) // st + 1 for size, k, st, dil in zip((dd, hh, ww), (kd, kh, kw), s, d)]
    res = np.zeros((x.shape[0], o, *out))
    for n in range(x.shape[0]):
        for oc in range(o):
            gi = oc // (o // g)
            for a in range(out[0]):
                for b in range(out[1]):
                    for c in range(out[2]):
                        patch = xp[n, gi * ig:(gi + 1) * ig,
                                   a * s[0]:a * s[0] + d[0] * (kd - 1) + 1:d[0],
                                   b * s[1]:b * s[1] + d[1] * (kh - 1) + 1:d[1],
                                   c * s[2]:c * s[2] + d[2] * (kw - 1) + 1:d[2]]
                        res[n, oc, a, b, c] = (patch * w[oc]).sum()
    return res


@pytest.mark.parametrize("groups", [1, 2])
def test_conv3d_matches_a_naive_loop(groups):
    rng = np.random.default_rng(groups)
    x = rng.standard_normal((2, 4, 5, 6, 7)).astype(np.float32)
    w = rng.standard_normal((6, 4 // groups, 3, 2, 3)).astype(np.float32)
    xv, wv = ir.var("x", shape=x.shape), ir.var("w", shape=w.shape)
    fn = ir.Function([xv, wv], ir.nn.conv3d(xv, wv, strides=(1, 2, 1), padding=(1, 0, 1), dilation=(1, 1, 2),
                                            groups=groups))
    want = _naive_conv3d(x, w, (1, 2, 1), (1, 0, 1), (1, 1, 2), groups)
    np.testing.assert_allclose(ir.evaluate(fn, x, w), want, rtol=1e-4, atol=1e-4)
    assert tuple(ir.infer_type(fn).checked_type.ret_type.shape) == want.shape


def test_pool3d_windows_padding_and_ceil_mode():
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(1, 2, 3, 4, 5)
    xv = ir.var("x", shape=x.shape)
    got = ir.evaluate(ir.Function([xv], ir.nn.max_pool3d(xv, (2, 2, 2), (2, 2, 2), ceil_mode=True)), x)
    assert got.shape == (1, 2, 2, 2, 3)
    assert got[0, 0, 1, 1, 2] == x[0, 0, 2, 3, 4]   # a last window that hangs over the end
    got = ir.evaluate(ir.Function([xv], ir.nn.avg_pool3d(xv, (1, 1, 3), padding=(0, 0, 1))), x)
    assert got[0, 0, 0, 0, 0] == (x[0, 0, 0, 0, 0] + x[0, 0, 0, 0, 1]) / 2     # the pad is not counted
    got = ir.evaluate(ir.Function([xv], ir.nn.avg_pool3d(xv, (1, 1, 3), padding=(0, 0, 1), count_include_pad=True)), x)
    assert got[0, 0, 0, 0, 0] == (x[0, 0, 0, 0, 0] + x[0, 0, 0, 0, 1]) / 3
    with pytest.raises(IRError, match="attribute layout must be 'NCDHW'"):
        ir.Call(ir.Op.get("nn.max_pool3d"), [xv], {"pool_size": (1, 1, 1), "layout": "NDHWC"})


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("exclusive", [False, True])
def test_cumprod_matches_numpy(axis, exclusive):
    x = np.array([[1, 2, 0, 3], [2, -1, 4, 5]], np.int32)
    got = ir.evaluate(ir.Function([v2 := ir.var("x", shape=(2, 4), dtype="int32")],
                                  ir.cumprod(v2, axis=axis, exclusive=exclusive)), x)
    flat = x.reshape(-1) if axis is None else x
    ax = 0 if axis is None else axis % 2
    want = np.cumprod(flat, axis=ax)
    if exclusive:
        want = np.concatenate([np.ones_like(np.take(want, [0], axis=ax)), np.delete(want, -1, axis=ax)], axis=ax)
    np.testing.assert_array_equal(got, want)


def test_reverse_sequence_reverses_each_batch_entrys_prefix():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)     # (batch, time)
    lens = np.array([4, 0, 2], np.int64)
    xv, lv = ir.var("x", shape=(3, 4)), ir.var("l", shape=(3,), dtype="int64")
    got = ir.evaluate(ir.Function([xv, lv], ir.reverse_sequence(xv, lv, seq_axis=1, batch_axis=0)), x, lens)
    np.testing.assert_array_equal(got, [[3, 2, 1, 0], [4, 5, 6, 7], [9, 8, 10, 11]])
    with pytest.raises(TypeInferenceError, match="seq_lengths .* must be one length per batch entry"):
        ir.infer_type(ir.Function([xv, lv], ir.reverse_sequence(xv, lv, seq_axis=0, batch_axis=1)))


@pytest.mark.parametrize("method", ["nearest", "bilinear", "bicubic"])
def test_grid_sample_on_the_identity_grid_returns_the_data(method):
    x = np.random.default_rng(0).standard_normal((1, 2, 3, 4)).astype(np.float32)
    ys, xs = np.meshgrid(np.linspace(-1, 1, 3), np.linspace(-1, 1, 4), indexing="ij")
    grid = np.stack([xs, ys])[None].astype(np.float32)     # (1, 2, 3, 4): x first
    xv, gv = ir.var("x", shape=x.shape), ir.var("g", shape=grid.shape)
    fn = ir.Function([xv, gv], ir.image.grid_sample(xv, gv, method=method, align_corners=True))
    np.testing.assert_allclose(ir.evaluate(fn, x, grid), x, atol=1e-5)
    with pytest.raises(TypeInferenceError, match="the grid .* must be"):
        ir.infer_type(ir.Function([xv, gv], ir.image.grid_sample(xv, ir.var("h", shape=(1, 3, 3, 4)))))


# ---------------------------------------------------------------------------------------
# shape operators
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("ishape,newshape,oshape", [
    ((2, 3, 4), (6, 4), (6, 4)),
    ((2, 3, 4), (-1,), (24,)),
    ((2, 3, 4), (0, -1), (2, 12)),
    ((2, 3, 4), (-2,), (2, 3, 4)),
    ((2, 3, 4), (2, -2), (2, 3, 4)),
    ((2, 3, 4), (-3, 4), (6, 4)),
    ((2, 3, 4), (-4, 1, 2, -2), (1, 2, 3, 4)),
    ((2, 12), (0, -4, -1, 3), (2, 4, 3)),
])
def test_reshape_codes(ishape, newshape, oshape):
    x = rand(*ishape)
    got = run(ir.reshape(v(), newshape), x)
    assert got.shape == oshape
    np.testing.assert_array_equal(got.ravel(), x.ravel())


def test_reshape_allowzero_makes_a_zero_an_empty_axis():
    """TVM's (and ONNX's) allowzero: a 0 is a dimension of size 0, not "copy the input's"."""
    x = np.zeros((0, 3, 4), np.float32)
    assert run(ir.reshape(v(), (3, 4, 0), allowzero=True), x).shape == (3, 4, 0)
    rel = ir.Op.get("reshape").type_rel
    assert rel([T((2, 3, 4))], ir.reshape(v(), (0, 12)).attrs).shape == (2, 12)
    with pytest.raises(TypeInferenceError, match=r"24 elements do not fit 0"):
        rel([T((2, 3, 4))], ir.reshape(v(), (0, 12), allowzero=True).attrs)
    call = ir.reshape(ir.var("x", shape=(0, 3)), (3, 0), allowzero=True)
    mod = ir.IRModule.from_expr(ir.Function(call.args, call))
    text = mod.astext()
    assert "allowzero=True" in text and ir.structural_equal(ir.infer_type(ir.parse(text)), ir.infer_type(mod))


def test_reshape_errors():
    rel = ir.Op.get("reshape").type_rel
    with pytest.raises(TypeInferenceError, match=r"reshape: cannot reshape \(2, 3\) to newshape=\[4, -1\]"):
        rel([T((2, 3))], ir.reshape(v(), (4, -1)).attrs)
    with pytest.raises(TypeInferenceError, match="only one -1"):
        rel([T((2, 3))], ir.reshape(v(), (-1, -1)).attrs)
    with pytest.raises(TypeInferenceError, match="do not fit"):
        rel([T((2, 3))], ir.reshape(v(), (5,)).attrs)
    t = T((2, 3))
    assert rel([t], ir.reshape(v(), (2, 3)).attrs) is t


def test_transpose_expand_squeeze():
    x = rand(2, 3, 4)
    got = run(ir.transpose(v(), (1, -1, 0)), x)
    assert got.shape == (3, 4, 2) and got[2, 1, 0] == x[0, 2, 1]
    got = run(ir.transpose(v()), x)
    assert got.shape == (4, 3, 2) and got[3, 2, 1] == x[1, 2, 3]
    assert run(ir.expand_dims(v(), 1, 2), x).shape == (2, 1, 1, 3, 4)
    assert run(ir.expand_dims(v(), -1), x).shape == (2, 3, 4, 1)
    y = rand(1, 3, 1, 2)
    assert run(ir.squeeze(v()), y).shape == (3, 2)
    assert run(ir.squeeze(v(), [2]), y).shape == (1, 3, 2)
    with pytest.raises(TypeInferenceError, match="squeeze: axis 1 has size 3"):
        ir.Op.get("squeeze").type_rel([T((1, 3))], ir.squeeze(v(), [1]).attrs)
    with pytest.raises(TypeInferenceError, match="transpose: axes .* not a permutation"):
        ir.Op.get("transpose").type_rel([T((1, 3))], ir.transpose(v(), (0, 0)).attrs)
    with pytest.raises(TypeInferenceError, match="expand_dims: axis=4 is out of range"):
        ir.Op.get("expand_dims").type_rel([T((1, 3))], ir.expand_dims(v(), 4).attrs)


def test_concatenate_and_split():
    a, b = rand(2, 3), rand(2, 5)
    call = ir.concatenate([v(), v("y")], axis=1)
    assert isinstance(call.args[0], ir.Tuple) and len(call.args) == 1
    got = run(call, [a, b])
    assert got.shape == (2, 8)
    assert got[1, 4] == b[1, 1] and got[0, 2] == a[0, 2]
    with pytest.raises(TypeInferenceError, match="concatenate: .* differ outside axis 0"):
        call.op.type_rel([TupleType([T((2, 3)), T((2, 5))])], ir.concatenate([v(), v()]).attrs)
    x = rand(6, 4)
    parts = run(ir.split(v(), 3), x)
    assert [p.shape for p in parts] == [(2, 4)] * 3
    np.testing.assert_array_equal(parts[2], x[4:])
    parts = run(ir.split(v(), [1, 3], axis=1), x)
    assert [p.shape for p in parts] == [(6, 1), (6, 2), (6, 1)]
    np.testing.assert_array_equal(parts[1], x[:, 1:3])
    with pytest.raises(TypeInferenceError, match="split: cannot split an axis of size 6 into 4"):
        ir.Op.get("split").type_rel([T((6, 4))], ir.split(v(), 4).attrs)
    assert isinstance(ir.split(v(), 2)[1], ir.TupleGetItem)


def test_batch_flatten():
    x = rand(2, 3, 2, 2)
    got = run(ir.nn.batch_flatten(v()), x)
    assert got.shape == (2, 12) and got[1, 5] == x[1, 1, 0, 1]


@pytest.mark.parametrize("src,dst,perm", [("NCHW", "NHWC", (0, 2, 3, 1)), ("NHWC", "NCHW", (0, 3, 1, 2)),
                                          ("OIHW", "HWIO", (2, 3, 1, 0)), ("HWIO", "OIHW", (3, 2, 0, 1))])
def test_layout_transform_round_trip(src, dst, perm):
    x = rand(2, 3, 4, 5)
    fwd = run(ir.layout_transform(v(), src, dst), x)
    for idx in itertools.product(*map(range, x.shape)):
        assert fwd[tuple(idx[p] for p in perm)] == x[idx]
    back = run(ir.layout_transform(v(), dst, src), fwd)
    np.testing.assert_array_equal(back, x)


def test_layout_transform_errors():
    rel = ir.Op.get("layout_transform").type_rel
    with pytest.raises(TypeInferenceError, match="layout_transform: .*same axis letters"):
        rel([T((1, 2, 3, 4))], ir.layout_transform(v(), "NCHW", "OIHW").attrs)
    with pytest.raises(TypeInferenceError, match="layout_transform: .*NCHW4c"):
        rel([T((1, 2, 3, 4))], ir.layout_transform(v(), "NCHW", "NCHW4c").attrs)
    with pytest.raises(TypeInferenceError, match="has 4 axes"):
        rel([T((1, 2, 3))], ir.layout_transform(v(), "NCHW", "NHWC").attrs)


# ---------------------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------------------
def test_reductions_match_naive():
    x = rand(2, 3, 4)
    cells = {idx: float(x[idx]) for idx in itertools.product(range(2), range(3), range(4))}
    got = run(ir.sum(v(), axis=1), x)
    for i, k in itertools.product(range(2), range(4)):
        assert got[i, k] == pytest.approx(sum(cells[i, j, k] for j in range(3)), rel=1e-5)
    got = run(ir.mean(v(), axis=(0, 2), keepdims=True), x)
    assert got.shape == (1, 3, 1)
    for j in range(3):
        vals = [cells[i, j, k] for i in range(2) for k in range(4)]
        assert got[0, j, 0] == pytest.approx(sum(vals) / 8, rel=1e-5)
    got = run(ir.max(v(), axis=1, exclude=True), x)
    assert got.shape == (3,)
    for j in range(3):
        assert got[j] == max(cells[i, j, k] for i in range(2) for k in range(4))
    got = run(ir.min(v()), x)
    assert got.shape == () and got == min(cells.values())
    got = run(ir.variance(v(), v("m"), axis=-1, unbiased=True), x, x.mean(axis=-1, keepdims=True))
    for i, j in itertools.product(range(2), range(3)):
        vals = [cells[i, j, k] for k in range(4)]
        mu = sum(vals) / 4
        assert got[i, j] == pytest.approx(sum((t - mu) ** 2 for t in vals) / 3, rel=1e-4)
    with pytest.raises(TypeInferenceError, match="sum: axis=3 is out of range"):
        ir.Op.get("sum").type_rel([T((2, 3, 4))], ir.sum(v(), axis=3).attrs)


def test_variance_builder_computes_mean():
    call = ir.variance(v(), axis=1)
    assert call.op.name == "variance" and call.args[1].op.name == "mean"
    assert call.args[1].attrs.keepdims is True


# ---------------------------------------------------------------------------------------
# registry facts
# ---------------------------------------------------------------------------------------
PATTERNS = {
    OpPattern.ELEMWISE: ["nn.relu", "exp", "log", "sqrt", "rsqrt", "negative", "sigmoid", "tanh", "cast",
                         "clip", "nn.leaky_relu"],
    OpPattern.BROADCAST: ["add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "less",
                          "greater", "equal", "where", "nn.bias_add", "expand_dims"],
    OpPattern.INJECTIVE: ["reshape", "squeeze", "transpose", "concatenate", "split", "nn.batch_flatten",
                          "layout_transform"],
    OpPattern.COMM_REDUCE: ["sum", "mean", "max", "min", "variance"],
    OpPattern.OUT_ELEMWISE_FUSABLE: ["nn.conv2d", "nn.dense", "nn.max_pool2d", "nn.avg_pool2d",
                                     "nn.global_avg_pool2d", "nn.softmax", "nn.batch_norm"],
    OpPattern.OPAQUE: ["nn.dropout", "shape_of", "annotation.stop_fusion", "nn.layer_norm", "nn.instance_norm",
                     "nn.lrn"],
}


@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_op_patterns(pattern):
    for name in PATTERNS[pattern]:
        op = ir.Op.get(name)
        assert op.pattern == pattern, name
        assert op.stateful == (name == "nn.dropout"), name
        assert op.compute is not None and op.definition.summary, name


def test_declared_attribute_order_and_defaults():
    assert list(ir.Op.get("nn.conv2d").attr_defaults.items()) == [
        ("strides", (1, 1)), ("padding", (0, 0)), ("dilation", (1, 1)), ("groups", 1), ("channels", None),
        ("kernel_size", None), ("data_layout", "NCHW"), ("kernel_layout", "OIHW"), ("out_layout", ""),
        ("out_dtype", "")]
    assert list(ir.Op.get("nn.batch_norm").attr_defaults.items()) == [
        ("axis", 1), ("epsilon", 1e-5), ("center", True), ("scale", True)]
    assert list(ir.Op.get("nn.max_pool2d").attr_defaults) == [
        "pool_size", "strides", "dilation", "padding", "layout", "out_layout", "ceil_mode"]
    assert list(ir.Op.get("nn.avg_pool2d").attr_defaults)[-1] == "count_include_pad"
    assert dict(ir.Op.get("nn.softmax").attr_defaults) == {"axis": -1}
    assert dict(ir.Op.get("nn.bias_add").attr_defaults) == {"axis": 1}
    assert dict(ir.Op.get("nn.dropout").attr_defaults) == {"rate": 0.5}
    assert dict(ir.Op.get("expand_dims").attr_defaults) == {"axis": None, "num_newaxis": 1}
    assert dict(ir.Op.get("nn.dense").attr_defaults) == {"units": None, "out_dtype": ""}
    assert ir.Op.get("nn.conv2d").definition.extra["kernel_layout_attr"] == "kernel_layout"


# ---------------------------------------------------------------------------------------
# properties (hypothesis)
# ---------------------------------------------------------------------------------------
_shapes = st.lists(st.integers(1, 4), min_size=0, max_size=4).map(tuple)


@settings(max_examples=200, deadline=None)
@given(_shapes, _shapes)
def test_broadcast_relation_agrees_with_numpy(a, b):
    rel = ir.Op.get("add").type_rel
    try:
        want = np.broadcast_shapes(a, b)
    except ValueError:
        with pytest.raises(TypeInferenceError, match="add: cannot broadcast"):
            rel([T(a), T(b)], None)
        return
    assert rel([T(a), T(b)], None).shape == want


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 3), st.integers(1, 2), st.integers(1, 3),          # groups, in/group, out/group
    st.integers(1, 3), st.integers(1, 3),                             # kernel
    st.integers(1, 3), st.integers(1, 3),                             # strides
    st.integers(1, 2), st.integers(1, 2),                             # dilation
    st.tuples(*[st.integers(0, 2)] * 4),                              # padding
    st.booleans(),                                                     # NHWC/HWIO
)
def test_conv2d_random_configurations(groups, ipg, opg, kh, kw, sh, sw, dh, dw, pad, nhwc):
    h, w_ = 5 + dh * kh, 4 + dw * kw
    x = rand(1, groups * ipg, h, w_)
    w = rand(groups * opg, ipg, kh, kw)
    kwargs = dict(data_layout="NHWC", kernel_layout="HWIO") if nhwc else {}
    call = ir.nn.conv2d(v(), v("w"), strides=(sh, sw), padding=pad, dilation=(dh, dw), groups=groups, **kwargs)
    got = run(call, nchw_to_nhwc(x), oihw_to_hwio(w)) if nhwc else run(call, x, w)
    got = nhwc_to_nchw(got) if nhwc else got
    np.testing.assert_allclose(got, naive_conv2d(x, w, (sh, sw), pad, (dh, dw), groups), rtol=1e-4, atol=1e-4)


def test_lrn_matches_the_channel_window_definition():
    x = ir.var("x", shape=(2, 6, 3, 3), dtype="float32")
    call = ir.nn.lrn(x, size=4, bias=1.5, alpha=0.3, beta=0.6)
    data = np.random.RandomState(0).randn(2, 6, 3, 3).astype("float32")
    got = ir.evaluate(ir.Function([x], call), data)
    want = np.empty_like(data)
    for c in range(6):  # window: (size - 1) // 2 = 1 channel before, 2 after
        sq = (data[:, max(0, c - 1):c + 3] ** 2).sum(axis=1)
        want[:, c] = data[:, c] / (1.5 + 0.3 / 4 * sq) ** 0.6
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert ir.infer_type(call).checked_type == ir.TensorType((2, 6, 3, 3), "float32")
    with pytest.raises(ir.TypeInferenceError, match="nn.lrn: size must be a positive int"):
        ir.infer_type(ir.nn.lrn(x, size=0))


@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("shape", [(8,), (2, 3, 5)])
def test_dft_transforms_the_last_axis_as_numpy(inverse, shape):
    rng = np.random.default_rng(4)
    re, im = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    r, i = ir.var("re", shape=shape), ir.var("im", shape=shape)
    fn = ir.infer_type(ir.Function([r, i], ir.dft(r, i, inverse=inverse)))
    assert fn.checked_type.ret_type == ir.TupleType([ir.TensorType(shape, "float32")] * 2)
    want = (np.fft.ifft if inverse else np.fft.fft)(re.astype(np.float64) + 1j * im, axis=-1)
    got_re, got_im = ir.evaluate(fn, re, im)
    np.testing.assert_allclose(got_re, want.real, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_im, want.imag, rtol=1e-5, atol=1e-5)
    assert got_re.dtype == np.float32 and ir.Op.get("dft").pattern == ir.OpPattern.OPAQUE
    text = ir.astext(ir.IRModule.from_expr(fn))
    assert ("dft(%re, %im, inverse=True)" if inverse else "dft(%re, %im)") in text
    on_constants = ir.evaluate(ir.dft(ir.const(re), ir.const(im), inverse=inverse))
    np.testing.assert_array_equal(on_constants[0], got_re)


def test_dft_type_errors():
    with pytest.raises(TypeInferenceError, match=r"dft: the real part .* and the imaginary part .* differ"):
        ir.infer_type(ir.dft(ir.var("a", shape=(4,)), ir.var("b", shape=(5,))))
    with pytest.raises(TypeInferenceError, match=r"dft: the data must be floating point"):
        ir.infer_type(ir.dft(ir.var("a", shape=(4,), dtype="int32"), ir.var("b", shape=(4,), dtype="int32")))


def test_deformable_conv2d_with_zero_offsets_is_conv2d_and_types_are_checked():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 4, 6, 5)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    xv, wv = ir.var("x", shape=x.shape), ir.var("w", shape=w.shape)
    offset = ir.const(np.zeros((1, 2 * 18, 6, 5), np.float32))   # two deformable groups, padded to 'same'
    mask = ir.const(np.full((1, 2 * 9, 6, 5), 0.5, np.float32))
    plain = ir.nn.conv2d(xv, wv, padding=1, groups=2)
    deform = ir.nn.deformable_conv2d(xv, offset, wv, padding=1, groups=2, deformable_groups=2)
    modulated = ir.nn.modulated_deformable_conv2d(xv, offset, wv, mask, padding=1, groups=2, deformable_groups=2)
    want = ir.evaluate(ir.Function([xv, wv], plain), x, w)
    np.testing.assert_allclose(ir.evaluate(ir.Function([xv, wv], deform), x, w), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ir.evaluate(ir.Function([xv, wv], modulated), x, w), want / 2, rtol=1e-5, atol=1e-5)
    # an offset of one row down samples the next row: the convolution of the image shifted up
    # (below the first output row, whose top taps now read row 0 instead of the padding)
    down = np.zeros((1, 36, 6, 5), np.float32)
    down[:, 0::2] = 1.0
    shifted = np.concatenate([x[:, :, 1:], np.zeros_like(x[:, :, :1])], axis=2)
    got = ir.evaluate(ir.Function([xv, wv], ir.nn.deformable_conv2d(xv, ir.const(down), wv, padding=1, groups=2,
                                                                    deformable_groups=2)), x, w)
    np.testing.assert_allclose(got[:, :, 1:], ir.evaluate(ir.Function([xv, wv], plain), shifted, w)[:, :, 1:],
                               rtol=1e-5, atol=1e-5)
    fresh = ir.nn.deformable_conv2d(ir.var("x", shape=x.shape), ir.const(np.zeros((1, 36, 6, 5), np.float32)),
                                    ir.var("w", shape=w.shape), padding=1, groups=2, deformable_groups=2)
    text = ir.astext(ir.IRModule.from_expr(ir.Function(fresh.args[::2], fresh)))
    assert "nn.deformable_conv2d(%x, meta[relay.Constant][0], %w, padding=[1, 1, 1, 1], deformable_groups=2, " \
           "groups=2)" in text
    with pytest.raises(TypeInferenceError, match=r"the offset must be float32\[1, 36, 6, 5\]"):
        ir.infer_type(ir.nn.deformable_conv2d(xv, ir.const(np.zeros((1, 18, 6, 5), np.float32)), wv, padding=1,
                                              groups=2, deformable_groups=2))
    with pytest.raises(TypeInferenceError, match=r"the mask must be float32\[1, 18, 6, 5\]"):
        ir.infer_type(ir.nn.modulated_deformable_conv2d(xv, offset, wv, ir.const(np.zeros((1, 9, 6, 5), np.float32)),
                                                        padding=1, groups=2, deformable_groups=2))
    with pytest.raises(IRError, match=r"attribute deformable_groups must be a positive int"):
        ir.nn.deformable_conv2d(xv, offset, wv, deformable_groups=0)


def test_max_pool2d_with_argmax_and_max_unpool2d_invert_each_other():
    x = np.array([[[[1, 9, 2, 0], [3, 4, 8, 8], [7, 5, 6, 1], [0, 2, 3, 4]]]], dtype=np.float32)
    xv = ir.var("x", shape=x.shape)
    pooled = ir.nn.max_pool2d_with_argmax(xv, pool_size=2, strides=2)
    back = ir.nn.max_unpool2d(ir.TupleGetItem(pooled, 0), ir.TupleGetItem(pooled, 1), output_size=(1, 1, 5, 5),
                              pool_size=2, strides=2)
    fn = ir.infer_type(ir.Function([xv], ir.Tuple([pooled, back])))
    (values, indices), restored = ir.evaluate(fn, x)
    np.testing.assert_array_equal(values, [[[[9, 8], [7, 6]]]])
    np.testing.assert_array_equal(indices, [[[[1, 6], [8, 10]]]])     # the first maximum of a tie wins (8, 8)
    want = np.zeros((1, 1, 5, 5), np.float32)
    want[0, 0, :4, :4] = np.where(np.isin(np.arange(16).reshape(4, 4), [1, 6, 8, 10]), x[0, 0], 0)
    np.testing.assert_array_equal(restored, want)
    column = ir.evaluate(ir.nn.max_pool2d_with_argmax(ir.const(x), pool_size=2, strides=2, storage_order=1))
    np.testing.assert_array_equal(column[1], [[[[4, 9], [2, 10]]]])   # w * H + h
    with pytest.raises(TypeInferenceError, match=r"output_size \[1, 1, 3, 3\] must .* hold the unpooled \[1, 1, 4, 4\]"):
        ir.infer_type(ir.nn.max_unpool2d(ir.const(values), ir.const(indices), output_size=(1, 1, 3, 3), pool_size=2,
                                         strides=2))
