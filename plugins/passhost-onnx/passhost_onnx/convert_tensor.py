"""Converters of shape and data-movement operators: Constant, ConstantOfShape, Shape,
Reshape, Transpose, Concat, Unsqueeze, Squeeze, Split."""
from __future__ import annotations

import math

import numpy as np

from passhost import ir

from .build import call, drop_axes, expand_axes, reshape
from .table import converter


@converter("Constant", 1)
def _constant(node):
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if key in node.attrs:
            value = node.attrs[key]
            if key in ("value_float", "value_floats"):
                return ir.Constant(np.asarray(value, dtype="float32"))
            if key in ("value_int", "value_ints"):
                return ir.Constant(np.asarray(value, dtype="int64"))
            return ir.Constant(np.asarray(value))
    raise node.error(f"attributes {sorted(node.attrs)} are not supported (sparse or string constants)")


#: bytes above which ConstantOfShape stays a ``full`` call instead of becoming a constant at
#: import (a model's declared shape must not make the import allocate gigabytes)
_MAX_FILL_BYTES = 1 << 28


@converter("ConstantOfShape", 9)
def _constant_of_shape(node):
    shape = tuple(node.dims(0, "the shape"))
    value = node.attr("value")
    fill = np.zeros(1, dtype="float32") if value is None else np.asarray(value).reshape(-1)
    if any(type(d) is int and d < 0 for d in shape):
        raise node.error(f"the shape {list(shape)} has a negative dimension")
    if not all(type(d) is int for d in shape):  # a run-time size: a fill of the symbolic shape
        return call("full", ir.Constant(fill[:1].reshape(())), shape=shape, dtype=str(fill.dtype))
    if float(np.prod(shape, dtype=np.float64)) * fill.dtype.itemsize > _MAX_FILL_BYTES:  # a fill, not gigabytes
        return call("full", ir.Constant(fill[:1].reshape(())), shape=shape, dtype=str(fill.dtype))
    return ir.Constant(np.full(shape, fill[0], dtype=fill.dtype))


@converter("Shape", 1)
def _shape(node):
    """The shape as a constant when it is static; as ``shape_value`` (size-variable
    expressions) when it is symbolic; as ``shape_of`` where a dimension is ``?``."""
    shape = list(node.shape(0))
    if node.opset >= 15:
        start = int(node.attr("start", 0))
        end = node.attr("end")
        shape = shape[start:None if end is None else int(end)]
    else:
        start, end = 0, None
    if all(type(d) is int for d in shape):
        return ir.Constant(np.asarray(shape, dtype="int64"))
    if not any(d is ir.ANY for d in shape):
        return ir.shape_value(shape, "int64")
    out = call("shape_of", node.inputs[0], dtype="int64")
    if start or end is not None:
        nd = node.ndim(0)
        lo = max(0, start + nd if start < 0 else start)
        hi = nd if end is None else max(0, min(nd, int(end) + nd if int(end) < 0 else int(end)))
        out = call("strided_slice", out, begin=(lo,), end=(hi,), strides=(1,))
    return out


@converter("Size", 1)
def _size(node):
    size = math.prod(node.shape(0))
    if type(size) is int:
        return ir.Constant(np.asarray(size, dtype="int64"))
    if size is ir.ANY:
        return call("ndarray_size", node.inputs[0], dtype="int64")
    return ir.shape_value(size, "int64")


def _onnx_reshape_shape(node, in_shape, target, allowzero: bool) -> tuple:
    """ONNX's target resolved against the input's shape: each 0 copied (unless
    ``allowzero``), the -1 computed. With symbolic dimensions the result may keep a 0 or
    the -1 (Relay's reshape reads them the same way) where the dimension is ``?`` or the
    division is not exact."""
    target = [d if type(d) is ir.Dim else int(d) for d in target]
    out: list = []
    for i, d in enumerate(target):
        if type(d) is int and d == 0 and not allowzero:
            if i >= len(in_shape):
                raise node.error(f"shape {list(map(str, target))} copies dimension {i} of a {len(in_shape)}-D input")
            out.append(in_shape[i] if in_shape[i] is not ir.ANY else 0)
        else:
            out.append(d)
    if sum(1 for d in out if type(d) is int and d == -1) > 1:
        raise node.error(f"shape {list(map(str, target))} has more than one -1")
    if all(type(d) is int for d in list(in_shape) + out):
        return _static_reshape(node, in_shape, target, out)
    if -1 in out:
        known = math.prod(d for d in out if not (type(d) is int and d == -1))
        total = math.prod(in_shape)
        if type(known) is int and known == 0:
            raise node.error(f"cannot reshape {tuple(map(str, in_shape))} to {list(map(str, target))}")
        if total is not ir.ANY and 0 not in out:
            quotient = total // known
            if type(quotient) is int or (type(quotient) is ir.Dim and quotient * known == total):
                out[out.index(-1)] = quotient
    return tuple(out)


def _static_reshape(node, in_shape, target, out) -> tuple:
    total = int(np.prod(in_shape, dtype=np.int64))
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        if known == 0 or total % known:
            raise node.error(f"cannot reshape {tuple(in_shape)} to {list(target)}")
        out[out.index(-1)] = total // known
    if int(np.prod(out, dtype=np.int64)) != total:
        raise node.error(f"cannot reshape {tuple(in_shape)} to {list(target)}")
    return tuple(out)


@converter("Reshape", 1)
def _reshape_attr(node):
    return reshape(node.inputs[0], _onnx_reshape_shape(node, node.shape(0), node.attr("shape"), False))


@converter("Reshape", 5)
def _reshape(node):
    target = node.dims(1, "the shape")
    allowzero = bool(node.attr("allowzero", 0))
    shape = _onnx_reshape_shape(node, node.shape(0), target, allowzero)
    if allowzero and any(type(d) is int and d == 0 for d in shape):  # an empty axis, not "copy this dimension"
        return call("reshape", node.inputs[0], newshape=shape, allowzero=True)
    return reshape(node.inputs[0], shape)


@converter("Transpose", 1)
def _transpose(node):
    perm = node.attr("perm")
    axes = tuple(int(p) for p in perm) if perm is not None else tuple(reversed(range(node.ndim(0))))
    return call("transpose", node.inputs[0], axes=axes)


@converter("Concat", 1)
def _concat(node):
    args = [x for x in node.inputs if x is not None]
    return call("concatenate", ir.Tuple(args), axis=int(node.attr("axis", 1)))


@converter("Einsum", 12)
def _einsum(node):
    return call("einsum", ir.Tuple([x for x in node.inputs if x is not None]), equation=str(node.attr("equation")))


def _unsqueeze(node, axes):
    shape = list(node.shape(0))
    rank = len(shape) + len(axes)
    norm = sorted(int(a) % rank if int(a) < 0 else int(a) for a in axes)
    if len(set(norm)) != len(norm) or any(a >= rank for a in norm):
        raise node.error(f"axes {list(axes)} are invalid for an output of rank {rank}")
    return expand_axes(node.inputs[0], shape, norm)


@converter("Unsqueeze", 1)
def _unsqueeze_attr(node):
    return _unsqueeze(node, node.attr("axes"))


@converter("Unsqueeze", 13)
def _unsqueeze_input(node):
    return _unsqueeze(node, node.need_const(1, "the axes").reshape(-1))


def _squeeze(node, axes):
    shape = node.shape(0)
    nd = len(shape)
    if axes is None:
        if any(type(d) is not int for d in shape):
            raise node.error(f"Squeeze without axes of a shape with symbolic dimensions {tuple(map(str, shape))}: "
                             "which axes are 1 depends on the sizes; give the axes")
        keep = [d for d in shape if d != 1]
    else:
        drop = {int(a) % nd for a in axes}
        for a in drop:
            if shape[a] != 1 and ir.dims.provably_unequal(shape[a], 1):
                raise node.error(f"cannot squeeze axis {a} of size {shape[a]}")
        return drop_axes(node.inputs[0], shape, sorted(drop))
    return reshape(node.inputs[0], keep)


@converter("Squeeze", 1)
def _squeeze_attr(node):
    return _squeeze(node, node.attr("axes"))


@converter("Squeeze", 13)
def _squeeze_input(node):
    return _squeeze(node, None if node.input(1) is None else node.need_const(1, "the axes").reshape(-1))


def _split(node, sizes):
    shape = node.shape(0)
    axis = int(node.attr("axis", 0)) % len(shape)
    n_out = len(node.outputs)
    if sizes is None:
        num = node.attr("num_outputs", n_out)
        if num != n_out:
            raise node.error(f"num_outputs={num}, but the node has {n_out} outputs")
        dim = shape[axis]
        size = -(-dim // int(num))
        sizes = [size] * (int(num) - 1) + [dim - size * (int(num) - 1)]
    sizes = [int(s) if type(s) is not ir.Dim else s for s in sizes]
    if len(sizes) != n_out or ir.dims.provably_unequal(sum(sizes), shape[axis]):
        raise node.error(f"split sizes {sizes} do not cover axis {axis} of {tuple(shape)} in {n_out} parts")
    indices, at = [], 0
    for size in sizes[:-1]:
        at = at + size
        indices.append(at)
    indices = tuple(indices)
    if not all(type(i) is int for i in indices):  # symbolic boundaries: one slice per part
        if any(i is ir.ANY for i in indices):
            raise node.error(f"the split points {list(map(str, indices))} of axis {axis} are unknown (?)")
        bounds = (0,) + indices + (shape[axis],)
        return tuple(call("strided_slice", node.inputs[0], begin=(bounds[i],), end=(bounds[i + 1],), strides=(1,),
                          axes=(axis,)) for i in range(n_out))
    parts = call("split", node.inputs[0], indices_or_sections=indices, axis=axis)
    return tuple(ir.TupleGetItem(parts, i) for i in range(n_out))


@converter("Split", 1)
def _split_attr(node):
    return _split(node, node.attr("split"))


@converter("Split", 13)
def _split_input(node):
    return _split(node, None if node.input(1) is None else node.dims(1, "the split sizes"))
