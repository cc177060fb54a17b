"""The passhost command, in process (``main(argv)``) with test-local plugins."""
from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys

import numpy as np
import pytest

from passhost import hookimpl, ir
from passhost.cli import ExitCode, main
from passhost.hookspecs import ConfigEntry, InstrumentEntry, PassEntry
from passhost.instrument import PassInstrument
from passhost.registry import Registry, use_registry
from passhost.transform import module_pass

LOG: list = []


def _factory(name, opt_level=1, fail=False, rewrite=None):
    def factory(**options):
        def body(mod, ctx):
            LOG.append((name, dict(options), ctx.opt_level))
            if fail:
                raise ValueError(f"{name} cannot handle this\nsecond line")
            return rewrite(mod) if rewrite else mod

        return module_pass(body, opt_level=opt_level, name=name)

    factory.__doc__ = f"{name}: a test pass.\n\nLonger description of {name}."
    return factory


def _negate_main(mod):
    out = mod.copy()
    f = mod["main"]
    out["main"] = ir.Function(f.params, ir.negative(f.body))
    return out


class Counter(PassInstrument):
    """Count pass runs."""

    def __init__(self, start=0):
        self.count = start

    def run_after_pass(self, mod, info):
        self.count += 1

    def render(self):
        return f"counted {self.count}"


class Exploding(PassInstrument):
    def run_before_pass(self, mod, info):
        raise RuntimeError("instrument broke")


class Plugin:
    @hookimpl
    def passhost_register_passes(self):
        yield PassEntry("Negate", _factory("Negate", 1, rewrite=_negate_main), default=True)
        yield PassEntry("Late", _factory("Late", 3), default=True, after=("Negate",))
        yield PassEntry("Fails", _factory("Fails", 0, fail=True))
        yield PassEntry("Noop", _factory("Noop", 0), summary="does nothing")
        yield PassEntry("NeedsFold", lambda: module_pass(lambda mod, ctx: mod, opt_level=0, name="NeedsFold",
                                                         required=["FoldConstant"]))

    @hookimpl
    def passhost_register_instruments(self):
        yield InstrumentEntry("counter", Counter)
        yield InstrumentEntry("exploding", Exploding, summary="raises")

    @hookimpl
    def passhost_register_configs(self):
        yield ConfigEntry("test_cli.Negate.flag", bool, False, doc="a flag")


class Broken:
    @hookimpl
    def passhost_register_passes(self):
        raise ImportError("missing dependency")


SRC = """#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32], %w: Tensor[(2, 3), float32]) {
  add(%x, %w)
}
"""


@pytest.fixture(autouse=True)
def in_tmp_dir(tmp_path_factory, monkeypatch):
    """Crash reproducers land in the working directory: keep them out of the checkout
    (and out of each test's own tmp_path, whose contents some tests check)."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


@pytest.fixture(autouse=True)
def registry():
    LOG.clear()
    reg = Registry(load_entrypoints=False)
    reg.register_plugin(Plugin(), "test-plugin", distribution="passhost-test-plugin", version="0.3.0")
    with use_registry(reg):
        yield reg


@pytest.fixture
def src(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text(SRC)
    return str(path)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(err, *parts):
    assert err.startswith("passhost: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for part in parts:
        assert part in err


# -- stdin as the default input ---------------------------------------------------------------
class _Stdin:
    def __init__(self, text, tty=False):
        self.text, self.tty, self.closed = text, tty, False

    def isatty(self):
        return self.tty

    def read(self):
        return self.text


def test_without_input_the_module_comes_from_stdin(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", _Stdin(SRC))
    code, out, err = run(capsys, "run", "-p", "Noop")
    assert code == ExitCode.OK, err
    assert out.startswith('#[version = "0.0.5"]') and "add(%x, %w)" in out


def test_without_input_on_a_terminal_or_with_empty_stdin_it_says_what_to_give(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", _Stdin("", tty=True))
    code, _, err = run(capsys, "run")
    assert code == 2 and "one of the arguments INPUT --example is required" in err and "pipe a module" in err
    monkeypatch.setattr(sys, "stdin", _Stdin("  \n"))
    code, _, err = run(capsys, "run")
    assert code == 2 and "stdin is empty: give INPUT or --example" in err


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_terminal_gets_the_program_without_constant_data(capsys, monkeypatch):
    term = _Terminal()
    monkeypatch.setattr(sys, "stdout", term)
    assert main(["run", "--example", "tutorial", "-p", "Noop"]) == 0
    text = term.getvalue()
    assert "meta[relay.Constant][0]" in text and "#[metadata]" not in text and len(text) < 5_000
    assert "constant data elided on a terminal" in capsys.readouterr().err
    term = _Terminal()
    monkeypatch.setattr(sys, "stdout", term)
    assert main(["run", "--example", "tutorial", "-p", "Noop", "--meta-data"]) == 0
    assert "#[metadata]" in term.getvalue() and len(term.getvalue()) > 900_000


def test_a_pipe_gets_the_constant_data(capsys):
    code, out, err = run(capsys, "run", "--example", "tutorial", "-p", "Noop")
    assert code == 0 and "#[metadata]" in out and "elided" not in err


def test_summary_shows_what_each_pass_did(capsys):
    code, _, err = run(capsys, "run", "--example", "tutorial", "-p", "Noop,Late", "-O", "2", "--summary")
    assert code == 0
    lines = err.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("passhost: sequential at -O2: "))
    assert lines[head].endswith(" ms") and "operator calls" in lines[head]
    assert lines[head + 1].split() == ["pass", "ops", "time"]
    assert lines[head + 2].split()[:4] == ["Noop", "7", "->", "7"]
    assert lines[head + 3].split() == ["Late", "skipped", "(opt_level", "3", ">", "-O2)"]


def test_no_summary_in_a_pipe_unless_asked(capsys):
    code, _, err = run(capsys, "run", "--example", "tutorial", "-p", "Noop")
    assert code == 0 and "operator calls" not in err


# -- list / info ----------------------------------------------------------------------------
def test_list_configs_shows_host_and_plugin_keys(capsys):
    code, out, err = run(capsys, "list", "--configs")
    assert code == ExitCode.OK and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["KEY", "TYPE", "DEFAULT", "FROM", "DOC"]
    depth = next(line for line in lines if line.startswith("relay.FuseOps.max_depth"))
    assert depth.split()[:5] == ["relay.FuseOps.max_depth", "int", "256", "passhost", "(host)"]
    assert any(line.startswith("passhost.verify_each") for line in lines)
    code, out, _ = run(capsys, "list", "--configs", "--json")
    keys = {c["key"]: c for c in json.loads(out)["configs"]}
    assert keys["testing.immutable_module"]["type"] == "bool" and keys["passhost.verify_each"]["default"] == "False"


def test_list_marks_default_pipeline_passes(capsys, monkeypatch):
    from passhost.registry import get_registry

    reg = get_registry()
    code, out, _ = run(capsys, "list")
    for r in reg.pass_records():
        line = next(line for line in out.splitlines() if line.startswith(r.name + " "))
        assert line.split()[4] == ("yes" if r.entry.default else "-")


def test_list_shows_passes_instruments_and_broken_plugins(capsys, registry):
    registry.register_plugin(Broken(), "broken-one", distribution="passhost-broken", version="9.9")
    code, out, err = run(capsys, "list")
    assert code == ExitCode.OK and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "KIND", "OPT", "REQUIRED", "DEFAULT", "DISTRIBUTION", "SUMMARY"]
    noop = next(line for line in lines if line.startswith("Noop"))
    assert noop.split() == ["Noop", "pass", "0", "-", "-", "passhost-test-plugin==0.3.0", "does", "nothing"]
    assert any(line.split()[:2] == ["counter", "instrument"] for line in lines)
    assert "broken plugins:" in lines
    assert ("  plugin passhost-broken 9.9 (entry point 'broken-one') failed to load: "
            "passhost_register_passes() raised ImportError: missing dependency") in lines


def test_list_json(capsys, registry):
    registry.register_plugin(Broken(), "broken-one", distribution="passhost-broken", version="9.9")
    code, out, _ = run(capsys, "list", "--json")
    doc = json.loads(out)
    assert code == ExitCode.OK
    assert [p["name"] for p in doc["passes"]] == ["Fails", "Late", "NeedsFold", "Negate", "Noop"]
    late = doc["passes"][1]
    assert {k: late[k] for k in ("kind", "opt_level", "required", "distribution", "version", "plugin")} == {
        "kind": "pass", "opt_level": 3, "required": [], "distribution": "passhost-test-plugin",
        "version": "0.3.0", "plugin": "test-plugin"}
    assert late["summary"] == "Late: a test pass."
    assert [i["name"] for i in doc["instruments"]] == ["counter", "exploding"]
    assert doc["broken"][0]["plugin"] == "broken-one"
    assert "ImportError: missing dependency" in doc["broken"][0]["error"]
    assert doc["configs"][0]["key"] == "test_cli.Negate.flag"


def test_strict_plugins_turns_a_broken_plugin_into_an_error(capsys, registry):
    registry.register_plugin(Broken(), "broken-one", distribution="passhost-broken", version="9.9")
    code, out, err = run(capsys, "--strict-plugins", "list")
    assert code == ExitCode.USAGE_ERROR and out == ""
    assert_one_line_error(err, "plugin passhost-broken 9.9 (entry point 'broken-one') failed to load")


def test_info_describes_a_pass_and_an_instrument(capsys):
    code, out, _ = run(capsys, "info", "Late")
    assert code == ExitCode.OK
    assert "opt_level:        3" in out and "after:            Negate" in out
    assert "distribution:     passhost-test-plugin==0.3.0" in out
    assert "Longer description of Late." in out
    code, out, _ = run(capsys, "info", "NeedsFold")  # lambda factory: the pass function's doc is shown
    assert code == ExitCode.OK and "required:         FoldConstant" in out
    code, out, _ = run(capsys, "info", "counter")
    assert code == ExitCode.OK and "kind:             instrument" in out


def test_info_of_a_missing_name(capsys):
    code, out, err = run(capsys, "info", "FuseOps")
    assert code == ExitCode.USAGE_ERROR and out == ""
    assert_one_line_error(err, "pip install passhost-fuse-ops")
    code, _, err = run(capsys, "info", "Noopp")
    assert_one_line_error(err, "did you mean 'Noop'?")


# -- run ---------------------------------------------------------------------------------
def test_run_default_pipeline_gates_by_opt_level(capsys, src):
    code, out, err = run(capsys, "run", src)
    assert code == ExitCode.OK, err
    assert [name for name, _, _ in LOG] == ["Negate"]
    assert out.startswith('#[version = "0.0.5"]\n')
    assert "negative(%0)" in out
    LOG.clear()
    assert run(capsys, "run", src, "-O3")[0] == ExitCode.OK
    assert [(name, level) for name, _, level in LOG] == [("Negate", 3), ("Late", 3)]


def test_run_disable_and_require(capsys, src):
    assert run(capsys, "run", src, "--disable", "Negate", "--require", "Late")[0] == ExitCode.OK
    assert [name for name, _, _ in LOG] == ["Late"]


def test_run_explicit_pipeline_with_options(capsys, src):
    code, out, _ = run(capsys, "run", src, "-p", "Noop(k=(1, 'a,b')),Negate")
    assert code == ExitCode.OK
    assert LOG[0][:2] == ("Noop", {"k": (1, "a,b")})


def test_print_pipeline(capsys, src):
    code, out, _ = run(capsys, "run", src, "-O3", "--print-pipeline")
    assert (code, out, LOG) == (ExitCode.OK, "Negate,Late\n", [])
    code, out, _ = run(capsys, "run", src, "-p", "Noop( k = 1 )", "--print-pipeline")
    assert out == "Noop(k=1)\n"


def test_run_the_tutorial_example(capsys):
    code, out, _ = run(capsys, "run", "--example", "tutorial", "-p", "Noop")
    assert code == ExitCode.OK
    assert "nn.conv2d(%x, %weight" in out and "#[metadata]" in out
    code, out, _ = run(capsys, "run", "--example", "tutorial", "-p", "Noop", "--no-meta-data")
    assert "#[metadata]" not in out


def test_output_round_trips_through_the_parser(capsys, tmp_path):
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    assert run(capsys, "run", "--example", "tutorial", "-p", "Noop", "-o", str(first))[0] == ExitCode.OK
    assert run(capsys, "run", str(first), "-p", "Noop", "-o", str(second))[0] == ExitCode.OK
    code, third, _ = run(capsys, "run", str(second), "-p", "Noop")
    assert code == ExitCode.OK and third == second.read_text()
    assert ir.structural_equal(ir.parse(first.read_text()), ir.parse(third))


def test_a_failing_pass_exits_1_naming_it_and_keeps_the_output_file(capsys, src, tmp_path):
    out_path = tmp_path / "result.txt"
    out_path.write_text("precious")
    code, out, err = run(capsys, "run", src, "-p", "Negate,Fails", "-o", str(out_path))
    assert code == ExitCode.PASS_FAILED and out == ""
    assert_one_line_error(err, "pass 'Fails' (from passhost-test-plugin==0.3.0) failed: ValueError: Fails cannot handle this second line")
    assert out_path.read_text() == "precious"
    assert sorted(os.listdir(tmp_path)) == ["in.txt", "result.txt"]


def test_output_is_written_atomically_keeping_the_mode(capsys, src, tmp_path):
    out_path = tmp_path / "result.txt"
    out_path.write_text("old")
    out_path.chmod(0o640)
    assert run(capsys, "run", src, "-p", "Negate", "-o", str(out_path))[0] == ExitCode.OK
    assert "negative(%0)" in out_path.read_text()
    assert stat.S_IMODE(out_path.stat().st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["in.txt", "result.txt"]


def test_unwritable_output_is_a_usage_error(capsys, src, tmp_path):
    code, _, err = run(capsys, "run", src, "-p", "Noop", "-o", str(tmp_path / "missing-dir" / "out.txt"))
    assert code == ExitCode.USAGE_ERROR
    assert_one_line_error(err, "cannot write")


def test_parse_errors_exit_2_with_file_line_and_column(capsys, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text('#[version = "0.0.5"]\ndef @main(%x) {\n  add(%x, \n}\n')
    code, out, err = run(capsys, "run", str(bad), "-p", "Noop")
    assert code == ExitCode.USAGE_ERROR and out == ""
    assert_one_line_error(err, f"{bad}:")


def test_missing_input_file(capsys, tmp_path):
    code, _, err = run(capsys, "run", str(tmp_path / "nope.txt"), "-p", "Noop")
    assert code == ExitCode.USAGE_ERROR
    assert_one_line_error(err, "cannot read INPUT", "No such file or directory")


def test_missing_pass_names_its_distribution(capsys, src):
    code, _, err = run(capsys, "run", src, "-p", "FoldConstant")
    assert code == ExitCode.USAGE_ERROR
    assert_one_line_error(err, "'passhost-fold-constant' (pip install passhost-fold-constant)")


def test_a_required_pass_that_is_not_installed_exits_2(capsys, src):
    code, _, err = run(capsys, "run", src, "-p", "NeedsFold")
    assert code == ExitCode.USAGE_ERROR
    assert_one_line_error(err, "pip install passhost-fold-constant", "(required by pass 'NeedsFold')")


def test_params_are_bound_by_name(capsys, src, tmp_path):
    npz = tmp_path / "params.npz"
    np.savez(npz, w=np.ones((2, 3), "float32"))
    code, out, _ = run(capsys, "run", src, "-p", "Noop", "--params", str(npz))
    assert code == ExitCode.OK
    header = out.splitlines()[1]
    assert header.startswith("def @main(%x: ") and "%w" not in header
    assert "add(%x, meta[relay.Constant][0]" in out


def test_bad_params(capsys, src, tmp_path):
    npz = tmp_path / "params.npz"
    np.savez(npz, nope=np.ones((2, 3), "float32"))
    code, _, err = run(capsys, "run", src, "-p", "Noop", "--params", str(npz))
    assert code == ExitCode.USAGE_ERROR
    assert_one_line_error(err, "@main has no parameter named nope")
    pickled = tmp_path / "obj.npz"
    np.savez(pickled, w=np.array([{"a": 1}], dtype=object))
    code, _, err = run(capsys, "run", src, "-p", "Noop", "--params", str(pickled))
    assert code == ExitCode.USAGE_ERROR
    assert_one_line_error(err, "cannot read --params")
    single = tmp_path / "single.npy"
    np.save(single, np.ones((2, 3), "float32"))
    code, _, err = run(capsys, "run", src, "-p", "Noop", "--params", str(single))
    assert code == ExitCode.USAGE_ERROR
    assert_one_line_error(err, "holds a single array; save named arrays with np.savez")
    garbage = tmp_path / "garbage.npz"
    garbage.write_text("not a zip")
    code, _, err = run(capsys, "run", src, "-p", "Noop", "--params", str(garbage))
    assert code == ExitCode.USAGE_ERROR
    assert_one_line_error(err, "cannot read --params")


def test_config_values(capsys, src):
    assert run(capsys, "run", src, "-p", "Noop", "--config", "test_cli.Negate.flag=True")[0] == ExitCode.OK
    code, _, err = run(capsys, "run", src, "-p", "Noop", "--config", "no.such.key=1")
    assert code == ExitCode.USAGE_ERROR
    assert_one_line_error(err, "Invalid config option 'no.such.key'", "test_cli.Negate.flag")
    code, _, err = run(capsys, "run", src, "-p", "Noop", "--config", "novalue")
    assert_one_line_error(err, "--config needs KEY=VALUE")


def test_instruments_with_options_and_render(capsys, src):
    code, out, err = run(capsys, "run", src, "-p", "Noop,Negate", "--instrument", "counter(start=10)")
    assert code == ExitCode.OK
    assert err.strip() == "counted 13"  # Noop, Negate and the Sequential around them


def test_a_failing_instrument_exits_1(capsys, src):
    code, _, err = run(capsys, "run", src, "-p", "Noop", "--instrument", "exploding")
    assert code == ExitCode.PASS_FAILED
    assert_one_line_error(err, "instrument broke")


def test_unknown_instrument(capsys, src):
    code, _, err = run(capsys, "run", src, "-p", "Noop", "--instrument", "timing")
    assert code == ExitCode.USAGE_ERROR
    assert_one_line_error(err, "pip install passhost-timing")


@pytest.mark.parametrize("argv, part", [
    ([], "choose a command"),
    (["run", "x", "--example", "tutorial"], "not allowed with argument"),
    (["run", "--example", "mnist"], "invalid choice: 'mnist'"),
    (["run", "x", "-O", "three"], "expected an integer from 0 to 4, got 'three'"),
    (["run", "x", "-p", "A(("], "bad pipeline"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["run", "x", "--instrument", "timing(unit="], "--instrument 'timing(unit=': bad pipeline"),
])
def test_usage_errors_are_one_line(capsys, argv, part):
    code, out, err = run(capsys, *argv)
    assert code == ExitCode.USAGE_ERROR and out == ""
    assert_one_line_error(err, part)


def test_python_dash_m_passhost(tmp_path):
    env = dict(os.environ, PASSHOST_DISABLE_PLUGIN_AUTOLOAD="1")
    result = subprocess.run([sys.executable, "-m", "passhost", "run", "--example", "tutorial", "-p", "Nope"],
                            capture_output=True, text=True, env=env, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == ("passhost: error: unknown pass 'Nope'; run `passhost list` to see the "
                             "installed ones\n")
    result = subprocess.run([sys.executable, "-m", "passhost", "--help"], capture_output=True, text=True,
                            env=env, cwd=tmp_path)
    assert result.returncode == 0 and "list" in result.stdout and "run" in result.stdout


def test_the_bisect_and_reproducer_libraries_do_not_import_the_cli():
    # the library functions take plain arguments; the command-line side lives in passhost.cli
    import subprocess
    import sys

    code = ("import sys, passhost._bisect, passhost._reproducer; "
            "sys.exit(1 if any(m == 'passhost.cli' or m.startswith('passhost.cli.') for m in sys.modules) else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_output_dash_is_stdout_and_creates_no_file(tmp_path, monkeypatch, capsys):
    from passhost.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["run", "--example", "tutorial", "-O3", "-o", "-", "--no-meta-data"]) == 0
    assert capsys.readouterr().out.startswith('#[version = "0.0.5"]')
    assert list(tmp_path.iterdir()) == []


def test_output_to_dev_null_keeps_the_device(capsys):
    import stat

    from passhost.cli import main

    assert main(["run", "--example", "tutorial", "-O3", "-o", os.devnull]) == 0
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)



class _TerminalErr(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("no_color,coloured", [(None, True), ("1", False)])
def test_labels_are_coloured_only_on_a_terminal_without_no_color(monkeypatch, no_color, coloured):
    err = _TerminalErr()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.delenv("TERM", raising=False)
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    assert main(["run", "--example", "nope"]) == 2
    text = err.getvalue()
    assert ("\x1b[1;31mpasshost: error:\x1b[0m" in text) is coloured
    assert ("\x1b" in text) is coloured
    assert sys.stderr is err  # restored


def test_no_colour_in_a_pipe(capsys):
    code, _, err = run(capsys, "run", "--example", "nope")
    assert code == 2 and "\x1b" not in err
