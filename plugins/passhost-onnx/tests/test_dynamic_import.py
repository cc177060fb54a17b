"""Real models with dynamic axes, imported without shapes: they stay symbolic and run right.

``data/torch/dynamic/`` holds the 14 PyTorch models of ``data/torch/`` exported with dynamic
batch, sequence and image axes, by the TorchScript exporter at opset 17 (``NAME.dyn.ts17.onnx``)
and by the dynamo exporter at opset 18 (``NAME.dyn.dynamo.onnx``); ``data/llm/`` holds tiny
GPT-2, Llama, Qwen2 and T5 exports with their KV cache (optimum), whose graphs are largely
shape arithmetic (``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``, masks from ``Range``,
``Expand`` of ``Where(Equal(shape, -1), 1, shape)``, T5's position buckets).

Each file is imported with ``ir.load(path)`` and no input shapes. Every dynamic input axis must
import as its size variable (or, where the exporter wrote an expression such as
``16*length_div16`` or ``past_sequence_length + sequence_length``, as that expression), and
``ir.evaluate`` must give onnxruntime's outputs on the original file at three bindings of the
size variables, each variable taking three sizes: batch 1, 3 and 5; sequence and image sizes
that are neither 1 nor powers of two and that the model accepts (export_models.py's
``DYNAMIC_VALUES``); the LLMs' past length 0, 5 and 7 (an empty cache first). The outputs'
``dim_param`` names are not checked: some exporters write wrong ones.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from passhost import ir

ort = pytest.importorskip("onnxruntime")

DATA = Path(__file__).parent / "data"
TORCH = sorted(p.name for p in (DATA / "torch" / "dynamic").glob("*.onnx"))
LLM = ["gpt2/model.onnx", "llama/model.onnx", "qwen2/model.onnx", "t5/encoder_model.onnx", "t5/decoder_model.onnx",
       "t5/decoder_with_past_model.onnx"]

#: the three sizes of each size variable, by its name in the files (export_models.py's
#: DYNAMIC_VALUES; the dynamo exporter writes audio1d's length as 16*length_div16 and unetish's
#: height and width as 2*half_height, 2*half_width)
SIZES = {
    "batch": (1, 3, 5), "seq": (5, 7, 11), "tgt_seq": (5, 7, 11), "mem_seq": (6, 9, 13), "features": (3, 6, 9),
    "grid_h": (3, 5, 7), "grid_w": (3, 6, 7), "length": (80, 112, 176), "length_div16": (5, 7, 11),
    "depth": (5, 7, 10), "half_height": (12, 20, 23), "half_width": (12, 20, 23),
    # the LLMs (optimum's names)
    "batch_size": (1, 3, 5), "sequence_length": (3, 5, 7), "past_sequence_length": (0, 5, 7),
    "encoder_sequence_length": (3, 5, 7), "decoder_sequence_length": (3, 5, 7),
    "past_decoder_sequence_length": (0, 5, 7),
}
#: per model, the sizes of its image axes (export_models.py's DYNAMIC_VALUES)
IMAGE = {"small_resnet": (40, 56, 72), "mobile_block": (24, 40, 45), "unetish": (24, 40, 46), "conv3d": (5, 7, 10)}
#: integer inputs are token ids below the model's vocabulary size
VOCAB = {"tiny_transformer": 100, "causal_lm": 50, "embed_glu": 20}


def _sizes(model: str, var: str) -> tuple:
    if var in ("height", "width"):
        return IMAGE[model.split(".")[0]]
    return SIZES[var]


def _dims(vi: onnx.ValueInfoProto) -> list:
    return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in vi.type.tensor_type.shape.dim]


def _variables(model: onnx.ModelProto) -> list:
    names: dict = {}
    for vi in model.graph.input:
        for d in _dims(vi):
            if isinstance(d, str):
                for v in sorted(ir.dims.free_size_vars(ir.dims.parse_dim(d))):
                    names.setdefault(v, None)
    return list(names)


def _bindings(name: str, model: onnx.ModelProto) -> list:
    """Three bindings: the k-th size of every variable in the k-th."""
    variables = _variables(model)
    return [{v: _sizes(name, v)[k] for v in variables} for k in range(3)]


def _shape(vi: onnx.ValueInfoProto, binding: dict) -> tuple:
    return tuple(d if isinstance(d, int) else ir.dims.evaluate_dim(ir.dims.parse_dim(d), binding) for d in _dims(vi))


def _feeds(name: str, model: onnx.ModelProto, binding: dict, rng: np.random.Generator) -> dict:
    feeds = {}
    for vi in model.graph.input:
        shape = _shape(vi, binding)
        n = vi.name
        elem = vi.type.tensor_type.elem_type
        if n == "position_ids":
            past = binding.get("past_sequence_length", 0)
            feeds[n] = np.broadcast_to(np.arange(past, past + shape[1], dtype=np.int64), shape).copy()
        elif "attention_mask" in n:
            mask = np.ones(shape, np.int64)
            if shape[0] > 1 and shape[1] > 2:
                mask[-1, 0] = 0  # a padded first position in the last row
            feeds[n] = mask
        elif elem == onnx.TensorProto.INT64:
            feeds[n] = rng.integers(0, VOCAB.get(name.split(".")[0], 256), shape).astype(np.int64)
        elif name.startswith("image_ops") and n == "in1":
            feeds[n] = (rng.random(shape) * 2 - 1).astype(np.float32)  # a sampling grid in [-1, 1]
        else:
            feeds[n] = rng.standard_normal(shape).astype(np.float32)
    return feeds


_MODULES: dict = {}


def _imported(path: Path):
    key = str(path)
    if key not in _MODULES:
        _MODULES[key] = ir.load(key)
    return _MODULES[key]


def _check(name: str, path: Path, tol: dict) -> None:
    model = onnx.load(str(path), load_external_data=False)
    mod = _imported(path)
    params = mod["main"].params
    inputs = [vi for vi in model.graph.input if vi.name not in {t.name for t in model.graph.initializer}]
    assert [p.name_hint for p in params[:len(inputs)]] == [vi.name for vi in inputs]
    for p, vi in zip(params, inputs):  # each dynamic axis is its size variable (or the file's expression)
        want = tuple(d if isinstance(d, int) else ir.dims.parse_dim(d) for d in _dims(vi))
        assert tuple(p.checked_type.shape) == want, (vi.name, p.checked_type, want)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for binding in _bindings(name, model):
        feeds = _feeds(name, model, binding, rng)
        want = sess.run(None, feeds)
        got = ir.evaluate(mod, *[feeds[vi.name] for vi in inputs])
        got = list(got) if isinstance(got, tuple) else [got]
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            g = np.asarray(g)
            assert g.shape == w.shape and g.dtype == w.dtype, (binding, i, g.shape, w.shape, g.dtype, w.dtype)
            msg = f"{name} output {model.graph.output[i].name} at {binding}"
            if w.dtype.kind == "f":
                np.testing.assert_allclose(g, w, err_msg=msg, **tol)
            else:
                np.testing.assert_array_equal(g, w, err_msg=msg)


@pytest.mark.parametrize("name", TORCH)
def test_a_dynamic_pytorch_export_imports_symbolic_and_runs_at_three_sizes(name):
    _check(name, DATA / "torch" / "dynamic" / name, dict(rtol=1e-4, atol=1e-5))


@pytest.mark.parametrize("name", LLM)
def test_an_llm_with_its_kv_cache_imports_symbolic_and_runs_at_three_sizes(name):
    _check(name, DATA / "llm" / name, dict(rtol=1e-4, atol=1e-5))


# -- single operators over dynamic sizes, beside the whole models --------------------------
MS = "com.microsoft"


def _w(rng, name, *shape):
    return onnx.numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)


def _graphs() -> dict:
    """name -> (model, {input: shape with names}, sizes of each name): converters whose
    dynamic paths the models above do not all take (a recurrence in both directions with
    initial states, a backward Scan, SAME padding with a stride, ceil_mode, a fractional
    Resize, a layer norm over two dynamic axes, onnxruntime's fused attention and
    embeddings)."""
    rng = np.random.default_rng(3)
    h = onnx.helper
    F = onnx.TensorProto.FLOAT
    out: dict = {}

    def model(nodes, inputs, inits=(), opsets=(("", 17),)):
        int32 = {"mask_index"}  # (EmbedLayerNormalization's mask lengths)
        g = h.make_graph(nodes, "g", [h.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                         [h.make_tensor_value_info(o, onnx.TensorProto.INT32 if o in int32 else F, None)
                          for o in nodes[-1].output if o], initializer=list(inits))
        return h.make_model(g, opset_imports=[h.make_opsetid(d, v) for d, v in opsets])

    out["lstm_bidirectional"] = model(
        [h.make_node("LSTM", ["x", "w", "r", "b", "", "h0", "c0"], ["y", "yh", "yc"], hidden_size=4,
                     direction="bidirectional")],
        [("x", F, ["seq", "batch", 3]), ("h0", F, [2, "batch", 4]), ("c0", F, [2, "batch", 4])],
        [_w(rng, "w", 2, 16, 3), _w(rng, "r", 2, 16, 4), _w(rng, "b", 2, 32)])
    body = h.make_graph([h.make_node("Add", ["s", "x"], ["s2"]), h.make_node("Identity", ["s2"], ["y"])], "body",
                        [h.make_tensor_value_info("s", F, [2]), h.make_tensor_value_info("x", F, [2])],
                        [h.make_tensor_value_info("s2", F, [2]), h.make_tensor_value_info("y", F, [2])])
    out["scan_backward"] = model(
        [h.make_node("Scan", ["s0", "xs"], ["s", "ys"], body=body, num_scan_inputs=1, scan_input_directions=[1])],
        [("s0", F, [2]), ("xs", F, ["seq", 2])])
    out["conv_same_stride"] = model(
        [h.make_node("Conv", ["x", "w"], ["c"], auto_pad="SAME_UPPER", strides=[2, 2]),
         h.make_node("MaxPool", ["c"], ["y"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)],
        [("x", F, ["batch", 2, "height", "width"])], [_w(rng, "w", 3, 2, 3, 3)])
    out["resize_fraction"] = model(
        [h.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear")],
        [("x", F, ["batch", 2, "height", "width"])],
        [onnx.numpy_helper.from_array(np.array([1, 1, 0.6, 2.0], np.float32), "scales")], (("", 13),))
    out["layer_norm_two_axes"] = model(
        [h.make_node("LayerNormalization", ["x", "g"], ["y"], axis=1)],
        [("x", F, ["batch", "seq", "features"]), ("g", F, ["seq", "features"])])
    out["ms_attention_causal"] = model(
        [h.make_node("Attention", ["x", "w", "bias", "m"], ["y"], domain=MS, num_heads=2, unidirectional=1)],
        [("x", F, ["batch", "seq", 6]), ("m", onnx.TensorProto.INT32, ["batch"])],
        [_w(rng, "w", 6, 24), _w(rng, "bias", 24)], (("", 17), (MS, 1)))
    out["ms_embed_layer_norm"] = model(
        [h.make_node("EmbedLayerNormalization", ["ids", "", "word", "pos", "", "gamma", "beta"], ["y", "mask_index"],
                     domain=MS)],
        [("ids", onnx.TensorProto.INT32, ["batch", "seq"])],
        [_w(rng, "word", 30, 8), _w(rng, "pos", 16, 8), _w(rng, "gamma", 8), _w(rng, "beta", 8)], (("", 17), (MS, 1)))
    return out


GRAPHS = _graphs()
GRAPH_SIZES = {"batch": (1, 3, 5), "seq": (3, 5, 7), "height": (6, 9, 11), "width": (5, 7, 10), "features": (3, 5, 6)}


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_an_operator_over_dynamic_sizes_imports_symbolic_and_matches_onnxruntime(name):
    model = GRAPHS[name]
    from passhost_onnx import from_onnx

    mod = from_onnx(model)
    for p, vi in zip(mod["main"].params, model.graph.input):
        assert tuple(p.checked_type.shape) == tuple(d if isinstance(d, int) else ir.size_var(d) for d in _dims(vi))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    for k in range(3):
        binding = {v: GRAPH_SIZES[v][k] for v in _variables(model)}
        feeds = {}
        for vi in model.graph.input:
            shape = _shape(vi, binding)
            if vi.name == "ids":
                feeds[vi.name] = rng.integers(0, 30, shape).astype(np.int32)
            elif vi.name == "m":  # key lengths of each row
                feeds[vi.name] = rng.integers(1, binding["seq"] + 1, shape).astype(np.int32)
            else:
                feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
        want = sess.run(None, feeds)
        got = ir.evaluate(mod, *[feeds[vi.name] for vi in model.graph.input])
        got = list(got) if isinstance(got, tuple) else [got]
        for g, w in zip(got, want):
            assert g.shape == w.shape, (name, binding, g.shape, w.shape)
            assert g.dtype == w.dtype, (name, g.dtype, w.dtype)
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=f"{name} at {binding}")
