"""The pass's rules module (its reference semantics, one rule over the host's driver) and
its hand-fused loop give structurally equal results on seeded random graphs: lets, ifs,
tuples, closures, 5-D values and symbolic shapes (issue 33: the rules version is the oracle)."""
from __future__ import annotations

import pytest

from passhost import ir
from passhost.testing.random_graph import random_graph
from passhost_eliminate_common_subexpr import eliminate_common_subexpr
from passhost_eliminate_common_subexpr.rules import cse_rules


def _graph(seed: int, symbolic: bool) -> ir.Function:
    kind = seed % 4
    scoped = kind == 3 and not symbolic  # closures capturing outer values, dead lets, nested scopes
    return ir.infer_type(random_graph(seed, 8 + seed % 5, lets=kind in (1, 3), tuples=kind in (2, 3),
                                      ifs=kind != 0, rank5=kind in (0, 3), symbolic=symbolic,
                                      closures=scoped, dead_lets=scoped, scopes=scoped))["main"]


@pytest.mark.parametrize("symbolic", [False, True])
def test_the_loop_and_the_rules_agree(symbolic):
    merged = 0
    for seed in range(150):
        f = _graph(seed, symbolic)
        loop, rules = eliminate_common_subexpr(f), cse_rules(f)
        assert ir.structural_equal(loop, rules, map_free_vars=True), f"seed {seed}"
        merged += sum(ir.count_ops(f).values()) - sum(ir.count_ops(rules).values())
    assert merged > 20  # the graphs hold duplicates for both to merge (the check has teeth)
