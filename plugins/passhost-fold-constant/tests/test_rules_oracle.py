"""FoldConstant's rules module (its reference semantics over the host's driver) and its
hand-fused loop give structurally equal results on seeded random graphs, static and
symbolic, after SimplifyInference has left constants to fold (issue 33: the rules version is
the oracle)."""
from __future__ import annotations

import numpy as np
import pytest

import passhost
from passhost import ir, transform
from passhost.testing.random_graph import random_graph
from passhost_fold_constant import fold_constant
from passhost_fold_constant.rules import fold_rules


@pytest.mark.parametrize("symbolic", [False, True])
def test_the_loop_and_the_rules_agree(symbolic):
    folded = 0
    for seed in range(120):
        kind = seed % 4
        mod = ir.infer_type(random_graph(seed, 10, lets=kind in (1, 3), tuples=kind in (2, 3), ifs=kind != 0,
                                         symbolic=symbolic))
        with transform.PassContext(opt_level=3):
            mod = passhost.passes.SimplifyInference()(mod)
        f = ir.infer_type(mod)["main"]
        with ir.quiet_kernels():
            loop, rules = fold_constant(f), fold_rules(f)
        assert ir.structural_equal(loop, rules, map_free_vars=True), f"seed {seed}"
        folded += loop is not f
    assert folded > 30  # (there was folding to agree on)


def test_they_agree_on_shape_arithmetic_over_symbolic_shapes():
    x = ir.var("x", shape=("batch", "seq", 768))
    s = ir.shape_of(x, "int64")
    i = [ir.const(k, "int64") for k in range(3)]
    target = ir.concatenate([ir.expand_dims(ir.take(s, i[0]), 0), ir.expand_dims(ir.take(s, i[1]), 0),
                             ir.const(np.array([12, 64]), "int64")], 0)
    body = ir.Let(v := ir.var("v", shape=()), ir.add(ir.const(1.0), ir.const(2.0)),
                  ir.Tuple([target, ir.multiply(x, v), ir.cast(ir.take(s, i[2]), "float32")]))
    f = ir.infer_type(ir.Function([x], body))
    with ir.quiet_kernels():
        loop, rules = fold_constant(f), fold_rules(f)
    assert ir.structural_equal(loop, rules, map_free_vars=True)
    assert "shape_value(values=[batch, seq, 12, 64])" in str(rules)
