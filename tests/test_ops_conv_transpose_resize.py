"""nn.conv2d_transpose and image.resize2d: kernels against scalar loops written from the
definitions (ONNX ConvTranspose / Resize), type relations and errors, round trips,
folding, patterns."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from passhost import ir
from passhost.errors import IRError, TypeInferenceError
from passhost.ir import OpPattern, TensorType

RNG = np.random.default_rng(3)
F32 = "float32"


def x_var(shape, dtype=F32, name="x"):
    return ir.var(name, shape=shape, dtype=dtype)


def T(shape, dtype=F32):
    return TensorType(shape, dtype)


def rand(*shape):
    return RNG.standard_normal(shape).astype(F32)


def test_patterns_and_attr_order():
    assert ir.Op.get("nn.conv2d_transpose").pattern == OpPattern.OUT_ELEMWISE_FUSABLE
    assert ir.Op.get("image.resize2d").pattern == OpPattern.INJECTIVE
    assert list(ir.Op.get("nn.conv2d_transpose").attr_defaults) == [
        "channels", "kernel_size", "strides", "output_padding", "padding", "dilation", "groups",
        "data_layout", "kernel_layout", "out_layout", "out_dtype"]
    assert ir.Op.get("nn.conv2d_transpose").attr_defaults["kernel_layout"] == "IOHW"
    assert list(ir.Op.get("image.resize2d").attr_defaults) == [
        "size", "roi", "layout", "method", "coordinate_transformation_mode", "rounding_method",
        "cubic_alpha", "cubic_exclude", "extrapolation_value", "out_dtype",
        "scales", "antialias"]  # TVM's ten, then passhost's two for ONNX's Resize


# -- conv2d_transpose ------------------------------------------------------------------------
def naive_conv_transpose(x, w, strides, pad, dilation, groups, out_pad):
    """ONNX ConvTranspose by its scatter definition; w is (C, O/g, kh, kw)."""
    n_, c_, h_, w_ = x.shape
    _, og, kh, kw = w.shape
    pt, pl, pb, pr = pad
    sh, sw = strides
    dh, dw = dilation
    oh = (h_ - 1) * sh + (kh - 1) * dh + 1 - pt - pb + out_pad[0]
    ow = (w_ - 1) * sw + (kw - 1) * dw + 1 - pl - pr + out_pad[1]
    cg = c_ // groups
    out = np.zeros((n_, og * groups, oh, ow))
    for n, c, h, wi, o, a, b in itertools.product(range(n_), range(c_), range(h_), range(w_), range(og),
                                                  range(kh), range(kw)):
        r = h * sh + a * dh - pt
        q = wi * sw + b * dw - pl
        if 0 <= r < oh and 0 <= q < ow:
            out[n, (c // cg) * og + o, r, q] += float(x[n, c, h, wi]) * float(w[c, o, a, b])
    return out


CT_CASES = [  # in shape, out/group, kernel, strides, padding, dilation, groups, output_padding
    ((1, 2, 3, 3), 3, (3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1, (0, 0)),
    ((2, 4, 3, 4), 2, (3, 2), (2, 2), (1, 1, 1, 1), (1, 1), 1, (1, 1)),
    ((1, 4, 3, 3), 1, (2, 2), (2, 3), (0, 1, 1, 0), (2, 1), 2, (1, 0)),
    ((1, 6, 2, 2), 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 6, (0, 0)),   # depthwise
]


@pytest.mark.parametrize("shape,og,k,strides,pad,dil,groups,opad", CT_CASES)
def test_conv2d_transpose_matches_scatter_loops(shape, og, k, strides, pad, dil, groups, opad, opcheck):
    x, w = rand(*shape), rand(shape[1], og, *k)
    call = ir.nn.conv2d_transpose(x_var(x.shape), x_var(w.shape, name="w"), strides=strides, padding=pad,
                                  dilation=dil, groups=groups, output_padding=opad)
    got = opcheck.run(call, x, w)
    np.testing.assert_allclose(got, naive_conv_transpose(x, w, strides, pad, dil, groups, opad),
                               rtol=1e-4, atol=1e-5)
    opcheck.roundtrip(call)
    opcheck.folds(ir.nn.conv2d_transpose(ir.const(x), ir.const(w), strides=strides, padding=pad, dilation=dil,
                                         groups=groups, output_padding=opad), rtol=1e-5, atol=1e-6)


def test_conv2d_transpose_nhwc_and_other_kernel_layout(opcheck):
    x, w = rand(1, 2, 3, 3), rand(2, 3, 2, 2)
    call = ir.nn.conv2d_transpose(x_var((1, 3, 3, 2)), x_var((2, 2, 3, 2), name="w"), strides=2,
                                  data_layout="NHWC", kernel_layout="HWOI")
    got = opcheck.run(call, x.transpose(0, 2, 3, 1).copy(), w.transpose(2, 3, 1, 0).copy())
    want = naive_conv_transpose(x, w, (2, 2), (0, 0, 0, 0), (1, 1), 1, (0, 0)).transpose(0, 2, 3, 1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_conv2d_transpose_type_relation(opcheck):
    call = ir.nn.conv2d_transpose(x_var((1, 4, 5, 5)), ir.var("w"), channels=6, kernel_size=3, groups=2,
                                  strides=2, padding=1)
    types = [T((1, 4, 5, 5)), None]
    assert call.op.type_rel(types, call.attrs) == T((1, 6, 9, 9))
    assert types[1] == T((4, 3, 3, 3))
    bad = ir.nn.conv2d_transpose(x_var((1, 4, 5, 5)), x_var((3, 2, 3, 3), name="w"))
    with pytest.raises(TypeInferenceError, match=r"nn.conv2d_transpose: data has 4 input channels but the weight"):
        opcheck.rel(bad, T((1, 4, 5, 5)), T((3, 2, 3, 3)))
    bad = ir.nn.conv2d_transpose(x_var((1, 4, 5, 5)), x_var((4, 2, 3, 3), name="w"), channels=3)
    with pytest.raises(TypeInferenceError, match=r"channels=3 but the weight .* gives 2 output channels"):
        opcheck.rel(bad, T((1, 4, 5, 5)), T((4, 2, 3, 3)))
    bad = ir.nn.conv2d_transpose(x_var((1, 4, 1, 1)), x_var((4, 2, 1, 1), name="w"), padding=1)
    with pytest.raises(TypeInferenceError, match="leaves no output"):
        opcheck.rel(bad, T((1, 4, 1, 1)), T((4, 2, 1, 1)))
    with pytest.raises(IRError, match="output_padding must be two non-negative ints"):
        ir.nn.conv2d_transpose(x_var((1, 4, 1, 1)), ir.var("w"), output_padding=-1)


# -- resize2d ---------------------------------------------------------------------------
def ref_coord(x, size, out, mode, start=0.0, end=1.0):
    scale = size / out
    if mode == "half_pixel":
        return (x + 0.5) * scale - 0.5
    if mode == "pytorch_half_pixel":
        return (x + 0.5) * scale - 0.5 if out > 1 else 0.0
    if mode == "align_corners":
        return x * (size - 1) / (out - 1) if out > 1 else 0.0
    if mode == "asymmetric":
        return x * scale
    if mode == "tf_half_pixel_for_nn":
        return (x + 0.5) * scale
    return start * (size - 1) + x * (end - start) * (size - 1) / (out - 1) if out > 1 \
        else 0.5 * (start + end) * (size - 1)


def ref_round(c, rounding, mode):
    rounding = rounding or ("round" if mode == "align_corners" else "floor")
    if rounding == "round":
        return round(c)  # halves to even
    if rounding == "round_prefer_floor":
        return math.ceil(c - 0.5)
    if rounding == "round_prefer_ceil":
        return math.floor(c + 0.5)
    if rounding == "floor":
        return math.floor(c + 1e-5)
    return math.ceil(c - 1e-5)


def cubic_w(t, a):
    def k(d):
        d = abs(d)
        if d <= 1:
            return (a + 2) * d ** 3 - (a + 3) * d ** 2 + 1
        if d < 2:
            return a * d ** 3 - 5 * a * d ** 2 + 8 * a * d - 4 * a
        return 0.0
    return [k(t + 1), k(t), k(1 - t), k(2 - t)]


def ref_resize(a, oh, ow, method, mode, rounding="", alpha=-0.5, exclude=0, roi=(0, 0, 1, 1), extrap=0.0):
    """One output pixel at a time, from ONNX Resize's definitions (taps clamped to the border)."""
    n_, c_, h, w = a.shape
    out = np.zeros((n_, c_, oh, ow))

    def px(nn_, cc, r, q):
        return float(a[nn_, cc, min(max(r, 0), h - 1), min(max(q, 0), w - 1)])

    for nn_, cc, y, x in itertools.product(range(n_), range(c_), range(oh), range(ow)):
        cy = ref_coord(y, h, oh, mode, roi[0], roi[2])
        cx = ref_coord(x, w, ow, mode, roi[1], roi[3])
        if mode == "tf_crop_and_resize" and not (0 <= cy <= h - 1 and 0 <= cx <= w - 1):
            out[nn_, cc, y, x] = extrap
            continue
        if method == "nearest_neighbor":
            v = px(nn_, cc, ref_round(cy, rounding, mode), ref_round(cx, rounding, mode))
        elif method == "linear":
            y0, x0 = math.floor(cy), math.floor(cx)
            ly, lx = cy - y0, cx - x0
            top = px(nn_, cc, y0, x0) * (1 - lx) + px(nn_, cc, y0, x0 + 1) * lx
            bot = px(nn_, cc, y0 + 1, x0) * (1 - lx) + px(nn_, cc, y0 + 1, x0 + 1) * lx
            v = top * (1 - ly) + bot * ly
        else:
            y0, x0 = math.floor(cy), math.floor(cx)
            wy, wx = cubic_w(cy - y0, alpha), cubic_w(cx - x0, alpha)
            if exclude:
                wy = [0.0 if (y0 - 1 + i < 0 or y0 + i > h) else wy[i] for i in range(4)]
                wx = [0.0 if (x0 - 1 + i < 0 or x0 + i > w) else wx[i] for i in range(4)]
                wy = [v / sum(wy) for v in wy]
                wx = [v / sum(wx) for v in wx]
            v = sum(wy[i] * wx[j] * px(nn_, cc, y0 - 1 + i, x0 - 1 + j) for i in range(4) for j in range(4))
        out[nn_, cc, y, x] = v
    return out


MODES = ["half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "tf_half_pixel_for_nn"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("method,rounding", [("nearest_neighbor", ""), ("nearest_neighbor", "round_prefer_floor"),
                                             ("nearest_neighbor", "round_prefer_ceil"), ("nearest_neighbor", "ceil"),
                                             ("linear", ""), ("cubic", "")])
@pytest.mark.parametrize("out", [(7, 5), (2, 3), (1, 1)])
def test_resize2d_matches_pixel_loops(mode, method, rounding, out, opcheck):
    a = rand(1, 2, 4, 3)
    call = ir.image.resize2d(x_var(a.shape), out, method=method, coordinate_transformation_mode=mode,
                             rounding_method=rounding, cubic_alpha=-0.75)
    got = opcheck.run(call, a)
    np.testing.assert_allclose(got, ref_resize(a, *out, method, mode, rounding, alpha=-0.75), rtol=1e-5, atol=1e-5)


def test_resize2d_cubic_exclude_crop_and_resize_and_nhwc(opcheck):
    a = rand(1, 1, 5, 4)
    call = ir.image.resize2d(x_var(a.shape), (7, 9), method="cubic", cubic_alpha=-0.75, cubic_exclude=1)
    np.testing.assert_allclose(opcheck.run(call, a), ref_resize(a, 7, 9, "cubic", "half_pixel", alpha=-0.75,
                                                                exclude=1), rtol=1e-5, atol=1e-5)
    roi = (0.2, -0.1, 0.9, 1.3)
    call = ir.image.resize2d(x_var(a.shape), (4, 6), roi=roi, coordinate_transformation_mode="tf_crop_and_resize",
                             extrapolation_value=-9.0)
    got = opcheck.run(call, a)
    np.testing.assert_allclose(got, ref_resize(a, 4, 6, "linear", "tf_crop_and_resize", roi=roi, extrap=-9.0),
                               rtol=1e-5, atol=1e-5)
    assert (got == -9.0).any()
    nhwc = a.transpose(0, 2, 3, 1).copy()
    call = ir.image.resize2d(x_var(nhwc.shape), (3, 3), layout="NHWC")
    np.testing.assert_allclose(opcheck.run(call, nhwc),
                               ref_resize(a, 3, 3, "linear", "half_pixel").transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-6)


def test_resize2d_round_trip_fold_and_errors(opcheck):
    a = rand(1, 2, 3, 3)
    call = ir.image.resize2d(x_var(a.shape), 6, method="nearest_neighbor", coordinate_transformation_mode="asymmetric")
    text = opcheck.roundtrip(call)
    assert ('image.resize2d(%x, size=[6, 6], roi=[0f, 0f, 0f, 0f], method="nearest_neighbor", '
            'coordinate_transformation_mode="asymmetric", rounding_method="")') in text
    got = opcheck.folds(ir.image.resize2d(ir.const(a), 6, method="nearest_neighbor",
                                          coordinate_transformation_mode="asymmetric"))
    np.testing.assert_array_equal(got, a.repeat(2, axis=2).repeat(2, axis=3))
    with pytest.raises(TypeInferenceError, match=r"image.resize2d: data must be 4-D"):
        opcheck.rel(ir.image.resize2d(x_var((2, 3)), 4), T((2, 3)))
    with pytest.raises(IRError, match="attribute method must be one of"):
        ir.image.resize2d(x_var((1, 1, 2, 2)), 4, method="bilinear")
    with pytest.raises(IRError, match="attribute coordinate_transformation_mode must be one of"):
        ir.image.resize2d(x_var((1, 1, 2, 2)), 4, coordinate_transformation_mode="quarter_pixel")
    with pytest.raises(IRError, match=r"attribute scales must be None or two positive numbers"):
        ir.image.resize2d(x_var((1, 1, 2, 2)), 4, scales=(2.0, 0.0))
    with pytest.raises(IRError, match=r"resize2d scales must be two numbers"):
        ir.image.resize2d(x_var((1, 1, 2, 2)), 4, scales="big")
    with pytest.raises(IRError, match=r"attribute antialias must be 0 or 1"):
        ir.image.resize2d(x_var((1, 1, 2, 2)), 4, antialias=2)


# -- resize2d beyond TVM: ONNX's fractional scales, half_pixel_symmetric, antialias -----
def onnx_coord(x, size, out, mode, ratio):
    """ONNX Resize's coordinate of output index ``x`` with the scale ``ratio`` (out/in,
    maybe with a fractional ``size x ratio``), from its reference implementation."""
    width = ratio * size
    if mode == "half_pixel":
        return (x + 0.5) / ratio - 0.5
    if mode == "half_pixel_symmetric":
        return size / 2 * (1 - out / width) + (x + 0.5) / ratio - 0.5
    if mode == "asymmetric":
        return x / ratio
    if mode == "align_corners":
        return x * (size - 1) / (width - 1)
    raise AssertionError(mode)


def onnx_taps(c, size, method, ratio, alpha, exclude, antialias):
    """``[(index, weight)]`` of one output along one axis, the way ONNX's reference picks
    them: the n input positions nearest to ``c`` (the left one first), the coefficients of
    the (antialiased) filter, taps outside the image clamped to it or dropped."""
    c_int = math.floor(c)
    ratio_in = 1.0 if c == c_int else c - c_int
    s = min(ratio, 1.0) if antialias else 1.0
    reach = 1 if method == "linear" else 2
    first = math.floor(-reach / s) + 1
    offsets = range(first, 2 - first)
    def kern(d):  # the filter at distance d: the triangle, or Keys' cubic
        d = abs(d)
        if method == "linear":
            return max(0.0, 1 - d)
        if d <= 1:
            return (alpha + 2) * d ** 3 - (alpha + 3) * d ** 2 + 1
        return alpha * d ** 3 - 5 * alpha * d ** 2 + 8 * alpha * d - 4 * alpha if d < 2 else 0.0

    coeffs = [kern((i - ratio_in) * s) for i in offsets]
    total = sum(coeffs)
    coeffs = [v / total for v in coeffs]
    base = c_int if c != c_int else c_int - 1
    # the n nearest positions, as _get_neighbor_idxes sorts them
    idx = sorted(sorted(range(base - 40, base + 41), key=lambda i: (abs(c - i), i))[:len(coeffs)])
    assert idx == [base + i for i in offsets]
    if exclude:
        coeffs = [0.0 if not 0 <= i < size else v for i, v in zip(idx, coeffs)]
        total = sum(coeffs)
        coeffs = [v / total for v in coeffs]
    return [(min(max(i, 0), size - 1), v) for i, v in zip(idx, coeffs)]


def onnx_resize(a, out, ratios, method, mode, alpha=-0.75, exclude=0, antialias=0):
    n_, c_, h, w = a.shape
    res = np.zeros((n_, c_, *out))
    for y, x in itertools.product(range(out[0]), range(out[1])):
        ty = onnx_taps(onnx_coord(y, h, out[0], mode, ratios[0]), h, method, ratios[0], alpha, exclude, antialias)
        tx = onnx_taps(onnx_coord(x, w, out[1], mode, ratios[1]), w, method, ratios[1], alpha, exclude, antialias)
        res[:, :, y, x] = sum(wy * wx * a[:, :, iy, ix] for iy, wy in ty for ix, wx in tx)
    return res


@pytest.mark.parametrize("method", ["linear", "cubic"])
@pytest.mark.parametrize("exclude", [0, 1])
@pytest.mark.parametrize("shape,out,ratios", [((9, 7), (4, 3), None), ((9, 7), (3, 2), (0.4, 0.3)),
                                              ((4, 4), (2, 2), (0.6, 0.6)), ((5, 6), (9, 11), None),
                                              ((12, 5), (1, 5), None)])
def test_resize2d_antialias_matches_onnxs_reference_filter(method, exclude, shape, out, ratios, opcheck):
    a = rand(1, 2, *shape)
    call = ir.image.resize2d(x_var(a.shape), out, method=method, cubic_alpha=-0.75, cubic_exclude=exclude,
                             scales=ratios, antialias=1)
    want = onnx_resize(a, out, ratios or (out[0] / shape[0], out[1] / shape[1]), method, "half_pixel",
                       exclude=exclude, antialias=1)
    np.testing.assert_allclose(opcheck.run(call, a), want, rtol=1e-5, atol=1e-5)
    if out[0] < shape[0] and out[1] < shape[1]:  # downsampling: not the plain filter
        plain = ir.image.resize2d(x_var(a.shape), out, method=method, cubic_alpha=-0.75, cubic_exclude=exclude,
                                  scales=ratios)
        assert not np.allclose(opcheck.run(plain, a), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ["half_pixel", "half_pixel_symmetric", "asymmetric", "align_corners"])
@pytest.mark.parametrize("method", ["linear", "cubic"])
@pytest.mark.parametrize("shape,ratios", [((4, 5), (0.6, 0.7)), ((2, 2), (1.7, 2.3)), ((7, 7), (0.5, 0.5))])
def test_resize2d_maps_coordinates_with_fractional_scales(mode, method, shape, ratios, opcheck):
    a = rand(1, 1, *shape)
    out = tuple(int(math.floor(d * r)) for d, r in zip(shape, ratios))
    call = ir.image.resize2d(x_var(a.shape), out, method=method, coordinate_transformation_mode=mode,
                             cubic_alpha=-0.75, scales=ratios)
    want = onnx_resize(a, out, ratios, method, mode)
    np.testing.assert_allclose(opcheck.run(call, a), want, rtol=1e-5, atol=1e-5)
    if mode != "half_pixel_symmetric":  # without scales: the size's ratio, which differs here
        rounded = ir.image.resize2d(x_var(a.shape), out, method=method, coordinate_transformation_mode=mode,
                                    cubic_alpha=-0.75)
        assert not np.allclose(opcheck.run(rounded, a), want, rtol=1e-4, atol=1e-4)


def test_resize2d_half_pixel_symmetric_is_half_pixel_for_whole_lengths(opcheck):
    a = rand(1, 2, 5, 3)
    sym = ir.image.resize2d(x_var(a.shape), (8, 7), coordinate_transformation_mode="half_pixel_symmetric")
    half = ir.image.resize2d(x_var(a.shape), (8, 7))
    np.testing.assert_allclose(opcheck.run(sym, a), opcheck.run(half, a), rtol=1e-6, atol=1e-6)
    text = opcheck.roundtrip(ir.image.resize2d(x_var(a.shape), (2, 2), scales=(0.5, 0.7), antialias=1))
    assert "scales=[0.5f, 0.7f], antialias=1" in text


# -- conv3d_transpose ------------------------------------------------------------------------
def naive_conv3d_transpose(x, w, strides, pad, dilation, groups, out_pad):
    """ONNX ConvTranspose on 3-D data by its scatter definition; w is (C, O/g, kd, kh, kw),
    pad (front, top, left, back, bottom, right)."""
    n_, c_ = x.shape[:2]
    spatial, kern = x.shape[2:], w.shape[2:]
    og = w.shape[1]
    out_shape = [(spatial[i] - 1) * strides[i] + (kern[i] - 1) * dilation[i] + 1 - pad[i] - pad[3 + i]
                 + out_pad[i] for i in range(3)]
    cg = c_ // groups
    out = np.zeros((n_, og * groups, *out_shape))
    for n, c, o in itertools.product(range(n_), range(c_), range(og)):
        for pos in itertools.product(*[range(s) for s in spatial]):
            for tap in itertools.product(*[range(k) for k in kern]):
                dst = [pos[i] * strides[i] + tap[i] * dilation[i] - pad[i] for i in range(3)]
                if all(0 <= dst[i] < out_shape[i] for i in range(3)):
                    out[(n, (c // cg) * og + o, *dst)] += float(x[(n, c, *pos)]) * float(w[(c, o, *tap)])
    return out


@pytest.mark.parametrize("shape,og,k,strides,pad,dil,groups,opad", [
    ((1, 2, 2, 3, 2), 3, (2, 2, 2), (1, 1, 1), (0,) * 6, (1, 1, 1), 1, (0, 0, 0)),
    ((2, 4, 2, 2, 3), 2, (3, 2, 2), (2, 2, 1), (1, 0, 1, 1, 1, 0), (1, 1, 1), 2, (1, 1, 0)),
    ((1, 3, 2, 2, 2), 1, (2, 2, 2), (2, 2, 2), (0,) * 6, (2, 1, 2), 3, (0, 1, 1)),   # depthwise, dilated
])
def test_conv3d_transpose_matches_scatter_loops(shape, og, k, strides, pad, dil, groups, opad, opcheck):
    x = rand(*shape)
    w = rand(shape[1], og, *k)
    call = ir.nn.conv3d_transpose(x_var(shape), x_var(w.shape, name="w"), strides=strides, padding=pad,
                                  dilation=dil, groups=groups, output_padding=opad)
    want = naive_conv3d_transpose(x, w, strides, pad, dil, groups, opad)
    np.testing.assert_allclose(opcheck.run(call, x, w), want, rtol=1e-5, atol=1e-5)
    assert ir.Op.get("nn.conv3d_transpose").pattern == OpPattern.OUT_ELEMWISE_FUSABLE


def test_conv3d_transpose_types_round_trip_folds_and_errors(opcheck):
    x, w = x_var((1, 4, 3, 3, 3)), x_var((4, 2, 3, 3, 3), name="w")
    call = ir.nn.conv3d_transpose(x, w, strides=2, padding=1, output_padding=1)
    assert opcheck.rel(call, T((1, 4, 3, 3, 3)), T((4, 2, 3, 3, 3))) == T((1, 2, 6, 6, 6))
    assert "nn.conv3d_transpose(%x, %w, strides=[2, 2, 2], padding=[1, 1, 1, 1, 1, 1], output_padding=[1, 1, 1])" \
        in opcheck.roundtrip(call)
    a, b = rand(1, 2, 2, 2, 2), rand(2, 1, 2, 2, 2)
    opcheck.folds(ir.nn.conv3d_transpose(ir.const(a), ir.const(b)),
                  naive_conv3d_transpose(a, b, (1, 1, 1), (0,) * 6, (1, 1, 1), 1, (0, 0, 0)).astype(F32))
    with pytest.raises(TypeInferenceError, match=r"nn.conv3d_transpose: data must be 5-D"):
        opcheck.rel(ir.nn.conv3d_transpose(x_var((1, 4, 3, 3)), w), T((1, 4, 3, 3)), T((4, 2, 3, 3, 3)))
    with pytest.raises(TypeInferenceError, match=r"the weight .* does not fit the data"):
        opcheck.rel(ir.nn.conv3d_transpose(x, w), T((1, 4, 3, 3, 3)), T((3, 2, 3, 3, 3)))
    with pytest.raises(TypeInferenceError, match=r"channels=5 but the weight"):
        opcheck.rel(ir.nn.conv3d_transpose(x, w, channels=5), T((1, 4, 3, 3, 3)), T((4, 2, 3, 3, 3)))
    with pytest.raises(IRError, match=r"attribute output_padding must be 3 ints"):
        ir.nn.conv3d_transpose(x, w, output_padding=(0, -1, 0))
    with pytest.raises(IRError, match=r"attribute groups must be a positive int"):
        ir.nn.conv3d_transpose(x, w, groups=0)
