"""Models exported from PyTorch, as users bring them: import, run, ``-O3``, export.

``data/torch/`` holds plain-PyTorch models (a ResNet, a MobileNet block with
squeeze-excitation, transformer encoders, a hand-written causal LM, scaled-dot-product
attention, LSTM/GRU, a U-Net with group norms, a ViT block, a 1-D audio net, a 3-D
convolution, a transformer decoder, image operators, tensor operators, embeddings), each
exported twice: by the TorchScript exporter at opset 17 and by the dynamo exporter at
opset 18 (weights in an external-data file). ``data/torch/export_models.py`` made them
(PyTorch 2.13); the tests need neither.

Each must import, and passhost's interpreter must give onnxruntime's outputs on the
original. After ``-O3``, onnxruntime must give the same outputs on the export. The export
must not have more nodes than the exporter wrote, except where :data:`EXPANDS` says why.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

import passhost
from passhost import ir, transform

DATA = Path(__file__).parent / "data" / "torch"
MODELS = sorted(p.name for p in DATA.glob("*.onnx"))

#: exports whose -O3 result has more nodes than the exporter wrote, and why (checked: a file
#: listed here that no longer expands fails, so the list stays true)
_LSTM = ("LSTM and GRU are unrolled into their per-step cell arithmetic at import, as TVM's importer does; the "
         "export writes that arithmetic, not the recurrent operators")
_SE = ("FoldScaleAxis, as TVM's, folds the squeeze-excitation's scale (a tensor computed at run time) into the "
       "next convolution's weight, which is then computed (Reshape, Reshape, Mul), so that convolution's bias stays "
       "an Add")
EXPANDS = {
    "rnns.ts17.onnx": _LSTM,
    "rnns.dynamo.onnx": _LSTM,
    "mobile_block.ts17.onnx": _SE,
    "mobile_block.dynamo.onnx": _SE,
}


def _feeds(model: onnx.ModelProto) -> dict:
    rng = np.random.default_rng(0)
    feeds = {}
    for vi in model.graph.input:
        t = vi.type.tensor_type
        shape = [d.dim_value for d in t.shape.dim]
        if t.elem_type == onnx.TensorProto.INT64:
            feeds[vi.name] = rng.integers(0, 10, shape).astype(np.int64)  # token ids: every vocabulary is larger
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


@pytest.mark.parametrize("name", MODELS)
def test_a_pytorch_export_runs_optimizes_and_exports_with_onnxruntimes_outputs(name, tmp_path, ort_run):
    src = DATA / name
    original = onnx.load(str(src))
    feeds = _feeds(original)
    want = ort_run(str(src), feeds)
    mod = ir.load(str(src))
    got = ir.evaluate(mod, *feeds.values())
    for g, w in zip([got] if isinstance(got, np.ndarray) else got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    with transform.PassContext(opt_level=3):
        mod = passhost.default_pipeline(3)(mod)
    out = tmp_path / "out.onnx"
    ir.save(mod, str(out))
    for g, w in zip(ort_run(str(out), feeds), want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    exported = onnx.load(str(out))
    assert [i.name for i in exported.graph.input] == [i.name for i in original.graph.input]
    before, after = len(original.graph.node), len(exported.graph.node)
    if name in EXPANDS:
        assert after > before, f"{name} no longer expands ({before} -> {after} nodes): take it out of EXPANDS"
    else:
        assert after <= before, f"{name}: {before} nodes in, {after} out"


def test_the_export_set_covers_both_exporters():
    stems = {n.split(".")[0] for n in MODELS}
    assert len(stems) == 14
    assert all(f"{s}.ts17.onnx" in MODELS and f"{s}.dynamo.onnx" in MODELS for s in stems)
    assert set(EXPANDS) <= set(MODELS)


@pytest.mark.parametrize("name", ["rnns.ts17.onnx", "rnns.dynamo.onnx"])
def test_recurrent_layers_kept_whole_come_back_as_they_were(name, tmp_path, ort_run):
    src = DATA / name
    original = onnx.load(str(src))
    feeds = _feeds(original)
    mod = ir.load(str(src), keep_ops=("LSTM", "GRU"))
    assert ir.count_ops(mod["main"])["onnx.opaque"] == 3  # two LSTM layers and a GRU
    with transform.PassContext(opt_level=3):
        mod = passhost.default_pipeline(3)(mod)
    out = tmp_path / "out.onnx"
    ir.save(mod, str(out))
    exported = onnx.load(str(out))
    kinds = [n.op_type for n in exported.graph.node]
    assert kinds.count("LSTM") == 2 and kinds.count("GRU") == 1
    assert len(kinds) <= len(original.graph.node)
    # (exact by construction: the same LSTM and GRU kernels on the same weights and inputs,
    # in one thread, on one machine)
    for got, want in zip(ort_run(str(out), feeds), ort_run(str(src), feeds)):
        np.testing.assert_array_equal(got, want)
