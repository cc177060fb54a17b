"""Symbolic dimensions: canonical expressions, the text format, the interpreter's
bindings, ``shape_value`` and the folding of shape arithmetic."""
from __future__ import annotations

import numpy as np
import pytest

from passhost import ir
from passhost.errors import EvaluationError, IRError, ParseError
from passhost.ir.dims import (ANY, SymbolicDimError, UndecidableDim, dmax, dmin, floordiv, floormod, parse_dim,
                              provably_equal, provably_unequal, size_var)
from passhost.numerics import random_inputs

n, m = size_var("n"), size_var("m")


def test_expressions_have_one_canonical_form():
    assert n * m == m * n and hash(n * m) == hash(m * n) and str(m * n) == "m*n"
    assert str(m * n + 2 * n - 1) == "m*n + 2*n - 1"
    assert (n + 1) - n == 1 and type((n + 1) - n) is int
    assert (2 * n + 4) // 2 == n + 2
    assert str((3 * n + 1) // 2) == "n + floordiv(n + 1, 2)"
    assert (n * m * 768) // (n * m) == 768 and (n * m * 768) // (64 * n) == 12 * m
    assert floordiv(floordiv(n, 2), 3) == floordiv(n, 6)
    assert floormod(2 * n + 3, 2) == 1 and str(floormod(n + 1, 2)) == "floormod(n + 1, 2)"
    assert dmin(n + 1, n) == n and dmax(n, n + 2) == n + 2 and str(dmax(n, 1024)) == "max(1024, n)"


def test_remembered_sums_and_products_keep_int_and_bool_apart():
    # dims memoises + and * by operands; (n, 1) and (n, True) are equal dict keys, so the
    # memo must key by type too: a bool is still refused after the int was remembered
    assert n * 1 == n and n + 1 - 1 == n and 2 * (n + 1) == 2 * n + 2
    with pytest.raises(TypeError, match="cannot be a bool"):
        _ = n * True
    with pytest.raises(TypeError, match="cannot be a bool"):
        _ = True + n


def test_min_and_max_take_out_an_offset_and_a_min_plus_its_max_is_the_sum():
    assert dmax(0, n - 1) == dmax(1, n) - 1 and str(dmax(0, n - 1)) == "max(1, n) - 1"
    assert dmin(n + 3, 5) == dmin(n, 2) + 3
    assert dmin(1, n) + dmax(0, n - 1) == n       # a roll's two slices concatenated: n again
    assert 2 * dmin(n, m) + 2 * dmax(m, n) == 2 * n + 2 * m
    assert str(dmin(n, m) + 2 * dmax(m, n)) == "2*max(m, n) + min(m, n)"   # coefficients differ: kept
    x = ir.var("x", shape=("b", "f"))
    rolled = ir.concatenate([ir.strided_slice(x, [-1], [2 ** 63 - 1], axes=[1]),
                             ir.strided_slice(x, [0], [-1], axes=[1])], axis=1)
    assert str(ir.infer_type(ir.add(rolled, x)).checked_type) == "Tensor[(b, f), float32]"


def test_unknown_dimensions_absorb_arithmetic_and_are_never_provably_equal():
    assert ANY + 1 is ANY and ANY * 0 == 0 and str(ANY) == "?"
    assert ANY == ANY  # as a part of a type: a type prints and reads back equal
    assert not provably_equal(ANY, ANY) and not provably_unequal(ANY, 3)
    assert provably_unequal(n, n + 1) and not provably_unequal(n, m)


def test_questions_that_need_a_value_raise_instead_of_guessing():
    with pytest.raises(SymbolicDimError, match="dimension n is symbolic"):
        int(n)
    with pytest.raises(UndecidableDim, match="n > 1"):
        _ = n > 1
    assert n + 1 > 0 and n >= 0 and not (n < 0)
    with pytest.raises(SymbolicDimError):
        np.zeros((n, 2))


def test_dimensions_print_and_parse_back():
    for d in (n, m * n + 2 * n - 1, floordiv(n + 1, 2) * m - 3, -n + 4, dmin(n, 5), dmax(0, n - 1), ANY):
        assert parse_dim(str(d)) == d
    t = ir.TensorType(("batch", "seq + 1", 768, "?"))
    assert str(t) == "Tensor[(batch, seq + 1, 768, ?), float32]"
    fn = ir.parse_expr("fn (%x: Tensor[(n-1, 2*n + 1, floordiv(n, 2), ?, m*n), float32]) { %x }")
    assert str(fn.params[0].type_annotation) == "Tensor[(n - 1, 2*n + 1, floordiv(n, 2), ?, m*n), float32]"
    with pytest.raises(ParseError, match="bad dimension"):
        ir.parse_expr("fn (%x: Tensor[(2 *), float32]) { %x }")
    with pytest.raises(IRError, match="negative dimension"):
        ir.TensorType((3, -1))


def test_static_types_print_exactly_as_before():
    assert str(ir.TensorType((1, 3))) == "Tensor[(1, 3), float32]"
    assert ir.TensorType((np.int64(2), 3)).shape == (2, 3)
    assert ir.TensorType((2, 3)).is_static and not ir.TensorType(("b", 3)).is_static


def _module(*params, body):
    return ir.infer_type(ir.IRModule.from_expr(ir.Function(list(params), body(*params))))


def test_evaluate_binds_size_variables_from_the_arguments():
    x, y = ir.var("x", shape=("batch", "seq", 8)), ir.var("y", shape=(1, "seq", 8))
    mod = _module(x, y, body=ir.add)
    assert mod["main"].body.checked_type == ir.TensorType(("batch", "seq", 8))
    for b, s in ((1, 5), (3, 7)):
        out = ir.evaluate(mod, np.ones((b, s, 8), "float32"), np.ones((1, s, 8), "float32"))
        assert out.shape == (b, s, 8)
    with pytest.raises(EvaluationError, match="size variable seq is 5 .* but 4 here"):
        ir.evaluate(mod, np.ones((3, 5, 8), "float32"), np.ones((1, 4, 8), "float32"))


def test_an_expression_dimension_of_an_input_is_solved_or_checked():
    past, mask = ir.var("past", shape=("p", 4)), ir.var("mask", shape=("p + 1",))
    mod = _module(past, mask, body=lambda a, b: ir.sum(b))
    assert float(ir.evaluate(mod, np.ones((6, 4), "float32"), np.ones(7, "float32"))) == 7
    with pytest.raises(EvaluationError, match="axis 0 is p \\+ 1 = 7"):
        ir.evaluate(mod, np.ones((6, 4), "float32"), np.ones(5, "float32"))


def test_shape_value_holds_dimensions_and_evaluates_under_the_bindings():
    x = ir.var("x", shape=("batch", "seq", 8))
    mod = _module(x, body=lambda v: ir.Tuple([ir.shape_value(["batch", "seq + 1", 8]), ir.shape_value("2*seq")]))
    assert str(mod["main"].body.checked_type) == "(Tensor[(3), int64], int64)"
    vec, scalar = ir.evaluate(mod, np.zeros((2, 3, 8), "float32"))
    assert vec.tolist() == [2, 4, 8] and int(scalar) == 6
    assert ir.structural_equal(ir.parse(mod.astext()), mod)
    with pytest.raises(IRError, match="cannot be \\?"):
        ir.shape_value(["?"])


def test_fold_symbolic_folds_shape_arithmetic_as_far_as_it_is_known():
    x = ir.var("x", shape=("batch", "seq", 768))
    s = ir.shape_of(x, "int64")

    def fold(expr):
        ir.infer_type(ir.Function([x], expr))
        return ir.fold_symbolic(expr)

    def idx(i):
        return ir.const(i, "int64")

    target = ir.concatenate([ir.expand_dims(ir.take(s, idx(0)), 0), ir.expand_dims(ir.take(s, idx(1)), 0),
                             ir.const(np.array([12, 64]), "int64")], 0)
    assert str(fold(target)).startswith("shape_value(values=[batch, seq, 12, 64])")
    assert fold(ir.take(s, idx(2))).data.item() == 768
    assert fold(ir.equal(ir.take(s, idx(0)), idx(-1))).data.item() is False   # a size is never -1
    assert str(fold(ir.divide(ir.take(s, idx(1)), idx(2)))).startswith("shape_value(values=floordiv(seq, 2))")
    assert fold(ir.equal(ir.take(s, idx(0)), idx(2))) is None                  # depends on batch
    assert fold(ir.add(ir.cast(s, "float32"), ir.const(1.0))) is None          # not integer arithmetic


def test_a_partly_unknown_shape_folds_its_known_entries():
    x = ir.var("x", shape=("?", 3))
    s = ir.shape_of(x, "int64")
    ir.infer_type(ir.Function([x], ir.take(s, ir.const(1, "int64"))))
    assert ir.fold_symbolic(ir.take(s, ir.const(1, "int64"))).data.item() == 3
    ir.infer_type(ir.Function([x], ir.take(s, ir.const(0, "int64"))))
    assert ir.fold_symbolic(ir.take(s, ir.const(0, "int64"))) is None


def test_random_inputs_give_size_variables_small_distinct_values():
    x, y = ir.var("x", shape=("batch", "seq")), ir.var("y", shape=("seq", 4))
    a, b = random_inputs(ir.Function([x, y], ir.add(x, x)))
    assert a.shape == (2, 3) and b.shape == (3, 4)
    a, b = random_inputs(ir.Function([x, y], ir.add(x, x)), sizes={"seq": 9})
    assert a.shape == (2, 9)
