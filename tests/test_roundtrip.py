"""The IR's end-to-end guarantees: text round trips and 100,000-deep programs."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from passhost import ir
from passhost.testing import random_graph, random_inputs, resnet


def _roundtrip(mod):
    text = mod.astext(show_meta_data=True)
    back = ir.parse(text)
    assert ir.structural_equal(back, mod), text[:2000]
    assert ir.structural_hash(back) == ir.structural_hash(mod)
    assert back.astext(show_meta_data=True) == text


@pytest.mark.parametrize("lets", [False, True])
def test_print_parse_structurally_equal_on_random_graphs(lets):
    for seed in range(100):
        mod = ir.infer_type(random_graph(seed, 40, lets=lets, tuples=True))
        _roundtrip(mod)


def test_print_parse_resnet50():
    mod, _ = resnet(num_layers=50)
    _roundtrip(mod)


def test_print_parse_resnet18_with_bound_params_keeps_the_constant_data():
    mod, params = resnet(num_layers=18)
    mod["main"] = ir.bind_params_by_name(mod["main"], params)
    mod = ir.infer_type(mod)
    _roundtrip(mod)


class TvmStyleMutator(ir.ExprMutator):
    def visit_call(self, call):
        return ir.Call(self.visit(call.op), [self.visit(a) for a in call.args], call.attrs)


def test_100k_deep_chain_end_to_end_at_the_default_recursion_limit():
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        x = ir.var("x", shape=(4,))
        c = ir.const(np.full(4, 0.5, "float32"))
        e = x
        for i in range(100_000):
            e = ir.add(e, c) if i % 2 else ir.multiply(e, ir.const(1.0))
        mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([x], e)))
        text = mod.astext()
        back = ir.parse(text)
        assert ir.structural_hash(back) == ir.structural_hash(mod)
        assert ir.structural_equal(back, mod)
        rebuilt = TvmStyleMutator().visit(back["main"])
        assert rebuilt is not back["main"] and ir.structural_equal(rebuilt, back["main"])
        out = ir.evaluate(ir.IRModule.from_expr(rebuilt), np.zeros(4, "float32"))
    finally:
        sys.setrecursionlimit(old)
    np.testing.assert_allclose(out, np.full(4, 25_000.0, "float32"))


def test_random_graphs_evaluate_the_same_after_a_round_trip():
    for seed in range(0, 200, 20):
        mod = ir.infer_type(random_graph(seed, 30))
        args = random_inputs(mod, seed)
        back = ir.parse(mod.astext())
        np.testing.assert_array_equal(ir.evaluate(back, *args), ir.evaluate(mod, *args))
