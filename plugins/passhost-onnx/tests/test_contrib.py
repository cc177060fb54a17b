"""onnxruntime's com.microsoft operators (passhost_onnx.convert_contrib) against
onnxruntime itself, imported, through -O3 and exported as standard ONNX."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import passhost
from passhost import ir, transform
from passhost_onnx import to_onnx

MS = "com.microsoft"
RNG = np.random.default_rng(12)


def _vec(name, n):
    return numpy_helper.from_array(RNG.standard_normal(n).astype(np.float32), name)


def _plain_onnx_matches_onnxruntime(model, x, ort_run):
    """``model`` imported, its interpreter output, and after ``-O3`` its export (checked, all
    standard-domain nodes) in onnxruntime, against onnxruntime on ``model``."""
    from passhost_onnx import from_onnx

    want, = ort_run(model.SerializeToString(), {"x": x})
    mod = from_onnx(model)
    np.testing.assert_allclose(ir.evaluate(mod, x), want, rtol=1e-4, atol=1e-5)
    with transform.PassContext(opt_level=3):
        opt = passhost.default_pipeline(3)(mod)
    out = to_onnx(opt)
    onnx.checker.check_model(out)
    assert all(n.domain in ("", "ai.onnx") for n in out.graph.node)   # plain ONNX out
    got, = ort_run(out.SerializeToString(), {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


CASES = {
    "Gelu": ([], {}, []),
    "FastGelu": (["b"], {}, [_vec("b", 8)]),
    "BiasGelu": (["b"], {}, [_vec("b", 8)]),
    "QuickGelu": ([], {"alpha": 1.5}, []),
    "SkipLayerNormalization": (["skip", "g", "beta", "bias"], {"epsilon": 1e-5},
                               [numpy_helper.from_array(RNG.standard_normal((2, 5, 8)).astype(np.float32), "skip"),
                                _vec("g", 8), _vec("beta", 8), _vec("bias", 8)]),
    "FusedMatMul": (["w"], {"transB": 1, "alpha": 0.5},
                    [numpy_helper.from_array(RNG.standard_normal((6, 8)).astype(np.float32), "w")]),
}


@pytest.mark.parametrize("op", sorted(CASES))
def test_contrib_operators_match_onnxruntime_and_export_as_standard_onnx(op, ort_run):
    extra, attrs, inits = CASES[op]
    node = helper.make_node(op, ["x", *extra], ["y"], domain=MS, **attrs)
    graph = helper.make_graph([node], "ms", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    _plain_onnx_matches_onnxruntime(model, RNG.standard_normal((2, 5, 8)).astype(np.float32), ort_run)


def test_bias_add_is_the_sum_of_its_three_inputs():
    # (onnxruntime implements BiasAdd on CUDA only: checked against its definition)
    node = helper.make_node("BiasAdd", ["x", "b", "s"], ["y"], domain=MS)
    graph = helper.make_graph([node], "ms", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 8]),
                                             helper.make_tensor_value_info("s", TensorProto.FLOAT, [2, 5, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[_vec("b", 8)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    from passhost_onnx import from_onnx

    x, s = RNG.standard_normal((2, 2, 5, 8)).astype(np.float32)
    b = numpy_helper.to_array(graph.initializer[0])
    np.testing.assert_allclose(ir.evaluate(from_onnx(model), x, s), x + b + s, rtol=1e-6)


@pytest.mark.parametrize("mask,attrs", [(None, {}), ("raw", {}), ("lengths", {}), (None, {"unidirectional": 1}),
                                        ("raw", {"unidirectional": 1, "scale": 0.2}),
                                        (None, {"qkv_hidden_sizes": [8, 8, 12]})])
def test_attention_matches_onnxruntime(mask, attrs, ort_run):
    b, s, hin, heads = 2, 5, 6, 2
    sizes = attrs.get("qkv_hidden_sizes", [8, 8, 8])
    inits = [numpy_helper.from_array(RNG.standard_normal((hin, sum(sizes))).astype(np.float32), "w"),
             numpy_helper.from_array(RNG.standard_normal(sum(sizes)).astype(np.float32), "bias")]
    inputs = ["x", "w", "bias"]
    if mask == "raw":
        inits.append(numpy_helper.from_array(np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32), "m"))
        inputs.append("m")
    elif mask == "lengths":
        inits.append(numpy_helper.from_array(np.array([3, 5], np.int32), "m"))
        inputs.append("m")
    node = helper.make_node("Attention", inputs, ["y"], domain=MS, num_heads=heads, **attrs)
    graph = helper.make_graph([node], "attn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [b, s, hin])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    _plain_onnx_matches_onnxruntime(model, RNG.standard_normal((b, s, hin)).astype(np.float32), ort_run)


@pytest.mark.parametrize("segments,mask,positions", [(True, True, False), (False, False, False), (True, True, True)])
def test_embed_layer_normalization_matches_onnxruntime(segments, mask, positions, ort_run):
    b, s, h, vocab = 2, 6, 8, 30
    inits = [numpy_helper.from_array(RNG.standard_normal((vocab, h)).astype(np.float32), "word"),
             numpy_helper.from_array(RNG.standard_normal((16, h)).astype(np.float32), "pos"),
             numpy_helper.from_array(RNG.standard_normal((2, h)).astype(np.float32), "seg"),
             _vec("gamma", h), _vec("beta", h)]
    inputs = ["ids", "segs" if segments else "", "word", "pos", "seg" if segments else "", "gamma", "beta",
              "mask" if mask else "", "posids" if positions else ""]
    feeds = {"ids": RNG.integers(0, vocab, (b, s)).astype(np.int32)}
    infos = [helper.make_tensor_value_info("ids", TensorProto.INT32, [b, s])]
    if segments:
        feeds["segs"] = RNG.integers(0, 2, (b, s)).astype(np.int32)
        infos.append(helper.make_tensor_value_info("segs", TensorProto.INT32, [b, s]))
    if mask:
        feeds["mask"] = np.array([[1, 1, 1, 1, 0, 0], [1] * 6], np.int32)
        infos.append(helper.make_tensor_value_info("mask", TensorProto.INT32, [b, s]))
    if positions:
        feeds["posids"] = RNG.integers(0, 16, (b, s)).astype(np.int32)
        infos.append(helper.make_tensor_value_info("posids", TensorProto.INT32, [b, s]))
    while inputs[-1] == "":
        inputs.pop()
    node = helper.make_node("EmbedLayerNormalization", inputs, ["y", "mask_index"], domain=MS, epsilon=1e-5)
    graph = helper.make_graph([node], "emb", infos, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                                                     helper.make_tensor_value_info("mask_index", TensorProto.INT32,
                                                                                   None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    want = ort_run(model.SerializeToString(), feeds)
    from passhost_onnx import from_onnx

    mod = from_onnx(model)
    for got, w in zip(ir.evaluate(mod, *feeds.values()), want):
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-5)
    out = to_onnx(mod)
    assert all(n.domain in ("", "ai.onnx") for n in out.graph.node)
    for got, w in zip(ort_run(out.SerializeToString(), feeds), want):
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-5)


def test_a_bert_optimized_by_onnxruntimes_transformer_optimizer_imports_and_matches(tmp_path, ort_run):
    """onnxruntime's optimizer writes SkipLayerNormalization, BiasGelu and a default-domain
    LayerNormalization at opset 13 (ONNX has it from 17): all import, -O3 and export."""
    optimizer = pytest.importorskip("onnxruntime.transformers.optimizer")
    from passhost_onnx.bert import make_bert

    onnx.save(make_bert(layers=2, hidden=32, heads=4), str(tmp_path / "bert.onnx"))
    fused = optimizer.optimize_model(str(tmp_path / "bert.onnx"), model_type="bert", num_heads=4, hidden_size=32,
                                     opt_level=0)
    fused.save_model_to_file(str(tmp_path / "fused.onnx"))
    ops = {(n.domain, n.op_type) for n in onnx.load(str(tmp_path / "fused.onnx")).graph.node}
    assert (MS, "SkipLayerNormalization") in ops and ("", "LayerNormalization") in ops
    feeds = {"input_ids": RNG.integers(0, 100, (2, 16)).astype(np.int64),
             "attention_mask": np.array([[1] * 16, [1] * 10 + [0] * 6], np.int64)}
    want, = ort_run(str(tmp_path / "fused.onnx"), feeds)
    mod = passhost.ir.load(str(tmp_path / "fused.onnx"), input_shapes={"input_ids": (2, 16),
                                                                        "attention_mask": (2, 16)})
    np.testing.assert_allclose(ir.evaluate(mod, *feeds.values()), want, rtol=1e-4, atol=1e-4)
    with transform.PassContext(opt_level=3):
        opt = passhost.default_pipeline(3)(mod)
    passhost.ir.save(opt, str(tmp_path / "out.onnx"))
    got, = ort_run(str(tmp_path / "out.onnx"), feeds)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
