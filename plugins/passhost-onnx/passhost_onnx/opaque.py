"""``onnx.opaque``: an operator of a custom domain that no converter knows, or a standard
one the user asked to keep (``keep_ops=``, ``--keep-op``), kept as it is.

The call carries the ONNX node (its serialized ``NodeProto``, as hex, whose inputs and
outputs are position markers: ``"?"`` for a value the call passes on, ``""`` for an absent
one) and its output types, read from the model's ``value_info`` or from ONNX shape
inference (size variables and ``?`` where the model's axes are dynamic). It is stateful and
has the ``OPAQUE`` fusion pattern, so FoldConstant never evaluates it and FuseOps never
fuses through it; export writes the node back unchanged. The interpreter runs a standard
operator's node with onnx's reference implementation (``onnx.reference``), at the opset
the model was read at; a custom domain's has no kernel::

    %1 = onnx.opaque(%0, domain="com.example", op_type="MyRelu", node="...",
                     out_shapes=[[1, 8]], out_dtypes=["float32"]);
"""
from __future__ import annotations

import numpy as np

from passhost import ir
from passhost.errors import EvaluationError, TypeInferenceError
from passhost.hookspecs import OpEntry

__all__ = ["OPAQUE", "opaque_op", "opaque"]

OPAQUE = "onnx.opaque"


def _rel(arg_types: list, attrs) -> ir.Type:
    shapes, dtypes = attrs.out_shapes, attrs.out_dtypes
    if len(shapes) != len(dtypes) or not shapes:
        raise TypeInferenceError(f"{OPAQUE}: out_shapes and out_dtypes must name the same outputs, "
                                 f"got {shapes!r} and {dtypes!r}")
    types = [ir.TensorType(tuple(s), d) for s, d in zip(shapes, dtypes)]
    return types[0] if len(types) == 1 else ir.TupleType(types)


def _compute(args: list, attrs) -> tuple:
    """Run the stored node with ``onnx.reference`` (standard operators only)."""
    import onnx
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    if attrs.domain not in ("", "ai.onnx"):
        raise EvaluationError(f"{OPAQUE}: {attrs.domain}.{attrs.op_type} is a custom operator; passhost cannot "
                              "run it (export the module and run it where the operator is implemented)")
    node = onnx.NodeProto()
    node.ParseFromString(bytes.fromhex(attrs.node))
    given = iter(f"in{i}" for i in range(len(args)))
    node.input[:] = [next(given) if x == "?" else "" for x in node.input]
    outs = [f"out{i}" if x == "?" else "" for i, x in enumerate(node.output)]
    node.output[:] = outs
    feeds = {f"in{i}": np.asarray(a) for i, a in enumerate(args)}
    graph = helper.make_graph([node], "opaque", [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(
        v.dtype), list(v.shape)) for k, v in feeds.items()], [helper.make_tensor_value_info(o, 0, None) for o in outs if o])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", int(attrs.opset) or 21)])
    results = ReferenceEvaluator(model).run(None, feeds)
    return results[0] if len(results) == 1 else tuple(results)


def opaque() -> ir.Op:
    """The operator, registered on first use when the registry has not loaded this plugin
    yet (``from_onnx`` called directly); the registry accepts the same definition later."""
    try:
        return ir.Op.get(OPAQUE)
    except ir.IRError:
        return ir.register_op(_ENTRY)


def opaque_op() -> OpEntry:
    """The operator's definition: one object, so a reloaded registry sees the same op."""
    return _ENTRY


_ENTRY = OpEntry(name=OPAQUE, num_inputs=-1, type_rel=_rel, compute=_compute,
                 attrs=(("domain", ""), ("op_type", ""), ("node", ""), ("out_shapes", ()), ("out_dtypes", ()),
                        ("opset", 0)),
                 pattern=ir.OpPattern.OPAQUE, stateful=True,
                 summary="an ONNX operator of a custom domain, or one kept by --keep-op, unchanged (never folded or fused)")
