"""Record the operator calls the test suite types, as cases for the symbolic-shape tests.

Runs pytest in this process on the given test paths with every core operator's type
relation wrapped: each distinct static call (operator, argument types, attributes) is
kept, up to ``--per-op`` per operator, and written as one line of text per case::

    nn.conv2d<TAB>fn (%a0: Tensor[(1, 3, 8, 8), float32], %a1: Tensor[(4, 3, 3, 3), float32]) { nn.conv2d(%a0, %a1, padding=[1, 1, 1, 1]) }

``tests/test_symbolic_ops.py`` reads the file back, replaces the dimensions of each case
by size variables, and checks that every relation types it and agrees with its static
answer. Regenerate after adding operators::

    python scripts/record_op_cases.py tests/test_ops*.py plugins/passhost-onnx/tests/test_conformance.py \\
        -o tests/data/op_cases.txt
"""
from __future__ import annotations

import argparse
import dataclasses
import sys

import pytest

from passhost import ir
from passhost.ir import TensorType, TupleType


def _plain(t) -> bool:
    """A static tensor type, or a tuple of them (the cases are the suite's static calls)."""
    if type(t) is TensorType:
        return t.is_static
    return type(t) is TupleType and all(type(f) is TensorType and f.is_static for f in t.fields)


class Recorder:
    def __init__(self, per_op: int) -> None:
        self.per_op = per_op
        self.cases: dict = {}

    def wrap(self, name: str, rel):
        cases = self.cases.setdefault(name, {})

        def recorded(types: list, attrs):
            out = rel(types, attrs)
            if len(cases) < self.per_op and all(t is not None and _plain(t) for t in types):
                try:
                    params = [ir.var(f"a{i}", t) for i, t in enumerate(types)]
                    text = ir.astext(ir.Function(params, ir.Call(ir.Op.get(name), params, attrs)))
                except Exception:  # noqa: BLE001 - a call the printer cannot show is not kept
                    return out
                cases.setdefault(" ".join(text.split()), None)
            return out

        return recorded

    def pytest_sessionstart(self, session) -> None:
        for name in ir.list_ops():
            op = ir.Op.get(name)
            if not getattr(op.definition.type_rel, "__module__", "").startswith("passhost.ir.ops"):
                continue
            new = dataclasses.replace(op.definition, type_rel=self.wrap(name, op.definition.type_rel))
            object.__setattr__(op, "_def", new)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--per-op", type=int, default=16)
    args = parser.parse_args(argv)
    rec = Recorder(args.per_op)
    pytest.main(["-q", "-p", "no:cacheprovider", "-x", *args.paths], plugins=[rec])
    lines = [f"{name}\t{text}" for name in sorted(rec.cases) for text in rec.cases[name]]
    with open(args.output, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{len(lines)} cases of {sum(1 for c in rec.cases.values() if c)} operators -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
