"""The nine model-zoo CNNs of the onnx wheel: import, -O3, export; the exported model runs
in onnxruntime (graph optimisations off) and agrees with onnxruntime on the original, and
passhost's interpreter agrees on the imported module."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

import passhost
from passhost import ir, transform

from passhost_onnx.zoo import MODELS

pytest.importorskip("onnxruntime")


# VGG-19 (20 s here, the slowest test by far) is in the slow set: its operators (Conv, Relu,
# MaxPool, Gemm, Dropout, Softmax) are all in AlexNet and ZFNet-512, which stay
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "vgg19" else n for n in MODELS])
def test_model_round_trip_matches_onnxruntime(zoo, tmp_path, name, ort_run):
    path = zoo[name]
    mod = ir.load(path)
    assert mod.attrs["onnx.outputs"] == tuple(o.name for o in onnx.load(path).graph.output)
    with transform.PassContext(opt_level=3):
        opt = passhost.default_pipeline(3)(mod)
    out = str(tmp_path / "opt.onnx")
    ir.save(opt, out, opset=17)
    exported = onnx.load(out)
    onnx.checker.check_model(exported)
    original = onnx.load(path)
    inits = {t.name for t in original.graph.initializer}
    real_inputs = [i.name for i in original.graph.input if i.name not in inits]
    assert [i.name for i in exported.graph.input] == real_inputs
    assert [o.name for o in exported.graph.output] == [o.name for o in original.graph.output]
    param = mod["main"].params[0]
    x = np.random.RandomState(1).uniform(-1, 1, param.checked_type.shape).astype("float32")
    want = ort_run(path, {param.name_hint: x})
    got = ort_run(out, {param.name_hint: x})
    assert len(want) == len(got)
    for a, b in zip(want, got):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
    ours = ir.evaluate(mod, x)
    np.testing.assert_allclose(ours, want[0], rtol=1e-4, atol=1e-5)
    # every batch norm was simplified (folded into a convolution, or left as the exporter's
    # per-channel scale-shift: mean 0, variance 1, epsilon 0)
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in exported.graph.initializer}
    for n in exported.graph.node:
        if n.op_type == "BatchNormalization":
            assert not inits[n.input[3]].any() and (inits[n.input[4]] == 1).all(), n.name


def test_keep_params_returns_the_weights(zoo):
    mod, params = ir.load(zoo["squeezenet"], keep_params=True)
    names = [p.name_hint for p in mod["main"].params]
    assert names[0] == "data_0" and set(names[1:]) == set(params)
    assert all(a.dtype == np.float32 for a in params.values()) and len(params) == 52
    frozen = ir.load(zoo["squeezenet"])
    x = np.random.RandomState(2).uniform(-1, 1, (1, 3, 224, 224)).astype("float32")
    np.testing.assert_allclose(ir.evaluate(mod, x, *[params[n] for n in names[1:]]), ir.evaluate(frozen, x),
                               rtol=1e-5, atol=1e-6)
