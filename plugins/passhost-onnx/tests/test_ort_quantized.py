"""The comparison with onnxruntime's quantized kernels (``ort_quantized`` in conftest.py)
gives the right verdict whatever the machine: shown here with onnxruntime replaced by a
simulation of its AVX2 kernel (u8 x s8 pairs added in int16 with saturation, the error
of onnxruntime issues #14642 and #16105), so these run the same on every machine. And the
plain ``ort_run`` refuses a model with such kernels."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from passhost import ir

_MS = "com.microsoft"


def _conv1d(bits: int):
    """A QLinearConv over 1-D uint8 data, weights over [-127, 127] (8 bits) or [-64, 64]."""
    rng = np.random.default_rng(6)
    top = 127 if bits == 8 else 64
    w = rng.integers(-top, top + 1, (4, 3, 5)).astype(np.int8)
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "xs"), numpy_helper.from_array(np.uint8(120), "xz"),
             numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(0.01, np.float32), "ws"),
             numpy_helper.from_array(np.int8(0), "wz"), numpy_helper.from_array(np.array(0.2, np.float32), "ys"),
             numpy_helper.from_array(np.uint8(128), "yz")]
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"], pads=[2, 2],
                            strides=[2])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 3, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 4, 8])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.integers(0, 256, (1, 3, 16)).astype(np.uint8)
    return model, x, w


def _case(bits, qref):
    """The model, its input, the exact answer, the AVX2-like one, and the derived bound."""
    model, x, w = _conv1d(bits)
    x2, w2, pads = x[:, :, None, :], w[:, :, None, :], (0, 2, 0, 2)
    exact = qref.qlinear_conv(x2, 0.05, np.uint8(120), w2, 0.01, np.int8(0), 0.2, np.uint8(128), pads=pads,
                              strides=(1, 2)).reshape(1, 4, 8)
    cols = qref.im2col(x2, (1, 5), pads, (1, 2), 120).astype(np.int64).reshape(8, 15)
    kern = w.reshape(4, 15).astype(np.int64)
    # the kernel's arithmetic: raw u8 x s8 products, adjacent pairs added and saturated to
    # int16 (vpmaddubsw), the pairs summed in int32, the zero point's share taken off
    products = np.concatenate([cols[:, None, :] * kern[None], np.zeros((8, 4, 1), np.int64)], axis=2)
    pairs = np.clip(products[..., 0::2] + products[..., 1::2], -32768, 32767)
    acc = pairs.sum(-1) - 120 * kern.sum(-1)
    avx2 = qref.requantize(acc.T[None], qref.multiplier(0.05, 0.01, 0.2), np.uint8(128), axis=1)
    bound = qref.u8s8_saturation_bound(cols[None, None], kern, qref.multiplier(0.05, 0.01, 0.2)).reshape(1, 4, 8)
    return model, x, exact, avx2, bound


def test_the_simulated_avx2_kernel_is_off_where_the_issue_says_and_within_the_derived_bound(qref):
    model, x, exact, avx2, bound = _case(8, qref)
    diff = np.abs(avx2.astype(int) - exact.astype(int))
    assert diff.max() >= 5  # several steps off, as the issue reports on AVX2 machines
    assert (diff <= bound).all()
    # with 7-bit weights nothing saturates: the same kernel is exact, and the bound is 0
    _, _, exact7, avx2_7, bound7 = _case(7, qref)
    np.testing.assert_array_equal(avx2_7, exact7)
    assert not bound7.any()


def test_ort_quantized_passes_passhost_exact_and_onnxruntime_within_the_bound(qref, ort_quantized):
    model, x, exact, avx2, bound = _case(8, qref)
    got = ort_quantized(model.SerializeToString(), {"x": x}, [exact], [exact.copy()], bound=bound, why="simulated",
                        saturates=True, runner=lambda m, f: [avx2])
    np.testing.assert_array_equal(got[0], avx2)


def test_ort_quantized_fails_an_exact_comparison_with_the_avx2_numbers(qref, ort_quantized):
    # what the old tests did (passhost == onnxruntime bit for bit): on AVX2 it fails
    model, x, exact, avx2, bound = _case(8, qref)
    with pytest.raises(AssertionError, match=r"onnxruntime differs from ONNX's exact definition by up to"):
        ort_quantized(model.SerializeToString(), {"x": x}, [exact], [exact], bound=0, why="exact", saturates=True,
                      runner=lambda m, f: [avx2])


def test_ort_quantized_fails_onnxruntime_beyond_the_bound(qref, ort_quantized):
    model, x, exact, avx2, bound = _case(8, qref)
    worse = avx2.copy()
    i = np.unravel_index(np.argmax(bound), bound.shape)
    worse[i] = exact[i] + bound[i] + 1 if exact[i] + bound[i] + 1 <= 255 else exact[i] - bound[i] - 1
    with pytest.raises(AssertionError, match=r"at 1 of 32 elements beyond the bound"):
        ort_quantized(model.SerializeToString(), {"x": x}, [exact], [exact], bound=bound, why="simulated",
                      saturates=True, runner=lambda m, f: [worse])


@pytest.mark.parametrize("where", [(0, 0, 0), (0, 3, 7)])
def test_ort_quantized_fails_passhost_one_step_off(where, qref, ort_quantized):
    model, x, exact, avx2, bound = _case(8, qref)
    off = exact.copy()
    off[where] += 1 if off[where] < 255 else -1
    with pytest.raises(AssertionError, match=r"output 0: passhost differs from ONNX's exact definition"):
        ort_quantized(model.SerializeToString(), {"x": x}, [exact], [off], bound=bound, why="simulated",
                      saturates=True, runner=lambda m, f: [avx2])


def test_ort_quantized_refuses_a_bound_that_ignores_saturation(qref, ort_quantized):
    # a bound not derived for saturation (here: one step) cannot hold for 8-bit weights
    model, x, exact, avx2, bound = _case(8, qref)
    with pytest.raises(AssertionError, match=r"may saturate onnxruntime's int16 pair sums"):
        ort_quantized(model.SerializeToString(), {"x": x}, [exact], [exact], bound=1, why="one step",
                      runner=lambda m, f: [exact])
    model7, x7, exact7, _, _ = _case(7, qref)
    ort_quantized(model7.SerializeToString(), {"x": x7}, [exact7], [exact7], bound=0, why="7-bit weights",
                  runner=lambda m, f: [exact7])


def test_passhost_and_onnxruntime_on_the_model_itself(qref, ort_quantized):
    # the real onnxruntime, whatever this machine's kernel: within the derived bound
    from passhost_onnx import from_onnx

    model, x, exact, _, bound = _case(8, qref)
    ort_quantized(model.SerializeToString(), {"x": x}, [exact], [ir.evaluate(from_onnx(model), x)], bound=bound,
                  why="derived", saturates=True)


def _if_model(then_nodes, opset_imports):
    """``y = If(c) then then_nodes' output t else x``: an operator inside a subgraph."""
    then = helper.make_graph(then_nodes, "then", [], [helper.make_tensor_value_info("t", TensorProto.UINT8, None)])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.UINT8, None)])
    graph = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)], "g",
                              [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                               helper.make_tensor_value_info("x", TensorProto.UINT8, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, None)])
    return helper.make_model(graph, opset_imports=opset_imports)


def test_ort_run_refuses_a_model_with_an_instruction_set_dependent_kernel(tmp_path, ort_run, qref):
    model, x, _, _, _ = _case(7, qref)
    with pytest.raises(RuntimeError, match=r"the model holds QLinearConv, whose onnxruntime kernels give numbers "
                                           r"that depend on the machine's instruction set.*ort_quantized"):
        ort_run(model.SerializeToString(), {"x": x})
    onnx.save(model, str(tmp_path / "q.onnx"))
    with pytest.raises(RuntimeError, match=r"ort_quantized"):
        ort_run(str(tmp_path / "q.onnx"), {"x": x})
    # a com.microsoft one, inside an If branch
    branch = _if_model([helper.make_node("Constant", [], ["s"], value=numpy_helper.from_array(np.float32(0.1))),
                        helper.make_node("Constant", [], ["z"], value=numpy_helper.from_array(np.uint8(3))),
                        helper.make_node("QLinearSigmoid", ["x", "s", "z", "s", "z"], ["t"], domain=_MS)],
                       [helper.make_opsetid("", 17), helper.make_opsetid(_MS, 1)])
    with pytest.raises(RuntimeError, match=r"the model holds com.microsoft.QLinearSigmoid"):
        ort_run(branch.SerializeToString(), {"c": np.array(True), "x": np.zeros((2, 3), np.uint8)})
    assert qref.isa_dependent_ops(branch) == {"com.microsoft.QLinearSigmoid"}


def test_ort_run_runs_quantize_and_dequantize_which_are_exact_everywhere(ort_run):
    # QuantizeLinear / DequantizeLinear are float32 division and multiplication with one
    # rounding: the same on every instruction set, so ort_run takes them
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0.1, np.float32), "s"), numpy_helper.from_array(np.uint8(5), "z")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    y, = ort_run(model.SerializeToString(), {"x": np.array([0.31, -1, 100, 0.04], np.float32)})
    q = np.array([3 + 5, 0, 255, 0 + 5])  # (-10 + 5 and 1000 + 5 saturate)
    np.testing.assert_array_equal(y, (q - 5).astype(np.float32) * np.float32(0.1))
