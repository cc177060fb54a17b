"""Crash reproducers: a raising pass during ``passhost run`` leaves a directory that
``passhost run --reproduce DIR`` replays to the same error. End to end with a throwaway
distribution (pip --target + PYTHONPATH), plus in-process cases with the registry's
test API."""
from __future__ import annotations

import json
import os

import pytest

from passhost import hookimpl, ir
from passhost._reproducer import CrashTracker, load_reproducer, remaining_pipeline
from passhost.cli import ExitCode, main
from passhost.hookspecs import InstrumentEntry, PassEntry
from passhost.instrument import PassInstrument
from passhost.pipeline import pipeline
from passhost.registry import Registry, use_registry
from passhost.testing import make_dist, pip_install, run_passhost
from passhost.transform import PassContext, module_pass

PLUGIN = '''
"""Planted bugs for the reproducer tests."""
from passhost import hookimpl, ir
from passhost.hookspecs import PassEntry
from passhost.transform import module_pass


@module_pass(opt_level=1, name="ZzrSignFlip")
def sign_flip(mod, ctx):
    """Negate main's result."""
    out = mod.copy()
    f = mod["main"]
    out["main"] = ir.Function(f.params, ir.negative(f.body))
    return out


@module_pass(opt_level=0, name="ZzrCrash")
def crash(mod, ctx):
    """Raise when main's result is negated, naming the max_depth option."""
    if "negative" in mod["main"].astext():
        raise ValueError(f"ZzrCrash saw a negated result (max_depth={ctx.get_config('relay.FuseOps.max_depth')})")
    return mod


@hookimpl
def passhost_register_passes():
    yield PassEntry("ZzrSignFlip", lambda: sign_flip, summary="negate main's result")
    yield PassEntry("ZzrCrash", lambda: crash, summary="raises on a negated result")
'''

SRC = """#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32], %w: Tensor[(2, 3), float32]) {
  %0 = add(%x, %w);
  multiply(%0, 2f)
}
"""

ERROR = "pass 'ZzrCrash' (from passhost-zzr-planted==2.0.3) failed: ValueError: ZzrCrash saw a negated result (max_depth=8)"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    src = make_dist(tmp_path_factory.mktemp("zzr-src"), "passhost-zzr-planted", "zzr-planted", PLUGIN, version="2.0.3")
    return pip_install(tmp_path_factory.mktemp("zzr-site"), src)


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "model.txt"
    path.write_text(SRC)
    return path


def one_line(stderr: str) -> str:
    # notes (a -p pass skipped by -O) may come first; the error itself is one line
    stderr = "".join(line for line in stderr.splitlines(keepends=True) if not line.startswith("passhost: note: "))
    assert stderr.startswith("passhost: error: ") and stderr.count("\n") == 1, stderr
    assert "Traceback" not in stderr
    return stderr[len("passhost: error: "):-1]


def test_a_raising_pass_leaves_a_reproducer_that_replays_the_same_error(site, model, tmp_path):
    r = run_passhost(site, "run", str(model), "-p", "FoldConstant,ZzrSignFlip,ZzrCrash,EliminateCommonSubexpr",
                 "-O", "3", "--disable", "FuseOps", "--require", "ZzrSignFlip",
                 "--config", "relay.FuseOps.max_depth=8", "--crash-dir", "crash", "-o", "out.txt", cwd=tmp_path)
    assert r.returncode == ExitCode.PASS_FAILED and r.stdout == ""
    assert one_line(r.stderr) == (f"{ERROR} (reproducer written to crash; "
                                  "replay with: passhost run --reproduce crash)")
    assert not (tmp_path / "out.txt").exists()
    crash = tmp_path / "crash"
    assert sorted(os.listdir(crash)) == ["config.json", "module.txt", "pipeline.txt", "plugins.json"]
    # the module before the failing pass: ZzrSignFlip already ran
    module_text = (crash / "module.txt").read_text()
    assert "negative(" in module_text and module_text.startswith('#[version = "0.0.5"]')
    assert (crash / "pipeline.txt").read_text() == "ZzrCrash,EliminateCommonSubexpr\n"
    config = json.loads((crash / "config.json").read_text())
    assert config == {"opt_level": 3, "disabled": ["FuseOps"], "required": ["ZzrSignFlip"],
                      "config": {"relay.FuseOps.max_depth": 8, "passhost.verify_each": True}, "instruments": [],
                      "failed_pass": "ZzrCrash", "error": ERROR}
    plugins = json.loads((crash / "plugins.json").read_text())
    assert {"plugin": "zzr-planted", "distribution": "passhost-zzr-planted", "version": "2.0.3",
            "requirement": "passhost-zzr-planted==2.0.3"} in plugins["plugins"]
    assert plugins["passhost"]

    replay = run_passhost(site, "run", "--reproduce", "crash", cwd=tmp_path)
    assert replay.returncode == ExitCode.PASS_FAILED and replay.stdout == ""
    assert one_line(replay.stderr) == ERROR  # same error; no second reproducer
    assert sorted(p for p in os.listdir(tmp_path) if p.startswith("passhost-crash")) == []


def test_the_default_directory_is_timestamped_under_the_temp_dir(site, model, tmp_path):
    temp, cwd = tmp_path / "temp", tmp_path / "cwd"
    temp.mkdir()
    cwd.mkdir()
    r = run_passhost(site, "run", str(model), "-p", "ZzrSignFlip,ZzrCrash", "--config",
                     "relay.FuseOps.max_depth=8", cwd=cwd, TMPDIR=str(temp))
    assert r.returncode == 1
    [made] = [p for p in os.listdir(temp) if p.startswith("passhost-crash-")]
    where = str(temp / made)
    assert f"(reproducer written to {where}; replay with: passhost run --reproduce {where})" in r.stderr
    assert (temp / made / "pipeline.txt").read_text() == "ZzrCrash\n"
    assert os.listdir(cwd) == []  # never into the working directory uninvited
    # a second failure in the same second gets its own directory
    r = run_passhost(site, "run", str(model), "-p", "ZzrSignFlip,ZzrCrash", "--config",
                     "relay.FuseOps.max_depth=8", cwd=cwd, TMPDIR=str(temp))
    assert r.returncode == 1
    assert len([p for p in os.listdir(temp) if p.startswith("passhost-crash-")]) == 2


def test_no_crash_dir(site, model, tmp_path):
    r = run_passhost(site, "run", str(model), "-p", "ZzrSignFlip,ZzrCrash", "--no-crash-dir",
                 "--config", "relay.FuseOps.max_depth=8", cwd=tmp_path)
    assert r.returncode == 1 and one_line(r.stderr) == ERROR
    assert sorted(os.listdir(tmp_path)) == ["model.txt"]


@pytest.mark.parametrize("extra, message", [
    (["-p", "ZzrCrash"], "--reproduce takes the pipeline and its settings from 'crash'; drop -p"),
    (["-O", "1", "--disable", "X"], "drop -O, --disable"),
])
def test_reproduce_refuses_options_the_directory_fixes(site, model, tmp_path, extra, message):
    run_passhost(site, "run", str(model), "-p", "ZzrSignFlip,ZzrCrash", "--crash-dir", "crash", cwd=tmp_path)
    r = run_passhost(site, "run", "--reproduce", "crash", *extra, cwd=tmp_path)
    assert r.returncode == ExitCode.USAGE_ERROR and message in one_line(r.stderr)


def test_bad_reproducer_directories_exit_2(site, model, tmp_path):
    r = run_passhost(site, "run", "--reproduce", "nowhere", cwd=tmp_path)
    assert r.returncode == 2 and "--reproduce 'nowhere' is not a directory" in one_line(r.stderr)
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "module.txt").write_text(SRC)
    r = run_passhost(site, "run", "--reproduce", "half", cwd=tmp_path)
    assert r.returncode == 2 and "cannot read pipeline.txt" in one_line(r.stderr)
    (tmp_path / "half" / "pipeline.txt").write_text("ZzrCrash\n")
    (tmp_path / "half" / "config.json").write_text("{not json")
    r = run_passhost(site, "run", "--reproduce", "half", cwd=tmp_path)
    assert r.returncode == 2 and "config.json is not JSON" in one_line(r.stderr)
    (tmp_path / "half" / "config.json").write_text('{"opt_level": "three"}')
    r = run_passhost(site, "run", "--reproduce", "half", cwd=tmp_path)
    assert r.returncode == 2 and "opt_level must be an integer" in one_line(r.stderr)
    r = run_passhost(site, "run", "--reproduce", "half", str(model), cwd=tmp_path)
    assert r.returncode == 2 and "not allowed with argument" in one_line(r.stderr)
    r = run_passhost(site, "run", cwd=tmp_path)  # no INPUT: stdin, here empty
    assert r.returncode == 2 and "stdin is empty: give INPUT or --example" in one_line(r.stderr)


def test_an_existing_crash_dir_is_not_overwritten(site, model, tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("mine")
    r = run_passhost(site, "run", str(model), "-p", "ZzrSignFlip,ZzrCrash", "--crash-dir", "taken", cwd=tmp_path)
    assert r.returncode == 1
    assert "(no reproducer written: crash directory 'taken' already exists and is not empty" in one_line(r.stderr)
    assert os.listdir(tmp_path / "taken") == ["keep.txt"]


# -- in process -----------------------------------------------------------------------------------
def _negate(mod, ctx):
    out = mod.copy()
    f = mod["main"]
    out["main"] = ir.Function(f.params, ir.negative(f.body))
    return out


def _boom(mod, ctx):
    raise RuntimeError("boom")


class Exploding(PassInstrument):
    def run_before_pass(self, mod, info):
        raise RuntimeError("instrument broke")


class Plugin:
    @hookimpl
    def passhost_register_passes(self):
        yield PassEntry("Negate", lambda: module_pass(_negate, opt_level=0, name="Negate"))
        yield PassEntry("High", lambda: module_pass(lambda m, c: m, opt_level=3, name="High"))
        yield PassEntry("Boom", lambda: module_pass(_boom, opt_level=0, name="Boom"))
        yield PassEntry("NeedsBoom", lambda: module_pass(lambda m, c: m, opt_level=0, name="NeedsBoom",
                                                         required=["Boom"]))

    @hookimpl
    def passhost_register_instruments(self):
        yield InstrumentEntry("exploding", Exploding)


@pytest.fixture
def registry():
    reg = Registry(load_entrypoints=False)
    reg.register_plugin(Plugin(), "repro-test", distribution="passhost-repro-test", version="0.0.1")
    with use_registry(reg):
        yield reg


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("pipe, remaining, negated", [
    ("Negate,High,Boom,Negate", "High,Boom,Negate", True),     # a skipped element stays in (it skips again)
    ("Negate,NeedsBoom,Negate", "NeedsBoom,Negate", True),     # the required pass fails: replay its requirer
    ("Boom", "Boom", False),
])
def test_the_reproducer_starts_at_the_failing_element(capsys, registry, model, tmp_path, pipe, remaining, negated):
    code, _, err = run(capsys, "run", str(model), "-p", pipe, "--crash-dir", str(tmp_path / "c"))
    assert code == ExitCode.PASS_FAILED and "pass 'Boom' (from passhost-repro-test==0.0.1) failed: RuntimeError: boom" in err
    repro = load_reproducer(str(tmp_path / "c"))
    assert repro.pipeline == remaining
    assert ("negative(" in repro.module.astext()) is negated
    code, _, replay = run(capsys, "run", "--reproduce", str(tmp_path / "c"))
    assert code == ExitCode.PASS_FAILED and one_line(replay) == "pass 'Boom' (from passhost-repro-test==0.0.1) failed: RuntimeError: boom"


def test_instrument_failures_and_missing_passes_leave_no_reproducer(capsys, registry, model, tmp_path):
    code, _, err = run(capsys, "run", str(model), "-p", "Negate", "--instrument", "exploding",
                       "--crash-dir", str(tmp_path / "c1"))
    assert code == ExitCode.PASS_FAILED and "instrument 'Exploding' failed in run_before_pass during pass 'sequential': RuntimeError" in one_line(err)
    assert not (tmp_path / "c1").exists()


def test_tracker_follows_completed_top_level_elements():
    x = ir.var("x", shape=(2,))
    mod = ir.IRModule.from_expr(ir.Function([x], x))
    reg = Registry(load_entrypoints=False)
    reg.register_plugin(Plugin(), "repro-test")
    with use_registry(reg):
        seq = pipeline("Negate,High,Negate")
    tracker = CrashTracker(seq, mod)
    with PassContext(opt_level=2, instruments=[tracker]):
        out = seq(mod)
    assert tracker.next_index == 3 and tracker.module is out
    assert remaining_pipeline(seq, 1) == "High,Negate"
