"""Shared fixtures of the host's tests.

``opcheck`` bundles the checks every operator test repeats: run a call's type
relation and kernel together, print/parse round trips, and FoldConstant folding.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import passhost
from passhost import ir
from passhost.ir import TensorType, TupleType


def _arg_type(a):
    if isinstance(a, (list, tuple)):
        return TupleType([TensorType(x.shape, x.dtype.name) for x in a])
    return TensorType(a.shape, a.dtype.name)


def run(call, *arrays):
    """Infer the call's type from the arrays, run its kernel, check shape and dtype agree."""
    ty = call.op.type_rel([_arg_type(a) for a in arrays], call.attrs)
    out = call.op.compute(list(arrays), call.attrs)
    if isinstance(ty, TupleType):
        assert isinstance(out, tuple) and len(out) == len(ty.fields)
        for o, t in zip(out, ty.fields):
            assert o.shape == t.shape and o.dtype.name == t.dtype, (o.shape, o.dtype, t)
    else:
        assert isinstance(out, np.ndarray), type(out)
        assert out.shape == ty.shape and out.dtype.name == ty.dtype, (out.shape, out.dtype, ty)
    return out


def rel(call, *types):
    """The call's type relation applied to ``types`` (TensorType or None)."""
    return call.op.type_rel(list(types), call.attrs)


def roundtrip(body, params=None):
    """Print ``fn(params) { body }`` with its metadata, parse it back, and check both the
    structure and the text survive; returns the printed text."""
    params = list(params if params is not None else ir.free_vars(body))
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function(params, body)))
    text = mod.astext(show_meta_data=True)
    back = ir.parse(text)
    assert ir.structural_equal(back, mod), text
    assert back.astext(show_meta_data=True) == text
    return text


def folds(call, want=None, rtol=1e-6, atol=1e-6):
    """FoldConstant turns ``call`` (all arguments constant) into one constant whose value
    equals the kernel's (or ``want``); returns that value."""
    mod = ir.IRModule.from_expr(ir.Function([], call))
    out = passhost.passes.FoldConstant()(mod)["main"].body
    assert isinstance(out, ir.Constant), str(out)
    if want is None:
        want = call.op.compute([a.data for a in call.args], call.attrs)
    assert out.data.dtype == want.dtype
    np.testing.assert_allclose(out.data, want, rtol=rtol, atol=atol)
    return out.data


@pytest.fixture
def opcheck():
    return SimpleNamespace(run=run, rel=rel, roundtrip=roundtrip, folds=folds)


@pytest.fixture
def fake_entry_points(monkeypatch, tmp_path):
    """``install({module name: source})``: each module is written to ``tmp_path`` and becomes
    an entry point of the group ``passhost`` (named with ``-`` for ``_``), replacing the
    installed ones for ``metadata.entry_points(group="passhost")``; the modules are
    forgotten afterwards."""
    import sys
    import textwrap
    from importlib import metadata

    installed: list = []

    def install(modules: dict) -> None:
        for name, source in modules.items():
            (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        monkeypatch.syspath_prepend(str(tmp_path))
        eps = [metadata.EntryPoint(name.replace("_", "-"), name, "passhost") for name in modules]
        real = metadata.entry_points

        def fake(**params):
            return metadata.EntryPoints(eps) if params.get("group") == "passhost" else real(**params)

        monkeypatch.setattr(metadata, "entry_points", fake)
        installed.extend(modules)

    yield install
    for name in installed:
        sys.modules.pop(name, None)


def pytest_addoption(parser):
    group = parser.getgroup("passhost fuzz", "the text-format fuzzer (tests/test_fuzz_text.py)")
    group.addoption("--fuzz-mutants", type=int, default=None,
                    help="mutants to check (default: the quick CI count)")
    group.addoption("--fuzz-seed", type=int, default=None, help="the fuzzer's seed")
    group.addoption("--fuzz-only", type=int, default=None, help="check only this mutant index")
    passes = parser.getgroup("passhost pass fuzz", "the pass fuzzer (tests/test_fuzz_passes.py)")
    passes.addoption("--fuzz-graphs", type=int, default=None,
                     help="random graphs to run every pass and -O level on (default: the quick count)")
    passes.addoption("--fuzz-first", type=int, default=0, help="the first graph's seed")
    passes.addoption("--fuzz-report", default=None, help="append each chunk's counts to this file (JSON lines)")
