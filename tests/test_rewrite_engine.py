"""The rewrite engine (issue 33 item 1): the rule table's dispatch, the walk's typing
policies, and the use analysis every use-asking pass shares."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from passhost import ir
from passhost.errors import IRError
from passhost.ir import Call, Function, Let, Tuple, TupleGetItem
from passhost.ir.rewrite import (KEEP_TYPES, NO_TYPES, NamedValues, RuleTable, binding_uses,
                                 count_uses_into, dataflow, like_originals, use_counts, walk)
from passhost.transform import function_pass


def _x(name="x"):
    return ir.var(name, shape=(2,))


# --- the rule table ---------------------------------------------------------------------


def test_a_rule_is_offered_only_the_nodes_of_its_roots():
    x = _x()
    body = ir.add(TupleGetItem(Tuple([ir.exp(x), x]), 0), ir.negative(x))
    seen = []
    table = RuleTable()

    @table.on("negative", TupleGetItem)
    def rule(node):
        seen.append(node.op.name if type(node) is Call else type(node).__name__)
        return ir.exp(node.args[0]) if type(node) is Call else None

    out = walk(body, table)
    assert sorted(seen) == ["TupleGetItem", "negative"]
    assert out.args[1].op.name == "exp" and out.args[0] is body.args[0]


def test_rules_of_one_root_are_tried_by_priority_then_in_order_and_the_first_answer_wins():
    x = _x()
    tried = []
    table = RuleTable()
    table.add("exp", lambda n: tried.append("first") or None)
    table.add(Call, lambda n: tried.append("any call") or ir.log(n.args[0]))
    table.add(ir.Op.get("exp"), lambda n: tried.append("never") or ir.sqrt(n.args[0]))
    table.add(None, lambda n: tried.append("urgent") or None, priority=1)
    out = walk(ir.exp(x), table)
    assert out.op.name == "log"
    # %x and the operator exp are offered the catch-all only; the call all four, until one answers
    assert tried == ["urgent", "urgent", "urgent", "first", "any call"]


def test_with_original_gives_every_rule_the_original_too():
    x, y = _x(), _x("y")
    pairs = []
    table = RuleTable([("exp", lambda new, old: pairs.append((new, old)))], with_original=True)
    root = ir.exp(x)
    walk(root, table, memo={x: y})
    (new, old), = pairs
    assert old is root and new.args[0] is y


def test_a_root_must_be_an_operator_or_a_node_class():
    with pytest.raises(IRError, match="root"):
        RuleTable().add(42, lambda n: None)
    with pytest.raises(IRError, match="callable"):
        RuleTable().add("add", "not a rule")


def test_a_table_of_classes_none_of_which_occurs_leaves_the_graph_alone():
    x = _x()
    root = ir.add(ir.exp(x), x)
    offered = []
    assert walk(root, RuleTable([(Let, offered.append)])) is root and offered == []
    assert RuleTable([(Let, offered.append)]).classes_only() == frozenset({Let})
    assert RuleTable([("add", offered.append)]).classes_only() is None


def test_the_dispatch_is_built_once_per_set_of_rules():
    table = RuleTable([("add", lambda n: None)])
    first = table.dispatch()
    assert table.dispatch() is first
    table.add(Let, lambda n: None)
    assert table.dispatch() is not first and Let in table.dispatch()[2]


# --- the typing policies ----------------------------------------------------------------


def _typed_chain():
    x = _x()
    e = ir.exp(x)
    root = ir.add(ir.negative(e), e)
    ir.infer_type(root)
    return x, e, root


def test_no_types_leaves_rebuilt_nodes_untyped_and_keep_types_keeps_the_originals():
    x, e, root = _typed_chain()
    y = _x("y")
    ir.infer_type(y)
    table = RuleTable([("exp", lambda n: ir.exp(y))])
    plain = walk(root, table, NO_TYPES)
    assert not plain.has_type and not plain.args[1].has_type
    kept = walk(root, RuleTable([("exp", lambda n: ir.infer_type(ir.exp(y)))]), KEEP_TYPES)
    assert kept.checked_type is root.checked_type and kept.args[0].checked_type is root.args[0].checked_type


def test_like_originals_types_a_replacement_like_what_it_replaces():
    x, e, root = _typed_chain()
    table = RuleTable([("exp", lambda new, old: ir.multiply(new, ir.const(1.0)))], with_original=True)
    out = walk(root, table, like_originals())
    assert out.args[1].op.name == "multiply" and out.args[1].checked_type == e.checked_type
    assert out.args[1].args[1].has_type          # a new sub-expression inferred on its own
    assert out.checked_type is root.checked_type


def test_a_let_rebuilt_under_keep_types_keeps_its_type_and_span():
    x, a = _x(), ir.var("a", shape=(2,))
    let = Let(a, ir.exp(x), ir.negative(a))
    ir.infer_type(let)
    ir.set_span(let, ir.Span("model.onnx", 3, 1))
    out = walk(let, RuleTable([("exp", lambda n: ir.infer_type(ir.log(n.args[0])))]), KEEP_TYPES)
    assert type(out) is Let and out is not let and out.var is a
    assert out.checked_type is let.checked_type and out.span is let.span
    assert not walk(let, RuleTable([("exp", lambda n: ir.log(n.args[0]))]), KEEP_TYPES).has_type


# --- the use analysis -------------------------------------------------------------------


def test_dataflow_lists_the_nodes_in_post_order_and_every_use():
    x = _x()
    e = ir.exp(x)
    root = ir.add(e, e)
    df = dataflow(root)
    assert df.nodes == [n for n in ir.post_order(root) if type(n) is not ir.Op]
    assert df.uses(e) == 2 and df.users_of(e) == [root, root] and df.uses(x) == 1 and df.uses(root) == 0
    assert all(df.nodes[df.index[n]] is n for n in df.nodes)


def test_a_binding_is_not_a_use():
    x, a = _x(), ir.var("a", shape=(2,))
    fn = Function([x], Let(a, ir.exp(x), ir.add(a, a)))
    df = dataflow(fn)
    assert df.uses(a) == 2 and df.uses(x) == 1   # the let's and the function's binders are not uses
    assert df.uses(fn.body.value) == 1 and df.uses(fn.body) == 1


def test_skipped_functions_are_listed_but_not_entered():
    x, p = _x(), _x("p")
    inner = Function([p], ir.exp(p), attrs={"Primitive": 1})
    fn = Function([x], Call(inner, [x]))
    df = dataflow(fn, skip=lambda f: bool(f.attrs.get("Primitive", 0)))
    assert inner in df.index and p not in df.index and df.uses(inner) == 1
    assert p in dataflow(fn).index


def test_owners_are_the_functions_a_node_is_first_reached_through():
    x, p = _x(), _x("p")
    shared = ir.exp(x)
    inner = Function([p], ir.add(p, shared))           # a closure reading the outer %x
    fn = Function([x], Tuple([Call(inner, [shared]), ir.negative(shared)]))
    df = dataflow(fn)
    owners = df.owners()
    at = df.index
    assert owners[at[p]] == at[inner] and owners[at[inner.body]] == at[inner]
    assert owners[at[shared]] == at[inner]             # reached through the closure first
    assert owners[at[fn.body]] == -1 and owners[at[fn]] == -1


def test_use_counts_count_non_leaves_and_say_whether_a_scope_lies_below():
    x, a = _x(), ir.var("a", shape=(2,))
    e = ir.exp(x)
    m = ir.multiply(e, e)
    counts = use_counts(ir.add(e, m))
    assert dict(counts) == {e: 3, m: 1} and not counts.scoped  # %x is a leaf, the root unused
    assert use_counts(Function([x], Let(a, e, a))).scoped


def test_several_roots_counted_into_one_table_walk_a_shared_node_once():
    x = _x()
    e = ir.exp(x)
    shared = ir.multiply(e, e)
    first, second = ir.add(shared, x), ir.negative(shared)
    table: dict = {}
    assert count_uses_into(table, first) is False
    assert table == {shared: 1, e: 2}
    assert count_uses_into(table, second) is False
    assert table == {shared: 2, e: 2}  # (the shared node's inside is not counted again)
    assert count_uses_into(table, shared) is False and table == {shared: 2, e: 2}  # counted before: nothing
    assert count_uses_into(table := {}, first) == use_counts(first).scoped and table == dict(use_counts(first))


def test_answers_are_remembered_while_a_pass_runs_and_dropped_after():
    x = _x()
    fn = Function([x], ir.exp(ir.exp(x)))
    seen = []

    @function_pass(opt_level=0, name="AskTwice")
    def ask_twice(func, mod, ctx):
        seen.append((dataflow(func), dataflow(func), use_counts(func)))
        return func

    ask_twice(ir.IRModule.from_expr(fn))
    first, second, counts = seen[0]
    assert first is second and dict(counts) == {fn.body.args[0]: 1, fn.body: 1}
    assert dataflow(fn) is not first and dataflow(fn) is not dataflow(fn)   # outside a pass: afresh


def test_binding_uses_count_live_paths_only():
    x, a, b, c = _x(), ir.var("a", shape=(2,)), ir.var("b", shape=(2,)), ir.var("c", shape=(2,))
    use = ir.exp(c)
    fn = Function([x], Let(a, ir.exp(x), Let(b, ir.multiply(a, a), Let(c, ir.negative(x), ir.add(use, use)))))
    values: dict = {}
    counts = binding_uses(fn, dead=lambda value: True, values=values)
    assert counts == {a: 0, b: 0, c: 2}           # %a is used only in %b's dead value; %c twice by path
    assert values[b] is fn.body.body.value
    assert binding_uses(fn, dead=lambda value: False)[a] == 2   # %b's value walked: %a used twice


def test_named_values_count_outside_reads_as_uses():
    class Node:
        def __init__(self, input, output):
            self.input, self.output = input, output

    nodes = [Node(["x"], ["r"]), Node(["r", "r"], ["y"])]
    g = NamedValues(nodes, outside=["y"])
    assert g.uses("r") == 2 and g.uses("y") == 1 and g.uses("x") == 1 and g.uses("nothing") == 0
    assert g.producer == {"r": 0, "y": 1} and g.readers_of("r") == [nodes[1], nodes[1]]
    assert g.read_outside("y") and not g.read_outside("r")
    counts = g.counts()
    counts["r"] -= 1
    assert g.uses("r") == 2  # the caller's copy


def test_the_walk_and_the_analysis_take_a_100k_chain_at_the_default_recursion_limit():
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        x = _x()
        c = ir.const(np.ones(2, "float32"))
        e = x
        for _ in range(100_000):
            e = ir.add(e, c)
        df = dataflow(e)
        counts = use_counts(e)
        out = walk(e, RuleTable([("add", lambda n: ir.subtract(*n.args))]))
    finally:
        sys.setrecursionlimit(old)
    assert len(df) == 100_002 and df.uses(c) == 100_000 and len(counts) == 99_999
    assert out.op.name == "subtract" and out.args[0].op.name == "subtract"


# --- the engine's page ------------------------------------------------------------------


def _doc_blocks() -> list:
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "rewrite.md").read_text(encoding="utf-8")
    return re.findall(r"^```python\n(.*?)^```\n+prints\n+```\n(.*?)^```", text, re.S | re.M)


@pytest.mark.parametrize("index", range(len(_doc_blocks())))
def test_docs_rewrite_examples_print_what_the_page_says(index, capsys):
    code, printed = _doc_blocks()[index]
    exec(compile(code, f"docs/rewrite.md block {index}", "exec"), {"__name__": "docs_rewrite"})
    assert capsys.readouterr().out == printed


def test_docs_rewrite_page_has_its_examples():
    assert len(_doc_blocks()) == 5
