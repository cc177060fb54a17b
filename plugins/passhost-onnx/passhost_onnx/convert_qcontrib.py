"""onnxruntime's ``com.microsoft`` quantized operators, which its QOperator quantizer writes
for everything but convolutions and matrix products: each is its float operator between a
``qnn.dequantize`` of every input and a ``qnn.quantize`` of the output::

    com.microsoft.QLinearAdd(a, as, az, b, bs, bz, cs, cz)
    ->  qnn.quantize(add(qnn.dequantize(a, as, az), qnn.dequantize(b, bs, bz)), cs, cz)

That is each operator's definition. onnxruntime computes some of them in fixed point
(``QLinearAdd`` on x86) or through lookup tables, so its results may differ from these by
one quantization step on some elements. ``QGemm`` is an exact integer product, requantized
as ``QLinearMatMul`` is (or dequantized, without an output scale). The export writes the
standard operators: ``DequantizeLinear``, the float operator, ``QuantizeLinear``.

Covered: ``QLinearAdd``, ``QLinearMul``, ``QLinearConcat``, ``QLinearGlobalAveragePool``,
``QLinearAveragePool``, ``QLinearSigmoid``, ``QLinearLeakyRelu``, ``QLinearSoftmax`` and
``QGemm``.
"""
from __future__ import annotations

from passhost import ir

from .build import call, const
from .convert_qlinear import _float, _integer_dense, _requantize, _zero_point
from .node import Node
from .table import BUILTIN, converter, lookup

MS = "com.microsoft"
#: the default-domain opset whose float operators stand in the middle (their semantics
#: are the same from opset 13 on, and onnxruntime's quantizer writes opset 13 or later)
_OPSET = 13


def _int_attr(node, name: str, default=None) -> int:
    """Attribute ``name`` as an int; a missing required one, or one of another type, is named."""
    value = node.attr(name, default)
    if isinstance(value, (bool, float, str, bytes, list, tuple)) or value is None:
        if value is None:
            raise node.error(f"has no {name} attribute, which {node.op_type} needs")
        raise node.error(f"its {name} attribute must be an int, got {value!r}")
    return int(value)


def _float_attr(node, name: str, default: float) -> float:
    value = node.attr(name, default)
    if isinstance(value, (bool, str, bytes, list, tuple)):
        raise node.error(f"its {name} attribute must be a float, got {value!r}")
    return float(value)


def _dequantized(node, x: int, scale: int, zero: int):
    """Input ``x`` dequantized with inputs ``scale`` and ``zero`` (a missing zero point is 0)."""
    return ir.infer_type(call("qnn.dequantize", node.inputs[x], _float(node, scale),
                              _zero_point(node, zero, node.dtype(x))))


def _quantized(node, value, scale: int, zero: int, dtype: str):
    """``value`` quantized with inputs ``scale`` and ``zero`` (``dtype`` without a zero point)."""
    out_dtype = node.dtype(zero) if node.input(zero) is not None else dtype
    return call("qnn.quantize", value, _float(node, scale), _zero_point(node, zero, dtype), out_dtype=out_dtype)


def _float_op(node, op_type: str, inputs: list, attrs: dict):
    """The default-domain ``op_type`` converted on ``inputs`` (typed float expressions)."""
    fn = lookup(BUILTIN, "", op_type, _OPSET)
    inner = Node(op_type, "", node.name, inputs, attrs, node.outputs[:1], _OPSET)
    out = fn(inner)
    return out[0] if isinstance(out, tuple) else out


def _between(op_type: str, pairs, out: tuple, attrs=lambda node: {}):
    """A converter: dequantize the (x, scale, zero) triples of ``pairs``, run ``op_type``,
    quantize with the (scale, zero) of ``out``."""

    def convert(node):
        inputs = [_dequantized(node, *p) for p in pairs(node)]
        value = _float_op(node, op_type, inputs, attrs(node))
        return _quantized(node, value, *out, node.dtype(0))

    return convert


def _unary(node):
    return [(0, 1, 2)]


def _binary(node):
    return [(0, 1, 2), (3, 4, 5)]


converter("QLinearAdd", 1, domain=MS)(_between("Add", _binary, (6, 7)))
converter("QLinearMul", 1, domain=MS)(_between("Mul", _binary, (6, 7)))
converter("QLinearSigmoid", 1, domain=MS)(_between("Sigmoid", _unary, (3, 4)))
converter("QLinearLeakyRelu", 1, domain=MS)(
    _between("LeakyRelu", _unary, (3, 4), lambda node: {"alpha": _float_attr(node, "alpha", 0.01)}))
converter("QLinearSoftmax", 1, domain=MS)(
    _between("Softmax", _unary, (3, 4), lambda node: {"axis": _int_attr(node, "axis", -1)}))


def _channels_first(pool):
    """A pooling converter of NCHW data; ``channels_last=1`` data is transposed around it."""

    def convert(node):
        if not _int_attr(node, "channels_last", 0):
            return pool(node)
        nd = node.ndim(0)
        to_first = (0, nd - 1) + tuple(range(1, nd - 1))
        to_last = (0,) + tuple(range(2, nd)) + (1,)
        moved = ir.infer_type(call("transpose", node.inputs[0], axes=to_first))
        inner = Node(node.op_type, node.domain, node.name, [moved] + node.inputs[1:], node.attrs, node.outputs,
                     node.opset)
        return call("transpose", pool(inner), axes=to_last)

    return convert


converter("QLinearGlobalAveragePool", 1, domain=MS)(
    _channels_first(_between("GlobalAveragePool", _unary, (3, 4))))


def _pool_attrs(node):
    keep = ("auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides")
    return {k: v for k, v in node.attrs.items() if k in keep}


converter("QLinearAveragePool", 1, domain=MS)(
    _channels_first(_between("AveragePool", _unary, (3, 4), _pool_attrs)))


@converter("QLinearConcat", 1, domain=MS)
def _qlinear_concat(node):
    """``QLinearConcat(y_scale, y_zero, x0, s0, z0, x1, s1, z1, ...)``."""
    if (len(node.inputs) - 2) % 3:
        raise node.error(f"has {len(node.inputs)} inputs; QLinearConcat takes the output scale and zero point, "
                         "then a (tensor, scale, zero point) triple per input")
    inputs = [_dequantized(node, i, i + 1, i + 2) for i in range(2, len(node.inputs), 3)]
    value = _float_op(node, "Concat", inputs, {"axis": _int_attr(node, "axis")})
    return _quantized(node, value, 0, 1, node.dtype(2))


@converter("QGemm", 1, domain=MS)
def _qgemm(node):
    """``QGemm(A, as, az, B, bs, bz, C, ys, yz)``: ``alpha * A'B' + C`` exact in int32 (C is
    the int32 bias at scale ``as * bs``), then requantized with ``alpha * as * bs / ys``, or
    dequantized to float without ``ys``."""
    a = node.inputs[0]
    if _int_attr(node, "transA", 0):
        a = ir.infer_type(call("transpose", a, axes=(1, 0)))
    inner = Node(node.op_type, node.domain, node.name, [a] + node.inputs[1:], node.attrs, node.outputs, node.opset)
    a_scale, b_scale = _float(node, 1), _float(node, 4)
    acc = _integer_dense(inner, 0, 3, 2, 5, a_scale, b_scale, transposed=bool(_int_attr(node, "transB", 0)))
    if node.input(6) is not None:
        acc = call("add", acc, call("cast", node.inputs[6], dtype="int32"))
    product_scale = call("multiply", a_scale, b_scale)
    alpha = const(_float_attr(node, "alpha", 1.0), "float32")
    if node.input(7) is None:
        return call("multiply", call("cast", acc, dtype="float32"), call("multiply", product_scale, alpha))
    return _requantize(node, acc, product_scale, alpha, 7, 8, axis=-1)
