"""Tests of passhost.ir.evaluate (the numpy reference interpreter)."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from passhost import ir
from passhost.errors import EvaluationError, TypeInferenceError
from passhost.ir.interpreter import Closure
from passhost.ir import (
    Call, Constant, Function, GlobalVar, If, IRModule, Let, OpDef, TensorType, Tuple,
    TupleGetItem, Var, register_op,
)

F32 = TensorType((1, 3), "float32")
SCALAR = TensorType((), "float32")
BOOL = TensorType((), "bool")

KERNEL_CALLS: list = []


def _same_rel(types, attrs):
    a, b = types
    if b is None:  # fill an untyped second argument from the first
        b = types[1] = a
    if a != b:
        raise TypeInferenceError(f"ev.add: {a} vs {b}")
    return a


def _unary_rel(types, attrs):
    return types[0]


def _counting_neg(args, attrs):
    KERNEL_CALLS.append("neg")
    return np.negative(args[0])


def _boom(args, attrs):
    raise ValueError("boom was evaluated")


ADD = register_op(OpDef("ev.add", 2, _same_rel, compute=lambda args, attrs: np.add(args[0], args[1])),
                  override=True)
NEG = register_op(OpDef("ev.neg", 1, _unary_rel, compute=_counting_neg), override=True)
BOOM = register_op(OpDef("ev.boom", 1, _unary_rel, compute=_boom), override=True)
NOKERNEL = register_op(OpDef("ev.nokernel", 1, _unary_rel), override=True)
WIDEN = register_op(OpDef("ev.widen", 1, _unary_rel,
                          compute=lambda args, attrs: args[0].astype("float64")), override=True)
SHORT = register_op(OpDef("ev.short", 1, lambda types, attrs: ir.TupleType([types[0], types[0]]),
                          compute=lambda args, attrs: (args[0],)), override=True)
PAIR = register_op(OpDef("ev.pair", 1, lambda types, attrs: ir.TupleType([types[0], types[0]]),
                         compute=lambda args, attrs: (args[0], -args[0])), override=True)


def add(a, b):
    return Call(ADD, [a, b])


def neg(a):
    return Call(NEG, [a])


def _arr(shape=(1, 3), seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


@pytest.fixture(autouse=True)
def _reset_counts():
    KERNEL_CALLS.clear()


# -- arguments ------------------------------------------------------------------------------


def test_module_runs_main_and_matches_numpy():
    x, y = Var("x", F32), Var("y", F32)
    mod = IRModule({"main": Function([x, y], add(neg(x), y))})
    a, b = _arr(seed=1), _arr(seed=2)
    out = ir.evaluate(mod, a, b)
    np.testing.assert_array_equal(out, -a + b)
    assert out.dtype == np.float32


def test_real_ops_match_numpy():
    x = ir.var("x", shape=(2, 4))
    w = ir.var("w", shape=(3, 4))
    y = ir.exp(ir.nn.dense(ir.nn.relu(x), w))
    mod = ir.infer_type(IRModule.from_expr(y))
    a, b = _arr((2, 4), 3), _arr((3, 4), 4)
    np.testing.assert_allclose(ir.evaluate(mod, a, b), np.exp(np.maximum(a, 0) @ b.T), rtol=1e-5)


def test_wrong_argument_count_names_function_and_count():
    x, y = Var("x", F32), Var("y", F32)
    mod = IRModule({"main": Function([x, y], add(x, y))})
    with pytest.raises(EvaluationError, match=r"^@main takes 2 arguments \(%x, %y\), got 1$"):
        ir.evaluate(mod, _arr())
    fn = Function([Var("z", F32)], Constant(np.float32(1)))
    with pytest.raises(EvaluationError, match=r"^the function takes 1 argument \(%z\), got 0$"):
        ir.evaluate(fn)


def test_wrong_argument_shape_or_dtype_names_the_parameter():
    x = Var("x", F32)
    mod = IRModule({"main": Function([x], neg(x))})
    with pytest.raises(EvaluationError,
                       match=r"^argument %x: expected Tensor\[\(1, 3\), float32\], got shape \(2, 3\) float32$"):
        ir.evaluate(mod, _arr((2, 3)))
    with pytest.raises(EvaluationError,
                       match=r"^argument %x: expected Tensor\[\(1, 3\), float32\], got shape \(1, 3\) float64$"):
        ir.evaluate(mod, np.zeros((1, 3)))


def test_python_scalars_and_lists_are_converted_when_safe():
    s = Var("s", SCALAR)
    fn = Function([s], neg(s))
    out = ir.evaluate(fn, 2)
    assert out.dtype == np.float32 and out == -2.0
    x = Var("x", F32)
    np.testing.assert_array_equal(ir.evaluate(Function([x], neg(x)), [[1.0, 2.0, 3.0]]),
                                  np.array([[-1, -2, -3]], "float32"))
    i = Var("i", TensorType((), "int32"))
    with pytest.raises(EvaluationError, match=r"argument %i: expected int32, got float of dtype float64"):
        ir.evaluate(Function([i], i), 1.5)


def test_untyped_function_is_inferred_first():
    x = Var("x", F32)
    w = Var("w")  # typed by the relation of ev.add
    fn = Function([x, w], add(x, w))
    a, b = _arr(seed=5), _arr(seed=6)
    np.testing.assert_array_equal(ir.evaluate(fn, a, b), a + b)
    assert fn.has_type and w.type_annotation == F32


def test_closed_expression_without_arguments():
    c = Constant(np.arange(3, dtype="float32"))
    np.testing.assert_array_equal(ir.evaluate(neg(c)), -np.arange(3, dtype="float32"))
    with pytest.raises(EvaluationError, match=r"^%q has no value: it is a free variable"):
        ir.evaluate(neg(Var("q", F32)))


# -- structure ------------------------------------------------------------------------------


def test_nested_tuples_and_getitem():
    x = Var("x", F32)
    pair = Call(PAIR, [x])
    body = Tuple([TupleGetItem(pair, 1), Tuple([x, TupleGetItem(pair, 0)])])
    a = _arr()
    out = ir.evaluate(Function([x], body), a)
    assert isinstance(out, tuple) and isinstance(out[1], tuple)
    np.testing.assert_array_equal(out[0], -a)
    np.testing.assert_array_equal(out[1][0], a)
    np.testing.assert_array_equal(out[1][1], a)


def test_let():
    x = Var("x", F32)
    v = Var("v")
    fn = Function([x], Let(v, neg(x), add(v, v)))
    a = _arr()
    np.testing.assert_array_equal(ir.evaluate(fn, a), -2 * a)
    assert KERNEL_CALLS == ["neg"]


def test_if_evaluates_only_the_taken_branch():
    c = Var("c", BOOL)
    x = Var("x", F32)
    fn = Function([c, x], If(c, neg(x), Call(BOOM, [x])))
    a = _arr()
    np.testing.assert_array_equal(ir.evaluate(fn, np.bool_(True), a), -a)
    with pytest.raises(EvaluationError, match=r"^in call to ev\.boom: the kernel failed with ValueError: boom"):
        ir.evaluate(fn, np.bool_(False), a)


def test_closures_capture_free_variable_values():
    x = Var("x", F32)
    y = Var("y", F32)
    f = Var("f")
    closure = Function([y], add(x, y))  # %x is free in the closure
    body = Let(f, closure, Call(f, [Call(f, [x])]))
    a = _arr()
    np.testing.assert_array_equal(ir.evaluate(Function([x], body), a), a + (a + a))


def test_recursive_let_bound_closure():
    # let %loop: fn (float32, float32) -> float32 = fn (%n, %acc) {
    #   if (%n <= 0) { %acc } else { %loop(%n - 1, %acc + %step) } };  %loop(%m, 0)
    s = SCALAR
    loop = Var("loop", ir.FuncType([s, s], s))
    n, acc, step, m = Var("n", s), Var("acc", s), Var("step", s), Var("m", s)
    one = ir.const(1.0)
    body = If(ir.less_equal(n, ir.const(0.0)), acc,
              Call(loop, [ir.subtract(n, one), ir.add(acc, step)]))
    fn = Function([m, step], Let(loop, Function([n, acc], body), Call(loop, [m, ir.const(0.0)])))
    assert ir.evaluate(fn, np.float32(3000), np.float32(2)) == 6000


def test_closure_returned_from_a_global_keeps_its_environment():
    mod = IRModule()
    mk = GlobalVar("make_adder")
    x = Var("x", F32)
    y = Var("y", F32)
    mod[mk] = Function([x], Function([y], add(x, y)))
    a, b = Var("a", F32), Var("b", F32)
    mod["main"] = Function([a, b], Call(Call(mk, [a]), [b]))
    p, q = _arr(seed=1), _arr(seed=2)
    np.testing.assert_array_equal(ir.evaluate(mod, p, q), p + q)


def test_each_node_once_per_activation():
    x = Var("x", F32)
    shared = neg(x)
    fn = Function([x], add(shared, shared))
    ir.evaluate(fn, _arr())
    assert KERNEL_CALLS == ["neg"]
    KERNEL_CALLS.clear()
    # a function called twice runs its body twice (two activations)
    a = Var("a", F32)
    inner = Function([a], neg(a))
    x2 = Var("x2", F32)
    ir.evaluate(Function([x2], add(Call(inner, [x2]), Call(inner, [neg(x2)]))), _arr())
    assert KERNEL_CALLS == ["neg"] * 3


def test_globals_calling_globals():
    mod = IRModule()
    gf, gg = GlobalVar("f"), GlobalVar("g")
    a = Var("a", F32)
    mod[gf] = Function([a], add(Call(gg, [a]), a))
    b = Var("b", F32)
    mod[gg] = Function([b], neg(b))
    x = Var("x", F32)
    mod["main"] = Function([x], Call(gf, [Call(gg, [x])]))
    v = _arr()
    g_of_x = -v
    np.testing.assert_array_equal(ir.evaluate(mod, v), -g_of_x + g_of_x)


def test_deep_recursion_through_a_global_runs_without_python_recursion():
    # @count(n, acc) = if (n <= 0) acc else @count(n - 1, acc + 1)
    mod = IRModule()
    gv = GlobalVar("count")
    n = ir.var("n", "float32")
    acc = ir.var("acc", "float32")
    one = ir.const(1.0)
    body = If(ir.less_equal(n, ir.const(0.0)), acc,
              Call(gv, [ir.subtract(n, one), ir.add(acc, one)]))
    mod[gv] = Function([n, acc], body, ret_type=SCALAR)
    m = ir.var("m", "float32")
    mod["main"] = Function([m], Call(gv, [m, ir.const(0.0)]))
    assert ir.evaluate(mod, np.float32(5000)) == 5000


def test_primitive_functions():
    a = Var("a", F32)
    prim = Function([a], neg(add(a, a))).with_attr("Primitive", 1)
    x = Var("x", F32)
    mod = IRModule({"main": Function([x], add(Call(prim, [x]), x))})
    v = _arr()
    np.testing.assert_array_equal(ir.evaluate(mod, v), -(v + v) + v)


# -- errors from kernels and globals --------------------------------------------------------


def test_missing_kernel_names_the_op():
    x = Var("x", F32)
    with pytest.raises(EvaluationError, match=r"^operator ev\.nokernel has no compute kernel"):
        ir.evaluate(Function([x], Call(NOKERNEL, [x])), _arr())


def test_kernel_returning_the_wrong_dtype_is_reported():
    x = Var("x", F32)
    with pytest.raises(EvaluationError, match=r"the kernel of ev\.widen returned shape \(1, 3\) float64 but the call "
                                              r"has type Tensor\[\(1, 3\), float32\]"):
        ir.evaluate(Function([x], Call(WIDEN, [x])), _arr())


def test_tuple_kernel_returning_too_few_values_is_reported():
    x = Var("x", F32)
    with pytest.raises(EvaluationError, match=r"the kernel of ev\.short returned 1 values but the call has type "
                                              r"\(Tensor\[\(1, 3\), float32\], Tensor\[\(1, 3\), float32\]\)"):
        ir.evaluate(Function([x], Call(SHORT, [x])), _arr())


def test_function_valued_result_is_a_closure():
    a = Var("a", F32)
    inner = Function([a], neg(a))
    clo = ir.evaluate(Function([], inner))
    assert isinstance(clo, Closure) and clo.func is inner


def test_global_without_module_and_missing_main():
    with pytest.raises(TypeInferenceError, match=r"cannot type @g outside a module"):
        ir.evaluate(Function([], Call(GlobalVar("g"), [])))
    mod = IRModule({"other": Function([], Constant(np.float32(1)))})
    with pytest.raises(EvaluationError, match=r"module has no function @main"):
        ir.evaluate(mod)
    with pytest.raises(EvaluationError, match=r"needs an IRModule or an expression, got str"):
        ir.evaluate("main")


# -- depth ----------------------------------------------------------------------------------


def test_100k_deep_chain_at_default_recursion_limit():
    assert sys.getrecursionlimit() <= 10000
    x = Var("x", F32)
    e = x
    for _ in range(100000):
        e = add(e, x)
    out = ir.evaluate(IRModule.from_expr(Function([x], e)), np.ones((1, 3), "float32"))
    np.testing.assert_array_equal(out, np.full((1, 3), 100001, "float32"))


def test_deep_let_chain_evaluates():
    x = Var("x", F32)
    vs = [Var(f"v{i}") for i in range(20000)]
    body = vs[-1]
    for i in range(len(vs) - 1, -1, -1):
        body = Let(vs[i], add(vs[i - 1] if i else x, x), body)
    out = ir.evaluate(Function([x], body), np.ones((1, 3), "float32"))
    np.testing.assert_array_equal(out, np.full((1, 3), 20001, "float32"))
