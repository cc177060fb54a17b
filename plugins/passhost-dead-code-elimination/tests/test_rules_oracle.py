"""DeadCodeElimination's rules module (its reference semantics, one rule over the host's
driver) and its hand-fused walk agree on seeded random graphs with lets (used and dead),
closures, tuples, ifs and nested scopes (issue 33: the rules version is the oracle)."""
from __future__ import annotations

import numpy as np
import pytest

from passhost import ir
from passhost.numerics import random_inputs
from passhost.testing import evaluate_main
from passhost.testing.random_graph import random_graph
from passhost_dead_code_elimination.dead_code_elimination import Purity, eliminate_dead_code
from passhost_dead_code_elimination.rules import dce_rules


def _mod(seed: int) -> ir.IRModule:
    return ir.infer_type(random_graph(seed, 10, lets=True, tuples=True, ifs=seed % 2 == 0, closures=seed % 3 == 0,
                                      dead_lets=True, scopes=seed % 5 == 0, symbolic=seed % 7 == 0))


def _lets(f) -> int:
    return sum(1 for e in ir.post_order(f) if type(e) is ir.Let)


def test_without_inlining_the_walk_and_the_rules_give_the_same_function():
    removed = 0
    for seed in range(150):
        mod = _mod(seed)
        f = mod["main"]
        loop, rules = eliminate_dead_code(f, Purity(mod)), dce_rules(f, Purity(mod))
        assert ir.structural_equal(loop, rules, map_free_vars=True), f"seed {seed}"
        removed += _lets(f) - _lets(loop)
    assert removed > 50


@pytest.mark.parametrize("seed", range(0, 150, 5))
def test_with_inlining_they_compute_the_same_and_the_rules_inline_no_less(seed):
    mod = _mod(seed)
    f = mod["main"]
    loop, rules = eliminate_dead_code(f, Purity(mod), True), dce_rules(f, Purity(mod), True)
    assert _lets(rules) <= _lets(loop)
    inputs = random_inputs(mod, seed, sizes={"n": 2, "h": 5, "w": 6})
    for out in (loop, rules):
        got = evaluate_main(ir.IRModule.from_expr(out), inputs)
        want = evaluate_main(mod, inputs)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
