"""Operators transformer encoders need: nn.gelu, nn.log_softmax and the logical ops."""
from __future__ import annotations

import math

import numpy as np
import pytest

from passhost import ir
from passhost.errors import IRError, TypeInferenceError


def _ref_gelu(x, approximate):
    w = x.astype("float64")
    if approximate == "tanh":
        return 0.5 * w * (1 + np.tanh(math.sqrt(2 / math.pi) * (w + 0.044715 * w ** 3)))
    return 0.5 * w * (1 + np.vectorize(math.erf)(w / math.sqrt(2)))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_matches_its_definition(approximate, opcheck):
    a = np.linspace(-5, 5, 24, dtype="float32").reshape(2, 3, 4)
    x = ir.var("x", shape=a.shape)
    call = ir.nn.gelu(x, approximate)
    got = opcheck.run(call, a)
    np.testing.assert_allclose(got, _ref_gelu(a, approximate), rtol=1e-6, atol=1e-7)
    text = opcheck.roundtrip(call)
    assert ('approximate="tanh"' in text) == (approximate == "tanh")
    opcheck.folds(ir.nn.gelu(ir.const(a), approximate))


def test_gelu_refuses_integers_and_unknown_approximations():
    with pytest.raises(TypeInferenceError, match="float"):
        ir.infer_type(ir.nn.gelu(ir.var("i", shape=(2,), dtype="int32")))
    with pytest.raises(IRError, match="approximate"):
        ir.nn.gelu(ir.var("x", shape=(2,)), "erf")


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_log_softmax_on_any_axis(axis, opcheck):
    a = np.random.RandomState(0).randn(3, 4, 5).astype("float32") * 10
    call = ir.nn.log_softmax(ir.var("x", shape=a.shape), axis=axis)
    got = opcheck.run(call, a)
    e = np.exp(a.astype("float64") - a.max(axis=axis, keepdims=True))
    want = np.log(e / e.sum(axis=axis, keepdims=True))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    opcheck.roundtrip(call)
    opcheck.folds(ir.nn.log_softmax(ir.const(a), axis=axis), rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeInferenceError):
        ir.infer_type(ir.nn.log_softmax(ir.var("x", shape=a.shape), axis=3))


@pytest.mark.parametrize("name,fn", [("logical_and", np.logical_and), ("logical_or", np.logical_or),
                                     ("logical_xor", np.logical_xor)])
def test_logical_binary_ops_broadcast_bools(name, fn, opcheck):
    rng = np.random.RandomState(1)
    a, b = rng.rand(2, 3) > 0.5, rng.rand(3) > 0.5
    call = getattr(ir, name)(ir.var("a", shape=(2, 3), dtype="bool"), ir.var("b", shape=(3,), dtype="bool"))
    np.testing.assert_array_equal(opcheck.run(call, a, b), fn(a, b))
    opcheck.roundtrip(call)
    with pytest.raises(TypeInferenceError, match="bool"):
        ir.infer_type(getattr(ir, name)(ir.var("x", shape=(2,)), ir.var("y", shape=(2,))))


def test_logical_not(opcheck):
    a = np.array([True, False, True])
    call = ir.logical_not(ir.var("a", shape=(3,), dtype="bool"))
    np.testing.assert_array_equal(opcheck.run(call, a), ~a)
    opcheck.roundtrip(call)
    opcheck.folds(ir.logical_not(ir.const(a)))


@pytest.mark.parametrize("args,want", [((5,), np.arange(5.0)), ((1, 2, 0.25), np.arange(1, 2, 0.25)),
                                      ((3, -3, -2), np.arange(3.0, -3.0, -2.0)), ((2, 1), np.arange(2.0, 1.0))])
def test_arange(args, want, opcheck):
    call = ir.arange(*args)
    got = opcheck.run(call)
    np.testing.assert_array_equal(got, want.astype("float32"))
    opcheck.roundtrip(call)
    assert ir.arange(4, dtype="int64").op.type_rel([], ir.arange(4, dtype="int64").attrs).dtype == "int64"
    with pytest.raises(IRError, match="step"):
        ir.arange(0, 4, 0)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("exclusive", [False, True])
def test_cumsum(axis, exclusive, opcheck):
    a = np.random.RandomState(2).randint(-5, 5, size=(3, 4)).astype("int64")
    call = ir.cumsum(ir.var("x", shape=a.shape, dtype="int64"), axis=axis, exclusive=exclusive)
    got = opcheck.run(call, a)
    flat = a.reshape(-1) if axis is None else a
    want = np.cumsum(flat, axis=0 if axis is None else axis)
    if exclusive:
        want = want - flat
    np.testing.assert_array_equal(got, want)
    opcheck.roundtrip(call)
    opcheck.folds(ir.cumsum(ir.const(a), axis=axis, exclusive=exclusive))


@pytest.mark.parametrize("is_ascend", [False, True])
@pytest.mark.parametrize("axis", [0, -1])
def test_topk_values_indices_and_ties(is_ascend, axis, opcheck):
    a = np.array([[3, 1, 3, 2], [0, 5, 5, 5], [2, 2, 1, 7]], dtype="float32")
    call = ir.topk(ir.var("x", shape=a.shape), k=2, axis=axis, is_ascend=is_ascend)
    values, indices = opcheck.run(call, a)
    order = np.argsort(a if is_ascend else -a, axis=axis, kind="stable")
    want_idx = np.take(order, [0, 1], axis=axis)
    np.testing.assert_array_equal(indices, want_idx)
    np.testing.assert_array_equal(values, np.take_along_axis(a, want_idx, axis=axis))
    opcheck.roundtrip(call)
    only = ir.topk(ir.var("x", shape=a.shape), k=0, ret_type="values")
    np.testing.assert_array_equal(opcheck.run(only, a), -np.sort(-a, axis=-1))
    with pytest.raises(TypeInferenceError, match="larger"):
        ir.infer_type(ir.topk(ir.var("x", shape=a.shape), k=9))


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot(axis, opcheck):
    idx = np.array([[0, 2], [3, -1]], dtype="int64")
    call = ir.one_hot(ir.var("i", shape=idx.shape, dtype="int64"), 5.0, -1.0, depth=3, axis=axis)
    got = opcheck.run(call, idx, np.float32(5), np.float32(-1))
    eye = (idx[..., None] == np.arange(3))
    want = np.moveaxis(np.where(eye, 5.0, -1.0), -1, axis).astype("float32")
    np.testing.assert_array_equal(got, want)
    opcheck.roundtrip(call)
    with pytest.raises(TypeInferenceError, match="integers"):
        ir.infer_type(ir.one_hot(ir.var("f", shape=(2,)), 1.0, 0.0, depth=2))


def test_ndarray_size(opcheck):
    a = np.zeros((3, 4, 5), "float32")
    call = ir.ndarray_size(ir.var("x", shape=a.shape), dtype="int64")
    assert opcheck.run(call, a) == 60
    opcheck.roundtrip(call)
    opcheck.folds(ir.ndarray_size(ir.const(a), dtype="int64"))
