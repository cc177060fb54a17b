"""Converters of neural-network operators: convolution, pooling, normalisation, Gemm,
MatMul, Softmax, LRN, Dropout, Flatten."""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from passhost import ir
from passhost.ir.pattern import is_constant, is_op, wildcard

from .build import broadcast_shapes, call, const, expand_axes, flatten_2d, reshape, static
from .composites import calls, composite, example
from .dim_values import reshape_target
from .dtypes import FLOAT_DTYPES
from .emit import EMITTERS
from .node import Node
from .table import converter


def _spatial(node, what: str) -> int:
    """The number of spatial axes: 2, or 3 (volumes: the nn.*3d operators)."""
    nd = node.ndim(0) - 2
    if nd not in (2, 3):
        raise node.error(f"{what} on {nd}-D spatial data is not supported (passhost has 1-, 2- and 3-D {what})")
    return nd


def _auto_pads(node, in_hw, kernel, strides, dilations) -> tuple:
    """pads (top, left, bottom, right) for the node's auto_pad / pads attributes."""
    auto = node.attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", b"NOTSET"):
        pads = node.attr("pads", [0] * (2 * len(in_hw)))
        return tuple(int(p) for p in pads)
    if auto == "VALID":
        return (0,) * (2 * len(in_hw))
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise node.error(f"auto_pad {auto!r} is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER")
    begin, end = [], []
    for size, k, s, d in zip(in_hw, kernel, strides, dilations):
        if type(size) is int and type(k) is int:
            out = -(-size // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        else:  # (ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, as (k - 1) * d - (size - 1) % s: an int
            # for a stride of 1, else a dimension (the size modulo the stride), which the caller pads explicitly
            if size is ir.ANY:
                raise node.error(f"auto_pad {auto} of an unknown (?) size")
            total = ir.dims.dmax(0, (k - 1) * d - (size - 1) % s)
        small, big = total // 2, total - total // 2
        begin.append(small if auto == "SAME_UPPER" else big)
        end.append(big if auto == "SAME_UPPER" else small)
    return tuple(begin + end)


@converter("Conv", 1)
def _conv(node):
    nd = _spatial(node, "Conv")
    w_shape = node.shape(1)
    kernel = tuple(k if type(k) is not int else int(k) for k in node.attr("kernel_shape", w_shape[2:]))
    strides = tuple(int(s) for s in node.attr("strides", (1,) * nd))
    dilations = tuple(int(d) for d in node.attr("dilations", (1,) * nd))
    pads = _auto_pads(node, node.shape(0)[2:], kernel, strides, dilations)
    group = int(node.attr("group", 1))
    # a weight of dynamic sizes: the operator takes them from the weight
    channels = w_shape[0] if type(w_shape[0]) is int else None
    x, pads = _padded(node, node.inputs[0], pads, 0)
    out = call("nn.conv3d" if nd == 3 else "nn.conv2d", x, node.inputs[1], strides=strides,
               padding=pads, dilation=dilations, groups=group, channels=channels,
               kernel_size=kernel if static(kernel) else None)
    if node.input(2) is not None:
        out = call("nn.bias_add", out, node.inputs[2], axis=1)
    return out


def _padded(node, x, pads: tuple, value) -> tuple:
    """``(x, pads)``, or where a pad is a dimension (SAME padding of a dynamic size with a
    stride), ``x`` padded explicitly with ``value`` (``nn.pad`` takes dimensions) and no pads."""
    if all(type(p) is int for p in pads):
        return x, pads
    nd = len(pads) // 2
    width = ((0, 0), (0, 0)) + tuple((pads[i], pads[i + nd]) for i in range(nd))
    return call("nn.pad", x, const(value, node.dtype(0)), pad_width=width), (0,) * len(pads)


def _pool(node, op: str, value, kernel, strides, dilations, pads, ceil, **attrs):
    """``op`` (a pooling operator) of the node's input with ONNX's sizes where they are
    dynamic: pads that are dimensions applied explicitly, with ``value``; the sizes
    Relay's ceil_mode gives, cut to ONNX's (see :func:`_ceil_symbolic`)."""
    crop = _ceil_sizes(node, kernel, strides, dilations, pads) if ceil and not static(node.shape(0)[2:]) else None
    x, pads = _padded(node, node.inputs[0], pads, value)
    out = call(op, x, pool_size=kernel, strides=strides, dilation=dilations, padding=pads, ceil_mode=ceil, **attrs)
    if crop:
        axes, ends = zip(*crop)
        out = call("strided_slice", out, begin=(0,) * len(axes), end=ends, strides=(1,) * len(axes), axes=axes)
    return out


def _pool_common(node):
    nd = _spatial(node, node.op_type)
    kernel = tuple(int(k) for k in node.attr("kernel_shape"))
    strides = tuple(int(s) for s in node.attr("strides", (1,) * nd))
    dilations = tuple(int(d) for d in node.attr("dilations", (1,) * nd))
    pads = _auto_pads(node, node.shape(0)[2:], kernel, strides, dilations)
    ceil = bool(node.attr("ceil_mode", 0))
    if ceil and not static(node.shape(0)[2:]):
        pass  # (Relay's ceil_mode; a size where ONNX has one window less is cut: _ceil_sizes)
    elif ceil:  # ONNX drops a last window that starts in the end padding; floor mode gives that size then
        floor_ok = True
        for i, size in enumerate(node.shape(0)[2:]):
            span = size + pads[i] + pads[i + nd] - ((kernel[i] - 1) * dilations[i] + 1)
            out = -(-span // strides[i]) + 1
            if (out - 1) * strides[i] >= size + pads[i]:
                out -= 1
            floor_ok = floor_ok and out == span // strides[i] + 1
        ceil = not floor_ok
    return kernel, strides, dilations, pads, ceil


def _ceil_sizes(node, kernel, strides, dilations, pads) -> list:
    """ceil_mode over dynamic sizes: ``[(axis, ONNX's size)]`` for the axes where Relay's
    ceil_mode may give one window more. ONNX drops a last window that starts in the end
    padding: with ``span = size + pads - window`` and the ceiling's overshoot
    ``r = (-span) % stride`` (``0 .. stride - 1``), it does when ``r >= window - pad_end``
    (``need``), never when ``need > stride - 1`` or the stride is 1. Otherwise ONNX's size is
    ``ceil(span / stride) + 1 - [r >= need]``, and ``[r >= need]`` is
    ``floordiv(r + stride - need, stride)`` (``need`` in ``1 .. stride``) or 1 (``need <= 0``)."""
    nd = len(kernel)
    crop = []
    for i, size in enumerate(node.shape(0)[2:]):
        s = strides[i]
        window = (kernel[i] - 1) * dilations[i] + 1
        need = window - pads[i + nd]
        if s == 1 or need > s - 1:
            continue
        if size is ir.ANY:
            raise node.error("ceil_mode over an unknown (?) size")
        span = size + pads[i] + pads[i + nd] - window
        dropped = 1 if need <= 0 else ir.dims.floordiv(ir.dims.floormod(-span, s) + s - need, s)
        crop.append((2 + i, (span + s - 1) // s + 1 - dropped))
    return crop


@converter("MaxPool", 1)
def _max_pool(node):
    kernel, strides, dilations, pads, ceil = _pool_common(node)
    if len(node.outputs) > 1 and node.outputs[1]:  # the Indices output: where each maximum was
        if len(kernel) != 2:
            raise node.error("the Indices output of MaxPool is supported for 2-D data")
        if not static(node.shape(0)[2:]) and (ceil or not all(type(p) is int for p in pads)):
            raise node.error("the Indices output of MaxPool over dynamic sizes with SAME padding or ceil_mode is "
                             "not supported")
        pooled = call("nn.max_pool2d_with_argmax", node.inputs[0], pool_size=kernel, strides=strides,
                      dilation=dilations, padding=pads, ceil_mode=ceil,
                      storage_order=int(node.attr("storage_order", 0)))
        return ir.TupleGetItem(pooled, 0), ir.TupleGetItem(pooled, 1)
    if int(node.attr("storage_order", 0)):
        raise node.error("storage_order=1 is not supported")
    op = "nn.max_pool3d" if len(kernel) == 3 else "nn.max_pool2d"
    if not static(node.shape(0)[2:]):
        lowest = -np.inf if node.dtype(0) in FLOAT_DTYPES else np.iinfo(node.dtype(0)).min
        return _pool(node, op, lowest, kernel, strides, dilations, pads, ceil)
    return call(op, node.inputs[0], pool_size=kernel, strides=strides, dilation=dilations, padding=pads,
                ceil_mode=ceil)


@converter("MaxUnpool", 9)
def _max_unpool(node):
    shape = node.shape(0)
    if len(shape) != 4:
        raise node.error(f"MaxUnpool of {len(shape) - 2}-D data is not supported (passhost has 2-D)")
    kernel = tuple(int(k) for k in node.attr("kernel_shape"))
    strides = tuple(int(s) for s in node.attr("strides", (1, 1)))
    pads = tuple(int(p) for p in node.attr("pads", (0, 0, 0, 0)))
    if node.input(2) is not None:
        size = tuple(int(d) for d in node.need_const(2, "output_shape").reshape(-1))
    else:
        size = tuple(shape[:2]) + tuple((shape[2 + i] - 1) * strides[i] + kernel[i] - pads[i] - pads[i + 2]
                                        for i in range(2))
        if any(d is ir.ANY for d in size):
            raise node.error(f"the unpooled size {tuple(map(str, size))} is unknown (?)")
    return call("nn.max_unpool2d", node.inputs[0], node.inputs[1], output_size=size, pool_size=kernel,
                strides=strides, padding=pads)


@converter("AveragePool", 1)
def _avg_pool(node):
    kernel, strides, dilations, pads, ceil = _pool_common(node)
    op = "nn.avg_pool3d" if len(kernel) == 3 else "nn.avg_pool2d"
    include = bool(node.attr("count_include_pad", 0))
    if not static(node.shape(0)[2:]):
        if include or all(type(p) is int for p in pads):
            return _pool(node, op, 0, kernel, strides, dilations, pads, ceil, count_include_pad=include)
        # padded explicitly, the padding must not count: the window sums over the counts of real elements
        total = _pool(node, op, 0, kernel, strides, dilations, pads, ceil, count_include_pad=True)
        ones = Node(node.op_type, node.domain, node.name, [ir.infer_type(call("ones_like", node.inputs[0]))],
                    node.attrs, node.outputs, node.opset)
        count = _pool(ones, op, 0, kernel, strides, dilations, pads, ceil, count_include_pad=True)
        return call("divide", total, count)
    return call(op, node.inputs[0], pool_size=kernel, strides=strides, dilation=dilations, padding=pads,
                ceil_mode=ceil, count_include_pad=include)


@converter("GlobalAveragePool", 1)
def _global_avg_pool(node):
    if _spatial(node, "GlobalAveragePool") == 3:
        return call("mean", node.inputs[0], axis=(2, 3, 4), keepdims=True)
    return call("nn.global_avg_pool2d", node.inputs[0])


@converter("BatchNormalization", 1)
def _batch_norm(node):
    if node.opset < 9 and not int(node.attr("spatial", 1)):
        raise node.error("spatial=0 is not supported")
    eps = float(node.attr("epsilon", 1e-5))
    if int(node.attr("training_mode", 0)) and node.opset >= 14:
        return _batch_norm_training(node, eps)
    if int(node.attr("training_mode", 0)) or len([o for o in node.outputs if o]) > 1:
        raise node.error("training mode before opset 14 (its saved statistics outputs) is not supported; export "
                         "for inference, or at opset 14 or later")
    return ir.TupleGetItem(call("nn.batch_norm", *node.inputs[:5], axis=1, epsilon=eps), 0)


def _batch_norm_training(node, eps: float) -> tuple:
    """Training mode (opset 14 on): normalised by the batch's own statistics (mean and
    population variance over every axis but the channels), and the running statistics
    moved towards them by ``1 - momentum``."""
    x, scale, bias, mean, var = node.inputs[:5]
    axes = tuple(i for i in range(node.ndim(0)) if i != 1)
    batch_mean = call("mean", x, axis=axes, keepdims=False, exclude=False)
    batch_var = ir.variance(x, axis=axes)
    y = ir.TupleGetItem(call("nn.batch_norm", x, scale, bias, batch_mean, batch_var, axis=1, epsilon=eps), 0)
    m = float(node.attr("momentum", 0.9))
    keep, move = const(m, node.dtype(0)), const(1 - m, node.dtype(0))
    running = [call("add", call("multiply", old, keep), call("multiply", new, move))
               for old, new in ((mean, batch_mean), (var, batch_var))]
    return (y, *running)


@converter("LRN", 1)
def _lrn(node):
    return call("nn.lrn", node.inputs[0], size=int(node.attr("size")), axis=1,
                bias=float(node.attr("bias", 1.0)), alpha=float(node.attr("alpha", 1e-4)),
                beta=float(node.attr("beta", 0.75)))


@converter("Dropout", 1)
def _dropout(node):
    x = node.inputs[0]
    if node.input(2) is not None and bool(node.need_const(2, "training_mode").reshape(-1)[0]):
        ratio = node.need_const(1, "the ratio").reshape(-1)[0] if node.input(1) is not None else 0.5
        if float(ratio) != 0.0:
            raise node.error("training-mode Dropout (random masks) is not supported; export the model for inference")
    if len(node.outputs) > 1 and node.outputs[1]:
        if not static(node.shape(0)):  # all true, of the input's (dynamic) shape
            return x, call("cast", call("ones_like", x), dtype="bool")
        mask = np.ones(node.shape(0), dtype="bool")
        return x, const(mask, "bool")
    return x


@converter("Flatten", 1)
def _flatten(node):
    axis = int(node.attr("axis", 1))
    nd = node.ndim(0)
    if not -nd <= axis <= nd:
        raise node.error(f"axis {axis} is out of range for a {nd}-D input")
    return flatten_2d(node.inputs[0], node.shape(0), axis + nd if axis < 0 else axis)


def _softmax_2d(node, name: str):
    """Opset < 13: the input is coerced to 2-D at ``axis`` and normalised over the second dim."""
    shape = node.shape(0)
    nd = len(shape)
    axis = int(node.attr("axis", 1))
    axis = axis + nd if axis < 0 else axis
    if axis == nd - 1 or nd <= 1:
        return call(name, node.inputs[0], axis=-1)
    if any(d is ir.ANY for d in shape):  # over the trailing axes together, without reshapes
        x = node.inputs[0]
        axes = tuple(range(axis, nd))
        shifted = call("subtract", x, call("max", x, axis=axes, keepdims=True))
        total = call("sum", call("exp", shifted), axis=axes, keepdims=True)
        if name == "nn.log_softmax":
            return call("subtract", shifted, call("log", total))
        return call("divide", call("exp", shifted), total)
    flat = flatten_2d(node.inputs[0], shape, axis)
    return reshape(call(name, flat, axis=-1), shape)


@converter("Softmax", 1)
def _softmax_old(node):
    return _softmax_2d(node, "nn.softmax")


@converter("Softmax", 13)
def _softmax(node):
    return call("nn.softmax", node.inputs[0], axis=int(node.attr("axis", -1)))


@converter("Gemm", 1)
def _gemm(node):
    a, b = node.inputs[0], node.inputs[1]
    if node.ndim(0) != 2:  # Caffe2-era models feed 4-D activations; Gemm reads them as 2-D
        a = flatten_2d(a, node.shape(0), 1)
    if int(node.attr("transA", 0)):
        a = call("transpose", a, axes=(1, 0))
    if not int(node.attr("transB", 0)):
        b = call("transpose", b, axes=(1, 0))
    dtype = node.dtype(0)
    out = call("nn.dense", a, b)
    alpha = float(node.attr("alpha", 1.0))
    beta = float(node.attr("beta", 1.0))
    if alpha != 1.0:
        out = call("multiply", out, const(alpha, dtype))
    c = node.input(2)
    if c is not None and beta != 0.0:
        if beta != 1.0:
            c = call("multiply", c, const(beta, dtype))
        if node.ndim(2) == 1:
            out = call("nn.bias_add", out, c, axis=1) if node.shape(2)[0] != 1 else call("add", out, c)
        else:
            out = call("add", out, c)
    return out


@converter("MatMul", 1)
def _matmul(node):
    a, b = node.inputs[0], node.inputs[1]
    sa, sb = node.shape(0), node.shape(1)
    if len(sa) == 1 or len(sb) == 1:  # numpy's matmul: a 1-D operand gains an axis that the result drops
        a2 = expand_axes(a, sa, [0]) if len(sa) == 1 else a
        b2 = expand_axes(b, sb, [1]) if len(sb) == 1 else b
        inner = _matmul_nd(node, a2, b2, _shape_of(a2), _shape_of(b2))
        shape = _shape_of(inner)
        out_shape = list(shape)
        drop = []
        if len(sb) == 1:
            out_shape.pop(-1)
            drop.append(len(shape) - 1)
        if len(sa) == 1:
            out_shape.pop(-1 if len(sb) == 1 else -2)
            drop.append(len(shape) - 2)
        if any(d is ir.ANY for d in out_shape):
            return call("squeeze", inner, axis=tuple(sorted(drop)))
        return reshape(inner, out_shape)
    return _matmul_nd(node, a, b, sa, sb)


def _shape_of(x) -> tuple:
    return tuple(ir.infer_type(x).checked_type.shape)


def _matmul_nd(node, a, b, sa, sb):
    if len(sa) == 2 and len(sb) == 2:
        return call("nn.dense", a, call("transpose", b, axes=(1, 0)))
    if len(sb) == 2 and len(sa) > 2:  # [..., k] x [k, n]: nn.dense reads N-D data as TVM's does
        return call("nn.dense", a, call("transpose", b, axes=(1, 0)))
    if len(sa) >= 2 and len(sb) >= 2 and _has_batch_matmul():
        return _batch_matmul(node, a, b, sa, sb)
    raise node.error(f"MatMul of shapes {sa} and {sb} is not supported")


def _has_batch_matmul() -> bool:
    from passhost import ir

    try:
        ir.Op.get("nn.batch_matmul")
    except Exception:
        return False
    return True


def _batch_matmul(node, a, b, sa, sb):
    if not static(sa) or not static(sb):
        return _batch_matmul_symbolic(node, a, b, sa, sb)
    batch = np.broadcast_shapes(tuple(sa[:-2]), tuple(sb[:-2]))
    n = int(np.prod(batch, dtype=np.int64)) if batch else 1
    if tuple(sa[:-2]) != batch:
        a = call("broadcast_to", a, shape=tuple(batch) + tuple(sa[-2:]))
    if tuple(sb[:-2]) != batch:
        b = call("broadcast_to", b, shape=tuple(batch) + tuple(sb[-2:]))
    a3 = reshape(a, (n,) + tuple(sa[-2:]))
    b3 = reshape(b, (n,) + tuple(sb[-2:]))
    out = call("nn.batch_matmul", a3, b3, transpose_a=False, transpose_b=False)
    return reshape(out, tuple(batch) + (sa[-2], sb[-1]))


def _batch_matmul_symbolic(node, a, b, sa, sb):
    """The batched product over dynamic sizes. Where the batch is known (size variables, or
    one operand's batch is all ones), as the static path: broadcast, flatten to 3-D, multiply,
    unflatten. Where it is ``?`` (two batches of independent size variables, either of which
    may be 1), numpy's matmul written as a broadcast product summed over the inner axis,
    which needs no shape: ``sum(a[..., :, :, None] * b[..., None, :, :], axis=-2)``."""
    batch = broadcast_shapes(tuple(sa[:-2]), tuple(sb[:-2]))
    if batch is None:
        raise node.error(f"the batch axes of {tuple(map(str, sa))} and {tuple(map(str, sb))} do not broadcast")
    if len(sa) == 3 and len(sb) == 3:  # nn.batch_matmul broadcasts a batch of 1 itself
        return call("nn.batch_matmul", a, b, transpose_a=False, transpose_b=False)
    if any(d is ir.ANY for d in batch) or any(d is ir.ANY for d in tuple(sa[-2:]) + tuple(sb[-2:])):
        prod = call("multiply", call("expand_dims", a, axis=-1), call("expand_dims", b, axis=-3))
        return call("sum", prod, axis=(-2,), keepdims=False)
    n = math.prod(batch) if batch else 1
    if tuple(sa[:-2]) != batch:
        a = call("broadcast_to", a, shape=tuple(batch) + tuple(sa[-2:]))
    if tuple(sb[:-2]) != batch:
        b = call("broadcast_to", b, shape=tuple(batch) + tuple(sb[-2:]))
    a3 = reshape(a, (n,) + tuple(sa[-2:]))
    b3 = reshape(b, (n,) + tuple(sb[-2:]))
    out = call("nn.batch_matmul", a3, b3, transpose_a=False, transpose_b=False)
    return reshape(out, tuple(batch) + (sa[-2], sb[-1]))


# -- the way back: a bias or a scale and shift joined into one node (see :mod:`.composites`) -----
_x, _y, _w, _b = wildcard(), wildcard(), is_constant(), is_constant()
_weighted = (is_op("nn.conv2d") | is_op("nn.conv3d") | is_op("nn.dense") | is_op("nn.conv2d_transpose")
             | is_op("nn.conv3d_transpose"))(_x, _w)


def _biased(root) -> Optional[tuple]:
    """``(op, bias)`` of a matched ``nn.bias_add``/``add`` of a convolution's (or a 2-D float
    dense's) result and a constant along its channel (output) axis, of its weight's dtype."""
    op = next(a for a in root.args if type(a) is ir.Call)
    b, w = next(a for a in root.args if type(a) is ir.Constant).data, op.args[1].data
    x, n = op.args[0].checked_type, w.shape[0]
    if op.op.name.endswith("_transpose"):  # (a transposed kernel is IOHW: its outputs are axis 1, per group)
        n = w.shape[1] * int(op.attrs.groups)
    if b.dtype != w.dtype:
        return None
    if op.op.name == "nn.dense":
        axis, ok = 1, len(x.shape) == 2 and x.dtype.startswith("float") and b.shape in ((n,), (1, n))
    else:
        axis, ok = 1, b.shape in ((n,) + (1,) * (w.ndim - 2), (1, n) + (1,) * (w.ndim - 2))
    if calls(root, "nn.bias_add"):
        ok = b.shape == (n,) and root.attrs.axis % len(root.checked_type.shape) == axis
    return (op, b) if ok else None


def _biased_examples(rng) -> list:
    def r(*shape):
        return ir.const(rng.randn(*shape).astype("float32"))

    conv = lambda x: ir.nn.conv2d(x, r(4, 2, 3, 3), padding=(1, 1))  # noqa: E731
    up = lambda x: ir.nn.conv2d_transpose(x, r(2, 3, 2, 2), strides=(2, 2), channels=3, kernel_size=(2, 2))  # noqa: E731
    return [example(rng, lambda x: ir.nn.bias_add(conv(x), r(4)), (1, 2, 5, 5)),
            example(rng, lambda x: ir.add(conv(x), r(4, 1, 1)), (1, 2, 5, 5)),
            example(rng, lambda x: ir.nn.bias_add(up(x), r(3)), (1, 2, 5, 5)),
            example(rng, lambda x: ir.nn.bias_add(ir.nn.dense(x, r(3, 5)), r(3)), (2, 5))]


@composite("onnx.Biased", (is_op("nn.bias_add") | is_op("add"))(_weighted, _b),
           check=_biased, examples=_biased_examples)
def _biased_back(em, m, args):
    """``nn.bias_add(nn.conv2d(x, w), b)`` -> ``Conv(x, w, b)``; ``ConvTranspose`` and a constant
    ``add`` along the channels alike, and ``Gemm(x, w, b)`` of a 2-D ``nn.dense``"""
    op, b = m.info
    c = next(a for a in m.root.args if type(a) is ir.Constant)
    bias = em.constant(c) if b.ndim == 1 else em.const(b.reshape(-1), source=em.constant(c))
    return EMITTERS[op.op.name](em, op, [args[0], em.constant(op.args[1]), bias])


def _per_channel(arr: np.ndarray) -> Optional[int]:
    """The channel count of a floating-point ``(C, 1, 1)`` or ``(1, C, 1, 1)`` constant."""
    if arr.dtype.kind != "f" or arr.ndim not in (3, 4) or arr.shape[-2:] != (1, 1) or arr.ndim == 4 and arr.shape[0] != 1:
        return None
    return arr.shape[-3]


def _scale_shift(root) -> Optional[tuple]:
    """``(s, b)`` of a matched ``add(multiply(x, s), b)``, ``x`` 4-D, ``s`` and ``b`` per channel."""
    mul = next(a for a in root.args if type(a) is ir.Call)
    s = next(a for a in mul.args if type(a) is ir.Constant).data
    b = next(a for a in root.args if type(a) is ir.Constant).data
    x = next((a for a in mul.args if type(a) is not ir.Constant), mul.args[0]).checked_type.shape
    c = _per_channel(s)
    return (s, b) if len(x) == 4 and c is not None and c == _per_channel(b) == x[1] and s.dtype == b.dtype else None


def _scale_shift_example(rng) -> list:
    s, b = (ir.const(rng.randn(3, 1, 1).astype("float32")) for _ in "sb")
    return [example(rng, lambda x: ir.add(ir.multiply(x, s), b), (2, 3, 4, 4))]


@composite("onnx.BatchNormalization", is_op("add")(is_op("multiply")(_x, is_constant()), _b),
           check=_scale_shift, examples=_scale_shift_example)
def _scale_shift_back(em, m, args):
    """``add(multiply(x, s), b)``, ``x`` 4-D, ``s`` and ``b`` ``(C, 1, 1)`` constants (what
    SimplifyInference leaves of a batch norm no convolution took) -> ``BatchNormalization(x, s, b,
    mean=0, var=1, epsilon=0)``: exactly ``s * x + b``"""
    s, b = m.info
    c, dt = s.size, s.dtype
    zero, one = (em.const(f(c, dt), key=(f, c, dt.str)) for f in (np.zeros, np.ones))  # (one of each per size)
    stats = [em.const(s.reshape(-1)), em.const(b.reshape(-1)), zero, one]
    return em.one("BatchNormalization", [args[0], *stats], epsilon=0.0)


def _transposed_operand(root) -> bool:
    """A matched ``nn.dense(x, transpose(y))`` whose ``y`` is 2-D and swapped (``axes`` [1, 0])."""
    t = root.args[1]
    axes = t.attrs.axes
    return len(t.args[0].checked_type.shape) == 2 and (axes is None or [int(a) for a in axes] == [1, 0])


def _transposed_example(rng) -> list:
    y = ir.var("y", shape=(5, 3))
    return [ir.Function([x, y], ir.nn.dense(x, ir.transpose(y, axes=(1, 0)))) for x in [ir.var("x", shape=(4, 5))]]


@composite("onnx.MatMul/transposed", is_op("nn.dense")(_x, is_op("transpose")(_y)), check=_transposed_operand,
           examples=_transposed_example)
def _transposed_back(em, m, args):
    """``nn.dense(a, transpose(b, axes=[1, 0]))`` (how ``MatMul`` of a 2-D ``b`` that is not a
    constant imports: an input, or a local function's parameter) -> ``MatMul(a, b)``, not
    ``Transpose`` + ``Gemm(transB=1)``"""
    return em.one("MatMul", [args[m.leaves.index(m.root.args[0])], args[m.leaves.index(m.root.args[1].args[0])]])


def _batch(root) -> Optional[tuple]:
    """The batch axes of a matched ``reshape(nn.batch_matmul(reshape(a), reshape(b)))`` whose
    reshapes merge the leading axes into one and split them back: ``MatMul`` batches over
    leading axes itself (``?`` sizes are not known to be equal). One operand may be a 3-D
    value of no reshape (it gets one, to the batched shape: one node less than the two
    reshapes around a 3-D product)."""
    mm = root.args[0]
    if not any(calls(a, "reshape") for a in mm.args):
        return None
    out, f0, f1 = (tuple(e.checked_type.shape) for e in (root, *mm.args))
    if mm.attrs.transpose_a or mm.attrs.transpose_b or len(out) < 3 or any(ir.dims.has_any(s) for s in (out, f0, f1)):
        return None
    batch = out[:-2]
    same = f0[0] == f1[0] == math.prod(batch) and f0[2] == f1[1] and out[-2:] == (f0[1], f1[2])
    return batch if same else None


def _batch_example(rng) -> list:
    b = ir.var("b", shape=(2, 3, 5, 4))
    return [ir.Function([x, b], ir.reshape(ir.nn.batch_matmul(ir.reshape(x, (6, 4, 5)), ir.reshape(b, (6, 5, 4)),
                                                              transpose_b=False), (2, 3, 4, 4)))
            for x in [ir.var("x", shape=(2, 3, 4, 5))]]


def _operand():
    return is_op("reshape")(wildcard()) | wildcard()


@composite("onnx.MatMul/batched", is_op("reshape")(is_op("nn.batch_matmul")(_operand(), _operand())),
           check=_batch, examples=_batch_example)
def _batched_back(em, m, args):
    """``reshape(nn.batch_matmul(reshape(a[1,4,64,64], (4, 64, 64)), reshape(b, (4, 64, 64))), (1, 4, 64, 64))``
    -> ``MatMul(a, b)``; an operand of another shape gets a reshape, to the batched shape"""
    batch, operands = m.info, []

    for r in m.root.args[0].args:
        x = r.args[0] if calls(r, "reshape") else r
        want = batch + tuple(r.checked_type.shape)[1:]
        value, have = args[m.leaves.index(x)], tuple(x.checked_type.shape)
        target = reshape_target(have, want)  # (ONNX's 0 and -1 where exact)
        operands.append(value if have == want else em.one("Reshape", [value, em.ints(want if target is None else target)]))
    return em.one("MatMul", operands)
