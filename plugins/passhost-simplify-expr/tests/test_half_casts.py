"""SimplifyExpr's CastOfCast and FoldConstant with the half and low-precision dtypes: a cast
chain folds only through a dtype that holds every value of the first (float32 -> bfloat16
-> float32 is a rounding and stays)."""
from __future__ import annotations

import numpy as np
import pytest

import passhost
from passhost import ir
from passhost_simplify_expr.simplify_expr import _WIDENS  # the CastOfCast rule's table


def _all_values(dtype: str) -> np.ndarray:
    """Every value of an 8- or 16-bit (or 4-bit) dtype."""
    if dtype in ("int4", "uint4"):
        return (np.arange(-8, 8) if dtype == "int4" else np.arange(16)).astype(dtype)
    bits = np.dtype(dtype).itemsize * 8
    return np.arange(2 ** bits).astype(f"uint{bits}").view(dtype)


def _identical(a: np.ndarray, b: np.ndarray) -> bool:
    with np.errstate(invalid="ignore"):
        fa, fb = a.astype("float64"), b.astype("float64")
    return bool(np.all(((fa == fb) & (np.signbit(fa) == np.signbit(fb))) | (np.isnan(fa) & np.isnan(fb))))


def test_the_widening_table_holds_every_value():
    checked = 0
    for src, dsts in _WIDENS.items():
        if src not in ir.DTYPES or src == "bool" or np.dtype(src).itemsize > 2:
            continue
        values = _all_values(src)
        for dst in sorted(dsts & ir.DTYPES):
            with np.errstate(invalid="ignore"):  # (ml_dtypes warns converting signalling NaNs)
                back = values.astype(dst).astype(src)
            assert _identical(back, values), f"{src} -> {dst} -> {src} changes a value"
            checked += 1
    assert checked > 40


@pytest.mark.parametrize("chain,kept", [
    (("float32", "bfloat16", "float32"), True),     # a rounding: stays
    (("float32", "float16", "float32"), True),
    (("float16", "bfloat16", "float16"), True),
    (("bfloat16", "float16", "bfloat16"), True),
    (("bfloat16", "float32", "bfloat16"), False),   # a widening: both casts go
    (("float8_e4m3fn", "bfloat16", "float32"), False),
    (("int8", "bfloat16", "int32"), False),
    (("uint4", "float8_e5m2", "float32"), True),    # 9 is no e5m2 value
])
def test_cast_of_cast_folds_only_through_a_type_holding_every_value(chain, kept):
    src, mid, dst = chain
    x = ir.var("x", shape=(4,), dtype=src)
    mod = ir.IRModule.from_expr(ir.Function([x], ir.cast(ir.cast(x, mid), dst)))
    out = passhost.passes.SimplifyExpr()(mod)["main"].body
    casts = 0
    while isinstance(out, ir.Call):
        casts += 1
        out = out.args[0]
    assert casts == (2 if kept else (0 if src == dst else 1))
    if kept:
        return
    data = (np.arange(4) - 1).astype(src) if "int" in src else np.array([0.1, -3, 1e3, 7], "float32").astype(src)
    np.testing.assert_array_equal(ir.evaluate(ir.infer_type(mod), data),
                                  ir.evaluate(passhost.passes.SimplifyExpr()(mod), data))


def test_fold_constant_rounds_a_constant_through_bfloat16():
    c = ir.const(np.array([0.1, 1 / 3], "float32"))
    mod = ir.IRModule.from_expr(ir.Function([], ir.cast(ir.cast(c, "bfloat16"), "float32")))
    out = passhost.passes.FoldConstant()(passhost.passes.SimplifyExpr()(mod))["main"].body
    assert isinstance(out, ir.Constant)
    assert out.data.tolist() == [0.10009765625, 0.333984375]
