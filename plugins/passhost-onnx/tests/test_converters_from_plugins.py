"""A plugin teaches the importer a custom operator through passhost_register_converters:
the example plugin of docs/onnx.md, taken from the page's own text."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from passhost import hookimpl, ir
from passhost.errors import PluginLoadError
from passhost.hookspecs import ConverterEntry
from passhost.registry import Registry, use_registry

DOC = Path(__file__).resolve().parents[3] / "docs" / "onnx.md"


def _doc_plugin(tmp_path):
    text = DOC.read_text(encoding="utf-8")
    blocks = dict(re.findall(r"^```\w+ file=(\S+)\n(.*?)^```", text, re.S | re.M))
    path = tmp_path / "passhost_my_relu.py"
    path.write_text(blocks["passhost_my_relu.py"], encoding="utf-8")
    assert 'my-relu = "passhost_my_relu"' in blocks["pyproject.toml"]
    spec = importlib.util.spec_from_file_location("passhost_my_relu", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _model(tmp_path):
    node = helper.make_node("MyRelu", ["x"], ["y"], domain="com.example", alpha=0.25)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.example", 1)])
    path = str(tmp_path / "my_relu.onnx")
    onnx.save(model, path)
    return path


def test_docs_plugin_converts_the_custom_operator(tmp_path):
    path = _model(tmp_path)
    reg = Registry()
    assert reg.register_plugin(_doc_plugin(tmp_path), "my-relu")
    with use_registry(reg):
        mod = ir.load(path)
        assert ir.count_ops(mod["main"]) == {"multiply": 1, "maximum": 1}
        x = np.array([[-4.0, 0.0, 2.0], [1.0, -1.0, 8.0]], dtype="float32")
        np.testing.assert_allclose(ir.evaluate(mod, x), np.maximum(x, 0.25 * x))
        assert [r.as_dict()["name"] for r in reg.converter_records("onnx")] == ["onnx:com.example.MyRelu@1"]


def test_without_the_plugin_the_operator_is_opaque(tmp_path):
    path = _model(tmp_path)
    with use_registry(Registry()):
        assert ir.load(path) is not None  # MyRelu has its output type from the graph output
        assert "onnx.opaque" in ir.count_ops(ir.load(path)["main"])


def test_two_plugins_converting_the_same_operator_conflict(tmp_path):
    class Other:
        @hookimpl
        def passhost_register_converters(self):
            yield ConverterEntry("onnx", "MyRelu", lambda node: node.inputs[0], domain="com.example")

    reg = Registry()
    reg.register_plugin(_doc_plugin(tmp_path), "my-relu")
    reg.register_plugin(Other(), "other")
    assert [c.name for c in reg.conflicts] == ["onnx:com.example.MyRelu@1"]
    assert reg.converter_records("onnx") == []


def test_a_standard_operator_converter_replaces_the_built_in_one(tmp_path):
    class Negate:
        @hookimpl
        def passhost_register_converters(self):
            yield ConverterEntry("onnx", "Relu", lambda node: ir.negative(node.inputs[0]), since=6)

    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    path = str(tmp_path / "relu.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    reg = Registry()
    reg.register_plugin(Negate(), "negate")
    with use_registry(reg):
        assert ir.count_ops(ir.load(path)["main"]) == {"negative": 1}


@pytest.mark.parametrize("bad", [dict(format="", op_type="X"), dict(format="onnx", op_type="X", since=0),
                                 dict(format="onnx", op_type="X", domain=None)])
def test_bad_converter_entries(bad):
    with pytest.raises(PluginLoadError):
        ConverterEntry(convert=lambda node: None, **bad)
