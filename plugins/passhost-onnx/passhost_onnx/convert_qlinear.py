"""Quantized operators (the "QOperator" format): integer products, then a requantization.

``ConvInteger`` is TVM's ``qnn.conv2d``, and ``MatMulInteger`` with a 2-D right operand its
``qnn.dense``, both exact in int32 (any other ``MatMulInteger`` is a matmul of the
zero-point-shifted tensors in int32: ONNX's ``MatMul`` takes int32, so it exports as it
is). ``QLinearConv`` and ``QLinearMatMul`` are those products, the int32 bias added, then
``qnn.requantize``: the product in float32 times one multiplier per tensor (or per output
channel), ``(x_scale * w_scale) / y_scale``, rounded half to even, plus the output zero
point, saturated, as onnxruntime computes it::

    QLinearConv(x, xs, xz, w, ws, wz, ys, yz, B)
    ->  qnn.requantize(add(qnn.conv2d(x, w, xz, wz, xs, ws), reshape(B, [M, 1, 1])),
                       multiply(xs, ws), 0, ys, yz, axis=1, out_dtype="uint8")

Integer products are exact, so the result equals onnxruntime's bit for bit.
"""
from __future__ import annotations

from passhost import ir

from .build import call, const, reshape
from .convert_nn import _auto_pads, _matmul
from .node import Node
from .table import converter

#: the output dtypes of the QLinear operators
_OUTPUT_DTYPES = frozenset({"uint8", "int8", "uint16", "int16"})


def _per_slice(node, inputs: tuple, count: int, what: str) -> None:
    """Each of ``inputs`` (scales or zero points, where present) is one value or ``count``."""
    for i in inputs:
        if node.input(i) is None:
            continue
        shape = node.shape(i)
        if len(shape) > 1 or (len(shape) == 1 and shape[0] not in (1, count)
                              and (type(shape[0]) is int and type(count) is int
                                   or ir.dims.provably_unequal(shape[0], count)
                                   and ir.dims.provably_unequal(shape[0], 1))):
            raise node.error(f"input {i} (a scale or zero point) must be a scalar or {count} values, one per "
                             f"{what}; got shape {shape}")


def _zero_point(node, i: int, dtype: str):
    """Zero point input ``i``, or a scalar 0 of ``dtype`` where it is omitted."""
    v = node.input(i)
    return v if v is not None else const(0, dtype)


def _integer_conv(node, x: int, w: int, xz: int, wz: int, xs, ws):
    """``qnn.conv2d`` of inputs ``x`` and ``w`` with zero points ``xz``, ``wz`` (indices)."""
    if node.ndim(x) != 4:
        raise node.error(f"{node.op_type} on {node.ndim(x) - 2}-D spatial data is not supported "
                         "(passhost has the 2-D qnn.conv2d, and 1-D through it)")
    w_shape = node.shape(w)
    if len(w_shape) != 4:
        raise node.error(f"its weight (input {w}) must be 4-D (M, C/group, kH, kW) like its data, got shape {w_shape}")
    _per_slice(node, (wz,), w_shape[0], "output channel")
    kernel = tuple(k if type(k) is not int else int(k) for k in node.attr("kernel_shape", w_shape[2:]))
    strides = tuple(int(s) for s in node.attr("strides", (1, 1)))
    dilations = tuple(int(d) for d in node.attr("dilations", (1, 1)))
    pads = _auto_pads(node, node.shape(x)[2:], kernel, strides, dilations)
    if not all(type(p) is int for p in pads):
        raise node.error(f"SAME padding of a dynamic size with a stride ({', '.join(map(str, pads))}) is not "
                         "supported for quantized convolutions")
    # (a weight of dynamic sizes: the operator takes them from the weight)
    return call("qnn.conv2d", node.inputs[x], node.inputs[w], _zero_point(node, xz, node.dtype(x)),
                _zero_point(node, wz, node.dtype(w)), xs, ws, strides=strides, padding=pads, dilation=dilations,
                groups=int(node.attr("group", 1)), channels=w_shape[0] if type(w_shape[0]) is int else None,
                kernel_size=kernel if all(type(k) is int for k in kernel) else None)


@converter("ConvInteger", 10)
def _conv_integer(node):
    one = const(1.0, "float32")
    return _integer_conv(node, 0, 1, 2, 3, one, one)


def _shifted(node, i: int, zp: int, axis_of_vector: int):
    """``int32(input i) - int32(zero point zp)``; a 1-D zero point of several values runs
    along ``axis_of_vector`` of the input (-2: per row of A, -1: per column of B)."""
    x = call("cast", node.inputs[i], dtype="int32")
    z = node.input(zp)
    if z is None:
        return x
    z = call("cast", z, dtype="int32")
    if node.ndim(zp) == 1 and node.shape(zp)[0] > 1 and axis_of_vector == -2:
        z = reshape(z, (node.shape(zp)[0], 1))
    return call("subtract", x, z)


def _dense_form(node, a: int, b: int, az: int) -> bool:
    """Whether ``qnn.dense`` computes the product: a 2-D right operand (its int8 values stay
    int8 behind the operator), a left one of rank 2 or more with one zero point."""
    return (node.ndim(b) == 2 and node.ndim(a) >= 2
            and (node.input(az) is None or node.ndim(az) == 0 or node.shape(az) == (1,)))


def _integer_dense(node, a: int, b: int, az: int, bz: int, a_scale, b_scale, transposed: bool = False):
    """``qnn.dense`` of input ``a`` and input ``b`` as (units, K) (``b`` transposed unless it
    is already, as QGemm's ``transB`` says)."""
    weight = node.inputs[b] if transposed else call("transpose", node.inputs[b], axes=(1, 0))
    return call("qnn.dense", node.inputs[a], weight, _zero_point(node, az, node.dtype(a)),
                _zero_point(node, bz, node.dtype(b)), a_scale, b_scale)


def _integer_matmul(node, a: int, b: int, az: int, bz: int):
    """MatMul of the shifted int32 tensors (numpy's matmul semantics, as ``MatMul``)."""
    from passhost import ir

    if _dense_form(node, a, b, az):
        one = const(1.0, "float32")
        return _integer_dense(node, a, b, az, bz, one, one)
    shifted = [ir.infer_type(_shifted(node, a, az, -2)), ir.infer_type(_shifted(node, b, bz, -1))]
    inner = Node("MatMul", "", node.name, shifted, {}, node.outputs, node.opset)
    return _matmul(inner)


@converter("MatMulInteger", 10)
def _matmul_integer(node):
    if node.ndim(0) < 1 or node.ndim(1) < 1:
        raise node.error(f"its operands must have a rank of 1 or more, got shapes {node.shape(0)} and {node.shape(1)}")
    _per_slice(node, (2,), node.shape(0)[-2] if node.ndim(0) >= 2 else 1, "row of A")
    _per_slice(node, (3,), node.shape(1)[-1], "column of B")
    return _integer_matmul(node, 0, 1, 2, 3)


def _float(node, i: int, shape=None):
    """Input ``i`` (a scale) as float32, reshaped to ``shape`` when it holds several values."""
    x = node.inputs[i] if node.dtype(i) == "float32" else call("cast", node.inputs[i], dtype="float32")
    if shape is not None and node.ndim(i) == 1 and node.shape(i)[0] > 1:
        x = reshape(x, shape)
    return x


def _output(node, y_zero: int) -> tuple:
    """``(dtype, zero point)`` of the output: ``y_zero``'s, or a 0 of the input's dtype."""
    out_dtype = node.dtype(y_zero) if node.input(y_zero) is not None else node.dtype(0)
    if out_dtype not in _OUTPUT_DTYPES:
        raise node.error(f"the output zero point has dtype {out_dtype}; QLinear operators give 8- or 16-bit integers")
    return out_dtype, node.inputs[y_zero] if node.input(y_zero) is not None else const(0, out_dtype)


def _requantize(node, acc, a_scale, b_scale, y_scale: int, y_zero: int, axis: int):
    """``acc`` (int32) requantized to ``y_zero``'s dtype with ``qnn.requantize``: the
    multiplier ``(a_scale * b_scale) / y_scale`` in float32, in that order, as onnxruntime
    computes it."""
    out_dtype, zero = _output(node, y_zero)
    return call("qnn.requantize", acc, call("multiply", a_scale, b_scale), const(0, "int32"), _float(node, y_scale),
                zero, axis=axis, out_dtype=out_dtype)


def _requantize_rows(node, acc, a_scale, b_scale, y_scale: int, y_zero: int):
    """The same for a per-row scale of A beside a per-column one of B, whose product is a
    matrix, not a scale along one axis: the float32 product times that multiplier, then
    ``qnn.quantize`` with a scale of 1 (which rounds, adds the zero point and saturates)."""
    out_dtype, zero = _output(node, y_zero)
    multiplier = call("divide", call("multiply", a_scale, b_scale), _float(node, y_scale))
    scaled = call("multiply", call("cast", acc, dtype="float32"), multiplier)
    return call("qnn.quantize", scaled, const(1.0, "float32"), zero, out_dtype=out_dtype)


@converter("QLinearConv", 10)
def _qlinear_conv(node):
    channels = node.shape(3)[0] if node.ndim(3) == 4 else 0
    _per_slice(node, (4,), channels, "output channel")
    xs, ws = _float(node, 1), _float(node, 4)
    acc = _integer_conv(node, 0, 3, 2, 5, xs, ws)
    if node.input(8) is not None:
        acc = call("add", acc, reshape(call("cast", node.inputs[8], dtype="int32"), (channels, 1, 1)))
    return _requantize(node, acc, xs, ws, 6, 7, axis=1)


@converter("QLinearMatMul", 10)
def _qlinear_matmul(node):
    if node.ndim(0) < 1 or node.ndim(3) < 1:
        raise node.error(f"its operands must have a rank of 1 or more, got shapes {node.shape(0)} and {node.shape(3)}")
    rows = node.shape(0)[-2] if node.ndim(0) >= 2 else 1
    _per_slice(node, (1, 2), rows, "row of A")
    _per_slice(node, (4, 5), node.shape(3)[-1], "column of B")
    if _dense_form(node, 0, 3, 2) and (node.ndim(1) == 0 or node.shape(1) == (1,)):
        a_scale, b_scale = _float(node, 1), _float(node, 4)
        acc = _integer_dense(node, 0, 3, 2, 5, a_scale, b_scale)
        return _requantize(node, acc, a_scale, b_scale, 6, 7, axis=-1)
    acc = _integer_matmul(node, 0, 3, 2, 5)
    if node.ndim(1) == 1 and node.shape(1)[0] > 1:  # a scale per row of A
        return _requantize_rows(node, acc, _float(node, 1, (rows, 1)), _float(node, 4), 6, 7)
    return _requantize(node, acc, _float(node, 1), _float(node, 4), 6, 7, axis=-1)
