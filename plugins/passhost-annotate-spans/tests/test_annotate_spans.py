"""AnnotateSpans (issue 16): spans from the printed text, kept through rewrites, named by type errors."""
from __future__ import annotations

import numpy as np
import pytest

import passhost
from passhost import ir
from passhost.errors import TypeInferenceError
from passhost.testing import example, random_graph
from passhost_annotate_spans import SOURCE_NAME, AnnotateSpans


def _spans(mod):
    return {n: n.span for n in ir.post_order(mod["main"]) if n.span is not None}


def test_registered_with_tvm_info():
    p = passhost.passes.AnnotateSpans()
    assert p.info.name == "AnnotateSpans" and p.info.opt_level == 0 and tuple(p.info.required) == ()
    assert passhost.passes.info("AnnotateSpans").distribution == "passhost-annotate-spans"


def test_every_call_points_at_where_it_starts_in_the_printed_text():
    mod = ir.infer_type(ir.IRModule.from_expr(example()))
    out = AnnotateSpans()(mod)
    assert ir.structural_equal(out, mod) and out is not mod
    text = out.astext(show_meta_data=True).splitlines()
    calls = [n for n in ir.post_order(out["main"]) if type(n) is ir.Call]
    assert calls and all(c.span is not None and c.span.source == SOURCE_NAME for c in calls)
    for c in calls:
        line = text[c.span.line - 1]
        assert line[c.span.column - 1:].startswith(c.op.name + "("), (str(c.span), line)
    assert str(calls[0].span) == f"{SOURCE_NAME}:{calls[0].span.line}:{calls[0].span.column}"


@pytest.mark.parametrize("seed", range(20))
def test_random_graphs_stay_equal_and_evaluate_alike(seed):
    mod = ir.infer_type(random_graph(seed, 25))
    out = AnnotateSpans()(mod)
    assert ir.structural_equal(out, mod)
    assert len(_spans(out)) > 0


def test_spans_survive_passes_that_keep_or_rebuild_a_node_and_a_type_error_names_them():
    text = """#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32]) {
  %0 = add(%x, 1f);
  %1 = multiply(%0, 2f);
  nn.relu(%1)
}
"""
    mod = AnnotateSpans()(ir.parse(text))
    spans = _spans(mod)
    mul = next(n for n in spans if type(n) is ir.Call and n.op.name == "multiply")
    out = passhost.passes.FoldConstant()(passhost.passes.EliminateCommonSubexpr()(mod))
    assert next(n for n in ir.post_order(out["main"]) if type(n) is ir.Call and n.op.name == "multiply").span \
        == mul.span
    # a rewrite that rebuilds multiply over a wrongly shaped operand: the error says where it was
    y = ir.var("y", shape=(4,))
    broken = ir.with_children(mul, (mul.op, y, ir.const(np.ones((2, 3), "float32"))))
    assert broken.span == mul.span
    with pytest.raises(TypeInferenceError, match=r"cannot broadcast .* \(at GeneratedSource:4:8\)$"):
        ir.infer_type(ir.IRModule.from_expr(ir.Function([y], ir.nn.relu(broken))))


def test_spans_are_metadata_not_structure():
    mod = ir.infer_type(ir.IRModule.from_expr(example()))
    out = AnnotateSpans()(mod)
    assert ir.structural_hash(out) == ir.structural_hash(mod)
    assert out.astext() == mod.astext()  # the text format does not print spans
