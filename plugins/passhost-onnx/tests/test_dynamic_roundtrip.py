"""PyTorch models exported with dynamic axes round-trip dynamic (issue 32's goal).

Each file of ``data/torch/dynamic/`` (14 models, TorchScript and dynamo exporters, see
``export_models.py --dynamic``) is imported with no shape given, optimised with ``-O3`` and
exported. The export keeps every input's and output's dimensions under the names they were
written with, and onnxruntime gives the original's outputs at three bindings of every size
variable (batch 1, 3 and 5; sequence and image sizes that are neither 1 nor powers of two),
and has no more nodes than onnxslim's output of the same file.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

import passhost
from passhost import ir, transform
from passhost_onnx import to_onnx

HERE = Path(__file__).parent
FILES = sorted((HERE / "data" / "torch" / "dynamic").glob("*.onnx"))

#: three values per size variable, by name (export_models.py's DYNAMIC_VALUES); dynamo names
#: an even height 2*half_height and a length 16*length_div16
SIZES = {
    "batch": (1, 3, 5), "seq": (5, 7, 11), "tgt_seq": (5, 7, 11), "mem_seq": (6, 9, 13), "features": (3, 6, 9),
    "grid_h": (3, 5, 7), "grid_w": (3, 6, 7), "length": (80, 112, 176), "length_div16": (5, 7, 11),
    "depth": (5, 7, 10), "half_height": (12, 20, 23), "half_width": (12, 20, 23),
}
#: per-model sizes where a model needs its own (image sizes)
MODEL_SIZES = {
    "small_resnet": {"height": (40, 56, 72), "width": (40, 56, 72)},
    "mobile_block": {"height": (24, 40, 45), "width": (24, 40, 45)},
    "unetish": {"height": (24, 40, 46), "width": (24, 40, 46)},
    "conv3d": {"height": (5, 7, 10), "width": (5, 7, 10)},
    "image_ops": {"height": (6, 10, 12), "width": (6, 10, 12)},
}
#: token ids stay below the model's vocabulary
VOCAB = {"tiny_transformer": 100, "causal_lm": 50, "embed_glu": 20}


def _dims(vi):
    return [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]


def _feeds(model: onnx.ModelProto, name: str, which: int) -> dict:
    sizes = {k: v[which] for k, v in SIZES.items()}
    sizes.update({k: v[which] for k, v in MODEL_SIZES.get(name, {}).items()})
    rng = np.random.default_rng(which)
    feeds = {}
    for vi in model.graph.input:
        shape = [d if isinstance(d, int) else ir.dims.evaluate_dim(ir.dims.parse_dim(d), sizes) for d in _dims(vi)]
        if vi.type.tensor_type.elem_type == onnx.TensorProto.INT64:
            feeds[vi.name] = rng.integers(0, VOCAB.get(name, 10), shape).astype(np.int64)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_a_dynamic_export_round_trips_dynamic(path, tmp_path, ort_run):
    name = path.name.split(".")[0]
    mod = ir.load(str(path))
    assert any(not p.checked_type.is_static for p in mod["main"].params), "no size variable was kept"
    with transform.PassContext(opt_level=3):
        mod = passhost.default_pipeline(3)(mod)
    out = tmp_path / "out.onnx"
    ir.save(mod, str(out))
    original, written = onnx.load(str(path), load_external_data=False), onnx.load(str(out))
    for a, b in zip(list(original.graph.input) + list(original.graph.output),
                    list(written.graph.input) + list(written.graph.output)):
        assert (b.name, _dims(b)) == (a.name, _dims(a))
    for which in range(3):
        feeds = _feeds(original, name, which)
        want, got = ort_run(str(path), feeds), ort_run(str(out), feeds)
        for w, g in zip(want, got):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_a_dynamic_export_is_as_small_as_onnxslims(path):
    # issue 32: "as small as the best peer", with every dimension kept (onnx-simplifier's
    # counts are in benchmarks/bench_onnx.py: it is no test dependency)
    onnxslim = pytest.importorskip("onnxslim")
    mod = ir.load(str(path))
    with transform.PassContext(opt_level=3):
        mod = passhost.default_pipeline(3)(mod)
    ours = to_onnx(mod)
    slim = onnxslim.slim(onnx.load(str(path)))
    assert len(ours.graph.node) <= len(slim.graph.node)
