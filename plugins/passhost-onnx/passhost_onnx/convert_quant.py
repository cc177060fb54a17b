"""QuantizeLinear and DequantizeLinear: TVM's ``qnn.quantize`` and ``qnn.dequantize``::

    QuantizeLinear(x, s, zp, axis=1)     ->  qnn.quantize(x, s, zp, axis=1, out_dtype="int8")
    DequantizeLinear(q, s, zp, axis=1)   ->  qnn.dequantize(q, s, zp, axis=1)

``qnn.quantize`` rounds halves to even, as ONNX does, and saturates to its integer type.
The scale and zero point are a scalar or one value per slice of ``axis``. As operators
they stay what they are through the passes, and export as themselves. With ``block_size``
(one scale per block of elements along ``axis``) they are written out in float arithmetic
instead, the scale repeated to the data's shape::

    DequantizeLinear(x, s, zp)   ->  multiply(subtract(cast(x, float32), cast(zp, float32)), s)
    QuantizeLinear(x, s, zp)     ->  cast(clip(add(round(divide(x, s)), cast(zp, float32)),
                                               min(int8), max(int8)), int8)

The float8 and 2- or 4-bit types have no passhost dtype.
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


def _operator_form(node) -> bool:
    """Whether the node is ``qnn.quantize``/``qnn.dequantize``: anything but blocked scales
    (and data of a dtype the operators do not take)."""
    return not int(node.attr("block_size", 0) or 0) and node.dtype(1) in ("float32", "float16")


def _axis(node) -> int:
    """The node's ``axis`` when a scale or zero point has one value per slice of it; -1
    (unused) for one value."""
    if any(node.input(i) is not None and len(node.shape(i)) == 1 and node.shape(i)[0] != 1 for i in (1, 2)):
        return int(node.attr("axis", 1)) % node.ndim(0)
    return -1


def _check_axis_length(node, shape: tuple) -> None:
    """A 1-D scale or zero point has one value per slice of ``axis`` (or just one)."""
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
    if _operator_form(node) and node.dtype(0) in ("int8", "uint8", "int16", "uint16", "int32"):
        out_dtype = node.dtype(1)
        if node.attr("output_dtype"):
            out_dtype = to_dtype(int(node.attr("output_dtype")), repr(node))
        scale = node.inputs[1] if node.dtype(1) == "float32" else call("cast", node.inputs[1], dtype="float32")
        zero = node.input(2) if node.input(2) is not None else const(0, node.dtype(0))
        _check_axis_length(node, node.shape(0))
        return call("qnn.dequantize", node.inputs[0], scale, zero, axis=_axis(node), out_dtype=out_dtype)
    shape = node.shape(0)
    scale = _broadcast(node, node.inputs[1], 1, shape)
    out_dtype = node.dtype(1)
    if node.attr("output_dtype"):
        out_dtype = to_dtype(int(node.attr("output_dtype")), repr(node))
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
    if np.dtype(out_dtype).kind not in "iu":
        raise node.error(f"quantizing to {out_dtype} is not supported (integer types only)")
    if _operator_form(node) and node.dtype(0) in ("float32", "float16"):
        scale = node.inputs[1] if node.dtype(1) == "float32" else call("cast", node.inputs[1], dtype="float32")
        zero = node.input(2) if node.input(2) is not None else const(0, out_dtype)
        _check_axis_length(node, shape)
        return call("qnn.quantize", node.inputs[0], scale, zero, axis=_axis(node), out_dtype=out_dtype)
    x = node.inputs[0] if node.dtype(0) == "float32" else call("cast", node.inputs[0], dtype="float32")
    scale = _broadcast(node, node.inputs[1], 1, shape)
    if node.dtype(1) != "float32":
        scale = call("cast", scale, dtype="float32")
    y = call("round", call("divide", x, scale))
    if node.input(2) is not None:
        y = call("add", y, _zero_point_float(node, shape))
    info = np.iinfo(out_dtype)
    y = call("clip", y, a_min=float(info.min), a_max=float(info.max))
    return call("cast", y, dtype=out_dtype)

