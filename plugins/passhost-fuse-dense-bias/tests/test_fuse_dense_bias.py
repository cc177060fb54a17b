"""FuseDenseBias: a product plus a bias along the last axis becomes dense + bias_add."""
from __future__ import annotations

import numpy as np
import pytest

import passhost
from passhost import ir

RNG = np.random.RandomState(0)
X = RNG.randn(2, 3, 4).astype("float32")
W = RNG.randn(4, 5).astype("float32")     # (K, N), as ONNX MatMul has it


def _run(body, x):
    mod = ir.IRModule.from_expr(ir.Function([x], body))
    want = ir.evaluate(ir.infer_type(mod), X)
    out = passhost.passes.FuseDenseBias()(mod)
    np.testing.assert_allclose(ir.evaluate(out, X), want, rtol=1e-5, atol=1e-5)
    return out["main"].body


@pytest.mark.parametrize("bias_shape", [(5,), (1, 1, 5), (1, 5)])
@pytest.mark.parametrize("product", ["matmul", "dense"])
def test_product_plus_bias_becomes_dense_bias_add(product, bias_shape):
    x = ir.var("x", shape=X.shape)
    b = ir.const(RNG.randn(*bias_shape).astype("float32"))
    prod = ir.nn.matmul(x, ir.const(W)) if product == "matmul" else ir.nn.dense(x, ir.const(np.ascontiguousarray(W.T)))
    body = _run(ir.add(b, prod), x)
    assert body.op.name == "nn.bias_add" and body.attrs.axis == -1
    assert body.args[0].op.name == "nn.dense" and body.args[1].checked_type.shape == (5,)


@pytest.mark.parametrize("bias_shape", [(3, 1), (2, 3, 5), (3, 5)])
def test_a_bias_along_another_axis_is_left_alone(bias_shape):
    x = ir.var("x", shape=X.shape)
    b = ir.const(RNG.randn(*bias_shape).astype("float32"))
    body = _run(ir.add(ir.nn.matmul(x, ir.const(W)), b), x)
    assert body.op.name == "add"


def test_a_computed_matmul_weight_is_left_alone():
    x = ir.var("x", shape=X.shape)
    w = ir.var("w", shape=(4, 5))
    mod = ir.IRModule.from_expr(ir.Function([x, w], ir.add(ir.nn.matmul(x, w), ir.const(np.ones(5, "float32")))))
    out = passhost.passes.FuseDenseBias()(mod)
    assert out["main"].body.op.name == "add"
