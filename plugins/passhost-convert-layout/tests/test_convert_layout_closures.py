"""ConvertLayout on closures (issue 38): a closure is converted with its function, so a
value it shares with the code around it is rewritten once. Before, the closure was left
as it was: a shared ``let`` then appeared twice (its old copy in the closure, its new one
outside), binding the same variable twice."""
from __future__ import annotations

import numpy as np

import passhost
from passhost import ir
from passhost.testing import evaluate_main, random_inputs


def _module():
    x = ir.var("x", shape=(1, 3, 4, 4))
    y = ir.var("y", shape=(1, 4, 4, 4))
    a = ir.var("a", shape=(1, 3, 4, 4))
    w = ir.const(np.random.RandomState(0).uniform(-1, 1, (4, 3, 3, 3)).astype("float32"))
    shared = ir.Let(a, ir.nn.relu(x), ir.nn.conv2d(a, w, padding=(1, 1), channels=4, kernel_size=(3, 3)))
    closure = ir.Function([y], ir.add(y, shared))
    return ir.infer_type(ir.IRModule.from_expr(ir.Function([x], ir.multiply(ir.Call(closure, [shared]), shared))))


def test_a_let_shared_by_a_closure_and_its_caller_is_converted_once():
    mod = _module()
    out = passhost.passes.ConvertLayout(desired_layouts={"nn.conv2d": ["NHWC", "default"]})(mod)
    ir.well_formed(out)
    text = ir.astext(out)
    assert text.count("let %a") == 1 and "NHWC" in text
    assert ir.structural_equal(ir.parse(text), out)
    inputs = random_inputs(mod, 0)
    np.testing.assert_allclose(evaluate_main(out, inputs), evaluate_main(mod, inputs), rtol=1e-5, atol=1e-5)
