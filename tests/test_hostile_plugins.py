"""Hostile third-party plugins, really installed next to the first-party ones (issue 18 §1).

Each distribution below misbehaves in one way Python allows: it ends the interpreter at
import, raises a custom ``BaseException``, runs ``argparse`` at import, prints to stdout,
returns a duck-typed pass, fails on its factory's second call, registers a first-party
name, closes an ordering cycle with first-party passes, has a name with an ANSI escape,
or has instruments that fail in ``enter_pass_ctx``, ``exit_pass_ctx`` or ``render``.
They are all installed together (pip ``--target``, real entry points) and the
``passhost`` command runs in a subprocess. The promises checked: every bad plugin is
named once, in one line naming its distribution; the healthy plugins (and the whole
first-party default pipeline) run as if it were not there; stdout carries only
passhost's output (``list --json`` stays JSON, ``run`` prints a module that parses);
a failing run exits 1 and leaves ``-o`` byte-identical.
"""
from __future__ import annotations

import json
import re

import pytest

import passhost
from passhost import ir
from passhost.testing import make_dist, pip_install, run_passhost

HOOKS = '''
import sys
from passhost import hookimpl
from passhost.hookspecs import InstrumentEntry, PassEntry
from passhost.instrument import PassInstrument
from passhost.transform import module_pass
'''

EVIL = {
    # dist: (entry point, module source)
    "evil-import-exit": ("evil-import-exit", "import sys\nsys.exit(0)\n"),
    "evil-import-base": ("evil-import-base", "class Boom(BaseException):\n    pass\nraise Boom('at import')\n"),
    "evil-argparse": ("evil-argparse",
                      "import argparse\nargparse.ArgumentParser(prog='evil').parse_args(['--nope'])\n"),
    "evil-printer": ("evil-printer", HOOKS + '''
print("EVIL-IMPORT")

@module_pass(opt_level=0, name="EvilPrint")
def evil_print(mod, ctx):
    print("EVIL-PASS")
    return mod

@hookimpl
def passhost_register_passes():
    print("EVIL-HOOK")
    yield PassEntry("EvilPrint", lambda: evil_print)
'''),
    "evil-quit": ("evil-quit", HOOKS + '''
@module_pass(opt_level=0, name="EvilQuit")
def evil_quit(mod, ctx):
    sys.exit(0)

@hookimpl
def passhost_register_passes():
    yield PassEntry("EvilQuit", lambda: evil_quit)
'''),
    "evil-duck": ("evil-duck", HOOKS + '''
class Duck:
    info = None
    def __call__(self, mod, ctx=None):
        return mod

@hookimpl
def passhost_register_passes():
    yield PassEntry("EvilDuck", Duck, default=True)
'''),
    "evil-flaky": ("evil-flaky", HOOKS + '''
@module_pass(opt_level=0, name="EvilFlaky")
def evil_flaky(mod, ctx):
    return mod

calls = []

def factory():
    calls.append(1)
    if len(calls) > 1:
        raise RuntimeError("the second call fails")
    return evil_flaky

@hookimpl
def passhost_register_passes():
    yield PassEntry("EvilFlaky", factory, default=True)
'''),
    "evil-clash": ("evil-clash", HOOKS + '''
@module_pass(opt_level=0, name="FoldConstant")
def fake_fold(mod, ctx):
    raise RuntimeError("the impostor ran")

@hookimpl
def passhost_register_passes():
    yield PassEntry("FoldConstant", lambda: fake_fold, default=True)
'''),
    "evil-cycle": ("evil-cycle", HOOKS + '''
@module_pass(opt_level=0, name="EvilCycle")
def evil_cycle(mod, ctx):
    raise RuntimeError("the cycle member ran")

@hookimpl
def passhost_register_passes():
    yield PassEntry("EvilCycle", lambda: evil_cycle, default=True, after=("FuseOps",), before=("FoldConstant",))
'''),
    "evil-name": ("evil-name", HOOKS + '''
@module_pass(opt_level=0, name="Evil\\x1b[31mRed")
def evil_red(mod, ctx):
    return mod

@hookimpl
def passhost_register_passes():
    yield PassEntry("Evil\\x1b[31mRed", lambda: evil_red)
'''),
    "evil-instruments": ("evil-instruments", HOOKS + '''
class Enter(PassInstrument):
    def enter_pass_ctx(self):
        raise RuntimeError("cannot enter")

class ExitCtx(PassInstrument):
    def exit_pass_ctx(self):
        sys.exit(4)

class Render(PassInstrument):
    def render(self):
        return 42

@hookimpl
def passhost_register_instruments():
    yield InstrumentEntry("evil-enter", Enter)
    yield InstrumentEntry("evil-exit-ctx", ExitCtx)
    yield InstrumentEntry("evil-render", Render)
'''),
    "evil-future-api": ("evil-future-api", HOOKS + '''
PASSHOST_API = ">=2.0,<3"

@module_pass(opt_level=0, name="FuturePass")
def future(mod, ctx):
    return mod

@hookimpl
def passhost_register_passes():
    yield PassEntry("FuturePass", lambda: future, default=True)
'''),
}
#: plugins that fail to load (listed as broken)
BROKEN = {"evil-import-exit", "evil-import-base", "evil-argparse", "evil-duck", "evil-name", "evil-future-api"}
#: default-pipeline members left out with a warning
LEFT_OUT = {"evil-flaky", "evil-cycle"}

MODULE = '''#[version = "0.0.5"]
def @main(%x: Tensor[(2, 2), float32]) {
  %0 = add(1f, 2f);
  %1 = multiply(%x, %0);
  %2 = multiply(%x, %0);
  add(%1, %2)
}
'''


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    src = tmp_path_factory.mktemp("evil_src")
    target = tmp_path_factory.mktemp("evil_site")
    pip_install(target, *(make_dist(src, dist, ep, source, version="6.6.6") for dist, (ep, source) in EVIL.items()))
    (target / "m.txt").write_text(MODULE)
    return target


@pytest.fixture(scope="module")
def clean_output(site):
    """What ``run -O3`` gives with none of the hostile plugins loaded."""
    all_evil = ",".join(ep for ep, _ in EVIL.values())
    r = run_passhost(site, "run", "m.txt", "-O3", PASSHOST_DISABLE_PLUGINS=all_evil)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    return r.stdout


def _lines_naming(stderr: str, dist: str) -> list:
    return [line for line in stderr.splitlines() if dist in line]


def test_list_json_stays_json_and_names_every_bad_plugin(site):
    r = run_passhost(site, "list", "--json")
    assert r.returncode == 0
    doc = json.loads(r.stdout)  # the plugin that prints at import did not corrupt it
    broken = {b["distribution"]: b["error"] for b in doc["broken"]}
    assert set(broken) == BROKEN
    assert "SystemExit(0)" in broken["evil-import-exit"] and "Boom" in broken["evil-import-base"]
    assert "SystemExit(2)" in broken["evil-argparse"]
    assert "not a passhost.transform.Pass" in broken["evil-duck"]
    assert "name" in broken["evil-name"]
    assert broken["evil-future-api"] == (
        f"it supports passhost API >=2.0,<3, and this passhost ({passhost.__version__}) provides API "
        f"{passhost.API_VERSION}; install a release of the plugin made for API 1.x, or a passhost it supports")
    assert "FuturePass" not in {p["name"] for p in doc["passes"]}
    [clash] = doc["conflicts"]
    assert clash["name"] == "FoldConstant" and clash["kept"]["distribution"] == "passhost-fold-constant"
    assert [s["distribution"] for s in clash["excluded"]] == ["evil-clash"]
    [fold] = [p for p in doc["passes"] if p["name"] == "FoldConstant"]
    assert fold["distribution"] == "passhost-fold-constant"  # the first-party pass keeps its name
    assert "EVIL-IMPORT" in r.stderr and "EVIL-HOOK" in r.stderr and "EVIL" not in r.stdout


def test_list_table_escapes_control_characters(site):
    r = run_passhost(site, "list")
    assert r.returncode == 0
    assert "\x1b" not in r.stdout and "\\x1b" in r.stdout
    assert "conflicts:" in r.stdout and "evil-clash 6.6.6" in r.stdout


def test_the_default_pipeline_runs_as_if_the_hostile_plugins_were_absent(site, clean_output):
    (site / "out.txt").write_text("old")
    r = run_passhost(site, "run", "m.txt", "-O3", "-o", "out.txt")
    assert r.returncode == 0, r.stderr
    assert (site / "out.txt").read_text() == clean_output
    assert r.stdout == ""
    for dist in BROKEN | LEFT_OUT | {"evil-clash"}:
        lines = _lines_naming(r.stderr, dist)
        assert len(lines) == 1, (dist, r.stderr)
        assert lines[0].startswith("passhost: warning: ")
    assert "left out of the default pipeline" in _lines_naming(r.stderr, "evil-flaky")[0]
    assert "second call fails" in _lines_naming(r.stderr, "evil-flaky")[0]
    assert "ordering cycle" in _lines_naming(r.stderr, "evil-cycle")[0]
    assert "belongs to passhost-fold-constant" in _lines_naming(r.stderr, "evil-clash")[0]
    others = [line for line in r.stderr.splitlines() if not line.startswith("passhost: warning: ")]
    assert others == ["EVIL-IMPORT", "EVIL-HOOK"]  # what the plugin printed, on stderr


def test_a_pass_that_prints_cannot_corrupt_the_printed_module(site, clean_output):
    r = run_passhost(site, "run", "m.txt", "-p", "EvilPrint")
    assert r.returncode == 0, r.stderr
    assert "EVIL" not in r.stdout and "EVIL-PASS" in r.stderr
    ir.parse(r.stdout)


def test_a_pass_ending_the_interpreter_fails_the_run_and_leaves_the_output(site):
    (site / "kept.txt").write_bytes(b"stale but intact\n")
    r = run_passhost(site, "run", "m.txt", "-p", "EvilQuit", "-o", "kept.txt", "--crash-dir", "crash")
    assert r.returncode == 1
    assert (site / "kept.txt").read_bytes() == b"stale but intact\n"
    [error] = [line for line in r.stderr.splitlines() if line.startswith("passhost: error:")]
    assert error.startswith("passhost: error: pass 'EvilQuit' (from evil-quit==6.6.6) ended the interpreter")
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("name,hook,words", [
    ("evil-enter", "enter_pass_ctx", "RuntimeError: cannot enter"),
    ("evil-exit-ctx", "exit_pass_ctx", "ended the interpreter (SystemExit(4))"),
    ("evil-render", "render", "it returned int, not a str"),
])
def test_an_instrument_failure_names_the_instrument_and_its_distribution(site, name, hook, words):
    (site / "kept.txt").write_bytes(b"intact\n")
    r = run_passhost(site, "run", "m.txt", "--instrument", name, "-o", "kept.txt", "--crash-dir", "crash")
    assert r.returncode == 1, r.stderr
    assert (site / "kept.txt").read_bytes() == b"intact\n"
    [error] = [line for line in r.stderr.splitlines() if line.startswith("passhost: error:")]
    assert re.match(r"passhost: error: instrument '\w+' \(evil-instruments\)", error), error
    assert f"in {hook}" in error and words in error
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr
