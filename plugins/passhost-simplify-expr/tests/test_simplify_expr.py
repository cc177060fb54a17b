"""SimplifyExpr: each rule fires where it may and keeps the numbers; near misses stay."""
from __future__ import annotations

import numpy as np
import pytest

import passhost
from passhost import ir


def _run(params, body, feeds):
    mod = ir.IRModule.from_expr(ir.Function(params, body))
    want = ir.evaluate(ir.infer_type(mod), *feeds)
    out = passhost.passes.SimplifyExpr()(mod)
    got = ir.evaluate(out, *feeds)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    return out["main"].body


X = np.arange(6, dtype="float32").reshape(2, 3) - 2.5


def _x(shape=(2, 3), dtype="float32"):
    return ir.var("x", shape=shape, dtype=dtype)


def test_reshape_chains_become_one_reshape_or_nothing():
    x = _x()
    body = _run([x], ir.reshape(ir.expand_dims(ir.reshape(x, (6,)), axis=0), (3, 2)), [X])
    assert body.op.name == "reshape" and body.args[0] is x and tuple(body.attrs.newshape) == (3, 2)
    assert _run([x], ir.reshape(ir.reshape(x, (6,)), (2, 3)), [X]) is x


def test_transpose_chains_compose():
    x = _x((2, 3, 4))
    a = np.random.RandomState(0).randn(2, 3, 4).astype("float32")
    assert _run([x], ir.transpose(ir.transpose(x, (1, 0, 2)), (1, 0, 2)), [a]) is x
    body = _run([x], ir.transpose(ir.transpose(x, (1, 2, 0)), (1, 0, 2)), [a])
    assert body.op.name == "transpose" and body.args[0] is x


@pytest.mark.parametrize("op,value", [("multiply", 1.0), ("divide", 1.0), ("add", 0.0), ("subtract", 0.0)])
def test_identities_are_removed(op, value):
    x = _x()
    assert _run([x], getattr(ir, op)(x, ir.const(value)), [X]) is x
    if op in ("add", "multiply"):  # either way round, a constant of x's shape too
        assert _run([x], getattr(ir, op)(ir.const(np.full((2, 3), value, "float32")), x), [X]) is x
        assert _run([x], getattr(ir, op)(ir.const(np.full(3, value, "float32")), x), [X]) is x


def test_a_bias_add_of_zeros_is_removed_and_one_of_other_values_stays():
    x = _x()
    assert _run([x], ir.nn.bias_add(x, ir.const(np.zeros(3, "float32"))), [X]) is x
    kept = _run([x], ir.nn.bias_add(x, ir.const(np.array([0, 0, 1e-30], "float32"))), [X])
    assert kept.op.name == "nn.bias_add"


@pytest.mark.parametrize("body", [
    lambda x: ir.divide(ir.const(1.0), x),                                     # 1 / x
    lambda x: ir.subtract(ir.const(0.0), x),                                   # -x
    lambda x: ir.multiply(x, ir.const(np.ones((4, 2, 3), "float32"))),         # broadcasts to a larger shape
    lambda x: ir.multiply(x, ir.const(2.0)),
    lambda x: ir.multiply(x, ir.const(0.0)),                                   # not zeros: NaN * 0 is NaN
])
def test_near_misses_stay(body):
    x = _x()
    out = _run([x], body(x), [X])
    assert isinstance(out, ir.Call)


def test_casts():
    i = _x((3,), "int8")
    a = np.array([-3, 0, 7], "int8")
    body = _run([i], ir.cast(ir.cast(i, "int32"), "float32"), [a])
    assert body.op.name == "cast" and body.args[0] is i and body.attrs.dtype == "float32"
    f = _x((3,))
    narrowing = _run([f], ir.cast(ir.cast(f, "int32"), "float32"), [np.array([0.5, -1.7, 2.2], "float32")])
    assert narrowing.args[0].op.name == "cast"  # float -> int drops the fraction: kept
    assert _run([f], ir.cast(f, "float32"), [np.ones(3, "float32")]) is f


def test_a_pad_of_zero_widths_goes_and_one_that_pads_stays():
    x = ir.var("x", shape=("batch", 3), dtype="float32")
    assert _run([x], ir.nn.pad(x, ((0, 0), (0, 0)), pad_value=0.0), [X]) is x
    assert _run([x], ir.nn.pad(x, ((0, 0), (0, 0)), pad_mode="reflect"), [X]) is x
    kept = _run([x], ir.nn.pad(x, ((0, 0), (0, 1))), [X])
    assert kept.op.name == "nn.pad"


def test_a_broadcast_operand_goes_where_the_operator_broadcasts_anyway():
    x = ir.var("x", shape=("n", 3), dtype="float32")
    y = ir.var("y", shape=("n", 1), dtype="float32")
    c = ir.var("c", shape=("n", 3), dtype="bool")
    a = np.arange(6, dtype="float32").reshape(2, 3) + 1
    b, mask = np.array([[2.0], [4.0]], "float32"), a > 2
    body = _run([x, y, c], ir.divide(x, ir.broadcast_to(y, ("n", 3))), [a, b, mask])
    assert body.op.name == "divide" and body.args[1] is y
    body = _run([x, y, c], ir.where(c, x, ir.full(ir.const(0.0), ("n", 3), "float32")), [a, b, mask])
    assert isinstance(body.args[2], ir.Constant) and body.args[2].data.shape == ()
    body = _run([x, y, c], ir.subtract(ir.ones(("n", 3), "float32"), x), [a, b, mask])
    assert isinstance(body.args[0], ir.Constant)
    kept = _run([x, y, c], ir.add(y, ir.broadcast_to(y, ("n", 3))), [a, b, mask])  # y + y is (n, 1)
    assert kept.args[1].op.name == "broadcast_to"


def test_like_calls_become_concrete():
    x = _x()
    body = _run([x], ir.ones_like(x), [X])
    assert body.op.name == "ones" and tuple(body.attrs.shape) == (2, 3)
    body = _run([x], ir.zeros_like(x), [X])
    assert body.op.name == "zeros"
    body = _run([x], ir.add(x, ir.ones_like(x)), [X])  # then, as an operand, the scalar it fills with
    assert isinstance(body.args[1], ir.Constant) and body.args[1].data.shape == ()


def test_in_the_default_pipeline_and_its_rules_are_listed(capsys):
    from passhost.cli import main

    assert "SimplifyExpr" in str(passhost.default_pipeline(0).spec)
    assert main(["info", "SimplifyExpr"]) == 0
    out = capsys.readouterr().out
    for name in ("consecutive_reshape", "transpose_chain", "eliminate_identity", "cast_of_cast", "concretize_like"):
        assert name in out
