"""Tests of passhost.ir.infer_type."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from passhost import ir
from passhost.errors import TypeInferenceError
from passhost.ir import type_infer
from passhost.ir import (
    Call, Constant, Expr, FuncType, Function, GlobalVar, If, IRModule, Let, OpDef, TensorType,
    Tuple, TupleGetItem, TupleType, Var, register_op,
)

F32 = TensorType((1, 3), "float32")
F32B = TensorType((2, 3), "float32")
BOOL = TensorType((), "bool")


def _same_rel(types, attrs):
    """Both arguments have one type; an unknown side is filled from the other."""
    a, b = types
    if a is None and b is None:
        raise TypeInferenceError("ti.add: cannot infer either argument")
    if a is None:
        a = types[0] = b
    if b is None:
        b = types[1] = a
    if a != b:
        raise TypeInferenceError(f"ti.add: argument types differ: {a} and {b}")
    return a


def _unary_rel(types, attrs):
    if types[0] is None:
        raise TypeInferenceError("ti.neg: the argument's type is unknown")
    return types[0]


def _lazy_rel(types, attrs):
    """Never fills unknown arguments; returns a fixed type."""
    return TensorType((), "float32")


def _buggy_rel(types, attrs):
    return types[5]  # IndexError


ADD = register_op(OpDef("ti.add", 2, _same_rel), override=True)
NEG = register_op(OpDef("ti.neg", 1, _unary_rel), override=True)
LAZY = register_op(OpDef("ti.lazy", 1, _lazy_rel), override=True)
BUGGY = register_op(OpDef("ti.buggy", 1, _buggy_rel), override=True)
NOTYPE = register_op(OpDef("ti.notype", 1, lambda types, attrs: "float32"), override=True)


def add(a, b):
    return Call(ADD, [a, b])


def neg(a):
    return Call(NEG, [a])


# -- leaves, calls, relations -----------------------------------------------------------


def test_var_constant_and_op_call_types():
    x = Var("x", F32)
    c = Constant(np.zeros((1, 3), "float32"))
    call = add(x, c)
    assert ir.infer_type(call) is call
    assert call.checked_type == F32
    assert x.checked_type == F32
    assert c.checked_type == F32
    i = Constant(np.arange(4, dtype="int64").reshape(2, 2))
    ir.infer_type(i)
    assert i.checked_type == TensorType((2, 2), "int64")


def test_relation_error_names_the_op_call():
    call = add(Var("x", F32), Var("y", F32B))
    with pytest.raises(TypeInferenceError, match=r"^in call to ti\.add: ti\.add: argument types differ"):
        ir.infer_type(call)


def test_relation_bug_is_wrapped_and_names_the_op():
    with pytest.raises(TypeInferenceError, match=r"in call to ti\.buggy: its type relation failed with IndexError"):
        ir.infer_type(Call(BUGGY, [Var("x", F32)]))


def test_relation_returning_a_non_type_is_an_error():
    with pytest.raises(TypeInferenceError, match=r"in call to ti\.notype: the type relation returned 'float32'"):
        ir.infer_type(Call(NOTYPE, [Var("x", F32)]))


def test_untyped_var_is_filled_by_the_first_consuming_relation():
    x = Var("x", F32)
    w = Var("w")
    fn = Function([x, w], add(x, w))
    ir.infer_type(fn)
    assert w.type_annotation == F32
    assert w.checked_type == F32
    assert fn.checked_type == FuncType([F32, F32], F32)
    assert fn.ret_type == F32


def test_untyped_var_filled_by_a_later_consumer():
    # the first consumer (ti.lazy) cannot fill %w; the second one (ti.add) does
    x = Var("x", F32)
    w = Var("w")
    body = Tuple([Call(LAZY, [w]), add(x, w)])
    fn = Function([x, w], body)
    ir.infer_type(fn)
    assert w.checked_type == F32


def test_untyped_var_nothing_determines_is_an_error_naming_it():
    w = Var("w")
    with pytest.raises(TypeInferenceError, match=r"cannot infer the type of %w: .*annotate it"):
        ir.infer_type(Call(LAZY, [w]))
    p = Var("p")
    fn = Function([p], Constant(np.float32(1)))
    mod = IRModule({"main": fn})
    with pytest.raises(TypeInferenceError, match=r"cannot infer the type of %p \(a parameter of @main\).*annotate"):
        ir.infer_type(mod)
    q = Var("q")
    with pytest.raises(TypeInferenceError, match=r"cannot infer the type of %q"):
        ir.infer_type(Tuple([q]))


def test_real_conv2d_fills_its_weight_and_names_itself_in_errors():
    x = ir.var("x", shape=(1, 3, 8, 8))
    w = ir.var("w")
    y = ir.nn.conv2d(x, w, channels=4, kernel_size=(3, 3), padding=(1, 1))
    mod = ir.infer_type(IRModule.from_expr(y))
    assert w.type_annotation == TensorType((4, 3, 3, 3), "float32")
    assert mod["main"].ret_type == TensorType((1, 4, 8, 8), "float32")
    bad = ir.nn.conv2d(ir.var("x", shape=(1, 3, 8, 8)), ir.var("w", shape=(4, 2, 3, 3)))
    with pytest.raises(TypeInferenceError, match=r"^in call to nn\.conv2d: "):
        ir.infer_type(bad)


def test_real_ops_batch_norm_tuple_and_getitem():
    x = ir.var("x", shape=(1, 4, 5, 5))
    bn = ir.nn.batch_norm(x, ir.var("g"), ir.var("b"), ir.var("m"), ir.var("v"))
    out = ir.nn.relu(TupleGetItem(bn, 0))
    ir.infer_type(out)
    assert isinstance(bn.checked_type, TupleType)
    assert out.checked_type == TensorType((1, 4, 5, 5), "float32")


def test_operator_used_as_a_value_is_an_error():
    with pytest.raises(TypeInferenceError, match=r"operator ti\.neg is used as a value"):
        ir.infer_type(Tuple([NEG]))


# -- calls of functions ----------------------------------------------------------------


def test_call_of_function_literal_and_closure():
    a = Var("a", F32)
    inner = Function([a], neg(a))
    x = Var("x", F32)
    f = Var("f")
    body = Let(f, inner, Call(f, [Call(inner, [x])]))
    fn = Function([x], body)
    ir.infer_type(fn)
    assert f.type_annotation == FuncType([F32], F32)
    assert fn.ret_type == F32


def test_call_of_function_checks_arguments():
    a = Var("a", F32)
    inner = Function([a], neg(a))
    with pytest.raises(TypeInferenceError, match=r"argument 0 of call to a function has type Tensor\[\(2, 3\), float32\], "
                                                 r"but the parameter expects Tensor\[\(1, 3\), float32\]"):
        ir.infer_type(Call(inner, [Var("y", F32B)]))
    inner2 = Function([Var("a", F32)], Constant(np.float32(0)))
    with pytest.raises(TypeInferenceError, match=r"passes 2 arguments but it takes 1"):
        ir.infer_type(Call(inner2, [Var("y", F32), Var("z", F32)]))


def test_untyped_argument_takes_the_parameter_type():
    a = Var("a", F32)
    inner = Function([a], neg(a))
    u = Var("u")
    fn = Function([u], Call(inner, [u]))
    ir.infer_type(fn)
    assert u.type_annotation == F32


def test_calling_a_non_function_is_an_error():
    x = Var("x", F32)
    with pytest.raises(TypeInferenceError, match=r"cannot call %x: it has type Tensor\[\(1, 3\), float32\]"):
        ir.infer_type(Call(x, []))
    with pytest.raises(TypeInferenceError, match=r"cannot infer the type of %g \(a called variable\)"):
        ir.infer_type(Call(Var("g"), [x]))


# -- tuples, let, if, functions -----------------------------------------------------------


def test_tuple_and_getitem():
    x = Var("x", F32)
    y = Var("y", F32B)
    tup = Tuple([x, Tuple([y])])
    item = TupleGetItem(TupleGetItem(tup, 1), 0)
    ir.infer_type(item)
    assert tup.checked_type == TupleType([F32, TupleType([F32B])])
    assert item.checked_type == F32B


def test_tuple_index_out_of_range_names_index_and_arity():
    x = Var("x", F32)
    with pytest.raises(TypeInferenceError, match=r"tuple index 2 is out of range for a tuple of 2 fields"):
        ir.infer_type(TupleGetItem(Tuple([x, x]), 2))
    with pytest.raises(TypeInferenceError, match=r"tuple index \.0 is applied to a value of type Tensor"):
        ir.infer_type(TupleGetItem(Var("t", F32), 0))


def test_let_gives_its_var_the_value_type_and_checks_annotations():
    x = Var("x", F32)
    v = Var("v")
    let = Let(v, neg(x), add(v, x))
    ir.infer_type(let)
    assert v.type_annotation == F32 and v.checked_type == F32
    assert let.checked_type == F32
    bad = Let(Var("v", F32B), neg(Var("x", F32)), Constant(np.float32(0)))
    with pytest.raises(TypeInferenceError, match=r"let %v is annotated Tensor\[\(2, 3\), float32\] but its value has "
                                                 r"type Tensor\[\(1, 3\), float32\]"):
        ir.infer_type(bad)


def test_deep_let_chain():
    x = Var("x", F32)
    vars_ = [Var(f"v{i}") for i in range(20000)]
    body = vars_[-1]
    for i in range(len(vars_) - 1, -1, -1):
        body = Let(vars_[i], neg(vars_[i - 1] if i else x), body)
    fn = Function([x], body)
    ir.infer_type(fn)
    assert fn.ret_type == F32
    assert vars_[12345].type_annotation == F32


def test_if_types():
    c = Var("c", BOOL)
    x = Var("x", F32)
    ite = If(c, neg(x), x)
    ir.infer_type(ite)
    assert ite.checked_type == F32
    # any rank-0 tensor is a valid condition
    ir.infer_type(If(Var("i", TensorType((), "int32")), x, x))
    with pytest.raises(TypeInferenceError, match=r"condition of an if must be a rank-0 .*got Tensor\[\(1, 3\), float32\]"):
        ir.infer_type(If(Var("c2", F32), x, x))
    with pytest.raises(TypeInferenceError, match=r"branches of an if have different types: Tensor\[\(1, 3\), float32\] "
                                                 r"\(then\) and Tensor\[\(2, 3\), float32\] \(else\)"):
        ir.infer_type(If(c, x, Var("y", F32B)))


def test_function_ret_type_filled_or_checked():
    x = Var("x", F32)
    fn = Function([x], neg(x))
    assert fn.ret_type is None
    ir.infer_type(fn)
    assert fn.ret_type == F32
    y = Var("y", F32)
    bad = Function([y], neg(y), ret_type=F32B)
    with pytest.raises(TypeInferenceError, match=r"a function is annotated to return Tensor\[\(2, 3\), float32\] but "
                                                 r"its body has type Tensor\[\(1, 3\), float32\]"):
        ir.infer_type(bad)
    z = Var("z", F32)
    mod = IRModule({"main": Function([z], neg(z), ret_type=F32B)})
    with pytest.raises(TypeInferenceError, match=r"^@main is annotated to return"):
        ir.infer_type(mod)


def test_primitive_functions_are_typed():
    a = Var("a", F32)
    prim = Function([a], neg(a)).with_attr("Primitive", 1)
    x = Var("x", F32)
    mod = IRModule({"main": Function([x], Call(prim, [x]))})
    ir.infer_type(mod)
    assert prim.checked_type == FuncType([F32], F32)
    assert a.checked_type == F32


# -- modules and globals ----------------------------------------------------------------


def test_module_returns_copy_with_same_typed_functions():
    x = Var("x", F32)
    main = Function([x], neg(x))
    mod = IRModule({"main": main})
    out = ir.infer_type(mod)
    assert out is not mod
    assert out["main"] is main
    assert main.checked_type == FuncType([F32], F32)
    assert out.get_global_var("main").checked_type == main.checked_type


def test_globals_calling_globals_are_typed_callees_first():
    # main is added before its callees; @g's parameter is untyped and only its body types it
    mod = IRModule()
    gv_f = GlobalVar("f")
    gv_g = GlobalVar("g")
    x = Var("x", F32)
    mod["main"] = Function([x], Call(gv_f, [x]))
    a = Var("a", F32)
    mod[gv_f] = Function([a], Call(gv_g, [neg(a), a]))
    b, c = Var("b"), Var("c", F32)
    mod[gv_g] = Function([b, c], add(b, c))
    ir.infer_type(mod)
    assert mod["main"].ret_type == F32
    assert gv_f.checked_type == FuncType([F32], F32)
    assert gv_g.checked_type == FuncType([F32, F32], F32)
    assert b.type_annotation == F32


def test_global_call_argument_mismatch():
    mod = IRModule()
    gv = GlobalVar("f")
    mod[gv] = Function([Var("a", F32)], Constant(np.float32(0)))
    y = Var("y", F32B)
    mod["main"] = Function([y], Call(gv, [y]))
    with pytest.raises(TypeInferenceError, match=r"argument 0 of call to @f has type Tensor\[\(2, 3\), float32\]"):
        ir.infer_type(mod)


def _countdown_module(annotated: bool) -> IRModule:
    n_t = TensorType((), "float32")
    mod = IRModule()
    gv = GlobalVar("loop")
    n = Var("n", n_t)
    body = If(Constant(np.bool_(False)), n, Call(gv, [neg(n)]))
    mod[gv] = Function([n], body, ret_type=n_t if annotated else None)
    m = Var("m", n_t)
    mod["main"] = Function([m], Call(gv, [m]))
    return mod


def test_a_recursive_global_gets_its_return_type_from_the_non_recursive_branch():
    """Issue 16: TVM infers the return type of ``@loop`` (no annotation) from the branch
    that does not recurse; it was refused ("annotate its ... return type")."""
    for annotated in (True, False):
        mod = ir.infer_type(_countdown_module(annotated=annotated))
        assert mod["main"].ret_type == TensorType((), "float32")
        assert mod["loop"].ret_type == TensorType((), "float32")
        assert str(mod["loop"].checked_type) == "fn (float32) -> float32"
        assert mod["loop"].body.false_branch.checked_type == TensorType((), "float32")
    # the same from text, as TVM's test_type_infer writes it, and through a let and an op
    text = """#[version = "0.0.5"]
def @sum(%n: int32, %acc: int32) {
  if (less(%n, 1)) {
    %acc
  } else {
    let %next = subtract(%n, 1);
    add(@sum(%next, add(%acc, %n)), 0)
  }
}
def @main(%x: int32) {
  @sum(4, %x)
}
"""
    import numpy as np

    mod = ir.parse(text)
    assert str(mod["sum"].checked_type) == "fn (int32, int32) -> int32"
    assert int(ir.evaluate(mod, np.array(5, "int32"))) == 15
    assert not any("?" in str(n.checked_type) for n in ir.post_order(mod["sum"]) if n.has_type)


def test_a_recursive_global_whose_every_path_recurses_needs_its_return_type():
    mod = IRModule()
    gv = GlobalVar("spin")
    n = Var("n", F32)
    mod[gv] = Function([n], Call(gv, [n]))
    with pytest.raises(TypeInferenceError, match=r"@spin calls itself on every path, so no branch gives its "
                                                 r"return type: annotate its return type"):
        ir.infer_type(mod)
    assert mod[gv].ret_type is None and not mod[gv].has_type  # the probe left nothing behind
    n2 = Var("n", None)
    mod[gv] = Function([n2], If(Constant(np.bool_(True)), n2, Call(gv, [n2])))
    with pytest.raises(TypeInferenceError, match=r"@spin calls itself .*annotate its parameter types"):
        ir.infer_type(mod)  # an unannotated parameter: nothing to start from


def test_mutual_recursion_without_annotations_is_an_error():
    mod = IRModule()
    gf, gg = GlobalVar("f"), GlobalVar("g")
    a, b = Var("a", F32), Var("b", F32)
    mod[gf] = Function([a], Call(gg, [a]))
    mod[gg] = Function([b], Call(gf, [b]))
    with pytest.raises(TypeInferenceError, match=r"@f calls itself"):
        ir.infer_type(mod)


def test_undefined_global_and_global_outside_module():
    mod = IRModule({"main": Function([], Call(GlobalVar("nope"), []))})
    with pytest.raises(TypeInferenceError, match=r"@nope is not defined in the module \(functions: @main\)"):
        ir.infer_type(mod)
    with pytest.raises(TypeInferenceError, match=r"cannot type @h outside a module"):
        ir.infer_type(Call(GlobalVar("h"), []))


def test_replaced_function_refreshes_its_global_var_type():
    mod = IRModule()
    gv = GlobalVar("f")
    mod[gv] = Function([Var("a", F32)], Constant(np.float32(0)))
    ir.infer_type(mod)
    assert gv.checked_type == FuncType([F32], TensorType((), "float32"))
    a = Var("a", F32B)
    mod[gv] = Function([a], neg(a))
    y = Var("y", F32B)
    mod["main"] = Function([y], Call(gv, [y]))
    ir.infer_type(mod)
    assert gv.checked_type == FuncType([F32B], F32B)
    assert mod["main"].ret_type == F32B


# -- cost -------------------------------------------------------------------------------


def _chain(n):
    x = Var("x", F32)
    e = x
    for _ in range(n):
        e = add(neg(e), x)
    return Function([x], e)


def test_100k_deep_chain_at_default_recursion_limit():
    assert sys.getrecursionlimit() <= 10000
    fn = _chain(50000)  # 100,000 calls deep
    mod = ir.infer_type(IRModule.from_expr(fn))
    assert mod["main"].checked_type == FuncType([F32], F32)


def test_reinference_of_a_typed_module_does_no_work(monkeypatch):
    mod = ir.infer_type(IRModule.from_expr(_chain(1000)))
    calls = []
    orig = Expr._set_checked_type
    orig_set = type_infer._set_type

    def counting(self, ty):
        calls.append(self)
        orig(self, ty)

    def counting_set(node, ty):  # the engine writes types through this slot setter
        calls.append(node)
        orig_set(node, ty)

    monkeypatch.setattr(Expr, "_set_checked_type", counting)
    monkeypatch.setattr(type_infer, "_set_type", counting_set)
    again = ir.infer_type(mod)
    assert calls == []
    assert again["main"] is mod["main"]
    # a new node on top of a typed graph: only the new nodes are typed
    old = mod["main"]
    new_main = Function(old.params, neg(old.body))
    mod2 = mod.copy()
    mod2["main"] = new_main
    ir.infer_type(mod2)
    assert set(map(type, calls)) <= {Call, Function, GlobalVar}
    assert [c for c in calls if type(c) is not GlobalVar] == [new_main.body, new_main]


def test_bad_input():
    with pytest.raises(TypeInferenceError, match="needs an IRModule or an expression, got int"):
        ir.infer_type(3)
    with pytest.raises(TypeInferenceError, match=r"cannot infer the type of operator ti\.neg on its own"):
        ir.infer_type(NEG)


# -- the relation memo: one relation run per signature, never a stale answer -------------


def _counting_op(name, attrs=()):
    """An op whose relation counts its runs; the result's shape is (k,) + the argument's."""
    runs = []

    def rel(types, attrs):
        runs.append(tuple(types))
        k = attrs.get("k", 1) if attrs else 1
        return TensorType((k,) + types[0].shape, types[0].dtype)

    return register_op(OpDef(name, -1, rel, attrs=attrs), override=True), runs


def test_relation_runs_once_per_signature_and_gives_each_call_its_own_answer():
    op, runs = _counting_op("ti.memo", attrs=(("k", 1),))
    x = Var("x", F32)
    y = Var("y", F32B)
    calls = [Call(op, [x]) for _ in range(50)]
    calls += [Call(op, [x], {"k": 3}) for _ in range(50)]   # other attrs: another signature
    calls += [Call(op, [y]) for _ in range(50)]             # other argument type
    calls += [Call(op, [x, y]) for _ in range(50)]          # three arities share the op
    ir.infer_type(Tuple(calls))
    # default attrs: once per argument types; own attrs: every call (no value comparison)
    assert len(runs) == 1 + 50 + 1 + 1
    assert {c.checked_type for c in calls[:50]} == {TensorType((1, 1, 3), "float32")}
    assert {c.checked_type for c in calls[50:100]} == {TensorType((3, 1, 3), "float32")}
    assert {c.checked_type for c in calls[100:150]} == {TensorType((1, 2, 3), "float32")}
    assert {c.checked_type for c in calls[150:]} == {TensorType((1, 1, 3), "float32")}


def test_relation_memo_lives_for_one_inference_only():
    op, runs = _counting_op("ti.memo2")
    x = Var("x", F32)
    ir.infer_type(Call(op, [x]))
    ir.infer_type(Call(op, [x]))
    assert len(runs) == 2  # a relation re-registered in between is always asked again
    op2 = register_op(OpDef("ti.memo2", 1, lambda types, attrs: TensorType((7,), "int32")),
                      override=True)
    assert ir.infer_type(Call(op2, [x])).checked_type == TensorType((7,), "int32")


def test_equal_but_distinct_argument_types_are_separate_memo_entries():
    op, runs = _counting_op("ti.memo3")
    a, b = Var("a", TensorType((4,), "int8")), Var("b", TensorType((4,), "int8"))
    c1, c2 = Call(op, [a]), Call(op, [b])
    ir.infer_type(Tuple([c1, c2]))
    assert len(runs) == 2  # keyed by identity: a miss costs one relation run, never a wrong type
    assert c1.checked_type == c2.checked_type == TensorType((1, 4), "int8")


def test_failing_relation_is_not_memoised():
    runs = []

    def rel(types, attrs):
        runs.append(1)
        raise TypeInferenceError("ti.fail: always")

    op = register_op(OpDef("ti.fail", 1, rel), override=True)
    x = Var("x", F32)
    for _ in range(2):
        with pytest.raises(TypeInferenceError, match="in call to ti.fail: ti.fail: always"):
            ir.infer_type(Call(op, [x]))
    assert len(runs) == 2


def test_relation_filling_an_unknown_variable_runs_per_call():
    x1, x2 = Var("x1"), Var("x2")
    y = Var("y", F32)
    s1, s2 = add(x1, y), add(y, x2)
    ir.infer_type(Function([x1, x2, y], Tuple([s1, s2])))
    assert x1.type_annotation == F32 and x2.type_annotation == F32
    assert s1.checked_type == s2.checked_type == F32


def test_functions_of_one_signature_get_equal_types():
    def fn():
        p = Var("p", F32)
        return Function([p], neg(p))

    f1, f2 = fn(), fn()
    q = Var("q", F32B)
    f3 = Function([q], neg(q))
    x, y = Var("x", F32), Var("y", F32B)
    body = Tuple([Call(f1, [x]), Call(f2, [x]), Call(f3, [y])])
    ir.infer_type(Function([x, y], body))
    assert f1.checked_type == f2.checked_type == FuncType([F32], F32)
    assert f3.checked_type == FuncType([F32B], F32B)
    assert body.checked_type == TupleType([F32, F32, F32B])
    with pytest.raises(TypeInferenceError, match="argument 0 of call to a function has type"):
        ir.infer_type(Call(fn(), [y]))  # a typed function of another signature is no match


def test_fused_style_functions_with_annotated_params_and_return_type():
    """FuseOps output: calls of fresh functions whose parameters and return type are
    annotated. Typed in one walk; a wrong annotation or an untypable parameter still
    fails with the usual message."""
    x = Var("x", F32)

    def prim(ret=F32, unused=None):
        p = Var("p0", F32)
        params = [p] if unused is None else [p, unused]
        return Function(params, neg(p), ret, {"Primitive": 1})

    f1, f2 = prim(), prim()
    body = Call(f2, [Call(f1, [x])])
    mod = ir.infer_type(IRModule.from_expr(Function([x], body)))
    assert f1.checked_type == f2.checked_type == FuncType([F32], F32)
    assert f1.params[0].checked_type == F32 and mod["main"].checked_type == FuncType([F32], F32)
    with pytest.raises(TypeInferenceError, match=r"a function is annotated to return Tensor\[\(2, 3\), float32\]"):
        ir.infer_type(Call(prim(ret=F32B), [x]))
    with pytest.raises(TypeInferenceError, match=r"cannot infer the type of %q \(a parameter of a function\)"):
        ir.infer_type(Call(prim(unused=Var("q")), [x, x]))
    annotated_unused = prim(unused=Var("q", F32B))
    ir.infer_type(annotated_unused)
    assert annotated_unused.checked_type == FuncType([F32, F32B], F32)


def test_a_let_bound_annotated_recursive_function_types_as_tvm_types_it():
    """Issue 16: ``let %f = fn (...) -> T { ... %f(...) ... }; %f(...)`` with the function
    fully annotated types (it failed with "cannot infer the type of %f")."""
    import numpy as np

    text = """#[version = "0.0.5"]
def @main(%x: int32) {
  let %f = fn (%n: int32, %d: int32) -> int32 {
    if (less(%n, 1)) { %d } else { %f(subtract(%n, 1), add(%d, %n)) }
  };
  %f(3, %x)
}
"""
    mod = ir.parse(text)
    assert str(mod["main"].body.var.checked_type) == "fn (int32, int32) -> int32"
    assert int(ir.evaluate(mod, np.array(10, "int32"))) == 16
    assert ir.astext(ir.parse(ir.astext(mod))) == ir.astext(mod)


# -- Call.type_args (issue 16: filled by inference where TVM fills it) ---------------------
def test_type_args_of_an_operator_call_are_its_argument_types():
    """As TVM's PrimitiveCall records them (issue 37: TVM's test_type_args expects two for
    ``add``; the result type was wrongly appended)."""
    x = ir.var("x", shape=(2, 3))
    call = ir.add(x, ir.const(1.0))
    assert call.type_args == ()  # not typed yet
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([x], call)))
    typed = mod["main"].body
    assert typed.type_args == (ir.TensorType((2, 3)), ir.TensorType(()))
    bn = ir.nn.batch_norm(*(ir.var(n, shape=s) for n, s in (("d", (1, 4, 2, 2)), ("g", (4,)), ("b", (4,)),
                                                             ("m", (4,)), ("v", (4,)))))
    bn = ir.infer_type(ir.IRModule.from_expr(ir.Function(list(ir.free_vars(bn)), bn)))["main"].body
    assert len(bn.type_args) == 5 and bn.type_args[0] == ir.TensorType((1, 4, 2, 2))


def test_calls_of_functions_and_globals_have_no_type_args():
    x = ir.var("x", shape=(2,))
    inner = ir.Function([x], ir.negative(x))
    y = ir.var("y", shape=(2,))
    mod = ir.IRModule({"f": inner})
    mod["main"] = ir.Function([y], ir.Call(mod.get_global_var("f"), [ir.Call(inner, [y])]))
    mod = ir.infer_type(mod)
    outer = mod["main"].body
    assert outer.checked_type == ir.TensorType((2,)) and outer.type_args == () and outer.args[0].type_args == ()


def test_an_unannotated_called_parameter_is_typed_from_the_call_and_the_return_annotation():
    """Issue 16: ``fn (%x: int32, %f) -> int32 { %f(%x) }`` -- TVM unifies %f with
    ``fn (int32) -> int32``; it was "cannot infer the type of %f"."""
    import numpy as np

    mod = ir.parse('#[version = "0.0.5"]\ndef @main(%x: int32, %f) -> int32 {\n  %f(%x)\n}\n')
    assert str(mod["main"].params[1].checked_type) == "fn (int32) -> int32"
    assert str(mod["main"].params[1].type_annotation) == "fn (int32) -> int32"
    text = """#[version = "0.0.5"]
def @main(%y: int32) -> int32 {
  let %g = fn (%x: int32, %f) -> int32 {
    if (less(%x, 0)) { %x } else { let %w = %x; %f(%w) }
  };
  %g(%y, fn (%z: int32) { add(%z, 1) })
}
"""
    mod = ir.parse(text)
    assert str(mod["main"].body.var.checked_type) == "fn (int32, fn (int32) -> int32) -> int32"
    assert int(ir.evaluate(mod, np.array(3, "int32"))) == 4
    assert ir.structural_equal(ir.parse(mod.astext()), mod)
    # without a return annotation nothing says what %f returns: still a clear error
    with pytest.raises(TypeInferenceError, match=r"cannot infer the type of %f \(a called variable\)"):
        ir.parse('#[version = "0.0.5"]\ndef @main(%x: int32, %f) {\n  %f(%x)\n}\n')
