"""The quantized operators' ONNX: ``qnn.quantize``/``qnn.dequantize`` as ``QuantizeLinear``/
``DequantizeLinear``, ``qnn.conv2d`` as ``ConvInteger``, ``qnn.dense`` as ``MatMulInteger``,
``qnn.requantize`` as ``Cast``, ``Mul`` and ``QuantizeLinear``, and a product and its
requantization joined back into ``QLinearConv`` or ``QLinearMatMul``.

``qnn.requantize(acc, s_in, 0, s_out, zp)`` is written as::

    QuantizeLinear(Mul(Cast(acc, float), s_in / s_out), 1.0, zp)

exactly its numbers: ``QuantizeLinear`` divides by its scale of 1, rounds halves to even,
adds the zero point and saturates. When ``acc`` is a ``qnn.conv2d`` (plus a bias) and
``s_in`` is its two scales' product, :func:`join_qlinear_conv` makes the four nodes one
``QLinearConv`` with the original scales: what an int8 model held before it was imported::

    ConvInteger(x, w, xz, wz) -> Add(B) -> Cast -> Mul(m) -> QuantizeLinear(1.0, yz)
    ->  QLinearConv(x, xs, xz, w, ws, wz, ys, yz, B)      when m == float32(xs * ws) / ys
"""
from __future__ import annotations

import numpy as np
from onnx import helper

from passhost.errors import FormatError

from .dtypes import to_onnx_type
from .emit import _check_layout, _pads, _tensor, emitter

__all__ = ["join_qlinear_conv"]

#: output dtypes QuantizeLinear writes, by the first opset it writes them at
_QUANTIZE_SINCE = {"uint8": 10, "int8": 10, "uint16": 21, "int16": 21, "uint4": 21, "int4": 21}
#: the opset from which QuantizeLinear/DequantizeLinear take a float16 or bfloat16 scale
_HALF_SCALE_SINCE = 19
#: the opset from which they take blocked scales (``block_size``)
_BLOCKED_SINCE = 21


@emitter("qnn.conv2d")
def _qnn_conv(em, call, args):
    """``ConvInteger(data, kernel, input_zero_point, kernel_zero_point)``: ONNX's integer
    convolution takes 8-bit tensors; the scales take no part in it."""
    data, kernel = _tensor(call, 0), _tensor(call, 1)
    if data.dtype not in ("uint8", "int8") or kernel.dtype not in ("uint8", "int8"):
        raise FormatError(f"qnn.conv2d of {data.dtype} data and a {kernel.dtype} kernel has no ONNX export: "
                          "ConvInteger takes 8-bit tensors")
    _check_layout(call, data_layout="NCHW", kernel_layout="OIHW", out_layout="NCHW")
    a = call.attrs
    out = em.one("ConvInteger", list(args[:4]), kernel_shape=list(kernel.shape[2:]), strides=list(a.strides),
                 pads=_pads(a.padding, 2), dilations=list(a.dilation), group=int(a.groups))
    if call.checked_type.dtype != "int32":
        return em.one("Cast", [out], to=to_onnx_type(call.checked_type.dtype))
    em.quantized[out] = ("conv", args[4], args[5])
    return out


@emitter("qnn.dense")
def _qnn_dense(em, call, args):
    """``MatMulInteger(data, transpose(weight), input_zero_point, kernel_zero_point)``."""
    data, weight = _tensor(call, 0), _tensor(call, 1)
    if data.dtype not in ("uint8", "int8") or weight.dtype not in ("uint8", "int8"):
        raise FormatError(f"qnn.dense of {data.dtype} data and a {weight.dtype} weight has no ONNX export: "
                          "MatMulInteger takes 8-bit tensors")
    w = em.values.get(args[1])
    wt = em.const(np.ascontiguousarray(w.T)) if w is not None else em.one("Transpose", [args[1]], perm=[1, 0])
    out = em.one("MatMulInteger", [args[0], wt, args[2], args[3]])
    if call.checked_type.dtype != "int32":
        return em.one("Cast", [out], to=to_onnx_type(call.checked_type.dtype))
    em.quantized[out] = ("dense", args[4], args[5])
    return out


def _axis_shaped(value: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """A scale or zero point array: one value as a scalar, several shaped to broadcast along ``axis``."""
    return value.reshape(()) if value.size <= 1 else value.reshape((-1,) + (1,) * (ndim - axis - 1))


def _along(em, name: str, ndim: int, axis: int) -> str:
    """A per-axis scale or zero point ``name`` shaped to broadcast along ``axis``."""
    value = em.values.get(name)
    if value is not None:
        return name if value.ndim == 0 else em.const(_axis_shaped(value, ndim, axis))
    return em.one("Reshape", [name, em.ints([-1] + [1] * (ndim - axis - 1))])


def _round_and_saturate(em, y: str, zero: str, dtype: str) -> str:
    """``Cast(Clip(Round(y) + float(zero), min, max), dtype)``: QuantizeLinear's arithmetic
    after its division, for a dtype it cannot write at the export's opset."""
    info = np.iinfo(dtype)
    y = em.one("Add", [em.one("Round", [y]), em.one("Cast", [zero], to=to_onnx_type("float32"))])
    y = em.one("Clip", [y, em.const(np.float32(info.min)), em.const(np.float32(info.max))])
    return em.one("Cast", [y], to=to_onnx_type(dtype))


@emitter("qnn.requantize")
def _requantize(em, call, args):
    data, s_in, z_in, s_out, z_out = args
    a = call.attrs
    if a.rounding != "TONEAREST_EVEN":
        raise FormatError(f"qnn.requantize with rounding={a.rounding!r} has no ONNX export: ONNX rounds halves to "
                          "even (rounding=\"TONEAREST_EVEN\")")
    x = _tensor(call, 0)
    nd = len(x.shape)
    axis = a.axis % max(nd, 1)
    v = data
    zero_in = em.values.get(z_in)
    if zero_in is None or np.any(zero_in):
        if x.dtype != "int32":
            v = em.one("Cast", [v], to=to_onnx_type("int32"))
        z = em.one("Cast", [_along(em, z_in, nd, axis)], to=to_onnx_type("int32"))
        v = em.one("Sub", [v, z])
    f = em.one("Cast", [v], to=to_onnx_type("float32"))
    si, so = em.values.get(s_in), em.values.get(s_out)
    if si is not None and so is not None:
        mult = em.const((_axis_shaped(si, nd, axis).astype(np.float32)
                         / _axis_shaped(so, nd, axis).astype(np.float32)).astype(np.float32))
    else:
        mult = em.one("Div", [em.one("Cast", [_along(em, s_in, nd, axis)], to=to_onnx_type("float32")),
                              em.one("Cast", [_along(em, s_out, nd, axis)], to=to_onnx_type("float32"))])
    y = em.one("Mul", [f, mult])
    out_dtype = a.out_dtype
    zt = _tensor(call, 4)
    if em.opset >= _QUANTIZE_SINCE.get(out_dtype, 99) and tuple(zt.shape) in ((), (1,)):
        zp = z_out if zt.dtype == out_dtype else em.one("Cast", [z_out], to=to_onnx_type(out_dtype))
        if len(zt.shape):
            zp = em.one("Reshape", [zp, em.ints([])])
        out = em.one("QuantizeLinear", [y, em.const(np.float32(1.0)), zp])
        if zero_in is not None and not np.any(zero_in):
            em.quantized[out] = ("requantize", data, s_in, s_out, zp)
        return out
    return _round_and_saturate(em, y, _along(em, z_out, nd, axis), out_dtype)


def join_qlinear_conv(em, view) -> None:
    """Each ``QuantizeLinear`` ending a chain (see the module) is replaced by the
    ``QLinearConv`` or ``QLinearMatMul`` it stands for, through ``view``
    (:class:`~.node_view.NodeView`), and the chain's other nodes go."""
    for n in view.alive():
        rec = em.quantized.get(n.output[0]) if n.op_type == "QuantizeLinear" else None
        if rec is None:
            continue
        _, acc, s_in, s_out, zp = rec
        mul = view.made(n.input[0], "Mul")
        cast = view.made(mul.input[0], "Cast") if mul is not None else None
        if cast is None or cast.input[0] != acc:
            continue
        bias, prod = None, view.made(acc, "ConvInteger") or view.made(acc, "MatMulInteger")
        add = view.made(acc, "Add") if prod is None else None
        if add is not None:  # (QLinearConv's bias: QLinearMatMul has none)
            for c, b in ((add.input[0], add.input[1]), (add.input[1], add.input[0])):
                prod = view.made(c, "ConvInteger")
                if prod is not None:
                    bias = b
                    break
        prec = em.quantized.get(prod.output[0]) if prod is not None else None
        if prec is None or not _scales_match(em, prec[1], prec[2], s_in, s_out, prod):
            continue
        inputs = [prod.input[0], prec[1], prod.input[2], prod.input[1], prec[2], prod.input[3], s_out, zp]
        if bias is not None:
            b = em.values.get(bias)
            channels = em.values[prod.input[1]].shape[0] if prod.input[1] in em.values else None
            if b is None or b.dtype != np.int32 or b.size != channels:
                continue
            inputs.append(em.const(b.reshape(-1)))
        op_type = "QLinearConv" if prod.op_type == "ConvInteger" else "QLinearMatMul"
        view.replace(n, helper.make_node(op_type, inputs, list(n.output),
                                         **{x.name: helper.get_attribute_value(x) for x in prod.attribute}))
        view.drop(*(x for x in (mul, cast, add, prod) if x is not None))


def _scales_match(em, xs: str, ws: str, s_in: str, s_out: str, conv) -> bool:
    """``s_in`` is float32 ``xs * ws`` and the scales are what QLinearConv and QLinearMatMul
    take: a scalar input and output scale, a scalar or per-output-channel kernel scale."""
    v = [em.values.get(x) for x in (xs, ws, s_in, s_out)]
    if any(x is None or x.dtype != np.float32 for x in v) or v[0].size != 1 or v[3].size != 1:
        return False
    if v[1].ndim > 1 or v[2].ndim > 1 or em.values.get(conv.input[3]) is None:
        return False
    product = (v[0].reshape(()) * v[1]).astype(np.float32)
    return product.shape == v[2].shape and bool(np.array_equal(product, v[2]))


# -- qnn.quantize / qnn.dequantize: QuantizeLinear / DequantizeLinear ----------------------


def _q_params(em, call, args, dtype: str, scale_dtype: str = "float32"):
    """``(scale, zero point, attributes)`` for Q/DQ: a scale of ``scale_dtype`` and a zero
    point of ``dtype``, both one value or one per slice of the axis (a scalar zero point
    beside a per-axis scale is repeated: ONNX wants them of one shape), or one per block
    (``{"axis": a, "block_size": b}``, opset 21)."""
    data = _tensor(call, 0)
    nd = len(data.shape)
    axis = call.attrs.axis % max(nd, 1)
    scale_t, zero_t = _tensor(call, 1), _tensor(call, 2)
    block = int(call.attrs.block_size)
    if block:
        if em.opset < _BLOCKED_SINCE:
            raise FormatError(f"{call.op.name} with block_size={block} (blocked quantisation) needs ONNX opset "
                              f"{_BLOCKED_SINCE}; export with --opset {_BLOCKED_SINCE}")
        return (_cast_to(em, args[1], scale_t, scale_dtype), _blocked_zero(em, args[2], zero_t, scale_t, dtype),
                {"axis": axis, "block_size": block})
    per_axis = [t.ndim == 1 and t.shape[0] > 1 for t in (scale_t, zero_t)]
    count = data.shape[axis] if any(per_axis) else None
    names = []
    for name, t, want in ((args[1], scale_t, scale_dtype), (args[2], zero_t, dtype)):
        value = em.values.get(name)
        if value is not None:
            value = value.astype(want).reshape(-1 if value.size > 1 else ())
            if count is not None and value.ndim == 0:
                value = np.full(count, value, dtype=want)
            names.append(em.const(value))
            continue
        if t.dtype != want:
            name = em.one("Cast", [name], to=to_onnx_type(want))
        if count is not None and not (t.ndim == 1 and t.shape[0] == count):
            name = em.one("Expand", [em.one("Reshape", [name, em.ints([1])]), em.ints([count])])
        elif count is None and t.ndim == 1:
            name = em.one("Reshape", [name, em.ints([])])
        names.append(name)
    return names[0], names[1], ({"axis": axis} if count is not None else {})


def _cast_to(em, name: str, t, dtype: str) -> str:
    """``name`` (of type ``t``) as ``dtype``: a constant converted, else a ``Cast``."""
    if t.dtype == dtype:
        return name
    value = em.values.get(name)
    if value is not None:
        return em.const(value.astype(dtype))
    return em.one("Cast", [name], to=to_onnx_type(dtype))


def _blocked_zero(em, name: str, zero_t, scale_t, dtype: str) -> str:
    """A blocked zero point of ``dtype`` and of the scale's shape (a scalar one repeated)."""
    name = _cast_to(em, name, zero_t, dtype)
    if tuple(zero_t.shape) == tuple(scale_t.shape):
        return name
    value = em.values.get(name)
    if value is not None:
        return em.const(np.full(tuple(scale_t.shape), value.reshape(()), dtype=dtype))
    return em.one("Expand", [name, em.ints(list(scale_t.shape))])


def _scale_dtype(em, call, want: str) -> str:
    """The scale dtype Q/DQ are written with: the call's own float16 or bfloat16 scale when
    its tensor (``want``) has that dtype and the opset takes it; float32 otherwise."""
    t = _tensor(call, 1).dtype
    return t if t == want and t in ("float16", "bfloat16") and em.opset >= _HALF_SCALE_SINCE else "float32"


def _four_bit(em, call, dtype: str) -> None:
    if dtype in ("int4", "uint4") and em.opset < 21:
        raise FormatError(f"{call.op.name} of {dtype} data needs ONNX opset 21 (the 4-bit types); "
                          "export with --opset 21")


@emitter("qnn.quantize")
def _quantize(em, call, args):
    dtype = call.attrs.out_dtype
    _four_bit(em, call, dtype)
    x_dtype = _tensor(call, 0).dtype
    written = em.opset >= _QUANTIZE_SINCE.get(dtype, 99)
    scale_dtype = _scale_dtype(em, call, x_dtype) if written else "float32"  # (the arithmetic: float32)
    x = args[0] if x_dtype == scale_dtype else em.one("Cast", [args[0]], to=to_onnx_type(scale_dtype))
    scale, zero, attrs = _q_params(em, call, args, dtype, scale_dtype)
    if written:
        return em.one("QuantizeLinear", [x, scale, zero], **attrs)
    # (a dtype QuantizeLinear writes only at a later opset: its arithmetic)
    if attrs:
        nd = len(_tensor(call, 0).shape)
        scale, zero = _along(em, scale, nd, attrs["axis"]), _along(em, zero, nd, attrs["axis"])
    return _round_and_saturate(em, em.one("Div", [x, scale]), zero, dtype)


@emitter("qnn.dequantize")
def _dequantize(em, call, args):
    dtype = _tensor(call, 0).dtype
    if dtype in ("uint16", "int16") and em.opset < 21:
        raise FormatError(f"qnn.dequantize of {dtype} data needs ONNX opset 21 (DequantizeLinear of 16-bit "
                          f"integers); export with --opset 21")
    _four_bit(em, call, dtype)
    if dtype.startswith("float8") and em.opset < 19:
        raise FormatError(f"qnn.dequantize of {dtype} data needs ONNX opset 19 (the float8 types); "
                          "export with --opset 19")
    out_dtype = call.attrs.out_dtype
    scale_dtype = _scale_dtype(em, call, out_dtype)
    scale, zero, attrs = _q_params(em, call, args, dtype, scale_dtype)
    out = em.one("DequantizeLinear", [args[0], scale, zero], **attrs)
    if out_dtype != scale_dtype:
        out = em.one("Cast", [out], to=to_onnx_type(out_dtype))
    return out


# -- onnx.matmul_nbits: MatMulNBits, as it came -------------------------------------------


@emitter("onnx.matmul_nbits")
def _matmul_nbits(em, call, args):
    """onnxruntime's ``com.microsoft.MatMulNBits`` on the same inputs (an absent optional
    one as ``""``) and attributes: the packed weight is written back byte for byte."""
    a = call.attrs
    given = dict(zip(a.present, args[3:]))
    inputs = list(args[:3]) + [given.get(name, "") for name in ("zero_points", "g_idx", "bias")]
    while inputs[-1] == "":
        inputs.pop()
    attrs = {"K": int(a.K), "N": int(a.N), "bits": int(a.bits), "block_size": int(a.block_size)}
    if a.accuracy_level is not None:
        attrs["accuracy_level"] = int(a.accuracy_level)
    em.domains.setdefault("com.microsoft", 1)
    return em.node("MatMulNBits", inputs, 1, domain="com.microsoft", **attrs)[0]
