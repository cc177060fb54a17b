"""bfloat16, float8, int4 and uint4 in the IR, and every operator on float16 and bfloat16.

The operator check replays ``tests/data/op_cases.txt`` (static calls of every core operator,
see ``tests/test_symbolic_ops.py``): each case with a float32 argument is typed again with
float32 replaced by float16 or bfloat16 and run on random inputs. The relation must type it,
and the kernel must give exactly the float32 kernel's result on the same (widened) inputs,
rounded once to the half type: the operators of ``FLOAT32_FOR_HALF`` compute in float32
and round their result, the others run on the half arrays as one numpy/ml_dtypes ufunc,
which rounds the same way. The normalisations of ``SCALED_IN_HALF`` are held to their own
rule instead, deliberately (ONNX's function body and Hugging Face's half-precision RMSNorm):
the float32 normalisation with a unit scale, rounded to the half type, times the scale in the
half type. ``nn.attention`` (``ROUNDED_IN_STEPS``) is held to the steps of ONNX's function body
of ``Attention`` with ``softmax_precision=1``, written out here in numpy.
"""
from __future__ import annotations

import collections
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from passhost import ir
from passhost.errors import ParseError
from passhost.ir.ops._util import FLOAT32_FOR_HALF, ROUNDED_IN_STEPS, SCALED_IN_HALF
from passhost.ir.types import FLOAT_DTYPES, LOW_PRECISION_DTYPES, is_float

CASES = Path(__file__).parent / "data" / "op_cases.txt"
HALF = ("float16", "bfloat16")


def _cases() -> dict:
    by_op: dict = collections.defaultdict(list)
    for line in CASES.read_text(encoding="utf-8").splitlines():
        name, text = line.split("\t")
        by_op[name].append(text)
    return dict(by_op)


BY_OP = _cases()
#: operators with no float argument: bit, boolean and shape operators
INTEGER_ONLY = {"bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "left_shift", "right_shift",
                "logical_and", "logical_not", "logical_or", "logical_xor", "shape_value"}
#: calls of the operators whose recorded cases have no float32 tensor argument of their own
#: (no arguments, tuple arguments, integer data)
EXTRA = {
    "arange": ["fn () { arange(start=1, stop=40, step=0.37f, dtype=\"D\") }"],
    "concatenate": ["fn (%a0: Tensor[(2, 3), D], %a1: Tensor[(2, 2), D]) { concatenate((%a0, %a1), axis=1) }"],
    "einsum": ["fn (%a0: Tensor[(2, 3, 40), D], %a1: Tensor[(2, 40, 5), D]) "
               "{ einsum((%a0, %a1), equation=\"bij,bjk->bik\") }"],
    "cumsum": ["fn (%a0: Tensor[(3, 300), D]) { cumsum(%a0, axis=1) }"],
    "cumprod": ["fn (%a0: Tensor[(3, 7), D]) { cumprod(%a0, axis=1) }"],
    "zeros_like": ["fn (%a0: Tensor[(2, 3), D]) { zeros_like(%a0) }"],
    "ones_like": ["fn (%a0: Tensor[(2, 3), D]) { ones_like(%a0) }"],
}


def _core_ops() -> set:
    return {n for n in ir.list_ops()
            if getattr(ir.Op.get(n).definition.type_rel, "__module__", "").startswith("passhost.ir.ops.")}


def _inputs(fn, rng) -> tuple:
    """Random inputs for ``fn``'s parameters: the half-precision ones and the same values in
    float32 (for the float32 version of the case)."""
    half, wide = [], []
    for p in fn.params:
        t = p.type_annotation
        if not isinstance(t, ir.TensorType):
            return None
        if t.dtype in HALF:
            a = rng.uniform(-2, 2, size=t.shape).astype(t.dtype)
            half.append(a)
            wide.append(a.astype("float32"))
            continue
        if t.dtype == "bool":
            a = rng.rand(*t.shape) > 0.5
        elif is_float(t.dtype):
            a = rng.uniform(-2, 2, size=t.shape).astype(t.dtype)
        else:
            a = rng.randint(0, 2, size=t.shape).astype(t.dtype)
        half.append(a)
        wide.append(a)
    return half, wide


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    got, want = got.astype("float64"), want.astype("float64")
    return bool(np.all((got == want) | (np.isnan(got) & np.isnan(want))))


def _scaled_in_half(fn32, wide: list, dtype: str) -> np.ndarray:
    """What a :data:`SCALED_IN_HALF` call ``op(x, scale)`` gives on half inputs: its float32
    result with a unit scale, rounded to ``dtype``, times the scale, the product rounded."""
    assert len(wide) == 2, "a SCALED_IN_HALF operator takes (data, scale)"
    x, scale = wide
    normalised = ir.evaluate(fn32, x, np.ones_like(scale)).astype(dtype).astype("float32")
    return (normalised * scale).astype("float32")


def _attention_in_steps(fn32, wide: list, dtype: str) -> np.ndarray:
    """What ``nn.attention(q, k, v, mask)`` gives on half inputs: ONNX's function body with
    ``softmax_precision=1`` -- the scaled query and key, their product and the masked scores
    rounded to ``dtype``, the softmax in float32, the probabilities rounded, the product with
    the values rounded (each product summed in float64 here, then rounded: as float32 sums
    round to the same half value but for a tie far below these inputs' precision)."""
    q, k, v, mask = wide
    scale = fn32.body.attrs.scale
    root = np.sqrt(1 / np.sqrt(q.shape[-1]) if scale is None else float(scale))

    def rnd(a):
        return np.asarray(a).astype(dtype).astype("float64")

    s = rnd(root)
    qs, ks = rnd(q * s), rnd(k * s)
    rep = q.shape[1] // k.shape[1]
    ks, vs = np.repeat(ks, rep, axis=1), np.repeat(v.astype("float64"), rep, axis=1)
    x = rnd(qs @ np.swapaxes(ks, -1, -2))
    x = x + np.where(mask, 0, -np.inf) if mask.dtype == np.bool_ else rnd(x + mask)
    x = x.astype("float32")
    e = np.exp(x - x.max(-1, keepdims=True))
    p = np.nan_to_num(e / e.sum(-1, keepdims=True), nan=0.0)
    return (rnd(p) @ vs).astype("float32")


def _check(text32: str, dtype: str, rng, scaled: bool = False, steps: bool = False) -> str:
    """'' if the case's ``dtype`` version types and computes as the float32 one rounded
    (or the float32 version itself fails), else what went wrong; with ``scaled`` (an
    operator of ``SCALED_IN_HALF``) as :func:`_scaled_in_half` has it, with ``steps``
    (``nn.attention``) as :func:`_attention_in_steps` does."""
    try:
        fn32 = ir.parse_expr(text32)
    except Exception:
        return ""
    try:
        fn = ir.parse_expr(text32.replace("float32", dtype))
    except Exception as err:
        return f"typing: {type(err).__name__}: {err}"
    feeds = _inputs(fn, rng)
    if feeds is None:
        return ""
    half, wide = feeds
    try:
        want = (_scaled_in_half(fn32, wide, dtype) if scaled else _attention_in_steps(fn32, wide, dtype) if steps
                else ir.evaluate(fn32, *wide))
    except Exception:
        return ""  # (inputs the case does not take: an index out of range, say)
    try:
        got = ir.evaluate(fn, *half)
    except Exception as err:
        return f"kernel: {type(err).__name__}: {err}"
    for i, (g, w) in enumerate(zip(got if isinstance(got, tuple) else (got,),
                                   want if isinstance(want, tuple) else (want,))):
        if w.dtype == np.float32 and g.dtype == np.float32:  # (a dtype attribute says float32)
            if not _same(g, w):
                return f"output {i}: float32 result differs"
        elif w.dtype == np.float32:
            if g.dtype.name != dtype:
                return f"output {i}: dtype {g.dtype.name}, expected {dtype}"
            if not _same(g, w.astype(dtype)):
                return f"output {i}: not the float32 result rounded to {dtype}"
        elif not np.array_equal(g, w):
            return f"output {i}: {w.dtype} result differs"
    return ""


def _float_cases(name: str) -> list:
    texts = [t for t in BY_OP.get(name, ()) if "float32" in t]
    texts += ['#[version = "0.0.5"] ' + t.replace("D", "float32") for t in EXTRA.get(name, ())]
    return texts


def test_every_core_operator_is_checked_on_half_types():
    unchecked = sorted(n for n in _core_ops() - INTEGER_ONLY if not _float_cases(n))
    assert not unchecked, f"give these operators float cases (EXTRA here, or op_cases.txt): {unchecked}"


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("name", sorted(_core_ops() - INTEGER_ONLY))
def test_operator_computes_half_types_as_float32_rounded_once(name, dtype):
    rng = np.random.RandomState(0)
    scaled, steps = name in SCALED_IN_HALF, name in ROUNDED_IN_STEPS
    failures = [f"{t}\n    -> {problem}" for t in _float_cases(name)
                if (problem := _check(t, dtype, rng, scaled, steps))]
    assert not failures, "\n".join(failures)


def test_the_float32_list_names_registered_operators_and_marks_them():
    assert FLOAT32_FOR_HALF <= _core_ops()
    for name in FLOAT32_FOR_HALF:
        assert ir.Op.get(name).definition.extra.get("half_in_float32") is True, name


def test_the_normalisations_scaled_in_half_are_marked_and_not_rounded_once():
    assert SCALED_IN_HALF <= _core_ops() and not SCALED_IN_HALF & FLOAT32_FOR_HALF
    for name in SCALED_IN_HALF:
        assert ir.Op.get(name).definition.extra.get("half_scaled_in_half") is True, name


def test_attention_rounds_in_steps_is_marked_and_not_rounded_once():
    assert ROUNDED_IN_STEPS <= _core_ops() and not ROUNDED_IN_STEPS & (FLOAT32_FOR_HALF | SCALED_IN_HALF)
    for name in ROUNDED_IN_STEPS:
        assert ir.Op.get(name).definition.extra.get("half_rounded_in_steps") is True, name
    q, k = ir.var("q", shape=(1, 2, 8, 16), dtype="float16"), ir.var("k", shape=(1, 2, 8, 16), dtype="float16")
    rng = np.random.RandomState(2)
    a, b = (rng.uniform(-2, 2, (1, 2, 8, 16)).astype("float16") for _ in range(2))
    got = ir.evaluate(ir.Function([q, k], ir.nn.attention(q, k, k, ir.const(np.zeros((), "float16")))), a, b)
    q32, k32 = ir.var("q", shape=(1, 2, 8, 16)), ir.var("k", shape=(1, 2, 8, 16))
    wide = ir.evaluate(ir.Function([q32, k32], ir.nn.attention(q32, k32, k32, ir.const(0.0))), a.astype("float32"),
                       b.astype("float32"))
    assert (got != wide.astype("float16")).any()


def test_attention_with_float32_values_under_a_half_query_gives_float32():
    """PyTorch's export of float16 SDPA: scores in float16, softmax and values in float32."""
    q, k = ir.var("q", shape=(1, 4, 3, 8), dtype="float16"), ir.var("k", shape=(1, 2, 5, 8), dtype="float16")
    v = ir.var("v", shape=(1, 2, 5, 8))
    fn = ir.infer_type(ir.Function([q, k, v], ir.nn.attention(q, k, v, ir.const(np.zeros((), "float16")))))
    assert fn.body.checked_type.dtype == "float32"
    rng = np.random.RandomState(3)
    a, b = rng.uniform(-2, 2, (1, 4, 3, 8)).astype("float16"), rng.uniform(-2, 2, (1, 2, 5, 8)).astype("float16")
    c = rng.uniform(-2, 2, (1, 2, 5, 8)).astype("float32")
    got = ir.evaluate(fn, a, b, c)
    s = np.float32(np.float16(np.sqrt(1 / np.sqrt(8))))
    qs, ks = (a.astype("float32") * s).astype("float16"), np.repeat((b.astype("float32") * s).astype("float16"), 2, 1)
    x = np.matmul(qs.astype("float32"), np.swapaxes(ks, -1, -2).astype("float32")).astype("float16").astype("float32")
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_array_equal(got, np.matmul(e / e.sum(-1, keepdims=True), np.repeat(c, 2, 1)))


def test_a_half_rms_norm_rounds_before_its_scale_unlike_rounding_once():
    """The rule of SCALED_IN_HALF is not the general one: on these inputs the two differ."""
    x, g = ir.var("x", shape=(64, 16), dtype="float16"), ir.var("g", shape=(16,), dtype="float16")
    rng = np.random.RandomState(1)
    a, ga = rng.uniform(-2, 2, (64, 16)).astype("float16"), rng.uniform(-2, 2, 16).astype("float16")
    got = ir.evaluate(ir.Function([x, g], ir.nn.rms_norm(x, g)), a, ga)
    af = a.astype("float32")
    n = af / np.sqrt((af * af).mean(-1, keepdims=True) + np.float32(1e-5))
    np.testing.assert_array_equal(got, (n.astype("float16").astype("float32") * ga.astype("float32")).astype("float16"))
    assert (got != (n * ga.astype("float32")).astype("float16")).any()


def test_the_docs_list_the_operators_computed_in_float32():
    text = (Path(__file__).resolve().parents[1] / "docs" / "ir.md").read_text(encoding="utf-8")
    section = text.split("### Half and low-precision dtypes", 1)[1].split("\n## ", 1)[0]
    for name in FLOAT32_FOR_HALF | SCALED_IN_HALF | ROUNDED_IN_STEPS:
        assert f"`{name}`" in section, f"docs/ir.md: list {name} among the operators computed in float32"


def test_a_bfloat16_sum_accumulates_in_float32():
    x = ir.var("x", shape=(4096,), dtype="bfloat16")
    got = ir.evaluate(ir.Function([x], ir.sum(x)), np.full(4096, 0.1, "bfloat16"))
    assert got.dtype.name == "bfloat16" and float(got) == float(np.float32(4096 * float(np.array(0.1, "bfloat16"))))


# -- dtypes, types and text --------------------------------------------------------------------------

def test_the_new_dtypes_are_ml_dtypes_names():
    assert LOW_PRECISION_DTYPES == {"bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
                                    "float8_e5m2fnuz", "int4", "uint4"}
    assert LOW_PRECISION_DTYPES <= ir.DTYPES
    for d in LOW_PRECISION_DTYPES:
        assert np.dtype(d).name == d
        assert ir.TensorType((2,), np.dtype(d)).dtype == d
        assert ir.TensorType((2,), getattr(ml_dtypes, d)).dtype == d
        assert is_float(d) == (d in FLOAT_DTYPES) == d.startswith(("float", "bfloat"))


def _roundtrip(mod):
    text = mod.astext(show_meta_data=True)
    back = ir.parse(text)
    assert ir.structural_equal(back, mod), text
    return text


def test_bfloat16_scalars_print_as_literals_and_read_back():
    x = ir.var("x", shape=(3,), dtype="bfloat16")
    body = x
    for v in (0.1, 3.14159, float("nan"), float("-inf"), -0.0, 1e-38, 3.3e38):
        body = ir.add(body, ir.const(np.array(v, "bfloat16")))
    text = _roundtrip(ir.infer_type(ir.IRModule.from_expr(ir.Function([x], body))))
    for lit in ("0.100098bf16", "3.14062bf16", "nanbf16", "-infbf16", "-0bf16"):
        assert lit in text
    assert "meta[relay.Constant]" not in text


@pytest.mark.parametrize("dtype", sorted(LOW_PRECISION_DTYPES))
def test_constants_of_every_new_dtype_round_trip_through_the_metadata(dtype):
    values = np.array([[0, 1, -2, 7], [3, -8, 5, 1]]) if "int" in dtype else \
        np.array([[0.1, -2.5, 300, np.nan], [1e-3, -0.0, 448, -1]])
    if dtype == "uint4":
        values = np.abs(values)
    arr = values.astype(dtype)
    scalar = np.array(values.flat[1]).astype(dtype)
    x = ir.var("x", shape=(2, 4), dtype=dtype)
    body = ir.Tuple([ir.concatenate([x, ir.const(arr)], axis=0), ir.const(scalar)])
    text = _roundtrip(ir.infer_type(ir.IRModule.from_expr(ir.Function([x], body))))
    assert f'"dtype": "{dtype}"' in text


def test_type_names_and_literal_errors():
    fn = ir.parse_expr("fn (%a: Tensor[(2), float8_e5m2fnuz], %b: uint4) { (%a, %b) }")
    assert [p.type_annotation.dtype for p in fn.params] == ["float8_e5m2fnuz", "uint4"]
    with pytest.raises(ParseError, match="cannot be represented as bfloat16"):
        ir.parse_expr("fn () { 4e38bf16 }")
    with pytest.raises(ParseError, match="bf16"):
        ir.parse_expr("fn () { 1q16 }")


# -- casts -------------------------------------------------------------------------------------------

def _cast(x, dtype, saturate=True):
    v = ir.var("x", shape=x.shape, dtype=x.dtype.name)
    return ir.evaluate(ir.Function([v], ir.cast(v, dtype, saturate=saturate)), x)


@pytest.mark.parametrize("dtype,top", [("float8_e4m3fn", 448), ("float8_e4m3fnuz", 240), ("float8_e5m2", 57344),
                                       ("float8_e5m2fnuz", 57344)])
def test_a_cast_to_float8_saturates_as_onnx_unless_told_not_to(dtype, top):
    x = np.array([1e6, -np.inf, np.inf, np.nan, 0.3], "float32")
    got = _cast(x, dtype).astype("float32")
    assert got[0] == top and got[1] == -top and got[2] == top and np.isnan(got[3]) and got[4] == 0.3125
    raw = _cast(x, dtype, saturate=False).astype("float32")
    assert np.array_equal(raw, x.astype(dtype).astype("float32"), equal_nan=True)  # ml_dtypes' conversion
    assert not np.isfinite(raw[0])
    for src in ("float16", "bfloat16", "float64", "float8_e5m2", "int32"):  # from every kind of type
        big = 60000 if src != "float8_e5m2" else 57344
        got = _cast(np.array([big, -big], src), dtype).astype("float32").tolist()
        assert got == [min(top, big), -min(top, big)], src


def test_casts_to_and_from_int4_wrap_nothing():
    x = np.array([-8, -1, 0, 7], "int4")
    assert _cast(x, "float32").tolist() == [-8, -1, 0, 7]
    assert _cast(np.array([0, 15], "uint4"), "int8").tolist() == [0, 15]
    assert _cast(np.array([1.4, -2.6], "float32"), "int4").tolist() == [1, -2]  # (C's conversion, as ONNX's)


def test_numerics_treats_the_low_precision_floats_as_floats():
    from passhost import numerics

    x = ir.var("x", shape=(64,), dtype="bfloat16")
    (arr,) = numerics.random_inputs(ir.Function([x], ir.exp(x)))
    assert arr.dtype.name == "bfloat16" and np.any(arr.astype("float32") % 1 != 0)  # not integers
    a = np.array([1, np.nan, 3], "bfloat16")
    assert numerics.compare_outputs(a, np.array([1.004, np.nan, 3], "bfloat16"), 1e-2, 1e-2) is None
    assert numerics.compare_outputs(a, np.array([1.5, np.nan, 3], "bfloat16"), 1e-2, 1e-2)[0] == 0.5
