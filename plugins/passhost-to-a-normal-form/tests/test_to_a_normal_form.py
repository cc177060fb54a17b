"""ToANormalForm: expected outputs (scoping by LCA of uses, constants bound, lets reused,
primitive functions kept), round trips with ToGraphNormalForm on random programs,
semantics, and 100,000-deep chains."""
from __future__ import annotations

import numpy as np
import pytest

import passhost
from passhost import ir
from passhost.testing import assert_semantics_preserved, check_pass, random_graph
from passhost_to_a_normal_form import ToANormalForm, to_a_normal_form_function

T = ir.TensorType((3,), "float32")
B = ir.TensorType((), "bool")


def _lets(*pairs_and_result):
    *pairs, result = pairs_and_result
    expr = result
    for var, value in reversed(pairs):
        expr = ir.Let(var, value, expr)
    return expr


def test_registered_with_tvm_info():
    p = passhost.passes.ToANormalForm()
    assert p.info.name == "ToANormalForm" and p.info.opt_level == 1 and tuple(p.info.required) == ()


def test_chain_binds_constants_calls_and_result():
    x = ir.var("x", T)
    c = ir.const(np.ones(3, "float32"))
    before = ir.Function([x], ir.multiply(ir.add(x, c), x))
    v0, v1, v2 = ir.var("v0"), ir.var("v1"), ir.var("v2")
    expected = ir.Function([x], _lets((v0, c), (v1, ir.add(x, v0)), (v2, ir.multiply(v1, x)), v2))
    check_pass(ToANormalForm(), before, expected)


def test_shared_value_bound_once():
    x = ir.var("x", T)
    a = ir.negative(x)
    before = ir.Function([x], ir.add(a, a))
    v0, v1 = ir.var("v0"), ir.var("v1")
    check_pass(ToANormalForm(), before,
               ir.Function([x], _lets((v0, ir.negative(x)), (v1, ir.add(v0, v0)), v1)))


def test_value_used_in_one_branch_is_bound_inside_it():
    x, c = ir.var("x", T), ir.var("c", B)
    a = ir.negative(x)
    before = ir.Function([x, c], ir.If(c, ir.add(a, a), x))
    v0, v1, v2 = ir.var("v0"), ir.var("v1"), ir.var("v2")
    then = _lets((v0, ir.negative(x)), (v1, ir.add(v0, v0)), v1)
    expected = ir.Function([x, c], _lets((v2, ir.If(c, then, x)), v2))
    check_pass(ToANormalForm(), before, expected)


def test_value_used_in_both_branches_is_hoisted():
    x, c = ir.var("x", T), ir.var("c", B)
    a = ir.negative(x)
    before = ir.Function([x, c], ir.If(c, ir.add(a, x), a))
    v0, v1, v2 = ir.var("v0"), ir.var("v1"), ir.var("v2")
    expected = ir.Function([x, c], _lets(
        (v0, ir.negative(x)), (v2, ir.If(c, _lets((v1, ir.add(v0, x)), v1), v0)), v2))
    check_pass(ToANormalForm(), before, expected)


def test_existing_let_keeps_its_variable():
    x, a = ir.var("x", T), ir.var("a", T)
    before = ir.Function([x], ir.Let(a, ir.negative(x), ir.add(a, x)))
    v1 = ir.var("v1")
    check_pass(ToANormalForm(), before,
               ir.Function([x], _lets((a, ir.negative(x)), (v1, ir.add(a, x)), v1)))


def test_nested_function_gets_own_scope_and_primitive_is_kept():
    x, y, z = ir.var("x", T), ir.var("y", T), ir.var("z", T)
    prim = ir.Function([z], ir.negative(ir.negative(z))).with_attr("Primitive", 1)
    local = ir.Function([y], ir.add(y, y))
    before = ir.Function([x], ir.Call(local, [ir.Call(prim, [x])]))
    v0, v1, v2, v3 = (ir.var(f"v{i}") for i in range(4))
    expected = ir.Function([x], _lets(
        (v0, ir.Call(prim, [x])),
        (v2, ir.Function([y], _lets((v1, ir.add(y, y)), v1))),
        (v3, ir.Call(v2, [v0])), v3))
    check_pass(ToANormalForm(), before, expected)


def test_fresh_names_are_x_n_and_compiler_functions_are_skipped():
    x = ir.var("x", T)
    mod = ir.IRModule()
    mod["main"] = ir.Function([x], ir.negative(x))
    ext = ir.Function([x], ir.negative(x)).with_attr("Compiler", "ext")
    mod["ext"] = ext
    out = ToANormalForm()(mod)
    assert out["ext"] is ext
    body = out["main"].body
    assert type(body) is ir.Let and body.var.name_hint.startswith("x_") and body.body is body.var


@pytest.mark.parametrize("seed", range(200))
def test_round_trip_and_semantics_on_random_programs(seed):
    mod = ir.infer_type(random_graph(seed, 20, lets=seed % 2 == 1, tuples=seed % 3 == 0))
    anf = assert_semantics_preserved(ToANormalForm(), mod, seed=seed)
    for node in ir.post_order(anf["main"].body):
        if type(node) is ir.Call:
            assert all(type(a) in (ir.Var, ir.GlobalVar) for a in node.args)
    gnf_pass = passhost.passes.ToGraphNormalForm()
    assert ir.structural_equal(gnf_pass(anf)["main"], gnf_pass(mod)["main"])


def test_deep_chain_at_default_recursion_limit():
    x = ir.var("x", T)
    e = x
    for _ in range(100_000):
        e = ir.negative(e)
    out = to_a_normal_form_function(ir.Function([x], e))
    n = 0
    body = out.body
    while type(body) is ir.Let:
        n += 1
        body = body.body
    assert n == 100_000


@pytest.mark.parametrize("seed", range(20))
def test_idempotent(seed):
    mod = random_graph(seed, 15, lets=True)
    once = ToANormalForm()(mod)
    twice = ToANormalForm()(once)
    assert ir.structural_equal(once["main"], twice["main"])
