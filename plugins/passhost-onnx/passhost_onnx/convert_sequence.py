"""Converters of ONNX's sequence operators onto passhost's tuples: with static types a
sequence's length is known at import, so a sequence is a tuple of tensors and every
position a sequence operator takes must be known then::

    SplitToSequence(x, axis=1)          /* x: (2, 3) */  ->  split(%x, indices_or_sections=3, axis=1) (squeezed)
    SequenceAt(seq, 1)                                    ->  %seq.1
    ConcatFromSequence(seq, axis=0, new_axis=1)           ->  concatenate((expand_dims(%seq.0, axis=0), ...))

Loops that append to a sequence unroll into a growing tuple (:mod:`.unroll`). Sequence-typed
graph inputs and outputs are not supported (a tuple has no ONNX form there).
"""
from __future__ import annotations

import numpy as np

from passhost import ir

from .build import call
from .table import converter


def _fields(node, i: int) -> list:
    """The tensors of sequence input ``i``."""
    seq = node.inputs[i]
    if type(seq) is ir.Tuple:
        return list(seq.fields)
    ty = ir.infer_type(seq).checked_type
    if not isinstance(ty, ir.TupleType):
        raise node.error(f"input {i} is not a sequence (it is {ty})")
    return [ir.TupleGetItem(seq, k) for k in range(len(ty.fields))]


def _position(node, i: int, length: int, default: int, insert: bool = False) -> int:
    """Position input ``i`` (``default`` when absent), negative ones counted from the end:
    within ``[-length, length)``, or ``[-length, length]`` where ``insert`` may append."""
    pos = default if node.input(i) is None else int(node.need_const(i, "the position").reshape(-1)[0])
    if not -length <= pos < length + int(insert):
        raise node.error(f"position {pos} is outside a sequence of {length} tensors")
    return pos + length if pos < 0 else pos


@converter("SequenceEmpty", 11)
def _empty(node):
    return ir.Tuple([])


@converter("SequenceConstruct", 11)
def _construct(node):
    return ir.Tuple(list(node.inputs))


@converter("SequenceLength", 11)
def _length(node):
    return ir.Constant(np.array(len(_fields(node, 0)), dtype="int64"))


@converter("SequenceAt", 11)
def _at(node):
    fields = _fields(node, 0)
    return fields[_position(node, 1, len(fields), 0)]


@converter("SequenceInsert", 11)
def _insert(node):
    fields = _fields(node, 0)
    pos = _position(node, 2, len(fields), len(fields), insert=True)
    return ir.Tuple(fields[:pos] + [node.inputs[1]] + fields[pos:])


@converter("SequenceErase", 11)
def _erase(node):
    fields = _fields(node, 0)
    pos = _position(node, 1, len(fields), len(fields) - 1)
    return ir.Tuple(fields[:pos] + fields[pos + 1:])


@converter("SplitToSequence", 11)
def _split_to_sequence(node):
    shape = node.shape(0)
    axis = int(node.attr("axis", 0)) % len(shape)
    size = shape[axis]
    split = node.const(1) if node.input(1) is not None else None
    if node.input(1) is not None and split is None:
        raise node.error("split (input 1) must be known at import time")
    if type(size) is not int and (split is None or split.ndim == 0):
        raise node.error(f"it splits the dynamic axis {axis} (of size {size}) into parts of a given size: the "
                         "number of elements of the sequence would depend on the size")
    if split is None:
        sizes, squeeze = [1] * size, not int(node.attr("keepdims", 1))
    elif split.ndim == 0:
        step = int(split)
        sizes, squeeze = [step] * (size // step) + ([size % step] if size % step else []), False
    else:
        sizes, squeeze = [int(s) for s in split.reshape(-1)], False
    if (sum(sizes) != size if type(size) is int else ir.dims.provably_unequal(sum(sizes), size)) \
            or min(sizes, default=1) < 1:
        raise node.error(f"split sizes {sizes} do not add up to the axis' {size}")
    bounds = list(np.cumsum(sizes)[:-1])
    parts = call("split", node.inputs[0], indices_or_sections=tuple(int(b) for b in bounds), axis=axis)
    fields = [ir.TupleGetItem(parts, k) for k in range(len(sizes))]
    if squeeze:
        fields = [call("squeeze", f, axis=(axis,)) for f in fields]
    return ir.Tuple(fields)


@converter("ConcatFromSequence", 11)
def _concat_from_sequence(node):
    fields = _fields(node, 0)
    if not fields:
        raise node.error("the sequence is empty: its concatenation has no type")
    axis = int(node.attr("axis"))
    if int(node.attr("new_axis", 0)):
        rank = len(ir.infer_type(fields[0]).checked_type.shape) + 1
        axis = axis + rank if axis < 0 else axis
        fields = [call("expand_dims", f, axis=axis) for f in fields]
    return call("concatenate", ir.Tuple(fields), axis=axis)
