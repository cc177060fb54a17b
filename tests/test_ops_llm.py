"""The fused operators of language models: ``nn.rms_norm``, ``nn.rotary_embedding`` and
``nn.attention`` (ONNX's RMSNormalization, RotaryEmbedding and Attention of opset 23) give the
numbers of the graphs they stand for, type symbolic shapes and go through the text format."""
from __future__ import annotations

import numpy as np
import pytest

from passhost import ir
from passhost.errors import TypeInferenceError

RNG = np.random.default_rng(0)


def _run(params, body, *args):
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function(params, body)))
    assert ir.structural_equal(ir.parse(mod.astext()), mod)
    return mod, ir.evaluate(mod, *args)


def _f32(*shape):
    return RNG.standard_normal(shape).astype("float32")


@pytest.mark.parametrize("shape,axis,gshape", [((2, 3, 8), -1, (8,)), ((2, 3, 4, 5), 2, (4, 5)), ((4, 6), 1, (1,))])
def test_rms_norm_is_x_over_its_root_mean_square_times_gamma(shape, axis, gshape):
    x, g = ir.var("x", shape=shape), ir.var("g", shape=gshape)
    a, ga = _f32(*shape), _f32(*gshape)
    _, got = _run([x, g], ir.nn.rms_norm(x, g, axis=axis, epsilon=1e-6), a, ga)
    axes = tuple(range(axis % len(shape), len(shape)))
    want = a / np.sqrt(np.mean(a * a, axis=axes, keepdims=True) + np.float32(1e-6)) * ga
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_rms_norm_of_half_precision_data_runs_in_float32():
    x, g = ir.var("x", shape=(2, 64), dtype="float16"), ir.var("g", shape=(64,), dtype="float16")
    a = (RNG.standard_normal((2, 64)) * 300).astype("float16")  # squares overflow float16
    ga = np.ones(64, "float16")
    _, got = _run([x, g], ir.nn.rms_norm(x, g), a, ga)
    af = a.astype("float32")
    assert got.dtype == np.float16 and np.isfinite(got).all()
    np.testing.assert_allclose(got, (af / np.sqrt((af * af).mean(-1, keepdims=True) + 1e-5)).astype("float16"))


def _rotate_half_reference(a, cos, sin):
    """Hugging Face's form: x * concat(cos, cos) + rotate_half(x) * concat(sin, sin)."""
    half = a.shape[-1] // 2
    c = np.concatenate([cos, cos], -1)[:, None]
    s = np.concatenate([sin, sin], -1)[:, None]
    turned = np.concatenate([-a[..., half:], a[..., :half]], -1)
    return a * c + turned * s


def test_rotary_embedding_is_the_rotate_half_form_value_for_value():
    x, c, s = ir.var("x", shape=(2, 4, 5, 16)), ir.var("c", shape=(2, 5, 8)), ir.var("s", shape=(2, 5, 8))
    a, ca, sa = _f32(2, 4, 5, 16), _f32(2, 5, 8), _f32(2, 5, 8)
    _, got = _run([x, c, s], ir.nn.rotary_embedding(x, c, s), a, ca, sa)
    np.testing.assert_array_equal(got, _rotate_half_reference(a, ca, sa))


def test_rotary_embedding_turns_the_first_rotary_dim_values_and_pairs_neighbours_when_interleaved():
    x, c, s = ir.var("x", shape=(1, 2, 3, 10)), ir.var("c", shape=(1, 3, 3)), ir.var("s", shape=(1, 3, 3))
    a, ca, sa = _f32(1, 2, 3, 10), _f32(1, 3, 3), _f32(1, 3, 3)
    _, got = _run([x, c, s], ir.nn.rotary_embedding(x, c, s, rotary_dim=6), a, ca, sa)
    np.testing.assert_array_equal(got[..., 6:], a[..., 6:])
    np.testing.assert_allclose(got[..., :6], _rotate_half_reference(a[..., :6], ca, sa), rtol=1e-6)
    _, got = _run([x, c, s], ir.nn.rotary_embedding(x, c, s, interleaved=True, rotary_dim=6), a, ca, sa)
    even, odd = a[..., 0:6:2], a[..., 1:6:2]
    cc, ss = ca[:, None], sa[:, None]
    np.testing.assert_allclose(got[..., 0:6:2], even * cc - odd * ss, rtol=1e-6)
    np.testing.assert_allclose(got[..., 1:6:2], odd * cc + even * ss, rtol=1e-6)


def _attention_reference(q, k, v, mask, scale):
    rep = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, rep, 1), np.repeat(v, rep, 1)
    if mask.dtype == bool:
        mask = np.where(mask, 0.0, -np.inf)
    s = (q.astype("float64") @ np.swapaxes(k, -1, -2)) * scale + mask
    with np.errstate(invalid="ignore"):
        p = np.exp(s - s.max(-1, keepdims=True))
        p = p / p.sum(-1, keepdims=True)
    return np.nan_to_num(p, nan=0.0) @ v


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
@pytest.mark.parametrize("mask_kind", ["float", "bool", "none"])
def test_attention_is_softmax_of_scaled_scores_plus_mask_times_values(kv_heads, mask_kind):
    b, h, lq, lk, d = 2, 4, 3, 7, 8
    q, k, v = ir.var("q", shape=(b, h, lq, d)), ir.var("k", shape=(b, kv_heads, lk, d)), ir.var("v", shape=(b, kv_heads, lk, 6))
    qa, ka, va = _f32(b, h, lq, d), _f32(b, kv_heads, lk, d), _f32(b, kv_heads, lk, 6)
    if mask_kind == "float":
        m = ir.var("m", shape=(b, 1, lq, lk))
        ma = np.where(RNG.random((b, 1, lq, lk)) < 0.3, -np.inf, _f32(b, 1, lq, lk)).astype("float32")
        params, args, body = [q, k, v, m], (qa, ka, va, ma), ir.nn.attention(q, k, v, m, scale=0.3)
    elif mask_kind == "bool":
        m = ir.var("m", shape=(lq, lk), dtype="bool")
        ma = RNG.random((lq, lk)) < 0.7
        params, args, body = [q, k, v, m], (qa, ka, va, ma), ir.nn.attention(q, k, v, m, scale=0.3)
    else:
        ma = np.zeros((), "float32")
        params, args, body = [q, k, v], (qa, ka, va), ir.nn.attention(q, k, v)
    _, got = _run(params, body, *args)
    assert got.shape == (b, h, lq, 6)
    scale = 1 / np.sqrt(d) if mask_kind == "none" else 0.3
    np.testing.assert_allclose(got, _attention_reference(qa, ka, va, ma, scale), rtol=1e-5, atol=1e-5)


def test_a_query_row_masked_whole_attends_to_nothing():
    q, k, v, m = (ir.var("q", shape=(1, 2, 3, 4)), ir.var("k", shape=(1, 2, 5, 4)), ir.var("v", shape=(1, 2, 5, 4)),
                  ir.var("m", shape=(1, 1, 3, 5)))
    ma = np.zeros((1, 1, 3, 5), "float32")
    ma[0, 0, 1] = -np.inf
    _, got = _run([q, k, v, m], ir.nn.attention(q, k, v, m), _f32(1, 2, 3, 4), _f32(1, 2, 5, 4), _f32(1, 2, 5, 4), ma)
    np.testing.assert_array_equal(got[:, :, 1], 0)
    assert np.isfinite(got).all()


def test_the_fused_operators_type_symbolic_shapes():
    q = ir.var("q", shape=("b", 8, "s", 64))
    k, v = ir.var("k", shape=("b", 2, "p + s", 64)), ir.var("v", shape=("b", 2, "p + s", 64))
    m = ir.var("m", shape=("b", 1, "s", "p + s"))
    c, s = ir.var("c", shape=("b", "s", 32)), ir.var("sn", shape=("b", "s", 32))
    g = ir.var("g", shape=(64,))
    body = ir.nn.attention(ir.nn.rms_norm(ir.nn.rotary_embedding(q, c, s), g), k, v, m, scale=0.125)
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([q, k, v, m, c, s, g], body)))
    assert str(mod["main"].body.checked_type) == "Tensor[(b, 8, s, 64), float32]"
    assert ir.structural_equal(ir.parse(mod.astext()), mod)


@pytest.mark.parametrize("build,match", [
    (lambda: ir.nn.rms_norm(ir.var("x", shape=(2, 8)), ir.var("g", shape=(4,))), "does not broadcast"),
    (lambda: ir.nn.rms_norm(ir.var("x", shape=(2, 8), dtype="int32"), ir.var("g", shape=(8,), dtype="int32")),
     "floating-point"),
    (lambda: ir.nn.rotary_embedding(ir.var("x", shape=(1, 2, 3, 8)), ir.var("c", shape=(1, 3, 3)),
                                    ir.var("s", shape=(1, 3, 3))), r"must be \(1 or 1, 3, 4\)"),
    (lambda: ir.nn.rotary_embedding(ir.var("x", shape=(2, 3, 8)), ir.var("c", shape=(2, 4)),
                                    ir.var("s", shape=(2, 4))), "4-D"),
    (lambda: ir.nn.attention(ir.var("q", shape=(1, 3, 2, 4)), ir.var("k", shape=(1, 2, 5, 4)),
                             ir.var("v", shape=(1, 2, 5, 4))), "not a multiple"),
    (lambda: ir.nn.attention(ir.var("q", shape=(1, 2, 2, 4)), ir.var("k", shape=(1, 2, 5, 4)),
                             ir.var("v", shape=(1, 2, 5, 4)), ir.var("m", shape=(1, 1, 2, 4))), "does not broadcast"),
])
def test_the_fused_operators_name_what_is_wrong(build, match):
    call = build()
    with pytest.raises(TypeInferenceError, match=match):
        ir.infer_type(ir.Function(list(ir.free_vars(call)), call))


def test_without_zero_masked_rows_a_row_masked_whole_is_what_the_softmax_gives():
    q, k, v, m = (ir.var("q", shape=(1, 2, 3, 4)), ir.var("k", shape=(1, 2, 5, 4)), ir.var("v", shape=(1, 2, 5, 4)),
                  ir.var("m", shape=(1, 1, 3, 5)))
    ma = np.zeros((1, 1, 3, 5), "float32")
    ma[0, 0, 1] = -np.inf
    args = (_f32(1, 2, 3, 4), _f32(1, 2, 5, 4), _f32(1, 2, 5, 4), ma)
    _, got = _run([q, k, v, m], ir.nn.attention(q, k, v, m, zero_masked_rows=False), *args)
    _, guarded = _run([q, k, v, m], ir.nn.attention(q, k, v, m), *args)
    assert np.isnan(got[:, :, 1]).all() and (guarded[:, :, 1] == 0).all()
    np.testing.assert_array_equal(np.delete(got, 1, axis=2), np.delete(guarded, 1, axis=2))
