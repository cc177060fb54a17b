"""1-D convolution (float and quantized) and pooling through the 2-D operators, as TVM's
``conv1d`` lowers them:
the length axis becomes the width of a height-1 image::

    Conv(x, w, kernel_shape=[3])      /* x: (1, 2, 8), w: (4, 2, 3) */
    ->  reshape(nn.conv2d(reshape(%x, newshape=[1, 2, 1, 8]), reshape(%w, newshape=[4, 2, 1, 3]),
                          kernel_size=[1, 3]), newshape=[1, 4, 6])

:func:`lift_1d` wraps the built-in converters of :data:`LIFTED` (imported last by the importer).
"""
from __future__ import annotations

from .build import drop_axes, expand_axes
from .node import Node
from .table import BUILTIN

__all__ = ["lift_1d", "LIFTED"]

#: operators whose converters handle 2-D spatial data and get 1-D through :func:`lift_1d`
LIFTED = ("Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool",
          "ConvInteger", "QLinearConv")
#: the weight input of the convolutions (it gains the height axis too)
_WEIGHT = {"Conv": 1, "ConvTranspose": 1, "ConvInteger": 1, "QLinearConv": 3}
#: per-axis attributes: the height axis gets this value
_AXIS_ATTRS = {"kernel_shape": 1, "strides": 1, "dilations": 1, "output_padding": 0}


def lift_1d(fn):
    """``fn`` (a converter of 2-D spatial data) also converting 1-D spatial data."""

    def convert(node: Node):
        if node.ndim(0) != 3:
            return fn(node)
        from passhost import ir

        inputs = list(node.inputs)
        inputs[0] = ir.infer_type(expand_axes(inputs[0], node.shape(0), [2]))
        w = _WEIGHT.get(node.op_type)
        if w is not None and node.input(w) is not None and node.ndim(w) == 3:
            inputs[w] = ir.infer_type(expand_axes(inputs[w], node.shape(w), [2]))
        attrs = dict(node.attrs)
        for key, value in _AXIS_ATTRS.items():
            if key in attrs:
                attrs[key] = [value] + list(attrs[key])
        if "pads" in attrs:
            attrs["pads"] = [0, attrs["pads"][0], 0, attrs["pads"][1]]
        if "output_shape" in attrs:
            attrs["output_shape"] = [1] + list(attrs["output_shape"])[-1:]
        lifted = Node(node.op_type, node.domain, node.name, inputs, attrs, node.outputs, node.opset)
        out = fn(lifted)
        return drop_axes(out, ir.infer_type(out).checked_type.shape, [2])

    convert.__name__ = getattr(fn, "__name__", "convert")
    convert.__doc__ = fn.__doc__
    return convert


for _op in LIFTED:
    _entries = BUILTIN.get(("", _op), [])
    _entries[:] = [(since, lift_1d(fn)) for since, fn in _entries]
