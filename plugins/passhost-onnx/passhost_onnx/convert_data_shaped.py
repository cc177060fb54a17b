"""Converters of operators whose output shape depends on their inputs' values: imported
when those values are known at import (passhost's types are static), an error naming the
node otherwise::

    Compress(x, condition=[1, 0, 1], axis=1)   ->  take(%x, [0, 2], axis=1)
    NonZero(constant)                          ->  the constant [rank, n] index array
"""
from __future__ import annotations

import math

import numpy as np

from passhost import ir

from .build import call, reshape, static
from .table import converter


@converter("NonZero", 9)
def _non_zero(node):
    x = node.need_const(0, "the data (its number of nonzeros decides the output shape)")
    return ir.Constant(np.array(np.nonzero(x), dtype="int64").reshape(x.ndim, -1))


@converter("Compress", 9)
def _compress(node):
    cond = node.need_const(1, "the condition (it decides the output shape)").reshape(-1).astype(bool)
    axis = node.attr("axis")
    x = node.inputs[0]
    if axis is None:
        if static(node.shape(0)):
            size = int(np.prod(node.shape(0), dtype=np.int64))
            x, axis = call("reshape", x, newshape=(size,)), 0
        else:
            size = math.prod(node.shape(0))
            x, axis = reshape(x, (size,)), 0
    else:
        axis = int(axis) % node.ndim(0)
        size = node.shape(0)[axis]
    if (len(cond) > size) if type(size) is int else ir.dims.provably_unequal(ir.dims.dmax(size, len(cond)), size):
        raise node.error(f"the condition has {len(cond)} entries, the axis {size}")
    keep = np.nonzero(cond)[0].astype("int64")
    return call("take", x, ir.Constant(keep), axis=axis)
