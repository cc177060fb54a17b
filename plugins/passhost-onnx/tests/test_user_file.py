"""The user's file comes back as theirs (issue 36): metadata, doc strings, the producer, the
graph's name, opset imports, node and weight names, and the weights' external layout."""
from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import passhost
from passhost import ir, transform

RNG = np.random.default_rng(0)


def _conv_bn_model() -> onnx.ModelProto:
    inits = [numpy_helper.from_array(RNG.standard_normal((32, 3, 3, 3)).astype("float32"), "conv1.weight"),
             numpy_helper.from_array(RNG.uniform(0.5, 1.5, 32).astype("float32"), "bn1.weight"),
             numpy_helper.from_array(RNG.standard_normal(32).astype("float32"), "bn1.bias"),
             numpy_helper.from_array(RNG.standard_normal(32).astype("float32"), "bn1.running_mean"),
             numpy_helper.from_array(RNG.uniform(0.5, 1.5, 32).astype("float32"), "bn1.running_var"),
             numpy_helper.from_array(RNG.standard_normal((32, 10)).astype("float32"), "fc.weight")]
    nodes = [helper.make_node("Conv", ["x", "conv1.weight"], ["c"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "bn1.weight", "bn1.bias", "bn1.running_mean",
                                                     "bn1.running_var"], ["b"], name="bn1"),
             helper.make_node("Relu", ["b"], ["r"], name="relu1"),
             helper.make_node("GlobalAveragePool", ["r"], ["g"], name="pool"),
             helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
             helper.make_node("MatMul", ["f", "fc.weight"], ["y"], name="fc")]
    graph = helper.make_graph(nodes, "my_net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits,
                              doc_string="the graph's doc")
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="pytorch",
                              producer_version="2.13.0", doc_string="the model's doc", model_version=7)
    helper.set_model_props(model, {"labels": "cat,dog", "author": "me"})
    return model


def _optimise(src: str, dst: str, **save_options) -> onnx.ModelProto:
    mod = ir.load(src)
    with transform.PassContext(opt_level=3):
        mod = passhost.default_pipeline(3)(mod)
    ir.save(mod, dst, **save_options)
    return onnx.load(dst)


def test_metadata_doc_strings_producer_and_graph_name_survive(tmp_path):
    src = str(tmp_path / "m.onnx")
    onnx.save(_conv_bn_model(), src)
    out = _optimise(src, str(tmp_path / "out.onnx"))
    props = {p.key: p.value for p in out.metadata_props}
    assert props == {"labels": "cat,dog", "author": "me", "passhost.original_producer": "pytorch 2.13.0"}
    assert out.producer_name == "passhost" and out.doc_string == "the model's doc" and out.model_version == 7
    assert out.graph.name == "my_net" and out.graph.doc_string == "the graph's doc"


def test_weights_and_nodes_keep_their_names_and_a_folded_weight_is_named_after_its_source(tmp_path):
    src = str(tmp_path / "m.onnx")
    onnx.save(_conv_bn_model(), src)
    out = _optimise(src, str(tmp_path / "out.onnx"))
    names = {t.name for t in out.graph.initializer}
    assert "fc.weight" in names                            # unchanged: kept
    assert "conv1.weight_folded" in names                   # the batch norm folded into it
    assert "conv1.weight" not in names
    node_names = {n.op_type: n.name for n in out.graph.node}
    assert node_names["Relu"] == "relu1" and node_names["GlobalAveragePool"] == "pool"
    x = RNG.standard_normal((2, 3, 8, 8)).astype("float32")
    import onnxruntime as ort

    want = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = ort.InferenceSession(str(tmp_path / "out.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_external_weights_stay_external_in_the_layout_they_had(tmp_path):
    for per_tensor in (False, True):
        folder = tmp_path / ("split" if per_tensor else "one")
        folder.mkdir()
        src = str(folder / "m.onnx")
        onnx.save(_conv_bn_model(), src, save_as_external_data=True, all_tensors_to_one_file=not per_tensor,
                  location="m.onnx.data", size_threshold=0)
        outdir = folder / "out"
        outdir.mkdir()
        out = _optimise(src, str(outdir / "o.onnx"))
        external = [t for t in onnx.load(str(outdir / "o.onnx"), load_external_data=False).graph.initializer
                    if t.data_location == TensorProto.EXTERNAL]
        assert external, "the weights came back inline"  # (those above 1 kB: the export's threshold)
        files = sorted(os.listdir(outdir))
        assert (len(files) > 2) == per_tensor, files
        assert len(out.graph.initializer) >= 2
    # --external-data's one file still overrides an inline model, and an inline model stays inline
    src = str(tmp_path / "inline.onnx")
    onnx.save(_conv_bn_model(), src)
    inline = onnx.load(str(tmp_path / "inline.onnx"))
    assert not any(t.data_location == TensorProto.EXTERNAL for t in inline.graph.initializer)
    _optimise(src, str(tmp_path / "inline.out.onnx"))
    assert not os.path.exists(str(tmp_path / "inline.out.onnx.data"))


def test_a_model_that_came_with_value_info_gets_its_values_types_back(tmp_path, ort_run):
    """PyTorch's dynamo exporter types every intermediate value; the export types each value it
    keeps (symbolic dimensions as dim_param) and onnx's strict shape inference agrees with all."""
    here = os.path.dirname(__file__)
    src = os.path.join(here, "data", "torch", "dynamic", "decoder.dyn.dynamo.onnx")
    assert onnx.load(src, load_external_data=False).graph.value_info
    out = _optimise(src, str(tmp_path / "out.onnx"))
    typed = {vi.name for vi in out.graph.value_info}
    made = {o for n in out.graph.node for o in n.output} - {o.name for o in out.graph.output}
    assert len(typed) > 0.8 * len(made) and typed <= made
    dims = {d.dim_param for vi in out.graph.value_info for d in vi.type.tensor_type.shape.dim}
    assert "batch" in dims
    onnx.shape_inference.infer_shapes(out, strict_mode=True, check_type=True)  # (raises on a conflict)
    feeds = {i.name: RNG.standard_normal([3 if d.dim_param else d.dim_value for d in i.type.tensor_type.shape.dim])
             .astype("float32") for i in out.graph.input}
    np.testing.assert_allclose(ort_run(str(tmp_path / "out.onnx"), feeds)[0], ort_run(src, feeds)[0],
                               rtol=1e-5, atol=1e-5)
    without = str(tmp_path / "plain.onnx")
    onnx.save(_conv_bn_model(), without)  # (no value_info in, none out)
    assert not _optimise(without, str(tmp_path / "plain_out.onnx")).graph.value_info
