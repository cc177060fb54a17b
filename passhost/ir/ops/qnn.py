"""Quantized operators, with TVM's names: ``qnn.quantize``, ``qnn.dequantize``,
``qnn.conv2d``, ``qnn.dense`` and ``qnn.requantize``.

``qnn.quantize(data, output_scale, output_zero_point)`` is ONNX's ``QuantizeLinear``:
``saturate(round(data / scale) + zero_point)`` in float32, halves rounded to even, to
``out_dtype``; ``qnn.dequantize(data, input_scale, input_zero_point)`` its inverse
``(data - zero_point) * scale``. Scales and zero points are scalars or one value per slice
of ``axis``. As operators, not arithmetic, they stay what they are through the passes, so
an exported model still has its ``QuantizeLinear``/``DequantizeLinear`` pairs for a runtime
to turn into integer kernels::

    %0 = qnn.quantize(%x, 0.02f, 128u8, out_dtype="uint8");
    qnn.dequantize(%0, 0.02f, 128u8)

``qnn.conv2d(data, kernel, input_zero_point, kernel_zero_point, input_scale, kernel_scale)``
is the convolution of the zero-point-shifted integer tensors, exact in ``out_dtype``
(``int32``): ``conv2d(data - input_zero_point, kernel - kernel_zero_point)``. It has
``nn.conv2d``'s attributes. As in TVM, the scales are carried for whoever requantizes the
result and take no part in it. The kernel zero point is a scalar or one value per output
channel. This is ONNX's ``ConvInteger``, and the core of its ``QLinearConv``::

    %0 = qnn.conv2d(%x /* uint8 */, %w /* int8 */, 3u8, 0i8, 0.02f, 0.01f, channels=8, kernel_size=[3, 3])
    /* Tensor[(1, 8, 30, 30), int32] */

``qnn.dense(data, weight, input_zero_point, kernel_zero_point, input_scale, kernel_scale)``
is the same for ``nn.dense`` (weight ``(units, in)``, a kernel zero point per unit or
one); it is ONNX's ``MatMulInteger`` with a 2-D right operand.

An int8 convolution cannot be written in ``nn.conv2d``: ONNX's ``Conv`` has no integer
kernel, and the exporter writes ``qnn.conv2d`` back as ``ConvInteger``.

``qnn.requantize(data, input_scale, input_zero_point, output_scale, output_zero_point)``
maps an integer tensor from one scale to another, as onnxruntime's quantized kernels do:
``saturate(round(float32(data - input_zero_point) * (input_scale / output_scale)) +
output_zero_point)`` with the multiplier in float32, halves rounded to even
(``rounding="TONEAREST_EVEN"``; TVM's ``"UPWARD"`` and ``"TONEAREST"``, halves up and away
from zero, are there too). A scale of several values runs along ``axis``. The
``QLinearConv`` of ONNX is ``qnn.requantize`` of ``qnn.conv2d`` (plus its bias)::

    %1 = qnn.requantize(%0, 0.0002f, 0, 0.05f, 128u8, axis=1, out_dtype="uint8")
"""
from __future__ import annotations

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..op import OpPattern
from ..types import TensorType, is_float
from .layout import layout_index
from .nn import _check_conv2d, _conv2d, _conv2d_rel, differ, static_of
from ._util import kernel, norm_axis, reg, tensor_arg

__all__: list = []

#: integer dtypes a quantized tensor (and its zero point) may have
INTEGER = frozenset({"int8", "uint8", "int16", "uint16", "int32"})
#: those of ``qnn.quantize`` and ``qnn.dequantize``, which also take ONNX's 4-bit types
QDQ_INTEGER = INTEGER | {"int4", "uint4"}
#: the float8 types ``qnn.dequantize`` also takes as data (ONNX's DequantizeLinear, opset 19)
FLOAT8 = frozenset({"float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"})
_INT_RANGE = {"int4": (-8, 7), "uint4": (0, 15)}


def _range(dtype: str) -> tuple:
    """``(min, max)`` of an integer dtype (numpy's iinfo does not know ml_dtypes' 4-bit types)."""
    if dtype in _INT_RANGE:
        return _INT_RANGE[dtype]
    info = np.iinfo(dtype)
    return info.min, info.max
_OP = "qnn.conv2d"


def _integer(op: str, types: list, i: int, what: str) -> TensorType:
    t = tensor_arg(op, types, i, what)
    if t.dtype not in INTEGER:
        raise TypeInferenceError(f"{op}: {what} must be an integer tensor ({', '.join(sorted(INTEGER))}), got {t}")
    return t


def _vector(op: str, types: list, i: int, what: str, size: int, floating: bool, per: str) -> TensorType:
    """A floating-point (or integer) scalar, or a 1-D tensor of 1 or ``size`` values."""
    t = tensor_arg(op, types, i, what)
    if floating != is_float(t.dtype):
        kind = "a floating-point" if floating else "an integer"
        raise TypeInferenceError(f"{op}: {what} must be {kind} tensor, got {t}")
    if t.ndim > 1 or (t.ndim == 1 and differ(t.shape[0], 1) and differ(t.shape[0], size)):
        raise TypeInferenceError(f"{op}: {what} must be a scalar or one value per {per} ({size}), got {t}")
    return t


def _qnn_conv2d_rel(types: list, attrs) -> TensorType:
    data = _integer(_OP, types, 0, "the data")
    weight = _integer(_OP, types, 1, "the kernel")
    out_ch = weight.shape[layout_index(attrs.kernel_layout, "OIHW", _OP)[0]] if weight.ndim == 4 else 0
    izp = _vector(_OP, types, 2, "the input zero point", 1, False, "output channel")
    kzp = _vector(_OP, types, 3, "the kernel zero point", out_ch, False, "output channel")
    if izp.dtype != data.dtype or kzp.dtype != weight.dtype:
        raise TypeInferenceError(f"{_OP}: each zero point must have its tensor's dtype: data {data.dtype} with "
                                 f"{izp.dtype}, kernel {weight.dtype} with {kzp.dtype}")
    _vector(_OP, types, 4, "the input scale", 1, True, "output channel")
    _vector(_OP, types, 5, "the kernel scale", out_ch, True, "output channel")
    out = _conv2d_rel([data, TensorType(weight.shape, data.dtype)], attrs)
    if out.dtype not in ("int32", "int64"):
        raise TypeInferenceError(f"{_OP}: out_dtype must be int32 or int64, got {out.dtype}")
    return out


@kernel
def _qnn_conv2d(args: list, attrs) -> np.ndarray:
    # float64 is exact here: every product of two shifted 8- or 16-bit values, and every sum
    # of them a convolution makes, is far below 2**53; numpy's BLAS then does the work
    x, w, izp, kzp = args[:4]
    x = x.astype(np.float64) - _along(izp, x.ndim, 0).astype(np.float64)
    w = w.astype(np.float64) - _along(kzp, w.ndim, layout_index(attrs.kernel_layout, "OIHW", _OP)[0])
    out = _conv2d([x, w], attrs.__class__({**attrs, "out_dtype": "float64"}))
    return np.rint(out).astype(attrs.out_dtype)


reg(_OP, 6, _qnn_conv2d_rel, _qnn_conv2d,
    attrs=(("strides", (1, 1)), ("padding", (0, 0)), ("dilation", (1, 1)), ("groups", 1),
           ("channels", None), ("kernel_size", None), ("data_layout", "NCHW"),
           ("kernel_layout", "OIHW"), ("out_layout", ""), ("out_dtype", "int32")),
    pattern=OpPattern.OUT_ELEMWISE_FUSABLE, attr_check=_check_conv2d,
    summary="2-D convolution of zero-point-shifted integer tensors, exact in int32 (ONNX ConvInteger).")


# -- qnn.requantize -----------------------------------------------------------------------
_REQ = "qnn.requantize"
_ROUNDING = ("TONEAREST_EVEN", "UPWARD", "TONEAREST")


def _per_axis(op: str, t: TensorType, data: TensorType, axis: int, what: str) -> None:
    """``t`` (a scale or zero point) is one value, or one per slice of ``axis`` of ``data``."""
    if t.ndim == 0 or t.shape == (1,):
        return
    if t.ndim != 1 or (differ(t.shape[0], data.shape[axis]) and differ(t.shape[0], 1)):
        raise TypeInferenceError(f"{op}: {what} must be a scalar or one value per slice of axis {axis} "
                                 f"({data.shape[axis]}), got {t}")


def _per_block(op: str, t: TensorType, data: TensorType, axis: int, block: int, what: str) -> None:
    """``t`` holds one value per block of ``block`` elements along ``axis`` of ``data``:
    ``data``'s shape with ``ceil(n / block)`` for its ``n`` along ``axis`` (ONNX's blocked
    quantisation, opset 21)."""
    n = data.shape[axis]
    ok = t.ndim == data.ndim and all(not differ(t.shape[a], d) for a, d in enumerate(data.shape) if a != axis)
    if ok and type(n) is int and type(t.shape[axis]) is int:
        ok = t.shape[axis] == -(-n // block)
    if not ok:
        want = tuple(str(-(-d // block) if a == axis and type(d) is int else d) for a, d in enumerate(data.shape))
        raise TypeInferenceError(f"{op}: with block_size={block}, {what} must have one value per block of axis "
                                 f"{axis} (shape ({', '.join(want)})), got {t}")


def _scale_and_zero(op: str, types: list, data: TensorType, axis: int, first: int = 1, which: str = "the ",
                    block: int = 0, integer: frozenset = INTEGER) -> None:
    """Arguments ``first`` and ``first + 1``: a floating-point scale and an integer zero
    point, each one value or one per slice of ``axis`` of ``data`` (with ``block``, one per
    block of that many elements along ``axis``)."""
    scale = tensor_arg(op, types, first, which + "scale")
    zero = tensor_arg(op, types, first + 1, which + "zero point")
    if not is_float(scale.dtype):
        raise TypeInferenceError(f"{op}: {which}scale must be a floating-point tensor, got {scale}")
    if zero.dtype not in integer:
        raise TypeInferenceError(f"{op}: {which}zero point must be an integer tensor, got {zero}")
    if block:
        _per_block(op, scale, data, axis, block, which + "scale")
        if zero.ndim or zero.shape:  # (a scalar zero point is one for every block)
            _per_block(op, zero, data, axis, block, which + "zero point")
        return
    _per_axis(op, scale, data, axis, which + "scale")
    _per_axis(op, zero, data, axis, which + "zero point")


def _requantize_rel(types: list, attrs) -> TensorType:
    data = tensor_arg(_REQ, types, 0, "the data")
    if data.dtype not in INTEGER:
        raise TypeInferenceError(f"{_REQ}: the data must be an integer tensor, got {data}")
    axis = norm_axis(_REQ, attrs.axis, max(data.ndim, 1))
    _scale_and_zero(_REQ, types, data, axis, 1, "the input ")
    _scale_and_zero(_REQ, types, data, axis, 3, "the output ")
    if attrs.out_dtype not in INTEGER:
        raise TypeInferenceError(f"{_REQ}: out_dtype must be one of {', '.join(sorted(INTEGER))}, got {attrs.out_dtype!r}")
    if attrs.compute_dtype != "float32":
        raise TypeInferenceError(f"{_REQ}: compute_dtype must be float32 (as onnxruntime computes), "
                                 f"got {attrs.compute_dtype!r}")
    if attrs.rounding not in _ROUNDING:
        raise TypeInferenceError(f"{_REQ}: rounding must be one of {', '.join(_ROUNDING)}, got {attrs.rounding!r}")
    return TensorType(data.shape, attrs.out_dtype)


def _along(value: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    value = np.asarray(value)
    if value.size <= 1 or ndim == 0:
        return value.reshape(())
    shape = [1] * ndim
    shape[axis] = value.size
    return value.reshape(shape)


def _spread(value: np.ndarray, x: np.ndarray, axis: int, block: int) -> np.ndarray:
    """A scale or zero point laid over ``x``: per tensor or per slice of ``axis``
    (:func:`_along`), or, with ``block``, each value repeated over its block of ``axis``."""
    value = np.asarray(value)
    if not block or value.ndim != x.ndim:
        return _along(value, x.ndim, axis)
    return np.repeat(value, block, axis=axis)[(slice(None),) * axis + (slice(0, x.shape[axis]),)]


def _check_block(op: str):
    def check(attrs) -> None:
        b = attrs.block_size
        if isinstance(b, bool) or not isinstance(b, int) or b < 0:
            raise IRError(f"operator {op}: block_size must be a non-negative int (0: no blocks), got {b!r}")
    return check


@kernel
def _requantize(args: list, attrs) -> np.ndarray:
    x, s_in, z_in, s_out, z_out = args
    axis = attrs.axis % max(x.ndim, 1)
    multiplier = (_along(s_in, x.ndim, axis).astype(np.float32) / _along(s_out, x.ndim, axis).astype(np.float32))
    shifted = (x.astype(np.int64) - _along(z_in, x.ndim, axis).astype(np.int64)).astype(np.float32)
    v = shifted * multiplier  # (float32 times float32: float32)
    if attrs.rounding == "UPWARD":
        v = np.floor(v + np.float32(0.5))
    elif attrs.rounding == "TONEAREST":
        v = np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))
    else:
        v = np.rint(v)
    info = np.iinfo(attrs.out_dtype)
    out = v.astype(np.float64) + _along(z_out, x.ndim, axis).astype(np.float64)
    return np.clip(out, info.min, info.max).astype(attrs.out_dtype)


reg(_REQ, 5, _requantize_rel, _requantize,
    attrs=(("axis", -1), ("rounding", "TONEAREST_EVEN"), ("compute_dtype", "float32"), ("out_dtype", "int8")),
    pattern=OpPattern.BROADCAST,
    summary="Map an integer tensor to another scale and zero point, in float32 as onnxruntime does.")


# -- qnn.quantize / qnn.dequantize -----------------------------------------------------------



def _block_axis(op: str, data: TensorType, attrs) -> int:
    if attrs.block_size and data.ndim == 0:
        raise TypeInferenceError(f"{op}: block_size={attrs.block_size} needs data with an axis, got {data}")
    return norm_axis(op, attrs.axis, max(data.ndim, 1))


def _quantize_rel(types: list, attrs) -> TensorType:
    data = tensor_arg("qnn.quantize", types, 0, "the data")
    if not is_float(data.dtype):
        raise TypeInferenceError(f"qnn.quantize: the data must be a floating-point tensor, got {data}")
    _scale_and_zero("qnn.quantize", types, data, _block_axis("qnn.quantize", data, attrs),
                    block=attrs.block_size, integer=QDQ_INTEGER)
    if attrs.out_dtype not in QDQ_INTEGER:
        raise TypeInferenceError(f"qnn.quantize: out_dtype must be one of {', '.join(sorted(QDQ_INTEGER))}, "
                                 f"got {attrs.out_dtype!r}")
    return TensorType(data.shape, attrs.out_dtype)


@kernel
def _quantize(args: list, attrs) -> np.ndarray:
    x, scale, zero = args
    axis = attrs.axis % max(x.ndim, 1)
    v = np.rint(x.astype(np.float32) / _spread(scale, x, axis, attrs.block_size).astype(np.float32))
    lo, hi = _range(attrs.out_dtype)
    v = np.clip(v.astype(np.float64) + _spread(zero, x, axis, attrs.block_size).astype(np.float64), lo, hi)
    return v.astype(attrs.out_dtype)


def _dequantize_rel(types: list, attrs) -> TensorType:
    data = tensor_arg("qnn.dequantize", types, 0, "the data")
    if data.dtype not in QDQ_INTEGER and data.dtype not in FLOAT8:
        raise TypeInferenceError(f"qnn.dequantize: the data must be an integer or float8 tensor, got {data}")
    _scale_and_zero("qnn.dequantize", types, data, _block_axis("qnn.dequantize", data, attrs),
                    block=attrs.block_size, integer=QDQ_INTEGER | FLOAT8)
    if not is_float(str(attrs.out_dtype)):
        raise TypeInferenceError(f"qnn.dequantize: out_dtype must be a floating-point dtype, got {attrs.out_dtype!r}")
    return TensorType(data.shape, attrs.out_dtype)


@kernel
def _dequantize(args: list, attrs) -> np.ndarray:
    x, scale, zero = args
    axis = attrs.axis % max(x.ndim, 1)
    wide = np.float32 if x.dtype.name in FLOAT8 else np.int64  # (float8 - its zero point: exact in float32)
    shifted = x.astype(wide) - _spread(zero, x, axis, attrs.block_size).astype(wide)
    return (shifted.astype(np.float32) * _spread(scale, x, axis, attrs.block_size).astype(np.float32)) \
        .astype(attrs.out_dtype)


reg("qnn.quantize", 3, _quantize_rel, _quantize, attrs=(("axis", -1), ("out_dtype", "int8"), ("block_size", 0)),
    pattern=OpPattern.BROADCAST, attr_check=_check_block("qnn.quantize"),
    summary="saturate(round(data / scale) + zero_point) to an integer type (ONNX QuantizeLinear).")
reg("qnn.dequantize", 3, _dequantize_rel, _dequantize,
    attrs=(("axis", -1), ("out_dtype", "float32"), ("block_size", 0)),
    pattern=OpPattern.BROADCAST, attr_check=_check_block("qnn.dequantize"),
    summary="(data - zero_point) * scale (ONNX DequantizeLinear).")


# -- qnn.dense ------------------------------------------------------------------------------
_DENSE = "qnn.dense"


def _qnn_dense_rel(types: list, attrs) -> TensorType:
    data = _integer(_DENSE, types, 0, "the data")
    weight = _integer(_DENSE, types, 1, "the weight")
    if weight.ndim != 2 or data.ndim < 1 or differ(data.shape[-1], weight.shape[1]):
        raise TypeInferenceError(f"{_DENSE}: the weight must be (units, {data.shape[-1] if data.ndim else '?'}) "
                                 f"for data {data}, got {weight}")
    units = weight.shape[0]
    if attrs.units is not None:
        if differ(attrs.units, units):
            raise TypeInferenceError(f"{_DENSE}: units={attrs.units} but the weight {weight} has {units}")
        units = static_of(units, attrs.units)
    izp = _vector(_DENSE, types, 2, "the input zero point", 1, False, "unit")
    kzp = _vector(_DENSE, types, 3, "the kernel zero point", units, False, "unit")
    for t, operand, what in ((izp, data, "the input zero point"), (kzp, weight, "the kernel zero point")):
        if t.dtype != operand.dtype:
            raise TypeInferenceError(f"{_DENSE}: {what} must be a {operand.dtype} tensor (its operand's dtype), "
                                     f"got {t}")
    _vector(_DENSE, types, 4, "the input scale", 1, True, "unit")
    _vector(_DENSE, types, 5, "the kernel scale", units, True, "unit")
    if attrs.out_dtype not in ("int32", "int64"):
        raise TypeInferenceError(f"{_DENSE}: out_dtype must be int32 or int64, got {attrs.out_dtype!r}")
    return TensorType(tuple(data.shape[:-1]) + (units,), attrs.out_dtype)


@kernel
def _qnn_dense(args: list, attrs) -> np.ndarray:
    # float64 is exact, as for qnn.conv2d (BLAS does the products)
    x, w, izp, kzp = args[:4]
    x = x.astype(np.float64) - _along(izp, x.ndim, 0).astype(np.float64)
    w = w.astype(np.float64) - _along(kzp, w.ndim, 0)
    return np.rint(np.matmul(x, w.T)).astype(attrs.out_dtype)


reg(_DENSE, 6, _qnn_dense_rel, _qnn_dense, attrs=(("units", None), ("out_dtype", "int32")),
    pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
    summary="Dense product of zero-point-shifted integer tensors, exact in int32 (ONNX MatMulInteger).")
