"""FoldConstant: TVM's test cases (before/expected), the tutorial's printed output,
semantics on random programs, and a 100,000-deep chain."""
from __future__ import annotations

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
