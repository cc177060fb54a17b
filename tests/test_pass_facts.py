"""Declared facts (passhost.ir.facts): idempotent passes are honoured by the pass manager,
and the process-wide memos live in one module."""
from __future__ import annotations

import gc
import weakref

import pytest

from passhost import ir
from passhost.ir import facts
from passhost.transform import PassInfo, PassTypeError, function_pass


def _typed_module(k: int = 3):
    x = ir.var("x", shape=(2,), dtype="float32")
    body = x
    for _ in range(k):
        body = ir.nn.relu(body)
    return ir.infer_type(ir.IRModule.from_expr(ir.Function([x], body)))


def _make_pass(calls: list, *, idempotent: bool = True, typed: bool = True):
    @function_pass(opt_level=0, name="ZzDropOneRelu", idempotent=idempotent)
    class DropOneRelu:
        """Rebuild the function (a new object), as a pass that changed something does."""

        def __init__(self, tag: str = "a"):
            self.tag = tag

        def transform_function(self, func, mod, ctx):
            calls.append(self.tag)
            new = ir.Function(func.params, func.body, func.ret_type)
            return ir.infer_type(ir.IRModule.from_expr(new))["main"] if typed else new

    return DropOneRelu


def test_an_idempotent_pass_is_not_called_again_on_its_own_typed_output():
    calls: list = []
    p = _make_pass(calls)
    mod = _typed_module()
    out = p()(mod)
    assert calls == ["a"]
    again = p()(out)  # a new pass object with the same options
    assert calls == ["a"] and again["main"] is out["main"]
    p()(_typed_module())  # another function: called
    assert calls == ["a", "a"]
    p(tag="b")(out)  # other options: another pass as far as the fact goes
    assert calls == ["a", "a", "b"]


def test_without_the_declaration_or_for_an_untyped_result_nothing_is_remembered():
    calls: list = []
    plain = _make_pass(calls, idempotent=False)
    out = plain()(_typed_module())
    plain()(out)
    assert len(calls) == 2
    calls.clear()
    untyped = _make_pass(calls, typed=False)
    out = untyped()(_typed_module())  # the pass manager types it afterwards, in place
    untyped()(out)
    assert len(calls) == 2  # the result was untyped when returned: not a known fixed point


def test_remembered_functions_are_held_weakly():
    calls: list = []
    p = _make_pass(calls, idempotent=True)
    out = p(tag="weak")(_typed_module())["main"]
    ref = weakref.ref(out)
    del out
    gc.collect()
    assert ref() is None


def test_pass_info_declares_idempotence():
    info = PassInfo(1, "P", idempotent=True)
    assert info.idempotent and info != PassInfo(1, "P")
    with pytest.raises(PassTypeError, match="idempotent"):
        PassInfo(1, "P", idempotent="yes")


def test_the_process_wide_memos_are_the_declared_facts():
    from passhost.ir import analysis, expr

    assert expr.OPS_EVER_CALLED is facts.OPS_EVER_CALLED
    fn = _typed_module()["main"]
    assert fn not in facts.CALLED_OPS
    assert analysis.called_ops(fn) == frozenset({ir.Op.get("nn.relu")})
    assert facts.CALLED_OPS[fn] is analysis.called_ops(fn)  # remembered, weakly, per function
    facts.CALLED_OPS[fn] = frozenset()  # (what calls_any consults: a planted answer shows it)
    assert not ir.calls_any(fn, frozenset({ir.Op.get("nn.relu")}))
