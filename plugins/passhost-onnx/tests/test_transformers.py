"""Transformer encoders in and out: a BERT-style encoder in the opset-13 decomposed
spelling (built here with onnx.helper) and onnxscript's BART and Whisper encoders. Each is
imported, optimised with -O3 and exported; onnxruntime (optimisations off) agrees with the
original, no shape arithmetic is left, and the graph is smaller."""
from __future__ import annotations

import importlib
from collections import Counter

import numpy as np
import onnx
import pytest

import passhost
from passhost import ir, transform
from passhost.cli import main

from passhost_onnx.bert import make_bert

pytest.importorskip("onnxruntime")

SEQ = 16


def _optimise(path, out, shapes, opset=None):
    mod = ir.load(str(path), input_shapes=shapes)
    with transform.PassContext(opt_level=3):
        opt = passhost.default_pipeline(3)(mod)
    ir.save(opt, str(out), **({} if opset is None else {"opset": opset}))
    model = onnx.load(str(out))
    onnx.checker.check_model(model)
    return model


def _feeds(model, seq=SEQ):
    rng = np.random.RandomState(3)
    feeds = {}
    for vi in model.graph.input:
        if vi.name == "input_ids":
            feeds[vi.name] = rng.randint(0, 100, size=(1, seq)).astype("int64")
        elif vi.name == "attention_mask":
            mask = np.ones((1, seq), "int64")
            mask[0, seq - 5:] = 0  # padding at the end
            feeds[vi.name] = mask
        else:
            dims = [d.dim_value or 1 for d in vi.type.tensor_type.shape.dim]
            feeds[vi.name] = rng.randn(*dims).astype("float32")
    return feeds


def _ratio(got, want, rtol=1e-4, atol=1e-5) -> float:
    """How far ``got`` is from ``want`` in units of the tolerance ``atol + rtol * |want|``."""
    return float((np.abs(got.astype("float64") - want) / (atol + rtol * np.abs(want))).max())


def _ort_basic(path, feeds):
    ort = pytest.importorskip("onnxruntime")
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    opts.intra_op_num_threads = 1  # (as conftest's runner: one summation order whatever the core count)
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"]).run(None, feeds)


def _agree(ort_run, original, optimised, feeds, noisy=False):
    """onnxruntime (optimisations off) gives the optimised model the original's outputs
    within rtol 1e-4 / atol 1e-5. ``noisy``: a model on which onnxruntime itself moves that
    far when it only folds constants (prepacked MatMul weights sum in another order); the
    optimised model may then differ by up to twice onnxruntime's own deviation."""
    want = ort_run(original, feeds)
    got = ort_run(optimised, feeds)
    assert len(got) == len(want)
    own = [_ratio(b, a) for a, b in zip(want, _ort_basic(original, feeds))] if noisy else [0.0] * len(want)
    for a, b, noise in zip(want, got, own):
        assert a.shape == b.shape and a.dtype == b.dtype
        assert _ratio(b, a) <= max(1.0, 2 * noise), (_ratio(b, a), noise)


def _ops(model) -> Counter:
    return Counter(n.op_type for n in model.graph.node)


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    path = tmp_path_factory.mktemp("bert") / "bert.onnx"
    onnx.save(make_bert(layers=2, hidden=32, heads=4), str(path))
    return path


SHAPES = {"input_ids": (1, SEQ), "attention_mask": (1, SEQ)}


def test_bert_opset13_keeps_its_opset_folds_shapes_and_agrees(bert, tmp_path, ort_run):
    before = onnx.load(str(bert))
    after = _optimise(bert, tmp_path / "opt.onnx", SHAPES)
    assert after.opset_import[0].version == 13
    ops = _ops(after)
    for shape_op in ("Shape", "Range", "Concat", "Unsqueeze", "ConstantOfShape", "Cast"):
        assert shape_op not in ops, f"{shape_op} is left after -O3: {ops}"
    assert len(after.graph.node) < len(before.graph.node)
    # the attention products stay 4-D MatMuls, as the model wrote them (no 3-D detour)
    assert ops["MatMul"] == _ops(before)["MatMul"]
    made_by = {o: n.op_type for n in after.graph.node for o in n.output}
    assert not [n for n in after.graph.node
                if n.op_type == "MatMul" and [made_by.get(x) for x in n.input] == ["Reshape", "Reshape"]]
    assert [i.name for i in after.graph.input] == ["input_ids", "attention_mask"]
    _agree(ort_run, str(bert), str(tmp_path / "opt.onnx"), _feeds(before))


def test_bert_at_a_newer_opset_gets_one_node_per_layernorm_and_gelu(bert, tmp_path, ort_run):
    after = _optimise(bert, tmp_path / "opt20.onnx", SHAPES, opset=20)
    ops = _ops(after)
    assert ops["LayerNormalization"] == 5 and ops["Gelu"] == 2, ops
    assert "Erf" not in ops and "ReduceMean" not in ops and "Pow" not in ops
    assert len(after.graph.node) < 90
    _agree(ort_run, str(bert), str(tmp_path / "opt20.onnx"), _feeds(onnx.load(str(bert))))


def test_bert_through_the_cli_with_input_shapes(bert, tmp_path, capsys):
    out = tmp_path / "cli.onnx"
    code = main(["run", str(bert), "-O3", "-o", str(out), "--input-shape", "input_ids=1,128",
                 "--input-shape", "attention_mask=1,128", "--opset", "17", "--check"])
    err = capsys.readouterr().err
    assert code == 0, err
    row = next(line for line in err.splitlines() if line.startswith("bert.onnx"))
    assert row.rstrip().endswith("ok")
    model = onnx.load(str(out))
    dims = [[d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input]
    assert dims == [[1, 128], [1, 128]]
    assert _ops(model)["LayerNormalization"] == 5


def _onnxscript_encoder(name):
    # private modules of onnxscript (pinned in the test extra): skip cleanly if they move
    module = pytest.importorskip(f"onnxscript.rewriter.models.{name}")
    model = module.make_model_with_random_weights()
    if not isinstance(model, onnx.ModelProto):
        import onnx_ir

        model = onnx_ir.serde.serialize_model(model)
    return model


@pytest.mark.parametrize("name,shapes", [("_bart_encoder", {"input_ids": (1, SEQ)}), ("_whisper_encoder", None)])
def test_onnxscript_encoders_round_trip(name, shapes, tmp_path, ort_run):
    model = _onnxscript_encoder(name)
    src = tmp_path / f"{name}.onnx"
    onnx.save(model, str(src))
    after = _optimise(src, tmp_path / "opt.onnx", shapes)
    assert "Shape" not in _ops(after) and "CastLike" not in _ops(after)
    assert len(after.graph.node) < len(model.graph.node)
    assert _ops(after)["LayerNormalization"] == _ops(model)["LayerNormalization"]
    _agree(ort_run, str(src), str(tmp_path / "opt.onnx"), _feeds(model), noisy=name == "_whisper_encoder")


def test_scalar_initializers_stay_scalars(tmp_path):
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "i"], ["g"], axis=0)]
    out = helper.make_tensor_value_info("g", TensorProto.INT64, None)
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [out], [onnx.numpy_helper.from_array(np.int64(1), "i")]),
                              opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, str(tmp_path / "m.onnx"))
    body = ir.load(str(tmp_path / "m.onnx"))["main"].body
    assert body.checked_type == ir.TensorType((), "int64") and int(body.data) == 3


def test_importlib_finds_the_pinned_onnxscript():
    # the test extra pins onnxscript; when it is installed, its encoder modules must import
    if importlib.util.find_spec("onnxscript") is None:
        pytest.skip("onnxscript is not installed (a test extra)")
    importlib.import_module("onnxscript.rewriter.models._bart_encoder")
