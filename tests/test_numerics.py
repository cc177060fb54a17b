"""Tests for :mod:`passhost.numerics`."""
from __future__ import annotations

import math

import numpy as np
import pytest

from passhost import ir, testing
from passhost.errors import PasshostError
from passhost.numerics import compare_outputs, evaluable, load_npz, random_inputs


def test_compare_outputs_match_and_worst():
    a = np.array([1.0, np.nan, 3.0], "float32")
    assert compare_outputs(a.copy(), a, 0, 0) is None
    b = np.array([1.0, 2.0], "float32")
    max_abs, max_rel, msg = compare_outputs((b, b * 3), (b, b), 1e-5, 1e-5)
    assert (max_abs, max_rel) == (4.0, 2.0)
    assert msg == "output[1]: max abs error 4, max rel error 2 (2 of 2 elements beyond rtol=1e-05, atol=1e-05)"
    assert compare_outputs(np.int32(3), np.int32(4), 1.0, 1.0)[:2] == (1.0, 0.25)


def test_compare_outputs_structure_and_dtype_changes_are_infinite():
    a = np.zeros(3, "float32")
    max_abs, max_rel, msg = compare_outputs(a, (a, a), 0, 0)
    assert math.isinf(max_abs) and math.isinf(max_rel)
    assert msg == "the result structure changed (2 arrays expected, got 1)"
    assert compare_outputs(a.astype("float64"), a, 0, 0)[2] == "output changed from float32[3] to float64[3]"


def test_random_inputs_is_the_testing_helper():
    assert testing.random_inputs is random_inputs
    mod = testing.example()
    first, again = random_inputs(mod, 7), random_inputs(mod, 7)
    assert all(np.array_equal(x, y) for x, y in zip(first, again))


def test_evaluable_leaves_untyped_module_untouched():
    x = ir.var("x", shape=(2,), dtype="float32")
    mod = ir.IRModule.from_expr(ir.Function([x], ir.add(x, ir.const(np.ones(2, "float32")))))
    copy = evaluable(mod)
    assert copy is not mod
    ir.evaluate(copy, np.zeros(2, "float32"))
    assert not mod["main"].has_type
    typed = ir.infer_type(mod)
    assert evaluable(typed) is typed


class _Oops(PasshostError):
    pass


def test_load_npz_reads_named_arrays_and_names_the_file_in_errors(tmp_path):
    good = tmp_path / "p.npz"
    np.savez(good, w=np.arange(3, dtype="float32"))
    arrays = load_npz(str(good), "--params")
    assert list(arrays) == ["w"] and arrays["w"].tolist() == [0.0, 1.0, 2.0]
    single = tmp_path / "one.npy"
    np.save(single, np.zeros(2))
    with pytest.raises(_Oops, match=r"^x: --params '.*one\.npy' holds a single array; save named arrays"):
        load_npz(str(single), "--params", _Oops, prefix="x: ")
    with pytest.raises(PasshostError, match=r"^cannot read inputs '.*missing\.npz': "):
        load_npz(str(tmp_path / "missing.npz"), "inputs")
    pickled = tmp_path / "obj.npz"
    np.savez(pickled, o=np.array([{"a": 1}], dtype=object))
    with pytest.raises(PasshostError, match="cannot read inputs"):
        load_npz(str(pickled), "inputs")["o"]
