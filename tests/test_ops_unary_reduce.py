"""Unary math ops (erf floor ceil round abs sign sin cos) and the reductions prod,
argmax, argmin: kernels against direct references, type relations, text round trips,
folding."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from passhost import ir
from passhost.errors import TypeInferenceError
from passhost.ir import OpPattern, TensorType

RNG = np.random.default_rng(7)


def x_var(shape, dtype="float32", name="x"):
    return ir.var(name, shape=shape, dtype=dtype)


UNARY = {
    "erf": lambda a: np.array([math.erf(float(v)) for v in a.ravel()]).reshape(a.shape),
    "floor": lambda a: np.array([math.floor(v) for v in a.ravel()]).reshape(a.shape),
    "ceil": lambda a: np.array([math.ceil(v) for v in a.ravel()]).reshape(a.shape),
    # Python's round() rounds halves to even, like ONNX Round
    "round": lambda a: np.array([round(float(v)) for v in a.ravel()]).reshape(a.shape),
    "abs": lambda a: np.array([abs(float(v)) for v in a.ravel()]).reshape(a.shape),
    "sign": lambda a: np.array([int(v > 0) - int(v < 0) for v in a.ravel()]).reshape(a.shape),
    "sin": lambda a: np.array([math.sin(v) for v in a.ravel()]).reshape(a.shape),
    "cos": lambda a: np.array([math.cos(v) for v in a.ravel()]).reshape(a.shape),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_reference(name, opcheck):
    a = np.array([[-2.5, -1.5, -0.5, 0.0], [0.5, 1.5, 2.5, 3.7]], dtype="float32")
    a = np.concatenate([a, RNG.standard_normal((2, 4)).astype("float32") * 3])
    builder = getattr(ir, name)
    call = builder(x_var(a.shape))
    got = opcheck.run(call, a)
    np.testing.assert_allclose(got, UNARY[name](a).astype("float32"), rtol=1e-6, atol=1e-7)
    assert call.op.pattern == OpPattern.ELEMWISE
    assert call.op.name == name
    opcheck.roundtrip(call)
    opcheck.folds(builder(ir.const(a)))


def test_round_halves_to_even_and_integer_inputs_pass_through(opcheck):
    got = opcheck.run(ir.round(x_var((4,))), np.array([0.5, 1.5, 2.5, -0.5], "float32"))
    assert got.tolist() == [0.0, 2.0, 2.0, -0.0]
    ints = np.array([-3, 0, 4], "int32")
    for name in ("floor", "ceil", "round", "abs", "sign"):
        got = opcheck.run(getattr(ir, name)(x_var((3,), "int32")), ints)
        assert got.dtype == np.int32


def test_unary_rejects_a_tuple_argument():
    call = ir.erf(ir.var("t"))
    with pytest.raises(TypeInferenceError, match="erf: data must be a tensor"):
        call.op.type_rel([ir.TupleType([TensorType((1,), "float32")])], call.attrs)


# -- prod --------------------------------------------------------------------------------
def naive_prod(a, axes, keepdims):
    out_shape = [1 if i in axes else d for i, d in enumerate(a.shape)]
    out = np.ones(out_shape, dtype="float64")
    for idx in itertools.product(*[range(d) for d in a.shape]):
        o = tuple(0 if i in axes else v for i, v in enumerate(idx))
        out[o] *= a[idx]
    if not keepdims:
        out = out.reshape([d for i, d in enumerate(a.shape) if i not in axes])
    return out


@pytest.mark.parametrize("axis,keepdims,exclude,axes", [
    (None, False, False, (0, 1, 2)), (1, False, False, (1,)), ((0, 2), True, False, (0, 2)),
    (-1, True, False, (2,)), (1, False, True, (0, 2)),
])
def test_prod_matches_loops(axis, keepdims, exclude, axes, opcheck):
    a = RNG.uniform(0.5, 1.5, (2, 3, 4)).astype("float32")
    call = ir.prod(x_var(a.shape), axis=axis, keepdims=keepdims, exclude=exclude)
    got = opcheck.run(call, a)
    np.testing.assert_allclose(got, naive_prod(a, axes, keepdims), rtol=1e-5)
    assert call.op.pattern == OpPattern.COMM_REDUCE
    opcheck.roundtrip(call)
    opcheck.folds(ir.prod(ir.const(a), axis=axis, keepdims=keepdims, exclude=exclude))


def test_prod_type_errors(opcheck):
    call = ir.prod(x_var((2, 3)), axis=2)
    with pytest.raises(TypeInferenceError, match=r"prod: axis=2 is out of range for a rank-2 tensor"):
        opcheck.rel(call, TensorType((2, 3), "float32"))
    call = ir.prod(x_var((2, 3)), axis=(1, -1))
    with pytest.raises(TypeInferenceError, match="prod: axis -1 is listed twice"):
        opcheck.rel(call, TensorType((2, 3), "float32"))


# -- argmax / argmin -----------------------------------------------------------------------
def naive_arg(a, axes, keepdims, pick_max, last):
    """Flat row-major index within the reduced axes of the first (or last) extreme."""
    keep = [i for i in range(a.ndim) if i not in axes]
    out = {}
    for idx in itertools.product(*[range(d) for d in a.shape]):
        k = tuple(idx[i] for i in keep)
        flat = 0
        for i in axes:
            flat = flat * a.shape[i] + idx[i]
        v = a[idx]
        best = out.get(k)
        better = best is None or (v > best[0] if pick_max else v < best[0]) or (last and v == best[0])
        if better:
            out[k] = (v, flat)
    shape = [a.shape[i] for i in keep]
    res = np.zeros(shape, "int32")
    for k, (_, flat) in out.items():
        res[k] = flat
    if keepdims:
        res = res.reshape([1 if i in axes else d for i, d in enumerate(a.shape)])
    return res


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("axis,exclude,axes", [
    (None, False, (0, 1, 2)), (1, False, (1,)), (-1, False, (2,)), ((0, 2), False, (0, 2)), (1, True, (0, 2)),
])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("last", [False, True])
def test_arg_reduce_matches_loops(name, axis, exclude, axes, keepdims, last, opcheck):
    a = RNG.integers(0, 3, (2, 3, 4)).astype("float32")  # many ties
    builder = getattr(ir, name)
    call = builder(x_var(a.shape), axis=axis, keepdims=keepdims, exclude=exclude, select_last_index=last)
    got = opcheck.run(call, a)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, naive_arg(a, axes, keepdims, name == "argmax", last))
    assert call.op.pattern == OpPattern.COMM_REDUCE


def test_arg_reduce_attrs_round_trip_and_fold(opcheck):
    a = RNG.standard_normal((3, 5)).astype("float32")
    call = ir.argmin(x_var(a.shape), axis=1, keepdims=True, select_last_index=True)
    text = opcheck.roundtrip(call)
    assert "argmin(%x, axis=[1], keepdims=True, select_last_index=True)" in text
    assert list(call.op.attr_defaults) == ["axis", "keepdims", "select_last_index", "exclude"]
    got = opcheck.folds(ir.argmax(ir.const(a), axis=0))
    np.testing.assert_array_equal(got, np.argmax(a, axis=0))


def test_arg_reduce_type_relation_and_errors(opcheck):
    call = ir.argmax(x_var((2, 3)), axis=1)
    assert opcheck.rel(call, TensorType((2, 3), "float32")) == TensorType((2,), "int32")
    with pytest.raises(TypeInferenceError, match=r"argmax: axis=-3 is out of range"):
        opcheck.rel(ir.argmax(x_var((2, 3)), axis=-3), TensorType((2, 3), "float32"))
    with pytest.raises(TypeInferenceError, match=r"argmax: cannot reduce the empty axis 1"):
        opcheck.rel(call, TensorType((2, 0), "float32"))
