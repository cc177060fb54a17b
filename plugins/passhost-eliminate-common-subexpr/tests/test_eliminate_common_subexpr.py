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


# ------------------------------------------------------------ the one-walk implementation


def test_the_first_call_in_post_order_survives():
    x = ir.var("x", shape=(3,))
    left, right = ir.negative(x), ir.negative(x)
    deep = ir.exp(ir.negative(x))  # its negative comes after `left` in post-order
    out = eliminate_common_subexpr(ir.Function([x], ir.Tuple([ir.add(left, right), deep])))
    add, new_deep = out.body.fields
    assert add.args[0] is left and add.args[1] is left and new_deep.args[0] is left


def test_an_equal_scalar_constant_is_matched_but_kept_in_place():
    x = ir.var("x", shape=(3,))
    c1, c2 = ir.const(2.0), ir.const(2.0)
    first, second = ir.add(x, c1), ir.add(x, c2)
    other = ir.multiply(c2, x)  # not merged: keeps its own constant object
    out = eliminate_common_subexpr(ir.Function([x], ir.Tuple([first, second, other])))
    assert out.body.fields[0] is first and out.body.fields[1] is first
    assert out.body.fields[2] is other and other.args[0] is c2
    half = ir.const(np.float16(2.0))  # same value, other dtype: no match
    func = ir.Function([x], ir.Tuple([ir.add(x, c1), ir.add(x, half)]))
    assert eliminate_common_subexpr(func) is func


def test_tuple_fields_match_equal_scalar_constants():
    x = ir.var("x", shape=(3,))
    y = ir.nn.relu(x)
    cat1 = ir.concatenate(ir.Tuple([x, ir.const(np.ones(3, "float32")), y]), axis=0)
    z = ir.concatenate(ir.Tuple([x, ir.const(np.ones(3, "float32")), y]), axis=0)
    func = ir.Function([x], ir.add(cat1, z))
    assert eliminate_common_subexpr(func) is func  # non-scalar constants: only the same node matches
    t1 = ir.Tuple([x, ir.const(1.0), y])
    t2 = ir.Tuple([x, ir.const(1.0), ir.nn.relu(x)])
    out = eliminate_common_subexpr(ir.Function([x], ir.add(ir.concatenate(t1), ir.concatenate(t2))))
    assert out.body.args[0] is out.body.args[1]


def test_attrs_equal_to_the_defaults_match_calls_without_attrs():
    x = ir.var("x", shape=(2, 3))
    plain = ir.Call(ir.Op.get("nn.softmax"), [x])
    spelled = ir.Call(ir.Op.get("nn.softmax"), [x], ir.Attrs({"axis": -1}))
    other = ir.Call(ir.Op.get("nn.softmax"), [x], ir.Attrs({"axis": 0}))
    assert spelled.attrs is not plain.attrs
    out = eliminate_common_subexpr(ir.Function([x], ir.Tuple([plain, spelled, other, plain])))
    f = out.body.fields
    assert f[0] is plain and f[1] is plain and f[2] is other and f[3] is plain


def test_a_rebuilt_call_is_typed_only_when_its_new_arguments_are():
    x = ir.var("x", shape=(3,))
    c = ir.const(1.0)
    typed = ir.infer_type(ir.Function([x], ir.add(ir.nn.relu(x), c))).body  # typed sub-graph
    fresh = ir.nn.relu(x)  # untyped, first in post-order: it survives the merge
    out = eliminate_common_subexpr(ir.Function([x], ir.multiply(ir.exp(fresh), typed)))
    rebuilt = out.body.args[1]
    assert rebuilt is not typed and rebuilt.args[0] is fresh
    assert typed.has_type and not rebuilt.has_type  # a typed call over an untyped argument


def test_a_call_with_the_wrong_argument_count_is_a_pass_error():
    x = ir.var("x", shape=(3,))
    good = ir.add(x, x)
    bad = good.with_args((x, x, x))  # with_args does not re-check the arity
    with pytest.raises(PassError, match="add has 3 arguments but the operator takes 2"):
        eliminate_common_subexpr(ir.Function([x], ir.multiply(good, ir.negative(bad))))


def _reference_cse(expr, fskip=None):
    """TVM's algorithm as written: each call is compared with every earlier call of its operator."""

    def same_scalar(a, b):
        return (type(a) is ir.Constant and type(b) is ir.Constant and a.data.ndim == 0 and b.data.ndim == 0
                and a.data.dtype == b.data.dtype and a.data.tobytes() == b.data.tobytes())

    def equivalent(a, b):
        if a is b or same_scalar(a, b):
            return True
        return (type(a) is ir.Tuple and type(b) is ir.Tuple and len(a.fields) == len(b.fields)
                and all(f is g or same_scalar(f, g) for f, g in zip(a.fields, b.fields)))

    memo, calls, getitems = {}, {}, []
    for node in ir.post_order(expr):
        new = ir.with_children(node, tuple(memo.get(k, k) for k in ir.children(node)))
        if new is not node:
            new = ir.keep_checked_type(node, new)
        skipped = fskip is not None and fskip(new)
        if (type(new) is ir.Call and type(new.op) is ir.Op and new.args and not new.op.stateful
                and not skipped):
            seen = calls.setdefault(new.op, [])
            match = [c for c in seen if c.attrs == new.attrs and len(c.args) == len(new.args)
                     and all(equivalent(a, b) for a, b in zip(c.args, new.args))]
            if match:
                new = match[0]
            else:
                seen.append(new)
        elif type(new) is ir.TupleGetItem and not skipped:
            match = [g for g in getitems if g.tuple_value is new.tuple_value and g.index == new.index]
            if match:
                new = match[0]
            else:
                getitems.append(new)
        memo[node] = new
    return memo.get(expr, expr)


def _assert_same_rewrite(before, a, b):
    """``a`` and ``b`` are the same graph: same shape and sharing, the very same nodes
    where either reuses a node of ``before``, equal ops, attrs, indices and types."""
    old = set(ir.post_order(before))
    la, lb = ir.post_order(a), ir.post_order(b)
    assert len(la) == len(lb)
    ia, ib = {n: i for i, n in enumerate(la)}, {n: i for i, n in enumerate(lb)}
    for u, v in zip(la, lb):
        assert type(u) is type(v)
        if u in old or v in old:
            assert u is v
            continue
        assert [ia[k] for k in ir.children(u)] == [ib[k] for k in ir.children(v)]
        assert getattr(u, "attrs", None) == getattr(v, "attrs", None)
        assert getattr(u, "index", None) == getattr(v, "index", None)
        assert u.has_type == v.has_type and (not u.has_type or u.checked_type == v.checked_type)
    assert (a is before) == (b is before)


def _fuzzed(seed: int, steps: int = 40) -> ir.Function:
    """Untyped graphs full of duplicates: equal scalar constants, equal or default attrs,
    tuples, projections, stateful calls, lets, ifs and called local functions."""
    rnd = np.random.RandomState(seed)
    x, y = ir.var("x"), ir.var("y")
    pool = [x, y]
    big = ir.const(np.ones(3, "float32"))

    def pick():
        return pool[len(pool) - 1 - min(len(pool) - 1, int(rnd.exponential(5)))]

    def operand():
        r = rnd.randint(4)
        if r == 0:
            return ir.const(np.array(rnd.choice([1.0, 2.0]), dtype=rnd.choice(["float32", "float16"])))
        return big if r == 1 else pick()

    op = ir.Op.get
    for _ in range(steps):
        r = rnd.randint(14)
        if r <= 2:
            e = ir.Call(op(["add", "multiply"][r % 2]), [pick(), operand()])
        elif r == 3:
            e = ir.Call(op(rnd.choice(["negative", "nn.relu", "nn.dropout"])), [pick()])
        elif r == 4:
            axis = int(rnd.choice([-1, 0]))
            e = ir.Call(op("nn.softmax"), [pick()], ir.Attrs({"axis": axis}) if rnd.rand() < 0.7 else None)
        elif r == 5:
            e = ir.Call(op("concatenate"), [ir.Tuple([pick(), operand()])])
        elif r == 6:
            e = ir.Call(op("where"), [pick(), pick(), operand()])
        elif r == 7:
            t = ir.Tuple([pick(), pick()]) if rnd.rand() < 0.5 else ir.Call(op("nn.dropout"), [pick()])
            e = ir.TupleGetItem(t, int(rnd.randint(2)))
        elif r == 8:
            p = ir.var("p")
            e = ir.Call(ir.Function([p], ir.add(ir.add(p, pick()), ir.add(p, pool[-1]))), [pick()])
        elif r == 9:
            v = ir.var("v")
            e = ir.Let(v, pick(), ir.add(v, pick()))
        elif r == 10:
            e = ir.If(pick(), pick(), pick())
        elif r == 11:
            e = ir.Tuple([pick(), pick()])
        else:  # a structurally identical copy of an earlier call or projection
            src = pool[rnd.randint(len(pool))]
            if type(src) is ir.Call:
                e = ir.Call(src.op, src.args, src.attrs)
            elif type(src) is ir.TupleGetItem:
                e = ir.TupleGetItem(src.tuple_value, src.index)
            else:
                continue
        pool.append(e)
    return ir.Function([x, y], ir.Tuple(pool[-5:]) if seed % 2 else pool[-1])


def test_same_result_as_tvms_quadratic_algorithm_on_fuzzed_graphs():
    def fskip(e):
        return (type(e) is ir.Call and getattr(e.op, "name", "") == "add"
                or type(e) is ir.TupleGetItem and e.index == 1)

    merged = 0
    for seed in range(300):
        func = _fuzzed(seed)
        for skip in (None, fskip):
            out = eliminate_common_subexpr(func, skip)
            _assert_same_rewrite(func, _reference_cse(func, skip), out)
            merged += out is not func
    assert merged > 300  # the graphs do merge


def test_same_result_as_tvms_algorithm_on_typed_random_graphs():
    for seed in range(40):
        func = ir.infer_type(random_graph(seed, 30, lets=seed % 2 == 0, tuples=seed % 3 == 0))["main"]
        _assert_same_rewrite(func, _reference_cse(func), eliminate_common_subexpr(func))
