"""Where a node came from: TVM's ``Span``, for error messages that point at the source.

A span names the source (a file, ``GeneratedSource`` for :func:`AnnotateSpans`' printed
text, or a model) and either a line and column in text or the name of a model's node::

    Span("model.txt", 3, 5)             # model.txt:3:5
    Span("resnet50.onnx", name="Conv_12")   # resnet50.onnx: node 'Conv_12'

Nodes carry one in ``node.span`` (``None`` when nothing set it). It is metadata, like
``checked_type``: it takes no part in structural equality or hashing, and a node rebuilt
from another by :func:`passhost.ir.with_children` or ``Call.with_args`` keeps it.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Span"]


@dataclass(frozen=True)
class Span:
    """A source location.

    :param source: the file, model or generated text the node came from
    :param line: 1-based line in a text source (0: not a text position)
    :param column: 1-based column in that line
    :param name: the node's name in a model source (an ONNX node name)
    """

    source: str
    line: int = 0
    column: int = 0
    name: str = ""

    def __str__(self) -> str:
        if self.line:
            return f"{self.source}:{self.line}:{self.column}"
        if self.name:
            return f"{self.source}: node {self.name!r}"
        return self.source
