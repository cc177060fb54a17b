"""passhost.ir.pattern: TVM's dataflow pattern language, its rewriter and partitioner."""
from __future__ import annotations

import numpy as np
import pytest

import passhost
from passhost import ir
from passhost.ir.pattern import (
    DFPatternCallback, RewriteLimitError, dominates, explain, has_attr, is_constant, is_expr, is_op,
    is_tuple, is_tuple_get_item, is_var, partition, rewrite, root_ops, wildcard,
)


def _x(name="x", shape=(2, 3), dtype="float32"):
    return ir.var(name, shape=shape, dtype=dtype)


def test_call_pattern_matches_operator_and_arguments():
    x, c = _x(), ir.const(1.0)
    pat = is_op("multiply")(wildcard(), is_constant())
    assert pat.match(ir.multiply(x, c))
    assert not pat.match(ir.add(x, c))
    assert not pat.match(ir.multiply(x, x))
    assert not is_op("subtract")(wildcard(), is_constant()).match(ir.subtract(c, x))


def test_commutative_operators_match_either_order_from_one_pattern():
    x, c = _x(), ir.const(2.0)
    pat = is_op("add")(is_var("x"), is_constant())
    assert pat.match(ir.add(x, c)) and pat.match(ir.add(c, x))
    # subtract is not commutative
    assert not is_op("subtract")(is_var("x"), is_constant()).match(ir.subtract(c, x))


def test_a_pattern_used_twice_must_match_the_same_node():
    x, y = _x("x"), _x("y")
    a = wildcard()
    pat = is_op("subtract")(a, is_op("mean")(a))
    assert pat.match(ir.subtract(x, ir.mean(x, axis=-1, keepdims=True)))
    assert not pat.match(ir.subtract(x, ir.mean(y, axis=-1, keepdims=True)))


def test_commutative_backtracking_undoes_partial_bindings():
    x, y = _x("x"), _x("y")
    a = wildcard()
    # add(a, multiply(a, *)): only the swapped order binds a consistently
    pat = is_op("add")(a, is_op("multiply")(a, wildcard()))
    assert pat.match(ir.add(ir.multiply(x, y), x))
    assert not pat.match(ir.add(ir.multiply(x, y), y * 0 + y))


def test_alternatives_optional_attrs_types_shapes():
    x = _x()
    conv_or_dense = is_op("nn.relu") | is_op("sigmoid")
    assert conv_or_dense(wildcard()).match(ir.sigmoid(x))
    relu_opt = is_op("exp")(wildcard()).optional(lambda p: is_op("nn.relu")(p))
    assert relu_opt.match(ir.exp(x)) and relu_opt.match(ir.nn.relu(ir.exp(x)))
    assert not relu_opt.match(ir.nn.relu(x))
    s = ir.sum(x, axis=1, keepdims=True)
    assert is_op("sum")(wildcard()).has_attr({"keepdims": True, "axis": [1]}).match(s)
    assert not is_op("sum")(wildcard()).has_attr({"keepdims": False}).match(s)
    assert has_attr({"keepdims": True}, is_op("sum")(wildcard())).match(s)
    typed = ir.infer_type(ir.Function([x], ir.exp(x))).body
    assert wildcard().has_dtype("float32").match(typed)
    assert wildcard().has_shape((2, 3)).match(typed)
    assert not wildcard().has_shape((3, 2)).match(typed)
    assert wildcard().has_type(ir.TensorType((2, 3), "float32")).match(typed)
    # an untyped node never satisfies a type constraint (and explain says why)
    assert not wildcard().has_dtype("float32").match(ir.exp(x))
    assert "no type yet" in explain(wildcard().has_dtype("float32"), ir.exp(x))[-1]


def test_tuple_item_var_expr_patterns():
    x, y = _x("x"), _x("y")
    t = ir.Tuple([x, y])
    assert is_tuple([is_var("x"), wildcard()]).match(t)
    assert not is_tuple([is_var("y"), wildcard()]).match(t)
    assert is_tuple_get_item(is_tuple(None), 1).match(ir.TupleGetItem(t, 1))
    assert is_tuple_get_item(wildcard()).match(ir.TupleGetItem(t, 0))
    assert not is_tuple_get_item(wildcard(), 1).match(ir.TupleGetItem(t, 0))
    c = ir.const(np.arange(3, dtype="float32"))
    assert is_expr(ir.const(np.arange(3, dtype="float32"))).match(c)


def test_dominates_requires_every_path_to_reach_the_parent_through_the_path_pattern():
    x = _x(shape=(1, 4, 8, 8))
    w = ir.const(np.ones((4, 4, 3, 3), "float32"))
    conv = ir.nn.conv2d(x, w, padding=(1, 1))
    diamond = ir.add(ir.nn.relu(conv), ir.sigmoid(conv))
    elemwise = is_op("nn.relu") | is_op("sigmoid") | is_op("add")
    pat = dominates(is_op("nn.conv2d")(wildcard(), wildcard()), elemwise(wildcard()) | elemwise(wildcard(), wildcard()),
                    is_op("add")(wildcard(), wildcard()))
    assert pat.match(diamond)
    escape = ir.add(ir.nn.relu(conv), ir.exp(x))  # one path leaves through exp(x), never reaching the conv
    assert not pat.match(escape)


def test_explain_names_the_failing_subpattern():
    x = _x()
    pat = is_op("multiply")(wildcard(), is_constant())
    assert explain(pat, ir.multiply(x, ir.const(1.0))) == []
    why = explain(pat, ir.exp(x))
    assert why == ["multiply(*, is_constant()): expected a call of multiply, found a call of exp"]
    why = explain(pat, ir.multiply(x, x))
    assert all("is_constant(): expected a constant, found variable %x" == w for w in why)


def test_root_ops_drive_dispatch():
    assert root_ops(is_op("add")(wildcard(), wildcard())) == {"add"}
    assert root_ops((is_op("add") | is_op("subtract"))(wildcard(), wildcard())) == {"add", "subtract"}
    assert root_ops(is_op("add")(wildcard(), wildcard()) | wildcard()) is None


class _MulOne(DFPatternCallback):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.x = wildcard()
        self.c = is_constant()
        self.pattern = is_op("multiply")(self.x, self.c)
        self.calls = 0

    def callback(self, pre, post, node_map):
        self.calls += 1
        if np.all(node_map[self.c][0].data == 1):
            return node_map[self.x][0]
        return post


def test_rewrite_applies_bottom_up_and_shares_rewritten_nodes():
    x = _x()
    inner = ir.multiply(ir.const(1.0), ir.exp(x))
    e = ir.add(ir.multiply(inner, ir.const(1.0)), inner)
    out = rewrite(_MulOne(), e)
    want = ir.exp(x)
    want = ir.add(want, want)
    ir.assert_structural_equal(out, want, map_free_vars=True)
    assert out.args[0] is out.args[1]


def test_rewrite_only_tries_rules_on_their_root_operators():
    x = _x()
    e = x
    for _ in range(50):
        e = ir.exp(ir.add(e, ir.const(1.0)))
    rule = _MulOne()
    assert rewrite(rule, e) is e
    assert rule.calls == 0


def test_rewrite_is_stack_safe_on_a_deep_chain():
    x = _x()
    e = x
    for _ in range(100_000):
        e = ir.multiply(e, ir.const(1.0))
    assert rewrite(_MulOne(), e) is x


def test_priority_decides_which_rule_fires_first():
    seen = []

    class Tag(DFPatternCallback):
        def __init__(self, tag, **kw):
            super().__init__(**kw, name=tag)
            self.pattern = is_op("exp")(is_var())

        def callback(self, pre, post, node_map):
            seen.append(self.name)
            return ir.log(post.args[0]) if self.name == "to_log" else ir.sqrt(post.args[0])

    x = _x()
    out = rewrite([Tag("to_sqrt"), Tag("to_log", priority=1)], ir.exp(x))
    assert seen == ["to_log"] and out.op.name == "log"
    seen.clear()
    out = rewrite([Tag("to_sqrt"), Tag("to_log")], ir.exp(x))
    assert seen == ["to_sqrt"] and out.op.name == "sqrt"


def test_a_rule_that_keeps_firing_stops_at_the_cap_and_is_named():
    class Flip(DFPatternCallback):
        def __init__(self):
            super().__init__()
            self.pattern = is_op("exp")(wildcard())

        def callback(self, pre, post, node_map):
            return ir.exp(ir.negative(ir.negative(post.args[0])))

    with pytest.raises(RewriteLimitError, match=r"Flip \(1x\)"):
        rewrite(Flip(), ir.exp(_x()), max_iterations=5)


def test_require_type_types_the_graph_for_dtype_constraints():
    class DropCast(DFPatternCallback):
        def __init__(self):
            super().__init__(require_type=True)
            self.x = wildcard().has_dtype("float32")
            self.pattern = is_op("cast")(self.x).has_attr({"dtype": "float32"})

        def callback(self, pre, post, node_map):
            return node_map[self.x][0]

    x, i = _x(), _x("i", dtype="int32")
    e = ir.add(ir.cast(ir.exp(x), "float32"), ir.cast(i, "float32"))
    out = rewrite(DropCast(), ir.Function([x, i], e))
    assert out.body.args[0].op.name == "exp"
    assert out.body.args[1].op.name == "cast"  # int32 -> float32 stays
    assert out.body.checked_type == ir.TensorType((2, 3), "float32")


def test_partition_wraps_matches_in_composite_functions():
    x = _x(shape=(1, 3, 8, 8))
    w, b = ir.var("w", shape=(4, 3, 3, 3)), ir.var("b", shape=(4, 1, 1))
    conv = ir.nn.conv2d(x, w, padding=(1, 1))
    e = ir.nn.relu(ir.add(conv, b))
    pat = is_op("nn.relu")(is_op("add")(is_op("nn.conv2d")(wildcard(), wildcard()), wildcard()))
    out = partition(pat, e, attrs={"Composite": "conv_bias_relu"})
    fn = out.op
    assert isinstance(fn, ir.Function)
    assert fn.attrs["Composite"] == "conv_bias_relu"
    assert fn.attrs["PartitionedFromPattern"] == "nn.conv2d_add_nn.relu_"
    assert [a for a in out.args] == [x, w, b]
    got = ir.evaluate(ir.IRModule.from_expr(ir.Function([x, w, b], out)), *_feeds((1, 3, 8, 8), (4, 3, 3, 3), (4, 1, 1)))
    want = ir.evaluate(ir.IRModule.from_expr(ir.Function([x, w, b], e)), *_feeds((1, 3, 8, 8), (4, 3, 3, 3), (4, 1, 1)))
    np.testing.assert_allclose(got, want, rtol=1e-6)


def _feeds(*shapes):
    rng = np.random.RandomState(0)
    return [rng.randn(*s).astype("float32") for s in shapes]


def test_partition_skips_a_match_whose_inner_node_is_used_outside_and_honours_check():
    x, y = _x(), _x("y")
    inner = ir.exp(x)
    shared = ir.add(ir.nn.relu(inner), inner)  # relu(exp(x)) with exp(x) also used by the add
    pat = is_op("nn.relu")(is_op("exp")(wildcard()))
    assert partition(pat, shared) is shared
    alone = ir.nn.relu(ir.exp(y))
    assert isinstance(partition(pat, alone).op, ir.Function)
    assert partition(pat, alone, check=lambda e: False) is alone


def test_function_style_rule_binds_wildcards_by_parameter_name_and_checks():
    from passhost.ir.pattern import rule

    def pattern(x, y):
        return is_op("add")(x, is_op("negative")(y))

    def replacement(x, y):
        return ir.subtract(x, y)

    a, b = _x("a"), _x("b", dtype="int32")
    e = ir.Function([a], ir.add(ir.negative(a), ir.exp(a)))  # add(exp(a), negative(a)) by commutativity
    out = rewrite([rule(pattern, replacement)], e)
    assert out.body.op.name == "subtract" and out.body.args[1] is a
    only_int = rule(pattern, replacement, check=lambda x, y: y.checked_type.dtype == "int32")
    assert rewrite([only_int], e) is e
    e2 = ir.Function([b], ir.add(b, ir.negative(b)))
    assert rewrite([only_int], e2).body.op.name == "subtract"


def test_pattern_pass_runs_like_any_pass_and_lists_its_rules():
    from passhost import transform
    from passhost.ir.pattern import rule

    neg_neg = rule(lambda x: is_op("negative")(is_op("negative")(x)), lambda x: x, name="neg_neg")
    p = transform.pattern_pass("DoubleNegation", [neg_neg])
    assert p.info.name == "DoubleNegation" and p.info.required == ("InferType",)
    assert p.pass_func.rules == (neg_neg,)
    x = _x()
    mod = ir.IRModule.from_expr(ir.Function([x], ir.exp(ir.negative(ir.negative(x)))))
    out = p(mod)
    ir.assert_structural_equal(out["main"].body, ir.exp(x), map_free_vars=True)
    with transform.PassContext(opt_level=0):
        assert transform.Sequential([p])(mod) is not None
    with pytest.raises(transform.PassTypeError):
        transform.pattern_pass("Bad", [object()])


def test_matching_backtracks_into_an_inner_commutative_choice():
    # x can first bind the constant in multiply(0.5, x); only the later erf(x) shows that was wrong
    x = _x()
    half = ir.const(0.5)
    e = ir.multiply(ir.multiply(half, x), ir.erf(x))
    a, c = wildcard(), wildcard()
    pat = is_op("multiply")(is_op("multiply")(a, c), is_op("erf")(a))
    assert pat.match(e)
    assert explain(pat, e) == []


def _doc_blocks():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "patterns.md").read_text(encoding="utf-8")
    return re.findall(r"^```python\n(.*?)^```\n+prints\n+```\n(.*?)^```", text, re.S | re.M)


@pytest.mark.parametrize("index", range(len(_doc_blocks())))
def test_docs_patterns_examples_print_what_the_page_says(index, capsys):
    code, printed = _doc_blocks()[index]
    exec(compile(code, f"docs/patterns.md block {index}", "exec"), {"__name__": "docs_patterns"})
    assert capsys.readouterr().out == printed


def test_docs_patterns_page_has_its_examples():
    assert len(_doc_blocks()) == 5


def test_why_not_reports_the_deepest_failure_with_its_position():
    from passhost.ir.pattern import why_not

    x = _x(shape=(1, 3, 8, 8))
    conv = ir.nn.conv2d(x, ir.const(np.ones((3, 3, 3, 3), "float32")), padding=(1, 1))
    e = ir.multiply(ir.exp(x), conv)
    assert why_not(is_op("multiply")(wildcard(), is_constant()), e) == \
        "arg 1 of multiply: expected a constant, found a call of nn.conv2d"
    assert why_not(is_op("multiply")(is_op("exp")(is_var("y")), wildcard()), e) == \
        "arg 0 of multiply > arg 0 of exp: variable %x, not %y"
    assert why_not(is_op("multiply")(wildcard(), wildcard()), e) == ""
    shared = ir.add(conv, conv)
    names = ir.printed_names(ir.Function([x], ir.multiply(shared, conv)))
    assert names[conv] == "%0" and names[shared] == "%1"


def test_explain_command_reports_each_rule_at_each_node(tmp_path, capsys):
    from passhost.cli import main

    src = tmp_path / "gelu.txt"
    src.write_text('#[version = "0.0.5"]\n'
                   'def @main(%x: Tensor[(2, 4), float32]) {\n'
                   '  %0 = divide(%x, 1.41421356f);\n  %1 = erf(%0);\n  %2 = add(%1, 1f);\n'
                   '  %3 = multiply(%x, %2);\n  %4 = multiply(%3, 0.5f);\n  %5 = multiply(%4, 2f);\n'
                   '  %6 = multiply(%x, %x);\n  add(%5, %6)\n}\n')
    assert main(["explain", "FuseGelu", str(src), "--op", "multiply"]) == 0
    out = capsys.readouterr().out
    assert "matched; rewrites it to nn.gelu" in out
    assert "expected a call of add, found %" in out or "expected a constant" in out or "no: " in out
    assert main(["explain", "FuseGelu", str(src), "--at", "%99"]) == 0
    assert "no rule of FuseGelu is tried at node %99" in capsys.readouterr().out
    assert main(["explain", "FoldConstant", str(src)]) == 2
    assert "not made of rules" in capsys.readouterr().err
    assert main(["explain", "FuseGelu", str(src), "--op", "nope"]) == 2


def test_version_flag(capsys):
    from passhost.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"passhost {passhost.__version__}"
    # then each installed plugin distribution, its version and what it registers
    info = passhost.passes.info("SimplifyExpr")
    assert f"  {info.source.distribution} {info.source.version}: SimplifyExpr" in lines


def test_partition_all_takes_a_table_of_patterns_in_one_walk_first_declared_first():
    from passhost.ir.pattern import partition_all
    from passhost.ir.rewrite import like_originals

    x, w, b = ir.var("x", shape=(1, 3, 8, 8)), ir.var("w", shape=(4, 3, 3, 3)), ir.var("b", shape=(4, 1, 1))
    conv = is_op("nn.conv2d")(wildcard(), wildcard())
    bias = is_op("add")(conv, wildcard())
    relu = is_op("nn.relu")(wildcard())
    expr = ir.infer_type(ir.nn.relu(ir.add(ir.nn.conv2d(x, w, padding=(1, 1)), b)))
    out = partition_all([(bias, {"Composite": "bias"}, None), (relu, {"Composite": "relu"}, None),
                         (conv, {"Composite": "conv"}, None)], expr, typing=like_originals())
    # bottom-up: the conv is the root of "conv" and inside "bias" (tried first at the add)...
    made = [n.op.attrs["Composite"] for n in ir.post_order(out) if isinstance(n, ir.Call)
            and isinstance(n.op, ir.Function)]
    assert made == ["conv", "relu"]  # ... so the conv, met first, went to "conv" and "bias" was refused
    assert out.checked_type == expr.checked_type and out.op.checked_type is not None  # typed without a walk
    assert all(n.checked_type is not None for n in ir.post_order(out.op.body) if isinstance(n, (ir.Call, ir.Var)))
    typed = like_originals()
    one_by_one = partition(relu, partition(conv, expr, typing=typed), typing=typed)
    assert ir.structural_equal(partition_all([(conv, {}, None), (relu, {}, None)], expr, typing=typed), one_by_one)


def test_find_parts_decides_stage_by_stage_without_rebuilding():
    from passhost.ir.pattern import Part, find_parts

    x = _x()
    e = ir.exp(x)
    sp = ir.log(ir.add(e, ir.const(np.float32(1))))
    softplus, exp = is_op("log")(is_op("add")(is_op("exp")(wildcard()), is_constant())), is_op("exp")(wildcard())
    assert find_parts([[(softplus, "sp", None)], [(exp, "exp", None)]], sp) == {id(sp): Part("sp", sp, [x])}
    # a later stage never takes a node an earlier one took: the exp first, the softplus is refused
    assert list(find_parts([[(exp, "exp", None)], [(softplus, "sp", None)]], sp).values()) == [Part("exp", e, [x])]
    # nor a match whose inner value is read outside it; the graph is left as it was
    both = ir.Tuple([sp, e])
    assert list(find_parts([[(softplus, "sp", None)]], both).values()) == []
    assert both.fields[0] is sp
    # the leaves in the order a walk from the root meets them, each once
    y = _x("y")
    prod = ir.multiply(ir.add(x, y), x)
    add_mul = is_op("multiply")(is_op("add")(wildcard(), wildcard()), wildcard())
    assert find_parts([[(add_mul, "am", None)]], prod)[id(prod)].leaves == [x, y]


def test_compile_linear_takes_the_backtracking_matchers_first_answer():
    from passhost.ir.pattern.match import _Matcher, compile_linear

    x, y = _x(), _x("y")
    c = ir.const(np.ones((2, 3), "float32"))
    w = wildcard()
    scale_shift = is_op("add")(is_op("multiply")(w, is_constant()), is_constant())
    either = (is_op("nn.bias_add") | is_op("add"))(is_op("exp")(wildcard()) | is_op("log")(wildcard()), wildcard())
    cases = [(scale_shift, ir.add(c, ir.multiply(c, x))), (scale_shift, ir.add(ir.multiply(x, c), c)),
             (scale_shift, ir.add(ir.multiply(x, y), c)), (either, ir.add(y, ir.log(x))),
             (either, ir.add(ir.exp(x), ir.log(y))), (either, ir.subtract(ir.exp(x), y))]
    for pattern, e in cases:
        m, out = _Matcher(), []
        found = compile_linear(pattern)(e, out)
        assert found == m.match(pattern, e)
        if found:  # the same wildcards bound to the same nodes
            want = {p: n for p, n in m.memo.items() if type(p).__name__ == "WildcardPattern"}
            assert {p: n for p, n in out if type(p).__name__ == "WildcardPattern"} == want
    assert compile_linear(is_op("multiply")(w, is_op("tanh")(w))) is None  # w twice: not linear
