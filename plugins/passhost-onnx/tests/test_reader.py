"""The file reader hands out weights in place and reads every file as ``onnx.load`` does."""
from __future__ import annotations

import mmap

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from passhost import ir
from passhost_onnx.reader import full_model, read_model


def _model(*, extra_inits=()) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((3, 4)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal((4,)).astype(np.float64), "b")
    shape = numpy_helper.from_array(np.array([4, 1], dtype=np.int64), "shape")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]),
         helper.make_node("Cast", ["h"], ["hd"], to=TensorProto.DOUBLE),
         helper.make_node("Add", ["hd", "b"], ["y0"]),
         helper.make_node("Reshape", ["y0", "shape"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [4, 1])],
        initializer=[w, b, shape, *extra_inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _same_as_onnx_load(path) -> None:
    model, arrays = read_model(str(path))
    want = onnx.load(str(path))
    assert full_model(model, arrays) == want
    for t in want.graph.initializer:
        if t.name in arrays:
            np.testing.assert_array_equal(arrays[t.name], numpy_helper.to_array(t))


def _root(arr):
    base = arr.base
    while isinstance(base, np.ndarray):
        base = base.base
    return base.obj if isinstance(base, memoryview) else base


def test_weights_are_views_of_one_buffer_and_the_rest_is_what_onnx_load_reads(zoo):
    model, arrays = read_model(zoo["squeezenet"])
    want = onnx.load(zoo["squeezenet"])
    assert set(arrays) == {t.name for t in want.graph.initializer}
    assert all(not t.HasField("raw_data") for t in model.graph.initializer)
    roots = {id(_root(a)) for a in arrays.values()}  # one buffer: the file, mapped (it is above 1 MB)
    assert len(roots) == 1 and isinstance(_root(next(iter(arrays.values()))), mmap.mmap)
    assert all(not a.flags.writeable for a in arrays.values())
    assert full_model(model, arrays) == want
    for t in want.graph.initializer:
        np.testing.assert_array_equal(arrays[t.name], numpy_helper.to_array(t))


def test_load_keeps_the_file_bytes_as_constants_and_runs_the_same(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(_model(), str(path))
    mod = ir.load(str(path))
    x = np.arange(3, dtype=np.float32).reshape(1, 3)
    m = _model()
    w, b = (numpy_helper.to_array(t) for t in m.graph.initializer[:2])
    np.testing.assert_allclose(ir.evaluate(mod["main"], x), ((x @ w).astype(np.float64) + b).reshape(4, 1))
    mod, params = ir.load(str(path), keep_params=True)
    assert sorted(params) == ["b", "w"] and params["w"].dtype == np.float32


def test_graph_field_twice_is_merged_as_protobuf_does(tmp_path):
    m = _model()
    first, second = onnx.ModelProto(), onnx.ModelProto()
    first.CopyFrom(m)
    second.graph.CopyFrom(m.graph)
    del first.graph.initializer[1:]
    del second.graph.node[:]
    del second.graph.input[:]
    del second.graph.output[:]
    del second.graph.initializer[:1]
    second.graph.name = ""
    path = tmp_path / "twice.onnx"
    path.write_bytes(first.SerializeToString() + second.SerializeToString())
    assert len(onnx.load(str(path)).graph.initializer) == 3
    _same_as_onnx_load(path)


def test_tensor_with_raw_data_twice_and_odd_sizes_are_left_to_protobuf(tmp_path):
    odd = TensorProto(name="odd", data_type=TensorProto.FLOAT, dims=[2], raw_data=b"\0" * 5)
    twice = numpy_helper.from_array(np.ones(2, np.float32), "twice")
    path = tmp_path / "m.onnx"
    data = _model(extra_inits=[odd]).SerializeToString()
    path.write_bytes(data)
    model, arrays = read_model(str(path))
    assert "odd" not in arrays and "w" in arrays
    assert model.graph.initializer[3].raw_data == b"\0" * 5
    _same_as_onnx_load(path)
    # a second raw_data field after the last initializer's own: protobuf keeps the last one
    m = _model(extra_inits=[twice])
    inits = [t.SerializeToString() for t in m.graph.initializer]
    inits[-1] += TensorProto(raw_data=np.full(2, 7, np.float32).tobytes()).SerializeToString()
    m.graph.ClearField("initializer")
    graph_bytes = m.graph.SerializeToString() + b"".join(bytes([0x2A]) + _varint(len(t)) + t for t in inits)
    m.ClearField("graph")
    path.write_bytes(m.SerializeToString() + bytes([0x3A]) + _varint(len(graph_bytes)) + graph_bytes)
    loaded = onnx.load(str(path))
    np.testing.assert_array_equal(numpy_helper.to_array(loaded.graph.initializer[-1]), np.full(2, 7, np.float32))
    model, arrays = read_model(str(path))
    assert "twice" not in arrays
    _same_as_onnx_load(path)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def test_external_data_beside_the_model_is_mapped_in_place(tmp_path):
    from passhost import weights

    big = numpy_helper.from_array(np.arange(4096, dtype=np.float32), "big")
    path = tmp_path / "ext.onnx"
    onnx.save_model(_model(extra_inits=[big]), str(path), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="ext.onnx.data", size_threshold=1024)
    model, arrays = read_model(str(path))
    big_t = next(t for t in model.graph.initializer if t.name == "big")
    assert big_t.data_location == TensorProto.DEFAULT and not big_t.external_data and not big_t.HasField("raw_data")
    assert weights.is_mapped(arrays["big"]) and not arrays["big"].flags.writeable
    np.testing.assert_array_equal(arrays["big"], np.arange(4096, dtype=np.float32))
    _same_as_onnx_load(path)


def test_every_truncation_and_corruption_reads_or_fails_as_onnx_load_does(tmp_path):
    data = _model().SerializeToString()
    rng = np.random.default_rng(7)
    variants = [data[:i] for i in range(len(data))]
    for _ in range(300):
        b = bytearray(data)
        for pos in rng.integers(0, len(b), size=int(rng.integers(1, 4))):
            b[pos] = int(rng.integers(0, 256))
        variants.append(bytes(b))
    path = tmp_path / "v.onnx"
    for v in variants:
        path.write_bytes(v)
        try:
            want = onnx.load(str(path))
        except Exception as err:  # noqa: BLE001 - whatever protobuf raises, the reader raises too
            with pytest.raises(type(err)):
                read_model(str(path))
            continue
        model, arrays = read_model(str(path))
        assert full_model(model, arrays) == want


@pytest.mark.parametrize("dtype", [np.float16, np.int8, np.uint16, np.int32, np.bool_, np.complex64])
def test_each_raw_dtype_reads_as_onnx_load(tmp_path, dtype):
    arr = (np.arange(6) % 2).astype(dtype).reshape(2, 3)
    t = numpy_helper.from_array(arr, "t")
    path = tmp_path / "m.onnx"
    onnx.save(_model(extra_inits=[t]), str(path))
    _same_as_onnx_load(path)
    model, arrays = read_model(str(path))
    if "t" in arrays:
        assert arrays["t"].dtype == arr.dtype and arrays["t"].shape == (2, 3)


def test_a_damaged_or_unsupported_initializer_is_named_in_one_message(tmp_path):
    from passhost.errors import FormatError

    short = _model()
    short.graph.initializer[0].raw_data = short.graph.initializer[0].raw_data[:-4]
    strings = _model()
    strings.graph.initializer[1].data_type = TensorProto.STRING
    for model, want in ((short, r"initializer 'w' \(float32\[3x4\]\): its data does not match its type and dims"),
                        (strings, r"initializer 'b': ONNX element type STRING has no passhost dtype "
                                  r"\(supported: bfloat16, bool, float16, .*uint4, uint64, uint8\)")):
        path = tmp_path / "m.onnx"
        onnx.save(model, str(path))
        with pytest.raises(FormatError, match=want):
            ir.load(str(path))


def test_a_file_whose_weights_are_constant_nodes_is_parsed_whole(tmp_path):
    """Cutting out the initializers' bytes only pays when they are most of the file: with
    megabytes of Constant nodes around a small initializer, protobuf parses the file whole."""
    big = numpy_helper.from_array(np.ones((512, 1024), np.float32), "big")
    m = _model()
    m.graph.node.insert(0, helper.make_node("Constant", [], ["k"], value=big))
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    model, arrays = read_model(str(path))
    assert arrays == {} and model == onnx.load(str(path))
    _same_as_onnx_load(path)
