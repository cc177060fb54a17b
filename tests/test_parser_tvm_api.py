"""The parser and printer API as TVM v0.16's tests use it (issue 37 §5): ``parse(source,
source_name, init_module, init_meta_table)``, ``fromtext``, ``IRModule.astext(annotate=...)``
and ``astext(show_meta_data=...)``, and negative literals as constants (TVM's
``tests/python/relay/test_ir_parser.py``: ``test_init_module_and_metatable``,
``test_int_literal``, ``test_negative``, and ``test_ir_text_printer.py``'s ``test_env``)."""
from __future__ import annotations

import numpy as np
import pytest

from passhost import ir
from passhost.errors import IRError, ParseError
from passhost.ir.printer import METADATA_OMITTED

SEMVER = '#[version = "0.0.5"]\n'
F = """
    def @f(%y : Tensor[(2, 3), float32]) -> Tensor[(2, 3), float32] {
      negative(%y)
    }
"""
MAIN = """
    def @main(%x: Tensor[(2, 3), float32]) {
      add(@f(%x), meta[relay.Constant][0])
    }
"""


def _scalar(text):
    e = ir.parse_expr(text)
    assert isinstance(e, ir.Constant), text
    return e.data.item()


def test_init_module_and_metatable():
    table = {"relay.Constant": [ir.const(np.random.rand(2, 3).astype("float32"))]}
    init = ir.fromtext(SEMVER + F)
    mod = ir.parse(SEMVER + MAIN, "from_string", init, table)
    assert sorted(g.name_hint for g in mod.get_global_vars()) == ["f", "main"]
    assert mod["main"].body.args[1] is table["relay.Constant"][0]
    back = ir.fromtext(mod.astext())  # TVM's roundtrip()
    assert ir.structural_equal(back, mod, map_free_vars=True)


def test_init_meta_table_takes_arrays_and_the_text_section_comes_first():
    data = np.arange(6, dtype="float32").reshape(2, 3)
    mod = ir.parse(SEMVER + MAIN, "m", ir.fromtext(SEMVER + F), {"relay.Constant": [data]})
    np.testing.assert_array_equal(mod["main"].body.args[1].data, data)
    text = mod.astext()  # its own #[metadata] section
    other = {"relay.Constant": [np.zeros((2, 3), "float32")]}
    again = ir.parse(text.replace("def @f", "def @g").replace("@f(", "@g("), "m", None, other)
    np.testing.assert_array_equal(again["main"].body.args[1].data, data)


@pytest.mark.parametrize("bad, message", [
    ([1], "must be a dict"),
    ({"relay.Expr": []}, "must be a dict"),
    ({"relay.Constant": [object()]}, "is not a constant"),
])
def test_a_malformed_init_meta_table_is_a_parse_error(bad, message):
    with pytest.raises(ParseError, match=message):
        ir.parse(SEMVER + MAIN, "m", ir.fromtext(SEMVER + F), bad)


def test_init_module_must_be_a_module_and_its_functions_are_not_defined_twice():
    with pytest.raises(ParseError, match="init_module must be an IRModule"):
        ir.parse(SEMVER + F, "m", "not a module")
    with pytest.raises(ParseError, match="@f is defined twice"):
        ir.parse(SEMVER + F, "m", ir.fromtext(SEMVER + F))


def test_spans_stay_a_keyword_and_the_former_positional_form_works():
    text = SEMVER + "def @main(%x: float32) {\n  negative(%x)\n}\n"
    assert ir.parse(text, "a.txt", spans=True)["main"].body.span.line == 3
    assert ir.parse(text, "a.txt", True)["main"].body.span.line == 3


def test_int_literals_and_negative_ones_are_constants():
    assert _scalar("-100") == -100
    assert _scalar("-05") == -5
    assert _scalar("-42i16") == -42 and ir.parse_expr("-42i16").data.dtype == np.int16
    assert _scalar("-42i64") == -42
    assert _scalar("-10.0f") == -10.0


def test_negative():  # TVM's test_negative
    assert _scalar("--10") == 10
    assert _scalar("---10") == -10
    assert _scalar("--2.5f") == 2.5
    assert ir.parse_expr("-(10)").op.name == "negative"  # an expression is negated
    sub = ir.parse_expr("1 - --3")
    assert sub.op.name == "subtract" and sub.args[1].data.item() == 3


def _typed_module():
    x, y = ir.var("x", shape=()), ir.var("y", shape=())
    z = ir.add(x, y)
    mod = ir.IRModule()
    mod["myf"] = ir.Function([x, y], ir.add(z, z))
    return ir.infer_type(mod)


def test_astext_annotate_as_tvm_test_env():
    mod = _typed_module()
    text = mod.astext()
    assert "def @myf" in text and "add(%0, %0) /* ty=float32 */" in text
    annotated = mod.astext(annotate=lambda x: str(x.checked_type.dtype) if type(x) is ir.Call else "")
    assert "add(%0, %0)float32" in annotated and "ty=" not in annotated  # TVM writes it as given
    plain = mod.astext(annotate=lambda x: "")
    assert "/*" not in plain
    assert ir.structural_equal(ir.parse(plain), mod)


def test_astext_show_meta_data():
    x = ir.var("x", shape=(2, 3))
    mod = ir.IRModule.from_expr(ir.Function([x], ir.add(x, ir.const(np.ones((2, 3), "float32")))))
    assert "#[metadata]" in mod.astext(show_meta_data=True)
    omitted = mod.astext(show_meta_data=False)
    assert "#[metadata]" not in omitted and omitted.endswith(METADATA_OMITTED)
    with pytest.raises(IRError, match="annotate"):
        mod.astext(annotate="not a function")
