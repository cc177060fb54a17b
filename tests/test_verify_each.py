"""verify-each (issue 16): after every pass the module is verified, so a pass that leaves
malformed IR is named at once, instead of a later pass or the printer failing on it."""
from __future__ import annotations

import pytest

from passhost import hookimpl, ir, transform
from passhost.cli import main
from passhost.errors import PassError
from passhost.hookspecs import PassEntry
from passhost.registry import Registry, use_registry

SRC = """#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32]) {
  add(%x, %x)
}
"""


@transform.module_pass(opt_level=0, name="Breaker")
def breaker(mod, ctx):
    """Replace @main's body with a variable it does not bind (a free variable)."""
    f = mod["main"]
    out = mod.copy()
    out["main"] = ir.Function(f.params, ir.nn.relu(ir.var("stray", ir.TensorType((2, 3), "float32"))))
    return out


@transform.module_pass(opt_level=0, name="Fine")
def fine(mod, ctx):
    return mod


class _Plugin:
    @hookimpl
    def passhost_register_passes(self):
        yield PassEntry("Breaker", lambda: breaker)
        yield PassEntry("Fine", lambda: fine)


@pytest.fixture(autouse=True)
def registry(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    reg = Registry(load_entrypoints=False)
    reg.register_plugin(_Plugin(), "verify-test", distribution="passhost-verify-test", version="1.0")
    with use_registry(reg):
        yield reg


def _module():
    return ir.parse(SRC)


def test_a_pass_leaving_a_free_variable_is_named_by_verify_each():
    seq = transform.Sequential([fine, breaker, fine])
    with transform.PassContext(config={"passhost.verify_each": True}):
        with pytest.raises(PassError, match=r"pass 'Breaker' left a malformed module: free variable %stray in @main"):
            seq(_module())


def test_verify_each_is_off_in_the_library_by_default():
    with transform.PassContext():
        out = transform.Sequential([breaker])(_module())
    assert "stray" in ir.astext(out)


def test_the_command_line_verifies_by_default_and_can_be_switched_off(tmp_path, capsys):
    src = tmp_path / "m.txt"
    src.write_text(SRC)
    code = main(["run", str(src), "-p", "Fine,Breaker,Fine", "--no-crash-dir"])
    err = capsys.readouterr().err
    assert code == 1
    assert "pass 'Breaker' (from passhost-verify-test==1.0) left a malformed module: free variable %stray" in err
    code = main(["run", str(src), "-p", "Fine,Breaker,Fine", "--no-verify-each"])
    out = capsys.readouterr().out
    assert code == 0 and "free_var %stray" in out


def test_unchanged_functions_are_verified_once_per_context():
    from passhost._context import _Verifier

    calls = []
    verifier = _Verifier()
    mod = _module()
    import sys

    wf = sys.modules["passhost.ir.well_formed"]  # (passhost.ir.well_formed is also the function)

    real = wf.well_formed_function
    try:
        wf.well_formed_function = lambda fn, m, where, typed=False: calls.append(where) or real(fn, m, where, typed)
        info = fine.info
        verifier.run_after_pass(mod, info)
        verifier.run_after_pass(mod, info)
    finally:
        wf.well_formed_function = real
    assert calls == ["@main"]


def test_a_function_pass_is_blamed_not_the_infer_type_it_runs_on_its_result():
    @transform.function_pass(opt_level=0, name="FnBreaker")
    def fn_breaker(func, mod, ctx):
        return ir.Function(func.params, ir.nn.relu(ir.var("stray", ir.TensorType((2, 3), "float32"))))

    with transform.PassContext(config={"passhost.verify_each": True}):
        with pytest.raises(PassError, match=r"pass 'FnBreaker' left a malformed module"):
            transform.Sequential([fine, fn_breaker])(_module())
