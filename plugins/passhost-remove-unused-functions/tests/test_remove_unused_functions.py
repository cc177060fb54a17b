"""RemoveUnusedFunctions: reachability through calls and references, custom entries,
a clear error for a missing entry, and a 100,000-deep body."""
from __future__ import annotations

import pytest

import passhost
from passhost import ir
from passhost.errors import PassError
from passhost.testing import check_pass
from passhost_remove_unused_functions import RemoveUnusedFunctions, remove_unused_functions

T = ir.TensorType((3,), "float32")


def _module():
    mod = ir.IRModule()
    y, z, w, x = ir.var("y", T), ir.var("z", T), ir.var("w", T), ir.var("x", T)
    mod["g"] = ir.Function([w], ir.negative(w))
    mod["f"] = ir.Function([y], ir.Call(mod.get_global_var("g"), [y]))
    mod["h"] = ir.Function([z], ir.Tuple([mod.get_global_var("g"), z]))  # g as a value
    mod["unused"] = ir.Function([z], ir.Call(mod.get_global_var("h"), [z]))
    mod["main"] = ir.Function([x], ir.Call(mod.get_global_var("f"), [x]))
    return mod


def test_registered_with_tvm_info():
    p = passhost.passes.RemoveUnusedFunctions()
    assert p.info.name == "RemoveUnusedFunctions" and p.info.opt_level == 1
    assert p.entry_functions == ["main"]


def test_unreachable_functions_are_removed():
    mod = _module()
    expected = ir.IRModule({"main": mod["main"], "f": mod["f"], "g": mod["g"]})
    out = check_pass(RemoveUnusedFunctions(), mod, expected, infer=False)
    assert sorted(g.name_hint for g in out) == ["f", "g", "main"]


def test_references_that_are_not_calls_keep_functions():
    out = remove_unused_functions(_module(), ["unused"])
    assert sorted(g.name_hint for g in out) == ["g", "h", "unused"]


def test_several_entries_and_input_untouched():
    mod = _module()
    out = RemoveUnusedFunctions(entry_functions=["main", "h"])(mod)
    assert sorted(g.name_hint for g in out) == ["f", "g", "h", "main"]
    assert len(mod) == 5


def test_missing_entry_is_a_clear_error():
    with pytest.raises(PassError, match=r"entry function @nope is not in the module"):
        RemoveUnusedFunctions(entry_functions=["nope"])(_module())
    with pytest.raises(PassError, match="list of function names"):
        RemoveUnusedFunctions(entry_functions="main")


def test_deep_body():
    x = ir.var("x", T)
    mod = ir.IRModule()
    p = ir.var("p", T)
    mod["leaf"] = ir.Function([p], p)
    e = x
    for _ in range(100_000):
        e = ir.negative(e)
    mod["main"] = ir.Function([x], ir.add(e, ir.Call(mod.get_global_var("leaf"), [x])))
    y = ir.var("y", T)
    mod["dead"] = ir.Function([y], y)
    out = RemoveUnusedFunctions()(mod)
    assert sorted(g.name_hint for g in out) == ["leaf", "main"]
