"""strided_slice, take, gather, broadcast_to, tile, repeat: kernels against direct
references (loops / Python slicing), type relations and their errors, text round trips,
folding and patterns."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from passhost import ir
from passhost.errors import IRError, TypeInferenceError
from passhost.ir import OpPattern, TensorType

RNG = np.random.default_rng(11)
F32 = "float32"


def x_var(shape, dtype=F32, name="x"):
    return ir.var(name, shape=shape, dtype=dtype)


def T(shape, dtype=F32):
    return TensorType(shape, dtype)


def test_patterns():
    assert {n: ir.Op.get(n).pattern for n in ("strided_slice", "take", "gather", "broadcast_to", "tile",
                                              "repeat")} == {
        "strided_slice": OpPattern.INJECTIVE, "take": OpPattern.INJECTIVE, "gather": OpPattern.INJECTIVE,
        "broadcast_to": OpPattern.BROADCAST, "tile": OpPattern.BROADCAST, "repeat": OpPattern.BROADCAST}


# -- strided_slice -------------------------------------------------------------------------
def ref_slice_1d(n, b, e, s):
    """Elements of range(n) that Python's a[b:e:s] picks, by walking index by index."""
    a = list(range(n))
    return a[b:e:s]


SLICES = [  # begin, end, strides, axes, mode
    ((1, 0), (3, 4), (1, 2), None, "end"),
    ((-1,), (-4,), (-1,), None, "end"),
    ((0, -3), (10, 100), (2, 1), None, "end"),
    ((3,), (1,), (1,), None, "end"),                         # empty
    ((-100, 2), (100, -1), (1, 1), None, "end"),             # clamped
    ((1,), (2,), (1,), (2,), "end"),                         # axes
    ((2, 0), (-1, 3), (1, 1), (1, 2), "end"),                # two axes
    ((1, 0), (2, -1), (7,), None, "size"),                   # sizes, strides ignored
    ((4, 2), (-(2 ** 63 - 1), 0), (-2, -1), None, "end"),   # to the start with a negative stride
]


@pytest.mark.parametrize("begin,end,strides,axes,mode", SLICES)
def test_strided_slice_matches_python_slicing(begin, end, strides, axes, mode, opcheck):
    a = np.arange(5 * 6 * 4, dtype=F32).reshape(5, 6, 4)
    call = ir.strided_slice(x_var(a.shape), begin, end, strides, axes=axes, slice_mode=mode)
    got = opcheck.run(call, a)
    # the reference: per axis, the list of indices Python slicing picks
    picks = [list(range(d)) for d in a.shape]
    for i, ax in enumerate(axes if axes is not None else range(len(begin))):
        if mode == "size":
            e = end[i]
            stop = None if e < 0 else begin[i] + e
            picks[ax] = ref_slice_1d(a.shape[ax], begin[i], stop, 1)
        else:
            s = strides[i] if i < len(strides) else 1
            picks[ax] = ref_slice_1d(a.shape[ax], begin[i], end[i], s)
    want = np.zeros([len(p) for p in picks], F32)
    for out_idx in itertools.product(*[range(len(p)) for p in picks]):
        want[out_idx] = a[tuple(p[i] for p, i in zip(picks, out_idx))]
    np.testing.assert_array_equal(got, want)
    opcheck.roundtrip(call)
    opcheck.folds(ir.strided_slice(ir.const(a), begin, end, strides, axes=axes, slice_mode=mode))


def test_strided_slice_prints_tvm_attrs(opcheck):
    call = ir.strided_slice(x_var((4, 5)), [1], [3], axes=[1])
    text = opcheck.roundtrip(call)
    assert "strided_slice(%x, begin=[1], end=[3], strides=[1], axes=[1])" in text
    assert list(call.op.attr_defaults) == ["begin", "end", "strides", "slice_mode", "axes"]


def test_strided_slice_errors(opcheck):
    with pytest.raises(TypeInferenceError, match="strided_slice: the stride for axis 0 is 0"):
        opcheck.rel(ir.strided_slice(x_var((4,)), [0], [2], [0]), T((4,)))
    with pytest.raises(TypeInferenceError, match="more entries than the rank-1 data"):
        opcheck.rel(ir.strided_slice(x_var((4,)), [0, 0], [2, 2]), T((4,)))
    with pytest.raises(TypeInferenceError, match="axes, begin, end and strides must have the same length"):
        opcheck.rel(ir.strided_slice(x_var((4, 4)), [0, 0], [2, 2], [1], axes=[0, 1]), T((4, 4)))
    with pytest.raises(TypeInferenceError, match=r"strided_slice: axis=2 is out of range"):
        opcheck.rel(ir.strided_slice(x_var((4, 4)), [0], [2], [1], axes=[2]), T((4, 4)))
    with pytest.raises(IRError, match="slice_mode must be"):
        ir.strided_slice(x_var((4,)), [0], [2], slice_mode="stop")


# -- take ------------------------------------------------------------------------------
def ref_take(data, idx, axis, mode, batch_dims=0):
    if axis is None:
        data, axis = data.reshape(-1), 0
    n = data.shape[axis]
    out_shape = data.shape[:axis] + idx.shape[batch_dims:] + data.shape[axis + 1:]
    out = np.zeros(out_shape, data.dtype)
    for o in itertools.product(*[range(d) for d in out_shape]):
        pre = o[:axis]
        ipos = o[axis:axis + idx.ndim - batch_dims]
        post = o[axis + idx.ndim - batch_dims:]
        i = int(idx[tuple(pre[:batch_dims]) + tuple(ipos)])
        if mode == "clip":
            i = min(max(i, 0), n - 1)
        elif mode == "wrap":
            i = ((i % n) + n) % n
        elif i < 0:
            i += n
        out[o] = data[tuple(pre) + (i,) + tuple(post)]
    return out


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("mode", ["clip", "wrap", "fast"])
def test_take_matches_loops(axis, mode, opcheck):
    a = RNG.standard_normal((3, 4, 2)).astype(F32)
    n = a.size if axis is None else a.shape[axis]
    lo, hi = (-n, n) if mode == "fast" else (-2 * n, 2 * n)
    idx = RNG.integers(lo, hi, (2, 3)).astype("int32")
    call = ir.take(x_var(a.shape), x_var(idx.shape, "int32", "i"), axis=axis, mode=mode)
    got = opcheck.run(call, a, idx)
    np.testing.assert_array_equal(got, ref_take(a, idx, None if axis is None else axis % 3, mode))
    opcheck.roundtrip(call)
    opcheck.folds(ir.take(ir.const(a), ir.const(idx), axis=axis, mode=mode))


def test_take_batch_dims(opcheck):
    a = RNG.standard_normal((2, 5, 3)).astype(F32)
    idx = RNG.integers(0, 5, (2, 4)).astype("int64")
    call = ir.take(x_var(a.shape), x_var(idx.shape, "int64", "i"), axis=1, batch_dims=1)
    got = opcheck.run(call, a, idx)
    assert got.shape == (2, 4, 3)
    np.testing.assert_array_equal(got, ref_take(a, idx, 1, "clip", batch_dims=1))
    assert "batch_dims=1, axis=1" in opcheck.roundtrip(call)


def test_take_errors(opcheck):
    call = ir.take(x_var((3, 4)), x_var((2,), "float32", "i"), axis=0)
    with pytest.raises(TypeInferenceError, match="take: the indices must be integers"):
        opcheck.rel(call, T((3, 4)), T((2,)))
    call = ir.take(x_var((3, 4)), x_var((2,), "int32", "i"), axis=2)
    with pytest.raises(TypeInferenceError, match=r"take: axis=2 is out of range"):
        opcheck.rel(call, T((3, 4)), T((2,), "int32"))
    call = ir.take(x_var((3, 4)), x_var((2, 2), "int32", "i"), axis=1, batch_dims=1)
    with pytest.raises(TypeInferenceError, match=r"take: the first 1 \(batch\) axes"):
        opcheck.rel(call, T((3, 4)), T((2, 2), "int32"))
    with pytest.raises(IRError, match="mode must be"):
        ir.take(x_var((3,)), [0], mode="raise")


# -- gather ----------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_matches_loops(axis, opcheck):
    a = RNG.standard_normal((3, 4)).astype(F32)
    ax = axis % 2
    ishape = (5, 4) if ax == 0 else (3, 6)
    idx = RNG.integers(-a.shape[ax], a.shape[ax], ishape).astype("int64")
    call = ir.gather(x_var(a.shape), axis, x_var(ishape, "int64", "i"))
    got = opcheck.run(call, a, idx)
    want = np.zeros(ishape, F32)
    for i, j in itertools.product(range(ishape[0]), range(ishape[1])):
        k = int(idx[i, j]) % a.shape[ax]
        want[i, j] = a[k, j] if ax == 0 else a[i, k]
    np.testing.assert_array_equal(got, want)
    opcheck.roundtrip(call)
    opcheck.folds(ir.gather(ir.const(a), axis, ir.const(idx)))


def test_gather_errors(opcheck):
    call = ir.gather(x_var((3, 4)), 0, x_var((2,), "int32", "i"))
    with pytest.raises(TypeInferenceError, match="gather: the indices .* must have the data's rank"):
        opcheck.rel(call, T((3, 4)), T((2,), "int32"))


# -- broadcast_to / tile / repeat ----------------------------------------------------------
def test_broadcast_to(opcheck):
    a = RNG.standard_normal((3, 1)).astype(F32)
    call = ir.broadcast_to(x_var(a.shape), (2, 3, 4))
    got = opcheck.run(call, a)
    for i, j, k in itertools.product(range(2), range(3), range(4)):
        assert got[i, j, k] == a[j, 0]
    assert "broadcast_to(%x, shape=[2, 3, 4])" in opcheck.roundtrip(call)
    opcheck.folds(ir.broadcast_to(ir.const(a), (2, 3, 4)))
    with pytest.raises(TypeInferenceError, match=r"broadcast_to: cannot broadcast .* to the shape \[2, 4\]"):
        opcheck.rel(ir.broadcast_to(x_var(a.shape), (2, 4)), T((3, 1)))


@pytest.mark.parametrize("shape,reps", [((2, 3), (2, 1)), ((2, 3), (3,)), ((3,), (2, 2))])
def test_tile(shape, reps, opcheck):
    a = RNG.standard_normal(shape).astype(F32)
    call = ir.tile(x_var(shape), reps)
    got = opcheck.run(call, a)
    n = max(len(shape), len(reps))
    a_n = a.reshape((1,) * (n - a.ndim) + shape)
    for o in itertools.product(*[range(d) for d in got.shape]):
        assert got[o] == a_n[tuple(i % d for i, d in zip(o, a_n.shape))]
    opcheck.roundtrip(call)
    opcheck.folds(ir.tile(ir.const(a), reps))


def test_repeat(opcheck):
    a = RNG.standard_normal((2, 3)).astype(F32)
    call = ir.repeat(x_var(a.shape), 2, axis=1)
    got = opcheck.run(call, a)
    assert got.shape == (2, 6)
    for i, j in itertools.product(range(2), range(6)):
        assert got[i, j] == a[i, j // 2]
    assert "repeat(%x, repeats=2, axis=1)" in opcheck.roundtrip(call)
    opcheck.folds(ir.repeat(ir.const(a), 3, axis=0))
    with pytest.raises(TypeInferenceError, match=r"repeat: axis=2 is out of range"):
        opcheck.rel(ir.repeat(x_var(a.shape), 2, axis=2), T((2, 3)))
    with pytest.raises(IRError, match="repeats must be a positive int"):
        ir.repeat(x_var(a.shape), 0, axis=0)
