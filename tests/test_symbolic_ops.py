"""Every operator's type relation accepts symbolic dimensions and agrees with its static answer.

``tests/data/op_cases.txt`` holds static calls of every core operator, recorded from the
operator tests and the ONNX node cases (``scripts/record_op_cases.py``). Each is typed
again with its argument dimensions replaced by size variables
(:func:`passhost.testing.symbolic.check_relation`): the relation must not fail, and every
dimension it gives must bind back to the static one, or be ``?``.
"""
from __future__ import annotations

import collections
from pathlib import Path

import pytest

from passhost import ir
from passhost.testing.symbolic import check_relation

CASES = Path(__file__).parent / "data" / "op_cases.txt"


def _cases() -> dict:
    by_op: dict = collections.defaultdict(list)
    for line in CASES.read_text(encoding="utf-8").splitlines():
        name, text = line.split("\t")
        by_op[name].append(text)
    return dict(by_op)


BY_OP = _cases()


def test_every_core_operator_has_recorded_cases():
    core = {n for n in ir.list_ops()
            if getattr(ir.Op.get(n).definition.type_rel, "__module__", "").startswith("passhost.ir.ops.")}
    missing = sorted(core - set(BY_OP))
    assert not missing, f"record cases of {missing} (scripts/record_op_cases.py)"


@pytest.mark.parametrize("name", sorted(BY_OP))
def test_relation_types_symbolic_dimensions_as_it_types_static_ones(name):
    failures = []
    for text in BY_OP[name]:
        fn = ir.parse_expr(text)
        check = check_relation(fn.body.op, [p.type_annotation for p in fn.params], fn.body.attrs)
        if not check.ok:
            failures.append(f"{text}\n    -> {check.error or check.wrong}")
    assert not failures, "\n".join(failures)
