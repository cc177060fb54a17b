"""nn.pad, nn.global_max_pool2d, nn.adaptive_{avg,max}_pool2d, nn.prelu, the hard_sigmoid /
hard_swish decompositions, nn.matmul and nn.batch_matmul: kernels against loops, type
relations and errors, round trips, folding, patterns."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from passhost import ir
from passhost.errors import IRError, TypeInferenceError
from passhost.ir import OpPattern, TensorType

RNG = np.random.default_rng(5)
F32 = "float32"


def x_var(shape, dtype=F32, name="x"):
    return ir.var(name, shape=shape, dtype=dtype)


def T(shape, dtype=F32):
    return TensorType(shape, dtype)


def rand(*shape):
    return RNG.standard_normal(shape).astype(F32)


def test_patterns():
    want = {"nn.pad": OpPattern.INJECTIVE, "nn.global_max_pool2d": OpPattern.OUT_ELEMWISE_FUSABLE,
            "nn.adaptive_avg_pool2d": OpPattern.OUT_ELEMWISE_FUSABLE,
            "nn.adaptive_max_pool2d": OpPattern.OUT_ELEMWISE_FUSABLE, "nn.prelu": OpPattern.BROADCAST,
            "nn.matmul": OpPattern.OUT_ELEMWISE_FUSABLE, "nn.batch_matmul": OpPattern.OUT_ELEMWISE_FUSABLE}
    assert {n: ir.Op.get(n).pattern for n in want} == want


# -- nn.pad ----------------------------------------------------------------------------
def ref_pad(a, widths, mode, value):
    """Index arithmetic per output element (reflect/edge) or a fill (constant)."""
    out_shape = [d + lo + hi for d, (lo, hi) in zip(a.shape, widths)]
    out = np.empty(out_shape, a.dtype)
    for o in itertools.product(*[range(d) for d in out_shape]):
        src = []
        inside = True
        for i, (lo, _) in zip(o, widths):
            src.append(i - lo)
        for k, s in enumerate(src):
            n = a.shape[k]
            if 0 <= s < n:
                continue
            if mode == "constant":
                inside = False
            elif mode == "edge":
                src[k] = min(max(s, 0), n - 1)
            else:  # reflect, period 2n-2
                p = 2 * n - 2
                s = s % p
                src[k] = s if s < n else p - s
        out[o] = a[tuple(src)] if inside else value
    return out


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_pad_modes_match_index_arithmetic(mode, opcheck):
    a = rand(2, 3, 4)
    widths = [(0, 1), (2, 1), (3, 0)]
    call = ir.nn.pad(x_var(a.shape), widths, ir.var("v", shape=()), pad_mode=mode)
    got = opcheck.run(call, a, np.array(-7.5, F32))
    np.testing.assert_array_equal(got, ref_pad(a, widths, mode, -7.5))
    opcheck.roundtrip(call)
    opcheck.folds(ir.nn.pad(ir.const(a), widths, 2.0, pad_mode=mode))


def test_pad_negative_widths_crop_and_the_value_is_cast(opcheck):
    a = np.arange(12, dtype="int32").reshape(3, 4)
    call = ir.nn.pad(x_var(a.shape, "int32"), [(-1, 1), (1, -2)], ir.var("v", shape=()))
    got = opcheck.run(call, a, np.array(9.7, F32))
    assert got.dtype == np.int32
    want = np.full((3, 3), 9, "int32")
    want[0:2, 1:3] = a[1:3, 0:2]
    np.testing.assert_array_equal(got, want)
    text = opcheck.roundtrip(ir.nn.pad(x_var((1, 2)), [(0, 0), (1, 1)], 0.0))
    assert "nn.pad(%x, 0f /* ty=float32 */, pad_width=[[0, 0], [1, 1]])" in text


def test_pad_errors(opcheck):
    call = ir.nn.pad(x_var((2, 3)), [(1, 1)])
    with pytest.raises(TypeInferenceError, match=r"nn.pad: pad_width has 1 pairs but the data .* has 2 axes"):
        opcheck.rel(call, T((2, 3)), T(()))
    call = ir.nn.pad(x_var((2, 3)), [(0, 0), (-2, -2)])
    with pytest.raises(TypeInferenceError, match="leaves a negative size"):
        opcheck.rel(call, T((2, 3)), T(()))
    with pytest.raises(TypeInferenceError, match="the pad value must be a scalar"):
        opcheck.rel(ir.nn.pad(x_var((2,)), [(1, 1)]), T((2,)), T((1,)))
    with pytest.raises(IRError, match="pad_mode must be one of constant, edge, reflect"):
        ir.nn.pad(x_var((2,)), [(1, 1)], pad_mode="wrap")


# -- pools ---------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_global_max_pool2d(layout, opcheck):
    a = rand(2, 3, 4, 5)
    data = a if layout == "NCHW" else a.transpose(0, 2, 3, 1).copy()
    call = ir.nn.global_max_pool2d(x_var(data.shape), layout=layout)
    got = opcheck.run(call, data)
    want = np.array([[max(a[n, c].ravel()) for c in range(3)] for n in range(2)], F32)
    got = got.reshape(2, 3)  # (N, C, 1, 1) or (N, 1, 1, C)
    np.testing.assert_array_equal(got, want)
    opcheck.roundtrip(call)
    opcheck.folds(ir.nn.global_max_pool2d(ir.const(data), layout=layout))


def ref_adaptive(a, oh, ow, fn):
    n, c, h, w = a.shape
    out = np.zeros((n, c, oh, ow))
    for i, j in itertools.product(range(oh), range(ow)):
        h0, h1 = math.floor(i * h / oh), math.ceil((i + 1) * h / oh)
        w0, w1 = math.floor(j * w / ow), math.ceil((j + 1) * w / ow)
        for nn_, cc in itertools.product(range(n), range(c)):
            out[nn_, cc, i, j] = fn(a[nn_, cc, h0:h1, w0:w1].ravel().tolist())
    return out


@pytest.mark.parametrize("kind", ["avg", "max"])
@pytest.mark.parametrize("size,out", [((3, 2), (3, 2)), (1, (1, 1)), (None, (5, 7)), ((4, 7), (4, 7))])
def test_adaptive_pools_match_windows(kind, size, out, opcheck):
    a = rand(1, 2, 5, 7)
    builder = getattr(ir.nn, f"adaptive_{kind}_pool2d")
    call = builder(x_var(a.shape), size)
    got = opcheck.run(call, a)
    fn = (lambda v: sum(v) / len(v)) if kind == "avg" else max
    np.testing.assert_allclose(got, ref_adaptive(a, *out, fn), rtol=1e-6, atol=1e-6)
    opcheck.roundtrip(call)
    opcheck.folds(builder(ir.const(a), size))


def test_adaptive_pool_nhwc_and_errors(opcheck):
    a = rand(1, 6, 4, 3)  # NHWC
    call = ir.nn.adaptive_avg_pool2d(x_var(a.shape), (2, 2), layout="NHWC")
    got = opcheck.run(call, a)
    want = ref_adaptive(a.transpose(0, 3, 1, 2), 2, 2, lambda v: sum(v) / len(v)).transpose(0, 2, 3, 1)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert 'layout="NHWC"' in opcheck.roundtrip(call)
    with pytest.raises(TypeInferenceError, match="nn.adaptive_max_pool2d: data must be 4-D"):
        opcheck.rel(ir.nn.adaptive_max_pool2d(x_var((2, 3)), 1), T((2, 3)))
    with pytest.raises(IRError, match="output_size must be 0, 1 or 2 positive ints"):
        ir.nn.adaptive_max_pool2d(x_var((1, 1, 2, 2)), (1, 2, 3))


# -- prelu / hard_sigmoid / hard_swish -----------------------------------------------------
@pytest.mark.parametrize("axis", [1, -1])
def test_prelu(axis, opcheck):
    a = rand(2, 3, 4)
    alpha = rand(a.shape[axis])
    call = ir.nn.prelu(x_var(a.shape), x_var(alpha.shape, name="alpha"), axis=axis)
    got = opcheck.run(call, a, alpha)
    for idx in itertools.product(*[range(d) for d in a.shape]):
        v = a[idx]
        assert got[idx] == (v if v >= 0 else np.float32(alpha[idx[axis]] * v))
    opcheck.roundtrip(call)
    opcheck.folds(ir.nn.prelu(ir.const(a), ir.const(alpha), axis=axis))
    with pytest.raises(TypeInferenceError, match=r"nn.prelu: alpha has type Tensor\[\(5\), float32\] but the data"):
        opcheck.rel(call, T(a.shape), T((5,)))


def test_hard_sigmoid_and_hard_swish_decompose_like_tvm(opcheck):
    a = np.linspace(-5, 5, 41).astype(F32)
    x = x_var(a.shape)
    hs = ir.nn.hard_sigmoid(x, alpha=0.25, beta=0.4)
    assert [c.op.name for c in (hs, hs.args[0], hs.args[0].args[0])] == ["clip", "add", "multiply"]
    mod = ir.IRModule.from_expr(ir.Function([x], hs))
    want = np.array([min(max(0.25 * v + 0.4, 0.0), 1.0) for v in a.tolist()])
    np.testing.assert_allclose(ir.evaluate(mod, a), want, rtol=1e-6, atol=1e-7)
    sw = ir.nn.hard_swish(x)
    mod = ir.IRModule.from_expr(ir.Function([x], sw))
    want = np.array([v * min(max(v / 6 + 0.5, 0.0), 1.0) for v in a.tolist()])
    np.testing.assert_allclose(ir.evaluate(mod, a), want, rtol=1e-6, atol=1e-6)
    opcheck.roundtrip(sw)
    # float16 data gets float16 constants
    h = ir.nn.hard_sigmoid(x_var((2,), "float16"))
    assert h.args[0].args[1].data.dtype == np.float16


# -- matmul / batch_matmul -----------------------------------------------------------------
def ref_matmul(a, b):
    """(..., M, K) x (K, N) by loops."""
    out = np.zeros(a.shape[:-1] + (b.shape[1],))
    for idx in itertools.product(*[range(d) for d in a.shape[:-1]]):
        for j in range(b.shape[1]):
            out[idx + (j,)] = sum(float(a[idx + (k,)]) * float(b[k, j]) for k in range(a.shape[-1]))
    return out


@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
def test_matmul(ta, tb, opcheck):
    a, b = rand(2, 3, 4), rand(4, 5)
    a_in = np.swapaxes(a, -1, -2).copy() if ta else a
    b_in = b.T.copy() if tb else b
    call = ir.nn.matmul(x_var(a_in.shape), x_var(b_in.shape, name="w"), transpose_a=ta, transpose_b=tb)
    got = opcheck.run(call, a_in, b_in)
    np.testing.assert_allclose(got, ref_matmul(a, b), rtol=1e-5, atol=1e-5)
    opcheck.roundtrip(call)
    opcheck.folds(ir.nn.matmul(ir.const(a_in), ir.const(b_in), transpose_a=ta, transpose_b=tb), rtol=1e-5)


def test_matmul_types_and_errors(opcheck):
    call = ir.nn.matmul(x_var((2, 4)), ir.var("w"), units=6, transpose_b=True)
    types = [T((2, 4)), None]
    assert opcheck.rel(call, *types) == T((2, 6))
    with pytest.raises(TypeInferenceError, match=r"nn.matmul: tensor_a .* has 4 reduction elements but tensor_b"):
        opcheck.rel(ir.nn.matmul(x_var((2, 4)), x_var((3, 5))), T((2, 4)), T((3, 5)))
    with pytest.raises(TypeInferenceError, match="tensor_b must be 2-D"):
        opcheck.rel(ir.nn.matmul(x_var((2, 4)), x_var((1, 4, 5))), T((2, 4)), T((1, 4, 5)))
    call = ir.nn.matmul(x_var((2, 4), "int8"), x_var((4, 3), "int8"), out_dtype="int32")
    got = opcheck.run(call, np.full((2, 4), 100, "int8"), np.full((4, 3), 100, "int8"))
    assert got.dtype == np.int32 and (got == 40000).all()


@pytest.mark.parametrize("ta,tb", [(False, True), (False, False), (True, True)])
@pytest.mark.parametrize("bx,by", [(2, 2), (1, 3)])
def test_batch_matmul(ta, tb, bx, by, opcheck):
    x, y = rand(bx, 3, 4), rand(by, 4, 5)
    x_in = np.swapaxes(x, 1, 2).copy() if ta else x
    y_in = np.swapaxes(y, 1, 2).copy() if tb else y
    call = ir.nn.batch_matmul(x_var(x_in.shape), x_var(y_in.shape, name="y"), transpose_a=ta, transpose_b=tb)
    got = opcheck.run(call, x_in, y_in)
    want = np.stack([ref_matmul(x[i % bx], y[i % by]) for i in range(max(bx, by))])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    opcheck.roundtrip(call)
    opcheck.folds(ir.nn.batch_matmul(ir.const(x_in), ir.const(y_in), transpose_a=ta, transpose_b=tb), rtol=1e-5)


def test_batch_matmul_defaults_and_errors(opcheck):
    assert dict(ir.Op.get("nn.batch_matmul").attr_defaults) == {
        "out_dtype": "", "transpose_a": False, "transpose_b": False}
    assert "transpose_b=True" in str(ir.nn.batch_matmul(x_var((1, 2, 3)), x_var((1, 4, 3), name="y")))
    with pytest.raises(TypeInferenceError, match="batch sizes of .* differ and neither is 1"):
        opcheck.rel(ir.nn.batch_matmul(x_var((2, 3, 4)), x_var((3, 5, 4))), T((2, 3, 4)), T((3, 5, 4)))
    with pytest.raises(TypeInferenceError, match="disagree on the reduction size"):
        opcheck.rel(ir.nn.batch_matmul(x_var((2, 3, 4)), x_var((2, 5, 3))), T((2, 3, 4)), T((2, 5, 3)))
    with pytest.raises(TypeInferenceError, match="both operands must be 3-D"):
        opcheck.rel(ir.nn.batch_matmul(x_var((3, 4)), x_var((2, 5, 4))), T((3, 4)), T((2, 5, 4)))
