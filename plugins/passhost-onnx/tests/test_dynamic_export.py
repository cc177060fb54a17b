"""The export of symbolic shapes: size variables written as dim_param, and every symbolic
dimension the graph needs as data computed from the inputs' shapes; onnxruntime runs the
export at several sizes and agrees with passhost's interpreter."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from passhost import ir

RNG = np.random.default_rng(0)


def _export(text, tmp_path, name="m.onnx"):
    mod = ir.parse('#[version = "0.0.5"]\n' + text)
    path = str(tmp_path / name)
    ir.save(mod, path)
    return mod, path, onnx.load(path)


def _agree(mod, path, ort_run, *shapes, ints=False):
    for shape_set in shapes:
        args = [RNG.integers(0, 4, s).astype("int64") if ints else RNG.standard_normal(s).astype("float32")
                for s in shape_set]
        want = ir.evaluate(mod, *args)
        feeds = {p.name_hint: a for p, a in zip(mod["main"].params, args)}
        got = ort_run(path, feeds)
        want = want if isinstance(want, tuple) else (want,)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def _dims(vi):
    return [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]


def test_size_variables_are_dim_params_and_reshape_targets_use_0_and_minus_1(tmp_path, ort_run):
    mod, path, model = _export("""def @main(%x: Tensor[(batch, seq, 8), float32]) {
      %0 = reshape(%x, newshape=[batch, seq, 2, 4]);
      %1 = reshape(%0, newshape=[batch*seq, 8]);
      (%0, %1)
    }""", tmp_path)
    assert _dims(model.graph.input[0]) == ["batch", "seq", 8]
    assert _dims(model.graph.output[1]) == ["batch*seq", 8]
    assert "Shape" not in {n.op_type for n in model.graph.node}      # [0, 0, 2, 4] and [-1, 8]: static
    targets = sorted(onnx.numpy_helper.to_array(t).tolist() for t in model.graph.initializer)
    assert targets == [[-1, 8], [0, 0, 2, 4]]
    _agree(mod, path, ort_run, [(1, 5, 8)], [(3, 7, 8)], [(2, 11, 8)])


def test_a_target_that_0_and_minus_1_cannot_say_is_computed_from_the_input_shapes(tmp_path, ort_run):
    mod, path, model = _export("""def @main(%x: Tensor[(batch, seq), float32]) {
      reshape(%x, newshape=[seq, batch])
    }""", tmp_path)
    shapes = [n for n in model.graph.node if n.op_type == "Shape"]  # one node per variable: its own axis
    assert sorted((a.name, a.i) for n in shapes for a in n.attribute) == [("end", 1), ("end", 2), ("start", 0),
                                                                          ("start", 1)]
    assert "Slice" not in {n.op_type for n in model.graph.node}
    _agree(mod, path, ort_run, [(2, 5)], [(3, 7)], [(1, 11)])
    ir.save(mod, path, opset=14)  # (no start/end before opset 15: one Shape, a Slice per variable)
    assert [n.op_type for n in onnx.load(path).graph.node].count("Shape") == 1
    _agree(mod, path, ort_run, [(2, 5)], [(3, 7)])


def test_shape_values_ranges_fills_and_slices_of_symbolic_size(tmp_path, ort_run):
    mod, path, _ = _export("""def @main(%x: Tensor[(batch, seq), float32], %past: Tensor[(batch, p, 4), float32]) {
      %0 = shape_value(values=[batch, p + seq]);
      %1 = arange(start=p, stop=p + seq, step=1, dtype="int64");
      %2 = zeros(shape=[batch, seq], dtype="float32");
      %3 = strided_slice(%x, begin=[1], end=[seq], strides=[1], axes=[1]);
      %4 = broadcast_to(%3, shape=[batch, seq - 1]);
      %5 = take(%x, 1i64, axis=1, mode="clip");
      (%0, %1, add(%x, %2), %4, %5)
    }""", tmp_path)
    _agree(mod, path, ort_run, [(1, 5), (1, 0, 4)], [(3, 7), (3, 5, 4)], [(2, 3), (2, 9, 4)])


def test_an_unknown_dimension_is_written_as_an_unnamed_dim(tmp_path):
    _, _, model = _export("""def @main(%x: Tensor[(?, 3), float32]) { nn.relu(%x) }""", tmp_path)
    dim = model.graph.input[0].type.tensor_type.shape.dim[0]
    assert not dim.HasField("dim_value") and not dim.dim_param


def test_dynamic_model_round_trips_with_its_dim_param_names(tmp_path, ort_run):
    """An input's dim_param that is not an identifier comes back as written."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch size", "seq"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch size", "seq"])
    src = str(tmp_path / "src.onnx")
    onnx.save(helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                                opset_imports=[helper.make_opsetid("", 17)]), src)
    mod = ir.load(src)
    out = str(tmp_path / "out.onnx")
    ir.save(mod, out)
    model = onnx.load(out)
    assert _dims(model.graph.input[0]) == ["batch size", "seq"] == _dims(model.graph.output[0])
    _agree(mod, out, ort_run, [(2, 5)], [(3, 7)])


@pytest.mark.parametrize("opset", [13, 17])
def test_symbolic_exports_pass_onnx_shape_inference(tmp_path, opset):
    mod = ir.parse('#[version = "0.0.5"]\ndef @main(%x: Tensor[(batch, seq, 8), float32]) { '
                   'reshape(nn.relu(%x), newshape=[batch, seq, 2, 4]) }')
    path = str(tmp_path / "m.onnx")
    ir.save(mod, path, opset=opset)
    inferred = onnx.shape_inference.infer_shapes(onnx.load(path), strict_mode=True)
    assert _dims(inferred.graph.output[0]) == ["batch", "seq", 2, 4]


def test_reshapes_to_a_shape_with_an_unknown_dimension_use_their_own_codes(tmp_path, ort_run):
    mod, path, model = _export("""def @main(%x: Tensor[(?, ?, 6), float32]) {
      %0 = reshape(%x, newshape=[0, 0, 2, 3]);
      %1 = expand_dims(%0, axis=0);
      (%1, squeeze(%1, axis=[0]))
    }""", tmp_path)
    ops = [n.op_type for n in model.graph.node]  # (two ?s: no 0/-1 target of the shape says it)
    assert "Unsqueeze" in ops and "Squeeze" in ops
    _agree(mod, path, ort_run, [(1, 2, 6)], [(4, 3, 6)], [(7, 5, 6)])


def test_a_where_on_bools_is_written_without_onnxruntimes_missing_bool_where(tmp_path, ort_run):
    mod, path, model = _export("""def @main(%c: Tensor[(n), bool], %a: Tensor[(n), bool], %b: Tensor[(n), bool]) {
      where(%c, %a, %b)
    }""", tmp_path)
    assert "Where" not in {n.op_type for n in model.graph.node}
    for n in (3, 5):
        args = [RNG.integers(0, 2, n).astype(bool) for _ in range(3)]
        got = ort_run(path, {"c": args[0], "a": args[1], "b": args[2]})[0]
        np.testing.assert_array_equal(got, ir.evaluate(mod, *args))


def test_a_size_variable_seen_only_in_an_expression_is_solved_from_it(tmp_path, ort_run):
    """dynamo writes an even height as 2*half_height: half_height is read as size / 2."""
    mod, path, model = _export("""def @main(%x: Tensor[(2*hh, 3), float32]) {
      reshape(%x, newshape=[hh, 6])
    }""", tmp_path)
    _agree(mod, path, ort_run, [(2, 3)], [(8, 3)], [(14, 3)])


def test_a_layer_norm_over_an_axis_of_symbolic_size_is_one_layernormalization(tmp_path, ort_run):
    """FuseLayerNorm's form over a run-time axis (a group norm's flattened groups): no scale or
    shift, ones and zeros of the symbolic size, written as [1] constants LayerNormalization
    broadcasts (nothing computed for the shape)."""
    mod, path, model = _export("""def @main(%x: Tensor[(n, 2, 4*h), float32]) {
      nn.layer_norm(%x, ones(shape=[4*h], dtype="float32"), zeros(shape=[4*h], dtype="float32"), center=False, scale=False)
    }""", tmp_path)
    assert [n.op_type for n in model.graph.node] == ["LayerNormalization"]
    _agree(mod, path, ort_run, [(1, 2, 8)], [(3, 2, 12)], [(2, 2, 20)])


def test_a_target_equal_to_a_whole_shape_reads_it_from_that_tensor(tmp_path, ort_run):
    mod, path, model = _export("""def @main(%x: Tensor[(n, 8, 2*h, 2*w), float32]) {
      %0 = reshape(%x, newshape=[n, 2, 16*h*w]);
      %1 = nn.relu(%0);
      reshape(%1, newshape=[n, 8, 2*h, 2*w])
    }""", tmp_path)
    assert [n.op_type for n in model.graph.node].count("Shape") == 1
    assert len(model.graph.node) == 4  # Reshape, Relu, Shape(x), Reshape
    _agree(mod, path, ort_run, [(1, 8, 2, 4)], [(3, 8, 6, 2)], [(2, 8, 10, 14)])


def test_the_save_says_which_shape_nodes_stay_and_what_they_feed(tmp_path):
    mod = ir.parse('#[version = "0.0.5"]\ndef @main(%x: Tensor[(batch, seq), float32]) { '
                   'reshape(%x, newshape=[seq, batch]) }')
    notes = ir.save(mod, str(tmp_path / "m.onnx"))
    assert notes[0].startswith("2 Shape nodes stay")
    assert sorted(n.strip() for n in notes[1:]) == ["Shape(x)[0] -> Reshape target x1",
                                                    "Shape(x)[1] -> Reshape target x1"]
    static = ir.parse('#[version = "0.0.5"]\ndef @main(%x: Tensor[(2, 3), float32]) { reshape(%x, newshape=[3, 2]) }')
    assert ir.save(static, str(tmp_path / "s.onnx")) == []


@pytest.mark.parametrize("dtype", ["float32", "bool"])
def test_trilu_is_written_as_one_trilu(tmp_path, ort_run, dtype):
    mod, path, model = _export(f"""def @main(%x: Tensor[(s, s), {dtype}]) {{ trilu(%x, 1i64) }}""", tmp_path)
    assert [n.op_type for n in model.graph.node] == ["Trilu"]
    for n in (3, 6):
        a = np.ones((n, n), dtype) if dtype == "bool" else RNG.standard_normal((n, n)).astype(dtype)
        np.testing.assert_array_equal(ort_run(path, {"x": a})[0], ir.evaluate(mod, a))


def test_an_lstm_over_a_dynamic_sequence_stays_one_lstm_and_the_interpreter_runs_it(tmp_path, ort_run):
    """Unrolling needs the sequence length: over a dynamic one the LSTM is kept as it is (as
    --keep-op keeps it), typed from its input with the model's size variables, run by passhost's interpreter through onnx.reference and written back as one LSTM."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    w = [numpy_helper.from_array(rng.standard_normal(s).astype("float32") * 0.3, n)
         for n, s in (("w", (1, 16, 3)), ("r", (1, 16, 4)), ("b", (1, 32)))]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["seq", "batch", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    src = str(tmp_path / "lstm.onnx")
    onnx.save(helper.make_model(helper.make_graph([helper.make_node("LSTM", ["x", "w", "r", "b"], ["y"], hidden_size=4)],
                                                  "g", [x], [y], w), opset_imports=[helper.make_opsetid("", 17)]), src)
    mod = ir.load(src)
    assert str(mod["main"].body.checked_type) == "Tensor[(seq, 1, batch, 4), float32]"
    out = str(tmp_path / "out.onnx")
    ir.save(mod, out)
    assert [n.op_type for n in onnx.load(out).graph.node] == ["LSTM"]
    for shape in ((5, 2, 3), (7, 3, 3)):
        a = rng.standard_normal(shape).astype("float32")
        want = ort_run(src, {"x": a})[0]
        np.testing.assert_allclose(ort_run(out, {"x": a})[0], want, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(ir.evaluate(mod, a), want, rtol=1e-4, atol=1e-5)


def _gru_model(path, layout, zero_state):
    """A GRU over (seq, batch) whose initial state is zeros of the input's batch, built from its
    Shape as PyTorch's exporter does (or a graph input, which must stay)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype("float32") * 0.3, n)
             for n, s in (("w", (2, 12, 3)), ("r", (2, 12, 4)), ("b", (2, 24)))]
    inits += [numpy_helper.from_array(np.array([v], "int64"), n) for n, v in (("bax", 1 - layout), ("two", 2),
                                                                             ("four", 4))]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["seq", "batch", 3] if layout == 0 else ["batch", "seq", 3])
    h0 = helper.make_tensor_value_info("h0", TensorProto.FLOAT, ["two", "batch", 4] if layout == 0 else
                                       ["batch", "two", 4])
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "bax"], ["n"])]
    parts = ["two", "n", "four"] if layout == 0 else ["n", "two", "four"]
    nodes += [helper.make_node("Concat", parts, ["hs"], axis=0),
              helper.make_node("ConstantOfShape", ["hs"], ["zeros"], value=numpy_helper.from_array(np.zeros(1, "float32")))]
    state = "zeros" if zero_state else "h0"
    nodes.append(helper.make_node("GRU", ["x", "w", "r", "b", "", state], ["y", "yh"], hidden_size=4,
                                  direction="bidirectional", layout=layout))
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("y", "yh")]
    graph = helper.make_graph(nodes, "g", [x] if zero_state else [x, h0], outs, inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("zero_state", [True, False])
def test_a_kept_gru_is_typed_from_its_input_and_drops_an_initial_state_of_zeros(tmp_path, ort_run, layout,
                                                                                zero_state):
    src, out = str(tmp_path / "gru.onnx"), str(tmp_path / "out.onnx")
    _gru_model(src, layout, zero_state)
    mod = ir.load(src)
    ys = [str(f) for f in mod["main"].body.checked_type.fields]
    if layout == 0:
        assert ys == ["Tensor[(seq, 2, batch, 4), float32]", "Tensor[(2, batch, 4), float32]"]
    else:
        assert ys == ["Tensor[(batch, seq, 2, 4), float32]", "Tensor[(batch, 2, 4), float32]"]
    ir.save(mod, out)
    nodes = onnx.load(out).graph.node
    gru = next(n for n in nodes if n.op_type == "GRU")
    if zero_state:  # ONNX's absent initial_h is zeros: no Shape, Gather, Concat or ConstantOfShape left
        assert [n.op_type for n in nodes] == ["GRU"] and list(gru.input) == ["x", "w", "r", "b"]
    else:
        assert gru.input[5] == "h0"
    run = ort_run
    if layout == 1:  # (onnxruntime's CPU GRU refuses layout 1: onnx's reference runs both)
        from onnx.reference import ReferenceEvaluator

        def run(path, feeds):
            return ReferenceEvaluator(path).run(None, feeds)
    rng = np.random.default_rng(3)
    for seq, batch in ((5, 2), (7, 3)):
        shape = (seq, batch, 3) if layout == 0 else (batch, seq, 3)
        feeds = {"x": rng.standard_normal(shape).astype("float32")}
        if not zero_state:
            feeds["h0"] = rng.standard_normal((2, batch, 4) if layout == 0 else (batch, 2, 4)).astype("float32")
        for w, g in zip(run(src, feeds), run(out, feeds)):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("size,scaled", [((12, 6), True), ((7, 5), False)])
def test_a_resize_with_symbolic_batch_writes_scales_when_they_are_exact(tmp_path, ort_run, size, scaled):
    mod, path, model = _export(f"""def @main(%x: Tensor[(batch, 3, 6, 3), float32]) {{
      image.resize2d(%x, size=[{size[0]}, {size[1]}], method="linear")
    }}""", tmp_path)
    resize = next(n for n in model.graph.node if n.op_type == "Resize")
    ops = [n.op_type for n in model.graph.node]
    if scaled:  # 2 x 2: no Shape of the input, as the exporter of the original wrote it
        assert ops == ["Resize"] and len(resize.input) == 3
    else:  # 7 / 6 is no float32: sizes, with the batch read from the input
        assert "Shape" in ops and len(resize.input) == 4
    _agree(mod, path, ort_run, [(1, 3, 6, 3)], [(5, 3, 6, 3)])


@pytest.mark.parametrize("mode", ["CRD", "DCR"])
def test_a_depth_to_space_over_symbolic_height_and_width_comes_back_as_one_node(tmp_path, ort_run, mode):
    """It imports as reshape / transpose / reshape; the block size and the channels are static,
    which is all the export needs to know (H x 2 is H x 2 whatever H is)."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8, "h", "w"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    src, out = str(tmp_path / "d2s.onnx"), str(tmp_path / "out.onnx")
    onnx.save(helper.make_model(helper.make_graph([helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2,
                                                                    mode=mode)], "g", [x], [y]),
                                opset_imports=[helper.make_opsetid("", 17)]), src)
    ir.save(ir.load(src), out)
    nodes = onnx.load(out).graph.node
    assert [(n.op_type, helper.get_attribute_value(n.attribute[1]) if len(n.attribute) > 1 else None)
            for n in nodes] in ([("DepthToSpace", mode.encode())], [("DepthToSpace", None)])
    for shape in ((1, 8, 3, 5), (2, 8, 4, 7)):
        a = RNG.standard_normal(shape).astype("float32")
        np.testing.assert_array_equal(ort_run(out, {"x": a})[0], ort_run(src, {"x": a})[0])
