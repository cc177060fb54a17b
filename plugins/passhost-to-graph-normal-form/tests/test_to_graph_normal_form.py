"""ToGraphNormalForm: lets removed with sharing, recursive lets kept as ``let %v = v; %v``,
round trips from A-normal form on random programs, and 100,000-deep let chains."""
from __future__ import annotations

import numpy as np
import pytest

import passhost
from passhost import ir
from passhost.testing import assert_semantics_preserved, check_pass, random_graph
from passhost_to_graph_normal_form import ToGraphNormalForm, to_graph_normal_form

T = ir.TensorType((3,), "float32")


def test_registered_with_tvm_info():
    p = passhost.passes.ToGraphNormalForm()
    assert p.info.name == "ToGraphNormalForm" and p.info.opt_level == 1 and tuple(p.info.required) == ()


def test_lets_become_shared_nodes():
    x, a, b = ir.var("x", T), ir.var("a", T), ir.var("b", T)
    before = ir.Function([x], ir.Let(a, ir.add(x, ir.const(1.0)), ir.Let(b, ir.multiply(a, a), b)))
    s = ir.add(x, ir.const(1.0))
    check_pass(ToGraphNormalForm(), before, ir.Function([x], ir.multiply(s, s)))
    out = ToGraphNormalForm()(ir.IRModule.from_expr(before))["main"].body
    assert out.args[0] is out.args[1]


def test_var_and_constant_values_are_substituted():
    x, a, b, c = ir.var("x", T), ir.var("a", T), ir.var("b", T), ir.var("c", T)
    k = ir.const(np.arange(3, dtype="float32"))
    before = ir.Function([x], ir.Let(a, x, ir.Let(b, a, ir.Let(c, k, ir.add(b, c)))))
    check_pass(ToGraphNormalForm(), before, ir.Function([x], ir.add(x, k)))


def test_graph_form_is_unchanged_identity():
    x = ir.var("x", T)
    f = ir.Function([x], ir.negative(x))
    assert to_graph_normal_form(f) is f


def test_recursive_let_is_kept_around_its_uses():
    n = ir.var("n", ir.TensorType((), "float32"))
    f = ir.var("f")
    x = ir.var("x", ir.TensorType((), "float32"))
    fn = ir.Function([x], ir.Call(f, [x]))
    before = ir.Function([n], ir.Let(f, fn, ir.Call(f, [n])))
    out = to_graph_normal_form(before)
    call = out.body
    assert type(call) is ir.Call and type(call.op) is ir.Let
    assert call.op.var is f and call.op.value is fn and call.op.body is f


def test_lets_inside_branches_and_functions():
    x, c, a = ir.var("x", T), ir.var("c", ir.TensorType((), "bool")), ir.var("a", T)
    y, b = ir.var("y", T), ir.var("b", T)
    inner = ir.Function([y], ir.Let(b, ir.negative(y), ir.add(b, b)))
    before = ir.Function([x, c], ir.If(c, ir.Let(a, ir.Call(inner, [x]), a), x))
    ny = ir.negative(y)
    expected = ir.Function([x, c], ir.If(c, ir.Call(ir.Function([y], ir.add(ny, ny)), [x]), x))
    check_pass(ToGraphNormalForm(), before, expected)


@pytest.mark.parametrize("seed", range(200))
def test_semantics_on_random_programs_with_lets(seed):
    mod = random_graph(seed, 20, lets=True, tuples=seed % 2 == 0)
    out = assert_semantics_preserved(ToGraphNormalForm(), mod, seed=seed)
    assert not any(type(n) is ir.Let for n in ir.post_order(out["main"]))
    anf = passhost.passes.ToANormalForm()(out)
    assert ir.structural_equal(ToGraphNormalForm()(anf)["main"], out["main"])


def test_deep_let_chain_at_default_recursion_limit():
    x = ir.var("x", T)
    vs = [ir.var(f"v{i}", T) for i in range(100_000)]
    body = vs[-1]
    prev = x
    values = []
    for v in vs:
        values.append(ir.negative(prev))
        prev = v
    for v, val in zip(reversed(vs), reversed(values)):
        body = ir.Let(v, val, body)
    out = to_graph_normal_form(ir.Function([x], body))
    n, e = 0, out.body
    while type(e) is ir.Call:
        n += 1
        e = e.args[0]
    assert n == 100_000 and e is x
