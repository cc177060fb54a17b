"""The CLI on inputs beyond what a machine holds, and on recursion errors (issue 38 §4).

A shape in the text can ask a pass (or the writer) for more memory than there is; that is
the input's doing, so ``passhost run`` exits 2 with one line naming the size asked for
(before: ``internal error MemoryError`` and exit 1). The type error of a function that
calls itself on every path is located at the function (before: no ``file:line:col``).
"""
from __future__ import annotations

import numpy as np

from passhost import ir
from passhost.cli import ExitCode, main

H = '#[version = "0.0.5"]\n'
#: a layer normalisation without scale and shift over a last axis of 10**13: FuseLayerNorm
#: builds its ones and zeros of that length (36.4 TiB of float32)
HUGE_LAYER_NORM = H + """def @main(%x: Tensor[(1, 10000000000000), float32]) {
  %0 = mean(%x, axis=[-1], keepdims=True);
  %1 = subtract(%x, %0);
  %2 = mean(power(%1, 2f), axis=[-1], keepdims=True);
  divide(%1, sqrt(add(%2, 1e-05f)))
}
"""


def _run(tmp_path, text, *args):
    path = tmp_path / "in.txt"
    path.write_text(text)
    return main(["run", str(path), *args, "-o", str(tmp_path / "out.txt")]), path


def test_a_pass_asked_for_a_huge_constant_exits_2_naming_the_size(tmp_path, capsys):
    code, _ = _run(tmp_path, HUGE_LAYER_NORM, "-p", "FuseLayerNorm")
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE_ERROR, err
    assert "out of memory in pass 'FuseLayerNorm'" in err
    assert "shape (10000000000000,) and dtype float32 (36.4 TiB)" in err
    assert "internal error" not in err and "Traceback" not in err and len(err.splitlines()) == 1


def test_running_out_of_memory_while_writing_exits_2(tmp_path, capsys, monkeypatch):
    def huge(*args, **kwargs):
        return np.zeros(10 ** 14)  # numpy's MemoryError, as a huge constant's base64 would give

    monkeypatch.setattr(ir, "astext", huge)
    monkeypatch.setattr(ir, "save", huge)
    code, _ = _run(tmp_path, H + "def @main(%x: float32) { negative(%x) }\n", "-p", "InferType")
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE_ERROR, err
    assert "out of memory: the input asks for an array of shape (100000000000000,) and dtype float64" in err


def test_a_function_calling_itself_on_every_path_is_located(tmp_path, capsys):
    code, path = _run(tmp_path, H + "def @main(%x: float32) {\n  @main(%x)\n}\n", "-O2")
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE_ERROR
    assert err.startswith(f"passhost: error: {path}:2:5: error: @main calls itself on every path"), err
