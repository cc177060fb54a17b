"""Smoke test of benchmarks/bench_executors.py (issue 36): its generated models are valid
ONNX that passhost reads, and its report renders. The timing itself (``--executor dask``
against ``-j 2``) is never part of pass/fail; run the script for it."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # benchmarks/ is a top-level package of the repository, not installed
    sys.path.insert(0, str(ROOT))

from benchmarks import bench_executors  # noqa: E402


def test_generated_models_are_valid_onnx_that_passhost_reads(tmp_path):
    from passhost import ir

    paths = bench_executors.write_models("generated", 2, tmp_path, blocks=3)
    onnx.checker.check_model(paths[0])
    assert Path(paths[0]).read_bytes() != Path(paths[1]).read_bytes()  # seeded per model
    try:
        mod = ir.load(paths[0])
    except Exception as err:  # no ONNX format installed: the checker's word is enough
        pytest.skip(f"passhost cannot read ONNX here: {err}")
    assert sum(ir.count_ops(mod["main"]).values()) >= 3 * 7


def test_the_report_renders_the_ratio_and_the_verdict():
    report = {"models": "generated", "count": 50, "check": False, "rounds": 2, "input_bytes": 11.8e6,
              "walls": {"local -j 2": [8.0, 8.2], "dask -j 2": [9.0, 9.4]},
              "medians": {"local -j 2": 8.1, "dask -j 2": 9.2}, "ratio": 9.2 / 8.1, "goal_ratio": 1.2,
              "goal_met": True, "outputs_identical": True}
    text = bench_executors.render(report)
    assert "dask / local = 1.14x (goal <= 1.2x: met); outputs byte-identical: yes" in text
    assert "local -j 2   median   8.10 s" in text
