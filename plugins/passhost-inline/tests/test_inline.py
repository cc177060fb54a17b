"""Inline (TVM's InlineGlobals): calls to Inline=1 globals replaced by their bodies,
chains collapsed, recursive / unmarked / non-leaf functions kept, references as values,
fresh binders per copy, semantics, and a 100,000-deep body."""
from __future__ import annotations

import numpy as np
import pytest

import passhost
from passhost import ir
from passhost.testing import assert_semantics_preserved, check_pass
from passhost_inline import Inline, inline
from passhost_inline.inline import call_graph, recursive_functions

T = ir.TensorType((3,), "float32")


def _gv(mod, name):
    return mod.get_global_var(name)


def test_registered_name_is_inline_and_docs_mention_tvm_name():
    p = passhost.passes.Inline()
    assert p.info.name == "Inline" and p.info.opt_level == 1 and tuple(p.info.required) == ()
    assert "InlineGlobals" in passhost.passes.info("Inline").summary


def test_call_is_replaced_by_body_and_function_removed():
    mod = ir.IRModule()
    x, y = ir.var("x", T), ir.var("y", T)
    mod["sq"] = ir.Function([y], ir.multiply(y, y)).with_attr("Inline", 1)
    mod["main"] = ir.Function([x], ir.Call(_gv(mod, "sq"), [ir.negative(x)]))
    n = ir.negative(x)
    expected = ir.IRModule({"main": ir.Function([x], ir.multiply(n, n))})
    check_pass(Inline(), mod, expected)


def test_chain_of_inline_functions_collapses():
    mod = ir.IRModule()
    x, y, z = ir.var("x", T), ir.var("y", T), ir.var("z", T)
    mod["g"] = ir.Function([z], ir.negative(z)).with_attr("Inline", 1)
    mod["f"] = ir.Function([y], ir.add(ir.Call(_gv(mod, "g"), [y]), y)).with_attr("Inline", 1)
    mod["main"] = ir.Function([x], ir.Call(_gv(mod, "f"), [x]))
    expected = ir.IRModule({"main": ir.Function([x], ir.add(ir.negative(x), x))})
    check_pass(Inline(), mod, expected)


def test_unmarked_recursive_and_non_leaf_functions_stay():
    mod = ir.IRModule()
    x, y, z, w = ir.var("x", T), ir.var("y", T), ir.var("z", T), ir.var("w", T)
    mod["plain"] = ir.Function([z], ir.negative(z))
    mod["rec"] = ir.Function([w], ir.Call(ir.GlobalVar("rec"), [w])).with_attr("Inline", 1)
    mod["rec"] = ir.Function([w], ir.Call(_gv(mod, "rec"), [w])).with_attr("Inline", 1)
    mod["calls_plain"] = ir.Function([y], ir.Call(_gv(mod, "plain"), [y])).with_attr("Inline", 1)
    mod["main"] = ir.Function([x], ir.Tuple([ir.Call(_gv(mod, "rec"), [x]),
                                             ir.Call(_gv(mod, "calls_plain"), [x])]))
    out = check_pass(Inline(), mod, mod, infer=False)
    assert sorted(g.name_hint for g in out) == ["calls_plain", "main", "plain", "rec"]
    assert recursive_functions(call_graph(mod)) == {"rec"}


def test_mutual_recursion_is_detected():
    assert recursive_functions({"a": ["b"], "b": ["a"], "c": ["a"], "d": []}) == {"a", "b"}


def test_reference_as_value_becomes_the_function():
    mod = ir.IRModule()
    x, y = ir.var("x", T), ir.var("y", T)
    sq = ir.Function([y], ir.multiply(y, y)).with_attr("Inline", 1)
    mod["sq"] = sq
    mod["main"] = ir.Function([x], ir.Tuple([_gv(mod, "sq"), x]))
    out = inline(mod)
    assert out["main"].body.fields[0] is sq and "sq" not in out


def test_let_binders_are_fresh_per_copy():
    mod = ir.IRModule()
    x, y, a = ir.var("x", T), ir.var("y", T), ir.var("a", T)
    mod["f"] = ir.Function([y], ir.Let(a, ir.negative(y), ir.add(a, a))).with_attr("Inline", 1)
    f = _gv(mod, "f")
    mod["main"] = ir.Function([x], ir.multiply(ir.Call(f, [x]), ir.Call(f, [ir.exp(x)])))
    out = assert_semantics_preserved(Inline(), mod, [np.array([0.5, -1.0, 2.0], "float32")])
    lets = [n for n in ir.post_order(out["main"]) if type(n) is ir.Let]
    assert len(lets) == 2 and lets[0].var is not lets[1].var
    ir.well_formed(out)


def test_deep_body():
    mod = ir.IRModule()
    x, y = ir.var("x", T), ir.var("y", T)
    e = y
    for _ in range(100_000):
        e = ir.negative(e)
    mod["deep"] = ir.Function([y], e).with_attr("Inline", 1)
    mod["main"] = ir.Function([x], ir.Call(_gv(mod, "deep"), [x]))
    out = Inline()(mod)
    assert len(out) == 1
    n, b = 0, out["main"].body
    while type(b) is ir.Call:
        n += 1
        b = b.args[0]
    assert n == 100_000 and b is x


@pytest.mark.parametrize("seed", range(50))
def test_inlining_a_random_program_gives_it_back(seed):
    from passhost.testing import random_graph

    src = random_graph(seed, 15)["main"]
    mod = ir.IRModule()
    mod["f"] = src.with_attr("Inline", 1)
    params = [ir.var(p.name_hint + "_m", p.type_annotation) for p in src.params]
    mod["main"] = ir.Function(params, ir.Call(_gv(mod, "f"), params))
    out = assert_semantics_preserved(Inline(), mod, seed=seed)
    assert len(out) == 1
    assert ir.structural_equal(out["main"].body, src.body, map_free_vars=True)


def test_compiler_function_calls_become_calls_of_the_function_literal():
    # TVM's MakeNewExpr: a function for an external codegen keeps its body packed, so each
    # call becomes a call of the function literal, and the global is removed
    mod = ir.IRModule()
    x, y = ir.var("x", T), ir.var("y", T)
    ext = ir.Function([y], ir.multiply(y, y), attrs={"Inline": 1, "Compiler": "ccompiler",
                                                     "global_symbol": "ext"})
    mod["ext"] = ext
    gv = _gv(mod, "ext")
    mod["main"] = ir.Function([x], ir.add(ir.Call(gv, [x]), ir.Call(gv, [ir.negative(x)])))
    out = assert_semantics_preserved(Inline(), mod, [np.array([0.5, -1.0, 2.0], "float32")])
    assert [g.name_hint for g in out] == ["main"]
    body = out["main"].body
    first, second = body.args
    assert first.op is ext and second.op is ext and first.args[0] is x
    expected = ir.IRModule({"main": ir.Function([x], ir.add(ir.Call(ext, [x]),
                                                             ir.Call(ext, [ir.negative(x)])))})
    assert ir.structural_equal(ir.infer_type(out), ir.infer_type(expected))
    # printable and re-parsable, with the packed function kept whole
    text = out.astext(show_meta_data=True)
    assert 'Compiler="ccompiler"' in text
    assert ir.structural_equal(ir.parse(text), out)
    ir.well_formed(out)


def test_extern_function_reference_and_calls_keep_the_function():
    mod = ir.IRModule()
    x, y = ir.var("x", T), ir.var("y", T)
    ext = ir.Function([y], ir.negative(y), attrs={"Inline": 1, "Extern": 1})
    mod["ext"] = ext
    gv = _gv(mod, "ext")
    mod["main"] = ir.Function([x], ir.Tuple([ir.Call(gv, [x]), gv]))
    out = inline(mod)
    call, ref = out["main"].body.fields
    assert call.op is ext and ref is ext and "ext" not in out


def test_compiler_function_without_inline_stays_a_global():
    mod = ir.IRModule()
    x, y = ir.var("x", T), ir.var("y", T)
    mod["ext"] = ir.Function([y], ir.negative(y), attrs={"Compiler": "ccompiler"})
    mod["main"] = ir.Function([x], ir.Call(_gv(mod, "ext"), [x]))
    check_pass(Inline(), mod, mod, infer=False)


def test_primitive_inline_function_is_inlined_like_any_other():
    # TVM's CanInline looks at Inline (and recursion, callees) only, not at Primitive
    mod = ir.IRModule()
    x, y = ir.var("x", T), ir.var("y", T)
    mod["p"] = ir.Function([y], ir.negative(y), attrs={"Inline": 1, "Primitive": 1})
    mod["main"] = ir.Function([x], ir.Call(_gv(mod, "p"), [x]))
    check_pass(Inline(), mod, ir.IRModule({"main": ir.Function([x], ir.negative(x))}))
