"""``trilu`` (TVM's ``relay.trilu``): the triangles numpy's triu/tril give, on static and
symbolic shapes, through the text format."""
from __future__ import annotations

import numpy as np
import pytest

from passhost import ir
from passhost.errors import TypeInferenceError


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("k", [-2, 0, 1])
def test_trilu_keeps_the_triangle_numpy_keeps(upper, k):
    x = ir.var("x", shape=(2, 4, 5))
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([x], ir.trilu(x, k, upper))))
    a = np.random.default_rng(0).standard_normal((2, 4, 5)).astype("float32")
    want = np.triu(a, k) if upper else np.tril(a, k)
    np.testing.assert_array_equal(ir.evaluate(mod, a), want)
    assert ir.structural_equal(ir.parse(mod.astext()), mod)


def test_a_causal_mask_of_run_time_size_is_one_call():
    x = ir.var("x", shape=("s", "s"), dtype="bool")
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([x], ir.trilu(x, 1))))
    assert str(mod["main"].body.checked_type) == "Tensor[(s, s), bool]"
    for n in (3, 6):
        np.testing.assert_array_equal(ir.evaluate(mod, np.ones((n, n), bool)), np.triu(np.ones((n, n), bool), 1))


def test_trilu_needs_a_matrix_and_an_integer_scalar_k():
    with pytest.raises(TypeInferenceError, match="two axes"):
        ir.infer_type(ir.Function([v := ir.var("v", shape=(3,))], ir.trilu(v)))
    with pytest.raises(TypeInferenceError, match="integer scalar"):
        m = ir.var("m", shape=(3, 3))
        ir.infer_type(ir.Function([m], ir.trilu(m, ir.const(1.0))))
