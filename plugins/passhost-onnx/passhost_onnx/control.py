"""ONNX control flow at import: ``If``, ``Loop`` and ``Scan``.

**If.** A branch chosen by a constant condition is imported in place of the node;
otherwise both branches become passhost's ``if`` expression. With static shapes, most
conditions exporters write are known at import (``if x.size(0) == 1`` once the batch is
bound), and the importer folds them to a constant: only the chosen branch is imported, as
if its nodes stood in the graph. A condition that depends on the input data gives
``if (%cond) { then } else { else }``, which evaluates one branch::

    If(c, then_branch={y = Relu(x)}, else_branch={y = Neg(x)})     /* c: a graph input */
    ->  if (%c) { nn.relu(%x) } else { negative(%x) }

**Loop and Scan** are unrolled (:mod:`.unroll`) when their trip count is known at import::

    Loop(M=3, cond=true, a0, body={i, c, a -> c, a + x})
    ->  add(add(add(%a0, %x), %x), %x)

Subgraph nodes are converted by the importer's own loop, like a function body: their names
get a prefix unique to the expansion (``If_<k>::``, ``Loop_<k>::``), names a subgraph does
not define are the enclosing graph's, and its initializers become constants. Both branches
of an ``if`` must have the same output types (passhost's types are static).
"""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np
from onnx import AttributeProto, GraphProto, NodeProto

from passhost import ir
from passhost.errors import FormatError, PasshostError

__all__ = ["Join", "SUBGRAPH_OPS", "branches", "rename_branch", "renamed", "all_nodes", "condition_value",
           "defined_names"]


#: the operators whose subgraphs passhost imports
SUBGRAPH_OPS = ("If", "Loop", "Scan")


def branches(n: NodeProto) -> tuple:
    """``(then_branch, else_branch)`` graphs of an ``If`` node (an error naming it if one is missing)."""
    graphs = {a.name: a.g for a in n.attribute if a.type == AttributeProto.GRAPH}
    if "then_branch" not in graphs or "else_branch" not in graphs:
        raise FormatError(f"If node {n.name or n.output[0]!r} lacks its then_branch or else_branch graph: the "
                          "model is malformed")
    return graphs["then_branch"], graphs["else_branch"]


def all_nodes(graph: GraphProto) -> Iterator[NodeProto]:
    """The nodes of ``graph`` and of the subgraphs of its ``If``, ``Loop`` and ``Scan``
    nodes, nested ones too."""
    stack = [graph]
    while stack:
        g = stack.pop()
        for n in g.node:
            yield n
            if n.op_type in SUBGRAPH_OPS and n.domain in ("", "ai.onnx"):
                stack.extend(a.g for a in n.attribute if a.type == AttributeProto.GRAPH)


def condition_value(n: NodeProto, cond: ir.Expr) -> Any:
    """``True``/``False`` for a constant condition, ``None`` for one known only at run time."""
    if type(cond) is not ir.Constant:
        return None
    data = np.asarray(cond.data)
    if data.size != 1:
        raise FormatError(f"If node {n.name or n.output[0]!r}: its condition has {data.size} elements; ONNX's "
                          "If takes a single boolean")
    return bool(data.reshape(-1)[0])


def defined_names(graph: GraphProto) -> set:
    """The names ``graph`` defines itself: its inputs, initializers and node outputs."""
    return {vi.name for vi in graph.input} | {t.name for t in graph.initializer} | {
        o for n in graph.node for o in n.output if o}


def renamed(graph: GraphProto, names: dict) -> GraphProto:
    """A copy of ``graph`` reading outer names through ``names`` (its own names shadow them)."""
    out = GraphProto()
    out.CopyFrom(graph)
    own = defined_names(graph)
    visible = {k: v for k, v in names.items() if k not in own}
    if not visible:
        return out
    for n in out.node:
        n.input[:] = [visible.get(x, x) for x in n.input]
        for a in n.attribute:
            if a.type == AttributeProto.GRAPH:
                a.g.CopyFrom(renamed(a.g, visible))
    del out.output[:]
    for vi in graph.output:
        new = out.output.add()
        new.CopyFrom(vi)
        new.name = visible.get(vi.name, vi.name)
    return out


def rename_branch(graph: GraphProto, prefix: str, inputs: bool = False) -> tuple:
    """``(nodes, initializers, outputs)`` of a branch (or, with ``inputs``, a loop body)
    with its own names prefixed: its inputs, node outputs and initializers get ``prefix``;
    names it reads from the enclosing graphs stay; nested subgraphs read the renamed names."""
    if len(graph.input) and not inputs:
        raise FormatError(f"an If branch ({graph.name!r}) declares inputs: the model is malformed")
    names = {x: prefix + x for x in defined_names(graph)}
    nodes = []
    for inner in graph.node:
        node = NodeProto()
        node.CopyFrom(inner)
        node.name = prefix + (inner.name or (inner.output[0] if inner.output else inner.op_type))
        node.input[:] = [names.get(x, x) if x else "" for x in inner.input]
        node.output[:] = [names.get(x, x) if x else "" for x in inner.output]
        for a in node.attribute:
            if a.type == AttributeProto.GRAPH:
                a.g.CopyFrom(renamed(a.g, names))
        nodes.append(node)
    inits = [(names[t.name], t) for t in graph.initializer]
    return nodes, inits, [names.get(vi.name, vi.name) for vi in graph.output]


class Join:
    """A marker on the importer's stack, popped once both branches of an ``If`` are
    converted: it binds the node's outputs (the chosen branch's, or an ``if`` of both)."""

    __slots__ = ("node", "cond", "then", "other")

    def __init__(self, node: NodeProto, cond: Any, then: list, other: Any) -> None:
        self.node, self.cond, self.then, self.other = node, cond, then, other

    def outputs(self, env: dict) -> tuple:
        """``(values, read)``: the expression of each output of the ``If`` node (in its
        order), and the branch values they were built from."""
        n = self.node
        label = f"If node {n.name or n.output[0]!r}"
        try:
            then = [env[x] for x in self.then]
            other = None if self.other is None else [env[x] for x in self.other]
        except KeyError as err:
            raise FormatError(f"{label}: a branch output {err.args[0]!r} is computed by no node of the branch") \
                from None
        if len(then) != len(n.output) or (other is not None and len(other) != len(then)):
            raise FormatError(f"{label}: its branches have {len(then)} and {len(other or then)} outputs, the node "
                              f"has {len(n.output)}")
        if other is None:  # a constant condition: the chosen branch's values
            return then, then
        cond = self.cond
        try:
            if tuple(ir.infer_type(cond).checked_type.shape) != ():
                cond = ir.reshape(cond, ())
            pick = ir.If(cond, then[0] if len(then) == 1 else ir.Tuple(then),
                         other[0] if len(other) == 1 else ir.Tuple(other))
            ir.infer_type(pick)
        except PasshostError as err:
            raise FormatError(f"{label}: {err} (passhost's types are static: both branches must give the same "
                              "shapes and dtypes)") from None
        if len(then) == 1:
            return [pick], then + other
        return [ir.TupleGetItem(pick, i) for i in range(len(then))], then + other

