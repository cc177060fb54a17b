"""Tests for passhost.transform: PassInfo, decorators, FunctionPass, Sequential gating,
required-pass resolution and the invocation wrapper (TVM-NOTES §1)."""
from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from passhost import ir
from passhost.errors import PassError, PasshostError, PassNotFound
from passhost.instrument import PassInstrument
from passhost.ir import Function, IRModule, TensorType, Tuple, Var
from passhost.transform import (
    FunctionPass,
    ModulePass,
    Pass,
    PassContext,
    PassInfo,
    PassTypeError,
    Sequential,
    failed_pass,
    function_pass,
    module_pass,
    resolve_pass,
    set_pass_resolver,
)


# --------------------------------------------------------------------------------------
# helpers: test-local passes, a resolver for them and a recording instrument
# --------------------------------------------------------------------------------------
def _func(name: str = "x", attrs=None) -> Function:
    x = Var(name, TensorType((1, 3), "float32"))
    return Function([x], x, attrs=attrs)


def _mod() -> IRModule:
    return IRModule({"main": _func()})


def marker(name: str, opt_level: int = 0, required=(), log=None) -> ModulePass:
    """An identity module pass that appends its name to ``log`` when its body runs."""

    def body(mod, ctx):
        if log is not None:
            log.append(name)
        return mod

    return module_pass(body, opt_level=opt_level, name=name, required=list(required))


class Recorder(PassInstrument):
    """Records ``before:<name>`` / ``after:<name>`` events."""

    def __init__(self, events):
        self.events = events

    def run_before_pass(self, mod, info):
        self.events.append(f"before:{info.name}")

    def run_after_pass(self, mod, info):
        self.events.append(f"after:{info.name}")


@pytest.fixture
def registry():
    """Install a resolver over a dict of test-local passes; restore the old one afterwards."""
    passes = {}

    def resolve(name):
        try:
            return passes[name]
        except KeyError:
            raise PassNotFound(f"test registry has no pass '{name}'") from None

    previous = set_pass_resolver(resolve)
    log = []
    passes["InferType"] = marker("InferType", 0, log=log)
    passes["_log"] = log
    yield passes
    set_pass_resolver(previous)


# --------------------------------------------------------------------------------------
# PassInfo
# --------------------------------------------------------------------------------------
def test_pass_info_fields_and_str_forms():
    info = PassInfo(2, "FoldConstant")
    assert (info.opt_level, info.name, info.required) == (2, "FoldConstant", ())
    assert str(info) == "The meta data of the pass - pass name: FoldConstant, opt_level: 2, required passes: []\n"
    req = PassInfo(3, "EliminateCommonSubexpr", ["InferType"])
    assert str(req) == ("The meta data of the pass - pass name: EliminateCommonSubexpr, opt_level: 3, "
                        "required passes: [\nInferType, ]\n")
    assert str(PassInfo(3, "ConvertLayout", ("InferType", "CanonicalizeOps"))).endswith(
        "required passes: [\nInferType, CanonicalizeOps, ]\n")
    assert PassInfo(1, "A", None).required == ()
    assert repr(req) == "PassInfo(opt_level=3, name='EliminateCommonSubexpr', required=('InferType',))"


def test_pass_info_is_an_immutable_value():
    a, b = PassInfo(1, "A", ["B"]), PassInfo(1, "A", ("B",))
    assert a == b and hash(a) == hash(b) and a != PassInfo(2, "A", ["B"])
    with pytest.raises(AttributeError):
        a.name = "C"


@pytest.mark.parametrize("args", [("1", "A"), (True, "A"), (1, 5), (1, "A", "InferType"), (1, "A", [3])])
def test_pass_info_rejects_bad_arguments(args):
    with pytest.raises(PassTypeError):
        PassInfo(*args)


# --------------------------------------------------------------------------------------
# decorators
# --------------------------------------------------------------------------------------
def test_module_pass_direct_call_and_factory_forms():
    def rename(mod, ctx):
        return mod

    direct = module_pass(rename, opt_level=3)
    assert isinstance(direct, ModulePass) and isinstance(direct, Pass)
    assert direct.info == PassInfo(3, "rename")
    factory = module_pass(opt_level=2, name="Custom", required=["InferType"])
    made = factory(rename)
    assert made.info == PassInfo(2, "Custom", ("InferType",))
    assert repr(made) == "Run Module pass: Custom at the optimization level 2"

    @module_pass(opt_level=1)
    def decorated(mod, ctx):
        return IRModule({"other": _func()})

    assert decorated.info.name == "decorated"
    out = decorated(_mod())
    assert "other" in out and "main" not in out


def test_function_pass_direct_call_and_factory_forms():
    def body(func, mod, ctx):
        return func

    fp = function_pass(body, opt_level=2)
    assert isinstance(fp, FunctionPass) and fp.info == PassInfo(2, "body")
    assert repr(fp) == "Run Function pass: body at the optimization level 2"
    named = function_pass(opt_level=0, name="Named")(body)
    assert named.info.name == "Named"


def test_missing_opt_level_is_a_value_error_with_tvm_message():
    def f(mod, ctx):
        return mod

    with pytest.raises(ValueError, match=r"^Please provide opt_level for the module pass\.$"):
        module_pass(f)
    with pytest.raises(ValueError, match=r"^Please provide opt_level for the module pass\.$"):
        module_pass(name="x")
    with pytest.raises(ValueError, match=r"^Please provide opt_level for the function pass\.$"):
        function_pass(f)
    with pytest.raises(PasshostError):
        module_pass(f)


def test_decorator_type_errors():
    with pytest.raises(TypeError, match="Required is expected to be the type of list/tuple"):
        module_pass(opt_level=1, required="InferType")
    with pytest.raises(TypeError, match="Required is expected"):
        function_pass(opt_level=1, required={"InferType"})
    with pytest.raises(TypeError, match="pass_func must be a callable for Module pass"):
        module_pass(42, opt_level=1)
    with pytest.raises(TypeError, match="pass_func must be a callable for Function pass"):
        function_pass(opt_level=1)("nope")
    with pytest.raises(TypeError, match="must define transform_module"):
        @module_pass(opt_level=1)
        class NoMethod:
            pass
    with pytest.raises(TypeError, match="must define transform_function"):
        function_pass(opt_level=1)(type("Empty", (), {}))


def test_module_pass_on_a_class_wraps_instances_and_forwards_attributes():
    calls = []

    @module_pass(opt_level=2)
    class CountingPipeline:
        """Counts its runs."""

        def __init__(self, enable, *, label="x"):
            self.enable = enable
            self.label = label

        def transform_module(self, mod, ctx):
            calls.append((self.enable, self.label, ctx))
            return mod

        def helper(self):
            return "helped"

    assert isinstance(CountingPipeline, type) and issubclass(CountingPipeline, ModulePass)
    assert CountingPipeline.__name__ == "CountingPipeline" and CountingPipeline.__doc__ == "Counts its runs."
    p = CountingPipeline(True, label="y")
    assert isinstance(p, ModulePass)
    assert p.info == PassInfo(2, "CountingPipeline")
    assert p.enable is True and p.label == "y" and p.helper() == "helped"
    with pytest.raises(AttributeError):
        _ = p.missing_attribute
    ctx = PassContext(opt_level=0)
    mod = _mod()
    assert p(mod, ctx) is mod
    assert calls == [(True, "y", ctx)]
    # two instances are independent
    q = CountingPipeline(False)
    assert q.enable is False and p.enable is True


def test_tutorial_custom_pipeline_function_pass_class(registry):
    @function_pass(opt_level=1)
    class CustomPipeline:
        """Simple test function to replace one argument to another."""

        def __init__(self, multiplier):
            self.multiplier = multiplier

        def transform_function(self, func, mod, ctx):
            obj = self

            class ReplaceConstant(ir.ExprMutator):
                def visit_constant(self, c):
                    return ir.multiply(obj.multiplier, c)

            return ReplaceConstant().visit(func)

    x = ir.var("x", shape=(1, 3))
    c = ir.const(np.ones((1, 3), "float32"))
    mod = IRModule.from_expr(Function([x], ir.add(x, c)))
    custom_pass = CustomPipeline(multiplier=ir.const(3, "float32"))
    assert custom_pass.info.name == "CustomPipeline"
    assert custom_pass.info.opt_level == 1
    assert isinstance(custom_pass, FunctionPass)
    assert custom_pass.multiplier.data == 3
    out = custom_pass(mod)
    body = out["main"].body
    assert body.op.name == "add" and body.args[1].op.name == "multiply"
    assert body.args[1].args[0] is custom_pass.multiplier and body.args[1].args[1] is c
    assert mod["main"].body.args[1] is c  # the input module is untouched
    assert registry["_log"] == ["InferType"]  # the trailing InferType ran


# --------------------------------------------------------------------------------------
# FunctionPass
# --------------------------------------------------------------------------------------
def test_function_pass_skips_compiler_extern_and_skip_optimization(registry):
    funcs = {
        "main": _func(),
        "byoc": _func(attrs={"Compiler": "ccompiler"}),
        "byoc_empty": _func(attrs={"Compiler": ""}),
        "ext": _func(attrs={"Extern": 1}),
        "ext0": _func(attrs={"Extern": 0}),
        "skip": _func(attrs={"SkipOptimization": 1}),
        "skip0": _func(attrs={"SkipOptimization": 0}),
        "prim": _func(attrs={"Primitive": 1}),
    }
    mod = IRModule(funcs)
    seen = []

    @function_pass(opt_level=0)
    def visit(func, m, ctx):
        seen.append(func)
        return Function(func.params, Tuple([func.body]), attrs=func.attrs)

    out = visit(mod)
    names = {n for n, f in funcs.items() if any(f is s for s in seen)}
    assert names == {"main", "ext0", "skip0", "prim"}
    for name, func in funcs.items():
        assert mod[name] is func  # input untouched
        rewritten = out[name] is not func
        assert rewritten == (name in names)
    assert isinstance(out["prim"].body, Tuple)


def test_function_pass_gets_the_updated_module_and_checks_results(registry):
    mod = _mod()
    got = []

    @function_pass(opt_level=0)
    def look(func, m, ctx):
        got.append((m, ctx))
        return func

    ctx = PassContext()
    look(mod, ctx)
    m, c = got[0]
    assert isinstance(m, IRModule) and m is not mod and c is ctx

    @function_pass(opt_level=0, name="Broken")
    def broken(func, m, ctx):
        return m

    with pytest.raises(PassError, match="function pass 'Broken' returned IRModule for @main") as err:
        broken(mod)
    assert failed_pass(err.value) == "Broken"


def test_function_pass_runs_infer_type_through_the_wrapper(registry):
    events = []

    @function_pass(opt_level=2, name="FoldConstant")
    def fold(func, m, ctx):
        events.append("body:FoldConstant")
        return func

    with PassContext(instruments=[Recorder(events)]):
        fold(_mod())
    assert events == ["before:FoldConstant", "body:FoldConstant", "before:InferType", "after:InferType",
                      "after:FoldConstant"]


def test_host_infer_type_fallback_without_resolver():
    previous = set_pass_resolver(None)
    try:
        infer = resolve_pass("InferType")
        assert isinstance(infer, ModulePass) and infer.info == PassInfo(0, "InferType")
        with pytest.raises(PassNotFound, match="no pass registry is installed"):
            resolve_pass("FoldConstant")
        x = ir.var("x", shape=(2, 2))
        mod = IRModule.from_expr(Function([x], ir.add(x, x)))
        out = infer(mod)
        assert out["main"].body.checked_type == TensorType((2, 2), "float32")

        @function_pass(opt_level=0)
        def keep(func, m, ctx):
            return func

        typed = keep(IRModule.from_expr(Function([x], ir.exp(x))))
        assert typed["main"].body.checked_type == TensorType((2, 2), "float32")
    finally:
        set_pass_resolver(previous)


def test_resolver_that_lacks_infer_type_falls_back_but_other_names_fail():
    def resolve(name):
        raise PassNotFound(f"no '{name}' here; install passhost-{name.lower()}")

    previous = set_pass_resolver(resolve)
    try:
        assert resolve_pass("InferType").info.name == "InferType"
        with pytest.raises(PassNotFound, match="install passhost-foldconstant"):
            resolve_pass("FoldConstant")
        seq = Sequential([marker("Needs", required=["FoldConstant"])])
        with pytest.raises(PassNotFound) as err:
            seq(_mod())
        if sys.version_info >= (3, 11):  # exception notes exist from 3.11 on
            assert "(required by pass 'Needs')" in err.value.__notes__
        assert err.value.passhost_pass_path == ["Needs", "sequential"]
        assert failed_pass(err.value) == "Needs"
    finally:
        set_pass_resolver(previous)


def test_resolver_returning_a_non_pass_is_an_error():
    previous = set_pass_resolver(lambda name: "not a pass")
    try:
        with pytest.raises(PassError, match="not a Pass"):
            resolve_pass("X")
    finally:
        set_pass_resolver(previous)
    with pytest.raises(PassTypeError):
        set_pass_resolver(42)


# --------------------------------------------------------------------------------------
# the wrapper: results, errors, direct calls
# --------------------------------------------------------------------------------------
def test_module_pass_must_return_a_module():
    bad = module_pass(lambda mod, ctx: None, opt_level=0, name="ReturnsNone")
    with pytest.raises(PassError, match="pass 'ReturnsNone' returned NoneType, not an IRModule") as err:
        bad(_mod())
    assert failed_pass(err.value) == "ReturnsNone"
    with pytest.raises(PassError, match="returned Function"):
        Sequential([module_pass(lambda mod, ctx: mod["main"], opt_level=0, name="F")])(_mod())
    with pytest.raises(PassError):
        with PassContext(instruments=[Recorder([])]):
            Sequential([bad])(_mod())


def test_pass_call_checks_arguments():
    p = marker("P")
    with pytest.raises(PassTypeError, match="runs on an IRModule, got Function"):
        p(_func())
    with pytest.raises(PassTypeError, match="needs a PassContext"):
        p(_mod(), ctx={"opt_level": 3})
    with pytest.raises(PassTypeError):
        Pass()


def test_pass_exception_propagates_unchanged_with_the_pass_name():
    boom = KeyError("boom")

    def explode(mod, ctx):
        raise boom

    inner = module_pass(explode, opt_level=0, name="Explode")
    seq = Sequential([marker("Fine"), Sequential([inner], name="inner")], name="outer")
    with pytest.raises(KeyError) as err:
        seq(_mod())
    assert err.value is boom
    assert failed_pass(boom) == "Explode"
    assert boom.passhost_pass_path == ["Explode", "inner", "outer"]
    if sys.version_info >= (3, 11):  # exception notes exist from 3.11 on
        assert boom.__notes__ == ["(raised while running pass 'Explode')"]
    assert failed_pass(ValueError("elsewhere")) is None


def test_direct_call_ignores_opt_level_disabled_and_required(registry):
    log = registry["_log"]
    high = marker("High", opt_level=9, required=["InferType"], log=log)
    with PassContext(opt_level=0, disabled_pass=["High"]):
        high(_mod())
    assert log == ["High"]  # ran; its required InferType was not resolved


def test_explicit_context_argument_is_used(registry):
    events = []
    ctx = PassContext(instruments=[Recorder(events)])
    marker("P")(_mod(), ctx)
    assert events == ["before:P", "after:P"]
    assert PassContext.current() is not ctx


def test_immutable_module_check():
    def mutate(mod, ctx):
        mod["extra"] = _func()
        return mod

    def copy_then_add(mod, ctx):
        out = mod.copy()
        out["extra"] = _func()
        return out

    with PassContext(config={"testing.immutable_module": True}):
        assert "extra" in module_pass(copy_then_add, opt_level=0)(_mod())
        with pytest.raises(PassError, match="^Immutable module has been modified in pass: mutate$") as err:
            module_pass(mutate, opt_level=0)(_mod())
        assert failed_pass(err.value) == "mutate"
        with pytest.raises(PassError, match="modified in pass: mutate"):
            Sequential([marker("ok"), module_pass(mutate, opt_level=0)])(_mod())
    # without the option the same pass is allowed
    assert "extra" in module_pass(mutate, opt_level=0)(_mod())


# --------------------------------------------------------------------------------------
# Sequential
# --------------------------------------------------------------------------------------
def test_sequential_construction_and_repr():
    a, b = marker("A"), marker("B")
    seq = Sequential([a, b])
    assert seq.info == PassInfo(0, "sequential") and seq.passes == (a, b)
    assert repr(seq) == ("Run Sequential pass: sequential at the optimization level 0. "
                         "The passes will be executed are: [A B ]")
    assert Sequential().passes == () and Sequential(None, 3, "x", ["A"]).info == PassInfo(3, "x", ("A",))
    with pytest.raises(TypeError, match=r"^passes must be a list of Pass objects\.$"):
        Sequential(a)
    with pytest.raises(TypeError, match="element 1"):
        Sequential([a, "B"])
    mod = _mod()
    assert Sequential()(mod) is mod


def _run_seq(passes, **ctx_args):
    log = []
    seq = Sequential([marker(n, lvl, req, log) for n, lvl, req in passes])
    with PassContext(**ctx_args):
        seq(_mod())
    return log


@pytest.mark.parametrize("ctx_args, expected", [
    ({}, ["L0", "L2"]),
    ({"opt_level": 3}, ["L0", "L3", "L2"]),
    ({"opt_level": 0}, ["L0"]),
    ({"disabled_pass": ["L2"]}, ["L0"]),
    ({"opt_level": 3, "disabled_pass": ("L0", "L3")}, ["L2"]),
    ({"required_pass": ["L3"]}, ["L0", "L3", "L2"]),
    ({"opt_level": 0, "required_pass": {"L2", "L3"}}, ["L0", "L3", "L2"]),
    ({"required_pass": ["L3"], "disabled_pass": ["L3"]}, ["L0", "L2"]),  # disabled wins
    ({"disabled_pass": ["l2"]}, ["L0", "L2"]),  # names are case-sensitive
])
def test_sequential_gating(ctx_args, expected):
    assert _run_seq([("L0", 0, ()), ("L3", 3, ()), ("L2", 2, ())], **ctx_args) == expected


def test_nested_sequential_is_gated_by_its_own_info():
    log = []
    inner = Sequential([marker("I0", 0, log=log), marker("I3", 3, log=log)], opt_level=3, name="inner")
    default_named = Sequential([marker("D", 0, log=log)])
    outer = Sequential([marker("O", 0, log=log), inner, default_named])
    with PassContext(opt_level=2):
        outer(_mod())
    assert log == ["O", "D"]  # inner needs 3; its opt_level does not lower the children's bar
    log.clear()
    with PassContext(opt_level=3, disabled_pass=["inner"]):
        outer(_mod())
    assert log == ["O", "D"]
    log.clear()
    with PassContext(opt_level=2, required_pass=["inner"]):
        outer(_mod())
    assert log == ["O", "I0", "D"]  # forced on, but I3 still needs level 3
    log.clear()
    with PassContext(opt_level=3, disabled_pass=["sequential"]):
        outer(_mod())  # the outer one is called directly, its default-named child is disabled
    assert log == ["O", "I0", "I3"]


def test_required_passes_run_first_and_are_seen_by_instruments(registry):
    log = registry["_log"]
    registry["Canon"] = marker("Canon", 3, required=["Deep"], log=log)
    registry["Deep"] = marker("Deep", 0, log=log)
    seq = Sequential([
        marker("A", 1, required=["InferType"], log=log),
        marker("Skipped", 3, required=["Canon"], log=log),
        marker("B", 2, required=["InferType", "Canon"], log=log),
    ])
    events = []
    with PassContext(opt_level=2, disabled_pass=["InferType", "Canon"], instruments=[Recorder(events)]):
        seq(_mod())
    # disabled and above-level required passes still run; not transitive (Deep never runs);
    # not de-duplicated (InferType twice); a skipped pass's requirements are not run
    assert log == ["InferType", "A", "InferType", "Canon", "B"]
    assert events == ["before:sequential",
                      "before:InferType", "after:InferType", "before:A", "after:A",
                      "before:InferType", "after:InferType", "before:Canon", "after:Canon",
                      "before:B", "after:B",
                      "after:sequential"]


def test_sequential_own_required_only_when_nested(registry):
    log = registry["_log"]
    inner = Sequential([marker("X", log=log)], name="inner", required=["InferType"])
    inner(_mod())
    assert log == ["X"]
    log.clear()
    Sequential([inner])(_mod())
    assert log == ["InferType", "X"]


def test_default_pipeline_counts_six_before_calls(registry):
    """TVM-NOTES §2.6: Sequential([InferType, FoldConstant, DCE]) at opt_level 3."""
    log = registry["_log"]

    @function_pass(opt_level=2, name="FoldConstant")
    def fold_constant(func, mod, ctx):
        return func

    dce = marker("DeadCodeElimination", 1, required=["InferType"], log=log)

    class Counter(PassInstrument):
        def __init__(self):
            self.count = 0
            self.names = []

        def enter_pass_ctx(self):
            self.count = 0

        def exit_pass_ctx(self):
            self.count = 0

        def run_before_pass(self, mod, info):
            self.count += 1
            self.names.append(info.name)

    counter = Counter()
    seq = Sequential([registry["InferType"], fold_constant, dce])
    with PassContext(opt_level=3, instruments=[counter]):
        seq(_mod())
        assert counter.count == 6
    assert counter.count == 0
    assert counter.names == ["sequential", "InferType", "FoldConstant", "InferType", "InferType",
                             "DeadCodeElimination"]


def test_tutorial_print_ir_instrument_order(registry, capsys):
    """use_pass_infra tutorial: PrintIR-style instrument before every pass at opt_level 3."""

    def fpass(name, level, required=()):
        return function_pass(lambda f, m, c: f, opt_level=level, name=name, required=list(required))

    seq = Sequential([
        fpass("FoldConstant", 2),
        marker("PrintIR", 0),
        fpass("EliminateCommonSubexpr", 3, ["InferType"]),
        fpass("FuseOps", 0, ["InferType"]),
    ])

    class PrintIR(PassInstrument):
        def run_before_pass(self, mod, info):
            print("Running pass: {}", info)

    with PassContext(opt_level=3, instruments=[PrintIR()]):
        seq(_mod())
    out = capsys.readouterr().out
    names = [line.split("pass name: ")[1].split(",")[0] for line in out.splitlines() if "pass name: " in line]
    assert names == ["sequential", "FoldConstant", "InferType", "PrintIR", "InferType", "EliminateCommonSubexpr",
                     "InferType", "InferType", "FuseOps", "InferType"]
    assert ("Running pass: {} The meta data of the pass - pass name: sequential, opt_level: 0, "
            "required passes: []\n") in out
    assert ("Running pass: {} The meta data of the pass - pass name: EliminateCommonSubexpr, opt_level: 3, "
            "required passes: [\nInferType, ]\n") in out


def test_tutorial_sequential_opt_levels(registry):
    """FoldConstant(2), EliminateCommonSubexpr(3), FuseOps(0): CSE only at opt_level 3."""
    ran = []

    def fpass(name, level, required=()):
        def body(f, m, c):
            ran.append(name)
            return f
        return function_pass(body, opt_level=level, name=name, required=list(required))

    seq = Sequential([fpass("FoldConstant", 2), fpass("EliminateCommonSubexpr", 3, ["InferType"]),
                      fpass("FuseOps", 0, ["InferType"])])
    seq(_mod())
    assert ran == ["FoldConstant", "FuseOps"]
    ran.clear()
    with PassContext(opt_level=3):
        seq(_mod())
    assert ran == ["FoldConstant", "EliminateCommonSubexpr", "FuseOps"]
    ran.clear()
    with PassContext(opt_level=3, disabled_pass=["EliminateCommonSubexpr"]):
        seq(_mod())
    assert ran == ["FoldConstant", "FuseOps"]
    ran.clear()
    with PassContext(opt_level=2):  # individual calls are never gated
        for p in seq.passes:
            p(_mod())
    assert ran == ["FoldConstant", "EliminateCommonSubexpr", "FuseOps"]


def test_instruments_installed_during_a_sequential_apply_to_the_remaining_passes():
    events = []
    ctx = PassContext()

    def install(mod, c):
        c.override_instruments([Recorder(events)])
        return mod

    seq = Sequential([marker("Before"), module_pass(install, opt_level=0, name="Install"), marker("After")])
    seq(_mod(), ctx)
    # hooks are paired: the Sequential's own after-hook belongs to the set it started with
    assert events == ["before:After", "after:After"]
    ctx.override_instruments(None)


def test_should_run_can_veto_inside_a_sequential():
    log = []

    class NoB(PassInstrument):
        def should_run(self, mod, info):
            return info.name != "B"

    seq = Sequential([marker("A", log=log), marker("B", log=log), marker("C", log=log)])
    with PassContext(instruments=[NoB()]):
        seq(_mod())
    assert log == ["A", "C"]
    log.clear()
    with PassContext(instruments=[NoB()], required_pass=["B"]):
        seq(_mod())
    assert log == ["A", "B", "C"]


_NAMES = st.sampled_from(["A", "B", "C", "D"])


@settings(max_examples=150, deadline=None)
@given(passes=st.lists(st.tuples(_NAMES, st.integers(0, 4), st.lists(_NAMES, max_size=2)), max_size=6),
       opt_level=st.integers(0, 4), forced=st.sets(_NAMES), disabled=st.sets(_NAMES))
def test_sequential_matches_the_reference_gating_rule(passes, opt_level, forced, disabled):
    log = []

    def resolve(name):
        return marker(name, 9, required=["Never"], log=log)  # logs like the pass; never gated

    seq = Sequential([marker(n, lvl, req, log) for n, lvl, req in passes])
    expected = []
    for name, level, required in passes:
        if name in disabled or not (name in forced or level <= opt_level):
            continue
        expected += list(required) + [name]
    previous = set_pass_resolver(resolve)
    try:
        with PassContext(opt_level=opt_level, required_pass=forced, disabled_pass=disabled):
            seq(_mod())
    finally:
        set_pass_resolver(previous)
    assert log == expected


def test_the_cyclic_gc_is_paused_while_a_pipeline_runs_and_restored_after():
    import gc

    from passhost.transform import Sequential, module_pass

    seen = []

    @module_pass(opt_level=0, name="LookAtGC")
    def look(mod, ctx):
        seen.append(gc.isenabled())
        return mod

    mod = IRModule.from_expr(ir.Function([], ir.const(1.0)))
    assert gc.isenabled()
    Sequential([look, look])(mod)
    assert seen == [False, False] and gc.isenabled()

    def boom(mod, ctx):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        module_pass(boom, opt_level=0, name="Boom")(mod)
    assert gc.isenabled()  # restored on failure too

    gc.disable()  # a user who turned the collector off keeps it off
    try:
        look(mod)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_large_paused_run_promotes_its_survivors_instead_of_a_young_collection():
    import gc

    from passhost.testing import chain
    from passhost.transform import module_pass

    mod = chain(60_000)  # well over the promotion threshold once rebuilt
    keep = []

    @module_pass(opt_level=0, name="Rebuild")
    def rebuild(m, ctx):
        out = ir.infer_type(chain(60_000))
        keep.append(out)
        return out

    gc.collect()
    rebuild(mod)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert gc.get_count()[0] < 1_000  # no million-object young generation left behind

    # objects a user froze stay frozen
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        rebuild(mod)
        assert gc.get_freeze_count() == frozen and gc.isenabled()
    finally:
        gc.unfreeze()
