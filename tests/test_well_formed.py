"""Tests of passhost.ir.well_formed."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from passhost import ir
from passhost.errors import WellFormedError
from passhost.ir import (
    Call, Constant, Function, GlobalVar, IRModule, Let, OpDef, TensorType, Tuple, TupleGetItem,
    Var, register_op,
)

F32 = TensorType((1, 3), "float32")
F32B = TensorType((2, 3), "float32")

NEG = register_op(OpDef("wf.neg", 1, lambda types, attrs: types[0]), override=True)


def neg(a):
    return Call(NEG, [a])


def test_well_formed_module_and_expression():
    x = Var("x", F32)
    v = Var("v")
    mod = IRModule({"main": Function([x], Let(v, neg(x), Tuple([v, x])))})
    assert ir.well_formed(mod) is True
    # an expression's own free variables are its inputs (as TVM's well_formed(expr))
    assert ir.well_formed(neg(Var("free", F32))) is True


def test_free_variable_in_a_global_function():
    x, y = Var("x", F32), Var("y", F32)
    mod = IRModule({"main": Function([x], Tuple([x, y]))})
    with pytest.raises(WellFormedError, match=r"^free variable %y in @main: bind it"):
        ir.well_formed(mod)


def test_variable_bound_twice():
    x = Var("x", F32)
    mod = IRModule({"main": Function([x], Let(x, neg(x), x))})
    with pytest.raises(WellFormedError,
                       match=r"^%x is bound twice \(as a parameter of @main and by a let\) in @main"):
        ir.well_formed(mod)
    v = Var("v", F32)
    y = Var("y", F32)
    twice = Function([y], Let(v, neg(y), Let(v, neg(v), v)))
    with pytest.raises(WellFormedError, match=r"%v is bound twice \(by a let and by a let\)"):
        ir.well_formed(IRModule({"main": twice}))
    z = Var("z", F32)
    with pytest.raises(WellFormedError, match=r"%z is bound twice \(as a parameter of @main and as a parameter of @main\)"):
        ir.well_formed(IRModule({"main": Function([z, z], z)}))
    a = Var("a", F32)
    inner1, inner2 = Function([a], a), Function([a], neg(a))
    with pytest.raises(WellFormedError, match=r"%a is bound twice \(as a parameter of a function and as a parameter of a function\)"):
        ir.well_formed(IRModule({"main": Function([], Tuple([inner1, inner2]))}))


def test_variable_used_outside_its_scope():
    x = Var("x", F32)
    v = Var("v", F32)
    let = Let(v, neg(x), v)
    mod = IRModule({"main": Function([x], Tuple([let, neg(v)]))})
    with pytest.raises(WellFormedError, match=r"^%v is used outside the scope that binds it in @main"):
        ir.well_formed(mod)
    a = Var("a", F32)
    with pytest.raises(WellFormedError, match=r"%a is used outside the scope"):
        ir.well_formed(Tuple([Function([a], a), a]))


def test_let_bound_function_may_call_itself_but_other_values_may_not_use_their_var():
    s = TensorType((), "float32")
    loop = Var("loop", ir.FuncType([s], s))
    n = Var("n", s)
    rec = Function([n], ir.If(ir.less_equal(n, ir.const(0.0)), n, Call(loop, [ir.subtract(n, ir.const(1.0))])))
    m = Var("m", s)
    assert ir.well_formed(IRModule({"main": Function([m], Let(loop, rec, Call(loop, [m])))})) is True
    v = Var("v", F32)
    x = Var("x", F32)
    with pytest.raises(WellFormedError, match=r"%v is used outside the scope"):
        ir.well_formed(IRModule({"main": Function([x], Let(v, neg(v), x))}))


def test_undefined_global():
    mod = IRModule({"main": Function([], Call(GlobalVar("nope"), []))})
    with pytest.raises(WellFormedError, match=r"^@nope is referenced in @main but not defined in the module \(functions: @main\)"):
        ir.well_formed(mod)


def test_bad_tuple_index():
    x = Var("x", F32)
    mod = IRModule({"main": Function([x], TupleGetItem(Tuple([x, x]), 2))})
    with pytest.raises(WellFormedError, match=r"^tuple index 2 in @main is out of range for a tuple of 2 fields"):
        ir.well_formed(mod)
    with pytest.raises(WellFormedError, match=r"tuple index \.0 in the expression is applied to a value of type Tensor"):
        ir.well_formed(TupleGetItem(Var("t", F32), 0))


def test_annotation_mismatches():
    x = Var("x", F32)
    v = Var("v", F32B)
    mod = IRModule({"main": Function([x], Let(v, neg(x), v))})
    with pytest.raises(WellFormedError, match=r"^let %v in @main is annotated Tensor\[\(2, 3\), float32\] but its value "
                                              r"has type Tensor\[\(1, 3\), float32\]"):
        ir.well_formed(mod)
    y = Var("y", F32)
    mod = IRModule({"main": Function([y], neg(y), ret_type=F32B)})
    with pytest.raises(WellFormedError, match=r"^@main is annotated to return Tensor\[\(2, 3\), float32\] but its body"):
        ir.well_formed(mod)
    a = Var("a", F32)
    b = Var("b", F32B)
    mod = IRModule({"main": Function([b], Call(Function([a], a), [b]))})
    with pytest.raises(WellFormedError, match=r"argument 0 of a call in @main has type Tensor\[\(2, 3\), float32\] but "
                                              r"the called function's parameter is annotated Tensor\[\(1, 3\), float32\]"):
        ir.well_formed(mod)


def test_ill_typed_but_well_formed():
    x = ir.var("x", shape=(1, 3))
    y = ir.var("y", shape=(4, 5))
    mod = IRModule({"main": Function([x, y], ir.add(x, y))})
    with pytest.raises(ir.TypeInferenceError):
        ir.infer_type(mod)
    assert ir.well_formed(mod) is True


def test_types_the_module_when_it_can():
    x = Var("x", F32)
    fn = Function([x], neg(x))
    assert ir.well_formed(IRModule({"main": fn}))
    assert fn.ret_type == F32


def test_deep_chain_at_default_recursion_limit():
    assert sys.getrecursionlimit() <= 10000
    x = Var("x", F32)
    body = x
    vs = [Var(f"v{i}") for i in range(50000)]
    for i in range(len(vs) - 1, -1, -1):
        body = Let(vs[i], neg(vs[i - 1] if i else x), body)
    e = body
    for _ in range(50000):
        e = neg(e)
    assert ir.well_formed(IRModule({"main": Function([x], e)})) is True


def test_bad_input():
    with pytest.raises(WellFormedError, match=r"needs an IRModule or an expression, got list"):
        ir.well_formed([Constant(np.float32(1))])
