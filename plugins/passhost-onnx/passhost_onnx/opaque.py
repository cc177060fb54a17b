"""``onnx.opaque``: an operator of a custom domain that no converter knows, or a standard
one the user asked to keep (``keep_ops=``, ``--keep-op``), kept as it is.

The call carries the ONNX node (its serialized ``NodeProto``, as hex, whose inputs and
outputs are position markers: ``"?"`` for a value the call passes on, ``""`` for an absent
one) and its output types, read from the model's ``value_info`` or from ONNX shape
inference. It has no kernel and the ``OPAQUE`` fusion pattern, so FoldConstant never
evaluates it and FuseOps never fuses through it; export writes the node back unchanged::

    %1 = onnx.opaque(%0, domain="com.example", op_type="MyRelu", node="...",
                     out_shapes=[[1, 8]], out_dtypes=["float32"]);
"""
from __future__ import annotations

from passhost import ir
from passhost.errors import TypeInferenceError
from passhost.hookspecs import OpEntry

__all__ = ["OPAQUE", "opaque_op"]

OPAQUE = "onnx.opaque"


def _rel(arg_types: list, attrs) -> ir.Type:
    shapes, dtypes = attrs.out_shapes, attrs.out_dtypes
    if len(shapes) != len(dtypes) or not shapes:
        raise TypeInferenceError(f"{OPAQUE}: out_shapes and out_dtypes must name the same outputs, "
                                 f"got {shapes!r} and {dtypes!r}")
    types = [ir.TensorType(tuple(s), d) for s, d in zip(shapes, dtypes)]
    return types[0] if len(types) == 1 else ir.TupleType(types)


def opaque_op() -> OpEntry:
    """The operator's definition: one object, so a reloaded registry sees the same op."""
    return _ENTRY


_ENTRY = OpEntry(name=OPAQUE, num_inputs=-1, type_rel=_rel, compute=None,
                 attrs=(("domain", ""), ("op_type", ""), ("node", ""), ("out_shapes", ()), ("out_dtypes", ())),
                 pattern=ir.OpPattern.OPAQUE, stateful=True,
                 summary="an ONNX operator of a custom domain, or one kept by --keep-op, unchanged (no kernel, never fused)")
