"""``passhost bisect``: a planted sign-flipping pass, installed as a real throwaway
distribution (pip --target + PYTHONPATH), is found by the command in a subprocess."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from passhost import ir
from passhost._bisect import compare_results, flatten
from passhost.testing import make_dist, pip_install, run_passhost
from passhost.transform import PassContext, Sequential, module_pass

PLUGIN = '''
"""A throwaway plugin with planted bugs for the debugging-tool tests."""
from passhost import hookimpl, ir
from passhost.hookspecs import PassEntry
from passhost.transform import Sequential, module_pass


@module_pass(opt_level=1, name="ZzSignFlip")
def sign_flip(mod, ctx):
    """Negate main's result (a planted miscompile)."""
    out = mod.copy()
    f = mod["main"]
    out["main"] = ir.Function(f.params, ir.negative(f.body))
    return out


@module_pass(opt_level=0, name="ZzCrash")
def crash(mod, ctx):
    """Always raise."""
    raise ValueError("ZzCrash cannot handle this module")


@module_pass(opt_level=0, name="ZzKeep")
def keep(mod, ctx):
    """Return the module unchanged."""
    return mod


def group():
    return Sequential([keep, sign_flip], opt_level=0, name="ZzGroup")


@hookimpl
def passhost_register_passes():
    yield PassEntry("ZzSignFlip", lambda: sign_flip, summary="negate main's result")
    yield PassEntry("ZzCrash", lambda: crash, summary="always raises")
    yield PassEntry("ZzGroup", group, summary="ZzKeep then ZzSignFlip")
'''

SRC = """#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32], %w: Tensor[(2, 3), float32]) {
  %0 = add(%x, %w);
  %1 = add(%0, 1f);
  multiply(%1, 2f)
}
"""


def install_planted(tmp_path_factory) -> Path:
    src = make_dist(tmp_path_factory.mktemp("planted-src"), "passhost-zz-planted", "zz-planted", PLUGIN, version="0.7.1")
    return pip_install(tmp_path_factory.mktemp("planted-site"), src)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return install_planted(tmp_path_factory)


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "model.txt"
    path.write_text(SRC)
    return path


def test_bisect_names_the_planted_pass_and_writes_its_before_and_after(site, model, tmp_path):
    r = run_passhost(site, "bisect", str(model), "-p", "InferType,FoldConstant,ZzSignFlip,EliminateCommonSubexpr",
                 "-o", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    lines = r.stdout.splitlines()
    assert lines[0] == "passes: #1 InferType, #2 FoldConstant, #3 ZzSignFlip, #4 EliminateCommonSubexpr"
    [verdict] = [line for line in lines if line.startswith("first bad pass:")]
    assert verdict.startswith("first bad pass: #3 ZzSignFlip: output: max abs error ")
    assert "max rel error 2 " in verdict  # -y vs y
    before = ir.parse((tmp_path / "out" / "before.txt").read_text())
    after = ir.parse((tmp_path / "out" / "after.txt").read_text())
    assert "negative" not in before.astext() and "negative(" in after.astext()
    x = np.ones((2, 3), "float32")
    np.testing.assert_allclose(ir.evaluate(after, x, x), -ir.evaluate(before, x, x))
    assert sorted(os.listdir(tmp_path / "out")) == ["after.txt", "before.txt"]


def test_a_pass_inside_a_nested_sequential_is_named_with_its_group(site, model, tmp_path):
    r = run_passhost(site, "bisect", str(model), "-p", "FoldConstant,ZzGroup,EliminateCommonSubexpr",
                 "-o", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == ("passes: #1 FoldConstant, #2 ZzKeep (in ZzGroup), "
                                        "#3 ZzSignFlip (in ZzGroup), #4 EliminateCommonSubexpr")
    assert "first bad pass: #3 ZzSignFlip (in ZzGroup): " in r.stdout


def test_no_guilty_pass_exits_1(site, model, tmp_path):
    r = run_passhost(site, "bisect", str(model), "-p", "InferType,FoldConstant,EliminateCommonSubexpr", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines()[-1] == ("no pass changes the results: all 3 passes agree with the unoptimised "
                                         "module (rtol=1e-05, atol=1e-05)")
    assert not [p for p in os.listdir(tmp_path) if p.startswith("passhost-bisect-")]


def test_a_pass_skipped_by_opt_level_is_not_blamed(site, model, tmp_path):
    r = run_passhost(site, "bisect", str(model), "-O", "0", "-p", "FoldConstant,ZzSignFlip", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr


def test_user_inputs_decide(site, model, tmp_path):
    # x + w + 1 == 0 everywhere: negating zero changes nothing
    np.savez(tmp_path / "zero.npz", x=np.full((2, 3), -1, "float32"), w=np.zeros((2, 3), "float32"))
    r = run_passhost(site, "bisect", str(model), "-p", "ZzSignFlip", "--inputs", "zero.npz", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    np.savez(tmp_path / "ones.npz", x=np.ones((2, 3), "float32"), w=np.ones((2, 3), "float32"))
    r = run_passhost(site, "bisect", str(model), "-p", "ZzSignFlip", "--inputs", "ones.npz", "-o", "o", cwd=tmp_path)
    assert r.returncode == 0 and "first bad pass: #1 ZzSignFlip: output: max abs error 12," in r.stdout


def test_a_raising_pass_is_the_guilty_one(site, model, tmp_path):
    r = run_passhost(site, "bisect", str(model), "-p", "FoldConstant,ZzCrash,ZzSignFlip", "-o", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "\nfirst bad pass: #2 ZzCrash: pass raised ValueError: ZzCrash cannot handle this module\n" in r.stdout
    assert sorted(os.listdir(tmp_path / "out")) == ["before.txt"]


@pytest.mark.parametrize("args, message", [
    (["missing.txt", "-p", "ZzSignFlip"], "cannot read INPUT 'missing.txt'"),
    (["MODEL", "-p", "NoSuchPass"], "NoSuchPass"),
    (["MODEL", "-p", "ZzSignFlip", "--inputs", "missing.npz"], "cannot read --inputs 'missing.npz'"),
    (["MODEL", "-p", "ZzSignFlip", "--inputs", "partial.npz"], "--inputs 'partial.npz' has no array for parameter %w"),
    (["MODEL", "-p", "ZzSignFlip", "--rtol", "-1"], "--rtol and --atol must not be negative"),
])
def test_bad_input_exits_2_with_one_line(site, model, tmp_path, args, message):
    np.savez(tmp_path / "partial.npz", x=np.ones((2, 3), "float32"))
    args = [str(model) if a == "MODEL" else a for a in args]
    r = run_passhost(site, "bisect", *args, cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.startswith("passhost: error: ") and r.stderr.count("\n") == 1, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr


def test_without_p_the_default_pipeline_is_bisected(site, model, tmp_path):
    r = run_passhost(site, "bisect", str(model), "-O", "3", cwd=tmp_path)
    first = r.stdout.splitlines()[0]
    assert first.startswith("passes: #1 ") and "FoldConstant" in first and "FuseOps" in first
    assert r.returncode == 1 and "no pass changes the results" in r.stdout  # the first-party passes keep the numbers


def test_a_module_without_main_is_bad_input(site, tmp_path):
    nomain = tmp_path / "nomain.txt"
    nomain.write_text('#[version = "0.0.5"]\ndef @f(%x: Tensor[(2), float32]) {\n  %x\n}\n')
    r = run_passhost(site, "bisect", str(nomain), "-p", "ZzSignFlip", cwd=tmp_path)
    assert r.returncode == 2 and "the module has no @main" in r.stderr and r.stderr.count("\n") == 1


# -- in process ----------------------------------------------------------------------------------
def _named(name, opt_level=0):
    return module_pass(lambda mod, ctx: mod, opt_level=opt_level, name=name)


def test_flatten_expands_running_sequentials_and_drops_skipped_ones():
    a, b, c, d = _named("A"), _named("B"), _named("C", 3), _named("D")
    inner = Sequential([b, c], opt_level=1, name="Inner")
    off = Sequential([d], opt_level=0, name="Off")
    seq = Sequential([a, inner, off, Sequential([Sequential([d], name="Deep")], name="Mid")])
    ctx = PassContext(opt_level=2, disabled_pass=["Off"])
    assert [(p.info.name, w) for p, w in flatten(seq, ctx)] == [
        ("A", ""), ("B", "Inner"), ("C", "Inner"), ("D", "Mid/Deep")]
    assert [p.info.name for p, _ in flatten(seq, PassContext(opt_level=0, disabled_pass=["Off"]))] == ["A", "D"]


def test_compare_results():
    a = np.array([1.0, np.nan, 3.0], "float32")
    assert compare_results(a.copy(), a, 1e-5, 1e-5) is None
    assert compare_results((a, np.int32(3)), (a, np.int32(3)), 0, 0) is None
    msg = compare_results(a * np.float32(2), a, 1e-5, 1e-5)
    assert msg == "output: max abs error 3, max rel error 1 (2 of 3 elements beyond rtol=1e-05, atol=1e-05)"
    assert "max abs error inf" in compare_results(np.array([1.0, 2.0, 3.0], "float32"), a, 1e-5, 1e-5)
    assert compare_results((a, a), (a, a * 0), 0, 0).startswith("output[1]: ")
    assert compare_results(a, (a, a), 0, 0).startswith("the result structure changed")
    assert compare_results(a.astype("float64"), a, 0, 0) == "output changed from float32[3] to float64[3]"
    # against an exact zero reference the relative error is infinite, and printed so
    zero = np.array([0.0, 4.0], "float32")
    assert compare_results(np.array([1.0, 4.0], "float32"), zero, 1e-5, 1e-5) == (
        "output: max abs error 1, max rel error inf (1 of 2 elements beyond rtol=1e-05, atol=1e-05)")


def test_probes_start_from_cached_outputs_left_as_the_passes_made_them():
    """Evaluating a probe's untyped output must not type the cached module in place."""
    from passhost._bisect import bisect

    seen = []

    def negate(mod, ctx):
        out = mod.copy()
        f = mod["main"]
        out["main"] = ir.Function(f.params, ir.negative(f.body))
        return out

    def look(mod, ctx):
        seen.append(mod["main"].has_type)
        return mod

    x = ir.var("x", shape=(2,))
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([x], ir.add(x, x))))
    leaves = [(module_pass(lambda m, c: m, opt_level=0, name="Keep"), ""),
              (module_pass(negate, opt_level=0, name="Negate"), ""),
              (module_pass(look, opt_level=0, name="Look"), "")]
    found = bisect(mod, leaves, PassContext(), [np.ones(2, "float32")], rtol=0, atol=0)
    assert found.index == 2 and found.guilty.info.name == "Negate"
    assert "negative(" in found.after.astext() and not found.after["main"].has_type
    assert seen == [False]  # the full-pipeline probe; Look saw Negate's untyped output
    assert found.evaluations == 3
