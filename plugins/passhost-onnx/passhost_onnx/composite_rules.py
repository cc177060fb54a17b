"""The export's composites as rules: the pass ``ONNXComposites``, which
``passhost check-rules ONNXComposites`` checks as it checks any pass made of rules.

Each composite (:mod:`.composites`) becomes a rule whose replacement is the ONNX node its
emitter writes, held in an ``onnx.opaque`` call (which the interpreter runs with onnx's
reference implementation). check-rules instantiates the pattern at random, rewrites, and
compares the interpreter on the host operators with onnx's operator -- an independent
check of the emitter's numbers, attributes included::

    multiply(%x, clip(add(multiply(%x, 0.166667f), 0.5f), a_min=0f, a_max=1f))
    ->  onnx.opaque(%x, op_type="HardSwish", node="...")

The pass does what the export does (composites matched by stage, then each written as
its node): run before ``ir.save`` at the same opset, it changes nothing in the file.
"""
from __future__ import annotations

from typing import Optional

import onnx

from passhost import ir
from passhost.ir.pattern import DFPatternCallback, Part
from passhost.ir.rewrite import KEEP_TYPES, RuleTable, walk
from passhost.transform import function_pass

from .composites import COMPOSITES, Composite, composite_parts
from .exporter import MAX_OPSET, Emitter
from .opaque import opaque

__all__ = ["CompositeRule", "onnx_composites", "as_opaque"]


class CompositeRule(DFPatternCallback):
    """Composite ``c`` as a rule: its match becomes the ONNX node it stands for."""

    def __init__(self, c: Composite, opset: int = MAX_OPSET) -> None:
        super().__init__(require_type=True, priority=-c.stage, name=c.name)
        self.pattern, self.composite, self.opset = c.pattern, c, opset
        if c.examples is not None:
            self.examples = c.examples

    def callback(self, pre: ir.Expr, post: ir.Expr, node_map: dict) -> Optional[ir.Expr]:
        part = composite_parts(pre, self.opset, only=[self.composite]).get(id(pre))
        return (as_opaque(part, part.leaves, self.opset, pre.checked_type) if part is not None else None) or post


def as_opaque(part: Part, args: list, opset: int, ty: ir.Type) -> Optional[ir.Expr]:
    """The node the emitter of composite ``part.tag`` writes for the match ``part``, as an
    ``onnx.opaque`` call of type ``ty`` on ``args`` (the values of its leaves) and the
    node's initializers; ``None`` when the emitter declines or writes more than one node."""
    em = Emitter(opset)
    names = [f"in{i}" for i in range(len(part.leaves))]
    em.taken.update(names)
    if not isinstance(part.tag.emit(em, part, names), str) or len(em.nodes) != 1:
        return None
    node, ins = em.nodes[0], []
    for x in node.input:
        ins.append(args[names.index(x)] if x in names else ir.Constant(em.values[x]))
    bare = onnx.helper.make_node(node.op_type, ["?"] * len(node.input), ["?"], domain=node.domain or None)
    bare.attribute.extend(node.attribute)
    return ir.Call(opaque(), ins, {"domain": node.domain, "op_type": node.op_type,
                                   "node": bare.SerializeToString().hex(), "out_shapes": (tuple(ty.shape),),
                                   "out_dtypes": (ty.dtype,), "opset": opset})


def onnx_composites(opset: int = MAX_OPSET):
    """The ONNX export's composites as rules, each written as the ONNX operator it stands for
    (an onnx.opaque call) at opset ``opset``: passhost check-rules ONNXComposites checks them."""

    def transform(func, mod, ctx):
        parts, memo = composite_parts(func.body, opset), {}  # (standard operators: no target)

        def lower(call: ir.Call, old: ir.Call) -> Optional[ir.Expr]:
            part = parts.get(id(old))
            return None if part is None else as_opaque(part, [memo.get(x, x) for x in part.leaves], opset,
                                                       old.checked_type)

        body = walk(func.body, RuleTable([(ir.Call, lower)], with_original=True), KEEP_TYPES, memo=memo)
        return func if body is func.body else ir.Function(func.params, body, func.ret_type, func.attrs)

    # (onnxruntime's contrib operators have no reference implementation to check against)
    transform.rules = tuple(CompositeRule(c, opset) for c in COMPOSITES if not c.target)
    return function_pass(transform, opt_level=0, name="ONNXComposites", required=["InferType"])
