"""PrintIR: prints ``PrintIR(<header>):`` and the module text to stderr, returns the module."""
from __future__ import annotations

import io

import numpy as np
import pytest

import passhost
from passhost import ir, transform
from passhost.errors import PassError
from passhost.testing import assert_semantics_preserved, chain, example, random_graph
from passhost_print_ir_pass import PrintIR, print_ir
from passhost_print_ir_pass.print_ir import print_ir_text


def test_registered_with_tvm_info():
    p = passhost.passes.PrintIR()
    assert isinstance(p, transform.ModulePass)
    assert p.info.name == "PrintIR" and p.info.opt_level == 0 and tuple(p.info.required) == ()


def test_prints_header_and_module_to_stderr_and_returns_it(capsys):
    x = ir.var("x", shape=(2,))
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([x], ir.multiply(x, ir.const(2.0)))))
    out = PrintIR("after fold")(mod)
    assert out is mod
    err = capsys.readouterr().err
    assert err.startswith("PrintIR(after fold):\n#[version = \"0.0.5\"]\n")
    assert "multiply(%x, 2f" in err
    assert err == print_ir_text(mod, "after fold")


def test_metadata_only_when_asked():
    c = ir.const(np.arange(4, dtype="float32"))
    x = ir.var("x", shape=(4,))
    mod = ir.IRModule.from_expr(ir.Function([x], ir.add(x, c)))
    plain, full = io.StringIO(), io.StringIO()
    print_ir(mod, file=plain)
    print_ir(mod, show_meta_data=True, file=full)
    assert "#[metadata]" not in plain.getvalue()
    assert "#[metadata]" in full.getvalue()
    assert plain.getvalue().startswith("PrintIR():\n")


def test_inside_a_sequential_after_fold_constant(capsys):
    seq = transform.Sequential([passhost.passes.FoldConstant(), PrintIR(),
                                passhost.passes.EliminateCommonSubexpr()])
    with transform.PassContext(opt_level=3):
        out = seq(ir.IRModule.from_expr(example()))
    err = capsys.readouterr().err
    assert err.count("PrintIR():") == 1
    # printed after folding, before CSE: the two identical adds are both there
    assert err.count("add(%1, meta[relay.Constant][1]") == 2
    assert "add(%2, %2)" in str(out)


def test_empty_module():
    stream = io.StringIO()
    mod = ir.IRModule()
    assert print_ir(mod, "h", file=stream) is mod
    assert stream.getvalue().startswith("PrintIR(h):\n")


def test_options_are_validated():
    with pytest.raises(PassError, match="header"):
        PrintIR(header=3)
    with pytest.raises(PassError, match="show_meta_data"):
        PrintIR(show_meta_data="yes")


def test_deep_chain_at_default_recursion_limit():
    stream = io.StringIO()
    mod = chain(100_000)
    assert print_ir(mod, file=stream) is mod
    text = stream.getvalue()
    assert text.count("add(") == 100_000


def test_module_unchanged_on_random_graphs(capsys):
    p = PrintIR("r")
    for seed in range(200):
        mod = random_graph(seed, 15, lets=seed % 2 == 0, tuples=seed % 3 == 0)
        out = assert_semantics_preserved(p, mod, seed=seed)
        assert out["main"] is mod["main"] or ir.structural_equal(out, ir.infer_type(mod))
    assert capsys.readouterr().err.count("PrintIR(r):") == 200
