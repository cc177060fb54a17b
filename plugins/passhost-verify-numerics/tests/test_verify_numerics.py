"""verify-numerics: names the first pass that changed the results of @main."""
from __future__ import annotations

import numpy as np
import pytest

import passhost
from passhost import hookimpl, ir
from passhost.cli import main
from passhost.errors import PassError, PasshostError
from passhost.hookspecs import PassEntry
from passhost.registry import Registry, use_registry
from passhost.transform import PassContext, Sequential, failed_pass, function_pass, module_pass
from passhost_verify_numerics import VerifyNumerics, compare_results


def _mod():
    x = ir.var("x", shape=(2, 3))
    w = ir.var("w", shape=(2, 3))
    return ir.IRModule.from_expr(ir.Function([x, w], ir.multiply(ir.add(x, w), ir.const(2.0))))


def _negate(mod, ctx):
    out = mod.copy()
    f = mod["main"]
    out["main"] = ir.Function(f.params, ir.negative(f.body))
    return out


sign_flip = module_pass(_negate, opt_level=0, name="SignFlip")
keep = module_pass(lambda mod, ctx: mod, opt_level=0, name="Keep")
rebuild = module_pass(lambda mod, ctx: ir.parse(mod.astext(show_meta_data=True)), opt_level=0, name="Rebuild")
double = module_pass(lambda mod, ctx: _scale(mod, 2.0), opt_level=0, name="Double")


def _scale(mod, k):
    out = mod.copy()
    f = mod["main"]
    out["main"] = ir.Function(f.params, ir.multiply(f.body, ir.const(k)))
    return out


def test_registered_under_its_name():
    assert "verify-numerics" in passhost.instruments.names()
    inst = passhost.instruments.get("verify-numerics", rtol=1e-3)
    assert isinstance(inst, VerifyNumerics) and inst.rtol == 1e-3


def test_names_the_first_pass_that_changed_the_results():
    check = VerifyNumerics()
    seq = Sequential([keep, rebuild, sign_flip, keep, rebuild, double])
    with PassContext(instruments=[check]):
        seq(ir.infer_type(_mod()))  # typed, so a parsed copy is structurally equal
    assert [f.pass_name for f in check.failures] == ["SignFlip", "Double"]  # later: only further changes
    first = check.first_failure
    assert first.depth == 1 and first.max_rel_error == pytest.approx(2.0)
    assert first.max_abs_error > 0
    assert str(first).startswith("pass 'SignFlip' changed the results of @main: output: max abs error ")
    # Keep (same module) is not evaluated, nor the first Rebuild (a new but structurally
    # equal module); the second Rebuild types SignFlip's untyped output (a ret_type appears,
    # a structural change), so it is evaluated -- and not blamed
    assert check.checked == 3
    lines = check.render().splitlines()
    assert lines[0].startswith("verify-numerics: pass 'SignFlip' changed the results of @main:")
    assert len(lines) == 2


def test_all_clear():
    check = VerifyNumerics()
    with PassContext(instruments=[check]):
        Sequential([passhost.passes.FoldConstant(), passhost.passes.EliminateCommonSubexpr()])(_mod())
    assert check.failures == [] and check.error is None
    assert check.render().startswith("verify-numerics: results of @main preserved (")
    assert VerifyNumerics().render() == ""


def test_stop_raises_a_pass_error_naming_the_pass():
    check = VerifyNumerics(stop=True)
    with pytest.raises(PassError) as info:
        with PassContext(instruments=[check]):
            Sequential([keep, sign_flip, double])(_mod())
    assert failed_pass(info.value) == "SignFlip" and info.value.pass_name == "SignFlip"
    assert str(info.value).startswith("verify-numerics: pass 'SignFlip' changed the results of @main")


def test_a_function_pass_is_blamed_not_its_nested_infer_type():
    @function_pass(opt_level=0, name="NegateBody")
    def negate_body(func, mod, ctx):
        return ir.Function(func.params, ir.negative(func.body))

    check = VerifyNumerics()
    with PassContext(instruments=[check]):
        Sequential([negate_body])(_mod())
    assert [(f.pass_name, f.depth) for f in check.failures] == [("NegateBody", 1)]


def test_tolerances():
    nudge = module_pass(lambda mod, ctx: _scale(mod, 1.0 + 1e-4), opt_level=0, name="Nudge")
    strict, loose = VerifyNumerics(), VerifyNumerics(rtol=1e-3)
    for check in (strict, loose):
        with PassContext(instruments=[check]):
            Sequential([nudge])(_mod())
    assert [f.pass_name for f in strict.failures] == ["Nudge"] and loose.failures == []


def test_user_inputs(tmp_path):
    # (x + w) * 2 == 0 for these inputs: negating it changes nothing
    zeros = {"x": np.ones((2, 3), "float32"), "w": -np.ones((2, 3), "float32")}
    np.savez(tmp_path / "in.npz", **zeros)
    for inputs in (str(tmp_path / "in.npz"), zeros, [zeros["x"], zeros["w"]]):
        check = VerifyNumerics(inputs=inputs)
        with PassContext(instruments=[check]):
            Sequential([sign_flip])(_mod())
        assert check.failures == [] and check.checked == 1
    np.save(tmp_path / "one.npy", zeros["x"])
    with pytest.raises(PasshostError, match="holds a single array"):
        VerifyNumerics(inputs=str(tmp_path / "one.npy"))
    np.savez(tmp_path / "obj.npz", x=np.array([object()], dtype=object))
    with pytest.raises(PasshostError, match="cannot read inputs"):
        VerifyNumerics(inputs=str(tmp_path / "obj.npz"))
    check = VerifyNumerics(inputs={"x": zeros["x"]})
    with PassContext(instruments=[check]):
        Sequential([sign_flip])(_mod())
    assert check.error.startswith("cannot evaluate the input module, nothing is verified: ")
    assert "no input for parameter %w" in check.render()


def test_a_module_that_cannot_be_evaluated_is_listed_not_failed():
    def add_param(mod, ctx):
        out = mod.copy()
        f = mod["main"]
        out["main"] = ir.Function(list(f.params) + [ir.var("extra", shape=(2, 3))], f.body)
        return out

    check = VerifyNumerics()
    with PassContext(instruments=[check]):
        Sequential([module_pass(add_param, opt_level=0, name="AddParam")])(_mod())
    assert check.failures == []
    [(name, why)] = check.unevaluated
    assert name == "AddParam" and "takes 3 arguments" in why


@pytest.mark.parametrize("kwargs", [{"rtol": -1}, {"atol": "x"}, {"seed": 1.5}, {"stop": 1}])
def test_bad_options(kwargs):
    with pytest.raises(PasshostError):
        VerifyNumerics(**kwargs)


def test_compare_results_reports_the_worst_array():
    a = np.array([1.0, np.nan, 4.0], "float32")
    assert compare_results(a.copy(), a, 0, 0) is None
    max_abs, max_rel, message = compare_results((a, a * 3), (a, a), 1e-5, 1e-5)
    assert (max_abs, max_rel) == (8.0, 2.0) and message.startswith("output[1]: max abs error 8, max rel error 2 ")
    assert compare_results(a, (a,), 0, 0)[2].startswith("the result structure changed")


class _Plugin:
    @hookimpl
    def passhost_register_passes(self):
        yield PassEntry("SignFlip", lambda: sign_flip)
        yield PassEntry("Keep", lambda: keep)


def test_from_the_command_line(capsys, tmp_path):
    import passhost_verify_numerics

    reg = Registry(load_entrypoints=False)
    reg.register_plugin(_Plugin(), "vn-test")
    reg.register_plugin(passhost_verify_numerics, "verify-numerics")
    src = tmp_path / "in.txt"
    src.write_text(_mod().astext())
    with use_registry(reg):
        code = main(["run", str(src), "-p", "Keep,SignFlip,Keep", "--instrument", "verify-numerics",
                     "--no-meta-data"])
        out, err = capsys.readouterr()
        assert code == 0 and "negative(" in out
        assert err.startswith("verify-numerics: pass 'SignFlip' changed the results of @main: output: ")
        code = main(["run", str(src), "-p", "Keep,SignFlip,Keep", "--instrument", "verify-numerics(stop=True)",
                     "--crash-dir", str(tmp_path / "crash")])
        out, err = capsys.readouterr()
        assert code == 1 and out == "" and err.count("\n") == 1
        assert err.startswith("passhost: error: verify-numerics: pass 'SignFlip' changed the results of @main")
        assert (tmp_path / "crash" / "pipeline.txt").read_text() == "SignFlip,Keep\n"
        code = main(["run", "--reproduce", str(tmp_path / "crash")])
        _, replay = capsys.readouterr()
        assert code == 1 and replay == err.split(" (reproducer written to")[0] + "\n"


def test_checking_leaves_the_pipelines_nodes_untyped():
    """Evaluating an untyped module types it in place; the instrument evaluates a copy."""
    seen = []

    def look(mod, ctx):
        seen.append(mod["main"].has_type or mod["main"].body.has_type)
        return mod

    mod = _mod()
    check = VerifyNumerics()
    with PassContext(instruments=[check]):
        Sequential([sign_flip, module_pass(look, opt_level=0, name="Look")])(mod)
    assert seen == [False] and not mod["main"].has_type and not mod["main"].body.has_type
    assert [f.pass_name for f in check.failures] == ["SignFlip"]
