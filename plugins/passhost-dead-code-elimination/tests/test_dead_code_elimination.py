"""DeadCodeElimination: TVM's test cases (before/expected), purity, inline_once,
semantics on random programs, and 100,000-deep let chains."""
from __future__ import annotations

import numpy as np
import pytest

import passhost
from passhost import ir
from passhost.errors import PassError
from passhost.testing import assert_semantics_preserved, check_pass, random_graph
from passhost_dead_code_elimination import DeadCodeElimination, dead_code_elimination
from passhost_dead_code_elimination.dead_code_elimination import Purity, count_uses, eliminate_dead_code

T = ir.TensorType((3,), "float32")


def _v(name):
    return ir.var(name, T)


def test_registered_with_tvm_info():
    p = passhost.passes.DeadCodeElimination()
    assert p.info.name == "DeadCodeElimination" and p.info.opt_level == 1
    assert tuple(p.info.required) == ("InferType",)


def test_unused_let_is_removed():
    x, z = ir.var("x"), _v("z")
    before = ir.Function([z], ir.Let(x, ir.const(np.ones(3, "float32")), z))
    check_pass(DeadCodeElimination(), before, ir.Function([z], z))


def test_chain_of_var_lets():
    a, c = ir.var("a", T), ir.var("c", T)
    b, d = _v("b"), _v("d")
    before = ir.Function([b, d], ir.Let(a, b, ir.Let(c, d, c)))
    check_pass(DeadCodeElimination(), before, ir.Function([b, d], ir.Let(c, d, c)))


def test_whole_dead_chain_goes_in_one_run():
    x = _v("x")
    a, b, c = ir.var("a", T), ir.var("b", T), ir.var("c", T)
    one = ir.const(1.0)
    before = ir.Function([x], ir.Let(a, ir.add(x, one), ir.Let(b, ir.multiply(a, one),
                                                                ir.Let(c, ir.subtract(b, one), x))))
    check_pass(DeadCodeElimination(), before, ir.Function([x], x))


def test_let_inside_an_expression():
    a = ir.var("a")
    # (let %a = 1; 3) + 2  ->  3 + 2
    before = ir.Function([], ir.add(ir.Let(a, ir.const(1.0), ir.const(3.0)), ir.const(2.0)))
    check_pass(DeadCodeElimination(), before, ir.Function([], ir.add(ir.const(3.0), ir.const(2.0))))


def _recursive(used: bool):
    x = _v("x")
    f = ir.var("f")
    n = _v("n")
    # a local function calling itself; self-reference inside its own body
    fn = ir.Function([n], ir.If(ir.less(ir.sum(n), ir.const(0.0)), n,
                                ir.Call(f, [ir.subtract(n, ir.const(1.0))])))
    return x, f, fn, ir.Function([x], ir.Let(f, fn, ir.Call(f, [x]) if used else x))


def test_unused_recursive_local_function_is_removed():
    x, f, fn, before = _recursive(used=False)
    out = dead_code_elimination(ir.IRModule.from_expr(before))
    assert out["main"].body is x


def test_used_recursive_local_function_stays():
    x, f, fn, before = _recursive(used=True)
    out = dead_code_elimination(ir.IRModule.from_expr(before))
    assert out["main"] is before


def test_inline_once():
    y = _v("y")
    x, f, z, a = ir.var("x", T), ir.var("f"), ir.var("z", T), _v("a")
    local = ir.Function([a], ir.Let(z, ir.add(a, a), ir.add(x, z)))
    before = ir.Function([y], ir.Let(x, ir.multiply(y, ir.const(2.0)),
                                     ir.Let(f, local, ir.add(ir.Call(f, [y]), ir.Call(f, [y])))))
    # %z (used once, same function) is inlined; %x (used inside a nested function) and
    # %f (used twice) stay
    a2 = _v("a")
    local2 = ir.Function([a2], ir.add(x, ir.add(a2, a2)))
    expected = ir.Function([y], ir.Let(x, ir.multiply(y, ir.const(2.0)),
                                       ir.Let(f, local2, ir.add(ir.Call(f, [y]), ir.Call(f, [y])))))
    check_pass(DeadCodeElimination(inline_once=True), before, expected, map_free_vars=True)
    # without inline_once nothing changes
    check_pass(DeadCodeElimination(), before)


def test_inline_once_through_a_chain_of_variables():
    y = _v("y")
    a, b = ir.var("a", T), ir.var("b", T)
    before = ir.Function([y], ir.Let(a, ir.negative(y), ir.Let(b, a, ir.exp(b))))
    check_pass(DeadCodeElimination(inline_once=True), before, ir.Function([y], ir.exp(ir.negative(y))))


def test_impure_binding_stays_unless_impurity_is_ignored():
    x = _v("x")
    d = ir.var("d")
    before = ir.Function([x], ir.Let(d, ir.nn.dropout(x), x))
    check_pass(DeadCodeElimination(), before)
    check_pass(DeadCodeElimination(ignore_impurity=True), before, ir.Function([x], x))


def test_calls_through_parameters_are_impure():
    x = _v("x")
    g = ir.var("g", ir.FuncType([T], T))
    a = ir.var("a", T)
    before = ir.Function([x, g], ir.Let(a, ir.Call(g, [x]), x))
    out = dead_code_elimination(ir.IRModule.from_expr(before))
    assert out["main"] is before


def _module_with_global(impure: bool) -> ir.IRModule:
    p = _v("p")
    body = ir.nn.dropout(p) if impure else ir.negative(p)
    mod = ir.IRModule()
    mod["g"] = ir.Function([p], body)
    x, a = _v("x"), ir.var("a", T)
    mod["main"] = ir.Function([x], ir.Let(a, ir.Call(mod.get_global_var("g"), [x]), x))
    return mod


def test_call_of_an_impure_global_stays():
    mod = _module_with_global(impure=True)
    out = DeadCodeElimination()(ir.infer_type(mod))
    assert type(out["main"].body) is ir.Let


def test_call_of_a_pure_global_goes():
    mod = ir.infer_type(_module_with_global(impure=False))
    out = DeadCodeElimination()(mod)
    assert out["main"].body is mod["main"].params[0]
    assert out["g"] is mod["g"] and out is not mod


def test_use_inside_nested_function_counts_twice():
    x = _v("x")
    a, p = ir.var("a", T), _v("p")
    func = ir.Function([x], ir.Let(a, ir.negative(x), ir.Function([p], ir.add(a, p))))
    counts = count_uses(func, Purity())
    assert counts[a] == 2


def test_shared_use_counts_as_many():
    x = _v("x")
    a = ir.var("a", T)
    use = ir.exp(a)
    func = ir.Function([x], ir.Let(a, ir.negative(x), ir.add(use, use)))
    assert count_uses(func, Purity())[a] == 2
    assert eliminate_dead_code(func, inline_once=True) is func


def test_options_are_validated():
    with pytest.raises(PassError, match="inline_once"):
        DeadCodeElimination(inline_once=1)
    with pytest.raises(PassError, match="ignore_impurity"):
        DeadCodeElimination(ignore_impurity="no")


@pytest.mark.parametrize("inline_once", [False, True])
def test_semantics_preserved_on_random_graphs(inline_once):
    p = DeadCodeElimination(inline_once=inline_once)
    for seed in range(100):
        assert_semantics_preserved(p, random_graph(seed, 25, lets=True, tuples=seed % 2 == 1), seed=seed)


def _let_chain(n: int, live: bool) -> ir.IRModule:
    x = _v("x")
    c = ir.const(np.ones(3, dtype="float32"))
    vs = [ir.var(f"v{i}", T) for i in range(n)]
    body = vs[-1] if live else x
    prev = x
    values = []
    for v in vs:
        values.append(ir.add(prev, c))
        prev = v
    for v, value in zip(reversed(vs), reversed(values)):
        body = ir.Let(v, value, body)
    return ir.IRModule.from_expr(ir.Function([x], body))


def test_deep_let_chains_at_default_recursion_limit():
    mod = _let_chain(100_000, live=True)
    assert DeadCodeElimination()(mod)["main"] is mod["main"]  # everything is used
    dead = _let_chain(100_000, live=False)
    out = DeadCodeElimination()(dead)
    assert out["main"].body is dead["main"].params[0]  # the whole chain goes in one run
    inlined = DeadCodeElimination(inline_once=True)(_let_chain(100_000, live=True))
    assert ir.count_ops(inlined["main"])["add"] == 100_000
    assert type(inlined["main"].body) is ir.Call


def test_recursive_function_used_once_is_not_inlined():
    # the self-reference inside its own body is a nested use: it counts twice
    x, f, fn, before = _recursive(used=True)
    out = DeadCodeElimination(inline_once=True)(ir.IRModule.from_expr(before))
    assert out["main"] is before


def test_inline_into_an_impure_binding_that_stays():
    # TVM: alloc_storage used once is inlined into memory.kill, whose unused binding stays
    x = _v("x")
    a, d = ir.var("a", T), ir.var("d")
    before = ir.Function([x], ir.Let(a, ir.negative(x), ir.Let(d, ir.nn.dropout(a), x)))
    d2 = ir.var("d")
    expected = ir.Function([x], ir.Let(d2, ir.nn.dropout(ir.negative(x)), x))
    check_pass(DeadCodeElimination(inline_once=True), before, expected, map_free_vars=True)
    # and without inline_once both stay: %a is used by the impure value
    check_pass(DeadCodeElimination(), before)


def test_lets_inside_if_branches():
    x = _v("x")
    a, b = ir.var("a", T), ir.var("b", T)
    cond = ir.less(ir.sum(x), ir.const(0.0))
    before = ir.Function([x], ir.If(cond, ir.Let(a, ir.exp(x), x), ir.Let(b, ir.exp(x), ir.negative(b))))
    expected = ir.Function([x], ir.If(cond, x, ir.Let(b, ir.exp(x), ir.negative(b))))
    check_pass(DeadCodeElimination(), before, expected)
    assert_semantics_preserved(DeadCodeElimination(), before, [np.array([1.0, 2.0, 3.0], "float32")])
    assert_semantics_preserved(DeadCodeElimination(), before, [np.array([-1.0, -2.0, 3.0], "float32")])


# ------------------------------------------------------------------ the let-free fast path


def _shared_dag(depth: int, leaf: ir.Expr) -> ir.Expr:
    """``depth`` levels, each using the level below twice: 2**depth paths, 2*depth nodes."""
    e = leaf
    for _ in range(depth):
        e = ir.add(ir.negative(e), e)
    return e


def test_function_without_lets_comes_back_as_the_same_object():
    x = _v("x")
    func = ir.Function([x], _shared_dag(60, x))  # 2**60 paths: the walk must not follow them
    assert eliminate_dead_code(func) is func
    assert eliminate_dead_code(func, inline_once=True) is func
    mod = ir.infer_type(passhost.testing.chain(100_000))  # and no frame per node
    assert DeadCodeElimination()(mod)["main"] is mod["main"]
    assert ir.contains_any(mod["main"], frozenset({ir.Let})) is False


def test_a_dead_let_below_a_shared_let_free_graph_still_goes():
    x = _v("x")
    a = ir.var("a", T)
    dead = ir.Let(a, ir.exp(x), ir.negative(x))  # %a is never used
    before = ir.Function([x], _shared_dag(40, dead))
    out = eliminate_dead_code(before)
    assert out is not before and not ir.contains_any(out, frozenset({ir.Let}))
    expected = ir.Function([x], _shared_dag(40, ir.negative(x)))
    check_pass(DeadCodeElimination(), before, expected)
