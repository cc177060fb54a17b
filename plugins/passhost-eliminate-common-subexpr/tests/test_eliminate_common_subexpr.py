"""EliminateCommonSubexpr: TVM's test cases (before/expected), the tutorial's printed
output, semantics on random programs, and 100,000-deep chains."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import passhost
from passhost import ir
from passhost.errors import PassError
from passhost.testing import assert_semantics_preserved, chain, check_pass, example, random_graph
from passhost.testing.seeds import collapse, seed_code_blocks
from passhost_eliminate_common_subexpr import EliminateCommonSubexpr, eliminate_common_subexpr

SEED = Path(__file__).resolve().parents[3] / "tests" / "seeds" / "tvm-use-pass-infra-tutorial.txt"


def _two_relu_adds():
    x = ir.var("x", shape=(1, 16))
    y1 = ir.add(ir.nn.relu(x), ir.const(1.0))
    y2 = ir.add(ir.nn.relu(x), ir.const(1.0))  # distinct constant objects, equal scalars
    return ir.Function([x], ir.add(y1, y2))


def test_registered_with_tvm_info():
    p = passhost.passes.EliminateCommonSubexpr()
    assert p.info.name == "EliminateCommonSubexpr" and p.info.opt_level == 3
    assert tuple(p.info.required) == ("InferType",)


def test_two_relus_and_adds_merge():
    x = ir.var("x", shape=(1, 16))
    y = ir.add(ir.nn.relu(x), ir.const(1.0))
    expected = ir.Function([x], ir.add(y, y))
    check_pass(EliminateCommonSubexpr(), _two_relu_adds(), expected, map_free_vars=True)


def test_fskip_keeps_skipped_calls_apart():
    def fskip(expr):
        return isinstance(expr, ir.Call) and expr.op.name == "add"

    x = ir.var("x", shape=(1, 16))
    r = ir.nn.relu(x)
    expected = ir.Function([x], ir.add(ir.add(r, ir.const(1.0)), ir.add(r, ir.const(1.0))))
    check_pass(EliminateCommonSubexpr(fskip=fskip), _two_relu_adds(), expected, map_free_vars=True)


def test_tuple_get_items_of_the_same_tuple_merge():
    x = ir.var("x", shape=(1, 16, 4, 4))
    g, b, m, v = (ir.var(n, shape=(16,)) for n in ("g", "b", "m", "v"))
    bn = ir.nn.batch_norm(x, g, b, m, v)
    before = ir.Function([x, g, b, m, v], ir.add(ir.TupleGetItem(bn, 0), ir.TupleGetItem(bn, 0)))
    t = ir.TupleGetItem(bn, 0)
    expected = ir.Function([x, g, b, m, v], ir.add(t, t))
    check_pass(EliminateCommonSubexpr(), before, expected)


def test_tuple_arguments_compare_field_by_field():
    x = ir.var("x", shape=(1, 16))
    c0 = ir.const(np.ones((1, 16), dtype="float32"))
    y1, y2 = ir.nn.relu(x), ir.nn.relu(x)
    before = ir.Function([x], ir.add(ir.concatenate([y1, c0]), ir.concatenate([y2, c0])))
    y = ir.nn.relu(x)
    z = ir.concatenate([y, c0])
    check_pass(EliminateCommonSubexpr(), before, ir.Function([x], ir.add(z, z)))


def test_equal_non_scalar_constants_must_be_the_same_node():
    x = ir.var("x", shape=(3,))
    c1 = ir.const(np.ones(3, dtype="float32"))
    c2 = ir.const(np.ones(3, dtype="float32"))
    check_pass(EliminateCommonSubexpr(), ir.Function([x], ir.add(ir.add(x, c1), ir.add(x, c2))))


def test_scalar_constants_of_other_dtype_or_value_do_not_match():
    x = ir.var("x", shape=(3,))
    before = ir.Function([x], ir.add(ir.add(x, ir.const(1.0)), ir.add(x, ir.const(2.0))))
    check_pass(EliminateCommonSubexpr(), before)


def test_attrs_must_be_equal():
    x = ir.var("x", shape=(2, 3))
    before = ir.Function([x], ir.add(ir.sum(x, axis=0), ir.sum(x, axis=0)))
    s = ir.sum(x, axis=0)
    check_pass(EliminateCommonSubexpr(), before, ir.Function([x], ir.add(s, s)))
    before = ir.Function([x], ir.add(ir.nn.softmax(x, axis=0), ir.nn.softmax(x, axis=1)))
    check_pass(EliminateCommonSubexpr(), before)


def test_stateful_calls_are_never_merged():
    x = ir.var("x", shape=(4,))
    before = ir.Function([x], ir.add(ir.nn.dropout(x), ir.nn.dropout(x)))
    out = eliminate_common_subexpr(before)
    assert out is before


def test_merges_inside_let_values_and_nested_functions():
    x = ir.var("x", shape=(3,))
    a = ir.var("a")
    p = ir.var("p", shape=(3,))
    inner = ir.Function([p], ir.add(ir.negative(x), p))
    before = ir.Function([x], ir.Let(a, ir.negative(x), ir.add(a, ir.Call(inner, [ir.negative(x)]))))
    out = eliminate_common_subexpr(before)
    neg = out.body.value
    assert out.body.body.args[1].args[0] is neg
    assert out.body.body.args[1].op.body.args[0] is neg


def test_merges_inside_a_called_local_function_with_two_arguments():
    x = ir.var("x", shape=(3,))
    p, q = ir.var("p", shape=(3,)), ir.var("q", shape=(3,))
    inner = ir.Function([p, q], ir.add(ir.exp(p), ir.exp(p)))
    out = eliminate_common_subexpr(ir.Function([x], ir.Call(inner, [x, x])))
    body = out.body.op.body
    assert body.args[0] is body.args[1]


def test_tutorial_prints_the_seed_output():
    fold = passhost.passes.FoldConstant()
    mod = EliminateCommonSubexpr()(fold(ir.IRModule.from_expr(example())))
    assert collapse(str(mod)) == collapse(seed_code_blocks(SEED)[1])


def test_nothing_to_merge_returns_the_same_function():
    mod = ir.infer_type(chain(100))
    assert EliminateCommonSubexpr()(mod)["main"] is mod["main"]


@pytest.mark.parametrize("typed", [True, False])
def test_rebuilt_calls_keep_op_attrs_and_type(typed):
    x = ir.var("x", shape=(1, 2, 4, 4))
    a, b = ir.nn.relu(x), ir.nn.relu(x)
    pool = ir.nn.max_pool2d(ir.add(a, b), pool_size=(1, 1), padding=(0, 0))  # rebuilt: its argument is rebuilt
    func = ir.Function([x], ir.concatenate(ir.Tuple([pool, ir.multiply(pool, b)]), axis=1))
    if typed:
        func = ir.infer_type(func)
    out = eliminate_common_subexpr(func)
    new_pool = out.body.args[0].fields[0]
    assert new_pool is not pool and new_pool.op is pool.op and new_pool.attrs == pool.attrs
    assert new_pool.args[0].args[0] is new_pool.args[0].args[1]
    assert new_pool.has_type is typed and out.body.has_type is typed
    if typed:
        assert new_pool.checked_type == pool.checked_type


def test_option_is_validated():
    with pytest.raises(PassError, match="fskip"):
        EliminateCommonSubexpr(fskip=3)


@pytest.mark.parametrize("lets,tuples", [(False, False), (True, False), (False, True), (True, True)])
def test_semantics_preserved_on_random_graphs(lets, tuples):
    p = EliminateCommonSubexpr()
    for seed in range(60):
        assert_semantics_preserved(p, random_graph(seed, 25, lets=lets, tuples=tuples), seed=seed)


def test_deep_chains_at_default_recursion_limit():
    mod = chain(100_000)
    out = EliminateCommonSubexpr()(mod)
    assert out["main"].body.op.name == "add"
    # two separately built, identical 100,000-deep chains collapse into one
    x = ir.var("x", shape=(2,))
    c = ir.const(np.ones(2, dtype="float32"))
    ends = []
    for _ in range(2):
        e = x
        for _ in range(100_000):
            e = ir.add(e, c)
        ends.append(e)
    out = eliminate_common_subexpr(ir.Function([x], ir.multiply(*ends)))
    assert out.body.args[0] is out.body.args[1]
    assert ir.count_ops(out)["add"] == 100_000
