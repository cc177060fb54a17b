"""Tests for passhost.instrument and the instrument protocol of PassContext.

Every exception scenario of TVM's pass-instrument tutorial (seed
tvm-pass-instrument-tutorial-zh.txt) is reproduced with its exact printed event
sequence, plus the sequences of TVM-NOTES §2.2/§2.3.
"""
from __future__ import annotations

import threading

import pytest

from passhost.errors import PasshostError
from passhost.instrument import InstrumentTypeError, PassInstrument, pass_instrument
from passhost.ir import Function, IRModule, TensorType, Var
from passhost.testing.tutorial_instruments import (PassBadEnterCtx, PassBadExitCtx, PassBadRunAfter,
                                                    PassBadRunBefore, PassBadShouldRun, PassExampleBase,
                                                    PassFine)
from passhost.transform import PassContext, Sequential, failed_pass, module_pass


def _mod() -> IRModule:
    x = Var("x", TensorType((1, 3), "float32"))
    return IRModule({"main": Function([x], x)})


infer_type = module_pass(lambda mod, ctx: mod, opt_level=0, name="InferType")


# --------------------------------------------------------------------------------------
# the tutorial's instruments (they print, exactly as in the seed) come from passhost.testing
# --------------------------------------------------------------------------------------
def lines(capsys) -> list:
    return capsys.readouterr().out.splitlines()


@pytest.fixture(autouse=True)
def clean_default_context():
    """Tests that install instruments on the thread's default context remove them."""
    yield
    PassContext.current().override_instruments(None)


# --------------------------------------------------------------------------------------
# pass_instrument / PassInstrument
# --------------------------------------------------------------------------------------
def test_pass_instrument_decorator():
    assert issubclass(PassFine, PassInstrument) and issubclass(PassFine, PassExampleBase)
    assert PassFine.__name__ == "PassFine" and PassFine.__module__ == "passhost.testing.tutorial_instruments"
    inst = PassFine("a")
    assert inst.name == "PassFine" and inst._name == "a"
    assert pass_instrument(PassFine) is PassFine
    with pytest.raises(TypeError, match="pi_cls must be a class"):
        pass_instrument(PassFine("x"))
    with pytest.raises(PasshostError):
        pass_instrument(42)

    @pass_instrument
    class OnlyBefore:
        """Doc."""

        def __init__(self):
            self.seen = []

        def run_before_pass(self, mod, info):
            self.seen.append(info.name)

    only = OnlyBefore()
    assert OnlyBefore.__doc__ == "Doc." and only.should_run(None, None) is True
    assert only.enter_pass_ctx() is None and only.run_after_pass(None, None) is None
    with PassContext(instruments=[only]):
        infer_type(_mod())
    assert only.seen == ["InferType"]


def test_instrument_name_can_be_set_per_instance():
    class Named(PassInstrument):
        def __init__(self, name):
            self.name = name

    assert Named("mine").name == "mine" and PassInstrument().name == "PassInstrument"
    assert repr(PassInstrument()) == "<PassInstrument PassInstrument>"


def test_context_rejects_non_instruments():
    with pytest.raises(InstrumentTypeError, match="is a class; pass an instance, e.g. PassFine()"):
        PassContext(instruments=[PassFine])
    with pytest.raises(TypeError, match="is not a pass instrument"):
        PassContext(instruments=[object()])
    with pytest.raises(TypeError):
        PassContext(instruments="timing")
    with pytest.raises(TypeError):
        PassContext.current().override_instruments([PassFine])


def test_duck_typed_instruments_work():
    class Duck:
        def __init__(self):
            self.names = []

        def run_after_pass(self, mod, info):
            self.names.append(info.name)

    duck = Duck()
    with PassContext(instruments=[duck]):
        infer_type(_mod())
    assert duck.names == ["InferType"]


# --------------------------------------------------------------------------------------
# call order (TVM-NOTES §2.2)
# --------------------------------------------------------------------------------------
def test_instrument_call_sequence(capsys):
    p1 = module_pass(lambda mod, ctx: (print("transform p1"), mod)[1], opt_level=0, name="p1")
    p2 = module_pass(lambda mod, ctx: (print("transform p2"), mod)[1], opt_level=0, name="p2")
    with PassContext(instruments=[PassFine("%1"), PassFine("%2")]):
        p1(_mod())
        p2(_mod())
    per_pass = ["%1 should_run", "%2 should_run", "%1 run_before_pass", "%2 run_before_pass"]
    assert lines(capsys) == (["%1 enter_pass_ctx", "%2 enter_pass_ctx"]
                             + per_pass + ["transform p1", "%1 run_after_pass", "%2 run_after_pass"]
                             + per_pass + ["transform p2", "%1 run_after_pass", "%2 run_after_pass"]
                             + ["%1 exit_pass_ctx", "%2 exit_pass_ctx"])


def test_hooks_get_input_module_before_and_output_module_after():
    seen = []

    class Spy(PassInstrument):
        def should_run(self, mod, info):
            seen.append(("should_run", mod, info))
            return True

        def run_before_pass(self, mod, info):
            seen.append(("before", mod, info))

        def run_after_pass(self, mod, info):
            seen.append(("after", mod, info))

    new = _mod()
    replace = module_pass(lambda mod, ctx: new, opt_level=0, name="Replace")
    old = _mod()
    with PassContext(instruments=[Spy()]):
        assert replace(old) is new
    assert [(k, m, i) for k, m, i in seen] == [("should_run", old, replace.info), ("before", old, replace.info),
                                                ("after", new, replace.info)]


def test_should_run_veto_calls_every_instrument_and_skips_the_pass(capsys):
    @pass_instrument
    class Veto(PassExampleBase):
        def should_run(self, mod, info):
            print(self._name, "should_run -> False")
            return False

    ran = []
    p = module_pass(lambda mod, ctx: ran.append(1) or _mod(), opt_level=0, name="P")
    mod = _mod()
    with PassContext(instruments=[Veto("%1"), PassFine("%2")]):
        assert p(mod) is mod  # skipped: the input module comes back unchanged
    assert ran == []
    assert lines(capsys) == ["%1 enter_pass_ctx", "%2 enter_pass_ctx", "%1 should_run -> False",
                             "%2 should_run", "%1 exit_pass_ctx", "%2 exit_pass_ctx"]


def test_required_pass_is_exempt_from_should_run(capsys):
    with PassContext(required_pass=["InferType"], instruments=[PassFine("%1")]):
        infer_type(_mod())
    assert lines(capsys) == ["%1 enter_pass_ctx", "%1 run_before_pass", "%1 run_after_pass", "%1 exit_pass_ctx"]


def test_no_instruments_no_hooks_every_pass_runs():
    ran = []
    p = module_pass(lambda mod, ctx: ran.append(1) or mod, opt_level=5, name="P")
    with PassContext(instruments=[]):
        p(_mod())
    assert ran == [1]


def test_before_and_after_nest_like_a_stack():
    """The op-diff instrument's invariant: before/after pairs nest (Sequential children,
    required passes and the InferType inside function passes)."""
    from passhost.transform import function_pass, set_pass_resolver

    class Stack(PassInstrument):
        def __init__(self):
            self.stack, self.done = [], []

        def enter_pass_ctx(self):
            self.stack, self.done = [], []

        def exit_pass_ctx(self):
            assert not self.stack

        def run_before_pass(self, mod, info):
            self.stack.append(info.name)

        def run_after_pass(self, mod, info):
            assert self.stack.pop() == info.name
            self.done.append((len(self.stack), info.name))

    previous = set_pass_resolver(lambda name: infer_type if name == "InferType" else None)
    try:
        fold = function_pass(lambda f, m, c: f, opt_level=0, name="FoldConstant")
        convert = function_pass(lambda f, m, c: f, opt_level=0, name="ConvertLayout", required=["InferType"])
        inst = Stack()
        with PassContext(opt_level=3, instruments=[inst]):
            Sequential([fold, convert, fold])(_mod())
            done = inst.done
    finally:
        set_pass_resolver(previous)
    assert done == [(2, "InferType"), (1, "FoldConstant"), (1, "InferType"), (2, "InferType"),
                    (1, "ConvertLayout"), (2, "InferType"), (1, "FoldConstant"), (0, "sequential")]


# --------------------------------------------------------------------------------------
# the tutorial's exception scenarios
# --------------------------------------------------------------------------------------
def test_tutorial_bad_enter_ctx(capsys):
    demo_ctx = PassContext(instruments=[PassFine("PassFine_0"), PassBadEnterCtx("PassBadEnterCtx"),
                                        PassFine("PassFine_1")])
    body_ran = []
    with pytest.raises(ValueError, match="PassBadEnterCtx bad enter_pass_ctx"):
        with demo_ctx:
            body_ran.append(1)
            infer_type(_mod())
    assert body_ran == []
    assert lines(capsys) == ["PassFine_0 enter_pass_ctx", "PassBadEnterCtx bad enter_pass_ctx!!!",
                             "PassFine_0 exit_pass_ctx"]
    assert PassContext.current() is not demo_ctx
    assert not PassContext.current().instruments
    assert demo_ctx.instruments == ()
    # instrumentation is disabled, so nothing is printed here
    demo_ctx.override_instruments([])
    assert lines(capsys) == []


def test_enter_failure_exits_the_entered_instruments_in_reverse_order(capsys):
    ctx = PassContext(instruments=[PassFine("A"), PassFine("B"), PassBadEnterCtx("Bad"), PassFine("C")])
    with pytest.raises(ValueError):
        ctx.__enter__()
    assert lines(capsys) == ["A enter_pass_ctx", "B enter_pass_ctx", "Bad bad enter_pass_ctx!!!",
                             "B exit_pass_ctx", "A exit_pass_ctx"]
    assert PassContext.current() is not ctx


def test_tutorial_bad_exit_ctx(capsys):
    demo_ctx = PassContext(instruments=[PassFine("PassFine_0"), PassBadExitCtx("PassBadExitCtx"),
                                        PassFine("PassFine_1")])
    with pytest.raises(ValueError, match="PassBadExitCtx bad exit_pass_ctx"):
        with demo_ctx:
            infer_type(_mod())
    assert lines(capsys) == [
        "PassFine_0 enter_pass_ctx", "PassBadExitCtx enter_pass_ctx", "PassFine_1 enter_pass_ctx",
        "PassFine_0 should_run", "PassBadExitCtx should_run", "PassFine_1 should_run",
        "PassFine_0 run_before_pass", "PassBadExitCtx run_before_pass", "PassFine_1 run_before_pass",
        "PassFine_0 run_after_pass", "PassBadExitCtx run_after_pass", "PassFine_1 run_after_pass",
        "PassFine_0 exit_pass_ctx", "PassBadExitCtx bad exit_pass_ctx!!!",
    ]
    assert PassContext.current() is not demo_ctx  # popped before the exits ran
    assert demo_ctx.instruments == ()
    demo_ctx.override_instruments([])
    assert lines(capsys) == []


def test_tutorial_bad_run_before_pass(capsys):
    demo_ctx = PassContext(instruments=[PassFine("PassFine_0"), PassBadRunBefore("PassBadRunBefore"),
                                        PassFine("PassFine_1")])
    ran = []
    p = module_pass(lambda mod, ctx: ran.append(1) or mod, opt_level=0, name="InferType")
    with pytest.raises(ValueError, match="PassBadRunBefore bad run_before_pass") as err:
        with demo_ctx:
            p(_mod())
    assert ran == []
    assert failed_pass(err.value) is None  # an instrument failed, not the pass
    assert lines(capsys) == [
        "PassFine_0 enter_pass_ctx", "PassBadRunBefore enter_pass_ctx", "PassFine_1 enter_pass_ctx",
        "PassFine_0 should_run", "PassBadRunBefore should_run", "PassFine_1 should_run",
        "PassFine_0 run_before_pass", "PassBadRunBefore bad run_before_pass!!!",
        "PassFine_0 exit_pass_ctx", "PassBadRunBefore exit_pass_ctx", "PassFine_1 exit_pass_ctx",
    ]
    # instrumentation is not disabled: overriding exits the old instruments again
    assert len(demo_ctx.instruments) == 3
    demo_ctx.override_instruments([])
    assert lines(capsys) == ["PassFine_0 exit_pass_ctx", "PassBadRunBefore exit_pass_ctx",
                             "PassFine_1 exit_pass_ctx"]


def test_tutorial_bad_run_before_pass_on_the_current_default_context(capsys):
    cur_pass_ctx = PassContext.current()
    cur_pass_ctx.override_instruments([PassFine("PassFine_0"), PassBadRunBefore("PassBadRunBefore"),
                                       PassFine("PassFine_1")])
    assert lines(capsys) == ["PassFine_0 enter_pass_ctx", "PassBadRunBefore enter_pass_ctx",
                             "PassFine_1 enter_pass_ctx"]
    with pytest.raises(ValueError, match="PassBadRunBefore bad run_before_pass"):
        infer_type(_mod())
    # no exit_pass_ctx: there is no `with` to run it
    assert lines(capsys) == ["PassFine_0 should_run", "PassBadRunBefore should_run", "PassFine_1 should_run",
                             "PassFine_0 run_before_pass", "PassBadRunBefore bad run_before_pass!!!"]
    assert PassContext.current() is cur_pass_ctx
    cur_pass_ctx.override_instruments([])
    assert lines(capsys) == ["PassFine_0 exit_pass_ctx", "PassBadRunBefore exit_pass_ctx",
                             "PassFine_1 exit_pass_ctx"]
    assert PassContext.current().instruments == ()


def test_tutorial_override_on_the_current_context_drives_timing_like_instruments():
    """``override_instruments`` on the default context installs instruments for later passes;
    an empty list exits them (the timing instrument drops its profiles there)."""
    class Profile(PassInstrument):
        def __init__(self):
            self.records = []

        def run_after_pass(self, mod, info):
            self.records.append(info.name)

        def exit_pass_ctx(self):
            self.records = []

    prof = Profile()
    cur = PassContext.current()
    cur.override_instruments([prof])
    infer_type(_mod())
    Sequential([infer_type], name="FoldScaleAxis")(_mod())
    assert prof.records == ["InferType", "InferType", "FoldScaleAxis"]
    cur.override_instruments([])
    assert prof.records == []


def test_should_run_raises(capsys):
    ran = []
    p = module_pass(lambda mod, ctx: ran.append(1) or mod, opt_level=0, name="P")
    with pytest.raises(ValueError, match="%1 bad should_run"):
        with PassContext(instruments=[PassBadShouldRun("%1"), PassFine("%2")]):
            p(_mod())
    assert ran == []
    assert lines(capsys) == ["%1 enter_pass_ctx", "%2 enter_pass_ctx", "%1 bad should_run!!!",
                             "%1 exit_pass_ctx", "%2 exit_pass_ctx"]


def test_pass_body_raises(capsys):
    def transform(mod, ctx):
        print("transform pass")
        raise ValueError("pass failed")

    p = module_pass(transform, opt_level=0, name="Failing")
    ctx = PassContext(instruments=[PassFine("%1")])
    with pytest.raises(ValueError, match="pass failed") as err:
        with ctx:
            p(_mod())
    assert failed_pass(err.value) == "Failing"
    assert lines(capsys) == ["%1 enter_pass_ctx", "%1 should_run", "%1 run_before_pass", "transform pass",
                             "%1 exit_pass_ctx"]
    assert len(ctx.instruments) == 1  # not cleared


def test_run_after_pass_raises(capsys):
    p = module_pass(lambda mod, ctx: (print("transform pass"), mod)[1], opt_level=0, name="P")
    ctx = PassContext(instruments=[PassBadRunAfter("%1"), PassFine("%2")])
    with pytest.raises(ValueError, match="%1 bad run_after_pass") as err:
        with ctx:
            p(_mod())
    assert failed_pass(err.value) is None
    assert lines(capsys) == ["%1 enter_pass_ctx", "%2 enter_pass_ctx", "%1 should_run", "%2 should_run",
                             "%1 run_before_pass", "%2 run_before_pass", "transform pass",
                             "%1 bad run_after_pass!!!", "%1 exit_pass_ctx", "%2 exit_pass_ctx"]
    assert len(ctx.instruments) == 2


def test_hook_errors_inside_a_sequential(capsys):
    seq = Sequential([infer_type, infer_type])
    with pytest.raises(ValueError, match="bad run_before_pass") as err:
        with PassContext(instruments=[PassBadRunBefore("%1")]):
            seq(_mod())
    assert failed_pass(err.value) is None
    assert lines(capsys) == ["%1 enter_pass_ctx", "%1 should_run", "%1 bad run_before_pass!!!",
                             "%1 exit_pass_ctx"]


def test_override_instruments_exit_failure_keeps_new_list_out(capsys):
    ctx = PassContext(instruments=[PassFine("old0"), PassBadExitCtx("old1"), PassFine("old2")])
    with pytest.raises(ValueError, match="old1 bad exit_pass_ctx"):
        ctx.override_instruments([PassFine("new")])
    assert lines(capsys) == ["old0 exit_pass_ctx", "old1 bad exit_pass_ctx!!!"]
    assert ctx.instruments == ()


def test_override_instruments_enter_failure_clears(capsys):
    ctx = PassContext(instruments=[PassFine("old")])
    with pytest.raises(ValueError, match="bad bad enter_pass_ctx"):
        ctx.override_instruments([PassFine("new0"), PassFine("new1"), PassBadEnterCtx("bad"), PassFine("new2")])
    assert lines(capsys) == ["old exit_pass_ctx", "new0 enter_pass_ctx", "new1 enter_pass_ctx",
                             "bad bad enter_pass_ctx!!!", "new1 exit_pass_ctx", "new0 exit_pass_ctx"]
    assert ctx.instruments == ()
    ctx.override_instruments(None)
    assert lines(capsys) == []


def test_override_instruments_replaces_and_clears(capsys):
    ctx = PassContext(instruments=[PassFine("a")])
    with ctx:
        ctx.override_instruments([PassFine("b")])
        infer_type(_mod())
        ctx.override_instruments(None)
        infer_type(_mod())
    assert lines(capsys) == ["a enter_pass_ctx", "a exit_pass_ctx", "b enter_pass_ctx", "b should_run",
                             "b run_before_pass", "b run_after_pass", "b exit_pass_ctx"]


def test_nested_contexts_use_only_the_innermost_instruments(capsys):
    with PassContext(instruments=[PassFine("outer")]):
        with PassContext(instruments=[PassFine("inner")]):
            infer_type(_mod())
        infer_type(_mod())
    assert lines(capsys) == [
        "outer enter_pass_ctx", "inner enter_pass_ctx",
        "inner should_run", "inner run_before_pass", "inner run_after_pass", "inner exit_pass_ctx",
        "outer should_run", "outer run_before_pass", "outer run_after_pass", "outer exit_pass_ctx",
    ]


def test_default_context_instruments_are_per_thread(capsys):
    PassContext.current().override_instruments([PassFine("main")])
    assert lines(capsys) == ["main enter_pass_ctx"]
    seen = []

    def worker():
        seen.append(PassContext.current().instruments)
        infer_type(_mod())

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == [()]
    assert lines(capsys) == []  # the other thread's passes did not reach this thread's instrument


def test_optional_on_pass_skipped_reports_why_a_pass_did_not_run():
    class Skips(PassInstrument):
        def __init__(self):
            self.skipped = []

        def should_run(self, mod, info):
            return info.name != "Vetoed"

        def on_pass_skipped(self, info, reason):
            self.skipped.append((info.name, reason))

    def p(name, level=0):
        return module_pass(lambda mod, ctx: mod, opt_level=level, name=name)

    inst = Skips()
    seq = Sequential([p("Off"), p("High", 3), p("Vetoed"), p("Runs")])
    with PassContext(disabled_pass=["Off"], instruments=[inst]):
        seq(_mod())
        p("Vetoed")(_mod())  # a direct call can only be vetoed
    assert inst.skipped == [("Off", "disabled"), ("High", "opt_level"), ("Vetoed", "should_run"),
                            ("Vetoed", "should_run")]


def test_on_pass_skipped_errors_are_hook_errors():
    class Bad(PassInstrument):
        def on_pass_skipped(self, info, reason):
            raise RuntimeError("cannot record")

    seq = Sequential([module_pass(lambda mod, ctx: mod, opt_level=5, name="High")])
    with pytest.raises(RuntimeError, match="cannot record") as err:
        with PassContext(instruments=[Bad()]):
            seq(_mod())
    assert err.value.passhost_hook == "on_pass_skipped" and failed_pass(err.value) is None
