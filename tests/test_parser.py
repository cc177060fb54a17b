"""The Relay text parser: round trips, every construct, error positions, deep input."""
from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

from passhost import ir
from passhost.errors import ParseError
from passhost.ir.parser import parse, parse_expr

HEADER = '#[version = "0.0.5"]\n'
_spec = importlib.util.spec_from_file_location("printer_cases", pathlib.Path(__file__).with_name("test_printer.py"))
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)


def roundtrip(mod: ir.IRModule) -> ir.IRModule:
    text = ir.astext(mod)
    back = parse(text)
    assert ir.astext(back) == text
    assert ir.structural_equal(back, mod)
    return back


# -- round trips ----------------------------------------------------------------------


def test_roundtrip_seed_modules_identical():
    for mod in (cases.folded(), cases.folded(cse=True), cases.fused_opt0(), cases.fused_opt2(False),
                cases.fused_opt2(True)):
        roundtrip(mod)


def test_roundtrip_keeps_constant_data_and_sharing():
    back = roundtrip(cases.folded())
    body = back["main"].body
    z, z1 = body.args
    assert z.args[0] is z1.args[0]          # %1 shared through the graph binding
    assert z.args[1] is z1.args[1]          # meta[relay.Constant][1] is one object
    assert np.array_equal(z.args[1].data, np.full((1, 64, 54, 54), 2, "float32"))


def test_parse_runs_type_inference_and_keeps_annotations():
    mod = parse(ir.astext(ir.IRModule.from_expr(cases.example())))
    main = mod["main"]
    assert main.body.has_type
    assert str(main.ret_type) == "Tensor[(1, 64, 54, 54), float32]"
    assert ir.structural_equal(mod, ir.infer_type(ir.IRModule.from_expr(cases.example())))


def test_roundtrip_resnet18():
    from passhost import testing

    mod, _ = testing.resnet(num_layers=18)
    roundtrip(mod)


def test_roundtrip_let_if_tuple_globals_attrs():
    c = ir.var("c", shape=(), dtype="bool")
    x = ir.var("x", shape=(2,))
    v = ir.var("v")
    ite = ir.If(c, ir.add(x, x), ir.multiply(x, x))
    inner = ir.Let(ir.var("w"), ir.nn.relu(x), ir.const(1.5))
    body = ir.Let(v, ite, ir.Tuple([v, ir.TupleGetItem(ir.Tuple([v, x]), 1), ir.add(inner, x), ir.Tuple([])]))
    mod = ir.IRModule()
    y = ir.var("y", shape=(2,))
    mod["helper"] = ir.Function([y], ir.nn.softmax(y, axis=0), attrs={"Inline": 1, "Name": "h"})
    mod["main"] = ir.Function([c, x], ir.Tuple([body, ir.Call(mod.get_global_var("helper"), [x])]))
    roundtrip(ir.infer_type(mod))


def test_parse_expr_roundtrip_of_printer_output():
    x, y = ir.var("x"), ir.var("y")
    e = ir.Call(ir.Function([x], x), [ir.Call(ir.Function([y], y), [ir.const(1)])])
    text = str(e)
    assert str(parse_expr(text)) == text


@pytest.mark.parametrize("lets", [False, True])
def test_roundtrip_random_graphs(lets):
    from passhost.testing import random_graph

    for seed in range(40):
        mod = random_graph(seed, 30, lets=lets, tuples=True)
        back = parse(ir.astext(mod))            # untyped text: parse types it ...
        typed = ir.infer_type(mod)              # ... as inference types the original
        assert ir.structural_equal(back, typed), seed
        roundtrip(typed)


def test_roundtrip_nested_attribute_values():
    x = ir.var("x", shape=(2,))
    f = ir.Function([x], x, attrs={"Cfg": {"a": 1, "b": (1, {"c": "d\u00e9"}), "e": {}}, "L": ((1, 2), (3,), ())})
    text = f.astext()
    assert 'Cfg={a=1, b=[1, {c="d\\u00e9"}], e={}}, L=[[1, 2], [3], []]' in text
    back = parse_expr(text)
    assert back.attrs == f.attrs and ir.structural_equal(back, f)


def test_roundtrip_let_values_that_are_functions_ifs_and_lets():
    x = ir.var("x", shape=(2,))
    c = ir.var("c", shape=(), dtype="bool")
    f, y, g = ir.var("f"), ir.var("y", shape=(2,)), ir.var("g")
    inner = ir.Let(ir.var("w"), ir.add(x, x), ir.multiply(x, x))
    body = ir.Let(f, ir.Function([y], ir.nn.relu(y)),
                  ir.Let(g, ir.If(c, ir.Call(f, [x]), x), ir.Let(ir.var("h"), inner, ir.add(g, x))))
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([c, x], body)))
    text = str(mod)
    assert "  } else {\n    %x\n  };\n" in text                 # `if` is never annotated
    assert "\n  );\n  add(%g, %x)" in text                         # nor a parenthesised `let`
    roundtrip(mod)


def test_let_bound_function_may_call_itself():
    fn = parse_expr("fn (%n: int32) { let %loop = fn (%i: int32) -> int32 { %loop(%i) }; %loop(%n) }")
    let = fn.body
    assert let.value.body.op is let.var and let.body.op is let.var


def test_crlf_text_with_metadata_parses():
    x = ir.var("x", shape=(2,))
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([x], ir.add(x, ir.const(np.ones(2, "float32"))))))
    back = parse(ir.astext(mod).replace("\n", "\r\n"))
    assert ir.structural_equal(back, mod)


# -- constructs -------------------------------------------------------------------------


def test_literals_and_dtypes():
    cases_ = {"1f": ("float32", 1.0), "1.5f": ("float32", 1.5), "1e-05f": ("float32", 1e-05),
              "1.0E+1f": ("float32", 10.0), "3f16": ("float16", 3.0), "3f32": ("float32", 3.0),
              "3f64": ("float64", 3.0), "42": ("int32", 42), "-7": ("int32", -7), "42i16": ("int16", 42),
              "42i64": ("int64", 42), "3000000000": ("int64", 3000000000), "True": ("bool", True),
              "False": ("bool", False), "inff": ("float32", np.inf), "-inff64": ("float64", -np.inf)}
    for text, (dtype, value) in cases_.items():
        c = parse_expr(text)
        assert isinstance(c, ir.Constant) and c.dtype == dtype and c.data.item() == np.dtype(dtype).type(value), text
    assert np.isnan(parse_expr("nanf").data)


def test_binary_operators_precedence():
    e = parse_expr("free_var %a: float32; free_var %b: float32; %a + %b * 2f - %a / %b")
    assert e.op.name == "subtract"
    lhs, rhs = e.args
    assert lhs.op.name == "add" and lhs.args[1].op.name == "multiply"
    assert rhs.op.name == "divide"


def test_types():
    e = parse_expr("fn (%a: Tensor[(1, 2), float32], %b: float16, %c: (Tensor[(3), int64], bool),"
                   " %d: fn (float32) -> (), %e: Tensor[(10i64, 1i64), float32], %f: (int32,)) { %a }")
    t = [p.type_annotation for p in e.params]
    assert t[0] == ir.TensorType((1, 2), "float32")
    assert t[1] == ir.TensorType((), "float16")
    assert t[2] == ir.TupleType([ir.TensorType((3,), "int64"), ir.TensorType((), "bool")])
    assert t[3] == ir.FuncType([ir.TensorType((), "float32")], ir.TupleType([]))
    assert t[4] == ir.TensorType((10, 1), "float32")
    assert t[5] == ir.TupleType([ir.TensorType((), "int32")])


def test_graph_bindings_share_nodes_and_getitem_chains():
    e = parse_expr("free_var %x: float32;\n%0 = add(%x, %x);\n%1 = ((%0, %0), %x);\n(multiply(%0, %0), %1.0.1)")
    m, g = e.fields
    assert m.args[0] is m.args[1]
    assert isinstance(g, ir.TupleGetItem) and g.index == 1 and g.tuple_value.index == 0


def test_call_attrs_validated_and_completed():
    e = parse_expr('free_var %x: Tensor[(1, 3, 8, 8), float32]; free_var %w: Tensor[(4, 3, 3, 3), float32];'
                   ' nn.conv2d(%x, %w, padding=[1, 1], channels=4, kernel_size=[3, 3], data_layout="NCHW")')
    assert e.attrs.padding == (1, 1)           # as written (the builder, not the parser, widens it)
    assert e.attrs.channels == 4 and e.attrs.strides == (1, 1)
    assert parse_expr("free_var %x: float32; nn.batch_norm(%x, %x, %x, %x, %x, epsilon=2e-05f, scale=False)"
                      ).attrs.scale is False


def test_comments_are_skipped_including_nested():
    e = parse_expr("// line comment\nadd(/* a /* nested */ comment */ 1f, 2f) // trailing\n/* end */")
    assert e.op.name == "add" and [a.data.item() for a in e.args] == [1.0, 2.0]


def test_module_globals_forward_reference_and_trailing_expression():
    mod = parse(HEADER + "def @main(%x: float32) { @f(%x) }\ndef @f(%y: float32) -> float32 { negative(%y) }")
    assert mod["main"].body.op is mod.get_global_var("f")
    mod2 = parse(HEADER + "fn (%x: float32) { exp(%x) }")
    assert mod2["main"].body.op.name == "exp"


def test_let_and_sequence_scoping():
    e = parse_expr("fn (%x: float32) { let %x = add(%x, 1f); let %y: float32 = %x; multiply(%x, %y) }")
    outer = e.body
    assert outer.value.args[0] is e.params[0]          # value sees the parameter
    inner = outer.body
    assert inner.value is outer.var                     # later uses see the let
    assert inner.var.type_annotation == ir.TensorType((), "float32")


# -- errors -------------------------------------------------------------------------------


def error_of(fn, text):
    with pytest.raises(ParseError) as info:
        fn(text)
    return info.value


def test_missing_version_header():
    err = error_of(parse, "def @main() { 1f }")
    assert "expected text format semantic version" in err.message
    assert '#[version = "0.0.5"]' in err.message
    assert (err.line, err.column) == (1, 1)
    assert str(err) == ("<string>:1:1: error: " + err.message + "\ndef @main() { 1f }\n^")
    assert "unsupported text format version" in error_of(parse, '#[version = "0.0.4"]\n').message


def test_unknown_operator_position_and_caret():
    err = error_of(lambda t: parse(t, source_name="prog.relay"),
                   HEADER + "def @main(%x: float32) {\n  %0 = frobnicate(%x);\n  %0\n}")
    assert "operator `frobnicate` not found" in err.message
    assert (err.line, err.column) == (3, 8)
    assert str(err).splitlines() == [f"prog.relay:3:8: error: {err.message}", "  %0 = frobnicate(%x);", "       ^"]


@pytest.mark.parametrize("text, message, line, column", [
    ("add(%x, 1f)", "unbound variable %x", 1, 5),
    ("add(1.5, 1f)", "float literals need an `f` suffix", 1, 5),
    ("add(1f,\n  $)", "expected an expression, found `$`", 2, 3),
    ("add(1f, 2f", "expected `,` or `)`", 1, 11),
    ("add(1f, meta[relay.Constant][0])", "has no #[metadata] section", 1, 9),
    ("%3", "%3 is used before it is defined", 1, 1),
    ("70000i16", "does not fit in int16", 1, 1),
    ("65505f16", "cannot be represented as float16", 1, 1),
    ("3.40283e+38f32", "cannot be represented as float32", 1, 1),
    ("1q", "unknown literal suffix", 1, 1),
    ("nn.softmax(1f, axis=1, axis=2)", "attribute `axis` is given twice", 1, 24),
    ("nn.softmax(1f, color=1)", "has no attribute 'color'", 1, 1),
    ("fn (%x: Tensor[(2 *), float32]) { %x }", "bad dimension", 1, 17),
    ("fn (%x: floaty) { %x }", "expected a type", 1, 9),
    ("1f 2f", "unexpected `2f` after the expression", 1, 4),
    ("/* open", "unterminated comment", 1, 1),
    ("match (%x) {}", "not supported", 1, 1),
])
def test_parse_expr_errors(text, message, line, column):
    err = error_of(parse_expr, text)
    assert message in err.message
    assert (err.line, err.column) == (line, column), str(err)


def test_metadata_errors():
    text = HEADER + "def @main() { meta[relay.Constant][2] }\n\n#[metadata]\n{\"relay.Constant\": []}"
    assert "out of range" in error_of(parse, text).message
    bad = HEADER + "def @main() { meta[relay.Constant][0] }\n\n#[metadata]\n{oops"
    err = error_of(parse, bad)
    assert "not valid JSON" in err.message and err.line == 4
    bad_entry = HEADER + 'def @main() { meta[relay.Constant][0] }\n#[metadata]\n{"relay.Constant": [{"dtype": "x"}]}'
    assert "entry 0" in error_of(parse, bad_entry).message


def test_duplicate_and_undefined_globals():
    assert "defined twice" in error_of(parse, HEADER + "def @f() { 1f }\ndef @f() { 2f }").message
    assert "undefined global function @g" in error_of(parse, HEADER + "def @f() { @g() }").message


# -- deep input ----------------------------------------------------------------------------


def test_deeply_nested_calls_parse_without_recursion():
    n = 100_000
    e = parse_expr("free_var %x: float32;\n" + "add(" * n + "%x" + ", 1f)" * n)
    depth = 0
    while isinstance(e, ir.Call):
        e = e.args[0]
        depth += 1
    assert depth == n


def test_100k_chain_printed_then_parsed():
    n = 100_000
    x = ir.var("x", shape=(2,))
    e = x
    for i in range(n):
        e = ir.nn.relu(e) if i % 2 else ir.add(e, x)
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([x], e)))
    text = ir.astext(mod)
    back = parse(text)
    assert ir.astext(back) == text


def test_long_let_chain_parses():
    n = 100_000
    text = "fn (%x: float32) {\n" + "".join(f"  let %v{i} = negative(%{'x' if i == 0 else f'v{i - 1}'});\n"
                                            for i in range(n)) + f"  %v{n - 1}\n}}"
    fn = parse_expr(text)
    e, count = fn.body, 0
    while isinstance(e, ir.Let):
        e = e.body
        count += 1
    assert count == n
    assert str(fn) == text
