"""The operators TVM's layout and fusion tests use (issue 37): ``slice_like``,
``contrib_reverse_reshape``, ``nn.l2_normalize``, ``nn.upsampling``, ``nn.upsampling3d``,
``vision.roi_align`` and ``vision.roi_pool``. Shapes are TVM's own cases
(``test_op_level2/5/10.py`` at v0.16); kernels are checked against loop references
written from topi's definitions; every call prints and parses back."""
from __future__ import annotations

import math

import numpy as np
import pytest

from passhost import ir
from passhost.errors import IRError, TypeInferenceError
from passhost.ir import OpPattern, TensorType

RNG = np.random.default_rng(37)


def T(shape, dtype="float32"):
    return TensorType(shape, dtype)


def rand(*shape):
    return RNG.uniform(size=shape).astype("float32")


# -- slice_like ------------------------------------------------------------------------------
@pytest.mark.parametrize("data,like,axes,out", [
    ((3, 4, 5), (1, 2, 3), None, (1, 2, 3)),
    ((3, 4, 5), (1, 2), None, (1, 2, 5)),
    ((3, 4, 5), (1, 2, 3), (1, 2), (3, 2, 3)),
    ((3, 4, 5), (1, 2, 3), (-1, -3), (1, 4, 3)),
    ((1, 3, 224, 224), (1, 3, 112, 112), (2, 3), (1, 3, 112, 112)),
])
def test_slice_like_tvm_cases(data, like, axes, out, opcheck):
    call = ir.slice_like(ir.var("x", shape=data), ir.var("y", shape=like), axes)
    a, b = rand(*data), rand(*like)
    got = opcheck.run(call, a, b)
    assert got.shape == out
    np.testing.assert_array_equal(got, a[tuple(slice(0, n) for n in out)])
    text = opcheck.roundtrip(call)
    assert ("axes=" in text) == (axes is not None)
    assert call.op.pattern == OpPattern.INJECTIVE


def test_slice_like_symbolic_and_errors(opcheck):
    d1, d2, d3, d4 = (ir.size_var(n) for n in ("d1", "d2", "d3", "d4"))
    call = ir.slice_like(ir.var("x", shape=(1, 2, 3)), ir.var("y", shape=(4, 5, 6)))
    assert opcheck.rel(call, T((d1, d2, d3)), T((1, 2, 3))) == T((1, 2, 3))
    assert opcheck.rel(call, T((1, 2, 3)), T((d1, d2, d3))) == T((d1, d2, d3))
    axes = ir.slice_like(ir.var("x", shape=(1,)), ir.var("y", shape=(1,)), axes=(1, 2))
    assert opcheck.rel(axes, T((d2, d3, d4)), T((d1, d2, d3))) == T((d2, d2, d3))
    with pytest.raises(TypeInferenceError, match="slice_like: axis 1 of shape_like .* is longer"):
        opcheck.rel(axes, T((3, 4, 5)), T((3, 5, 5)))
    with pytest.raises(TypeInferenceError, match="slice_like: axis 2 exceeds the rank 2"):
        opcheck.rel(axes, T((3, 4, 5)), T((3, 4)))
    with pytest.raises(IRError, match="attribute axes must be None or a list of ints"):
        ir.Call(ir.Op.get("slice_like"), [ir.var("x"), ir.var("y")], {"axes": "1"})


# -- contrib_reverse_reshape ------------------------------------------------------------------
@pytest.mark.parametrize("newshape,out", [
    ((4, 0, 2), (4, 3, 2)), ((2, 0, 0), (2, 3, 4)), ((0, -1), (3, 8)), ((-1, 0), (6, 4)), ((0, -3), (2, 12)),
])
def test_reverse_reshape_tvm_cases(newshape, out, opcheck):
    call = ir.reverse_reshape(ir.var("x", shape=(2, 3, 4)), newshape)
    assert call.op.name == "contrib_reverse_reshape"
    a = rand(2, 3, 4)
    np.testing.assert_array_equal(opcheck.run(call, a), a.reshape(out))
    assert f"contrib_reverse_reshape(%x, newshape={list(newshape)})" in opcheck.roundtrip(call)


def test_reverse_reshape_reads_codes_from_the_right(opcheck):
    """TVM's docstring example: (10, 5, 4) with newshape (-1, 0) is (50, 4) here, (40, 5)
    for reshape; a symbolic leading axis is carried through."""
    x = ir.var("x", shape=(10, 5, 4))
    assert opcheck.rel(ir.reverse_reshape(x, (-1, 0)), T((10, 5, 4))) == T((50, 4))
    assert opcheck.rel(ir.reshape(x, (-1, 0)), T((10, 5, 4))) == T((40, 5))
    n = ir.size_var("n")
    assert opcheck.rel(ir.reverse_reshape(x, (-1, 0)), T((n, 5, 4))) == T((5 * n, 4))
    with pytest.raises(TypeInferenceError, match="contrib_reverse_reshape: cannot reshape"):
        opcheck.rel(ir.reverse_reshape(x, (7, 0)), T((10, 5, 4)))


# -- nn.l2_normalize ------------------------------------------------------------------------
def test_l2_normalize_tvm_case(opcheck):
    """TVM's test_l2_normalize: (1, 5, 10, 10), eps 0.001, axis [1]; type is the input's."""
    x = ir.var("x", shape=(1, 5, 10, 10))
    call = ir.nn.l2_normalize(x, eps=0.001, axis=[1])
    a = RNG.uniform(-1, 1, (1, 5, 10, 10)).astype("float32")
    want = a / np.sqrt(np.maximum(np.sum(a * a, axis=1, keepdims=True), 0.001))
    np.testing.assert_allclose(opcheck.run(call, a), want, rtol=1e-6)
    assert "nn.l2_normalize(%x, eps=0.001f, axis=[1])" in opcheck.roundtrip(call)
    n, c, h, w = (ir.size_var(s) for s in "nchw")
    assert opcheck.rel(call, T((n, c, h, w))) == T((n, c, h, w))
    everything = ir.nn.l2_normalize(x, eps=1e-12)
    np.testing.assert_allclose(opcheck.run(everything, a), a / np.sqrt(np.sum(a * a)), rtol=1e-6)
    with pytest.raises(TypeInferenceError, match="axis=4 is out of range"):
        opcheck.rel(ir.nn.l2_normalize(x, 0.1, axis=[4]), T((1, 5, 10, 10)))
    assert call.op.pattern == OpPattern.OPAQUE  # TVM registers no pattern: fusion treats it as opaque


# -- nn.upsampling / nn.upsampling3d --------------------------------------------------------
def _axis_coords(out, size, align_corners, half_pixel=False):
    if align_corners:
        return [0.0 if out == 1 else i * (size - 1) / (out - 1) for i in range(out)]
    if half_pixel:
        return [(i + 0.5) * size / out - 0.5 for i in range(out)]
    return [i * size / out for i in range(out)]


def _resize_ref(a, scales, method, align_corners=False, half_pixel=False):
    """Separable resize of the trailing axes of ``a`` (channels-first), one axis at a time,
    as topi computes it: nearest floors (rounds for align_corners), linear interpolates
    between the clamped neighbours."""
    out = a.astype("float64")
    spatial = len(scales)
    for k, scale in enumerate(scales):
        axis = out.ndim - spatial + k
        size = out.shape[axis]
        n = int(round(size * scale))
        pieces = []
        for c in _axis_coords(n, size, align_corners, half_pixel):
            if method == "nearest_neighbor":
                i = round(c) if align_corners else math.floor(c + 1e-5)
                pieces.append(np.take(out, min(max(i, 0), size - 1), axis=axis))
            else:
                lo = math.floor(c)
                t = c - lo
                a0 = np.take(out, min(max(lo, 0), size - 1), axis=axis)
                a1 = np.take(out, min(max(lo + 1, 0), size - 1), axis=axis)
                pieces.append(a0 * (1 - t) + a1 * t)
        out = np.stack(pieces, axis=axis)
    return out


@pytest.mark.parametrize("layout,method,align", [
    ("NCHW", "nearest_neighbor", False), ("NCHW", "bilinear", True),
    ("NHWC", "nearest_neighbor", False), ("NHWC", "bilinear", True),
])
def test_upsampling_tvm_cases(layout, method, align, opcheck):
    """TVM's test_upsampling: 16 channels of 32x32, scales 2 (a smaller map here)."""
    nchw = rand(1, 3, 5, 6)
    data = nchw if layout == "NCHW" else nchw.transpose(0, 2, 3, 1).copy()
    call = ir.nn.upsampling(ir.var("x", shape=data.shape), 2.0, 2.0, layout, method, align)
    got = opcheck.run(call, data)
    if layout == "NHWC":
        got = got.transpose(0, 3, 1, 2)
    np.testing.assert_allclose(got, _resize_ref(nchw, (2.0, 2.0), method, align), rtol=1e-5, atol=1e-6)
    opcheck.roundtrip(call)


def test_upsampling_types_symbolic_and_fractional_scales(opcheck):
    n, c, h, w = (ir.size_var(s) for s in "nchw")
    call = ir.nn.upsampling(ir.var("x", shape=(1, 1, 1, 1)), scale_h=2, scale_w=2, method="bilinear")
    assert opcheck.rel(call, T((n, c, h, w))) == T((n, c, 2 * h, 2 * w))
    assert opcheck.rel(call, T((n, c, 100, 200))) == T((n, c, 200, 400))
    odd = ir.nn.upsampling(ir.var("x", shape=(1, 1, 1, 1)), scale_h=1.5, scale_w=0.5)
    assert opcheck.rel(odd, T((1, 2, 3, 5))) == T((1, 2, 4, 2))  # round(4.5) and round(2.5): halves to even
    assert opcheck.rel(odd, T((1, 2, h, 4))) == T((1, 2, ir.ANY, 2))  # round(1.5 h) is not an expression
    np.testing.assert_allclose(opcheck.run(odd, rand(1, 2, 3, 5)).shape, (1, 2, 4, 2))
    with pytest.raises(IRError, match="attribute method must be one of"):
        ir.nn.upsampling(ir.var("x"), 2, 2, method="linear")
    assert call.op.pattern == OpPattern.INJECTIVE


@pytest.mark.parametrize("layout,method,mode", [
    ("NCDHW", "nearest_neighbor", "asymmetric"), ("NCDHW", "trilinear", "align_corners"),
    ("NDHWC", "nearest_neighbor", "asymmetric"), ("NDHWC", "trilinear", "align_corners"),
    ("NCDHW", "trilinear", "half_pixel"),
])
def test_upsampling3d_tvm_cases(layout, method, mode, opcheck):
    ncdhw = rand(1, 2, 3, 4, 3)
    data = ncdhw if layout == "NCDHW" else ncdhw.transpose(0, 2, 3, 4, 1).copy()
    call = ir.nn.upsampling3d(ir.var("x", shape=data.shape), 2, 2, 2, layout, method, mode)
    got = opcheck.run(call, data)
    if layout == "NDHWC":
        got = got.transpose(0, 4, 1, 2, 3)
    want = _resize_ref(ncdhw, (2, 2, 2), "linear" if method == "trilinear" else method,
                       mode == "align_corners", mode == "half_pixel")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    opcheck.roundtrip(call)
    n, c, d, h, w = (ir.size_var(s) for s in "ncdhw")
    sym = T((n, c, d, h, w)) if layout == "NCDHW" else T((n, d, h, w, c))
    out = T((n, c, 2 * d, 2 * h, 2 * w)) if layout == "NCDHW" else T((n, 2 * d, 2 * h, 2 * w, c))
    assert opcheck.rel(call, sym) == out


# -- vision.roi_align / vision.roi_pool -----------------------------------------------------
def _bilinear(fmap, y, x):
    h, w = fmap.shape[-2:]
    if y < -1 or y > h or x < -1 or x > w:
        return np.zeros(fmap.shape[:-2])
    y, x = min(max(y, 0), h - 1), min(max(x, 0), w - 1)
    y0, x0 = math.floor(y), math.floor(x)
    val = 0.0
    for yy, wy in ((y0, 1 - (y - y0)), (y0 + 1, y - y0)):
        for xx, wx in ((x0, 1 - (x - x0)), (x0 + 1, x - x0)):
            if yy < h and xx < w:
                val = val + wy * wx * fmap[..., yy, xx]
    return val


def roi_align_ref(data, rois, pooled, scale, ratio, mode):
    out = np.zeros((len(rois), data.shape[1], pooled, pooled))
    for r, roi in enumerate(rois):
        fmap = data[int(roi[0])].astype("float64")
        x0, y0, x1, y1 = roi[1:] * scale
        rh, rw = max(y1 - y0, 1.0), max(x1 - x0, 1.0)
        bh, bw = rh / pooled, rw / pooled
        gh, gw = (ratio, ratio) if ratio > 0 else (math.ceil(bh), math.ceil(bw))
        for i in range(pooled):
            for j in range(pooled):
                vals = [_bilinear(fmap, y0 + i * bh + (iy + 0.5) * bh / gh, x0 + j * bw + (ix + 0.5) * bw / gw)
                        for iy in range(gh) for ix in range(gw)]
                out[r, :, i, j] = np.max(vals, axis=0) if mode == "max" else np.sum(vals, axis=0) / (gh * gw)
    return out


def roi_pool_ref(data, rois, pooled, scale):
    _, c, h, w = data.shape
    out = np.zeros((len(rois), c, pooled, pooled))
    for r, roi in enumerate(rois):
        x0, y0, x1, y1 = (int(round(float(v) * scale)) for v in roi[1:])
        bh, bw = max(y1 - y0 + 1, 1) / pooled, max(x1 - x0 + 1, 1) / pooled
        for i in range(pooled):
            hs = min(max(math.floor(i * bh + 1e-5) + y0, 0), h)
            he = min(max(math.ceil((i + 1) * bh - 1e-5) + y0, 0), h)
            for j in range(pooled):
                ws = min(max(math.floor(j * bw + 1e-5) + x0, 0), w)
                we = min(max(math.ceil((j + 1) * bw - 1e-5) + x0, 0), w)
                if hs < he and ws < we:
                    out[r, :, i, j] = data[int(roi[0]), :, hs:he, ws:we].max(axis=(1, 2))
    return out


def _rois(n, batch, size):
    rois = RNG.uniform(size=(n, 5)).astype("float32") * size
    rois[:, 0] = RNG.integers(0, batch, n)
    return rois


@pytest.mark.parametrize("data_shape,pooled,scale,ratio,mode", [
    ((1, 4, 16, 16), 7, 1.0, -1, "avg"), ((4, 4, 16, 16), 7, 0.5, 2, "avg"),
    ((1, 4, 16, 16), 7, 1.0, -1, "max"), ((4, 4, 16, 16), 7, 0.5, 2, "max"),
])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_roi_align_tvm_cases(data_shape, pooled, scale, ratio, mode, layout, opcheck):
    data = rand(*data_shape)
    rois = _rois(12, data_shape[0], 16)
    arg = data if layout == "NCHW" else data.transpose(0, 2, 3, 1).copy()
    call = ir.vision.roi_align(ir.var("x", shape=arg.shape), ir.var("r", shape=rois.shape), (pooled, pooled),
                               scale, ratio, layout, mode)
    got = opcheck.run(call, arg, rois)
    if layout == "NHWC":
        got = got.transpose(0, 3, 1, 2)
    np.testing.assert_allclose(got, roi_align_ref(data, rois, pooled, scale, ratio, mode), rtol=1e-5, atol=1e-6)
    assert call.op.pattern == OpPattern.OUT_ELEMWISE_FUSABLE
    opcheck.roundtrip(call)


@pytest.mark.parametrize("data_shape,scale", [((1, 4, 16, 16), 1.0), ((4, 4, 16, 16), 0.5)])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_roi_pool_tvm_cases(data_shape, scale, layout, opcheck):
    data = rand(*data_shape)
    rois = _rois(12, data_shape[0], 16)
    arg = data if layout == "NCHW" else data.transpose(0, 2, 3, 1).copy()
    call = ir.vision.roi_pool(ir.var("x", shape=arg.shape), ir.var("r", shape=rois.shape), 7, scale, layout)
    got = opcheck.run(call, arg, rois)
    if layout == "NHWC":
        got = got.transpose(0, 3, 1, 2)
    np.testing.assert_allclose(got, roi_pool_ref(data, rois, 7, scale), rtol=1e-6)
    opcheck.roundtrip(call)


def test_roi_types_symbolic_and_errors(opcheck):
    n, c, h, w, r = (ir.size_var(s) for s in ("n", "c", "h", "w", "r"))
    x, rois = ir.var("x", shape=(1, 1, 1, 1)), ir.var("r", shape=(1, 5))
    align = ir.vision.roi_align(x, rois, (14, 14), 0.0625, 2)
    assert opcheck.rel(align, T((n, c, h, w)), T((r, 5))) == T((r, c, 14, 14))
    pool = ir.vision.roi_pool(x, rois, (7, 5), 0.0625, layout="NHWC")
    assert opcheck.rel(pool, T((n, h, w, c)), T((32, 5))) == T((32, 7, 5, c))
    with pytest.raises(TypeInferenceError, match=r"rois must be \(num_roi, 5\)"):
        opcheck.rel(align, T((1, 4, 8, 8)), T((3, 4)))
    with pytest.raises(IRError, match="layout must be 'NCHW' or 'NHWC'"):
        ir.vision.roi_pool(x, rois, 7, 1.0, layout="HWCN")
    with pytest.raises(IRError, match="mode must be 'avg' or 'max'"):
        ir.vision.roi_align(x, rois, 7, 1.0, mode="sum")
