"""Every fenced ``python`` block of README.md and docs/ runs (issue 15, "docs that run").

A block runs on its own, in a fresh namespace and a temporary working directory, unless the
line before it is ``<!-- continued -->``: then it runs in the namespace of the block before
it on the same page. Signature lines are fenced as ``text``, files a page writes out as
```` ```python file=NAME ````; those files are written into the working directory (and it
is put on ``sys.path``) before the page's blocks run, so a block may import the plugin the
page just wrote. The working directory also holds what the examples open: ``model.txt``
(the tutorial's program, constants included), ``inputs.npz`` (inputs of its ``@main``) and
``resnet50.onnx`` (the ONNX model zoo's ResNet-50 from the ``onnx`` wheel).
"""
from __future__ import annotations

import contextlib
import io
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
FILE_BLOCK = re.compile(r"^```[a-z]+ file=(\S+)\n(.*?)^```", re.S | re.M)
CONTINUED = "<!-- continued -->"


def _blocks() -> list:
    """``(page, line, code, continued)`` for every python block."""
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in BLOCK.finditer(text):
            before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
            out.append((page, text.count("\n", 0, m.start()) + 1, m.group(1), before == CONTINUED))
    return out


BLOCKS = _blocks()


def _chain(index: int) -> list:
    """The blocks that run for block ``index``: those it continues, then itself."""
    chain = [BLOCKS[index]]
    while chain[0][3]:
        index -= 1
        assert index >= 0 and BLOCKS[index][0] == chain[0][0], "<!-- continued --> with no block before it"
        chain.insert(0, BLOCKS[index])
    return chain


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    from passhost import ir, testing

    mod = ir.IRModule.from_expr(testing.example())
    (tmp_path / "model.txt").write_text(ir.astext(mod))
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "inputs.npz", **{p.name_hint: rng.standard_normal(
        [int(d) for d in p.type_annotation.shape]).astype("float32") for p in mod["main"].params})
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def _onnx_model(workdir: Path) -> None:
    onnx = pytest.importorskip("onnx")  # the ONNX examples need passhost-onnx's dependency
    pytest.importorskip("passhost_onnx")
    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_resnet50.onnx"
    shutil.copy(light, workdir / "resnet50.onnx")


def test_the_pages_have_python_blocks():
    assert len(BLOCKS) >= 30
    assert any(b[3] for b in BLOCKS)  # and continuations


@pytest.mark.parametrize("index", range(len(BLOCKS)),
                         ids=[f"{p.relative_to(ROOT)}:{line}" for p, line, _, _ in BLOCKS])
def test_python_block_runs(index, workdir):
    chain = _chain(index)
    page = chain[0][0]
    text = page.read_text(encoding="utf-8")
    written = []
    for name, body in FILE_BLOCK.findall(text):
        path = workdir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
        if path.suffix == ".py" and path.parent == workdir:
            written.append(path.stem)
    if any(".onnx" in code for _, _, code, _ in chain):
        _onnx_model(workdir)
    namespace: dict = {"__name__": "__docs__"}
    try:
        for _, line, code, _ in chain:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                # dont_inherit: a block runs as a reader runs it, without this file's __future__ imports
                exec(compile(code, f"{page.name}:{line}", "exec", dont_inherit=True), namespace)  # noqa: S102
    finally:
        for name in written:
            sys.modules.pop(name, None)
