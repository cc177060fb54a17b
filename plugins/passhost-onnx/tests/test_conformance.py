"""ONNX's own node test cases (``onnx.backend.test``) through passhost, one test per case.

Every case whose operators all have a converter and that onnxruntime loads is imported,
interpreted and compared with ONNX's expected outputs, then exported and run in
onnxruntime (optimisations off) and compared again. Cases that fail for a known reason
are listed in :data:`EXPECTED_FAILURES` and run as strict xfails, so a fix is noticed.
``conformance_report.py`` writes the per-operator table to ``docs/onnx-conformance.md``.

The symbolic mode runs every case again with its inputs' axes of size 2 or more made
dynamic (``dim_param``s), imported without shapes and interpreted, the size variables bound
from the case's arrays (:func:`conformance.run_case_symbolic`), in both namings of
:func:`conformance.symbolic_model`: ``strict``, one variable per axis of each input, and
``shared``, one per axis position and size. Its known failures
(:func:`conformance.symbolic_failures`) are strict xfails that must fail with their own error.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest

pytest.importorskip("onnxruntime")

from passhost_onnx import conformance  # noqa: E402
from passhost_onnx.known_failures import EXPECTED_FAILURES  # noqa: E402

CASES = conformance.select(conformance.load_cases())
_BY_NAME = {c.name: c for c in CASES}


def _param(case):
    reason = EXPECTED_FAILURES.get(case.name)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(case.name, marks=marks, id=case.name)


@pytest.mark.parametrize("name", [_param(c) for c in CASES])
def test_node_case(name):
    conformance.run_case(_BY_NAME[name])


_SYMBOLIC_FAILURES = {naming: conformance.symbolic_failures(CASES, naming) for naming in conformance.NAMINGS}


class ExpectedSymbolicFailure(Exception):
    """A symbolic case that failed with the error its known failure names."""


def _symbolic_param(case, naming):
    known = _SYMBOLIC_FAILURES[naming].get(case.name)
    marks = [pytest.mark.xfail(strict=True, raises=ExpectedSymbolicFailure, reason=known[0])] if known else []
    return pytest.param(case.name, naming, marks=marks, id=f"{naming}-{case.name}")


@pytest.mark.parametrize("name,naming", [_symbolic_param(c, n) for n in conformance.NAMINGS for c in CASES])
def test_node_case_symbolic(name, naming):
    known = _SYMBOLIC_FAILURES[naming].get(name)
    try:
        conformance.run_case_symbolic(_BY_NAME[name], naming)
    except Exception as err:
        if known and known[1] in str(err):
            raise ExpectedSymbolicFailure(f"{type(err).__name__}: {err}") from err
        raise


def test_the_symbolic_mode_keeps_its_pass_rate():
    # its xfails are strict, so these are the true numbers of failing cases (shared: 81 since the
    # bfloat16 Celu case and the float16 attention ones, rounded as onnxruntime rounds: known_failures.py;
    # 219 and 78 since Attention without a mask imports as nn.attention, no function body to expand)
    for naming, most in (("strict", 219), ("shared", 78)):
        assert len(_SYMBOLIC_FAILURES[naming]) <= most, (naming, len(_SYMBOLIC_FAILURES[naming]))


def test_every_expected_failure_names_a_selected_case():
    stale = sorted(set(EXPECTED_FAILURES) - set(_BY_NAME))
    assert not stale, f"expected failures that are no longer selected: {stale}"


#: the integer products among ONNX's operators, with the input indices of their two operands
_PRODUCTS = {"QLinearConv": (0, 3), "QLinearMatMul": (0, 3), "ConvInteger": (0, 1), "MatMulInteger": (0, 1)}


def test_no_quantized_case_has_a_product_that_onnxruntime_may_saturate():
    """run_case compares onnxruntime's integer outputs exactly. Its kernels are exact on
    every x86-64 instruction set except for u8 x s8 products with int8 values outside
    [-64, 64] (int16 pair sums saturate without VNNI; see conftest.py): none of the
    selected cases has one, so the exact comparison holds by construction."""
    checked = 0
    for case in CASES:
        model = case.model
        names = [vi.name for vi in model.graph.input]
        inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
        for node in model.graph.node:
            if node.op_type not in _PRODUCTS:
                continue
            a, b = (node.input[i] for i in _PRODUCTS[node.op_type])
            for inputs, _ in case.data_sets:
                values = {**dict(zip([n for n in names if n not in inits], map(conformance._array, inputs))),
                          **inits}
                checked += 1
                if values[a].dtype == np.uint8 and values[b].dtype == np.int8:
                    assert np.abs(values[b].astype(int)).max() <= 64, case.name
    assert checked >= 10


def test_pass_rate_meets_the_goal():
    # the xfails above are strict, so this count is the true number of failing cases
    passed = len(CASES) - len(EXPECTED_FAILURES)
    assert len(CASES) > 500
    assert passed / len(CASES) >= 0.95, f"{passed}/{len(CASES)} selected ONNX node cases pass"
