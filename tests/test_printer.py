"""The Relay text printer: exact TVM strings (seed outputs) and every layout rule."""
from __future__ import annotations

import base64
import json
import pathlib

import numpy as np
import pytest

from passhost import ir
from passhost.errors import IRError
from passhost.ir.printer import METADATA_OMITTED, astext, format_attr_value, format_float, pretty_print

SEEDS = pathlib.Path(__file__).parent / "seeds"
F54 = "Tensor[(1, 64, 54, 54), float32]"
F56 = "Tensor[(1, 64, 56, 56), float32]"
W = "Tensor[(64, 64, 3, 3), float32]"


def collapse(text: str) -> str:
    return " ".join(text.split())


def seed(name: str) -> str:
    return collapse((SEEDS / name).read_text(encoding="utf-8"))


def example() -> ir.Function:
    """The tutorial's ``example()``."""
    c = ir.const(np.zeros((1, 64, 54, 54), "float32"))
    weight = ir.var("weight", shape=(64, 64, 3, 3))
    x = ir.var("x", ir.TensorType((1, 64, 56, 56), "float32"))
    conv = ir.nn.conv2d(x, weight)
    y = ir.add(c, c)
    y = ir.multiply(y, ir.const(2, "float32"))
    y = ir.add(conv, y)
    z = ir.add(y, c)
    z1 = ir.add(y, c)
    return ir.Function([x, weight], ir.add(z, z1))


def folded(cse: bool = False) -> ir.IRModule:
    """What FoldConstant (and optionally CSE) leaves of the example, typed."""
    x = ir.var("x", ir.TensorType((1, 64, 56, 56), "float32"))
    weight = ir.var("weight", ir.TensorType((64, 64, 3, 3), "float32"))
    c0 = ir.const(np.ones((1, 64, 54, 54), "float32"))
    c1 = ir.const(np.full((1, 64, 54, 54), 2, "float32"))
    y = ir.add(ir.nn.conv2d(x, weight, padding=(0, 0, 0, 0)), c0)
    z = ir.add(y, c1)
    body = ir.add(z, z) if cse else ir.add(z, ir.add(y, c1))
    return ir.infer_type(ir.IRModule.from_expr(ir.Function([x, weight], body)))


def primitive(params, body) -> ir.Function:
    return ir.Function(params, body, attrs={"Primitive": 1})


def fused_opt0() -> ir.IRModule:
    """FuseOps(fuse_opt_level=0) of the folded, CSE'd example, built by hand."""
    t56, t54, tw = (ir.TensorType(s, "float32") for s in ((1, 64, 56, 56), (1, 64, 54, 54), (64, 64, 3, 3)))
    x, weight = ir.var("x", t56), ir.var("weight", tw)
    c0 = ir.const(np.ones((1, 64, 54, 54), "float32"))
    c1 = ir.const(np.full((1, 64, 54, 54), 2, "float32"))
    p0, p1 = ir.var("p0", t56), ir.var("p1", tw)
    f0 = primitive([p0, p1], ir.nn.conv2d(p0, p1, padding=(0, 0, 0, 0)))
    q0, q1 = ir.var("p0", t54), ir.var("p1", t54)
    f2 = primitive([q0, q1], ir.add(q0, q1))
    r0, r1 = ir.var("p0", t54), ir.var("p1", t54)
    f4 = primitive([r0, r1], ir.add(r0, r1))
    s0 = ir.var("p0", t54)
    f6 = primitive([s0], ir.add(s0, s0))
    body = ir.Call(f6, [ir.Call(f4, [ir.Call(f2, [ir.Call(f0, [x, weight]), c0]), c1])])
    return ir.infer_type(ir.IRModule.from_expr(ir.Function([x, weight], body)))


def fused_opt2(cse: bool) -> ir.IRModule:
    t56, t54, tw = (ir.TensorType(s, "float32") for s in ((1, 64, 56, 56), (1, 64, 54, 54), (64, 64, 3, 3)))
    x, weight = ir.var("x", t56), ir.var("weight", tw)
    c0 = ir.const(np.ones((1, 64, 54, 54), "float32"))
    c1 = ir.const(np.full((1, 64, 54, 54), 2, "float32"))
    p = [ir.var(f"p{i}", t) for i, t in enumerate((t56, tw, t54, t54))]
    y = ir.add(ir.nn.conv2d(p[0], p[1], padding=(0, 0, 0, 0)), p[2])
    z = ir.add(y, p[3])
    inner = ir.add(z, z) if cse else ir.add(z, ir.add(y, p[3]))
    f = primitive(p, inner)
    main = ir.Function([x, weight], ir.Call(f, [x, weight, c0, c1]))
    return ir.infer_type(ir.IRModule.from_expr(main))


# -- seed outputs ------------------------------------------------------------------


def test_untyped_example_exact():
    text = str(ir.IRModule.from_expr(example()))
    assert text == (
        f"def @main(%x: {F56}, %weight: {W}) {{\n"
        "  %0 = add(meta[relay.Constant][0], meta[relay.Constant][0]);\n"
        "  %1 = nn.conv2d(%x, %weight, padding=[0, 0, 0, 0]);\n"
        "  %2 = multiply(%0, 2f);\n"
        "  %3 = add(%1, %2);\n"
        "  %4 = add(%3, meta[relay.Constant][0]);\n"
        "  %5 = add(%3, meta[relay.Constant][0]);\n"
        "  add(%4, %5)\n"
        "}\n\n"
    )
    assert collapse(text) in seed("tvm-use-pass-infra-tutorial.txt")


def test_fold_constant_output_exact():
    text = str(folded())
    assert text == (
        f"def @main(%x: {F56} /* ty={F56} */, %weight: {W} /* ty={W} */) -> {F54} {{\n"
        f"  %0 = nn.conv2d(%x, %weight, padding=[0, 0, 0, 0]) /* ty={F54} */;\n"
        f"  %1 = add(%0, meta[relay.Constant][0] /* ty={F54} */) /* ty={F54} */;\n"
        f"  %2 = add(%1, meta[relay.Constant][1] /* ty={F54} */) /* ty={F54} */;\n"
        f"  %3 = add(%1, meta[relay.Constant][1] /* ty={F54} */) /* ty={F54} */;\n"
        f"  add(%2, %3) /* ty={F54} */\n"
        "}\n\n"
    )
    assert collapse(text) in seed("tvm-use-pass-infra-tutorial.txt")
    assert collapse(str(folded(cse=True))) in seed("tvm-use-pass-infra-tutorial.txt")


def test_fuse_ops_level0_numbering_and_param_names():
    text = str(fused_opt0())
    assert collapse(text) in seed("tvm-use-pass-infra-tutorial.txt")
    lines = text.splitlines()
    assert lines[1].startswith(f"  %0 = fn (%p03: {F56} /* ty={F56} */, %p12: {W} /* ty={W} */, Primitive=1) -> {F54} {{")
    assert lines[2] == f"    nn.conv2d(%p03, %p12, padding=[0, 0, 0, 0]) /* ty={F54} */"
    assert lines[3] == f"  }} /* ty=fn ({F56}, {W}) -> {F54} */;"
    assert lines[4] == f"  %1 = %0(%x, %weight) /* ty={F54} */;"
    assert lines[-3] == f"  %6(%5) /* ty={F54} */"


@pytest.mark.parametrize("cse", [False, True])
def test_fused_level2_outputs(cse):
    assert collapse(str(fused_opt2(cse))) in seed("tvm-use-pass-infra-tutorial.txt")


def test_partially_typed_fused_print():
    # After FuseOps, before InferType re-runs: only the old constants (and main's
    # parameters) carry types; the new function and calls are untyped.
    mod = fused_opt2(cse=True)
    main = mod["main"]
    call = main.body
    fn = call.op
    params = [ir.Var(p.name_hint, p.type_annotation) for p in fn.params]
    body = ir.rewrite_post_order(fn.body, lambda n: ir.Call(n.op, n.args, n.attrs) if type(n) is ir.Call else None,
                                 memo=dict(zip(fn.params, params)))
    new_fn = ir.Function(params, body, fn.ret_type, {"Primitive": 1})
    new = ir.IRModule({"main": ir.Function(main.params, ir.Call(new_fn, list(call.args)), main.ret_type)})
    text = str(new)
    assert collapse(text) in seed("tvm-use-pass-infra-tutorial.txt")
    assert "    add(%2, %2)\n  };\n  %3(%x, %weight, meta[relay.Constant][0] /* ty=" in text


def test_custom_pass_output_numbering():
    x = ir.var("x", ir.TensorType((1, 64, 56, 56), "float32"))
    weight = ir.var("weight", ir.TensorType((64, 64, 3, 3), "float32"))
    three = ir.const(3, "float32")
    c = ir.multiply(three, ir.const(np.zeros((1, 64, 54, 54), "float32")))
    y = ir.multiply(ir.add(c, c), ir.multiply(three, ir.const(2, "float32")))
    y = ir.add(ir.nn.conv2d(x, weight), y)
    body = ir.add(ir.add(y, c), ir.add(y, c))
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([x, weight], body)))
    text = str(mod)
    assert collapse(text) in seed("tvm-use-pass-infra-tutorial.txt")
    assert "  %2 = multiply(3f /* ty=float32 */, 2f /* ty=float32 */) /* ty=float32 */;\n" in text


def test_fold_constant_notes_expression_print():
    c = ir.const(np.array([1, 2, 3], "float32"))
    x = ir.var("x", ir.TensorType((1, 2, 3), "float32"))
    y = ir.add(x, ir.multiply(ir.add(c, c), ir.const(2, "float32")))
    fn = ir.Function([x], ir.add(y, c))
    assert str(fn) == (
        "fn (%x: Tensor[(1, 2, 3), float32]) {\n"
        "  %0 = add(meta[relay.Constant][0], meta[relay.Constant][0]);\n"
        "  %1 = multiply(%0, 2f);\n"
        "  %2 = add(%x, %1);\n"
        "  add(%2, meta[relay.Constant][0])\n"
        "}\n"
    )
    assert collapse(str(fn)) in seed("tvm-fold-constant-notes-zh.txt")


def test_resnet18_print_matches_tvm():
    from passhost import testing

    mod, _ = testing.resnet(num_layers=18, batch_size=1, image_shape=(3, 224, 224))
    text = str(mod["main"])
    assert collapse(text) in seed("tvm-pass-instrument-tutorial-zh.txt")
    assert "\n  %1 = %0.0 /* ty=Tensor[(1, 3, 224, 224), float32] */;\n" in text


# -- layout rules -----------------------------------------------------------------------


def test_call_node_order():
    x, y = ir.var("x"), ir.var("y")
    expr = ir.Call(ir.Function([x], x), [ir.Call(ir.Function([y], y), [ir.const(1)])])
    assert str(expr) == "%0 = fn (%y) {\n  %y\n};\n%1 = %0(1);\n%2 = fn (%x) {\n  %x\n};\n%2(%1)"


def test_let_value_inline_if_unique():
    x = ir.var("x")
    t = ir.Tuple([ir.const(0), ir.const(0)])
    assert str(ir.Let(x, t, t)) == "%0 = (0, 0);\nlet %x = %0;\n%0"
    assert str(ir.Let(x, t, x)) == "let %x = (0, 0);\n%x"


def test_let_chain_stays_flat_and_operand_let_is_parenthesised():
    x = ir.var("x", shape=(2,))
    a, b = ir.var("a"), ir.var("b")
    chain = ir.Let(a, ir.nn.relu(x), ir.Let(b, ir.add(a, a), ir.multiply(b, b)))
    assert str(ir.Function([x], chain)) == (
        "fn (%x: Tensor[(2), float32]) {\n"
        "  let %a = nn.relu(%x);\n"
        "  let %b = add(%a, %a);\n"
        "  multiply(%b, %b)\n"
        "}"
    )
    c = ir.var("c")
    inner = ir.Let(c, ir.nn.relu(x), ir.multiply(c, c))
    assert str(ir.Function([x], ir.add(inner, x))) == (
        "fn (%x: Tensor[(2), float32]) {\n"
        "  %0 = (\n"
        "    let %c = nn.relu(%x);\n"
        "    multiply(%c, %c)\n"
        "  );\n"
        "  add(%0, %x)\n"
        "}"
    )


def test_if_tuple_and_getitem_forms():
    c = ir.var("c", shape=(), dtype="bool")
    x = ir.var("x", shape=(2,))
    ite = ir.If(c, ir.add(x, x), ir.multiply(x, x))
    t = ir.Tuple([x, x])
    body = ir.Tuple([ir.nn.relu(ite), ir.TupleGetItem(t, 1), ir.Tuple([x]), ir.Tuple([]), ir.TupleGetItem(x, 0)])
    assert str(ir.Function([c, x], body)) == (
        "fn (%c: bool, %x: Tensor[(2), float32]) {\n"
        "  %0 = if (%c) {\n"
        "    add(%x, %x)\n"
        "  } else {\n"
        "    multiply(%x, %x)\n"
        "  };\n"
        "  %1 = (%x, %x);\n"
        "  %2 = nn.relu(%0);\n"
        "  %3 = %1.1;\n"
        "  %4 = (%x,);\n"
        "  %5 = ();\n"
        "  %6 = %x.0;\n"
        "  (%2, %3, %4, %5, %6)\n"
        "}"
    )


def test_shared_scope_result_is_bound():
    x = ir.var("x", shape=(2,))
    y = ir.nn.relu(x)
    f = ir.Function([x], y)
    outer = ir.Tuple([f, y])
    text = str(outer)
    assert text.count("nn.relu(%x)") == 1
    assert "  %0 = nn.relu(%x);\n  %0\n" in text


def test_free_vars_declared_and_names_made_unique():
    a, b, c = ir.var("1"), ir.var(""), ir.var("a b")
    x1, x2 = ir.var("x", shape=(2,)), ir.var("x", shape=(2,))
    e = ir.Tuple([a, b, c, ir.add(x1, x2)])
    assert str(e) == (
        "free_var %v1;\nfree_var %v;\nfree_var %a_b;\n"
        "free_var %x: Tensor[(2), float32];\nfree_var %x1: Tensor[(2), float32];\n"
        "%0 = add(%x, %x1);\n(%v1, %v, %a_b, %0)"
    )


def test_unique_names_follow_tvm_counter_rule():
    ps = [ir.var("p0") for _ in range(4)] + [ir.var("p01")]
    text = str(ir.Function(ps, ir.Tuple(ps)))
    assert text.startswith("fn (%p0, %p01, %p02, %p03, %p011) {")


def test_scalar_constants():
    cases = [(42, "int16", "42i16"), (42, "int32", "42"), (42, "int64", "42i64"), (-7, "int32", "-7"),
             (3, "float16", "3f16"), (3, "float32", "3f"), (3, "float64", "3f64"), (True, "bool", "True"),
             (False, "bool", "False"), (1e-5, "float32", "1e-05f"), (0.5, "float32", "0.5f"),
             (1e10, "float32", "1e+10f"), (float("inf"), "float32", "inff"), (float("-inf"), "float64", "-inff64")]
    for value, dtype, text in cases:
        assert str(ir.const(value, dtype)) == text, (value, dtype)
    assert str(ir.const(5, "int8")) == "meta[relay.Constant][0]\n"
    assert str(ir.const(5, "uint8")) == "meta[relay.Constant][0]\n"


def test_float_digits_exact_deviation():
    assert format_float(2.0) == "2"
    assert format_float(1e-05) == "1e-05"
    assert format_float(2e-05) == "2e-05"
    assert format_float(0.1, "float32") == "0.1"
    # %g would print 3.14159; the value must read back exactly
    assert format_float(np.float32(np.pi), "float32") == "3.1415927"
    assert format_float(np.pi) == "3.141592653589793"
    assert str(ir.const(np.pi, "float32")) == "3.1415927f"


def test_typed_constants_repeat_annotation():
    one = ir.const(1)
    e = ir.add(one, one)
    ir.infer_type(e)
    assert str(e) == "add(1 /* ty=int32 */, 1 /* ty=int32 */) /* ty=int32 */"


def test_meta_indices_count_distinct_objects_in_print_order():
    x = ir.var("x", shape=(3,))
    c1, c2 = ir.const(np.ones(3, "float32")), ir.const(np.ones(3, "float32"))
    e = ir.add(ir.add(x, c2), ir.add(c1, c2))
    assert str(e) == (
        "free_var %x: Tensor[(3), float32];\n"
        "%0 = add(%x, meta[relay.Constant][0]);\n"
        "%1 = add(meta[relay.Constant][1], meta[relay.Constant][0]);\n"
        "add(%0, %1)\n"
    )


def test_call_attrs_only_non_defaults_in_declaration_order():
    x = ir.var("x", shape=(1, 3, 8, 8))
    w = ir.var("w", shape=(16, 3, 3, 3))
    conv = ir.nn.conv2d(x, w, padding=(1, 1), channels=16, kernel_size=(3, 3))
    assert str(conv).endswith("nn.conv2d(%x, %w, padding=[1, 1, 1, 1], channels=16, kernel_size=[3, 3])")
    assert str(ir.nn.softmax(x)).endswith("nn.softmax(%x)")
    assert str(ir.nn.softmax(x, axis=2)).endswith("nn.softmax(%x, axis=2)")
    assert str(ir.nn.conv2d(x, w, data_layout="NHWC", kernel_layout="HWIO")).endswith(
        'data_layout="NHWC", kernel_layout="HWIO")')


def test_attr_value_formats():
    assert format_attr_value(None) == "None"
    assert format_attr_value(True) == "True"
    assert format_attr_value(3) == "3"
    assert format_attr_value(2e-05) == "2e-05f"
    assert format_attr_value((1, (2, 3))) == "[1, [2, 3]]"
    assert format_attr_value('a"b') == '"a\\"b"'
    with pytest.raises(IRError, match="cannot print attribute value"):
        format_attr_value(object())


def test_module_layout_sorted_with_globals_and_attrs():
    x = ir.var("x", shape=(2,))
    y = ir.var("y", shape=(2,))
    mod = ir.IRModule()
    mod["main"] = ir.Function([x], ir.Call(ir.GlobalVar("helper"), [x]))
    mod["helper"] = ir.Function([y], ir.nn.relu(y), attrs={"Inline": 1, "Compiler": "ext"})
    gv = mod.get_global_var("helper")
    mod["main"] = ir.Function([x], ir.Call(gv, [x]))
    assert str(mod) == (
        'def @helper(%y: Tensor[(2), float32], Inline=1, Compiler="ext") {\n'
        "  nn.relu(%y)\n"
        "}\n\n"
        "def @main(%x: Tensor[(2), float32]) {\n"
        "  @helper(%x)\n"
        "}\n"
    )


def test_module_shares_counter_and_names_across_functions():
    mod = ir.IRModule()
    for name in ("a", "b"):
        x = ir.var("x", shape=(2,))
        mod[name] = ir.Function([x], ir.add(ir.nn.relu(x), x))
    text = str(mod)
    assert "%0 = nn.relu(%x);" in text and "%1 = nn.relu(%x1);" in text


def test_astext_header_metadata_and_omitted_comment():
    x = ir.var("x", shape=(2,))
    data = np.array([1.5, -2.0], "float32")
    e = ir.add(x, ir.const(data))
    full = astext(e)
    head, meta = full.split("#[metadata]\n")
    assert head == '#[version = "0.0.5"]\nfree_var %x: Tensor[(2), float32];\nadd(%x, meta[relay.Constant][0])\n'
    entry = json.loads(meta)["relay.Constant"][0]
    assert entry["dtype"] == "float32" and entry["shape"] == [2]
    assert np.array_equal(np.frombuffer(base64.b64decode(entry["data"]), "<f4"), data)
    short = astext(e, show_meta_data=False)
    assert short.endswith("\n" + METADATA_OMITTED)
    assert "the \n * option to `True` when invoking `astext`. \n */" in short
    assert astext(ir.add(x, x)) == '#[version = "0.0.5"]\nfree_var %x: Tensor[(2), float32];\nadd(%x, %x)'
    assert e.astext() == full
    assert pretty_print(e) == str(e) == "free_var %x: Tensor[(2), float32];\nadd(%x, meta[relay.Constant][0])\n"


def test_print_rejects_non_ir_and_prints_types():
    with pytest.raises(IRError, match="cannot print"):
        pretty_print(42)
    assert pretty_print(ir.TupleType([ir.TensorType((3,), "float32")])) == "(Tensor[(3), float32],)"


def test_deep_chain_prints_without_recursion():
    x = ir.var("x", shape=(2,))
    e = x
    n = 100_000
    for i in range(n):
        e = ir.nn.relu(e) if i % 2 else ir.add(e, x)
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([x], e)))
    text = str(mod)
    lines = text.splitlines()
    assert len(lines) == n + 2
    assert lines[1] == "  %0 = add(%x, %x) /* ty=Tensor[(2), float32] */;"
    assert lines[-2] == f"  nn.relu(%{n - 2}) /* ty=Tensor[(2), float32] */"


def test_deep_let_chain_and_nested_functions_print():
    x = ir.var("x", shape=(2,))
    body = x
    lets = []
    for i in range(50_000):
        v = ir.var(f"v{i}")
        lets.append((v, ir.nn.relu(body)))
        body = v
    for v, value in reversed(lets):
        body = ir.Let(v, value, body)
    text = str(ir.Function([x], body))
    assert text.count("\n  let %v") == 50_000
    nested = x
    for _ in range(300):
        nested = ir.Function([], nested)
    assert str(nested).count("fn ()") == 300


# -- nested scopes print in linear time and space (issue 18 §2) ----------------------------

REPRO = pathlib.Path(__file__).parent / "data" / "repro"  # copies of the shared reproducers


def _nested_scopes(n: int) -> str:
    """The text ``repro/nested_scopes.py N`` writes: ``let %v0 = { let %v1 = { ... } ...``."""
    import subprocess
    import sys
    return subprocess.run([sys.executable, str(REPRO / "nested_scopes.py"), str(n)],
                          capture_output=True, text=True, check=True).stdout


def _nested_if(n: int) -> str:
    return ('#[version = "0.0.5"]\ndef @main(%c: bool, %x: float32) -> float32 {\n  ' + "if (%c) { " * n + "%x"
            + " } else { %x }" * n + "\n}\n")


def _nested_fn(n: int) -> str:
    return ('#[version = "0.0.5"]\ndef @main(%x: float32) {\n  ' + "".join(f"fn (%a{i}: float32) {{ " for i in range(n))
            + "%x" + " }(%x)" * n + "\n}\n")


@pytest.mark.parametrize("make", [_nested_scopes, _nested_if, _nested_fn], ids=["let", "if", "fn"])
def test_nested_scope_output_grows_linearly_and_indentation_is_capped(make):
    from passhost.ir.printer import MAX_INDENT
    sizes = {}
    for n in (1000, 2000, 4000):
        out = astext(ir.parse(make(n)))
        sizes[n] = len(out)
        indents = [len(line) - len(line.lstrip(" ")) for line in out.splitlines()]
        assert max(indents) <= 2 * MAX_INDENT
    # before: each level copied its inner text, 4x the output per doubling (3 MB at 1,000)
    assert sizes[2000] <= 2.05 * sizes[1000] and sizes[4000] <= 2.05 * sizes[2000]
    assert sizes[1000] < 400 * 1000


def test_nested_scopes_100k_deep_round_trip():
    """A 100,000-deep nested ``let`` block prints (it never finished before) and reads back
    as the same module, at the default recursion limit."""
    mod = ir.parse(_nested_scopes(100_000))
    text = astext(mod)
    again = ir.parse(text)
    assert ir.structural_equal(again, mod)
    assert astext(again) == text


def test_nested_scopes_print_as_before_below_the_indent_cap():
    mod = ir.parse(_nested_scopes(3))
    assert str(mod) == (
        "def @main(%x: float32 /* ty=float32 */) -> float32 {\n"
        "  let %v0: float32 /* ty=float32 */ = (\n"
        "    let %v1: float32 /* ty=float32 */ = (\n"
        "      let %v2: float32 /* ty=float32 */ = %x;\n"
        "      %v2\n"
        "    );\n"
        "    %v1\n"
        "  );\n"
        "  %v0\n"
        "}\n")
