"""The emitted ONNX nodes as a view with use-lists and graph-output flags, built once: what
the export's rewrites that must stay at the ONNX level read and change (the rest are
composites, :mod:`.composites`).

The readers and the producer of each value come from the host's use analysis
(:class:`passhost.ir.rewrite.NamedValues`), once, and every change goes through the view,
which keeps them current: a node is replaced by a new one (never edited in place), a
reader is moved to another value, a node is dropped. A value read from outside the nodes
-- a graph output, a value an If's branch captures -- is *pinned*: :meth:`NodeView.drop`
refuses to drop the node that still writes it, and :meth:`NodeView.only_reader` never
calls a pinned value "read once", so no rewrite can lose it::

    t1 = Transpose(g, perm=[0, 3, 1, 2]);  t2 = Transpose(t1, perm=[0, 2, 3, 1]);  y = Relu(t2)
    view.move_readers("t2", "g");  view.drop(t2_node, t1_node)   ->   y = Relu(g)
"""
from __future__ import annotations

from typing import Iterable, Iterator, Optional


import onnx

from passhost.ir.rewrite import NamedValues

__all__ = ["NodeView"]


class NodeView:
    """``nodes`` with who reads and who writes each value (see the module docs).

    :param nodes: the graph's nodes, in order
    :param pinned: the names read from outside them (graph outputs, captured values)
    """

    def __init__(self, nodes: Iterable, pinned: Iterable[str]) -> None:
        g = NamedValues(nodes, outside=pinned)
        self.nodes, self.readers, self.producer = g.nodes, g.readers, g.producer
        self.pinned = frozenset(g.outside)
        self.at = {id(n): i for i, n in enumerate(self.nodes)}
        self.gone: set = set()

    def alive(self) -> list:
        """The nodes not dropped, in order (a snapshot)."""
        return [n for i, n in enumerate(self.nodes) if i not in self.gone]

    def current(self) -> Iterator[onnx.NodeProto]:
        """The nodes not dropped, in order, each as it is when the walk reaches it (a node
        replaced meanwhile is met as its replacement, one dropped not at all)."""
        for i in range(len(self.nodes)):
            if i not in self.gone:
                yield self.nodes[i]

    def writer(self, name: str) -> Optional[onnx.NodeProto]:
        i = self.producer.get(name)
        return None if i is None else self.nodes[i]

    def readers_of(self, name: str) -> list:
        return [self.nodes[i] for i in self.readers.get(name, ())]

    def only_reader(self, name: str) -> Optional[onnx.NodeProto]:
        """The one node reading ``name``, if nothing else does (a pinned value: never)."""
        r = self.readers.get(name, ())
        return self.nodes[r[0]] if len(r) == 1 and name not in self.pinned else None

    def made(self, name: str, op_type: str) -> Optional[onnx.NodeProto]:
        """The ``op_type`` node writing ``name`` when one node alone reads ``name``."""
        n = self.writer(name)
        return n if n is not None and n.op_type == op_type and self.only_reader(name) is not None else None

    def replace(self, old: onnx.NodeProto, new: onnx.NodeProto) -> None:
        """``new`` takes ``old``'s place; the use-lists follow."""
        i = self.at.pop(id(old))
        self._unread(i, old)
        for o in old.output:
            if self.producer.get(o) == i:
                del self.producer[o]
        for x in new.input:
            self.readers.setdefault(x, []).append(i)
        for o in new.output:
            self.producer[o] = i
        self.nodes[i] = new
        self.at[id(new)] = i

    def move_reader(self, node: onnx.NodeProto, name: str, to: str) -> onnx.NodeProto:
        """``node`` reads ``to`` where it read ``name``: the new node in its place."""
        new = onnx.NodeProto()
        new.CopyFrom(node)
        new.input[:] = [to if x == name else x for x in node.input]
        self.replace(node, new)
        return new

    def move_readers(self, name: str, to: str) -> None:
        """Every node reading ``name`` reads ``to`` instead (a node reading it twice moves once)."""
        for i in dict.fromkeys(self.readers.get(name, ())):
            self.move_reader(self.nodes[i], name, to)


    def drop(self, *nodes: onnx.NodeProto) -> None:
        """Drop ``nodes``; a value one of them still writes must be read by nobody, and
        must not be pinned (a graph output is never lost)."""
        for n in nodes:
            i = self.at[id(n)]
            for o in n.output:
                if self.producer.get(o) != i:
                    continue  # (another node writes it now)
                if o in self.pinned or self.readers.get(o):
                    raise AssertionError(f"dropping the writer of {o!r}, which is still read")
                del self.producer[o]
            self._unread(i, n)
            self.gone.add(i)

    def _unread(self, i: int, node: onnx.NodeProto) -> None:
        for x in node.input:
            r = self.readers.get(x)
            if r is not None and i in r:
                r.remove(i)
                if not r:
                    del self.readers[x]
