"""Why an exported graph still reads shapes at run time: :func:`shape_notes`.

A model exported with dynamic axes keeps a ``Shape`` node only where a size that depends on
the inputs must become data: a ``Reshape`` target that ONNX's ``0``/``-1`` cannot say, the
bounds of a ``Range`` or a ``Slice``, the shape of an ``Expand`` or a ``ConstantOfShape``.
The note names each ``Shape`` node's input and what its value ends in::

    3 Shape nodes stay (their values depend on the sizes of the dynamic axes):
      Shape(input_ids)[0] -> Reshape target x1
      Shape(input_ids)[1] -> Range bounds x2, Reshape target x1
      Shape(past_key_values.0.key)[2] -> Slice bounds x1

(``[i]``: a ``Shape`` of one axis, ``start=i``, ``end=i + 1``, as the export writes from opset 15.)
"""
from __future__ import annotations

from collections import Counter
from typing import Any

__all__ = ["shape_notes"]

#: where a shape value stops being shape arithmetic: op type -> {input position: what it is}
_USES = {
    "Reshape": {1: "Reshape target"},
    "Expand": {1: "Expand shape"},
    "ConstantOfShape": {0: "ConstantOfShape shape"},
    "Range": {0: "Range bounds", 1: "Range bounds", 2: "Range bounds"},
    "Slice": {1: "Slice bounds", 2: "Slice bounds", 3: "Slice axes", 4: "Slice steps"},
    "Tile": {1: "Tile repeats"},
    "Resize": {2: "Resize scales", 3: "Resize sizes"},
    "TopK": {1: "TopK k"},
    "OneHot": {1: "OneHot depth"},
    "Pad": {1: "Pad pads"},
}
#: operators that compute on shape values (their outputs are shape values too)
_ARITHMETIC = frozenset({"Slice", "Gather", "Concat", "Unsqueeze", "Squeeze", "Reshape", "Add", "Sub", "Mul",
                         "Div", "Mod", "Min", "Max", "Cast", "Identity", "Neg", "Abs"})


def shape_notes(graph: Any) -> list:
    """Lines saying which ``Shape`` nodes of ``graph`` stay and what each one's value feeds
    (empty when there are none)."""
    shapes = [n for n in graph.node if n.op_type == "Shape"]
    if not shapes:
        return []
    readers: dict = {}
    for n in graph.node:
        for i, x in enumerate(n.input):
            readers.setdefault(x, []).append((n, i))
    outputs = {o.name for o in graph.output}
    lines = [f"{len(shapes)} Shape node{'s' if len(shapes) != 1 else ''} stay{'s' if len(shapes) == 1 else ''} "
             "(their values depend on the sizes of the dynamic axes):"]
    for s in shapes:
        uses = _uses(s.output[0], readers, outputs)
        what = ", ".join(f"{k} x{v}" for k, v in sorted(uses.items())) or "nothing"
        lines.append(f"  Shape({s.input[0]}){_axes(s)} -> {what}")
    return lines


def _axes(node: Any) -> str:
    """``[i]`` for a Shape of axis ``i`` alone, ``[i:j]`` for a range of axes, else nothing."""
    span = {a.name: a.i for a in node.attribute if a.name in ("start", "end")}
    if not span:
        return ""
    start, end = span.get("start", 0), span.get("end")
    if end is not None and end == start + 1 and start >= 0:
        return f"[{start}]"
    return f"[{start}:{'' if end is None else end}]"


def _uses(name: str, readers: dict, outputs: set) -> Counter:
    """What the shape value ``name`` ends in, following shape arithmetic (explicit stack)."""
    found: Counter = Counter()
    seen = {name}
    stack = [name]
    while stack:
        x = stack.pop()
        if x in outputs:
            found["a graph output"] += 1
        for n, i in readers.get(x, ()):
            use = _USES.get(n.op_type, {}).get(i)
            if use is not None and not (n.op_type in _ARITHMETIC and i == 0):
                found[use] += 1
            elif n.op_type in _ARITHMETIC:
                for o in n.output:
                    if o and o not in seen:
                        seen.add(o)
                        stack.append(o)
            else:
                found[f"{n.op_type} data"] += 1
    return found
