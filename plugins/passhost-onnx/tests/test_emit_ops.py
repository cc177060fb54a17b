"""Export of the host operators ONNX's node cases do not reach through import (take's clip and
wrap modes, tile with more reps than axes, repeat, full/zeros/ones, prelu, slices in size
mode, resize2d ...): each exported module runs in onnxruntime and agrees with passhost's
interpreter."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from passhost import ir
from passhost_onnx import to_onnx


def _call(name, *args, **attrs):
    return ir.Call(ir.Op.get(name), list(args), attrs)


def _x(shape=(2, 3, 4, 5), dtype="float32", name="x"):
    return ir.var(name, shape=shape, dtype=dtype)


def _cases():
    x = _x()
    i = ir.var("i", shape=(2, 3), dtype="int64")
    small = _x((1, 2, 3, 3))
    j = ir.var("j", shape=(2, 3, 2, 5), dtype="int64")
    return {
        "take_clip_axis": ([x, i], _call("take", x, i, axis=2, mode="clip")),
        "take_wrap_flat": ([x, i], _call("take", x, i, mode="wrap")),
        "take_fast_negative": ([x, i], _call("take", x, i, axis=1, mode="fast")),
        "tile_more_reps": ([x], _call("tile", x, reps=(2, 1, 1, 2, 1))),
        "tile_fewer_reps": ([x], _call("tile", x, reps=(2, 3))),
        "repeat": ([x], _call("repeat", x, repeats=2, axis=1)),
        "broadcast_to": ([x], _call("broadcast_to", x, shape=(3, 2, 3, 4, 5))),
        "full": ([], _call("full", ir.Constant(np.asarray(1.5, "float32")), shape=(2, 3), dtype="float32")),
        "zeros": ([], _call("zeros", shape=(2, 3), dtype="int64")),
        "ones_like": ([x], _call("add", x, _call("ones_like", x))),
        "zeros_like": ([x], _call("add", x, _call("zeros_like", x))),
        "full_like": ([x], _call("full_like", x, ir.Constant(np.asarray(2.0, "float32")))),
        "slice_negative_stride": ([x], _call("strided_slice", x, begin=(1, 2), end=(-3, -5), strides=(-1, -1),
                                             axes=(1, 3))),
        "slice_size_mode": ([x], _call("strided_slice", x, begin=(0, 1, 1), end=(2, -1, 2), slice_mode="size")),
        "argmin_keepdims": ([x], _call("argmin", x, axis=(2,), keepdims=True)),
        "argmax_last_index": ([x], _call("argmax", _call("round", x), axis=(3,), select_last_index=True)),
        "pad_reflect": ([x], _call("nn.pad", x, ir.Constant(np.asarray(0, "float32")),
                                   pad_width=((0, 0), (0, 0), (1, 2), (2, 1)), pad_mode="reflect")),
        "pad_edge_crop": ([x], _call("nn.pad", x, ir.Constant(np.asarray(0, "float32")),
                                     pad_width=((0, 0), (1, -1), (0, 0), (2, 0)), pad_mode="edge")),
        "prelu": ([x], _call("nn.prelu", x, ir.Constant(np.asarray([0.1, 0.2, 0.3], "float32")), axis=1)),
        "gather": ([x, j], _call("gather", x, j, axis=2)),
        "conv2d_transpose": ([small], _call("nn.conv2d_transpose", small,
                                            ir.Constant(np.random.RandomState(0).randn(2, 3, 3, 3).astype("float32")),
                                            channels=3, kernel_size=(3, 3), strides=(2, 2), padding=(1, 1, 0, 0),
                                            output_padding=(1, 0))),
        "instance_norm": ([x], _call("nn.instance_norm", x, ir.Constant(np.asarray([1, 2, 3], "float32")),
                                     ir.Constant(np.asarray([0, 1, -1], "float32")))),
        "resize_nearest": ([small], _call("image.resize2d", small, size=(7, 5), method="nearest_neighbor",
                                          coordinate_transformation_mode="asymmetric", rounding_method="floor")),
        "resize_linear": ([small], _call("image.resize2d", small, size=(6, 6), method="linear")),
        "resize_cubic": ([small], _call("image.resize2d", small, size=(6, 9), method="cubic", cubic_alpha=-0.75,
                                        coordinate_transformation_mode="align_corners")),
        "variance_last_axis": ([x], _call("variance", x, _call("mean", x, axis=(3,), keepdims=True), axis=(3,),
                                          keepdims=True)),
        "variance_unbiased_two_axes": ([x], _call("variance", x, _call("mean", x, axis=(1, 2), keepdims=True),
                                                  axis=(1, 2), unbiased=True)),
        "gelu": ([x], _call("nn.gelu", x)),
        "gelu_tanh": ([x], _call("nn.gelu", x, approximate="tanh")),
        "log_softmax_axis1": ([x], _call("nn.log_softmax", x, axis=1)),
        "logical_ops": ([x], _call("logical_xor", _call("logical_or", _call("logical_not", _call("less", x, ir.Constant(np.float32(0)))),
                                                        _call("greater", x, ir.Constant(np.float32(1)))),
                                   _call("logical_and", _call("less", x, ir.Constant(np.float32(2))),
                                         _call("greater", x, ir.Constant(np.float32(-1)))))),
        "cumsum_exclusive": ([x], _call("cumsum", x, axis=2, exclusive=True)),
        "cumsum_flat_to_float64": ([x], _call("cumsum", x, dtype="float64")),
        "topk_values_plus_indices": ([x], _call("add", _call("topk", x, k=2, axis=1, ret_type="values"),
                                                                               _call("cast", _call("topk", x, k=2, axis=1, ret_type="indices"), dtype="float32"))),
        "topk_ascend_int64": ([x], _call("topk", x, k=3, is_ascend=True, ret_type="indices", dtype="int64")),
        "one_hot": ([i], _call("one_hot", i, ir.Constant(np.float32(2)), ir.Constant(np.float32(-1)), depth=4, axis=1)),
        "ndarray_size": ([x], _call("add", _call("ndarray_size", x, dtype="float32"), x)),
        "arange": ([], _call("arange", start=1, stop=8, step=3, dtype="int64")),
        "bool_or_and": ([x], _call("minimum", _call("maximum", _call("less", x, ir.Constant(np.float32(0))),
                                                    _call("greater", x, ir.Constant(np.float32(1)))),
                                   _call("less", x, ir.Constant(np.float32(2))))),
    }


_CASES = _cases()


def _feed(var: ir.Var, rng) -> np.ndarray:
    t = var.type_annotation
    if t.dtype == "int64":  # indices: in range, out of range and negative
        return rng.randint(-7, 7, size=t.shape).astype("int64")
    return rng.randn(*t.shape).astype(t.dtype) * 2


@pytest.mark.parametrize("name", sorted(_CASES))
def test_exported_operator_runs_in_onnxruntime_like_the_interpreter(name, ort_run):
    params, body = _CASES[name]
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function(params, body)))
    rng = np.random.RandomState(0)
    feeds = [_feed(p, rng) for p in params]
    if name == "gather":
        feeds[1] = rng.randint(-4, 4, size=(2, 3, 2, 5)).astype("int64")
    if name == "take_fast_negative":  # fast mode: indices in range, negative ones count from the end
        feeds[1] = rng.randint(-3, 3, size=(2, 3)).astype("int64")
    want = ir.evaluate(mod, *feeds)
    model = to_onnx(mod)
    onnx.checker.check_model(model, full_check=True)
    got = ort_run(model.SerializeToString(), {p.name_hint: f for p, f in zip(params, feeds)})[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_exports_as_one_gelu_node_from_opset_20(approximate, ort_run):
    x = _x()
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([x], _call("nn.gelu", x, approximate=approximate))))
    model = to_onnx(mod, opset=20)
    assert [n.op_type for n in model.graph.node] == ["Gelu"]
    feed = np.random.RandomState(0).randn(2, 3, 4, 5).astype("float32") * 3
    got = ort_run(model.SerializeToString(), {"x": feed})[0]
    np.testing.assert_allclose(got, ir.evaluate(mod, feed), rtol=1e-5, atol=1e-6)
