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
``QGemm``; and ``MatMulNBits``, onnxruntime's weight-only 2-, 4- or 8-bit product, which
is no quantize/dequantize pair: it imports as one operator, ``onnx.matmul_nbits``, that
keeps the packed weight and exports as itself (see the end of this module).
"""
from __future__ import annotations

import numpy as np

from passhost import ir
from passhost.errors import TypeInferenceError
from passhost.hookspecs import OpEntry

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


# -- MatMulNBits: onnx.matmul_nbits ---------------------------------------------------------
#
# onnxruntime's weight-only quantized product (what its MatMulNBitsQuantizer and the
# Hugging Face int4 exports write): ``Y = A @ dequantize(B).T (+ bias)`` with B the
# ``(N, K)`` weight packed ``bits`` to the value (low bits first), one scale (and zero
# point) per block of ``block_size`` values along K. It imports as one operator that keeps
# the packed bytes as they are: FoldConstant never dequantizes the weight (it is not a
# separate call), and the export writes the same MatMulNBits node back on the same
# initializers. The kernel dequantizes to float32 and multiplies in float32, as
# onnxruntime's does at accuracy_level 0 (the result rounded to A's dtype).

MATMUL_NBITS = "onnx.matmul_nbits"
#: MatMulNBits' optional inputs, by position
_NBITS_OPTIONAL = ("zero_points", "g_idx", "bias")


def _nbits_rel(types: list, attrs) -> ir.Type:
    op = MATMUL_NBITS
    present = tuple(attrs.present)
    if len(types) != 3 + len(present):
        raise TypeInferenceError(f"{op}: {len(types)} arguments for the inputs A, B, scales"
                                 f"{''.join(', ' + p for p in present)}")
    a, b, scales = types[:3]
    for t, what in ((a, "A"), (b, "B"), (scales, "the scales")):
        if not isinstance(t, ir.TensorType):
            raise TypeInferenceError(f"{op}: {what} must be a tensor, got {t}")
    if a.dtype not in ("float32", "float16", "bfloat16") or a.ndim < 1:
        raise TypeInferenceError(f"{op}: A must be a float32, float16 or bfloat16 tensor of rank >= 1, got {a}")
    k, n, bits, block = attrs.K, attrs.N, attrs.bits, attrs.block_size
    if bits not in (2, 4, 8) or block < 1 or (block * bits) % 8:
        raise TypeInferenceError(f"{op}: bits={bits} and block_size={block} are not a MatMulNBits layout "
                                 "(bits 2, 4 or 8; blocks of whole bytes)")
    blocks = -(-k // block)
    if b.dtype not in ("uint8", "int32") or b.ndim != 3 or tuple(b.shape[:2]) != (n, blocks) or \
            b.shape[2] * (4 if b.dtype == "int32" else 1) != block * bits // 8:
        raise TypeInferenceError(f"{op}: B must be uint8 of shape ({n}, {blocks}, {block * bits // 8}) for K={k}, "
                                 f"N={n}, bits={bits}, block_size={block}; got {b}")
    if scales.dtype != a.dtype or tuple(scales.shape) not in ((n * blocks,), (n, blocks)):
        raise TypeInferenceError(f"{op}: the scales must be {a.dtype} of shape ({n}, {blocks}) or ({n * blocks}), "
                                 f"got {scales}")
    if isinstance(a.shape[-1], int) and a.shape[-1] != k:
        raise TypeInferenceError(f"{op}: A's last axis must be K={k}, got {a}")
    return ir.TensorType(tuple(a.shape[:-1]) + (n,), a.dtype)


def _unpack_bits(data: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The first ``count`` ``bits``-bit values of each row of the uint8 ``data`` (low bits
    first), as uint8."""
    per = 8 // bits
    rows = data.reshape(data.shape[0], -1)
    out = np.empty((rows.shape[0], rows.shape[1] * per), dtype=np.uint8)
    for j in range(per):
        out[:, j::per] = (rows >> (j * bits)) & ((1 << bits) - 1)
    return out[:, :count]


def nbits_weight(b: np.ndarray, scales: np.ndarray, zero_points, g_idx, attrs) -> np.ndarray:
    """MatMulNBits' weight dequantized: float32 ``(N, K)``."""
    k, n, bits, block = attrs.K, attrs.N, attrs.bits, attrs.block_size
    blocks = -(-k // block)
    q = _unpack_bits(np.ascontiguousarray(b).view(np.uint8).reshape(n, -1), bits, blocks * block).astype(np.float32)
    index = (np.asarray(g_idx).astype(np.int64) if g_idx is not None else np.arange(k) // block)
    s = np.asarray(scales).astype(np.float32).reshape(n, blocks)[:, index]
    if zero_points is None:
        zp = np.float32(1 << (bits - 1))
    elif zero_points.dtype == np.uint8:
        zp = _unpack_bits(zero_points.reshape(n, -1), bits, blocks).astype(np.float32)[:, index]
    else:
        zp = np.asarray(zero_points).astype(np.float32).reshape(n, blocks)[:, index]
    return (q[:, :k] - zp) * s


def _nbits_compute(args: list, attrs) -> np.ndarray:
    a, b, scales = args[:3]
    extra = dict(zip(attrs.present, args[3:]))
    w = nbits_weight(b, scales, extra.get("zero_points"), extra.get("g_idx"), attrs)
    y = np.matmul(a.astype(np.float32), w.T)
    if "bias" in extra:
        y = y + extra["bias"].astype(np.float32)
    return y.astype(a.dtype)


def matmul_nbits_op() -> OpEntry:
    """The operator's definition (one object, so a reloaded registry sees the same op)."""
    return _NBITS_ENTRY


_NBITS_ENTRY = OpEntry(
    name=MATMUL_NBITS, num_inputs=-1, type_rel=_nbits_rel, compute=_nbits_compute,
    attrs=(("K", 0), ("N", 0), ("bits", 4), ("block_size", 0), ("accuracy_level", None), ("present", ())),
    pattern=ir.OpPattern.OPAQUE,
    summary="onnxruntime's MatMulNBits: A times a weight quantized to 2, 4 or 8 bits in blocks, kept packed")


@converter("MatMulNBits", 1, domain=MS)
def _matmul_nbits(node):
    """``com.microsoft.MatMulNBits(A, B, scales, zero_points?, g_idx?, bias?)`` as one
    ``onnx.matmul_nbits`` call on the same tensors and attributes."""
    present = tuple(name for i, name in enumerate(_NBITS_OPTIONAL, 3) if node.input(i) is not None)
    args = node.inputs[:3] + [node.inputs[i] for i, name in enumerate(_NBITS_OPTIONAL, 3) if node.input(i) is not None]
    level = node.attr("accuracy_level", None)
    attrs = {"K": _int_attr(node, "K"), "N": _int_attr(node, "N"), "bits": _int_attr(node, "bits", 4),
             "block_size": _int_attr(node, "block_size"), "present": present}
    if level is not None:
        attrs["accuracy_level"] = _int_attr(node, "accuracy_level")
    return call(MATMUL_NBITS, *args, **attrs)
