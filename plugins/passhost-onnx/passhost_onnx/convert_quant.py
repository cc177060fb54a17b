"""QuantizeLinear and DequantizeLinear: TVM's ``qnn.quantize`` and ``qnn.dequantize``::

    QuantizeLinear(x, s, zp, axis=1)     ->  qnn.quantize(x, s, zp, axis=1, out_dtype="int8")
    DequantizeLinear(q, s, zp, axis=1)   ->  qnn.dequantize(q, s, zp, axis=1)
    DequantizeLinear(q, s, zp, axis=0, block_size=32)   (opset 21: one scale per 32 rows)
                                         ->  qnn.dequantize(q, s, zp, axis=0, block_size=32)

``qnn.quantize`` rounds halves to even, as ONNX does, and saturates to its integer type.
The scale and zero point are a scalar, one value per slice of ``axis``, or (with
``block_size``) one per block of that many elements along ``axis``. The data may be 8-,
16- or 32-bit, 4-bit (``int4``, ``uint4``) or, to dequantize, float8; the scale float32, float16 or bfloat16 (the
dequantized tensor has its dtype, or ``output_dtype``'s). As operators they stay what they
are through the passes -- FoldConstant evaluates ``qnn.*`` only with ``fold_qnn=True``, so
an int8 or int4 weight stays an integer constant behind its dequantize -- and export as
themselves. What the operators do not take is written out in float arithmetic instead,
the scale repeated to the data's shape (a scale of another dtype)::

    DequantizeLinear(x, s, zp)   ->  multiply(subtract(cast(x, float32), cast(zp, float32)), s)
    QuantizeLinear(x, s, zp)     ->  cast(clip(add(round(divide(x, s)), cast(zp, float32)),
                                               min(int8), max(int8)), int8)

Quantizing to a float8 type is not supported.
"""
from __future__ import annotations

import numpy as np

from passhost import ir

from .build import call, const, reshape
from .dtypes import to_dtype
from .table import converter


def _broadcast(node, value: ir.Expr, i: int, shape: tuple) -> ir.Expr:
    """Scale or zero point input ``i`` shaped to broadcast against data of ``shape``."""
    vshape = node.shape(i)
    rank = len(shape)
    if not vshape or (len(vshape) == 1 and vshape[0] == 1 and rank != 1):
        return value
    axis = int(node.attr("axis", 1)) % rank if rank else 0
    block = int(node.attr("block_size", 0) or 0)
    if block:
        if len(vshape) != rank:
            raise node.error(f"a blocked scale must have the data's rank {rank}, got shape {vshape}")
        value = call("repeat", value, repeats=block, axis=axis)
        if vshape[axis] * block != shape[axis]:  # the last block is short
            end = tuple(shape[axis] if a == axis else d for a, d in enumerate(vshape))
            value = call("strided_slice", value, begin=(0,) * rank, end=end, strides=(1,) * rank)
        return value
    if len(vshape) != 1 or vshape[0] != shape[axis]:
        raise node.error(f"a per-axis scale or zero point must have shape ({shape[axis]},) for axis {axis}, "
                         f"got {vshape}")
    return reshape(value, tuple(shape[axis] if a == axis else 1 for a in range(rank)))


def _zero_point_float(node, shape: tuple) -> ir.Expr:
    return call("cast", _broadcast(node, node.inputs[2], 2, shape), dtype="float32")


#: the scale dtypes of the operator form (the kernels compute in float32 from any of them)
_SCALES = ("float32", "float16", "bfloat16")
#: the integer dtypes the operators take as quantized data
_QDQ_INTEGER = ("int8", "uint8", "int16", "uint16", "int32", "int4", "uint4")
#: and the float8 ones ``qnn.dequantize`` takes too
_FLOAT8 = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")


def _operator_form(node) -> bool:
    """Whether the node is ``qnn.quantize``/``qnn.dequantize``: a scale of a dtype the
    operators take (data of a dtype they do not take is checked by the callers)."""
    return node.dtype(1) in _SCALES


def _block(node) -> int:
    block = node.attr("block_size", 0) or 0
    if isinstance(block, bool) or not isinstance(block, int) or block < 0:
        raise node.error(f"block_size must be a non-negative int, got {block!r}")
    return int(block)


def _axis(node) -> int:
    """The node's ``axis`` when a scale or zero point has one value per slice or block of
    it; -1 (unused) for one value."""
    if _block(node):
        return int(node.attr("axis", 1)) % node.ndim(0)
    if any(node.input(i) is not None and len(node.shape(i)) == 1 and node.shape(i)[0] != 1 for i in (1, 2)):
        return int(node.attr("axis", 1)) % node.ndim(0)
    return -1


def _check_axis_length(node, shape: tuple) -> None:
    """A 1-D scale or zero point has one value per slice of ``axis`` (or just one); a
    blocked one is left to the operator's type relation."""
    if _block(node):
        return
    rank = len(shape)
    for i in (1, 2):
        if node.input(i) is None:
            continue
        vshape = node.shape(i)
        if len(vshape) > 1:
            raise node.error(f"a scale or zero point of shape {vshape} needs block_size (it is neither a scalar nor "
                             "one value per slice of axis)")
        if len(vshape) == 1 and vshape[0] != 1:
            axis = int(node.attr("axis", 1)) % rank if rank else 0
            if not rank or vshape[0] != shape[axis]:
                raise node.error(f"a per-axis scale or zero point must have shape ({shape[axis] if rank else 1},) "
                                 f"for axis {axis}, got {vshape}")


@converter("DequantizeLinear", 10)
def _dequantize(node):
    out_dtype = node.dtype(1)
    if node.attr("output_dtype"):
        out_dtype = to_dtype(int(node.attr("output_dtype")), repr(node))
    if _operator_form(node) and (node.dtype(0) in _QDQ_INTEGER or node.dtype(0) in _FLOAT8):
        zero = node.input(2) if node.input(2) is not None else const(0, node.dtype(0))
        _check_axis_length(node, node.shape(0))
        return call("qnn.dequantize", node.inputs[0], node.inputs[1], zero, axis=_axis(node), out_dtype=out_dtype,
                    block_size=_block(node))
    shape = node.shape(0)
    scale = _broadcast(node, node.inputs[1], 1, shape)
    x = call("cast", node.inputs[0], dtype="float32")
    if node.input(2) is not None:
        x = call("subtract", x, _zero_point_float(node, shape))
    if node.dtype(1) != "float32":
        scale = call("cast", scale, dtype="float32")
    y = call("multiply", x, scale)
    return y if out_dtype == "float32" else call("cast", y, dtype=out_dtype)


@converter("QuantizeLinear", 10)
def _quantize(node):
    shape = node.shape(0)
    if node.input(2) is not None:
        out_dtype = node.dtype(2)
    elif node.attr("output_dtype"):
        out_dtype = to_dtype(int(node.attr("output_dtype")), repr(node))
    else:
        out_dtype = "uint8"
    if out_dtype not in _QDQ_INTEGER:
        raise node.error(f"quantizing to {out_dtype} is not supported (integer types only)")
    if _operator_form(node) and node.dtype(0) in _SCALES:
        zero = node.input(2) if node.input(2) is not None else const(0, out_dtype)
        _check_axis_length(node, shape)
        return call("qnn.quantize", node.inputs[0], node.inputs[1], zero, axis=_axis(node), out_dtype=out_dtype,
                    block_size=_block(node))
    x = node.inputs[0] if node.dtype(0) == "float32" else call("cast", node.inputs[0], dtype="float32")
    scale = _broadcast(node, node.inputs[1], 1, shape)
    if node.dtype(1) != "float32":
        scale = call("cast", scale, dtype="float32")
    y = call("round", call("divide", x, scale))
    if node.input(2) is not None:
        y = call("add", y, _zero_point_float(node, shape))
    lo, hi = (-8, 7) if out_dtype == "int4" else (0, 15) if out_dtype == "uint4" else \
        (np.iinfo(out_dtype).min, np.iinfo(out_dtype).max)
    y = call("clip", y, a_min=float(lo), a_max=float(hi))
    return call("cast", y, dtype=out_dtype)

