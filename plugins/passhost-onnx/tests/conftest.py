"""Fixtures of the passhost-onnx tests: the reseeded model zoo and an onnxruntime runner."""
from __future__ import annotations

import onnx
import pytest

from passhost_onnx.zoo import MODELS, light_path, reseed


@pytest.fixture(scope="session")
def zoo(tmp_path_factory):
    """name -> path of the reseeded model (written once per session)."""
    out = tmp_path_factory.mktemp("zoo")
    paths = {}
    for name in MODELS:
        path = str(out / f"{name}.onnx")
        onnx.save(reseed(onnx.load(light_path(name))), path)
        paths[name] = path
    return paths


def _ort_run(path_or_bytes, feeds: dict) -> list:
    ort = pytest.importorskip("onnxruntime")
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 3
    sess = ort.InferenceSession(path_or_bytes, opts, providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    return sess.run(None, {k: v for k, v in feeds.items() if k in names})


@pytest.fixture
def ort_run():
    """``ort_run(path or bytes, {name: array}) -> [outputs]`` with onnxruntime's optimisations off."""
    pytest.importorskip("onnxruntime")
    return _ort_run
