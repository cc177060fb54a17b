"""Rule passes on modules with global functions (issue 38 §2).

A rule pass types what it matches and what it builds; the pattern driver used to do that
without the module, so on an untyped module whose ``@main`` calls ``@g0`` every rule pass
stopped with ``cannot type @g0 outside a module``. Typing inside a pass now happens in
the module's context (``rewrite(..., mod=)``, ``infer_type(expr, mod=)``).
"""
from __future__ import annotations

import numpy as np
import pytest

import passhost
from passhost import ir
from passhost.ir.builders import mean, power, sqrt
from passhost.testing import evaluate_main, random_inputs


def _const(*shape, low=0.5, high=1.5):
    return ir.const(np.random.RandomState(len(shape)).uniform(low, high, size=shape).astype("float32"))


def _layer_norm(v):
    m = mean(v, axis=[-1], keepdims=True)
    d = ir.subtract(v, m)
    var = mean(power(d, ir.const(2.0)), axis=[-1], keepdims=True)
    n = ir.divide(d, sqrt(ir.add(var, ir.const(1e-5))))
    return ir.add(ir.multiply(n, _const(4)), _const(4, low=-0.5, high=0.5))


CASES = {
    "SimplifyExpr": ((1, 4), lambda v: ir.add(ir.negative(ir.negative(v)), ir.const(0.0))),
    "CanonicalizeOps": ((1, 4), lambda v: ir.nn.bias_add(v, _const(4))),
    "SimplifyInference": ((1, 4, 2, 2), lambda v: ir.nn.batch_norm(v, _const(4), _const(4), _const(4), _const(4))[0]),
    "FuseDenseBias": ((1, 4), lambda v: ir.add(ir.nn.dense(v, _const(3, 4), units=3), _const(3))),
    "FuseLayerNorm": ((1, 4), _layer_norm),
}


def _module(shape, body):
    a, x = ir.var("a", shape=shape), ir.var("x", shape=shape)
    g0 = ir.GlobalVar("g0")
    mod = ir.IRModule()
    mod[g0] = ir.Function([a], ir.negative(a))
    mod["main"] = ir.Function([x], body(ir.Call(g0, [x])))
    return mod


@pytest.mark.parametrize("typed", [False, True], ids=["untyped", "typed"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_rule_pass_rewrites_a_module_whose_main_calls_a_global(name, typed):
    shape, body = CASES[name]
    mod = _module(shape, body)
    if typed:
        mod = ir.infer_type(mod)
    inputs = random_inputs(ir.infer_type(_module(shape, body)), 0)
    want = evaluate_main(_module(shape, body), inputs)
    out = passhost.passes.get(name)(mod)
    assert ir.astext(out) != ir.astext(ir.infer_type(_module(shape, body))), "the rule did not fire"
    np.testing.assert_allclose(evaluate_main(out, inputs), want, rtol=1e-5, atol=1e-6)
    assert ir.structural_equal(ir.parse(ir.astext(out)), out)


def test_an_expression_of_a_module_is_typed_from_its_globals():
    mod = _module((2,), lambda v: ir.exp(v))
    call = mod["main"].body
    assert ir.infer_type(call, mod=mod).checked_type == ir.TensorType((2,), "float32")
    with pytest.raises(passhost.errors.TypeInferenceError, match="outside a module"):
        ir.infer_type(ir.exp(ir.Call(ir.GlobalVar("g0"), [ir.var("y", shape=(2,))])))
