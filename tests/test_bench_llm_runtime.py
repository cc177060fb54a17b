"""Smoke test of benchmarks/bench_llm_runtime.py (issue 34): on tests/data/llm's tiny Llama, one
short round times every variant in both phases and levels, and passhost's outputs agree with the
original's."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxslim")
pytest.importorskip("passhost_onnx")

from benchmarks import bench_llm_runtime  # noqa: E402


def test_one_short_round_on_the_tiny_llama(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert bench_llm_runtime.main(["--models", "tiny", "--only", "llama", "--rounds", "1", "--burst-seconds", "0.001",
                                   "--json", str(out)]) == 0
    [result] = json.loads(out.read_text())["results"]
    for phase in ("prefill", "decode"):
        ph = result["phases"][phase]
        assert set(ph["ms"]) == {f"{v}/{lv}" for v in bench_llm_runtime.VARIANTS for lv in ("all", "basic")}
        assert max(ph["max_abs_diff"][v] for v in bench_llm_runtime.MINE) < 1e-4
        assert ph["nodes"]["passhost-23"] < ph["nodes"]["onnxslim"] < ph["nodes"]["original"]
    assert "llama decode (1 new, 127 cached)" in capsys.readouterr().out
