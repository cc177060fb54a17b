"""full, zeros, ones and their *_like forms: values, types, errors, printing of calls
without arguments, folding and FuseOps patterns."""
from __future__ import annotations

import numpy as np
import pytest

import passhost

from passhost import ir
from passhost.errors import IRError, TypeInferenceError
from passhost.ir import OpPattern, TensorType


def test_patterns_are_elemwise_as_in_tvm():
    for name in ("full", "zeros", "ones", "full_like", "zeros_like", "ones_like"):
        assert ir.Op.get(name).pattern == OpPattern.ELEMWISE, name


def test_full_takes_the_dtype_of_its_value_unless_told(opcheck):
    call = ir.full(ir.var("v", shape=(), dtype="int64"), (2, 3))
    out = opcheck.run(call, np.array(7, "int64"))
    assert out.dtype == np.int64 and out.tolist() == [[7, 7, 7], [7, 7, 7]]
    call = ir.full(ir.var("v", shape=()), (4,), dtype="float16")
    out = opcheck.run(call, np.array(2.5, "float32"))
    assert out.dtype == np.float16 and out.tolist() == [2.5] * 4
    assert 'full(%v, shape=[4], dtype="float16")' in opcheck.roundtrip(call)
    opcheck.folds(ir.full(ir.const(3.0), (2, 2)), np.full((2, 2), 3.0, "float32"))


def test_zeros_and_ones_take_no_argument_and_print_like_tvm(opcheck):
    z, o = ir.zeros((2, 3), "int32"), ir.ones((3,))
    assert z.args == () and opcheck.run(z).tolist() == [[0, 0, 0], [0, 0, 0]]
    assert opcheck.run(o).tolist() == [1.0, 1.0, 1.0] and opcheck.run(o).dtype == np.float32
    assert str(z) == 'zeros(shape=[2, 3], dtype="int32")'
    text = opcheck.roundtrip(ir.Tuple([z, o]), params=[])
    assert 'ones(shape=[3], dtype="float32")' in text
    # as in TVM, FoldConstant leaves calls without arguments alone (no materialised zeros)
    mod = ir.IRModule.from_expr(ir.Function([], ir.ones((2,), "int8")))
    assert passhost.passes.FoldConstant()(mod)["main"].body.op.name == "ones"
    assert ir.evaluate(mod).tolist() == [1, 1]


def test_like_forms(opcheck):
    a = np.arange(6, dtype="int32").reshape(2, 3)
    x = ir.var("x", shape=(2, 3), dtype="int32")
    assert opcheck.run(ir.zeros_like(x), a).tolist() == [[0] * 3] * 2
    assert opcheck.run(ir.ones_like(x), a).tolist() == [[1] * 3] * 2
    got = opcheck.run(ir.full_like(x, ir.var("v", shape=(), dtype="float32")), a, np.array(2.7, "float32"))
    assert got.dtype == np.int32 and got.tolist() == [[2] * 3] * 2  # cast to the data's dtype
    opcheck.roundtrip(ir.full_like(x, ir.const(5, "int32")))
    opcheck.folds(ir.zeros_like(ir.const(a)), np.zeros_like(a))
    opcheck.folds(ir.full_like(ir.const(a), ir.const(4, "int32")), np.full_like(a, 4))


def test_errors(opcheck):
    with pytest.raises(TypeInferenceError, match=r"full: the fill value must be a scalar"):
        opcheck.rel(ir.full(ir.var("v", shape=(2,)), (2,)), TensorType((2,), "float32"))
    with pytest.raises(TypeInferenceError, match=r"full_like: the fill value must be a scalar"):
        opcheck.rel(ir.full_like(ir.var("x"), ir.var("v")), TensorType((2,), "float32"),
                    TensorType((1,), "float32"))
    with pytest.raises(IRError, match="operator zeros: attribute shape must be a list of non-negative ints"):
        ir.Call(ir.Op.get("zeros"), [], {"shape": (2, -1), "dtype": "float32"})
    with pytest.raises(IRError, match="operator ones: attribute dtype"):
        ir.Call(ir.Op.get("ones"), [], {"shape": (2,), "dtype": ""})
