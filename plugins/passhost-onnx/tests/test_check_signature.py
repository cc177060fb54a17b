"""``passhost run --check`` compares the written model's signature with the original's:
names, dtypes, ranks and symbolic dimensions as written."""
from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from passhost import ir
from passhost.cli import main
from passhost.cli.check import signature_changes


def _relu(path, dims, name="x", dtype=TensorProto.FLOAT):
    x = helper.make_tensor_value_info(name, dtype, dims)
    y = helper.make_tensor_value_info("y", dtype, dims)
    onnx.save(helper.make_model(helper.make_graph([helper.make_node("Relu", [name], ["y"])], "g", [x], [y]),
                                opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_a_kept_signature_passes_and_a_changed_one_is_named(tmp_path):
    a = _relu(tmp_path / "a.onnx", ["batch", 3])
    mod = ir.load(a)
    assert signature_changes(a, mod, a, mod) == []
    for other, what in ((_relu(tmp_path / "b.onnx", [1, 3]), "input 'x': FLOAT ['batch', 3] -> FLOAT [1, 3]"),
                        (_relu(tmp_path / "c.onnx", ["batch", 3], name="z"), "input 'x'"),
                        (_relu(tmp_path / "d.onnx", ["batch", 3], dtype=TensorProto.DOUBLE), "DOUBLE")):
        changes = signature_changes(a, mod, other, ir.load(other))
        assert changes and what in changes[0]
    assert signature_changes(a, mod, str(tmp_path / "b.onnx"), ir.load(str(tmp_path / "b.onnx")),
                             specialised=True) == []


def test_check_on_a_dynamic_model_keeps_its_signature_and_passes(tmp_path, capsys):
    src = _relu(tmp_path / "a.onnx", ["batch", "seq"])
    assert main(["run", src, "-O3", "-o", str(tmp_path / "out.onnx"), "--check"]) == 0
    assert "1 ok" in capsys.readouterr().err
    assert main(["run", src, "--bind-dim", "batch=2", "-O3", "-o", str(tmp_path / "out2.onnx"), "--check"]) == 0
