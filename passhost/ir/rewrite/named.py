"""The use analysis for a graph of named values: nodes that read and write values by name,
as ONNX's node lists do (what the ONNX exporter rewrites after emitting).

It answers the questions of :mod:`.dataflow` in that form, from one scan: who reads each
name, which node writes it, and which names are read from outside the nodes -- the
graph's outputs, the values a subgraph captures -- each of which counts as one more use,
so a value the model returns is never "used once" and never merged away::

    Relu(x) -> r;  Add(r, r) -> y;  graph output y
    NamedValues(nodes, outside=["y"]):  uses("r") == 2, uses("y") == 1, producer["y"] == 1
"""
from __future__ import annotations

import operator
from typing import Any, Callable, Iterable

__all__ = ["NamedValues"]


class NamedValues:
    """Readers and producers of the values of ``nodes``, built once.

    :param nodes: the nodes, in order (their positions are what ``readers`` and ``producer``
        hold)
    :param outside: names read from outside the nodes (graph outputs, captured values);
        a name listed twice counts twice
    :param reads: ``node -> the names it reads`` (default: its ``input``)
    :param writes: ``node -> the names it writes`` (default: its ``output``)
    :ivar readers: ``{name: [position of a node reading it, one per read]}``
    :ivar producer: ``{name: position of the node writing it}``
    :ivar outside: ``{name: how often it is read from outside}``
    """

    __slots__ = ("nodes", "readers", "producer", "outside")

    def __init__(self, nodes: Iterable, outside: Iterable[str] = (),
                 reads: Callable[[Any], Iterable[str]] = operator.attrgetter("input"),
                 writes: Callable[[Any], Iterable[str]] = operator.attrgetter("output")) -> None:
        self.nodes = list(nodes)
        readers: dict = {}
        producer: dict = {}
        for i, n in enumerate(self.nodes):
            for x in reads(n):
                got = readers.get(x)
                if got is None:
                    readers[x] = [i]
                else:
                    got.append(i)
            for o in writes(n):
                producer[o] = i
        extra: dict = {}
        for x in outside:
            extra[x] = extra.get(x, 0) + 1
        self.readers, self.producer, self.outside = readers, producer, extra

    def uses(self, name: str) -> int:
        """How often ``name`` is read: by the nodes and from outside."""
        return len(self.readers.get(name, ())) + self.outside.get(name, 0)

    def counts(self) -> dict:
        """``{name: uses(name)}`` for every name read (a fresh dict, the caller's to update)."""
        out = {x: len(r) for x, r in self.readers.items()}
        for x, k in self.outside.items():
            out[x] = out.get(x, 0) + k
        return out

    def readers_of(self, name: str) -> list:
        """The nodes reading ``name``, one per read."""
        nodes = self.nodes
        return [nodes[i] for i in self.readers.get(name, ())]

    def read_outside(self, name: str) -> bool:
        """Whether ``name`` is read from outside the nodes (a graph output, a capture)."""
        return name in self.outside
