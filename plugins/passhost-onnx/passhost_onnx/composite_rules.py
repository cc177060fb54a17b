"""The export's composites as rules: the pass ``ONNXComposites``, which
``passhost check-rules ONNXComposites`` checks as it checks any pass made of rules.

Each composite (:mod:`.composites`) becomes a rule whose replacement is the ONNX node its
emitter writes, held in an ``onnx.opaque`` call (which the interpreter runs with onnx's
reference implementation). check-rules instantiates the pattern at random, rewrites, and
compares the interpreter on the host operators with onnx's operator -- an independent
check of the emitter's numbers, attributes included::

    multiply(%x, clip(add(multiply(%x, 0.166667f), 0.5f), a_min=0f, a_max=1f))
    ->  onnx.opaque(%x, op_type="HardSwish", node="...")

The pass does what the export does (composites partitioned by stage, then each written as
its node): run before ``ir.save`` at the same opset, it changes nothing in the file.
"""
from __future__ import annotations

from typing import Optional

import onnx

from passhost import ir
from passhost.ir.pattern import DFPatternCallback, partition
from passhost.ir.rewrite import KEEP_TYPES, RuleTable, walk
from passhost.transform import function_pass

from .composites import COMPOSITES, Composite, partition_composites, typed
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
        c = self.composite
        if c.since > self.opset or (c.check is not None and not c.check(pre)):
            return post
        part = partition(c.pattern, pre, attrs={"Composite": c.name})
        return (as_opaque(c, ir.infer_type(part), self.opset) if type(part) is ir.Call else None) or post


def as_opaque(c: Composite, call: ir.Call, opset: int, ty: Optional[ir.Type] = None) -> Optional[ir.Expr]:
    """The node composite ``c``'s emitter writes for ``call`` (of a function ``c`` made), as
    an ``onnx.opaque`` call on ``call``'s arguments and the node's initializers; ``None``
    when the emitter declines or writes more than one node. ``ty``: ``call``'s type (default:
    its checked type)."""
    fn, em = call.op, Emitter(opset)
    if type(fn) is not ir.Function:
        return None
    typed(fn)
    names = [f"in{i}" for i in range(len(fn.params))]
    em.taken.update(names)
    if not isinstance(c.emit(em, fn, names), str) or len(em.nodes) != 1:
        return None
    node, args = em.nodes[0], []
    for x in node.input:
        args.append(call.args[names.index(x)] if x in names else ir.Constant(em.values[x]))
    bare = onnx.NodeProto()
    bare.CopyFrom(node)
    bare.input[:] = ["?"] * len(node.input)
    bare.output[:] = ["?"]
    ty = ty or call.checked_type
    return ir.Call(opaque(), args, {"domain": node.domain, "op_type": node.op_type,
                                    "node": bare.SerializeToString().hex(), "out_shapes": (tuple(ty.shape),),
                                    "out_dtypes": (ty.dtype,), "opset": opset})


def onnx_composites(opset: int = MAX_OPSET):
    """The ONNX export's composites as rules, each written as the ONNX operator it stands for
    (an onnx.opaque call) at opset ``opset``: passhost check-rules ONNXComposites checks them."""
    by_name = {c.name: c for c in COMPOSITES}

    def lower(call: ir.Call, old: ir.Call) -> Optional[ir.Expr]:
        fn = call.op
        c = by_name.get(fn.attrs.get("Composite")) if type(fn) is ir.Function else None
        return as_opaque(c, call, opset, old.checked_type) if c is not None else None

    table = RuleTable([(ir.Call, lower)], with_original=True)

    def transform(func, mod, ctx):
        body = walk(partition_composites(func.body, opset), table, KEEP_TYPES)  # (standard operators)
        return func if body is func.body else ir.Function(func.params, body, func.ret_type, func.attrs)

    # (onnxruntime's contrib operators have no reference implementation to check against)
    transform.rules = tuple(CompositeRule(c, opset) for c in COMPOSITES if not c.target)
    return function_pass(transform, opt_level=0, name="ONNXComposites", required=["InferType"])
