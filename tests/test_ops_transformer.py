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
