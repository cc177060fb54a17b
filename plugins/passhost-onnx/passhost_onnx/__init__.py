"""passhost-onnx: the ``onnx`` model format -- import ONNX models into passhost's IR
and export optimised modules back to ONNX::

    mod = passhost.ir.load("resnet50.onnx")                    # weights become constants
    mod, params = passhost.ir.load("resnet50.onnx", keep_params=True)
    passhost.ir.save(mod, "out.onnx", opset=17)

    passhost run resnet50.onnx -O3 -o resnet50.opt.onnx

See ``docs/onnx.md`` for the operators, shapes, custom operators and converters from
other plugins.
"""
from passhost import pass_entry, plugin
from passhost.hookspecs import FormatEntry
from .exporter import to_onnx
from .composite_rules import onnx_composites
from .files import load, save
from .importer import ShapeWarning, from_onnx
from .node import ConversionError, Node
from .convert_qcontrib import matmul_nbits_op
from .opaque import OPAQUE, opaque_op
from .table import BUILTIN, known_ops

__all__ = ["from_onnx", "to_onnx", "load", "save", "Node", "ConversionError", "ShapeWarning", "OPAQUE",
           "supported_ops"]


def supported_ops() -> list:
    """``[(domain, op_type, first opset)]`` the built-in converters import."""
    return known_ops(BUILTIN)


plugin(FormatEntry("onnx", (".onnx",), load=load, save=save,
                   summary="ONNX models (opsets 7-21 in, 13-23 out), checked against onnxruntime"),
       opaque_op(), matmul_nbits_op(), pass_entry(onnx_composites, name="ONNXComposites"), api=">=1.0,<2")
