"""Tests for PassContext: defaults, the per-thread current context, nesting, config
validation and registration (TVM-NOTES §1.6)."""
from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

import pytest

from passhost.errors import ConfigError, PasshostError
from passhost.ir import Function, IRModule, TensorType, Var
from passhost.transform import (
    PassContext,
    PassContextError,
    PassInfo,
    config_options,
    lookup_config,
    module_pass,
    register_config,
    set_config_loader,
    unregister_config,
)


def _mod() -> IRModule:
    x = Var("x", TensorType((1,), "float32"))
    return IRModule({"main": Function([x], x)})


@pytest.fixture
def option():
    """Register a test option and remove it afterwards."""
    keys = []

    def make(key, typ, default, doc=""):
        keys.append(key)
        return register_config(key, typ, default, doc)

    yield make
    for key in keys:
        unregister_config(key)


# --------------------------------------------------------------------------------------
# construction and the current context
# --------------------------------------------------------------------------------------
def test_defaults():
    ctx = PassContext()
    assert ctx.opt_level == 2
    assert ctx.required_pass == () and ctx.disabled_pass == () and ctx.instruments == ()
    assert dict(ctx.config) == {}
    assert repr(ctx).startswith("Pass context information: \n\topt_level: 2\n\trequired passes: []\n")


def test_name_collections_are_validated():
    ctx = PassContext(required_pass={"B", "A"}, disabled_pass=("C",))
    assert ctx.required_pass == ("A", "B") and ctx.disabled_pass == ("C",)
    with pytest.raises(ConfigError, match="must be a list, tuple or set of pass names"):
        PassContext(disabled_pass="FoldConstant")  # not split into characters
    with pytest.raises(ConfigError, match="holds pass names"):
        PassContext(required_pass=[1])
    with pytest.raises(ConfigError, match="opt_level must be an int"):
        PassContext(opt_level="3")


def test_pass_enabled():
    ctx = PassContext(opt_level=1, required_pass=["R"], disabled_pass=["D", "R2"])
    assert ctx.pass_enabled(PassInfo(1, "A")) and not ctx.pass_enabled(PassInfo(2, "A"))
    assert ctx.pass_enabled(PassInfo(5, "R")) and not ctx.pass_enabled(PassInfo(0, "D"))


def test_current_is_a_lazily_created_per_thread_default():
    default = PassContext.current()
    assert default is PassContext.current() and default.opt_level == 2
    other = []
    t = threading.Thread(target=lambda: other.append((PassContext.current(), PassContext.current())))
    t.start()
    t.join()
    assert other[0][0] is other[0][1] and other[0][0] is not default


def test_with_pushes_and_pops():
    default = PassContext.current()
    a, b = PassContext(opt_level=3), PassContext(opt_level=1)
    with a as entered:
        assert entered is a and PassContext.current() is a
        with b:
            assert PassContext.current() is b
        assert PassContext.current() is a
    assert PassContext.current() is default


def test_exit_out_of_order_is_an_error():
    a, b = PassContext(), PassContext()
    a.__enter__()
    b.__enter__()
    with pytest.raises(PassContextError, match="not the current context"):
        a.__exit__(None, None, None)
    b.__exit__(None, None, None)
    a.__exit__(None, None, None)
    with pytest.raises(PasshostError):
        a.__exit__(None, None, None)


def test_exceptions_in_the_body_are_not_swallowed():
    with pytest.raises(KeyError):
        with PassContext():
            raise KeyError("x")


def test_entered_context_is_invisible_to_other_threads_and_tasks():
    seen = []
    with PassContext(opt_level=3) as ctx:
        t = threading.Thread(target=lambda: seen.append(PassContext.current()))
        t.start()
        t.join()
        assert seen[0] is not ctx and seen[0].opt_level == 2

        async def task():
            return PassContext.current()

        assert asyncio.run(task()) is ctx  # tasks inherit the context they are started from


def test_threads_enter_contexts_independently():
    barrier = threading.Barrier(2)
    results = {}

    def work(level):
        with PassContext(opt_level=level):
            barrier.wait()
            results[level] = PassContext.current().opt_level
            barrier.wait()

    threads = [threading.Thread(target=work, args=(lvl,)) for lvl in (0, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {0: 0, 3: 3}


def test_direct_calls_use_the_current_context():
    seen = []
    p = module_pass(lambda mod, ctx: seen.append(ctx) or mod, opt_level=0, name="P")
    with PassContext(opt_level=3) as ctx:
        p(_mod())
    p(_mod())
    assert seen == [ctx, PassContext.current()]


# --------------------------------------------------------------------------------------
# config
# --------------------------------------------------------------------------------------
def test_builtin_options_and_list_configs():
    configs = PassContext.list_configs()
    assert configs["relay.FuseOps.max_depth"]["type"] == "int"
    assert configs["relay.FuseOps.max_depth"]["default"] == 256
    assert configs["testing.immutable_module"] == {"type": "bool", "default": False,
                                                   "doc": configs["testing.immutable_module"]["doc"]}
    assert list(configs) == sorted(configs)
    assert lookup_config("relay.FuseOps.max_depth").default == 256
    assert "relay.FuseOps.max_depth" in config_options()


def test_unknown_key_lists_the_known_keys():
    with pytest.raises(ConfigError) as err:
        PassContext(config={"relay.FuseOps.max_dept": 3})
    msg = str(err.value)
    assert msg.startswith("Invalid config option 'relay.FuseOps.max_dept' candidates are: ")
    assert "relay.FuseOps.max_depth" in msg and "testing.immutable_module" in msg
    assert isinstance(err.value, AttributeError)  # as in TVM


@pytest.mark.parametrize("key, value, expected", [
    ("relay.FuseOps.max_depth", 3, 3),
    ("relay.FuseOps.max_depth", True, True),  # TVM: bools are integers
    ("testing.immutable_module", True, True),
    ("testing.immutable_module", 1, True),
    ("testing.immutable_module", 0, False),
])
def test_config_values_are_typed(key, value, expected):
    ctx = PassContext(config={key: value})
    assert ctx.config[key] == expected and type(ctx.config[key]) is type(expected)


@pytest.mark.parametrize("key, value, match", [
    ("relay.FuseOps.max_depth", 3.5, "expect config relay.FuseOps.max_depth to have type int but get float"),
    ("relay.FuseOps.max_depth", "3", "to have type int but get str"),
    ("testing.immutable_module", 2, "to have type bool but get int"),
    ("testing.immutable_module", None, "testing.immutable_module is None"),
])
def test_bad_config_values(key, value, match):
    with pytest.raises(ConfigError, match=match):
        PassContext(config={key: value})


def test_config_must_be_a_mapping_and_is_read_only():
    with pytest.raises(ConfigError, match="must be a dict"):
        PassContext(config=[("relay.FuseOps.max_depth", 3)])
    ctx = PassContext(config={"relay.FuseOps.max_depth": 3})
    with pytest.raises(TypeError):
        ctx.config["relay.FuseOps.max_depth"] = 4


def test_get_config_falls_back_to_registered_default():
    ctx = PassContext(config={"relay.FuseOps.max_depth": 8})
    assert ctx.get_config("relay.FuseOps.max_depth") == 8
    assert PassContext().get_config("relay.FuseOps.max_depth") == 256
    assert PassContext().get_config("not.registered", "fallback") == "fallback"


def test_nested_contexts_inherit_config_unless_overridden():
    outer = PassContext(config={"relay.FuseOps.max_depth": 10, "testing.immutable_module": True})
    inner = PassContext(opt_level=3, config={"relay.FuseOps.max_depth": 20})
    with outer:
        with inner:
            assert dict(PassContext.current().config) == {"relay.FuseOps.max_depth": 20,
                                                          "testing.immutable_module": True}
        with PassContext():
            assert PassContext.current().config["relay.FuseOps.max_depth"] == 10
    # after leaving, a context holds only its own options again
    assert dict(inner.config) == {"relay.FuseOps.max_depth": 20}
    with inner:
        assert dict(inner.config) == {"relay.FuseOps.max_depth": 20}


def test_inherited_immutable_option_is_enforced():
    def mutate(mod, ctx):
        mod["extra"] = mod["main"]
        return mod

    with PassContext(config={"testing.immutable_module": True}):
        with PassContext(opt_level=3):
            with pytest.raises(PasshostError, match="Immutable module has been modified in pass: mutate"):
                module_pass(mutate, opt_level=0)(_mod())


def test_register_config(option):
    opt = option("test.passhost.depth", int, 4, "a test option")
    assert (opt.key, opt.type, opt.default, opt.doc) == ("test.passhost.depth", int, 4, "a test option")
    assert PassContext(config={"test.passhost.depth": 7}).config["test.passhost.depth"] == 7
    assert PassContext.list_configs()["test.passhost.depth"]["doc"] == "a test option"
    assert register_config("test.passhost.depth", int, 4) is opt  # identical re-registration
    with pytest.raises(ConfigError, match="already registered with type int"):
        register_config("test.passhost.depth", bool, False)
    with pytest.raises(ConfigError, match="non-empty strings"):
        register_config("", int, 0)
    with pytest.raises(ConfigError, match="type must be a class"):
        register_config("test.passhost.bad", "int", 0)
    with pytest.raises(ConfigError, match="to have type int"):
        register_config("test.passhost.bad", int, "zero")
    with pytest.raises(ConfigError, match="built into passhost"):
        unregister_config("relay.FuseOps.max_depth")


def test_unregistered_option_is_rejected_again():
    register_config("test.passhost.temp", str, "a")
    unregister_config("test.passhost.temp")
    with pytest.raises(ConfigError, match="Invalid config option 'test.passhost.temp'"):
        PassContext(config={"test.passhost.temp": "b"})
    with pytest.raises(ConfigError):
        unregister_config("test.passhost.temp")


def test_float_tuple_and_structured_options(option):
    @dataclass(frozen=True)
    class Unroll:
        max_step: int = 0
        explicit: bool = False

    option("test.passhost.ratio", float, 0.5)
    option("test.passhost.layouts", tuple, ())
    option("test.passhost.unroll", Unroll, None)
    ctx = PassContext(config={"test.passhost.ratio": 1, "test.passhost.layouts": ["NHWC"],
                              "test.passhost.unroll": {"max_step": 4}})
    assert ctx.config["test.passhost.ratio"] == 1.0 and isinstance(ctx.config["test.passhost.ratio"], float)
    assert ctx.config["test.passhost.layouts"] == ("NHWC",)
    assert ctx.config["test.passhost.unroll"] == Unroll(max_step=4)
    assert PassContext(config={"test.passhost.unroll": Unroll(1)}).config["test.passhost.unroll"] == Unroll(1)
    assert ctx.get_config("test.passhost.missing", 9) == 9
    with pytest.raises(ConfigError, match="cannot build a Unroll"):
        PassContext(config={"test.passhost.unroll": {"bogus": 1}})
    with pytest.raises(ConfigError, match="to have type float but get bool"):
        PassContext(config={"test.passhost.ratio": True})


def test_config_loader_is_asked_before_rejecting_a_key():
    calls = []

    def loader():
        calls.append(1)
        register_config("test.passhost.lazy", int, 1)

    previous = set_config_loader(loader)
    try:
        assert PassContext(config={"test.passhost.lazy": 2}).config["test.passhost.lazy"] == 2
        assert calls == [1]
        PassContext(config={"test.passhost.lazy": 3})
        assert calls == [1]  # known now: no second load
    finally:
        set_config_loader(previous)
        unregister_config("test.passhost.lazy")
