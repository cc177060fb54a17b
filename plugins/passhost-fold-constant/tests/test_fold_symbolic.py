"""FoldConstant on symbolic shapes: shape arithmetic folds as far as the dimensions are
known, and nothing that depends on a size variable is evaluated."""
from __future__ import annotations

import numpy as np

import passhost
from passhost import ir


def _fold(x, body):
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([x], body)))
    return passhost.passes.FoldConstant()(mod)["main"].body


def _i(v):
    return ir.const(v, "int64")


def test_shape_of_a_symbolic_tensor_becomes_its_dimensions_and_arithmetic_on_them_folds():
    x = ir.var("x", shape=("batch", "seq", 768))
    s = ir.shape_of(x, "int64")
    target = ir.concatenate([ir.expand_dims(ir.take(s, _i(0)), 0), ir.expand_dims(ir.take(s, _i(1)), 0),
                             ir.const(np.array([12, 64]), "int64")], 0)
    out = _fold(x, ir.Tuple([target, ir.cast(ir.take(s, _i(2)), "float32")]))
    assert str(out.fields[0]).startswith("shape_value(values=[batch, seq, 12, 64])")
    assert isinstance(out.fields[1], ir.Constant) and out.fields[1].data.item() == 768.0


def test_a_partly_unknown_shape_folds_its_known_entries_only():
    x = ir.var("x", shape=("?", 3))
    s = ir.shape_of(x, "int64")
    out = _fold(x, ir.Tuple([ir.take(s, _i(1)), ir.take(s, _i(0))]))
    assert isinstance(out.fields[0], ir.Constant) and out.fields[0].data.item() == 3
    assert out.fields[1].op.name == "take" and out.fields[1].args[0].op.name == "shape_of"


def test_nothing_that_depends_on_a_size_variable_is_evaluated():
    x = ir.var("x", shape=("n", 3))
    grown = ir.broadcast_to(ir.const(np.ones((1, 3), "float32")), ["n", 3])
    out = _fold(x, ir.add(x, grown))
    assert out.args[1].op.name == "broadcast_to"           # its value has n rows: not known here
    s = ir.shape_of(x, "int64")
    undecided = _fold(x, ir.equal(ir.take(s, _i(0)), _i(2)))  # n == 2 depends on n
    assert undecided.op.name == "equal"
    decided = _fold(x, ir.equal(ir.take(s, _i(0)), _i(-1)))   # a size is never -1
    assert isinstance(decided, ir.Constant) and decided.data.item() is False


def test_folded_symbolic_programs_evaluate_as_before_at_several_sizes():
    x = ir.var("x", shape=("b", "s", 8))
    s = ir.shape_of(x, "int64")
    target = ir.concatenate([ir.expand_dims(ir.multiply(ir.take(s, _i(0)), ir.take(s, _i(1))), 0),
                             ir.const(np.array([8]), "int64")], 0)
    body = ir.add(ir.sum(ir.cast(target, "float32")), ir.sum(x))
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([x], body)))
    folded = passhost.passes.FoldConstant()(mod)
    for shape in ((1, 5, 8), (3, 7, 8)):
        a = np.random.default_rng(0).standard_normal(shape).astype("float32")
        np.testing.assert_allclose(ir.evaluate(folded, a), ir.evaluate(mod, a), rtol=1e-6)
