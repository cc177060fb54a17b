"""Converters of ConvTranspose, GlobalMaxPool, Resize, Upsample, InstanceNormalization,
LayerNormalization and LogSoftmax::

    Resize(x, scales=[1, 1, 2, 2], mode="nearest")     /* x: (1, 3, 4, 4) */
    ->  image.resize2d(%x, size=[8, 8], method="nearest_neighbor",
                       coordinate_transformation_mode="half_pixel", rounding_method="round_prefer_floor")
"""
from __future__ import annotations

from fractions import Fraction
from typing import Optional

import numpy as np

from passhost import ir
from passhost.ir.pattern import is_constant, is_op, wildcard

from .build import call, const, flatten_2d, reshape, static
from .composites import composite, example
from .table import converter


@converter("ConvTranspose", 1)
def _conv_transpose(node):
    nd = node.ndim(0) - 2
    if nd not in (2, 3):
        raise node.error(f"ConvTranspose on {nd}-D spatial data is not supported (passhost has 1-, 2- and 3-D)")
    w_shape = node.shape(1)
    group = int(node.attr("group", 1))
    kernel = tuple(k if type(k) is ir.Dim else int(k) for k in node.attr("kernel_shape", w_shape[2:]))
    strides = tuple(int(s) for s in node.attr("strides", (1,) * nd))
    dilations = tuple(int(d) for d in node.attr("dilations", (1,) * nd))
    out_pad = [int(p) for p in node.attr("output_padding", (0,) * nd)]
    in_sizes = node.shape(0)[2:]
    auto = node.attr("auto_pad", "NOTSET")
    out_shape = node.attr("output_shape")
    if out_shape is None and auto in ("SAME_UPPER", "SAME_LOWER"):
        out_shape = [i * s for i, s in zip(in_sizes, strides)]
    if out_shape is not None:
        out_shape = [d if type(d) is ir.Dim or d is ir.ANY else int(d) for d in out_shape][-nd:]
        begin, end = [], []
        for i in range(nd):
            total = strides[i] * (in_sizes[i] - 1) + out_pad[i] + (kernel[i] - 1) * dilations[i] + 1 - out_shape[i]
            if type(total) is not int:  # (SAME's output, in x stride, cancels the input size: an int)
                raise node.error(f"the padding that gives output_shape {list(map(str, out_shape))} depends on the "
                                 f"model's dynamic sizes ({total}); passhost's padding is static")
            if total < 0:  # a bigger output than the kernel covers: the difference is output padding
                out_pad[i] -= total
                total = 0
            small, big = total // 2, total - total // 2
            begin.append(small if auto == "SAME_UPPER" else big)
            end.append(big if auto == "SAME_UPPER" else small)
        pads = tuple(begin + end)
    elif auto == "VALID":
        pads = (0,) * (2 * nd)
    else:
        pads = tuple(int(p) for p in node.attr("pads", (0,) * (2 * nd)))
    # (a weight of dynamic sizes: the operator takes them from the weight)
    out = call(f"nn.conv{nd}d_transpose", node.inputs[0], node.inputs[1],
               channels=w_shape[1] * group if type(w_shape[1]) is int else None,
               kernel_size=kernel if static(kernel) else None, strides=strides, output_padding=tuple(out_pad), padding=pads, dilation=dilations,
               groups=group)
    if node.input(2) is not None:
        out = call("nn.bias_add", out, node.inputs[2], axis=1)
    return out


@converter("GlobalMaxPool", 1)
def _global_max_pool(node):
    if node.ndim(0) != 4:
        return call("max", node.inputs[0], axis=tuple(range(2, node.ndim(0))), keepdims=True)
    return call("nn.global_max_pool2d", node.inputs[0])


_COORD = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "tf_half_pixel_for_nn",
          "tf_crop_and_resize", "half_pixel_symmetric")


def _resize(node, scales, sizes, roi, mode, ctm, nearest, antialias=0):
    shape = node.shape(0)
    if len(shape) != 4:
        raise node.error(f"resizing {len(shape)}-D data is not supported (passhost resizes NCHW images)")
    ratios = None
    if sizes is None:
        # ONNX: floor(length x scale), times the roi's extent for tf_crop_and_resize; a
        # fractional length keeps its scale for the coordinate mapping
        extent = [1.0] * 4
        if ctm == "tf_crop_and_resize" and roi is not None:
            extent = [float(roi[i + 4]) - float(roi[i]) for i in range(4)]
        sizes, keep_scales = [], False
        for i, (d, e, sc) in enumerate(zip(shape, extent, scales)):
            if type(d) is int:
                n = d * e * float(sc)
                sizes.append(int(np.floor(n)))
                keep_scales |= i >= 2 and n != int(n)
            else:  # a dynamic length (whether it is whole depends on it: ONNX maps with the scale)
                sizes.append(_scaled(node, d, e * float(sc)))
                keep_scales |= i >= 2
        if keep_scales:
            ratios = (float(scales[2]), float(scales[3]))
    sizes = [s if type(s) is ir.Dim or s is ir.ANY else int(s) for s in sizes]
    if any(s is ir.ANY for s in sizes[2:]):
        raise node.error(f"the output size {list(map(str, sizes))} is unknown (?) at import")
    if tuple(sizes[:2]) != tuple(shape[:2]):
        raise node.error("resizing the batch or channel axis is not supported")
    if ctm not in _COORD:
        raise node.error(f"coordinate_transformation_mode {ctm!r} is not supported")
    method = {"nearest": "nearest_neighbor", "linear": "linear", "cubic": "cubic"}.get(mode)
    if method is None:
        raise node.error(f"mode {mode!r} is not one of nearest, linear, cubic")
    box = None
    if ctm == "tf_crop_and_resize":
        r = [float(v) for v in roi]
        box = (r[2], r[3], r[6], r[7])
    return call("image.resize2d", node.inputs[0], size=tuple(sizes[2:]), roi=box, method=method,
                coordinate_transformation_mode=ctm, rounding_method=nearest if method == "nearest_neighbor" else "",
                cubic_alpha=float(node.attr("cubic_coeff_a", -0.75)), cubic_exclude=int(node.attr("exclude_outside", 0)),
                extrapolation_value=float(node.attr("extrapolation_value", 0.0)), scales=ratios,
                antialias=int(antialias) if method != "nearest_neighbor" else 0)


def _scaled(node, d, scale: float):
    """``floor(d x scale)`` of a symbolic length: exact (the float's own fraction p / q gives
    ``floordiv(p * d, q)``), as ONNX's floor of the product."""
    if d is ir.ANY:
        return ir.ANY
    f = Fraction(scale)
    if f < 0:
        raise node.error(f"a negative scale {scale}")
    return (d * f.numerator) // f.denominator


@converter("Upsample", 7)
def _upsample(node):
    scales = node.attr("scales") if node.opset < 9 else node.need_const(1, "the scales").reshape(-1)
    mode = node.attr("mode", "nearest")
    return _resize(node, scales, None, None, mode, "asymmetric", "floor")


@converter("Resize", 10)
def _resize_10(node):
    return _resize(node, node.need_const(1, "the scales").reshape(-1), None, None, node.attr("mode", "nearest"),
                   "asymmetric", "floor")


@converter("Resize", 11)
def _resize_11(node):
    scales = node.const(2) if node.input(2) is not None else None
    scales = None if scales is None or scales.size == 0 else scales.reshape(-1)
    sizes = node.dims(3, "the sizes") if node.input(3) is not None and node.shape(3) != (0,) else None
    if sizes is None and scales is None:
        if node.input(2) is not None and node.shape(2) != (0,):
            node.need_const(2, "the scales")
        raise node.error("the scales (input 2) or sizes (input 3) must be known at import time")
    roi = node.const(1) if node.input(1) is not None and node.shape(1) != (0,) else None
    if roi is None and node.input(1) is not None and node.attr("coordinate_transformation_mode") == \
            "tf_crop_and_resize" and node.shape(1) != (0,):
        node.need_const(1, "the roi")
    shape = node.shape(0)
    nd = len(shape)
    axes = node.attr("axes")
    if axes is not None:  # opset 18: scales, sizes and roi name only these axes
        axes = [int(a) + nd if int(a) < 0 else int(a) for a in axes]
        full_scales, full_sizes = [1.0] * nd, list(shape)
        full_roi = [0.0] * nd + [1.0] * nd
        for i, a in enumerate(axes):
            if scales is not None:
                full_scales[a] = float(scales[i])
            if sizes is not None:
                full_sizes[a] = sizes[i]
            if roi is not None:
                full_roi[a], full_roi[a + nd] = float(roi[i]), float(roi[i + len(axes)])
        scales = None if scales is None else full_scales
        sizes = None if sizes is None else full_sizes
        roi = None if roi is None else full_roi
    policy = node.attr("keep_aspect_ratio_policy", "stretch")
    if sizes is not None and policy != "stretch":
        resized = [i for i in range(nd) if axes is None or i in axes]
        if not static([sizes[i] for i in resized] + [shape[i] for i in resized]):
            raise node.error(f"keep_aspect_ratio_policy {policy!r} over dynamic sizes: which ratio is smaller "
                             "depends on the sizes")
        ratios = [sizes[i] / shape[i] for i in resized]
        scale = min(ratios) if policy == "not_larger" else max(ratios)
        sizes = [int(np.round(scale * shape[i])) if i in resized else shape[i] for i in range(nd)]
    return _resize(node, scales, sizes, roi, node.attr("mode", "nearest"),
                   node.attr("coordinate_transformation_mode", "half_pixel"),
                   node.attr("nearest_mode", "round_prefer_floor"), node.attr("antialias", 0))


@converter("InstanceNormalization", 6)
def _instance_norm(node):
    return call("nn.instance_norm", *node.inputs[:3], axis=1, epsilon=float(node.attr("epsilon", 1e-5)))


@converter("LayerNormalization", 1)
def _layer_norm(node):
    """(ONNX defines it from opset 17; onnxruntime's transformer optimizer writes it into
    models of any opset, in the default domain, with the same meaning.)"""
    shape = node.shape(0)
    axis = int(node.attr("axis", -1))
    axis = axis + len(shape) if axis < 0 else axis
    eps = float(node.attr("epsilon", 1e-5))
    x, scale = node.inputs[0], node.inputs[1]
    bias = node.input(2)
    inner = tuple(shape[axis:])
    if bias is None:
        bias = const(np.zeros(inner), node.dtype(0)) if static(inner) else const(0, node.dtype(0))
    if len([o for o in node.outputs if o]) > 1:
        return _layer_norm_stats(node, x, scale, bias, tuple(range(axis, len(shape))), eps)
    if len(inner) == 1 and node.shape(1) == inner and (node.input(2) is None or node.shape(2) == inner):
        return call("nn.layer_norm", x, scale, bias, axis=-1, epsilon=eps)
    if not static(inner):  # (over dynamic sizes: the statistics of the normalised axes, decomposed)
        return _layer_norm_stats(node, x, scale, bias, tuple(range(axis, len(shape))), eps)[0]
    n = int(np.prod(inner, dtype=np.int64))
    flat = reshape(x, tuple(shape[:axis]) + (n,))
    scale = reshape(call("broadcast_to", scale, shape=inner), (n,))
    bias = reshape(call("broadcast_to", bias, shape=inner), (n,))
    return reshape(call("nn.layer_norm", flat, scale, bias, axis=-1, epsilon=eps), shape)


def _layer_norm_stats(node, x, scale, bias, axes, eps):
    """LayerNormalization with its Mean and InvStdDev outputs, decomposed."""
    mean = call("mean", x, axis=axes, keepdims=True)
    centered = call("subtract", x, mean)
    var = call("mean", call("multiply", centered, centered), axis=axes, keepdims=True)
    inv = call("divide", const(1, node.dtype(0)), call("sqrt", call("add", var, const(eps, node.dtype(0)))))
    y = call("add", call("multiply", call("multiply", centered, inv), scale), bias)
    return y, mean, inv


@converter("LogSoftmax", 1)
def _log_softmax_old(node):
    shape = node.shape(0)
    nd = len(shape)
    axis = int(node.attr("axis", 1))
    axis = axis + nd if axis < 0 else axis
    if axis == nd - 1 or nd <= 1:
        return call("nn.log_softmax", node.inputs[0], axis=-1)
    return reshape(call("nn.log_softmax", flatten_2d(node.inputs[0], shape, axis), axis=-1), shape)


@converter("LogSoftmax", 13)
def _log_softmax_13(node):
    return call("nn.log_softmax", node.inputs[0], axis=int(node.attr("axis", -1)))


_GRID_METHODS = {"linear": "bilinear", "bilinear": "bilinear", "nearest": "nearest", "cubic": "bicubic",
                 "bicubic": "bicubic"}


@converter("GridSample", 16)
def _grid_sample(node):
    """``image.grid_sample`` with TVM's grid layout: ONNX's ``(N, *out, nd)`` grid is
    transposed to ``(N, nd, *out)``."""
    nd = node.ndim(0) - 2
    if nd not in (2, 3):
        raise node.error(f"GridSample on {nd}-D spatial data is not supported (2- and 3-D only)")
    mode = node.attr("mode", "linear" if node.opset >= 20 else "bilinear")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    pad = node.attr("padding_mode", "zeros")
    pad = pad.decode() if isinstance(pad, bytes) else str(pad)
    if mode not in _GRID_METHODS:
        raise node.error(f"mode {mode!r} is not supported")
    grid = call("transpose", node.inputs[1], axes=(0, nd + 1) + tuple(range(1, nd + 1)))
    return call("image.grid_sample", node.inputs[0], grid, method=_GRID_METHODS[mode],
                layout="NCHW" if nd == 2 else "NCDHW", padding_mode=pad,
                align_corners=bool(int(node.attr("align_corners", 0))))


@converter("DeformConv", 19)
def _deform_conv(node):
    """``nn.deformable_conv2d`` (with a mask: ``nn.modulated_deformable_conv2d``), then the bias."""
    if node.ndim(0) != 4:
        raise node.error(f"DeformConv on {node.ndim(0) - 2}-D spatial data is not supported (passhost has 2-D)")
    w_shape = node.shape(1)
    kernel = tuple(k if type(k) is not int else int(k) for k in node.attr("kernel_shape", w_shape[2:]))
    attrs = dict(strides=tuple(int(s) for s in node.attr("strides", (1, 1))),
                 padding=tuple(int(p) for p in node.attr("pads", (0, 0, 0, 0))),
                 dilation=tuple(int(d) for d in node.attr("dilations", (1, 1))),
                 deformable_groups=int(node.attr("offset_group", 1)), groups=int(node.attr("group", 1)),
                 channels=w_shape[0] if type(w_shape[0]) is int else None,
                 kernel_size=kernel if static(kernel) else None)
    x, w, offset = node.inputs[0], node.inputs[1], node.inputs[2]
    mask = node.input(4)
    out = (call("nn.modulated_deformable_conv2d", x, offset, w, mask, **attrs) if mask is not None
           else call("nn.deformable_conv2d", x, offset, w, **attrs))
    if node.input(3) is not None:
        out = call("nn.bias_add", out, node.inputs[3], axis=1)
    return out


#: the largest one-hot weight Col2Im builds (elements): a model's declared shapes must not
#: make the importer allocate gigabytes
_MAX_FOLD_WEIGHTS = 1 << 24


def _col2im_dynamic(node, image, block, dil, pads, strides):
    """Col2Im of dynamic sizes: each image channel is a batch entry of one transposed
    convolution through the ``K x 1 x block`` one-hot weight, ``(n, c*K, L) -> (n*c, K, *grid)
    -> (n*c, 1, *image) -> (n, c, *image)``."""
    nd = len(image)
    n, ck, length = node.shape(0)
    k = int(np.prod(block))
    grid = [(image[i] + pads[i] + pads[i + nd] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(nd)]
    if min(grid) < 1 or ir.dims.provably_unequal(length, int(np.prod(grid))) or \
            (ck is not ir.ANY and ir.dims.provably_unequal(ck % k, 0)):
        raise node.error(f"an input of shape {[str(d) for d in (n, ck, length)]} does not hold {k}-element blocks "
                         f"of the {'x'.join(map(str, grid))} grid that image_shape {image} gives")
    c = ck // k if ck is not ir.ANY else ir.ANY
    weight = np.zeros((k, 1, *block), dtype=node.dtype(0))
    for i, pos in enumerate(np.ndindex(*block)):
        weight[(i, 0) + pos] = 1
    made = [(grid[i] - 1) * strides[i] + (block[i] - 1) * dil[i] + 1 - pads[i] - pads[i + nd] for i in range(nd)]
    if n is ir.ANY and c is ir.ANY:
        raise node.error("the batch and the channels are both unknown (?)")
    x = reshape(node.inputs[0], (n * c, k, *grid))  # (a ? in n * c: -1)
    out = call(f"nn.conv{nd}d_transpose", x, ir.Constant(weight), channels=1, kernel_size=tuple(block),
               strides=tuple(strides), padding=tuple(pads), dilation=tuple(dil), groups=1,
               output_padding=tuple(i - m for i, m in zip(image, made)))
    return reshape(out, (n, c, *image))


@converter("Col2Im", 18)
def _col2im(node):
    """Col2Im (PyTorch's ``fold``) is a grouped transposed convolution: block ``k`` of channel
    ``c`` (input channel ``c * K + k``) adds into its image position through a one-hot
    ``kh x kw`` weight, one group per image channel; 2- and 3-D images."""
    image = [int(d) for d in node.need_const(1, "image_shape").reshape(-1)]
    block = [int(d) for d in node.need_const(2, "block_shape").reshape(-1)]
    nd = len(image)
    if nd not in (2, 3) or len(block) != nd:
        raise node.error(f"Col2Im of {nd}-D images is not supported (passhost has 2- and 3-D)")
    dil = [int(d) for d in node.attr("dilations", [1] * nd)]
    pads = [int(p) for p in node.attr("pads", [0] * (2 * nd))]
    strides = [int(s) for s in node.attr("strides", [1] * nd)]
    n, ck, length = node.shape(0)
    k = int(np.prod(block))
    if not static((n, ck, length)):
        return _col2im_dynamic(node, image, block, dil, pads, strides)
    grid = [(image[i] + pads[i] + pads[i + nd] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(nd)]
    if ck % k or int(np.prod(grid)) != length or min(grid) < 1:
        raise node.error(f"an input of shape {[n, ck, length]} does not hold {k}-element blocks of the "
                         f"{'x'.join(map(str, grid))} grid that image_shape {image} gives")
    c = ck // k
    if c * k * k > _MAX_FOLD_WEIGHTS:  # (a one-hot weight of c x k x k elements)
        raise node.error(f"blocks of {k} elements over {c} channels are too large for passhost's Col2Im "
                         f"(a {c} x {k} x {k} weight)")
    weight = np.zeros((c, k, 1, *block), dtype=node.dtype(0))
    for i, pos in enumerate(np.ndindex(*block)):
        weight[(slice(None), i, 0) + pos] = 1
    made = [(grid[i] - 1) * strides[i] + (block[i] - 1) * dil[i] + 1 - pads[i] - pads[i + nd] for i in range(nd)]
    return call(f"nn.conv{nd}d_transpose", reshape(node.inputs[0], (n, ck, *grid)),
                ir.Constant(weight.reshape(ck, 1, *block)), channels=c, kernel_size=tuple(block),
                strides=tuple(strides), padding=tuple(pads), dilation=tuple(dil), groups=c,
                output_padding=tuple(i - m for i, m in zip(image, made)))


# -- the way back: the composite of a layer norm over several axes (see :mod:`.composites`) ------
_wide = is_op("reshape")(is_op("nn.layer_norm")(is_op("reshape")(wildcard()), is_constant(), is_constant()))


def _wide_axis(root) -> Optional[int]:
    """The first axis a matched ``reshape(nn.layer_norm(reshape(x), g, b))`` normalises ``x``
    over, when the reshapes flatten the trailing axes of ``x`` and restore them."""
    ln = root.args[0]
    shape, mid = tuple(ln.args[0].args[0].checked_type.shape), tuple(ln.args[0].checked_type.shape)
    a, axis = ln.attrs, len(mid) - 1
    inner = shape[axis:]
    if (not (a.center and a.scale) or int(a.axis) % len(mid) != axis or tuple(root.checked_type.shape) != shape
            or len(shape) <= axis or shape[:axis] != mid[:axis] or not static(inner)):
        return None
    n = int(np.prod(inner, dtype=np.int64))
    return axis if n == mid[-1] and ln.args[1].data.size == n and ln.args[2].data.size == n else None


def _wide_example(rng) -> list:
    a, b, c = (int(d) for d in rng.randint(2, 5, size=3))
    g, s = (ir.const(rng.randn(b * c).astype("float32")) for _ in "gs")
    return [example(rng, lambda x: ir.reshape(ir.nn.layer_norm(ir.reshape(x, (a, b * c)), g, s), (a, b, c)), (a, b, c))]


@composite("onnx.LayerNormalization/wide", _wide, since=17, check=lambda root: _wide_axis(root) is not None,
           examples=_wide_example)
def _wide_layer_norm_back(em, m, args):
    """``reshape(nn.layer_norm(reshape(x[2,4,8], (2, 32)), g[32], b[32]), (2, 4, 8))``
    -> ``LayerNormalization(x, g[4,8], b[4,8], axis=1)``"""
    ln, axis = m.root.args[0], _wide_axis(m.root)
    inner = tuple(m.leaves[0].checked_type.shape)[axis:]
    gamma, beta = (em.const(c.data.reshape(inner)) for c in ln.args[1:])
    return em.one("LayerNormalization", [args[0], gamma, beta], axis=axis, epsilon=float(ln.attrs.epsilon))


# -- the way back: a layer norm whose normalised size is symbolic ---------------------------------
# LayerNormalization with a one-element scale (PyTorch's GroupNorm: a reshape to (N, G, -1), a
# layer norm over the last axis, the per-channel affine after) imports as its arithmetic, since
# nn.layer_norm needs gamma of the axis' size; FuseRMSNorm then takes its centred tail
_lx = wildcard()
_centred_rms = is_op("nn.rms_norm")(is_op("subtract")(_lx, is_op("mean")(_lx)), is_constant())


def _centred_axis(root) -> Optional[int]:
    """The first normalised axis of a matched ``nn.rms_norm(subtract(x, mean(x)), g)`` when
    the mean is over the same trailing axes, kept, and ``g`` is one float element or as
    many as the (static) normalised size; else ``None``."""
    centred = root.args[0]
    mean = centred.args[1]
    nd = len(root.checked_type.shape)
    axis = int(root.attrs.axis) % nd
    m = mean.attrs
    if not m.keepdims or m.exclude or m.axis is None or sorted(int(a) % nd for a in m.axis) != list(range(axis, nd)):
        return None
    g = root.args[1].data
    tail = tuple(root.checked_type.shape)[axis:]
    ok = g.dtype.kind == "f" and (g.size == 1 or (static(tail) and g.shape == tail))
    return axis if ok and g.dtype == np.dtype(root.checked_type.dtype) else None


def _centred_example(rng) -> list:
    g = ir.const(np.array([rng.uniform(0.5, 2.0)], dtype="float32"))
    return [example(rng, lambda x: ir.nn.rms_norm(ir.subtract(x, ir.mean(x, axis=[2], keepdims=True)), g,
                                                  epsilon=1e-5), (2, 3, 6))]


@composite("onnx.LayerNormalization/centred", _centred_rms, since=17, check=lambda root: _centred_axis(root) is not None,
           examples=_centred_example)
def _centred_back(em, m, args):
    """``nn.rms_norm(subtract(x, mean(x, axis=[2], keepdims=True)), g[1])`` -> ``LayerNormalization(x, g,
    axis=2)``: the same arithmetic (the variance of ``x`` is the mean square of ``x - mean``), no bias"""
    root = m.root
    return em.one("LayerNormalization", [args[0], em.constant(root.args[1])], axis=_centred_axis(root),
                  epsilon=float(root.attrs.epsilon))
