"""The plugin registry with in-process plugin objects (no installation needed)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

import passhost
from passhost import _catalog, hookimpl, ir
from passhost.errors import (InstrumentNotFound, OptionError, PassNotFound, PipelineError, PluginConflict,
                             PluginLoadError)
from passhost.hookspecs import ConfigEntry, InstrumentEntry, OpEntry, PassEntry
from passhost.instrument import PassInstrument
from passhost.registry import Registry, get_registry, use_registry
from passhost.transform import PassContext, Sequential, module_pass

ROOT = Path(__file__).resolve().parents[1]


def make_pass(name, opt_level=1, required=(), log=None, doc=None):
    """A module pass factory that appends its name (and options) to ``log`` when run."""

    def factory(**options):
        def body(mod, ctx):
            if log is not None:
                log.append((name, options) if options else name)
            return mod

        body.__doc__ = doc
        return module_pass(body, opt_level=opt_level, name=name, required=list(required))

    factory.__doc__ = doc
    return factory


class PassPlugin:
    """A plugin object registering the given ``PassEntry`` records."""

    def __init__(self, *entries):
        self.entries = entries

    @hookimpl
    def passhost_register_passes(self):
        # an entry may be given as a function building it, to fail inside the hook
        return [e if isinstance(e, PassEntry) else e() for e in self.entries]


class _Duck:
    """Looks like a pass (an ``info``, callable) but is not one."""

    def __init__(self):
        self.info = make_pass("Duck")().info

    def __call__(self, mod):
        return mod

    def __repr__(self):
        return "<duck>"


def registry_with(*plugins, strict=False):
    reg = Registry(load_entrypoints=False, strict=strict)
    for i, plugin in enumerate(plugins):
        reg.register_plugin(plugin, f"plugin-{i}", distribution=f"dist-{i}", version=f"{i}.0")
    return reg


# -- registration and lookup ------------------------------------------------------------
def test_pass_record_reads_opt_level_required_and_summary_from_the_pass():
    entry = PassEntry("Alpha", make_pass("Alpha", 3, ("InferType",), doc="Alpha does things.\n\nMore."))
    reg = registry_with(PassPlugin(entry))
    rec = reg.pass_record("Alpha")
    assert (rec.name, rec.opt_level, rec.required) == ("Alpha", 3, ("InferType",))
    assert (rec.distribution, rec.version, rec.summary) == ("dist-0", "0.0", "Alpha does things.")
    assert rec.source.requirement == "dist-0==0.0"
    assert reg.broken == []


def test_explicit_summary_wins_over_docstring():
    entry = PassEntry("Alpha", make_pass("Alpha", doc="doc line"), summary="the summary")
    assert registry_with(PassPlugin(entry)).pass_record("Alpha").summary == "the summary"


def test_facades_build_registered_passes_with_options():
    log = []
    reg = registry_with(PassPlugin(PassEntry("Beta", make_pass("Beta", log=log)),
                                   PassEntry("Alpha", make_pass("Alpha", log=log))))
    with use_registry(reg):
        assert passhost.passes.names() == ["Alpha", "Beta"]
        p = passhost.passes.Beta(k=1)
        assert p.info.name == "Beta"
        passhost.passes.get("Alpha")(ir.IRModule())
        p(ir.IRModule())
        info = passhost.passes.info("Alpha")
        assert (info.name, info.opt_level, info.required, info.distribution, info.version) == \
            ("Alpha", 1, (), "dist-0", "0.0")
        assert "Beta" in dir(passhost.passes)
    assert log == ["Alpha", ("Beta", {"k": 1})]


def test_options_a_factory_rejects_give_a_pipeline_error():
    def picky(**options):
        if options:
            raise ValueError("only x=2 will do")
        return make_pass("Picky")()

    reg = registry_with(PassPlugin(PassEntry("Alpha", make_pass("Alpha")), PassEntry("Picky", picky)))
    with use_registry(reg), pytest.raises(PipelineError, match=r"pass 'Picky' \(dist-0==0.0\) rejected the options "
                                                             r"\(x=1\): ValueError: only x=2 will do"):
        passhost.passes.Picky(x=1)


def test_an_option_a_factory_does_not_take_is_refused_before_it_is_called():
    calls = []

    def strict():
        calls.append(1)
        return make_pass("Strict")()

    reg = registry_with(PassPlugin(PassEntry("Strict", strict)))
    with use_registry(reg):
        calls.clear()
        with pytest.raises(OptionError, match=r"pass 'Strict' \(dist-0==0.0\) has no option 'x'; it takes no options"):
            passhost.passes.Strict(x=1)
        assert calls == []


def test_private_attribute_access_is_an_attribute_error():
    with use_registry(registry_with()):
        assert not hasattr(passhost.passes, "__wrapped__")


def test_missing_first_party_pass_names_the_distribution_to_install():
    with use_registry(registry_with()), pytest.raises(PassNotFound) as err:
        passhost.passes.FuseOps()
    assert str(err.value) == ("pass 'FuseOps' is not installed; it is provided by the distribution "
                              "'passhost-fuse-ops' (pip install passhost-fuse-ops)")


def test_missing_first_party_instrument_names_the_distribution():
    with use_registry(registry_with()), pytest.raises(InstrumentNotFound, match=r"pip install passhost-timing"):
        passhost.instruments.get("timing")


def test_unknown_name_suggests_close_matches():
    reg = registry_with(PassPlugin(PassEntry("MyFold", make_pass("MyFold"))))
    with pytest.raises(PassNotFound, match=r"unknown pass 'MyFodl'; did you mean 'MyFold'\?"):
        reg.build_pass("MyFodl")
    with pytest.raises(PassNotFound, match=r"did you mean 'MyFold'\?"):
        reg.build_pass("myfold")
    with pytest.raises(PassNotFound, match=r"unknown pass 'Zzz'; run `passhost list`"):
        reg.build_pass("Zzz")


# -- broken plugins are isolated ----------------------------------------------------------
class Raising:
    @hookimpl
    def passhost_register_passes(self):
        raise RuntimeError("boom\nsecond line")


class BadRecord:
    @hookimpl
    def passhost_register_passes(self):
        return ["FoldConstant"]


class ReturnsNone:
    @hookimpl
    def passhost_register_passes(self):
        pass


class Misspelled:
    @hookimpl
    def passhost_register_pases(self):
        return []


class NoHooks:
    def passhost_register_passes(self):  # not marked with @hookimpl
        return []


@pytest.mark.parametrize("plugin, error", [
    (Raising(), "passhost_register_passes() raised RuntimeError: boom second line"),
    (BadRecord(), "passhost_register_passes() yielded 'FoldConstant'; expected passhost.hookspecs.PassEntry records"),
    (ReturnsNone(), "passhost_register_passes() returned None; return or yield records"),
    (Misspelled(), "unknown hook 'passhost_register_pases'"),
    (NoHooks(), "defines no passhost hooks"),
    (PassPlugin(PassEntry("Named", make_pass("Other"))),
     "PassEntry 'Named': factory() builds a pass named 'Other'; the entry name must equal the pass's info.name"),
    (PassPlugin(PassEntry("Twice", make_pass("Twice")), PassEntry("Twice", make_pass("Twice"))),
     "registers pass 'Twice' twice"),
    (PassPlugin(PassEntry("NoPass", lambda: 42)), "PassEntry 'NoPass': factory() returned 42, not a passhost.transform.Pass"),
    (PassPlugin(PassEntry("Duck", lambda: _Duck())), "PassEntry 'Duck': factory() returned <duck>, not a passhost.transform.Pass"),
    (PassPlugin(lambda: PassEntry("Bad\nName", make_pass("Bad\nName"))), "name 'Bad\\nName' is not a valid name"),
    (PassPlugin(lambda: PassEntry("\x1b[31mRed", make_pass("Red"))), "is not a valid name"),
])
def test_a_broken_plugin_is_recorded_and_the_others_keep_working(plugin, error):
    good = PassPlugin(PassEntry("Good", make_pass("Good")))
    reg = registry_with(good, plugin, PassPlugin(PassEntry("Later", make_pass("Later"))))
    assert reg.pass_names() == ["Good", "Later"]
    [broken] = reg.broken
    assert (broken.name, broken.distribution, broken.version) == ("plugin-1", "dist-1", "1.0")
    assert error in broken.error
    assert "\n" not in broken.error
    assert "plugin-1" not in reg.plugins


def test_a_broken_plugin_registers_none_of_its_records():
    class HalfBroken:
        @hookimpl
        def passhost_register_passes(self):
            return [PassEntry("Fine", make_pass("Fine"))]

        @hookimpl
        def passhost_register_instruments(self):
            raise ValueError("nope")

    reg = registry_with(HalfBroken())
    assert reg.pass_names() == [] and len(reg.broken) == 1


def test_strict_mode_raises_for_a_broken_plugin():
    with pytest.raises(PluginLoadError, match=r"plugin dist-0 0.0 \(entry point 'plugin-0'\) failed to load: "
                                              r"passhost_register_passes\(\) raised RuntimeError: boom"):
        registry_with(Raising(), strict=True)


def test_record_fields_are_validated_before_conversion():
    with pytest.raises(PluginLoadError, match=r"after must be a tuple or list of pass names, got 'InferType'"):
        PassEntry("X", make_pass("X"), after="InferType")
    assert PassEntry("X", make_pass("X"), before=["A", "B"]).before == ("A", "B")
    with pytest.raises(PluginLoadError, match="factory must be callable"):
        InstrumentEntry("x", None)
    with pytest.raises(PluginLoadError, match="type must be a class"):
        ConfigEntry("a.b", "int", 0)


def test_missing_pass_of_a_broken_first_party_plugin_says_why():
    reg = Registry(load_entrypoints=False)
    reg.register_plugin(Raising(), "fold-constant", distribution="passhost-fold-constant", version="0.1.0")
    with pytest.raises(PassNotFound, match=r"pass 'FoldConstant' is not available: plugin passhost-fold-constant "
                                           r"0.1.0 \(entry point 'fold-constant'\) failed to load"):
        reg.build_pass("FoldConstant")


# -- conflicts --------------------------------------------------------------------------
def test_name_clash_names_both_distributions_and_entry_points():
    reg = registry_with(PassPlugin(PassEntry("Fold", make_pass("Fold")), PassEntry("Keep", make_pass("Keep"))),
                        PassPlugin(PassEntry("Fold", make_pass("Fold"))))
    message = ("pass 'Fold' is registered 2 times: by dist-0 0.0 (entry point 'plugin-0') and by "
               "dist-1 1.0 (entry point 'plugin-1'); uninstall (or disable with PASSHOST_DISABLE_PLUGINS) "
               "all but one of them")
    assert [c.message for c in reg.conflicts] == [message]
    with pytest.raises(PluginConflict) as err:
        reg.build_pass("Fold")
    assert str(err.value) == message
    assert reg.pass_names() == ["Keep"]
    assert reg.broken == []


def test_strict_mode_raises_on_a_name_clash():
    with pytest.raises(PluginConflict, match="pass 'Fold' is registered 2 times"):
        registry_with(PassPlugin(PassEntry("Fold", make_pass("Fold"))),
                      PassPlugin(PassEntry("Fold", make_pass("Fold"))), strict=True)


def test_registering_the_same_plugin_name_twice_is_reported():
    reg = Registry(load_entrypoints=False)
    assert reg.register_plugin(PassPlugin(PassEntry("A", make_pass("A"))), "p")
    assert not reg.register_plugin(PassPlugin(PassEntry("B", make_pass("B"))), "p")
    assert "a plugin named 'p' is already registered" in reg.broken[0].error


# -- instruments, configs, ops -------------------------------------------------------------
class Counter(PassInstrument):
    """Count passes."""

    def __init__(self, start=0):
        self.count = start

    def run_after_pass(self, mod, info):
        self.count += 1


class InstrumentPlugin:
    @hookimpl
    def passhost_register_instruments(self):
        yield InstrumentEntry("counter", Counter)


def test_instruments_register_and_build_with_options():
    reg = registry_with(InstrumentPlugin(), PassPlugin(PassEntry("A", make_pass("A"))))
    with use_registry(reg):
        assert passhost.instruments.names() == ["counter"]
        inst = passhost.instruments.get("counter", start=5)
        with PassContext(instruments=[inst]):
            passhost.passes.A()(ir.IRModule())
        assert inst.count == 6
        info = passhost.instruments.info("counter")
        assert (info.summary, info.distribution) == ("Count passes.", "dist-0")
        with pytest.raises(OptionError, match=r"instrument 'counter' \(dist-0==0.0\) has no option 'bogus'; "
                                              r"its options: start: int = 0"):
            passhost.instruments.get("counter", bogus=1)


CONFIG = ConfigEntry("test_registry.Alpha.depth", int, 3, doc="how deep")


class ConfigPlugin:
    @hookimpl
    def passhost_register_configs(self):
        return [CONFIG]


def test_configs_reach_the_pass_context():
    reg = registry_with(ConfigPlugin())
    assert [r.key for r in reg.config_records()] == [CONFIG.key]
    with PassContext(config={CONFIG.key: 7}) as ctx:
        assert ctx.config[CONFIG.key] == 7
    # registering the same records again (another registry) is fine
    assert registry_with(ConfigPlugin()).broken == []


def test_a_config_registered_with_another_type_breaks_that_plugin():
    class Clash:
        @hookimpl
        def passhost_register_configs(self):
            return [ConfigEntry(CONFIG.key, str, "x")]

    registry_with(ConfigPlugin())
    # another registry (e.g. after a reload) meets the option already in the PassContext
    reg = registry_with(Clash())
    assert "already registered with type int" in reg.broken[0].error
    # inside one registry, the same key from two plugins is a conflict
    both = registry_with(ConfigPlugin(), Clash())
    assert [(c.kind, c.name) for c in both.conflicts] == [("config", CONFIG.key)]


SQUARE = OpEntry("test_registry.square", 1, lambda types, attrs: types[0],
                 compute=lambda args, attrs: np.square(args[0]), summary="x * x")


class OpPlugin:
    @hookimpl
    def passhost_register_ops(self):
        yield SQUARE


def test_ops_register_once_and_can_be_looked_up():
    reg = registry_with(OpPlugin())
    assert reg.broken == []
    assert ir.Op.get("test_registry.square").definition is SQUARE
    assert registry_with(OpPlugin()).broken == []  # same record again: idempotent


def test_an_op_named_like_a_core_op_breaks_the_plugin():
    class Shadow:
        @hookimpl
        def passhost_register_ops(self):
            yield OpEntry("add", 2, lambda types, attrs: types[0])

    reg = registry_with(Shadow())
    assert "operator 'add' is already defined by passhost" in reg.broken[0].error
    assert ir.Op.get("add").definition is not None


def test_two_plugins_registering_one_op_name():
    reg = registry_with(OpPlugin())
    other = OpEntry("test_registry.square", 1, lambda types, attrs: types[0])

    class Other:
        @hookimpl
        def passhost_register_ops(self):
            yield other

    reg.register_plugin(Other(), "other")
    assert "operator 'test_registry.square' is already registered by dist-0 0.0" in reg.broken[0].error


# -- the transform resolver -------------------------------------------------------------
def test_required_names_resolve_through_the_current_registry():
    log = []
    reg = registry_with(PassPlugin(PassEntry("Prep", make_pass("Prep", log=log)),
                                   PassEntry("Main", make_pass("Main", required=("Prep",), log=log))))
    with use_registry(reg):
        with PassContext(opt_level=2):
            Sequential([passhost.passes.Main()])(ir.IRModule())
    assert log == ["Prep", "Main"]


def test_required_name_missing_everywhere_is_pass_not_found():
    reg = registry_with(PassPlugin(PassEntry("Main", make_pass("Main", required=("FoldConstant",)))))
    with use_registry(reg), pytest.raises(PassNotFound, match="pip install passhost-fold-constant"):
        with PassContext(opt_level=2):
            Sequential([passhost.passes.Main()])(ir.IRModule())


# -- entry points (in process: fake modules on sys.path) -------------------------------------
GOOD = """
from passhost import hookimpl
from passhost.hookspecs import PassEntry
from passhost.transform import module_pass

@module_pass(opt_level=1, name="{name}")
def _p(mod, ctx):
    return mod

@hookimpl
def passhost_register_passes():
    yield PassEntry("{name}", lambda: _p)
"""


@pytest.fixture
def fake_eps(fake_entry_points):
    modules = {
        "zz_good": GOOD.format(name="Zed"),
        "aa_good": GOOD.format(name="Ay"),
        "mm_broken": "import does_not_exist_anywhere\n",
    }
    fake_entry_points(modules)


def test_entry_points_load_one_at_a_time_in_name_order(fake_eps):
    reg = Registry(environ={})
    assert reg.pass_names() == ["Ay", "Zed"]
    assert list(reg.plugins) == ["aa-good", "zz-good"]
    [broken] = reg.broken
    assert broken.name == "mm-broken"
    assert broken.error == "ModuleNotFoundError: No module named 'does_not_exist_anywhere'"


def test_disable_plugins_env_skips_named_entry_points(fake_eps):
    reg = Registry(environ={"PASSHOST_DISABLE_PLUGINS": " zz-good , mm-broken"})
    assert reg.pass_names() == ["Ay"]
    assert reg.broken == []
    assert [s.name for s in reg.disabled] == ["mm-broken", "zz-good"]


def test_disable_autoload_env_loads_nothing(fake_eps):
    reg = Registry(environ={"PASSHOST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert (reg.pass_names(), reg.broken, reg.autoload) == ([], [], False)
    with pytest.raises(PassNotFound, match="plugin loading is disabled by PASSHOST_DISABLE_PLUGIN_AUTOLOAD"):
        reg.build_pass("FoldConstant")
    assert Registry(environ={"PASSHOST_DISABLE_PLUGIN_AUTOLOAD": "0"}).pass_names() == ["Ay", "Zed"]


def test_a_plugin_using_the_registry_at_import_time_is_broken_not_recursive(fake_entry_points):
    modules = {
        "aa_eager": "import passhost\nNAMES = passhost.passes.names()\n",
        "bb_good": GOOD.format(name="Bee"),
    }
    fake_entry_points(modules)
    with use_registry(None):
        reg = get_registry()
        assert get_registry() is reg
    assert reg.pass_names() == ["Bee"]
    [broken] = reg.broken
    assert broken.name == "aa-eager"
    assert "used the plugin registry (passhost.passes, passhost.pipeline, ...) while plugins were loading" \
        in broken.error


def test_get_registry_is_built_once_and_cached():
    assert get_registry() is get_registry()


def test_importing_passhost_loads_no_plugin(tmp_path):
    import subprocess

    code = ("import sys, passhost, passhost.registry as r; "
            "assert r._current is None, 'registry built at import'; "
            "assert 'passhost.cli' not in sys.modules; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.strip() == "ok", out.stderr


# -- the install-hint catalog -----------------------------------------------------------------
def _pyproject_facts(path: Path) -> tuple:
    text = path.read_text()
    name = re.search(r'^name\s*=\s*"([^"]+)"', text, re.M).group(1)
    section = re.search(r"^\[project\.entry-points\.passhost\]\n((?:[^\[\n].*\n?)*)", text, re.M)
    eps = re.findall(r'^([\w.-]+)\s*=', section.group(1), re.M) if section else []
    return name, eps


def test_catalog_distributions_exist_as_first_party_plugins():
    dirs = {p.parent.name: p for p in (ROOT / "plugins").glob("*/pyproject.toml")}
    for dist, pyproject in dirs.items():
        name, eps = _pyproject_facts(pyproject)
        assert name == dist, f"plugins/{dist}/pyproject.toml names the distribution {name!r}"
        assert len(eps) == 1, f"{dist} needs exactly one entry point in [project.entry-points.passhost]"
        assert "passhost-" + eps[0] == dist, f"{dist}: entry point {eps[0]!r} should be the kebab short name"
    catalog = set(_catalog.PASSES.values()) | set(_catalog.INSTRUMENTS.values()) | set(_catalog.FORMATS.values()) \
        | set(_catalog.EXECUTORS.values())
    missing = sorted(catalog - set(dirs))
    assert not missing, f"_catalog.py names distributions with no plugins/<dist>/: {missing}"
    unlisted = sorted(set(dirs) - catalog)
    assert not unlisted, f"plugins/ holds distributions _catalog.py does not list: {unlisted}"


def test_installed_first_party_names_match_the_catalog():
    reg = get_registry()
    first_party = {p.name for p in (ROOT / "plugins").iterdir()}
    for rec in reg.pass_records() + reg.instrument_records():
        if rec.distribution in first_party:
            assert _catalog.distribution_for(rec.kind, rec.name) == rec.distribution, rec.name
    for rec in reg.format_records():
        if rec.distribution in first_party:
            assert _catalog.FORMATS[rec.name] == rec.distribution, rec.name
            for suffix in rec.suffixes:
                assert _catalog.SUFFIXES[suffix] == rec.name, suffix
    for rec in reg.executor_records():
        if rec.source.distribution in first_party:
            assert _catalog.EXECUTORS[rec.name] == rec.source.distribution, rec.name


def test_every_first_party_plugin_has_a_readme_and_tests():
    for d in (ROOT / "plugins").iterdir():
        if (d / "pyproject.toml").exists():
            assert (d / "README.md").is_file(), f"{d.name} has no README.md"
            assert list((d / "tests").glob("test_*.py")), f"{d.name} has no tests/test_*.py"
