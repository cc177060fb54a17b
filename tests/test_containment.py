"""A third-party plugin that ends the interpreter (sys.exit, a custom BaseException) in a
pass, an instrument hook, a hook function or at import is contained: it is named, the rest
keeps working, and a real Ctrl-C still stops everything (issue 18, repro/plugin_*_sys_exit.py)."""
from __future__ import annotations

import sys

import pytest

import passhost
from passhost import hookimpl, ir, transform
from passhost.cli import main
from passhost.errors import PassError
from passhost.hookspecs import PassEntry
from passhost.instrument import PassInstrument
from passhost.registry import Registry, use_registry



class Boom(BaseException):
    pass


def _mod():
    x = ir.var("x", shape=(2,))
    return ir.IRModule.from_expr(ir.Function([x], ir.exp(x)))


def _raising(exc):
    @transform.module_pass(opt_level=0, name="Quit")
    def quit_pass(mod, ctx):
        raise exc

    return quit_pass


@pytest.mark.parametrize("exc,words", [(SystemExit(0), "ended the interpreter (SystemExit(0))"),
                                       (Boom("bang"), "raised Boom, which is a BaseException")])
def test_a_pass_that_ends_the_interpreter_fails_as_a_pass(exc, words):
    p = _raising(exc)
    with pytest.raises(PassError, match=r"pass 'Quit' " + words.replace("(", r"\(").replace(")", r"\)")):
        p(_mod())
    with pytest.raises(PassError, match="Quit"):
        transform.Sequential([p])(_mod())


def test_ctrl_c_still_stops_the_run():
    with pytest.raises(KeyboardInterrupt):
        _raising(KeyboardInterrupt())(_mod())


def test_an_instrument_hook_calling_sys_exit_fails_the_run():
    class Exits(PassInstrument):
        def run_after_pass(self, mod, info):
            sys.exit(0)

    @transform.module_pass(opt_level=0, name="Fine")
    def fine(mod, ctx):
        return mod

    with transform.PassContext(instruments=[Exits()]):
        with pytest.raises(PassError, match="instrument 'Exits' in run_after_pass during pass 'Fine' ended the interpreter"):
            transform.Sequential([fine])(_mod())


class _Plugin:
    def __init__(self, entries):
        self.entries = entries

    @hookimpl
    def passhost_register_passes(self):
        return self.entries() if callable(self.entries) else self.entries


def test_cli_run_exits_1_and_leaves_the_output_alone(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the crash reproducer goes to the current directory
    reg = Registry(load_entrypoints=False)
    reg.register_plugin(_Plugin([PassEntry("Quit", lambda: _raising(SystemExit(0)))]), "quit",
                        distribution="passhost-quit", version="0.1.0")
    out = tmp_path / "out.txt"
    out.write_text("stale")
    with use_registry(reg):
        code = main(["run", "--example", "tutorial", "-p", "Quit", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and "pass 'Quit' (from passhost-quit==0.1.0) ended the interpreter" in err and "Traceback" not in err
    assert out.read_text() == "stale"


@pytest.mark.parametrize("exc", [SystemExit(3), Boom("at registration")])
def test_a_hook_function_ending_the_interpreter_is_a_broken_plugin(exc):
    def entries():
        raise exc

    reg = Registry(load_entrypoints=False)
    assert not reg.register_plugin(_Plugin(entries), "bad", distribution="bad-dist", version="1")
    [broken] = reg.broken
    assert "passhost_register_passes()" in broken.error
    assert ("SystemExit(3)" in broken.error) if isinstance(exc, SystemExit) else ("Boom" in broken.error)


def test_a_factory_ending_the_interpreter_is_a_broken_plugin():
    def factory():
        sys.exit(1)

    reg = Registry(load_entrypoints=False)
    assert not reg.register_plugin(_Plugin([PassEntry("X", factory)]), "bad", distribution="bad-dist", version="1")
    assert "factory() ended the interpreter (SystemExit(1))" in reg.broken[0].error


@pytest.fixture
def exiting_modules(fake_entry_points):
    modules = {
        "aa_exits": "import sys\nsys.exit(3)\n",
        "bb_argparse": "import argparse\nargparse.ArgumentParser(prog='x').parse_args(['--nope'])\n",
        "cc_boom": "class Boom(BaseException):\n    pass\nraise Boom('custom')\n",
        "dd_good": ("from passhost import hookimpl\nfrom passhost.hookspecs import PassEntry\n"
                    "from passhost.transform import module_pass\n\n@module_pass(opt_level=1, name='Dee')\n"
                    "def _p(mod, ctx):\n    return mod\n\n@hookimpl\ndef passhost_register_passes():\n"
                    "    yield PassEntry('Dee', lambda: _p)\n"),
    }
    fake_entry_points(modules)


def test_plugins_that_exit_at_import_are_listed_as_broken_and_the_rest_works(exiting_modules, capsys):
    reg = Registry(environ={})
    assert reg.pass_names() == ["Dee"]
    errors = {b.name: b.error for b in reg.broken}
    assert set(errors) == {"aa-exits", "bb-argparse", "cc-boom"}
    assert "SystemExit(3)" in errors["aa-exits"] and "SystemExit(2)" in errors["bb-argparse"]
    assert "Boom" in errors["cc-boom"]
    assert capsys.readouterr().err == ""  # argparse's usage went nowhere
    with use_registry(reg):
        assert main(["list"]) == 0
        out = capsys.readouterr().out
        assert "Dee" in out and "aa-exits" in out and "bb-argparse" in out
        assert passhost.passes.names() == ["Dee"]
