"""TVM v0.16's ``tests/python/relay/test_pass_manager.py``, translated (issue 37).

Each test keeps TVM's name and checks. TVM's executors (``graph``, ``debug``) become
``ir.evaluate``; TVM's ``ExprFunctor`` is passhost's; ``tvm.target.Target("llvm")`` has no
passhost counterpart and is dropped (it only selects AlterOpLayout's strategies, which
this graph does not reach).
"""
from __future__ import annotations

import numpy as np

import passhost
from passhost import ir
from passhost.instrument import pass_instrument
from passhost.transform import (FunctionPass, ModulePass, PassContext, PassInfo, Sequential, function_pass,
                                module_pass)

TVM_TESTS = """
module_pass function_class_pass function_pass module_class_pass pass_info sequential_pass
sequential_with_scoping nested_sequential_with_scoping print_ir print_debug_callback
""".split()


def get_var_func():
    x = ir.var("x", ir.TensorType((5, 10), "float32"))
    return ir.GlobalVar("myAbs"), ir.Function([x], ir.abs(x))


def extract_var_func(mod, name):
    var = mod.get_global_var(name)
    return var, mod[var]


class DoubleValues(ir.ExprFunctor):
    """TVM's helper: double the value of constants and variables."""

    def visit_constant(self, const):
        return ir.add(const, const)

    def visit_var(self, var):
        return ir.add(var, var)

    def visit_call(self, call):
        return ir.Call(self.visit(call.op), [self.visit(a) for a in call.args], call.attrs)

    def visit_global_var(self, gvar):
        return gvar

    def visit_op(self, op):
        return op

    def visit_function(self, fn):
        return ir.Function(list(fn.params), self.visit(fn.body), fn.ret_type, fn.attrs)


class OptTester:
    """TVM's helper class for testing the pass manager."""

    def __init__(self, mod):
        if not isinstance(mod, ir.IRModule):
            raise TypeError("mod is expected to be the type of IRModule")
        self.mod = mod

    @staticmethod
    def transform(node, ctx=None):
        if isinstance(node, ir.IRModule):
            gv, func = get_var_func()  # add a function to the module and return an updated module
            mod = ir.IRModule({gv: func})
            mod.update(node)
            return mod
        if isinstance(node, ir.Function):
            return DoubleValues().visit(node)
        raise TypeError("Found not supported node type.")


def get_rand(shape, dtype="float32"):
    return np.random.default_rng(0).random(shape).astype(dtype)


def check_func(func, ref_func):
    func = ir.infer_type(ir.IRModule.from_expr(func))["main"]
    ref_func = ir.infer_type(ir.IRModule.from_expr(ref_func))["main"]
    assert ir.structural_equal(func, ref_func), f"{ir.astext(func)}\n!=\n{ir.astext(ref_func)}"


def test_every_tvm_test_is_accounted_for():
    translated = {n[len("test_"):] for n, f in globals().items() if n.startswith("test_") and callable(f)}
    translated -= {"every_tvm_test_is_accounted_for", "nested_sequential_gates_with_the_current_context"}
    assert set(TVM_TESTS) == translated


def test_module_pass():
    tp = ir.TensorType((5, 10), "float32")
    x, y = ir.var("x", tp), ir.var("y", tp)
    v_add = ir.GlobalVar("myAdd")
    func = ir.Function([x, y], ir.add(x, y))
    mod = ir.IRModule({v_add: func})
    opt_tester = OptTester(mod)

    @module_pass(opt_level=0, name="module_pass_test")
    def transform(expr, ctx):
        return opt_tester.transform(expr, ctx)

    assert isinstance(transform, ModulePass)
    assert transform.info.name == "module_pass_test" and transform.info.opt_level == 0

    def direct_transform(expr, ctx):
        return opt_tester.transform(expr, ctx)

    mod_pass = module_pass(direct_transform, opt_level=3)
    assert isinstance(mod_pass, ModulePass)
    assert mod_pass.info.name == "direct_transform" and mod_pass.info.opt_level == 3

    assert "module_pass_test" in str(transform)
    updated_mod = transform(mod)
    assert isinstance(updated_mod, ir.IRModule)
    v_abs, myabs = get_var_func()
    check_func(updated_mod[updated_mod.get_global_var(v_abs.name_hint)], myabs)
    new_add = updated_mod[updated_mod.get_global_var(v_add.name_hint)]
    check_func(new_add, func)
    ret = opt_tester.transform(mod, None)
    check_func(new_add, mod[ret.get_global_var(v_add.name_hint)])
    x_nd, y_nd = get_rand((5, 10)), get_rand((5, 10)) * 2
    np.testing.assert_allclose(ir.evaluate(new_add, x_nd, y_nd), x_nd + y_nd, rtol=1e-5)


def test_function_class_pass():
    @function_pass(opt_level=1)
    class TestReplaceFunc:
        """Simple test function to replace one argument to another."""

        def __init__(self, new_func):
            self.new_func = new_func

        def transform_function(self, func, mod, ctx):
            return self.new_func

    x = ir.var("x", shape=(10, 20))
    f1 = ir.Function([x], x)
    f2 = ir.Function([x], ir.log(x))
    fpass = TestReplaceFunc(f1)
    assert fpass.info.opt_level == 1 and fpass.info.name == "TestReplaceFunc"
    mod = fpass(ir.IRModule.from_expr(f2))
    mod2 = passhost.passes.InferType()(ir.IRModule.from_expr(f1))
    assert ir.structural_equal(mod["main"], mod2["main"])


def test_function_pass():
    tp = ir.TensorType((10,), "float32")
    x = ir.var("x", tp)
    v_log = ir.GlobalVar("myLog")
    log = ir.Function([x], ir.log(x))
    mod = ir.IRModule({v_log: log})
    opt_tester = OptTester(mod)

    @function_pass(opt_level=1, name="function_pass_test")
    def transform(expr, mod, ctx):
        return opt_tester.transform(expr, ctx)

    assert isinstance(transform, FunctionPass)
    assert transform.info.name == "function_pass_test" and transform.info.opt_level == 1

    def direct_transform(expr, mod, ctx):
        return opt_tester.transform(expr, ctx)

    fpass = function_pass(direct_transform, opt_level=0)
    assert isinstance(fpass, FunctionPass)
    assert fpass.info.name == "direct_transform" and fpass.info.opt_level == 0

    assert "function_pass_test" in str(transform)
    updated_mod = transform(mod)
    assert isinstance(updated_mod, ir.IRModule)
    new_log = updated_mod[updated_mod.get_global_var(v_log.name_hint)]
    check_func(new_log, ir.Function([x], ir.log(ir.add(x, x))))
    check_func(new_log, opt_tester.transform(log, None))
    x_nd = get_rand((10,))
    np.testing.assert_allclose(ir.evaluate(new_log, x_nd), np.log(x_nd * 2), rtol=1e-5)


def test_module_class_pass():
    @module_pass(opt_level=1)
    class TestPipeline:
        """Simple test function to replace one argument to another."""

        def __init__(self, new_mod, replace):
            self.new_mod = new_mod
            self.replace = replace

        def transform_module(self, mod, ctx):
            return self.new_mod if self.replace else mod

    x = ir.var("x", shape=(10, 20))
    m1 = ir.IRModule.from_expr(ir.Function([x], x))
    m2 = ir.IRModule.from_expr(ir.Function([x], ir.log(x)))
    fpass = TestPipeline(m2, replace=True)
    assert fpass.info.name == "TestPipeline"
    assert fpass(m1) is m2
    assert TestPipeline(m2, replace=False)(m1) is m1


def test_pass_info():
    info = PassInfo(opt_level=1, name="xyz")
    assert info.opt_level == 1 and info.name == "xyz"


def test_sequential_pass():
    tp = ir.TensorType((10,), "float32")
    x, y = ir.var("x", tp), ir.var("y", tp)
    v_sub = ir.GlobalVar("mySub")
    sub = ir.Function([x, y], ir.subtract(x, y))
    z = ir.var("z", tp)
    v_log = ir.GlobalVar("myLog")
    log = ir.Function([z], ir.log(z))
    mod = ir.IRModule({v_sub: sub, v_log: log})

    def get_ref_log():
        return ir.Function([x], ir.log(ir.add(x, x)))

    def get_ref_sub():
        return ir.Function([x, y], ir.subtract(ir.add(x, x), ir.add(y, y)))

    def get_ref_abs():
        a = ir.var("a", ir.TensorType((5, 10), "float32"))
        return ir.Function([a], ir.abs(ir.add(a, a)))

    opt_tester = OptTester(mod)

    @module_pass(opt_level=1)
    def mod_transform(expr, ctx):
        return opt_tester.transform(expr, ctx)

    @function_pass(opt_level=1)
    def func_transform(expr, mod, ctx):
        return opt_tester.transform(expr, ctx)

    # registration
    sequential = Sequential(passes=[mod_transform, func_transform], opt_level=2)
    assert sequential.info.name == "sequential" and sequential.info.opt_level == 2
    # no pass
    check_func(sub, Sequential(opt_level=1, passes=[])(mod)[v_sub])
    # only the module pass
    with PassContext(required_pass=["mod_transform"]):
        ret_mod = Sequential(opt_level=1, passes=[mod_transform])(mod)
    check_func(extract_var_func(ret_mod, v_sub.name_hint)[1], sub)
    abs_var, abs_func = get_var_func()
    check_func(extract_var_func(ret_mod, abs_var.name_hint)[1], abs_func)
    # only the function pass
    with PassContext(required_pass=["func_transform"]):
        ret_mod = Sequential(opt_level=1, passes=[func_transform])(mod)
    check_func(extract_var_func(ret_mod, v_sub.name_hint)[1], get_ref_sub())
    check_func(extract_var_func(ret_mod, v_log.name_hint)[1], get_ref_log())
    # both
    mod = ir.IRModule({v_sub: sub, v_log: log})
    with PassContext(required_pass=["mod_transform", "func_transform"]):
        ret_mod = Sequential(opt_level=1, passes=[mod_transform, func_transform])(mod)
    check_func(extract_var_func(ret_mod, abs_var.name_hint)[1], get_ref_abs())
    _, new_sub = extract_var_func(ret_mod, v_sub.name_hint)
    check_func(new_sub, get_ref_sub())
    _, new_log = extract_var_func(ret_mod, v_log.name_hint)
    check_func(new_log, get_ref_log())
    x_nd, y_nd = get_rand((10,)), get_rand((10,)) + 1
    np.testing.assert_allclose(ir.evaluate(new_sub, x_nd, y_nd), x_nd * 2 - y_nd * 2, rtol=1e-5)
    _, new_abs = extract_var_func(ret_mod, abs_var.name_hint)
    a = get_rand((5, 10))
    np.testing.assert_allclose(ir.evaluate(new_abs, a), np.abs(a * 2), rtol=1e-5)


def test_sequential_with_scoping():
    shape = (1, 2, 3)
    c_data = np.array(shape).astype("float32")
    tp = ir.TensorType(shape, "float32")

    def before():
        c = ir.const(c_data)
        x = ir.var("x", tp)
        y = ir.add(x, ir.multiply(ir.add(c, c), ir.const(2, "float32")))
        z = ir.add(y, c)
        z1 = ir.add(y, c)
        return ir.Function([x], ir.add(z, z1))

    def expected():
        x = ir.var("x", tp)
        y = ir.add(x, ir.const((c_data + c_data) * 2))
        z = ir.add(y, ir.const(c_data))
        return ir.Function([x], ir.add(z, z))

    p = passhost.passes
    seq = Sequential([p.InferType(), p.FoldConstant(), p.EliminateCommonSubexpr(), p.get("AlterOpLayout")]
                     if "AlterOpLayout" in p.names() else [p.InferType(), p.FoldConstant(), p.EliminateCommonSubexpr()])
    with PassContext(opt_level=3):
        mod = seq(ir.IRModule({"main": before()}))
    zexpected = ir.infer_type(ir.IRModule.from_expr(expected()))["main"]
    assert ir.structural_equal(mod["main"], zexpected)


def test_nested_sequential_with_scoping():
    def before():
        x = ir.var("x", shape=(1, 16, 16, 16))
        w = ir.var("w", shape=(32, 16, 3, 3))
        y = ir.nn.conv2d(x, w, padding=(1, 1))
        y = ir.reshape(ir.reshape(y, newshape=(1, 16, -1)), newshape=(4, 8, -1, 16))
        y = ir.reverse_reshape(y, newshape=(32, 0, -1))
        return ir.IRModule.from_expr(ir.Function(list(ir.free_vars(y)), y))

    def expected():
        x = ir.var("x", shape=(1, 16, 16, 16))
        w = ir.var("w", shape=(32, 16, 3, 3))
        y = ir.reshape(ir.nn.conv2d(x, w, padding=(1, 1)), newshape=(32, 16, 16))
        return ir.IRModule.from_expr(ir.Function([x, w], y))

    passes = [Sequential([passhost.passes.SimplifyExpr()])]
    with PassContext(opt_level=1):
        zz = Sequential(passes)(before())
    assert ir.structural_equal(zz, passhost.passes.InferType()(expected()))


def test_nested_sequential_gates_with_the_current_context():
    """Issue 37, beside TVM's case: a Sequential inside a Sequential gates its passes with
    the context current when it runs -- required_pass and disabled_pass are seen at the
    inner level, the inner Sequential is gated by its own name and level, and a pass that
    enters its own PassContext runs its inner Sequential under that one."""
    log = []

    def marker(name, level):
        @module_pass(opt_level=level, name=name)
        def run(mod, ctx):
            log.append(name)
            return mod
        return run

    x = ir.var("x", shape=(2,))
    mod = ir.IRModule.from_expr(ir.Function([x], x))
    inner = Sequential([marker("A3", 3), marker("B0", 0)], name="inner")
    outer = Sequential([inner, marker("C1", 1)])
    for kwargs, want in [
        ({"opt_level": 1}, ["B0", "C1"]),
        ({"opt_level": 1, "required_pass": ["A3"]}, ["A3", "B0", "C1"]),
        ({"opt_level": 3, "disabled_pass": ["B0"]}, ["A3", "C1"]),
        ({"opt_level": 3, "disabled_pass": ["inner"]}, ["C1"]),
        ({"opt_level": 0}, ["B0"]),
    ]:
        log.clear()
        with PassContext(**kwargs):
            outer(mod)
        assert log == want, kwargs

    @module_pass(opt_level=0, name="Scoped")
    def scoped(mod, ctx):
        log.append(f"Scoped@{ctx.opt_level}")
        with PassContext(opt_level=3, disabled_pass=["B0"]):
            return inner(mod)

    log.clear()
    with PassContext(opt_level=0, required_pass=["A3"]):
        Sequential([scoped, inner])(mod)
    assert log == ["Scoped@0", "A3", "A3", "B0"]


def test_print_ir(capfd):
    x = ir.var("x", ir.TensorType((1, 2, 3), "float32"))
    y = ir.multiply(ir.add(x, x), ir.const(2, "float32"))
    p = passhost.passes
    seq = Sequential([p.InferType(), p.FoldConstant(), p.PrintIR(), p.DeadCodeElimination()])
    with PassContext(opt_level=3):
        seq(ir.IRModule({"main": ir.Function([x], y)}))
    out = capfd.readouterr().err
    assert "PrintIR" in out and "multiply" in out


@pass_instrument
class PassCounter:
    def __init__(self):
        self.counts = 1234  # a garbage value to test the set-up callback

    def enter_pass_ctx(self):
        self.counts = 0

    def exit_pass_ctx(self):
        self.counts = 0

    def run_before_pass(self, module, info):
        self.counts += 1

    def get_counts(self):
        return self.counts


def test_print_debug_callback():
    x = ir.var("x", ir.TensorType((1, 2, 3), "float32"))
    y = ir.multiply(ir.add(x, x), ir.const(2, "float32"))
    p = passhost.passes
    seq = Sequential([p.InferType(), p.FoldConstant(), p.DeadCodeElimination()])
    pass_counter = PassCounter()
    with PassContext(opt_level=3, instruments=[pass_counter]):
        assert pass_counter.get_counts() == 0  # reset when entering the context
        seq(ir.IRModule({"main": ir.Function([x], y)}))
        assert pass_counter.get_counts() == 6
    assert pass_counter.get_counts() == 0  # cleaned up after leaving it
