"""Converters of GatherND, ScatterND, ScatterElements (and the old Scatter) and
ReverseSequence to TVM's ``gather_nd``, ``scatter_nd``, ``scatter_elements`` and
``reverse_sequence``. ONNX puts a position's
coordinates on the indices' last axis, TVM on the first, so the indices are transposed::

    GatherND(data: (2, 3), indices: (4, 2))   ->  gather_nd(%data, transpose(%indices, axes=[1, 0]))
"""
from __future__ import annotations

from .build import call
from .table import converter


def _tvm_indices(node, i: int = 1):
    rank = node.ndim(i)
    if rank < 1:
        raise node.error("the indices need at least one axis")
    if rank == 1:
        return node.inputs[i]
    return call("transpose", node.inputs[i], axes=(rank - 1,) + tuple(range(rank - 1)))


def _reduction(node) -> str:
    value = node.attr("reduction", "none")
    value = value.decode() if isinstance(value, bytes) else str(value)
    if value not in ("none", "add", "mul", "min", "max"):
        raise node.error(f"unknown reduction {value!r}")
    return "update" if value == "none" else value


@converter("GatherND", 11)
def _gather_nd(node):
    return call("gather_nd", node.inputs[0], _tvm_indices(node), batch_dims=int(node.attr("batch_dims", 0)))


@converter("ScatterND", 11)
def _scatter_nd(node):
    return call("scatter_nd", node.inputs[0], _tvm_indices(node), node.inputs[2], mode=_reduction(node))


@converter("Scatter", 9)
@converter("ScatterElements", 11)
def _scatter_elements(node):
    return call("scatter_elements", node.inputs[0], node.inputs[1], node.inputs[2],
                axis=int(node.attr("axis", 0)), reduction=_reduction(node))


@converter("ReverseSequence", 10)
def _reverse_sequence(node):
    return call("reverse_sequence", node.inputs[0], node.inputs[1], seq_axis=int(node.attr("time_axis", 0)),
                batch_axis=int(node.attr("batch_axis", 1)))
