"""Fixtures of the passhost-onnx tests: the reseeded model zoo, an onnxruntime runner, and
``ort_quantized``, the one way to check a model against onnxruntime's quantized kernels.

onnxruntime's quantized CPU kernels give numbers that depend on the instruction set: on
x86-64 with AVX2 (or AVX-512) but without VNNI, its u8 x s8 integer products add each pair
of products in int16 with saturation (onnxruntime issues #14642 and #16105), so a
``QLinearConv`` with int8 weights over the full [-127, 127] range can be off by tens of
quantization steps there and exact on a VNNI machine. Its ``com.microsoft`` QLinear*
operators compute in fixed point or through lookup tables. A test that compares passhost
with those kernels bit for bit passes or fails with the machine.

So the plain ``ort_run`` refuses a model holding one of :data:`ISA_DEPENDENT`, and
``ort_quantized`` is the comparison: passhost's numbers equal ONNX's exact definition (the
test computes it by hand with ``qref``) bit for bit, and onnxruntime's differ from it by
at most a bound the test states with its reason. A claim that onnxruntime is exact is
checked against the model: no u8 x s8 product may have an int8 weight outside [-64, 64]
(7 bits, what ``reduce_range`` gives), where no int16 pair can saturate.
"""
from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from passhost_onnx.zoo import MODELS, light_path, reseed

MS = "com.microsoft"

#: (domain, op_type) of the operators whose onnxruntime CPU kernels depend on the
#: instruction set: the integer products (MLAS's QGEMM: u8 x s8 pairs saturate in int16
#: without VNNI) and the com.microsoft quantized operators (fixed point, lookup tables,
#: vectorised float requantization). ``ort_run`` refuses a model holding any of them.
ISA_DEPENDENT = frozenset(
    {("", op) for op in ("QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger")}
    | {(MS, op) for op in ("QGemm", "QLinearConv", "QLinearAdd", "QLinearMul", "QLinearSigmoid",
                           "QLinearLeakyRelu", "QLinearSoftmax", "QLinearConcat", "QLinearAveragePool",
                           "QLinearGlobalAveragePool", "QLinearReduceMean", "QLinearWhere", "QAttention",
                           "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "DynamicQuantizeLSTM")})

#: the integer products among them, with the input index of their weight operand
_PRODUCTS = {("", "QLinearConv"): 3, ("", "QLinearMatMul"): 3, ("", "ConvInteger"): 1, ("", "MatMulInteger"): 1,
             (MS, "QGemm"): 3, (MS, "QLinearConv"): 3, (MS, "DynamicQuantizeMatMul"): 1,
             (MS, "MatMulIntegerToFloat"): 1, (MS, "QAttention"): 1}

#: the largest int8 weight magnitude with which no pair of u8 x s8 products overflows
#: int16: 2 * 255 * 64 = 32640 <= 32767 (onnxruntime's ``reduce_range`` weights)
SEVEN_BITS = 64


class _Zoo(dict):
    """name -> path of the reseeded model, written the first time it is asked for (each
    pytest-xdist worker writes only the models its tests use)."""

    def __init__(self, out):
        super().__init__()
        self.out = out

    def __missing__(self, name):
        if name not in MODELS:
            raise KeyError(name)
        path = str(self.out / f"{name}.onnx")
        onnx.save(reseed(onnx.load(light_path(name))), path)
        self[name] = path
        return path

    def __contains__(self, name):
        return name in MODELS


@pytest.fixture(scope="session")
def zoo(tmp_path_factory):
    """name -> path of the reseeded model (written once per session, when first used)."""
    return _Zoo(tmp_path_factory.mktemp("zoo"))


# -- which operators a model holds ---------------------------------------------------------

def _load(path_or_bytes) -> onnx.ModelProto:
    if isinstance(path_or_bytes, (bytes, bytearray)):
        return onnx.load_from_string(bytes(path_or_bytes))
    return onnx.load(str(path_or_bytes), load_external_data=False)


def _graphs(model: onnx.ModelProto):
    """The main graph, every subgraph (If, Loop, Scan bodies) and every local function."""
    stack = [model.graph]
    while stack:
        g = stack.pop()
        yield g
        for node in g.node:
            for a in node.attribute:
                stack.extend([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs))
    for f in model.functions:
        yield f


def _nodes(model):
    for g in _graphs(model):
        yield from g.node


def isa_dependent_ops(model: onnx.ModelProto) -> set:
    """``domain.op_type`` of each operator of :data:`ISA_DEPENDENT` that ``model`` holds."""
    out = set()
    for n in _nodes(model):
        key = ("" if n.domain == "ai.onnx" else n.domain, n.op_type)
        if key in ISA_DEPENDENT:
            out.add(f"{key[0]}.{key[1]}" if key[0] else key[1])
    return out


def saturating_products(model: onnx.ModelProto) -> list:
    """Names of the integer products whose int16 pair sums may saturate in onnxruntime's
    kernels without VNNI: an int8 weight outside [-64, 64], or a weight that is not a
    constant of the graph (its values, so its range, unknown)."""
    out = []
    for g in _graphs(model):
        consts = {t.name: t for t in getattr(g, "initializer", ())}
        for c in g.node:
            if c.op_type == "Constant":
                consts.update((c.output[0], a.t) for a in c.attribute if a.name == "value")
        for n in g.node:
            key = ("" if n.domain == "ai.onnx" else n.domain, n.op_type)
            if key not in _PRODUCTS:
                continue
            w = consts.get(n.input[_PRODUCTS[key]]) if len(n.input) > _PRODUCTS[key] else None
            if w is None:
                out.append(n.name or n.output[0])
            elif w.data_type == onnx.TensorProto.INT8 and np.abs(numpy_helper.to_array(w).astype(int)).max(
                    initial=0) > SEVEN_BITS:
                out.append(n.name or n.output[0])
    return out


# -- onnxruntime ---------------------------------------------------------------------------

def _session(path_or_bytes):
    """An onnxruntime CPU session with its graph optimisations off and one thread each for
    the operators and between them: the same summation order on every machine's core count."""
    ort = pytest.importorskip("onnxruntime")
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(path_or_bytes, opts, providers=["CPUExecutionProvider"])


def _run(path_or_bytes, feeds: dict) -> list:
    sess = _session(path_or_bytes)
    names = {i.name for i in sess.get_inputs()}
    return sess.run(None, {k: v for k, v in feeds.items() if k in names})


_CHECKED: dict = {}


def _refuse_isa_dependent(path_or_bytes) -> None:
    key = None
    if not isinstance(path_or_bytes, (bytes, bytearray)):
        st = os.stat(path_or_bytes)
        key = (os.path.abspath(path_or_bytes), st.st_mtime_ns, st.st_size)
        if key in _CHECKED:
            ops = _CHECKED[key]
        else:
            ops = _CHECKED[key] = isa_dependent_ops(_load(path_or_bytes))
    else:
        ops = isa_dependent_ops(_load(path_or_bytes))
    if ops:
        raise RuntimeError(
            f"ort_run: the model holds {', '.join(sorted(ops))}, whose onnxruntime kernels give numbers that "
            "depend on the machine's instruction set (int16 saturation without VNNI, fixed point, tables); "
            "compare with the ort_quantized fixture instead: passhost against ONNX's exact definition, "
            "onnxruntime within a stated bound")


def _ort_run(path_or_bytes, feeds: dict) -> list:
    _refuse_isa_dependent(path_or_bytes)
    return _run(path_or_bytes, feeds)


@pytest.fixture
def ort_run():
    """``ort_run(path or bytes, {name: array}) -> [outputs]`` with onnxruntime's optimisations
    off and one thread; refuses a model with an operator of :data:`ISA_DEPENDENT`."""
    pytest.importorskip("onnxruntime")
    return _ort_run


# -- the one comparison with onnxruntime's quantized kernels ----------------------------------

def _as_list(x) -> list:
    return [x] if isinstance(x, np.ndarray) else list(x)


def _per_output(value, n: int, what: str) -> list:
    """``value`` per output: a list or tuple holds one per output, anything else is for all."""
    if not isinstance(value, (list, tuple)):
        return [value] * n
    assert len(value) == n, f"{what}: {len(value)} values for {n} outputs"
    return value


def _ort_quantized(model, feeds: dict, exact, passhost, *, bound, why: str, passhost_tol=0.0, saturates=False,
                   runner=None) -> list:
    """Check passhost and onnxruntime on ``model`` (a path or bytes) against ``exact``.

    ``exact``: ONNX's definition of each output, computed by the test (``qref``).
    ``passhost``: passhost's outputs (its interpreter on the import, or on the re-imported
    export); they must equal ``exact`` bit for bit, or within ``passhost_tol`` (an absolute
    tolerance, per output or one for all) for an output that went through float operators
    whose result ONNX does not define to the bit (a softmax, an average).
    ``bound``: how far onnxruntime may be from ``exact``, per output or one for all, in the
    output's units (quantization steps of an integer output, an absolute difference of a
    float one; an array bounds each element), for the reason ``why``.
    ``saturates``: the bound was derived for int16 saturation (``qref.u8s8_saturation_bound``).
    Without it, the model must have no integer product whose int16 pairs may saturate
    (:func:`saturating_products`): no other bound would hold on x86-64 without VNNI.
    Returns onnxruntime's outputs. ``runner``: stands in for onnxruntime (the tests of this
    helper)."""
    exact, passhost = _as_list(exact), _as_list(passhost)
    assert why and why.strip(), "ort_quantized: say why onnxruntime may differ by the bound"
    assert len(passhost) == len(exact), f"passhost has {len(passhost)} outputs, the exact definition {len(exact)}"
    bounds = _per_output(bound, len(exact), "bound")
    tols = _per_output(passhost_tol, len(exact), "passhost_tol")
    for i, (p, e, tol) in enumerate(zip(passhost, exact, tols)):
        p, e = np.asarray(p), np.asarray(e)
        assert p.dtype == e.dtype and p.shape == e.shape, (
            f"output {i}: passhost gives {p.dtype}{list(p.shape)}, the exact definition {e.dtype}{list(e.shape)}")
        if np.all(np.asarray(tol) == 0):
            np.testing.assert_array_equal(p, e, err_msg=f"output {i}: passhost differs from ONNX's exact definition")
        else:
            diff = np.abs(p.astype(np.float64) - e.astype(np.float64))
            assert not (diff > np.asarray(tol)).any(), (
                f"output {i}: passhost differs from ONNX's definition by up to {diff.max():g}, beyond the float "
                "tolerance of its float operators")
    if not saturates:
        risky = saturating_products(_load(model))
        assert not risky, (
            f"{', '.join(risky)} may saturate onnxruntime's int16 pair sums on x86-64 without VNNI (an int8 weight "
            f"outside [-{SEVEN_BITS}, {SEVEN_BITS}] or not a constant), which the bound does not allow for: use "
            "7-bit weights, or derive the bound (qref.u8s8_saturation_bound) and pass saturates=True")
    got = (runner or _run)(model, feeds)
    assert len(got) == len(exact), f"onnxruntime gives {len(got)} outputs, the exact definition {len(exact)}"
    for i, (g, e, b) in enumerate(zip(got, exact, bounds)):
        g, e = np.asarray(g), np.asarray(e)
        assert g.dtype == e.dtype and g.shape == e.shape, (
            f"output {i}: onnxruntime gives {g.dtype}{list(g.shape)}, the exact definition {e.dtype}{list(e.shape)}")
        diff = np.abs(g.astype(np.float64) - e.astype(np.float64))
        over = diff > np.asarray(b)
        assert not over.any(), (
            f"output {i}: onnxruntime differs from ONNX's exact definition by up to {diff.max():g} "
            f"(at {int(over.sum())} of {diff.size} elements beyond the bound {np.max(b):g}: {why})")
    return got


@pytest.fixture
def ort_quantized():
    """:func:`_ort_quantized`: passhost bit for bit against the exact definition, onnxruntime's
    quantized kernels within a stated bound."""
    pytest.importorskip("onnxruntime")
    return _ort_quantized


# -- ONNX's quantized operators, by hand ----------------------------------------------------

def _f32(x):
    return np.asarray(x, np.float32)


def _saturate(v, dtype):
    info = np.iinfo(dtype)
    return np.clip(v, info.min, info.max).astype(dtype)


def quantize(x, scale, zero, axis=1, *, ulps=0):
    """QuantizeLinear: ``saturate(round(x / scale) + zero)``, halves to even, in float32.
    ``ulps``: ``x`` holds values ONNX defines only up to float32 rounding (a sigmoid, a
    mean; given in float64 here), each then divided in float64 and required to lie more
    than ``ulps`` float32 roundings of itself away from a rounding tie, so that every
    implementation within that error rounds it the same way."""
    zero = np.asarray(zero)
    scale, zero_i = _along(_f32(scale), np.ndim(x), axis), _along(zero.astype(np.int64), np.ndim(x), axis)
    dtype = np.float64 if ulps else np.float32
    v = np.asarray(x, dtype) / scale.astype(dtype)
    if ulps:
        tie = np.abs(np.abs(v - np.floor(v)) - 0.5)
        room = np.maximum(np.abs(v), 1) * ulps * 2.0 ** -24
        inside = (v + zero_i >= np.iinfo(zero.dtype).min - 1) & (v + zero_i <= np.iinfo(zero.dtype).max + 1)
        assert (tie > room)[inside].all(), (
            f"an exact value lies within {ulps} float32 roundings of a rounding tie: its quantized value would "
            "depend on float error; choose other inputs")
    return _saturate(np.rint(v) + zero_i, zero.dtype)


def dequantize(q, scale, zero, axis=1):
    """DequantizeLinear: ``(q - zero) * scale`` in float32."""
    return ((np.asarray(q).astype(np.int64) - _along(np.asarray(zero).astype(np.int64), np.ndim(q), axis))
            .astype(np.float32) * _along(_f32(scale), np.ndim(q), axis))


def _along(v, ndim, axis):
    v = np.asarray(v)
    if v.size <= 1 or ndim == 0:
        return v.reshape(())
    shape = [1] * ndim
    shape[axis % ndim] = v.size
    return v.reshape(shape)


def im2col(x, kernel, pads, strides, fill):
    """``(N, OH, OW, C * kh * kw)`` windows of NCHW ``x``, padded with ``fill``."""
    kh, kw = kernel
    padded = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])), constant_values=fill)
    win = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(2, 3))[:, :, ::strides[0], ::strides[1]]
    n, c, oh, ow = win.shape[:4]
    return win.transpose(0, 2, 3, 1, 4, 5).reshape(n, oh, ow, c * kh * kw)


def conv_integer(x, w, x_zero, w_zero, pads=(0, 0, 0, 0), strides=(1, 1)):
    """ConvInteger (2-D, one group): the convolution of ``x - x_zero`` and ``w - w_zero``,
    exact: the products of 8-bit values and their sums stay integers far below 2**53, so
    float64's matrix product computes them without rounding (checked); int32 out."""
    m = w.shape[0]
    cols = im2col(np.asarray(x).astype(np.float64), w.shape[2:], pads, strides, float(x_zero)) - float(x_zero)
    kern = (np.asarray(w).astype(np.float64).reshape(m, -1)
            - _along(np.asarray(w_zero).astype(np.float64), 2, 0))
    assert cols.shape[-1] * np.abs(cols).max(initial=0) * np.abs(kern).max(initial=0) < 2 ** 53
    acc = np.moveaxis(cols @ kern.T, -1, 1)
    assert np.abs(acc).max(initial=0) < 2 ** 31
    return acc.astype(np.int32)


def requantize(acc, multiplier, zero, axis=1):
    """``saturate(round(float32(acc) * multiplier) + zero)``, halves to even: the
    requantization of QLinearConv and QLinearMatMul, with the multiplier ``(x_scale *
    w_scale) / y_scale`` in float32 as onnxruntime and passhost compute it."""
    acc = np.asarray(acc)
    assert np.abs(acc).max(initial=0) < 2 ** 24, "float32(acc) must be exact"
    v = np.rint(acc.astype(np.float32) * _along(_f32(multiplier), acc.ndim, axis))
    zero = np.asarray(zero)
    return _saturate(v.astype(np.float64) + zero.astype(np.int64), zero.dtype)


def multiplier(x_scale, w_scale, y_scale):
    return (_f32(x_scale) * _f32(w_scale)) / _f32(y_scale)


def qlinear_conv(x, xs, xz, w, ws, wz, ys, yz, bias=None, pads=(0, 0, 0, 0), strides=(1, 1)):
    """QLinearConv: the exact integer convolution plus the int32 bias, requantized."""
    acc = conv_integer(x, w, xz, wz, pads, strides).astype(np.int64)
    if bias is not None:
        acc = acc + np.asarray(bias).astype(np.int64).reshape(1, -1, 1, 1)
    return requantize(acc, multiplier(xs, ws, ys), yz, axis=1)


def matmul_integer(a, b, a_zero, b_zero):
    """MatMulInteger: ``(a - a_zero) @ (b - b_zero)``, exact (int32)."""
    acc = (np.asarray(a).astype(np.int64) - np.int64(a_zero)) @ (
        np.asarray(b).astype(np.int64) - _along(np.asarray(b_zero).astype(np.int64), 2, 1))
    assert np.abs(acc).max(initial=0) < 2 ** 31
    return acc.astype(np.int32)


def qlinear_matmul(a, as_, az, b, bs, bz, ys, yz):
    """QLinearMatMul with per-tensor scales: the exact integer product, requantized."""
    return requantize(matmul_integer(a, b, az, bz), multiplier(as_, bs, ys), yz, axis=-1)


def dynamic_quantize(x):
    """DynamicQuantizeLinear: uint8 with the scale ``(max(0, max x) - min(0, min x)) / 255``
    and the zero point ``saturate(round(-min / scale))``, all in float32."""
    x = _f32(x)
    lo, hi = np.minimum(np.float32(0), x.min()), np.maximum(np.float32(0), x.max())
    scale = np.float32((hi - lo) / np.float32(255))
    zero = np.uint8(np.clip(np.rint(np.float32(0) - lo / scale), 0, 255))
    return quantize(x, scale, zero), scale, zero


def u8s8_saturation_bound(cols, weights, mult=None, spread=None):
    """How far onnxruntime's u8 x s8 product may be from the exact one where its kernels
    add pairs of products in int16 with saturation (x86-64 without VNNI).

    ``cols``: ``(..., K)`` uint8 activations as the kernel reads them (windows padded with
    the zero point); ``weights``: ``(M, K)`` int8 (zero point 0). A pair ``p + q``
    saturates by ``|p + q| - 32767 <= (|p| - 16383.5) + (|q| - 16383.5)``, so whichever
    products the kernel pairs, the accumulator is off by at most ``E = sum_k max(0,
    |a_k w_k| - 16383.5)``, ``|a_k|`` taken as the larger of ``a_k`` and ``|a_k - 128|``
    should a kernel shift the activations to int8. ``spread``: how far (in steps, per
    element of ``cols``) onnxruntime's own activations may already be from ``cols``; each
    such step adds ``|w_k|`` to ``E`` and widens the range the saturation term looks at.
    Without ``mult``: ``E`` per output (an int32 output's bound); with it: the requantized
    output's bound in steps, ``floor(E * mult) + 1`` where ``E > 0``, and 0 where nothing
    can differ (the same float32 requantization of the same integer)."""
    a = np.asarray(cols).astype(np.int64)
    s = np.zeros_like(a) if spread is None else np.asarray(spread).astype(np.int64)
    hi, lo = np.minimum(a + s, 255), np.maximum(a - s, 0)
    a = np.maximum(hi, 128 - lo)  # the largest of max(v, |v - 128|) for v in [lo, hi]
    w = np.abs(np.asarray(weights).astype(np.int64))
    e = np.maximum(0.0, a[..., None, :] * w - 16383.5).sum(-1) + (s[..., None, :] * w).sum(-1)
    e = np.moveaxis(e, -1, 1) if e.ndim == 4 else e
    if mult is None:
        return np.ceil(e)
    mult = _along(np.abs(_f32(mult)).astype(np.float64), e.ndim, 1)
    return np.where(e > 0, np.floor(e * mult) + 1, 0)


@pytest.fixture(scope="session")
def qref():
    """ONNX's quantized operators computed by hand (integer numpy and float32), the exact
    answer ``ort_quantized`` holds passhost and onnxruntime to."""
    return SimpleNamespace(quantize=quantize, dequantize=dequantize, im2col=im2col, conv_integer=conv_integer,
                           requantize=requantize, multiplier=multiplier, qlinear_conv=qlinear_conv,
                           matmul_integer=matmul_integer, qlinear_matmul=qlinear_matmul,
                           dynamic_quantize=dynamic_quantize, u8s8_saturation_bound=u8s8_saturation_bound,
                           saturating_products=saturating_products, isa_dependent_ops=isa_dependent_ops,
                           run=_run, SEVEN_BITS=SEVEN_BITS)
