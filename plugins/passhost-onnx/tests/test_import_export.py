"""Import and export details: opset-9 2-D coercion, unsupported operators reported at once,
symbolic shapes, custom-domain operators kept opaque, atomic writes, bad files."""
from __future__ import annotations

import os
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import passhost
from passhost import ir, transform
from passhost.cli import main
from passhost.errors import FormatError, UsageError
from passhost_onnx import OPAQUE, from_onnx, to_onnx


def _model(nodes, inputs, outputs, inits=(), opset=17, value_info=(), extra_opsets=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits), value_info=list(value_info))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 7
    return model


def _vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


@pytest.mark.parametrize("opset", [9, 11])
def test_opset9_softmax_and_flatten_coerce_to_2d(opset, ort_run):
    # Softmax(axis=1) on 3-D data normalises over dims 1 and 2 together before opset 13
    model = _model([helper.make_node("Softmax", ["x"], ["s"], axis=1),
                    helper.make_node("Flatten", ["s"], ["y"], axis=2)],
                   [_vi("x", [2, 3, 4])], [_vi("y", [6, 4])], opset=opset)
    x = np.random.RandomState(0).randn(2, 3, 4).astype("float32")
    want = ort_run(model.SerializeToString(), {"x": x})[0]
    flat = np.exp(x.reshape(2, 12) - x.reshape(2, 12).max(1, keepdims=True))
    np.testing.assert_allclose(want, (flat / flat.sum(1, keepdims=True)).reshape(6, 4), rtol=1e-5)
    mod = from_onnx(model)
    np.testing.assert_allclose(ir.evaluate(mod, x), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ort_run(to_onnx(mod).SerializeToString(), {"x": x})[0], want, rtol=1e-5, atol=1e-6)


def test_gemm_coerces_4d_input_and_applies_alpha_beta(ort_run):
    w = numpy_helper.from_array(np.random.RandomState(1).randn(5, 12).astype("float32"), "w")
    c = numpy_helper.from_array(np.random.RandomState(2).randn(5).astype("float32"), "c")
    model = _model([helper.make_node("Gemm", ["x", "w", "c"], ["y"], transB=1, alpha=0.5, beta=2.0)],
                   [_vi("x", [2, 3, 2, 2])], [_vi("y", [2, 5])], inits=[w, c], opset=9)
    x = np.random.RandomState(0).randn(2, 3, 2, 2).astype("float32")
    want = 0.5 * x.reshape(2, 12) @ numpy_helper.to_array(w).T + 2.0 * numpy_helper.to_array(c)
    mod = from_onnx(model)
    np.testing.assert_allclose(ir.evaluate(mod, x), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ort_run(to_onnx(mod).SerializeToString(), {"x": x})[0], want, rtol=1e-5, atol=1e-5)


def test_every_unsupported_operator_is_reported_at_once_with_counts():
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Unique", ["a"], ["b"]),
             helper.make_node("Unique", ["b"], ["c"]), helper.make_node("Det", ["c"], ["y"])]
    model = _model(nodes, [_vi("x", [2, 2])], [_vi("y", [])])
    with pytest.raises(FormatError) as info:
        from_onnx(model)
    msg = str(info.value)
    assert "2 unsupported ONNX operator(s)" in msg and "Unique (x2)" in msg and "Det (x1)" in msg


def test_symbolic_dimensions_stay_symbolic_unless_given_shapes_or_bindings():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [x], [_vi("y", ["batch", 3])])
    mod = from_onnx(model, input_shapes={"x": (4, 3)})
    assert mod["main"].params[0].checked_type.shape == (4, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is bound silently, so nothing warns
        mod = from_onnx(model)
    assert mod["main"].params[0].checked_type == ir.TensorType(("batch", 3))
    assert from_onnx(model, bind_dims={"batch": 2})["main"].params[0].checked_type.shape == (2, 3)
    with pytest.raises(UsageError, match="no such dimension.*batch"):
        from_onnx(model, bind_dims={"btach": 2})
    with pytest.raises(FormatError, match="has 3 dimensions"):
        from_onnx(model, input_shapes={"x": (1, 3, 3)})
    with pytest.raises(FormatError, match="does not have as an input.*'x'"):
        from_onnx(model, input_shapes={"nope": (1,)})


def test_unnamed_and_nonpositive_dimensions_get_fresh_size_variables():
    """An axis without dim_value or dim_param, and a dim_value of 0 or -1 (older Paddle and
    TensorFlow exports' "dynamic"), get a variable each; -1 no longer fails the import."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, -1, 0, 3])
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [x], [_vi("y", [None, -1, 0, 3])])
    shape = from_onnx(model)["main"].params[0].checked_type.shape
    assert [str(d) for d in shape] == ["x_0", "x_1", "x_2", "3"]
    assert from_onnx(model, input_shapes={"x": (2, 5, 4, 3)})["main"].params[0].checked_type.shape == (2, 5, 4, 3)


def _custom_model():
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("MyScale", ["a"], ["b"], domain="com.example", factor=3.0),
             helper.make_node("Mul", ["b", "two"], ["c"]),
             helper.make_node("Add", ["c", "zero"], ["y"])]
    two = numpy_helper.from_array(np.array(2.0, dtype="float32"), "two")
    zero = numpy_helper.from_array(np.array(0.0, dtype="float32"), "zero")
    return _model(nodes, [_vi("x", [2, 3])], [_vi("y", [2, 3])], inits=[two, zero],
                  value_info=[_vi("b", [2, 3])], extra_opsets=[("com.example", 1)])


def test_custom_domain_operator_is_kept_opaque_and_exported_unchanged(tmp_path):
    model = _custom_model()
    path = str(tmp_path / "custom.onnx")
    onnx.save(model, path)
    mod = ir.load(path)
    assert ir.count_ops(mod["main"])[OPAQUE] == 1
    with transform.PassContext(opt_level=3):
        opt = passhost.default_pipeline(3)(mod)
    assert ir.count_ops(opt["main"]).get(OPAQUE, 0) == 1  # not folded, not dropped
    for _, fn in opt.items():  # a fused function holding it holds nothing else
        for node in ir.post_order(fn.body):
            if isinstance(node, ir.Function) and node.attrs.get("Primitive"):
                ops = ir.count_ops(node.body)
                assert OPAQUE not in ops or ops == {OPAQUE: 1}
    out = str(tmp_path / "out.onnx")
    ir.save(opt, out)
    exported = onnx.load(out)
    custom = [n for n in exported.graph.node if n.domain == "com.example"]
    assert len(custom) == 1 and custom[0].op_type == "MyScale"
    assert helper.get_attribute_value(custom[0].attribute[0]) == pytest.approx(3.0)
    assert any(o.domain == "com.example" for o in exported.opset_import)


def test_custom_operator_without_a_type_is_named():
    model = _custom_model()
    del model.graph.value_info[:]
    with pytest.raises(FormatError, match=r"com.example.MyScale.*output 'b' is unknown"):
        from_onnx(model)


def test_not_an_onnx_file_and_missing_file(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\xb2\xff\x00garbage")
    with pytest.raises(FormatError, match="bad.onnx"):
        ir.load(str(bad))
    code = main(["run", str(bad), "-O3", "-o", str(tmp_path / "o.onnx")])
    assert code == 2 and not (tmp_path / "o.onnx").exists()


def test_a_failed_export_leaves_the_old_file(tmp_path):
    out = tmp_path / "out.onnx"
    out.write_bytes(b"old")
    x = ir.var("x", shape=(1, 2, 4, 4), dtype="float32")
    mod = ir.IRModule.from_expr(ir.Function([x], ir.layout_transform(x, "NCHW", "NHWC")))
    with pytest.raises(FormatError, match="layout_transform has no ONNX export"):
        ir.save(mod, str(out))
    assert out.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.onnx"]


def test_export_opset_range_is_checked(tmp_path):
    x = ir.var("x", shape=(2,), dtype="float32")
    mod = ir.IRModule.from_expr(ir.Function([x], ir.exp(x)))
    with pytest.raises(FormatError, match="opsets 13 to 23"):
        ir.save(mod, str(tmp_path / "o.onnx"), opset=9)
    ir.save(mod, str(tmp_path / "o.onnx"), opset=13)
    assert onnx.load(str(tmp_path / "o.onnx")).opset_import[0].version == 13


def test_external_data_writes_a_side_file(tmp_path, ort_run):
    w = np.random.RandomState(0).randn(64, 64).astype("float32")
    x = ir.var("x", shape=(1, 64), dtype="float32")
    mod = ir.IRModule.from_expr(ir.Function([x], ir.nn.dense(x, ir.const(w))))
    out = str(tmp_path / "ext.onnx")
    ir.save(mod, out, external_data=True)
    assert os.path.exists(out + ".data") and os.path.getsize(out) < w.nbytes
    a = np.ones((1, 64), "float32")
    np.testing.assert_allclose(ort_run(out, {"x": a})[0], a @ w.T, rtol=1e-5, atol=1e-5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ext.onnx", "ext.onnx.data"]


def test_cli_round_trip_with_check_and_a_batch(zoo, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["run", zoo["squeezenet"], zoo["alexnet" if "alexnet" in zoo else "bvlc_alexnet"], "-O3",
                 "-o", f"{out}/", "--check"])
    table = capsys.readouterr().out
    assert code == 0, table
    rows = [line for line in table.splitlines() if line.endswith(" ok")]
    assert len(rows) == 2 and all(float(r.split()[4]) < 1e-4 for r in rows)
    assert sorted(p.name for p in out.iterdir()) == ["bvlc_alexnet.onnx", "squeezenet.onnx"]


def test_interpreter_and_onnxruntime_on_a_program_built_in_passhost(tmp_path, ort_run):
    x = ir.var("data", shape=(1, 3, 8, 8), dtype="float32")
    w = ir.const(np.random.RandomState(0).randn(4, 3, 3, 3).astype("float32"))
    body = ir.nn.relu(ir.nn.conv2d(x, w, padding=(1, 1)))
    body = ir.nn.max_pool2d(body, pool_size=(2, 2), strides=(2, 2))
    mod = ir.IRModule.from_expr(ir.Function([x], ir.nn.softmax(ir.nn.batch_flatten(body))))
    out = str(tmp_path / "m.onnx")
    ir.save(mod, out)
    a = np.random.RandomState(1).randn(1, 3, 8, 8).astype("float32")
    np.testing.assert_allclose(ort_run(out, {"data": a})[0], ir.evaluate(mod, a), rtol=1e-5, atol=1e-6)
    assert [o.name for o in onnx.load(out).graph.output] == ["output_0"]


def test_cli_keeps_dynamic_dimensions_and_specialises_on_request(tmp_path, capsys):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
    path = str(tmp_path / "sym.onnx")
    onnx.save(_model([helper.make_node("Relu", ["x"], ["y"])], [x], [_vi("y", ["batch", 3])]), path)

    def dims(out, which="input"):
        vi = getattr(onnx.load(out).graph, which)[0]
        return [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]

    out = str(tmp_path / "o.onnx")
    assert main(["run", path, "-p", "InferType", "-o", out]) == 0
    assert capsys.readouterr().err == ""
    assert dims(out) == ["batch", 3] and dims(out, "output") == ["batch", 3]
    assert main(["run", path, "--input-shape", "x=5,3", "-p", "InferType", "-o", out]) == 0
    assert dims(out) == [5, 3]
    assert main(["run", path, "--bind-dim", "batch=7", "-p", "InferType", "-o", out]) == 0
    assert dims(out) == [7, 3]


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "bool", ">f4"])
def test_streamed_file_is_the_message_to_onnx_builds(tmp_path, dtype):
    import io

    from passhost_onnx.exporter import export_parts
    from passhost_onnx.writer import encoded_size, write_model

    value = np.arange(6).reshape(2, 3) % 2 if dtype == "bool" else np.arange(6).reshape(2, 3)
    data = np.asarray(value, dtype=np.dtype(dtype))
    x = ir.var("x", shape=(2, 3), dtype=data.dtype.newbyteorder("=").name)
    body = ir.where(x, x, ir.Constant(data)) if dtype == "bool" else ir.add(x, ir.Constant(data.astype(
        data.dtype.newbyteorder("="))))
    mod = ir.IRModule.from_expr(ir.Function([x], body))
    skeleton, weights = export_parts(mod)
    if dtype == ">f4":
        weights = [(n, a.astype(">f4")) for n, a in weights]  # a big-endian array is written little-endian
    f = io.BytesIO()
    assert write_model(f, skeleton, weights) == encoded_size(skeleton, weights) == len(f.getvalue())
    streamed = onnx.load_from_string(f.getvalue())
    assert streamed == to_onnx(mod)
    onnx.checker.check_model(streamed)


@pytest.mark.parametrize("rank", [4, 3])
def test_per_channel_scale_shift_exports_as_one_batch_norm_on_4d(rank, ort_run):
    shape = (1, 3, 4, 5)[4 - rank:] if rank == 4 else (3, 4, 5)
    x = ir.var("x", shape=shape, dtype="float32")
    rng = np.random.RandomState(0)
    s = ir.const(rng.rand(3, 1, 1).astype("float32"))
    b = ir.const(rng.rand(3, 1, 1).astype("float32"))
    mod = ir.IRModule.from_expr(ir.Function([x], ir.nn.relu(ir.add(ir.multiply(x, s), b))))
    model = to_onnx(mod)
    ops = [n.op_type for n in model.graph.node]
    assert ops == (["BatchNormalization", "Relu"] if rank == 4 else ["Mul", "Add", "Relu"])
    a = rng.randn(*shape).astype("float32")
    np.testing.assert_allclose(ort_run(model.SerializeToString(), {"x": a})[0], ir.evaluate(mod, a),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("out_shape", [(2, 3, 5, 7), (6, 5, 7)])
def test_a_batch_matmul_between_batch_reshapes_exports_as_one_matmul(out_shape, ort_run):
    """The importer's reading of a 4-D MatMul (TVM's reshape / 3-D nn.batch_matmul /
    reshape) goes back out as one MatMul; when the result keeps the 3-D batch, the operands
    keep their reshapes and only the result's (an identity) goes."""
    a, b = ir.var("a", shape=(2, 3, 5, 4)), ir.var("b", shape=(2, 3, 4, 7))
    prod = ir.nn.batch_matmul(ir.reshape(a, (6, 5, 4)), ir.reshape(b, (6, 4, 7)), transpose_b=False)
    body = ir.reshape(prod, out_shape)
    mod = ir.IRModule.from_expr(ir.Function([a, b], ir.nn.relu(body)))
    model = to_onnx(mod)
    onnx.checker.check_model(model)
    ops = [n.op_type for n in model.graph.node]
    if len(out_shape) == 4:
        assert ops == ["MatMul", "Relu"] and not model.graph.initializer  # the shape constants went too
    else:
        assert ops == ["Reshape", "Reshape", "MatMul", "Relu"]
    rng = np.random.RandomState(0)
    xa, xb = rng.randn(2, 3, 5, 4).astype("float32"), rng.randn(2, 3, 4, 7).astype("float32")
    np.testing.assert_allclose(ort_run(model.SerializeToString(), {"a": xa, "b": xb})[0], ir.evaluate(mod, xa, xb),
                               rtol=1e-5, atol=1e-5)


def test_two_chained_batch_matmuls_sharing_a_reshape_export_a_valid_graph(ort_run):
    """The reshape after the first product is also the one before the second: the first
    merge drops it, so the second must not take it for a reshape still in the graph."""
    a, b, c = ir.var("a", shape=(1, 5, 4)), ir.var("b", shape=(1, 4, 7)), ir.var("c", shape=(1, 7, 3))
    m1 = ir.reshape(ir.nn.batch_matmul(ir.reshape(a, (1, 5, 4)), ir.reshape(b, (1, 4, 7)), transpose_b=False),
                    (1, 5, 7))
    m2 = ir.reshape(ir.nn.batch_matmul(m1, ir.reshape(c, (1, 7, 3)), transpose_b=False), (1, 5, 3))
    mod = ir.IRModule.from_expr(ir.Function([a, b, c], ir.nn.relu(m2)))
    model = to_onnx(mod)
    onnx.checker.check_model(model, full_check=True)
    rng = np.random.RandomState(0)
    feeds = {"a": rng.randn(1, 5, 4).astype("float32"), "b": rng.randn(1, 4, 7).astype("float32"),
             "c": rng.randn(1, 7, 3).astype("float32")}
    np.testing.assert_allclose(ort_run(model.SerializeToString(), feeds)[0], ir.evaluate(mod, *feeds.values()),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("value", [0, -3, 2 ** 40, 1.5, float("inf"), "NCHW", "", "\u00fcn", [1, 2, 3], (4, 5),
                                   [1.0, 2.5], [1, 2.5], (0.5,), True, [True, False], [1, True], ["a", "b"],
                                   np.int64(3), np.float32(1.25), [np.int64(1), 2]])
def test_the_exporters_attributes_are_make_attributes(value):
    """The emitter builds plain attributes itself (faster); the proto must be the one
    ``onnx.helper.make_attribute`` makes, down to the type it infers."""
    from passhost_onnx.exporter import attribute

    try:
        want = helper.make_attribute("k", value)
    except Exception as err:  # (a list of bools: onnx refuses it, and so must the exporter)
        with pytest.raises(type(err)):
            attribute("k", value)
        return
    assert attribute("k", value) == want


@pytest.mark.parametrize("shape, dtype", [((2, 3), np.float32), ((), np.int64), ((0,), np.float16),
                                          ((1, 64, 1, 1), np.float64), ((5,), np.bool_)])
def test_the_checked_structure_declares_each_weight_as_make_tensor_value_info_would(shape, dtype):
    """The checker sees each initializer as a typed graph input, built field by field
    (faster): it must be the ValueInfoProto ``onnx.helper.make_tensor_value_info`` makes."""
    from passhost_onnx.dtypes import to_onnx_type
    from passhost_onnx.files import _structure

    skeleton = onnx.ModelProto()
    skeleton.graph.input.append(helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1]))
    checked = _structure(skeleton, [("w", np.zeros(shape, dtype))])
    assert list(checked.graph.input) == [
        helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1]),
        helper.make_tensor_value_info("w", to_onnx_type(np.dtype(dtype)), list(shape))]


def test_a_weight_transposed_at_import_is_a_view_and_exports_in_row_major_order(tmp_path, ort_run):
    """``MatMul(x, Transpose(W))``: the import folds the transpose into a Fortran-order
    view of ``W`` (no copy); -O3 folds dense's own transpose back to ``W``'s buffer; the
    exported file holds the right values (row-major) and runs the same in onnxruntime."""
    rng = np.random.RandomState(0)
    w = rng.randn(6, 5).astype("float32")
    model = _model([helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
                    helper.make_node("MatMul", ["x", "wt"], ["y"])],
                   [_vi("x", [2, 3, 5])], [_vi("y", [2, 3, 6])],
                   inits=[numpy_helper.from_array(w, "w")])
    src = tmp_path / "m.onnx"
    onnx.save(model, str(src))
    mod = ir.load(str(src))
    wt = [n for n in ir.post_order(mod["main"]) if isinstance(n, ir.Constant)][0]
    assert wt.data.flags.f_contiguous and not wt.data.flags.c_contiguous
    with passhost.transform.PassContext(opt_level=3):
        mod = passhost.default_pipeline(3)(mod)
    dst = tmp_path / "o.onnx"
    ir.save(mod, str(dst))
    x = rng.randn(2, 3, 5).astype("float32")
    np.testing.assert_allclose(ort_run(str(dst), {"x": x})[0], x @ w.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ort_run(str(src), {"x": x})[0], x @ w.T, rtol=1e-5, atol=1e-5)


def test_each_node_becomes_an_expression_with_a_span_naming_it(tmp_path):
    """Issue 16 (spans): the expression an ONNX node becomes carries Span(model, name=node);
    an Identity does not re-span its input, and a later type error names the node."""
    model = _model([helper.make_node("Relu", ["x"], ["r"], name="first_relu"),
                    helper.make_node("Identity", ["r"], ["i"], name="ident"),
                    helper.make_node("Mul", ["i", "i"], ["y"])],
                   [_vi("x", [2, 3])], [_vi("y", [2, 3])])
    path = tmp_path / "tiny.onnx"
    onnx.save(model, str(path))
    mod = ir.load(str(path))
    mul = mod["main"].body
    assert str(mul.span) == "tiny.onnx: node 'y'"  # unnamed node: its output names it
    assert str(mul.args[0].span) == "tiny.onnx: node 'first_relu'"
    assert str(from_onnx(model)["main"].body.span) == "g: node 'y'"  # in memory: the graph's name
    wrong = ir.with_children(mul, (mul.op, mul.args[0], ir.var("z", shape=(4,))))
    with pytest.raises(passhost.errors.TypeInferenceError, match=r"\(at tiny.onnx: node 'y'\)$"):
        ir.infer_type(ir.IRModule.from_expr(ir.Function(list(ir.free_vars(wrong)), wrong)))


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "int8", "uint8", "bool", "float64"])
def test_raw_initializers_become_constants_over_the_model_bytes_without_a_copy(dtype):
    from passhost_onnx.dtypes import tensor_array

    rng = np.random.default_rng(0)
    value = (rng.standard_normal((3, 4)) * 10).astype(dtype)
    raw = numpy_helper.from_array(value, "w")
    assert raw.HasField("raw_data")
    got = tensor_array(raw)
    np.testing.assert_array_equal(got, numpy_helper.to_array(raw))
    assert got.dtype == value.dtype and not got.flags.writeable
    const = ir.Constant(got)
    assert const.data is got  # read-only and contiguous: Constant keeps it, no second copy
    typed = helper.make_tensor("t", TensorProto.FLOAT, [2, 2], [1.0, 2.0, 3.0, 4.0])  # typed field, not raw
    np.testing.assert_array_equal(tensor_array(typed), np.array([[1, 2], [3, 4]], dtype="float32"))
    empty = numpy_helper.from_array(np.zeros((0, 3), dtype="float32"), "e")
    assert tensor_array(empty).shape == (0, 3)


def test_a_reshape_to_an_empty_axis_exports_with_allowzero_from_opset_14(tmp_path, ort_run):
    x = ir.var("x", shape=(0, 3, 4))
    mod = ir.IRModule.from_expr(ir.Function([x], ir.reshape(x, (3, 4, 0), allowzero=True)))
    with pytest.raises(FormatError, match=r"a reshape to an empty axis needs ONNX's Reshape allowzero=1, which "
                                          r"opset 13 lacks; export at opset 14 or later"):
        ir.save(mod, str(tmp_path / "m13.onnx"), opset=13)
    ir.save(mod, str(tmp_path / "m14.onnx"), opset=14)
    node = onnx.load(str(tmp_path / "m14.onnx")).graph.node[0]
    assert node.op_type == "Reshape" and helper.get_attribute_value(node.attribute[0]) == 1
    out, = ort_run(str(tmp_path / "m14.onnx"), {"x": np.zeros((0, 3, 4), np.float32)})
    assert out.shape == (3, 4, 0)


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_mod_imports_as_one_operator_and_exports_with_numpys_signs(fmod, dtype, tmp_path, ort_run):
    """Mod becomes TVM's floor_mod (fmod=0) or mod (fmod=1); a floating floor_mod exports
    through Mod(fmod=1) and a sign fix (ONNX allows floating fmod=0 only from opset 28)."""
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    graph = helper.make_graph([helper.make_node("Mod", ["a", "b"], ["c"], fmod=fmod)], "g",
                              [helper.make_tensor_value_info(n, elem, [8]) for n in "ab"],
                              [helper.make_tensor_value_info("c", elem, [8])])
    src = tmp_path / "mod.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(src))
    mod = ir.load(str(src))
    assert mod["main"].body.op.name == ("mod" if fmod else "floor_mod")
    a = np.array([5, -5, 5, -5, 6, 0, 7, -7], dtype=dtype)
    b = np.array([3, 3, -3, -3, 3, 2, 7, 2], dtype=dtype)
    if dtype == np.float32:
        a[-2:], b[-2:] = [np.inf, -5.0], [2.0, np.inf]
    with np.errstate(invalid="ignore"):  # (the remainder of inf is NaN)
        want = np.fmod(a, b) if fmod else np.mod(a, b)
    np.testing.assert_array_equal(ir.evaluate(mod, a, b), want)
    ir.save(mod, str(tmp_path / "out.onnx"))
    out, = ort_run(str(tmp_path / "out.onnx"), {"a": a, "b": b})
    np.testing.assert_array_equal(out, want)  # (exact by construction: a remainder is exact in IEEE)


def test_a_3d_cnn_imports_optimises_and_exports_with_onnxruntimes_numbers(tmp_path, ort_run):
    """Conv (3-D, grouped, padded, with bias) + BatchNormalization + Relu + MaxPool + AveragePool
    + GlobalAveragePool on NCDHW data: the nn.*3d operators."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 2, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal((8,)).astype(np.float32), "b")
    bn = [numpy_helper.from_array(v, n) for v, n in (
        (rng.uniform(0.5, 1.5, 8).astype(np.float32), "g"), (rng.standard_normal(8).astype(np.float32), "beta"),
        (rng.standard_normal(8).astype(np.float32), "m"), (rng.uniform(0.5, 1.5, 8).astype(np.float32), "v"))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1, 1, 1], group=2, strides=[1, 2, 1]),
             helper.make_node("BatchNormalization", ["c", "g", "beta", "m", "v"], ["n"]),
             helper.make_node("Relu", ["n"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2, 2], strides=[2, 2, 2], ceil_mode=1),
             helper.make_node("AveragePool", ["p"], ["a"], kernel_shape=[2, 2, 2], pads=[1, 0, 1, 0, 1, 0]),
             helper.make_node("GlobalAveragePool", ["a"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 8, 7])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 1, 1, 1])],
                              initializer=[w, b, *bn])
    src = tmp_path / "c3d.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(src))
    x = rng.standard_normal((1, 4, 5, 8, 7)).astype(np.float32)
    want, = ort_run(str(src), {"x": x})
    mod = ir.load(str(src))
    assert {"nn.conv3d", "nn.max_pool3d", "nn.avg_pool3d"} <= {
        n.op.name for n in ir.post_order(mod["main"]) if isinstance(n, ir.Call) and isinstance(n.op, ir.Op)}
    np.testing.assert_allclose(ir.evaluate(mod, x), want, rtol=1e-4, atol=1e-5)
    with transform.PassContext(opt_level=3):
        opt = passhost.default_pipeline(3)(mod)
    ir.save(opt, str(tmp_path / "out.onnx"))
    got, = ort_run(str(tmp_path / "out.onnx"), {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op, gates, extra", [
    ("LSTM", 4, {"direction": "bidirectional", "clip": 2.5}),
    ("GRU", 3, {"direction": "reverse", "linear_before_reset": 1}),
    ("GRU", 3, {}),
    ("RNN", 1, {"activations": ["Relu"]}),
])
def test_recurrent_layers_unroll_with_onnxruntimes_numbers(op, gates, extra, tmp_path, ort_run):
    rng = np.random.default_rng(gates)
    seq, batch, inp, hid = 5, 2, 3, 4
    dirs = 2 if extra.get("direction") == "bidirectional" else 1
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.5).astype(np.float32), n) for n, s in (
        ("W", (dirs, gates * hid, inp)), ("R", (dirs, gates * hid, hid)), ("B", (dirs, 2 * gates * hid)),
        ("h0", (dirs, batch, hid)))]
    inputs = ["X", "W", "R", "B", "", "h0"]
    outputs = ["Y", "Y_h"]
    if op == "LSTM":
        inits.append(numpy_helper.from_array(rng.standard_normal((dirs, batch, hid)).astype(np.float32), "c0"))
        inits.append(numpy_helper.from_array(rng.standard_normal((dirs, 3 * hid)).astype(np.float32), "P"))
        inputs += ["c0", "P"]
        outputs.append("Y_c")
    node = helper.make_node(op, inputs, outputs, hidden_size=hid, **extra)
    out_shapes = {"Y": [seq, dirs, batch, hid], "Y_h": [dirs, batch, hid], "Y_c": [dirs, batch, hid]}
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [seq, batch, inp])],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, out_shapes[o]) for o in outputs],
                              initializer=inits)
    src = tmp_path / "rnn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), str(src))
    x = rng.standard_normal((seq, batch, inp)).astype(np.float32)
    want = ort_run(str(src), {"X": x})
    mod = ir.load(str(src))
    for got, w in zip(ir.evaluate(mod, x), want):
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-5)
    with transform.PassContext(opt_level=3):
        opt = passhost.default_pipeline(3)(mod)
    ir.save(opt, str(tmp_path / "out.onnx"))
    for got, w in zip(ort_run(str(tmp_path / "out.onnx"), {"X": x}), want):
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("length", [1, 7, 8])
def test_cumprod_exports_below_opset_26_as_a_doubling_scan(exclusive, length, tmp_path, ort_run):
    x = ir.var("x", shape=(3, length), dtype="int64")
    mod = ir.IRModule.from_expr(ir.Function([x], ir.cumprod(x, axis=1, exclusive=exclusive)))
    ir.save(mod, str(tmp_path / "c.onnx"), opset=17)
    data = np.random.default_rng(length).integers(-3, 4, (3, length))
    got, = ort_run(str(tmp_path / "c.onnx"), {"x": data})
    np.testing.assert_array_equal(got, ir.evaluate(mod, data))  # (int64 products: exact)


def _matches_onnxruntime(src, feeds, ort_run, tol=(1e-5, 1e-5), export_tol=None, o3=False):
    """The model at ``src`` imported: passhost's interpreter gives onnxruntime's outputs on
    it (within ``tol``, rtol and atol), and so does onnxruntime on its export (within
    ``export_tol``, default ``tol``), after ``-O3`` when ``o3``. Returns the exported path."""
    want = ort_run(str(src), feeds)
    mod = ir.load(str(src))
    got = ir.evaluate(mod, *feeds.values())
    for g, w in zip([got] if isinstance(got, np.ndarray) else got, want):
        np.testing.assert_allclose(g, w, rtol=tol[0], atol=tol[1])
    if o3:
        with transform.PassContext(opt_level=3):
            mod = passhost.default_pipeline(3)(mod)
    out = src.parent / "out.onnx"
    ir.save(mod, str(out))
    rtol, atol = export_tol or tol
    for g, w in zip(ort_run(str(out), feeds), want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return out


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_matches_onnxruntime_inside_and_outside_the_image(mode, padding, align, tmp_path, ort_run):
    rng = np.random.default_rng(7)
    node = helper.make_node("GridSample", ["x", "g"], ["y"], mode=mode, padding_mode=padding, align_corners=align)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 5, 6]),
                                            helper.make_tensor_value_info("g", TensorProto.FLOAT, [2, 4, 7, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4, 7])])
    src = tmp_path / "gs.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), str(src))
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    g = rng.uniform(-1.7, 1.7, (2, 4, 7, 2)).astype(np.float32)   # many points outside the image
    _matches_onnxruntime(src, {"x": x, "g": g}, ort_run, tol=(1e-4, 1e-5), export_tol=(1e-5, 1e-6))


@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3), (1, 300, 70000), (2 ** 40,)])
@pytest.mark.parametrize("name", ["w", "", "conv.weight/ünï", "x" * 200])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "uint64"])
def test_hand_framed_tensor_head_is_protobufs_bytes(shape, name, dtype):
    from passhost_onnx.exporter import tensor_head
    from passhost_onnx.writer import _head

    dt = np.dtype(dtype)
    arr = np.lib.stride_tricks.as_strided(np.zeros(1, dt), shape=shape, strides=(0,) * len(shape))
    assert _head(name, arr) == tensor_head(name, arr).SerializeToString()


def _resize_model(shape, *, scales=None, sizes=None, opset=19, **attrs):
    inputs = ["x", "", "scales" if scales is not None else "", "sizes" if sizes is not None else ""]
    while inputs[-1] == "":
        inputs.pop()
    inits = []
    if scales is not None:
        inits.append(numpy_helper.from_array(np.asarray([1, 1, *scales], dtype=np.float32), "scales"))
    if sizes is not None:
        inits.append(numpy_helper.from_array(np.asarray([shape[0], shape[1], *sizes], dtype=np.int64), "sizes"))
    node = helper.make_node("Resize", inputs, ["y"], **attrs)
    graph = helper.make_graph([node], "r", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("exclude", [0, 1])
@pytest.mark.parametrize("shape,scales,sizes", [((1, 2, 9, 7), None, (4, 3)), ((1, 2, 9, 7), (0.4, 0.3), None),
                                                ((2, 1, 16, 12), (0.25, 0.5), None), ((1, 1, 5, 6), None, (9, 11))])
def test_resize_antialias_matches_onnxruntime(mode, exclude, shape, scales, sizes, tmp_path, ort_run):
    src = tmp_path / "aa.onnx"
    onnx.save(_resize_model(shape, scales=scales, sizes=sizes, mode=mode, antialias=1, exclude_outside=exclude,
                            opset=18), str(src))
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    _matches_onnxruntime(src, {"x": x}, ort_run, export_tol=(1e-5, 1e-6))


@pytest.mark.parametrize("ctm", ["half_pixel", "half_pixel_symmetric", "asymmetric", "pytorch_half_pixel"])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("scales", [(0.65, 0.7), (1.7, 2.3), (0.5, 0.5)])
def test_resize_with_fractional_scales_matches_onnxruntime(ctm, mode, scales, tmp_path, ort_run):
    # 7 x 0.5 = 3.5 rows: the scale, not 3 / 7, maps the coordinates. (0.6 of 7 rows would put
    # half_pixel_symmetric's first row on an exact tie, 0.5, which onnxruntime rounds down and
    # ONNX's reference and passhost up.)
    shape = (1, 2, 7, 5)
    src = tmp_path / "fs.onnx"
    onnx.save(_resize_model(shape, scales=scales, mode=mode, coordinate_transformation_mode=ctm), str(src))
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    _matches_onnxruntime(src, {"x": x}, ort_run, export_tol=(1e-5, 1e-6))


def test_resize_attributes_onnx_lacks_at_the_export_opset_are_errors(tmp_path):
    x = ir.var("x", shape=(1, 1, 8, 8))
    aa = ir.IRModule.from_expr(ir.Function([x], ir.image.resize2d(x, (4, 4), antialias=1)))
    with pytest.raises(FormatError, match=r"antialias=1 needs opset 18 or later \(writing opset 17\)"):
        ir.save(aa, str(tmp_path / "a.onnx"), opset=17)
    ir.save(aa, str(tmp_path / "a.onnx"), opset=18)
    assert [a.name for a in onnx.load(str(tmp_path / "a.onnx")).graph.node[0].attribute if a.name == "antialias"]
    sym = ir.IRModule.from_expr(ir.Function([x], ir.image.resize2d(
        x, (4, 4), coordinate_transformation_mode="half_pixel_symmetric")))
    with pytest.raises(FormatError, match=r"half_pixel_symmetric' needs opset 19"):
        ir.save(sym, str(tmp_path / "s.onnx"), opset=18)
    bad = ir.IRModule.from_expr(ir.Function([x], ir.image.resize2d(x, (4, 4), scales=(0.3, 0.5))))
    with pytest.raises(FormatError, match=r"scales=\[0.3, 0.5\] and size=\[4, 4\] cannot be written"):
        ir.save(bad, str(tmp_path / "b.onnx"))
    assert not (tmp_path / "s.onnx").exists() and not (tmp_path / "b.onnx").exists()


@pytest.mark.parametrize("attrs", [
    {},
    {"strides": [2, 1, 2], "pads": [1, 0, 1, 0, 1, 0], "output_padding": [1, 0, 1]},
    {"dilations": [2, 1, 1], "group": 2},
    {"strides": [2, 2, 2], "auto_pad": "SAME_UPPER"},
    {"strides": [1, 2, 2], "output_shape": [4, 7, 6]},
])
def test_conv_transpose_3d_matches_onnxruntime_through_o3(attrs, tmp_path, ort_run):
    rng = np.random.default_rng(4)
    w = rng.standard_normal((4, 3, 2, 3, 2)).astype(np.float32)
    b = rng.standard_normal(3 * attrs.get("group", 1)).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)
    graph = helper.make_graph([node, helper.make_node("Relu", ["y"], ["z"])], "ct3",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 3, 3, 3])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    src = tmp_path / "ct3.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(src))
    x = rng.standard_normal((1, 4, 3, 3, 3)).astype(np.float32)
    out = _matches_onnxruntime(src, {"x": x}, ort_run, o3=True)
    assert "ConvTranspose" in [n.op_type for n in onnx.load(str(out)).graph.node]


@pytest.mark.parametrize("attrs", [{"kernel_shape": [2, 2, 2]},
                                   {"kernel_shape": [3, 2, 2], "strides": [2, 1, 2], "pads": [1, 0, 1, 1, 1, 0],
                                    "p": 3}])
def test_lp_pool_3d_matches_onnxruntime(attrs, tmp_path, ort_run):
    node = helper.make_node("LpPool", ["x"], ["y"], **attrs)
    graph = helper.make_graph([node], "lp3", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 5, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    src = tmp_path / "lp3.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(src))
    x = np.random.default_rng(5).standard_normal((1, 2, 4, 5, 4)).astype(np.float32)
    _matches_onnxruntime(src, {"x": x}, ort_run)


def test_global_lp_pool_nonzero_of_a_constant_and_compress_match_onnxruntime(tmp_path, ort_run):
    mask = numpy_helper.from_array(np.array([[1, 0, 2], [0, 0, 3]], dtype=np.float32), "mask")
    nodes = [helper.make_node("GlobalLpPool", ["x"], ["g"], p=3),
             helper.make_node("NonZero", ["mask"], ["nz"]),
             helper.make_node("Compress", ["x", "keep"], ["c"], axis=-1)]
    graph = helper.make_graph(nodes, "dz", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5])],
                              [helper.make_tensor_value_info(n, t, None) for n, t in
                               (("g", TensorProto.FLOAT), ("nz", TensorProto.INT64), ("c", TensorProto.FLOAT))],
                              initializer=[mask, numpy_helper.from_array(np.array([True, False, True]), "keep")])
    src = tmp_path / "dz.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(src))
    x = np.random.default_rng(6).standard_normal((2, 3, 4, 5)).astype(np.float32)
    _matches_onnxruntime(src, {"x": x}, ort_run, tol=(1e-5, 1e-6))
    dynamic = helper.make_model(helper.make_graph(
        [helper.make_node("NonZero", ["x"], ["y"], name="nz")], "d", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, None)]), opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(FormatError, match=r"NonZero node 'nz' \(opset 17\): the data \(its number of nonzeros decides "
                                          r"the output shape\) \(input 0\) must be known at import time"):
        from_onnx(dynamic)


@pytest.mark.parametrize("attrs,mask", [
    ({}, False),
    ({"strides": [2, 1], "pads": [1, 0, 1, 2], "dilations": [1, 2]}, True),
    ({"group": 2, "offset_group": 2, "pads": [1, 1, 1, 1]}, True),
])
def test_deform_conv_matches_onnxruntime_through_o3(attrs, mask, tmp_path, ort_run):
    rng = np.random.default_rng(8)
    x_shape, kernel = (2, 4, 7, 6), (3, 3)
    strides, dil = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1])
    pads = attrs.get("pads", [0, 0, 0, 0])
    oh = (x_shape[2] + pads[0] + pads[2] - dil[0] * (kernel[0] - 1) - 1) // strides[0] + 1
    ow = (x_shape[3] + pads[1] + pads[3] - dil[1] * (kernel[1] - 1) - 1) // strides[1] + 1
    og = attrs.get("offset_group", 1)
    w = rng.standard_normal((6, 4 // attrs.get("group", 1), *kernel)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "b")]
    inputs = ["x", "w", "off", "b"] + (["m"] if mask else [])
    feeds_info = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape)),
                  helper.make_tensor_value_info("off", TensorProto.FLOAT, [2, og * 18, oh, ow])]
    if mask:
        feeds_info.append(helper.make_tensor_value_info("m", TensorProto.FLOAT, [2, og * 9, oh, ow]))
    node = helper.make_node("DeformConv", inputs, ["y"], kernel_shape=list(kernel), **attrs)
    graph = helper.make_graph([node, helper.make_node("Relu", ["y"], ["z"])], "dcn", feeds_info,
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], initializer=inits)
    src = tmp_path / "dcn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]), str(src))
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32),
             "off": (rng.standard_normal((2, og * 18, oh, ow)) * 2).astype(np.float32)}   # many samples outside
    if mask:
        feeds["m"] = rng.uniform(0, 1, (2, og * 9, oh, ow)).astype(np.float32)
    _matches_onnxruntime(src, feeds, ort_run, tol=(1e-4, 1e-5), o3=True)


@pytest.mark.parametrize("storage_order", [0, 1])
def test_maxpool_indices_and_max_unpool_match_onnxruntime(storage_order, tmp_path, ort_run):
    # a SegNet-style pair: pool with indices, a convolution between, unpool back
    rng = np.random.default_rng(9)
    w = numpy_helper.from_array(rng.standard_normal((3, 3, 1, 1)).astype(np.float32), "w")
    nodes = [helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1],
                              storage_order=storage_order),
             helper.make_node("Conv", ["p", "w"], ["c"]),
             helper.make_node("MaxUnpool", ["c", "i"], ["u"], kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1])]
    graph = helper.make_graph(nodes, "segnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 7, 5])],
                              [helper.make_tensor_value_info("u", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("i", TensorProto.INT64, None)], initializer=[w])
    src = tmp_path / "segnet.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)]), str(src))
    x = rng.standard_normal((2, 3, 7, 5)).astype(np.float32)
    # (an index is a flat position for MaxUnpool, whatever the order)
    _matches_onnxruntime(src, {"x": x}, ort_run, tol=(1e-5, 1e-6), o3=True)


def test_col2im_of_several_channels_matches_onnxruntime(tmp_path, ort_run):
    # PyTorch's fold of 3-channel 3x2 blocks, stride 2, dilation (1, 2), padded: 2 x 3 x 7 x 6 images
    inits = [numpy_helper.from_array(np.array([7, 6], np.int64), "img"),
             numpy_helper.from_array(np.array([3, 2], np.int64), "blk")]
    node = helper.make_node("Col2Im", ["x", "img", "blk"], ["y"], strides=[2, 2], dilations=[1, 2], pads=[1, 0, 1, 1])
    grid = ((7 + 2 - 2 - 1) // 2 + 1) * ((6 + 1 - 2 - 1) // 2 + 1)
    graph = helper.make_graph([node], "fold", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 18, grid])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    src = tmp_path / "fold.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(src))
    x = np.random.default_rng(10).standard_normal((2, 18, grid)).astype(np.float32)
    _matches_onnxruntime(src, {"x": x}, ort_run, tol=(1e-5, 1e-6))


def test_batch_norm_in_training_mode_matches_onnxruntime(tmp_path, ort_run):
    rng = np.random.default_rng(11)
    inits = [numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), n) for n in ("s", "b", "m")]
    inits.append(numpy_helper.from_array(rng.uniform(0.5, 2, 4).astype(np.float32), "v"))
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], training_mode=1,
                            momentum=0.8, epsilon=1e-3)
    graph = helper.make_graph([node], "bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 5])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "rm", "rv")],
                              initializer=inits)
    src = tmp_path / "bn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)]), str(src))
    x = rng.standard_normal((3, 4, 5)).astype(np.float32) * 3 + 1
    _matches_onnxruntime(src, {"x": x}, ort_run)


def test_col2im_with_huge_declared_blocks_is_an_error_not_an_allocation():
    inits = [numpy_helper.from_array(np.array([2000, 2000], np.int64), "img"),
             numpy_helper.from_array(np.array([1000, 1000], np.int64), "blk")]
    node = helper.make_node("Col2Im", ["x", "img", "blk"], ["y"], name="fold")
    graph = helper.make_graph([node], "fold", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                             [1, 1000000, 1002001])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    with pytest.raises(FormatError, match=r"Col2Im node 'fold' \(opset 18\): blocks of 1000000 elements over 1 "
                                          r"channels are too large"):
        from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))


def test_a_model_the_checker_rejects_replaces_nothing(tmp_path, monkeypatch):
    """The checker runs while the new file is flushed to disk; when it rejects the model,
    the old file stays as it was and no temporary file is left."""
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2, 3])], [_vi("y", [2, 3])])
    src = tmp_path / "m.onnx"
    onnx.save(model, str(src))
    mod = ir.load(str(src))
    dst = tmp_path / "out.onnx"
    dst.write_bytes(b"the old model")

    def reject(model, full_check=False):
        raise onnx.checker.ValidationError("Node () has input size 7 not in range [min=1, max=1].")

    monkeypatch.setattr(onnx.checker, "check_model", reject)
    with pytest.raises(FormatError, match=r"out\.onnx.*fails onnx\.checker: Node \(\) has input size 7"):
        ir.save(mod, str(dst))
    assert dst.read_bytes() == b"the old model"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "out.onnx"]


@pytest.mark.parametrize("opset", [11, 13])
def test_shape_ops_of_an_initializer_import_as_a_view_of_it(opset):
    # Unsqueeze / Flatten / Reshape of a weight: the reshaped constant itself (the view
    # the fold gives), sharing the initializer's memory; nothing is left to evaluate
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    axes = ([helper.make_node("Constant", [], ["ax"], value=numpy_helper.from_array(np.array([0], np.int64)))],
            ["w", "ax"]) if opset >= 13 else ([], ["w"])
    nodes = axes[0] + [helper.make_node("Unsqueeze", axes[1], ["u"], **({} if opset >= 13 else {"axes": [0]})),
                       helper.make_node("Flatten", ["u"], ["f"], axis=2),
                       helper.make_node("Add", ["x", "f"], ["y"])]
    mod = from_onnx(_model(nodes, [_vi("x", [2, 3])], [_vi("y", [2, 3])], [numpy_helper.from_array(w, "w")],
                           opset=opset))
    body = mod["main"].body
    assert body.op.name == "add" and type(body.args[1]) is ir.Constant
    folded = body.args[1].data
    np.testing.assert_array_equal(folded, w)
    assert folded.shape == (2, 3) and not folded.flags.writeable
    assert ir.count_ops(mod["main"]) == {"add": 1}


def test_a_reshape_of_an_initializer_to_the_wrong_size_still_names_the_node():
    w = numpy_helper.from_array(np.zeros((2, 3), np.float32), "w")
    shape = numpy_helper.from_array(np.array([4, 2], np.int64), "s")
    model = _model([helper.make_node("Reshape", ["w", "s"], ["r"], name="bad_reshape"),
                    helper.make_node("Add", ["x", "r"], ["y"])],
                   [_vi("x", [4, 2])], [_vi("y", [4, 2])], [w, shape])
    with pytest.raises(FormatError, match="bad_reshape"):
        from_onnx(model)


@pytest.mark.parametrize("opset", [13, 17])
def test_hard_sigmoid_and_hard_swish_export_as_their_onnx_operators(opset, tmp_path, ort_run):
    # they import as Relay decomposes them (clip of a multiply-add); the export joins them back
    x = ir.var("x", shape=(2, 3, 4, 4))
    body = ir.Tuple([ir.nn.hard_swish(x), ir.nn.hard_sigmoid(x, alpha=0.25, beta=0.4),
                     ir.clip(ir.add(x, ir.const(np.float32(0.5))), 0.0, 1.0),     # alpha folded away: 1
                     ir.clip(ir.add(x, ir.const(np.float32(0.5))), 0.0, 2.0)])    # not a hard sigmoid
    mod = ir.IRModule.from_expr(ir.Function([x], body))
    src = tmp_path / "hard.onnx"
    ir.save(mod, str(src), opset=opset)
    model = onnx.load(str(src))
    ops = sorted(n.op_type for n in model.graph.node)
    if opset >= 14:
        assert ops == ["Add", "Clip", "HardSigmoid", "HardSigmoid", "HardSwish"]
    else:  # no HardSwish before opset 14: its hard sigmoid, times x
        assert ops == ["Add", "Clip", "HardSigmoid", "HardSigmoid", "HardSigmoid", "Mul"]
    attrs = [{a.name: round(a.f, 6) for a in n.attribute} for n in model.graph.node if n.op_type == "HardSigmoid"]
    assert {"alpha": 0.25, "beta": 0.4} in attrs and {"alpha": 1.0, "beta": 0.5} in attrs
    xa = np.random.RandomState(0).uniform(-5, 5, (2, 3, 4, 4)).astype("float32")
    for got, want in zip(ort_run(str(src), {"x": xa}), ir.evaluate(mod, xa)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("opset", [13, 18])
def test_one_d_convolution_and_pooling_export_as_one_d_operators(opset, tmp_path, ort_run):
    # they import as the 2-D operators between two reshapes (a height axis of 1); the
    # export writes the 1-D operators back, with their weights and attributes
    rng = np.random.RandomState(0)
    w = numpy_helper.from_array(rng.randn(4, 3, 5).astype("float32"), "w")
    b = numpy_helper.from_array(rng.randn(4).astype("float32"), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[2, 1], strides=[2], dilations=[2]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["m"], kernel_shape=[3], strides=[1], pads=[1, 1]),
             helper.make_node("AveragePool", ["m"], ["y"], kernel_shape=[2], strides=[2])]
    src = tmp_path / "conv1d.onnx"
    onnx.save(_model(nodes, [_vi("x", [2, 3, 40])], [_vi("y", [2, 4, 9])], [w, b], opset=opset), str(src))
    out = _matches_onnxruntime(src, {"x": rng.randn(2, 3, 40).astype("float32")}, ort_run, o3=True)
    model = onnx.load(str(out))
    assert [n.op_type for n in model.graph.node] == ["Conv", "Relu", "MaxPool", "AveragePool"]
    conv = model.graph.node[0]
    attrs = {a.name: list(a.ints) for a in conv.attribute if a.ints}
    assert attrs["kernel_shape"] == [5] and attrs["pads"] == [2, 1] and attrs["strides"] == [2]
    weight = {i.name: i for i in model.graph.initializer}[conv.input[1]]
    assert list(weight.dims) == [4, 3, 5]


@pytest.mark.parametrize("op,mode", [("DepthToSpace", "CRD"), ("DepthToSpace", "DCR"), ("SpaceToDepth", None)])
def test_depth_to_space_and_space_to_depth_export_as_one_node(op, mode, tmp_path, ort_run):
    # they import as reshape / transpose / reshape (TVM's spelling) and go back out as one node
    shape = [2, 8, 3, 4] if op == "DepthToSpace" else [2, 2, 6, 4]
    out = [2, 2, 6, 8] if op == "DepthToSpace" else [2, 8, 3, 2]
    attrs = {"blocksize": 2, **({"mode": mode} if mode else {})}
    nodes = [helper.make_node(op, ["x"], ["d"], **attrs), helper.make_node("Relu", ["d"], ["y"])]
    src = tmp_path / "d2s.onnx"
    onnx.save(_model(nodes, [_vi("x", shape)], [_vi("y", out)]), str(src))
    rng = np.random.RandomState(0)
    exported = _matches_onnxruntime(src, {"x": rng.randn(*shape).astype("float32")}, ort_run, o3=True)
    model = onnx.load(str(exported))
    assert [n.op_type for n in model.graph.node] == [op, "Relu"]
    assert {a.name: helper.get_attribute_value(a) for a in model.graph.node[0].attribute} == (
        {"blocksize": 2, **({"mode": mode.encode()} if mode else {})})


def test_a_kept_operator_keeps_the_positions_of_absent_inputs_and_unused_outputs(tmp_path, ort_run):
    # LSTM(X, W, R, B, sequence_lens="", initial_h) -> ("" (Y unused), Y_h): kept whole, it
    # must come back with the empty slots where they were, or initial_h would become
    # sequence_lens
    rng = np.random.RandomState(0)
    hidden, size = 3, 4
    inits = [numpy_helper.from_array(rng.randn(1, 4 * hidden, size).astype("float32"), "w"),
             numpy_helper.from_array(rng.randn(1, 4 * hidden, hidden).astype("float32"), "r"),
             numpy_helper.from_array(rng.randn(1, 8 * hidden).astype("float32"), "b")]
    lstm = helper.make_node("LSTM", ["x", "w", "r", "b", "", "h0"], ["", "h"], hidden_size=hidden, name="lstm")
    model = _model([lstm, helper.make_node("Relu", ["h"], ["y"])],
                   [_vi("x", [5, 2, size]), _vi("h0", [1, 2, hidden])], [_vi("y", [1, 2, hidden])], inits)
    src = tmp_path / "lstm.onnx"
    onnx.save(model, str(src))
    mod = ir.load(str(src), keep_ops=["LSTM"])
    assert ir.count_ops(mod["main"]) == {"onnx.opaque": 1, "nn.relu": 1}
    out = tmp_path / "out.onnx"
    ir.save(mod, str(out))
    node = onnx.load(str(out)).graph.node[0]
    assert node.op_type == "LSTM" and list(node.input)[4] == "" and list(node.input)[:2] == ["x", node.input[1]]
    assert node.output[0] == "" and node.output[1]
    feeds = {"x": rng.randn(5, 2, size).astype("float32"), "h0": rng.randn(1, 2, hidden).astype("float32")}
    # (exact by construction: the same LSTM kernel on the same weights and inputs, one thread)
    np.testing.assert_array_equal(ort_run(str(out), feeds)[0], ort_run(str(src), feeds)[0])


@pytest.mark.parametrize("keep,message", [
    (["Lstm"], r"keep_ops \(--keep-op\): the model has no Lstm node \(its graph uses Add\)"),
    ([""], r"operator names are non-empty strings"),
])
def test_keep_ops_that_cannot_be_kept_are_named(keep, message, tmp_path):
    src = tmp_path / "add.onnx"
    onnx.save(_model([helper.make_node("Add", ["x", "x"], ["y"])], [_vi("x", [2])], [_vi("y", [2])]), str(src))
    with pytest.raises(passhost.errors.UsageError, match=message):
        ir.load(str(src), keep_ops=keep)


def test_a_format_without_the_option_says_so_and_the_cli_passes_keep_op(tmp_path, capsys):
    txt = tmp_path / "m.txt"
    x = ir.var("x", shape=(2,))
    ir.save(ir.IRModule.from_expr(ir.Function([x], ir.nn.relu(x))), str(txt))
    with pytest.raises(passhost.errors.UsageError, match=r"format 'text' .* takes no read option 'keep_ops'; "
                                                         r"its options: input_shapes, keep_params"):
        ir.load(str(txt), keep_ops=["LSTM"])
    src = tmp_path / "add.onnx"
    onnx.save(_model([helper.make_node("Add", ["x", "x"], ["y"])], [_vi("x", [2])], [_vi("y", [2])]), str(src))
    assert main(["run", str(src), "-O3", "-o", str(tmp_path / "o.onnx"), "--keep-op", "Add"]) == 0
    assert [n.op_type for n in onnx.load(str(tmp_path / "o.onnx")).graph.node] == ["Add"]
    capsys.readouterr()
    assert main(["run", str(src), "-o", str(tmp_path / "o2.onnx"), "--keep-op", "Sub"]) == 2
    assert "the model has no Sub node" in capsys.readouterr().err
    assert not (tmp_path / "o2.onnx").exists()
    assert main(["run", "--example", "resnet18", "--keep-op", "LSTM"]) == 2


@pytest.mark.parametrize("bias_shape,merged", [((4,), False), ((4, 1, 1), True), ((1, 4, 1, 1), True)])
def test_only_a_bias_along_the_channel_axis_joins_the_convolution(bias_shape, merged, ort_run):
    # a (C,) constant broadcasts along the last axis (W == C here), not the channels: it
    # must stay an Add (it used to become the Conv's bias, 30 off)
    x = ir.var("x", shape=(1, 3, 6, 4))
    w = ir.const(np.random.RandomState(0).randn(4, 3, 3, 3).astype("float32"))
    b = ir.const((np.arange(4, dtype="float32") * 10).reshape(bias_shape))
    mod = ir.IRModule.from_expr(ir.Function([x], ir.add(ir.nn.conv2d(x, w, padding=(1, 1), channels=4,
                                                                       kernel_size=(3, 3)), b)))
    model = to_onnx(mod)
    assert [n.op_type for n in model.graph.node] == (["Conv"] if merged else ["Conv", "Add"])
    xa = np.random.RandomState(1).randn(1, 3, 6, 4).astype("float32")
    np.testing.assert_allclose(ort_run(model.SerializeToString(), {"x": xa})[0], ir.evaluate(mod, xa),
                               rtol=1e-5, atol=1e-5)


def test_a_three_d_convolutions_channel_bias_joins_it(ort_run):
    x = ir.var("x", shape=(1, 2, 5, 5, 5))
    w = ir.const(np.random.RandomState(0).randn(4, 2, 3, 3, 3).astype("float32"))
    b = ir.const(np.arange(4, dtype="float32").reshape(4, 1, 1, 1))
    mod = ir.IRModule.from_expr(ir.Function([x], ir.add(ir.nn.conv3d(x, w, channels=4, kernel_size=(3, 3, 3)), b)))
    model = to_onnx(mod)
    assert [n.op_type for n in model.graph.node] == ["Conv"]
    xa = np.random.RandomState(1).randn(1, 2, 5, 5, 5).astype("float32")
    np.testing.assert_allclose(ort_run(model.SerializeToString(), {"x": xa})[0], ir.evaluate(mod, xa),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("slope_shape", [(3, 1, 1, 1), (1, 3, 1, 1, 1)])
def test_a_per_channel_prelu_slope_of_any_rank_imports_as_nn_prelu(slope_shape, tmp_path, ort_run):
    # PyTorch's dynamo exporter writes the slope of a 3-D PReLU as [1, C, 1, 1, 1]
    slope = numpy_helper.from_array(np.array([0.1, 0.2, 0.3], "float32").reshape(slope_shape), "s")
    src = tmp_path / "prelu.onnx"
    onnx.save(_model([helper.make_node("PRelu", ["x", "s"], ["y"])], [_vi("x", [2, 3, 4, 4, 4])],
                     [_vi("y", [2, 3, 4, 4, 4])], [slope]), str(src))
    assert ir.count_ops(ir.load(str(src))["main"]) == {"nn.prelu": 1}
    out = _matches_onnxruntime(src, {"x": np.random.RandomState(0).randn(2, 3, 4, 4, 4).astype("float32")},
                               ort_run, o3=True)
    exported = onnx.load(str(out))
    assert [n.op_type for n in exported.graph.node] == ["PRelu"]
    assert len(exported.graph.initializer) == 1  # the slope once, as the node reads it


@pytest.mark.parametrize("opset", [17, 18])
def test_softplus_mish_and_elu_export_as_their_onnx_operators(opset, tmp_path, ort_run):
    # they import as arithmetic (TVM's decompositions); the export writes the operators back
    nodes = [helper.make_node("Softplus", ["x"], ["sp"]), helper.make_node("Elu", ["x"], ["el"], alpha=0.7),
             helper.make_node("Tanh", ["sp"], ["t"]), helper.make_node("Mul", ["x", "t"], ["mish"]),
             helper.make_node("Softplus", ["el"], ["y"])]
    src = tmp_path / "act.onnx"
    onnx.save(_model(nodes, [_vi("x", [2, 3, 4])], [_vi("mish", [2, 3, 4]), _vi("y", [2, 3, 4])], opset=opset),
              str(src))
    x = np.random.RandomState(0).uniform(-4, 4, (2, 3, 4)).astype("float32")
    out = _matches_onnxruntime(src, {"x": x}, ort_run, tol=(1e-5, 1e-6))
    ops = sorted(n.op_type for n in onnx.load(str(out)).graph.node)
    want = ["Elu", "Mish", "Softplus"] if opset >= 18 else ["Elu", "Mul", "Softplus", "Softplus", "Tanh"]
    assert ops == want


@pytest.mark.parametrize("o3", [False, True])
def test_softplus_and_mish_of_large_inputs_are_finite_as_in_onnxruntime(o3, tmp_path, ort_run):
    # TVM's log(exp(x) + 1) is inf above x = 88.7 in float32; onnxruntime's Softplus is x there
    nodes = [helper.make_node("Softplus", ["x"], ["sp"]), helper.make_node("Mish", ["x"], ["mish"])]
    src = tmp_path / "big.onnx"
    onnx.save(_model(nodes, [_vi("x", [8])], [_vi("sp", [8]), _vi("mish", [8])], opset=18), str(src))
    x = np.array([-1000, -90, -20, -0.5, 0, 0.5, 90, 1000], "float32")
    out = _matches_onnxruntime(src, {"x": x}, ort_run, tol=(1e-6, 1e-6), o3=o3)
    assert np.isfinite(ir.evaluate(ir.load(str(src)), x)[0]).all()
    assert sorted(n.op_type for n in onnx.load(str(out)).graph.node) == ["Mish", "Softplus"]


@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("axes,keepdims", [([1], 0), ([-1], 1), (None, 0), ([0, 2], 1)])
def test_reduce_log_sum_exp_of_large_inputs_is_finite_and_exports_as_itself(opset, axes, keepdims, tmp_path,
                                                                             ort_run):
    # log(sum(exp(x))) is inf once an element passes 88.7 in float32; the import takes the
    # maximum out first (TVM's relay.logsumexp), the export writes the one operator back
    kw = {"keepdims": keepdims}
    inputs, inits = ["x"], []
    if axes is not None:
        if opset >= 18:
            inits = [numpy_helper.from_array(np.array(axes, "int64"), "axes")]
            inputs.append("axes")
        else:
            kw["axes"] = axes
    src = tmp_path / "lse.onnx"
    onnx.save(_model([helper.make_node("ReduceLogSumExp", inputs, ["y"], **kw)], [_vi("x", [2, 3, 4])],
                     [_vi("y", None)], inits=inits, opset=opset), str(src))
    x = np.random.RandomState(0).uniform(-3, 3, (2, 3, 4)).astype("float32")
    x[0, 1, 2], x[1, 0, 0] = 300.0, -300.0
    out = _matches_onnxruntime(src, {"x": x}, ort_run, tol=(1e-6, 1e-5), o3=True)
    assert [n.op_type for n in onnx.load(str(out)).graph.node] == ["ReduceLogSumExp"]


def test_a_value_the_graph_outputs_is_never_merged_away_by_an_export_peephole(tmp_path, ort_run):
    # Conv + per-channel Add would become one Conv with a bias, but the Conv's own output
    # is a graph output too: it must stay
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype("float32"), "w")
    b = numpy_helper.from_array(rng.standard_normal((1, 4, 1, 1)).astype("float32"), "b")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Add", ["c", "b"], ["y"])]
    src = tmp_path / "conv_out.onnx"
    onnx.save(_model(nodes, [_vi("x", [1, 3, 6, 6])], [_vi("c", [1, 4, 6, 6]), _vi("y", [1, 4, 6, 6])],
                     inits=[w, b]), str(src))
    out = _matches_onnxruntime(src, {"x": rng.standard_normal((1, 3, 6, 6)).astype("float32")}, ort_run,
                               tol=(1e-5, 1e-5))
    assert [o.name for o in onnx.load(str(out)).graph.output] == ["c", "y"]


def test_transposes_that_undo_each_other_leave_the_export(tmp_path, ort_run):
    # GridSample's grid goes [N, H, W, 2] -> [N, 2, H, W] at import (TVM's layout) and back at
    # export: the two transposes cancel; a pair that does not undo itself stays
    rng = np.random.default_rng(7)
    nodes = [helper.make_node("GridSample", ["x", "g"], ["y"], align_corners=0),
             helper.make_node("Transpose", ["x"], ["t1"], perm=[0, 2, 3, 1]),
             helper.make_node("Transpose", ["t1"], ["z"], perm=[0, 2, 3, 1])]
    src = tmp_path / "gs.onnx"
    onnx.save(_model(nodes, [_vi("x", [1, 3, 5, 5]), _vi("g", [1, 4, 4, 2])],
                     [_vi("y", [1, 3, 4, 4]), _vi("z", [1, 5, 3, 5])], opset=20), str(src))
    feeds = {"x": rng.standard_normal((1, 3, 5, 5)).astype(np.float32),
             "g": rng.uniform(-1, 1, (1, 4, 4, 2)).astype(np.float32)}
    out = _matches_onnxruntime(src, feeds, ort_run, tol=(1e-5, 1e-6))
    assert sorted(n.op_type for n in onnx.load(str(out)).graph.node) == ["GridSample", "Transpose", "Transpose"]


@pytest.mark.parametrize("opset", [13, 18])
def test_reduce_l2_sum_square_and_an_argmax_round_trip_export_as_one_node(opset, tmp_path, ort_run):
    axes = ({"axes": [2]}, []) if opset < 18 else ({}, ["ax"])
    inits = [numpy_helper.from_array(np.array([2], np.int64), "ax")] if opset >= 18 else []
    nodes = [helper.make_node("ReduceL2", ["x"] + axes[1], ["l2"], keepdims=1, **axes[0]),
             helper.make_node("ReduceSumSquare", ["x"] + axes[1], ["ss"], keepdims=0, **axes[0]),
             helper.make_node("ArgMax", ["x"], ["am"], axis=1, keepdims=0),
             helper.make_node("Cast", ["am"], ["amf"], to=TensorProto.FLOAT)]
    src = tmp_path / "red.onnx"
    onnx.save(_model(nodes, [_vi("x", [2, 3, 4])], [_vi("l2", [2, 3, 1]), _vi("ss", [2, 3]), _vi("amf", [2, 4])],
                     inits, opset=opset), str(src))
    x = np.random.RandomState(0).randn(2, 3, 4).astype("float32")
    out = _matches_onnxruntime(src, {"x": x}, ort_run)
    ops = sorted(n.op_type for n in onnx.load(str(out)).graph.node)
    assert ops == ["ArgMax", "Cast", "ReduceL2", "ReduceSumSquare"]


def test_a_layer_norm_over_two_axes_exports_as_one_node(tmp_path, ort_run):
    # it imports as nn.layer_norm over one flattened axis between two reshapes
    rng = np.random.RandomState(0)
    inits = [numpy_helper.from_array(rng.randn(4, 8).astype("float32"), "g"),
             numpy_helper.from_array(rng.randn(4, 8).astype("float32"), "b")]
    nodes = [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-2, epsilon=1e-5)]
    src = tmp_path / "ln2.onnx"
    onnx.save(_model(nodes, [_vi("x", [2, 4, 8])], [_vi("y", [2, 4, 8])], inits, opset=17), str(src))
    out = _matches_onnxruntime(src, {"x": rng.randn(2, 4, 8).astype("float32")}, ort_run, o3=True)
    model = onnx.load(str(out))
    assert [n.op_type for n in model.graph.node] == ["LayerNormalization"]
    assert [a.i for a in model.graph.node[0].attribute if a.name == "axis"] == [1]
