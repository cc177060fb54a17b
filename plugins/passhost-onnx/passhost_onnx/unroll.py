"""ONNX ``Loop`` and ``Scan`` at import, unrolled (see :mod:`.control` for ``If``).

With static shapes a loop's trip count is usually known at import: a ``Scan`` runs once per
element of its scanned axis, a ``Loop`` its constant trip count, or until its condition,
which must fold to a constant in every iteration, turns false (``for`` loops exported from
PyTorch). Each iteration is the body's nodes, renamed, with the body's inputs bound to the
values of the iteration before::

    Loop(M=3, cond=true, a0, body={i, c, a -> c, a + x})
    ->  add(add(add(%a0, %x), %x), %x)
"""
from __future__ import annotations

from typing import Any

import numpy as np
from onnx import AttributeProto, NodeProto

from passhost import ir
from passhost.errors import FormatError

from .control import defined_names, rename_branch
from .node import ConversionError

__all__ = ["Unroll", "MAX_ITERATIONS", "MAX_UNROLLED_NODES"]


#: iterations above which an unrolled loop is an error (a loop whose condition never turns false)
MAX_ITERATIONS = 100_000
#: body nodes one import may unroll in all (nested loops multiply): a bound on the graph a
#: model's loops can make the importer build
MAX_UNROLLED_NODES = 2_000_000


def _int_value(n: NodeProto, what: str, expr: Any) -> int:
    if type(expr) is not ir.Constant or np.asarray(expr.data).size != 1:
        raise ConversionError(f"{n.op_type} node {n.name or n.output[0]!r}: its {what} must be known at import "
                              "time; passhost unrolls loops whose trip count and condition are known then (give "
                              "static input shapes with --input-shape)")
    return int(np.asarray(expr.data).reshape(-1)[0])


class Unroll:
    """A ``Loop`` or ``Scan`` node on the importer's stack, unrolled: popped before each
    iteration, :meth:`step` binds the body's inputs (the carried values, the iteration
    number, the slices of the scanned inputs) and returns the body's nodes, renamed for that
    iteration, followed by itself; after the last iteration :meth:`outputs` gives the node's
    outputs (the final carried values, the per-iteration outputs stacked).

    The trip count must be known at import: a ``Scan``'s from its inputs' static shapes, a
    ``Loop``'s from its constant trip count or its condition, which must fold to a constant
    in every iteration (as ``for`` loops exported from PyTorch have it)."""

    __slots__ = ("node", "scan", "body", "own", "t", "count", "carried", "per_step", "xs", "in_axes", "attrs", "cond",
                 "last", "budget")

    def __init__(self, n: NodeProto, inputs: list, budget: list) -> None:
        self.node = n
        self.budget = budget  # [body nodes the import may still unroll], shared by its loops
        self.scan = n.op_type == "Scan"
        graphs = {a.name: a.g for a in n.attribute if a.type == AttributeProto.GRAPH}
        if "body" not in graphs:
            raise FormatError(f"{n.op_type} node {n.name or n.output[0]!r} has no body graph: the model is malformed")
        self.body = graphs["body"]
        self.own = defined_names(self.body)  # (the names each iteration's prefix must not clash with)
        self.attrs = {a.name: list(a.ints) if a.type == AttributeProto.INTS else a.i for a in n.attribute
                      if a.type in (AttributeProto.INT, AttributeProto.INTS)}
        self.t = 0
        self.last = None  # the previous iteration's (renamed) body output names
        self.per_step: list = []  # the body's per-iteration (scan) output expressions, one list per iteration
        if self.scan:
            m = int(self.attrs.get("num_scan_inputs", 0))
            self.carried, self.xs = list(inputs[:len(inputs) - m]), list(inputs[len(inputs) - m:])
            self.in_axes = self._axes("scan_input_axes", self.xs)
            lengths = {int(ir.infer_type(x).checked_type.shape[a]) for x, a in zip(self.xs, self.in_axes)}
            if len(lengths) != 1:
                raise FormatError(f"Scan node {n.name or n.output[0]!r}: its scanned inputs have different lengths "
                                  f"{sorted(lengths)}")
            self.count = lengths.pop()
            self.cond = True
        else:
            trip, cond = (inputs + [None, None])[:2]
            self.count = None if trip is None else _int_value(n, "trip count", trip)
            self.cond = True if cond is None else bool(_int_value(n, "condition", cond))
            self.carried, self.xs, self.in_axes = list(inputs[2:]), [], []

    def _axes(self, key: str, values: list) -> list:
        axes = self.attrs.get(key) or [0] * len(values)
        if len(axes) != len(values):
            raise FormatError(f"Scan node {self._name()}: {key} has {len(axes)} entries for {len(values)} tensors")
        out = []
        for a, v in zip(axes, values):
            rank = len(ir.infer_type(v).checked_type.shape) + (1 if key == "scan_output_axes" else 0)
            if not -rank <= int(a) < rank:
                raise FormatError(f"Scan node {self._name()}: {key} {int(a)} is out of range for rank {rank}")
            out.append(int(a) + rank if int(a) < 0 else int(a))
        return out

    def _name(self) -> str:
        return repr(self.node.name or (self.node.output[0] if self.node.output else "?"))

    def _more(self) -> bool:
        if not self.cond:
            return False
        if self.count is not None and self.t >= self.count:
            return False
        if self.t >= MAX_ITERATIONS:
            raise FormatError(f"{self.node.op_type} node {self._name()}: it would run more than {MAX_ITERATIONS} "
                              "iterations, which passhost does not unroll")
        return True

    def step(self, env: dict, prefix: str) -> Any:
        """Bind the next iteration's body inputs in ``env`` and return ``(nodes, initializers)``
        of the body renamed with ``prefix``, or ``None`` when the loop is done."""
        n = self.node
        if self.last is not None:  # collect the previous iteration
            try:
                values = [env[x] for x in self.last]
            except KeyError as err:
                raise FormatError(f"{n.op_type} node {n.name or n.output[0]!r}: its body output {err.args[0]!r} is "
                                  "computed by no node of the body") from None
            if not self.scan:
                self.cond = bool(_int_value(n, "condition (the body's first output)", values[0]))
                values = values[1:]
            self.carried = values[:len(self.carried)]
            self.per_step.append(values[len(self.carried):])
            self.t += 1
        if not self._more():
            return None
        self.budget[0] -= len(self.body.node)
        if self.budget[0] < 0:
            raise FormatError(f"{n.op_type} node {self._name()}: unrolling the model's loops would make more than "
                              f"{MAX_UNROLLED_NODES} nodes, which passhost does not unroll")
        names = [prefix + vi.name for vi in self.body.input]
        if self.scan:
            bound = list(self.carried)
            dirs = self.attrs.get("scan_input_directions") or [0] * len(self.xs)
            for x, axis, backward in zip(self.xs, self.in_axes, dirs):
                index = self.count - 1 - self.t if backward else self.t
                bound.append(ir.take(x, ir.const(np.int64(index)), axis=axis))
        else:
            bound = [ir.const(self.t, dtype="int64"), ir.const(True, dtype="bool")] + list(self.carried)
        if len(bound) != len(names):
            raise FormatError(f"{n.op_type} node {n.name or n.output[0]!r}: its body takes {len(names)} inputs, the "
                              f"node gives it {len(bound)}")
        for name, value in zip(names, bound):
            env[name] = ir.infer_type(value)
        nodes, inits, self.last = rename_branch(self.body, prefix, inputs=True)
        return nodes, inits

    def outputs(self) -> list:
        """The node's output expressions, in its order."""
        n = self.node
        k = len(self.body.output) - len(self.carried) - (0 if self.scan else 1)
        if k and not self.per_step:
            raise FormatError(f"{n.op_type} node {n.name or n.output[0]!r} runs no iteration, so its scan outputs "
                              "have no static shape")
        stacked = []
        axes = self._axes("scan_output_axes", self.per_step[0]) if self.scan and k else [0] * k
        dirs = (self.attrs.get("scan_output_directions") or [0] * k) if self.scan else [0] * k
        for j in range(k):
            steps = [values[j] for values in self.per_step]
            if dirs[j]:
                steps.reverse()
            stacked.append(ir.concatenate([ir.expand_dims(s, axes[j]) for s in steps], axis=axes[j]))
        return list(self.carried) + stacked
