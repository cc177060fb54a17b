"""FoldConstant: TVM's test cases (before/expected), the tutorial's printed output,
semantics on random programs, and a 100,000-deep chain."""
from __future__ import annotations

import importlib
import random
import sys
from pathlib import Path

import numpy as np
import pytest

import passhost
from passhost import ir
from passhost.errors import PassError
from passhost.testing import assert_semantics_preserved, chain, check_pass, example, random_graph
from passhost.testing.seeds import collapse, seed_code_blocks
from passhost_fold_constant import FoldConstant, fold_constant

SEED = Path(__file__).resolve().parents[3] / "tests" / "seeds" / "tvm-use-pass-infra-tutorial.txt"

C_DATA = np.array([1, 2, 3], dtype="float32")
T = ir.TensorType((1, 2, 3), "float32")


def test_registered_with_tvm_info():
    p = passhost.passes.FoldConstant()
    assert p.info.name == "FoldConstant" and p.info.opt_level == 2 and tuple(p.info.required) == ()
    assert passhost.passes.info("FoldConstant").distribution == "passhost-fold-constant"


def test_fold_constant_notes_example():
    """tvm-fold-constant-notes-zh.txt: add(x, (c+c)*2) + c -> add(add(x, const), c)."""
    c = ir.const(C_DATA)
    x = ir.var("x", T)
    y = ir.multiply(ir.add(c, c), ir.const(2, "float32"))
    before = ir.Function([x], ir.add(ir.add(x, y), c))
    x2 = ir.var("x", T)
    expected = ir.Function([x2], ir.add(ir.add(x2, ir.const((C_DATA + C_DATA) * 2)), ir.const(C_DATA)))
    out = check_pass(FoldConstant(), before, expected, map_free_vars=True)
    body = out["main"].body
    # the untouched constant is the very same node
    assert body.args[1] is c


def test_fold_constant_notes_printed_body():
    """The body lines printed in tvm-fold-constant-notes-zh.txt after FoldConstant."""
    notes = (Path(__file__).resolve().parents[3] / "tests" / "seeds" / "tvm-fold-constant-notes-zh.txt")
    lines = notes.read_text(encoding="utf-8").splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("def @main"))
    want = [line.strip() for line in lines[start + 1:start + 3]]
    c = ir.const(C_DATA)
    x = ir.var("x", T)
    y = ir.multiply(ir.add(c, c), ir.const(2, "float32"))
    mod = FoldConstant()(ir.IRModule.from_expr(ir.Function([x], ir.add(ir.add(x, y), c))))
    got = [line.strip() for line in str(mod).splitlines()[1:3]]
    assert got == want


def test_concatenate_of_constants():
    c = ir.const(C_DATA)
    before = ir.Function([], ir.concatenate([c, c]))
    expected = ir.Function([], ir.const(np.array([1, 2, 3, 1, 2, 3], dtype="float32")))
    check_pass(FoldConstant(), before, expected)


def test_if_with_constant_condition():
    x, y = ir.const(np.float32(2.0)), ir.const(np.float32(5.0))
    before = ir.Function([], ir.If(ir.const(True), ir.add(x, y), ir.subtract(x, y)))
    check_pass(FoldConstant(), before, ir.Function([], ir.const(np.float32(7.0))))
    before = ir.Function([], ir.If(ir.const(False), ir.add(x, y), ir.subtract(x, y)))
    check_pass(FoldConstant(), before, ir.Function([], ir.const(np.float32(-3.0))))


def test_shape_of_static_shape_folds():
    x = ir.var("x", shape=(8, 9, 10))
    y = ir.var("y", shape=(8, 9, 10))
    before = ir.Function([x, y], ir.shape_of(ir.add(x, y)))
    x2, y2 = ir.var("x", shape=(8, 9, 10)), ir.var("y", shape=(8, 9, 10))
    expected = ir.Function([x2, y2], ir.const(np.array([8, 9, 10], dtype="int32")))
    check_pass(FoldConstant(), before, expected, map_free_vars=True)
    before = ir.Function([x, y], ir.shape_of(ir.add(x, y), "float32"))
    expected = ir.Function([x2, y2], ir.const(np.array([8, 9, 10], dtype="float32")))
    check_pass(FoldConstant(), before, expected, map_free_vars=True)


def test_shape_of_in_an_untyped_program():
    x = ir.var("x", shape=(8, 9, 10))
    y = ir.var("y", shape=(8, 9, 10))
    out = fold_constant(ir.Function([x, y], ir.shape_of(ir.add(x, y))))
    assert type(out.body) is ir.Constant and out.body.data.tolist() == [8, 9, 10]
    # an argument whose type cannot be known stays
    z = ir.var("z")
    func = ir.Function([z], ir.shape_of(z))
    assert fold_constant(func) is func


def test_stateful_op_is_not_folded():
    c = ir.const(C_DATA)
    before = ir.Function([], ir.add(ir.nn.dropout(c), ir.const(1.0)))
    check_pass(FoldConstant(), before)


def test_primitive_function_is_left_alone():
    p = ir.var("p", T)
    c = ir.const(C_DATA)
    inner = ir.Function([p], ir.add(p, ir.add(c, c))).with_attr("Primitive", 1)
    x = ir.var("x", T)
    before = ir.Function([x], ir.Call(inner, [x]))
    out = FoldConstant()(ir.infer_type(ir.IRModule.from_expr(before)))
    assert out["main"].body.op.body.args[1].op.name == "add"  # c + c still there
    # the primitive function itself, as the root, is returned as is
    assert fold_constant(inner) is inner


def test_non_op_callee_and_zero_args_unchanged():
    p = ir.var("p", T)
    c = ir.const(C_DATA)
    local = ir.Function([p], ir.negative(p))
    before = ir.Function([], ir.Call(local, [ir.Tuple([c]).fields[0]]))
    out = fold_constant(before)
    assert type(out.body) is ir.Call and out.body.op is local


def test_nested_function_is_folded():
    c = ir.const(C_DATA)
    p = ir.var("p", T)
    x = ir.var("x", T)
    before = ir.Function([x], ir.Call(ir.Function([p], ir.add(p, ir.add(c, c))), [x]))
    p2, x2 = ir.var("p", T), ir.var("x", T)
    expected = ir.Function([x2], ir.Call(ir.Function([p2], ir.add(p2, ir.const(C_DATA * 2))), [x2]))
    check_pass(FoldConstant(), before, expected, map_free_vars=True)


def test_let_with_constant_value_is_substituted():
    c = ir.const(C_DATA)
    x = ir.var("x", T)
    a = ir.var("a")
    b = ir.var("b")
    # let %a = c + c; let %b = %a; add(x, multiply(%b, c))  ->  add(x, const)
    before = ir.Function([x], ir.Let(a, ir.add(c, c), ir.Let(b, a, ir.add(x, ir.multiply(b, c)))))
    x2 = ir.var("x", T)
    expected = ir.Function([x2], ir.add(x2, ir.const((C_DATA + C_DATA) * C_DATA)))
    check_pass(FoldConstant(), before, expected, map_free_vars=True)


def test_let_with_non_constant_value_stays():
    x = ir.var("x", T)
    a = ir.var("a")
    tup = ir.var("t")
    c = ir.const(C_DATA)
    # a tuple of constants is not propagated through a let
    before = ir.Function([x], ir.Let(a, ir.add(x, c), ir.Let(tup, ir.Tuple([c, c]), ir.add(a, ir.TupleGetItem(tup, 0)))))
    check_pass(FoldConstant(), before)


def test_tuple_get_item_of_literal_tuple():
    x = ir.var("x", T)
    c = ir.const(C_DATA)
    before = ir.Function([x], ir.add(ir.TupleGetItem(ir.Tuple([x, c]), 0), ir.TupleGetItem(ir.Tuple([x, c]), 1)))
    x2 = ir.var("x", T)
    expected = ir.Function([x2], ir.add(x2, ir.const(C_DATA)))
    check_pass(FoldConstant(), before, expected, map_free_vars=True)


def test_split_of_constant_becomes_tuple_of_constants():
    c = ir.const(np.arange(6, dtype="float32"))
    before = ir.Function([], ir.split(c, 3))
    expected = ir.Function([], ir.Tuple([ir.const(np.array([0, 1], "float32")),
                                         ir.const(np.array([2, 3], "float32")),
                                         ir.const(np.array([4, 5], "float32"))]))
    check_pass(FoldConstant(), before, expected)
    before = ir.Function([], ir.TupleGetItem(ir.split(c, 3), 2))
    check_pass(FoldConstant(), before, ir.Function([], ir.const(np.array([4, 5], "float32"))))


def test_nothing_to_fold_returns_the_same_function():
    mod = ir.infer_type(chain(50))
    func = mod["main"]
    assert fold_constant(func) is func
    out = FoldConstant()(mod)
    assert out["main"] is func


def test_folded_constants_keep_the_type_of_a_typed_call():
    c = ir.const(C_DATA)
    x = ir.var("x", T)
    func = ir.infer_type(ir.IRModule.from_expr(ir.Function([x], ir.add(x, ir.add(c, c)))))["main"]
    out = fold_constant(func)
    folded = out.body.args[1]
    assert type(folded) is ir.Constant and folded.checked_type == ir.TensorType((3,), "float32")
    assert out.body.checked_type == T  # the rebuilt add kept its type


def test_rebuilt_calls_keep_op_and_attrs_and_stay_untyped_in_untyped_programs():
    c = ir.const(np.ones((1, 3, 4, 4), "float32"))
    x = ir.var("x", shape=(1, 3, 4, 4))
    pooled = ir.nn.max_pool2d(ir.add(x, ir.add(c, c)), pool_size=(2, 2))
    out = fold_constant(ir.Function([x], ir.nn.relu(pooled)))
    rebuilt = out.body.args[0]
    assert rebuilt is not pooled and rebuilt.op is pooled.op and rebuilt.attrs == pooled.attrs
    assert not rebuilt.has_type and not out.body.has_type
    assert type(rebuilt.args[0].args[1]) is ir.Constant


def test_option_is_validated():
    assert FoldConstant(fold_qnn=True).fold_qnn is True
    with pytest.raises(PassError, match="fold_qnn"):
        FoldConstant(fold_qnn="yes")


def test_tutorial_prints_the_seed_output():
    mod = FoldConstant()(ir.IRModule.from_expr(example()))
    assert collapse(str(mod)) == collapse(seed_code_blocks(SEED)[0])


@pytest.mark.parametrize("lets,tuples", [(False, False), (True, False), (False, True), (True, True)])
def test_semantics_preserved_on_random_graphs(lets, tuples):
    p = FoldConstant()
    for seed in range(60):
        assert_semantics_preserved(p, random_graph(seed, 25, lets=lets, tuples=tuples), seed=seed)


def test_deep_chain_at_default_recursion_limit():
    limit = sys.getrecursionlimit()
    mod = chain(100_000)
    out = FoldConstant()(mod)
    assert out["main"].body.op.name == "add"
    # an all-constant chain folds into one constant
    c = ir.const(np.float32(1.0))
    e = ir.const(np.float32(0.0))
    for _ in range(100_000):
        e = ir.add(e, c)
    out = FoldConstant()(ir.IRModule.from_expr(ir.Function([], e)))
    body = out["main"].body
    assert type(body) is ir.Constant and float(body.data) == 100_000.0
    assert sys.getrecursionlimit() == limit


def _test_op(name: str, num_inputs: int, **extra) -> ir.Op:
    """A throwaway operator for rules the core set has no example of."""
    try:
        return ir.Op.get(name)
    except ir.IRError:
        pass

    def rel(types, attrs):
        return types[0] if types else ir.TensorType((2,), "float32")

    def compute(args, attrs):
        return np.array(args[0]) if args else np.zeros(2, dtype="float32")

    return ir.register_op(ir.OpDef(name=name, num_inputs=num_inputs, type_rel=rel, compute=compute, **extra))


def test_zero_argument_calls_are_not_materialised():
    zeros = _test_op("test_fold.zeros", 0)
    before = ir.Function([], ir.add(ir.Call(zeros, []), ir.const(1.0)))
    check_pass(FoldConstant(), before)


def test_non_computational_and_qnn_ops():
    marker = _test_op("test_fold.marker", 1, extra={"non_computational": True})
    c = ir.const(C_DATA)
    before = ir.Function([], ir.Call(marker, [c]))
    check_pass(FoldConstant(), before)
    qnn = _test_op("qnn.test_fold_identity", 1)
    before = ir.Function([], ir.Call(qnn, [c]))
    check_pass(FoldConstant(), before)
    check_pass(FoldConstant(fold_qnn=True), before, ir.Function([], ir.const(C_DATA)))


def test_kernel_failure_names_the_operator():
    def bad(args, attrs):
        raise ValueError("shapes do not match")

    op = ir.Op.get("test_fold.bad") if "test_fold.bad" in ir.list_ops() else ir.register_op(
        ir.OpDef(name="test_fold.bad", num_inputs=1, type_rel=lambda t, a: t[0], compute=bad))
    with pytest.raises(PassError, match="test_fold.bad"):
        fold_constant(ir.Function([], ir.Call(op, [ir.const(C_DATA)])))


# ---------------------------------------------------------------------------------------
# the walk on constant-rich random programs, the fixed-point memo, the kernel cache
# ---------------------------------------------------------------------------------------

FC = importlib.import_module("passhost_fold_constant.fold_constant")
WALK = importlib.import_module("passhost_fold_constant._walk")
S = (2, 3)


def _raw_fold(expr, fold_qnn=False):
    """One fold with the fixed-point memo bypassed."""
    with np.errstate(all="ignore"):
        return WALK._fold(expr, fold_qnn)


def _foldable_graph(seed: int, steps: int = 40) -> ir.IRModule:
    """A seeded random program with plenty to fold: calls on constants, literal tuples
    read back, constant ``if`` conditions, lets (some binding constants), ``shape_of``."""
    rnd = random.Random(seed)
    params = [ir.var(f"p{i}", shape=S) for i in range(2)]
    consts = [ir.const(np.full(S, v, dtype="float32")) for v in (0.5, 1.5, -2.0)]
    pool: list = params + consts
    binds = []
    for i in range(steps):
        a, b = rnd.choice(pool), rnd.choice(pool)
        r = rnd.random()
        if r < 0.45:
            e = ir.Call(ir.Op.get(rnd.choice(["add", "subtract", "multiply", "maximum"])), [a, b])
        elif r < 0.6:
            e = ir.Call(ir.Op.get(rnd.choice(["negative", "nn.relu"])), [a])
        elif r < 0.7:
            e = ir.TupleGetItem(ir.Tuple([a, b]), rnd.randrange(2))
        elif r < 0.8:
            e = ir.If(ir.const(rnd.random() < 0.5), a, b)
        elif r < 0.9:
            e = ir.Call(ir.Op.get("add"), [rnd.choice(consts), rnd.choice(consts)])
        else:
            e = ir.add(a, b)
            v = ir.var(f"v{i}", shape=S)
            binds.append((v, e))
            e = v
        pool.append(e)
    body: ir.Expr = pool[-1]
    for e in pool[-6:-1]:
        body = ir.add(body, e)
    if seed % 2:
        body = ir.Tuple([body, ir.shape_of(rnd.choice(pool))])
    for v, e in reversed(binds):
        body = ir.Let(v, e, body)
    return ir.IRModule.from_expr(ir.Function(params, body))


def test_folding_is_idempotent_on_random_programs():
    """fold(fold(f)) == fold(f), structurally -- and, for typed functions, the very same
    object: the soundness of the fixed-point memo."""
    folded = 0
    for seed in range(120):
        for mod in (_foldable_graph(seed), random_graph(seed, 25, lets=bool(seed % 2), tuples=True)):
            untyped = mod["main"]
            once = _raw_fold(untyped)
            assert ir.structural_equal(_raw_fold(once), once, map_free_vars=True)
            typed = ir.infer_type(mod)["main"]
            once = _raw_fold(typed)
            folded += once is not typed
            assert once.has_type
            twice = _raw_fold(once)
            assert twice is once
            assert ir.structural_equal(twice, once, map_free_vars=True)
    assert folded >= 150  # the programs did have things to fold


@pytest.mark.parametrize("seed", range(30))
def test_semantics_preserved_on_constant_rich_programs(seed):
    assert_semantics_preserved(FoldConstant(), _foldable_graph(seed), seed=seed)


def _explode(*args, **kwargs):
    raise AssertionError("the fold walked a function it should have remembered")


def test_the_pass_hands_back_a_function_it_folded_without_walking(monkeypatch):
    mod = ir.infer_type(_foldable_graph(3))
    out = FoldConstant()(mod)
    assert out["main"] is not mod["main"] and out["main"].has_type
    monkeypatch.setattr(FC, "_fold", _explode)
    assert FoldConstant()(out)["main"] is out["main"]  # a fresh pass object, same options
    # a function that folded to itself is remembered as well
    monkeypatch.setattr(FC, "_fold", WALK._fold)
    nothing = ir.infer_type(chain(50))
    assert FoldConstant()(nothing)["main"] is nothing["main"]
    monkeypatch.setattr(FC, "_fold", _explode)
    assert FoldConstant()(nothing)["main"] is nothing["main"]


def test_the_remembered_fixed_point_never_answers_for_another_function_or_option(monkeypatch):
    out = FoldConstant()(ir.infer_type(_foldable_graph(5)))["main"]
    copy = ir.infer_type(ir.IRModule.from_expr(ir.Function(out.params, out.body, out.ret_type)))["main"]
    assert copy is not out and ir.structural_equal(copy, out)
    monkeypatch.setattr(FC, "_fold", _explode)
    with pytest.raises(AssertionError, match="remembered"):
        FoldConstant()(ir.IRModule.from_expr(copy))  # structurally equal, but not one the pass returned
    with pytest.raises(AssertionError, match="remembered"):
        FoldConstant(fold_qnn=True)(ir.IRModule.from_expr(out))  # other options
    with pytest.raises(AssertionError, match="remembered"):
        fold_constant(out)  # the function API always walks: only the pass manager remembers


def test_untyped_results_are_not_remembered_as_inference_may_still_make_them_foldable():
    # %w's type is only known once inference has seen nn.dense fill it in
    x = ir.var("x", shape=(1, 4))
    w = ir.var("w")
    func = ir.Function([x, w], ir.Tuple([ir.nn.dense(x, w, units=8), ir.shape_of(w)]))
    assert fold_constant(func) is func  # untyped: shape_of(%w) cannot fold yet
    typed = ir.infer_type(ir.IRModule.from_expr(func))["main"]
    assert typed is func and func.has_type  # typed in place: the same object
    out = fold_constant(func)
    assert type(out.body.fields[1]) is ir.Constant
    assert out.body.fields[1].data.tolist() == [8, 4]


def _counting_op(name: str, calls: list) -> ir.Op:
    def rel(types, attrs):
        return types[0]

    def compute(args, attrs):
        calls.append(attrs.get("k"))
        return np.asarray(args[0] * attrs.get("k"), dtype="float32")

    try:
        return ir.Op.get(name)
    except ir.IRError:
        return ir.register_op(ir.OpDef(name=name, num_inputs=1, type_rel=rel, compute=compute,
                                       attrs=(("k", 1.0),)))


def test_kernel_runs_once_per_constant_argument_and_attrs():
    calls: list = []
    op = _counting_op("test_fold.counting", calls)
    c = ir.const(C_DATA)
    x = ir.var("x", shape=(3,))
    twice = [ir.Call(op, [c]), ir.Call(op, [c]), ir.Call(op, [c], {"k": 2.0})]
    func = ir.Function([x], ir.Tuple([ir.add(x, e) for e in twice]))
    calls.clear()
    out = fold_constant(func)
    assert sorted(calls) == [1.0, 2.0]  # the two equal calls computed once
    folded = [f.args[1] for f in out.body.fields]
    assert all(type(f) is ir.Constant for f in folded)
    assert folded[0] is not folded[1]  # still one Constant node per use
    assert folded[0].data.tolist() == folded[1].data.tolist() == C_DATA.tolist()
    assert folded[2].data.tolist() == (C_DATA * 2).tolist()
    calls.clear()
    fold_constant(func)  # untyped: not remembered, and the cache lives for one fold only
    assert sorted(calls) == [1.0, 2.0]
    # a tuple result (split) twice: fresh Tuple and Constant nodes for each use
    c4 = ir.const(np.arange(4, dtype="float32"))
    out = fold_constant(ir.Function([], ir.Tuple([ir.split(c4, 2), ir.split(c4, 2)])))
    first, second = out.body.fields
    assert type(first) is ir.Tuple and type(second) is ir.Tuple and first is not second
    assert all(type(f) is ir.Constant for f in first.fields + second.fields)
    assert first.fields[1] is not second.fields[1]
    assert first.fields[1].data.tolist() == second.fields[1].data.tolist() == [2.0, 3.0]
    # other constant nodes with equal data are other keys (no hashing of tensor data)
    calls.clear()
    fold_constant(ir.Function([], ir.Tuple([ir.Call(op, [ir.const(C_DATA)]), ir.Call(op, [ir.const(C_DATA)])])))
    assert calls == [1.0, 1.0]


def test_let_bound_tuple_of_constants_is_not_substituted():
    """Only constants replace a let's variable (TVM's rule), whether or not the value's
    arguments changed while folding."""
    c = ir.const(np.arange(4, dtype="float32"))
    for value in (ir.split(c, 2), ir.split(ir.add(c, c), 2)):
        v = ir.var("v")
        out = fold_constant(ir.Function([], ir.Let(v, value, ir.TupleGetItem(v, 0))))
        assert type(out.body) is ir.Let and type(out.body.value) is ir.Tuple
        assert type(out.body.body) is ir.TupleGetItem and out.body.body.tuple_value is v


def test_on_device_wrapped_constants_count_as_constants(monkeypatch):
    """``on_device(c)`` is a constant for the call that receives it (TVM's
    ``IsComplexConstant``); the walk only starts looking at call arguments once it has
    met an ``on_device`` operator."""
    monkeypatch.setattr(ir.Op, "_registry", dict(ir.Op._registry))  # registered for this test only
    ondev = ir.register_op(ir.OpDef(name="on_device", num_inputs=1, type_rel=lambda t, a: t[0]))
    c = ir.const(C_DATA)
    x = ir.var("x", shape=(3,))
    for first in (True, False):  # the annotated argument first or second
        args = [ir.Call(ondev, [c]), c] if first else [c, ir.Call(ondev, [c])]
        out = fold_constant(ir.Function([], ir.add(*args)))
        assert type(out.body) is ir.Constant and out.body.data.tolist() == (C_DATA * 2).tolist()
    out = fold_constant(ir.Function([], ir.concatenate([ir.Call(ondev, [c]), c])))
    assert type(out.body) is ir.Constant and out.body.data.shape == (6,)
    out = fold_constant(ir.Function([], ir.negative(ir.Call(ondev, [c]))))
    assert type(out.body) is ir.Constant
    # the annotation itself never folds, and an annotated variable is no constant
    func = ir.Function([x], ir.add(ir.Call(ondev, [x]), ir.Call(ondev, [c])))
    assert fold_constant(func) is func


def test_a_call_whose_value_would_take_gigabytes_is_not_evaluated():
    """(A few bytes of model -- a fill of a huge declared shape -- must not make the pass
    allocate 400 GB; the call stays and runs where the program runs.)"""
    big = ir.full(ir.const(2.0), shape=(100000, 1000000), dtype="float32")
    small = ir.add(ir.const(np.ones(3, np.float32)), ir.const(np.ones(3, np.float32)))
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([], ir.Tuple([ir.add(big, big), small]))))
    out = FoldConstant()(mod)   # (typed, as in every pipeline: the type gives the size)
    body = out["main"].body
    assert type(body.fields[0]) is ir.Call and body.fields[0].op.name == "add"
    assert type(body.fields[1]) is ir.Constant
