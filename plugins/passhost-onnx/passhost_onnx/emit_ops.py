"""ONNX emitters of indexing, padding, arg-reductions, transposed convolution, resizing and
normalisation operators (the rest are in :mod:`.emit`)::

    strided_slice(%x, begin=[0, 1], end=[2, 5], strides=[1, 1])
    ->  Slice(x, starts=[0, 1], ends=[2, 5], axes=[0, 1], steps=[1, 1])
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import onnx

from passhost import ir
from passhost.errors import FormatError

from .dtypes import to_onnx_type
from .emit import _check_layout, _out_shape, _pads, _tensor, emitter

_INT64_MIN = np.iinfo("int64").min
_INT64_MAX = np.iinfo("int64").max
#: an int end at least this large takes an axis to its end (no axis has 2**62 elements)
_WHOLE = 1 << 62


@emitter("strided_slice")
def _strided_slice(em, call, args):
    a = call.attrs
    shape = _tensor(call, 0).shape
    nd = len(shape)
    axes = list(range(nd)) if a.axes is None else [int(x) % nd for x in a.axes]
    begin, end = list(a.begin), list(a.end)
    strides = list(a.strides) if a.strides else [1] * len(begin)
    starts, ends, steps, used = [], [], [], []
    for i, axis in enumerate(axes[:len(begin)]):
        b = _dim(begin[i])
        e = _dim(end[i]) if i < len(end) else shape[axis]
        s = int(strides[i]) if i < len(strides) else (int(strides[-1]) if strides else 1)
        if a.slice_mode == "size":
            s, e = 1, shape[axis] if (type(e) is int and e < 0) else b + e
        if s < 0 and type(e) is int and type(shape[axis]) is int and e < -int(shape[axis]):
            e = _INT64_MIN  # before index 0
        if type(shape[axis]) is not int or type(e) is not int:  # (static slices are written as before)
            if s == 1 and type(b) is int and b == 0 and (e == shape[axis] or (type(e) is int and e >= _WHOLE)):
                continue  # the whole axis: nothing to write (and no symbolic end to compute)
            if s > 0 and type(e) is not int and e == shape[axis]:
                e = _INT64_MAX  # to the end, without computing it
        starts.append(b), ends.append(e), steps.append(s), used.append(axis)
    if not used:
        return args[0]
    return em.one("Slice", [args[0], em.ints(starts), em.ints(ends), em.ints(used), em.ints(steps)])


def _dim(v):
    """An attribute's entry: an int, or a symbolic dimension kept as it is (em.ints
    computes it)."""
    return v if type(v) is ir.Dim else int(v)


@emitter("take")
def _take(em, call, args):
    a = call.attrs
    if a.batch_dims:
        raise FormatError("take with batch_dims exports to ONNX only as batch_dims=0")
    data, indices = args
    shape = _tensor(call, 0).shape
    axis = a.axis
    if axis is None:
        data = em.one("Reshape", [data, em.ints([-1])])
        dim, axis = math.prod(shape), 0
    else:
        axis = int(axis) % len(shape)
        dim = shape[axis]
    idx_dtype = _tensor(call, 1).dtype

    def size(v):  # a scalar of the indices' dtype: a constant, or computed for a symbolic size
        if type(v) is int:
            return em.const(np.asarray(v, idx_dtype))
        value = em.dim_values.scalar(v)
        return value if idx_dtype == "int64" else em.one("Cast", [value], to=to_onnx_type(idx_dtype))

    if a.mode == "clip":  # out-of-range indices clamp; negative ones clamp to 0
        indices = em.one("Clip", [indices, em.const(np.asarray(0, idx_dtype)), size(dim - 1)])
    elif a.mode == "wrap":
        indices = em.one("Mod", [indices, size(dim)])
    return em.one("Gather", [data, indices], axis=axis)


@emitter("gather")
def _gather(em, call, args):
    return em.one("GatherElements", list(args), axis=int(call.attrs.axis))


@emitter("broadcast_to")
def _broadcast_to(em, call, args):
    return em.one("Expand", [args[0], em.ints(_out_shape(call))])


@emitter("tile")
def _tile(em, call, args):
    nd = len(_tensor(call, 0).shape)
    reps = [_dim(r) for r in call.attrs.reps]
    x = args[0]
    if len(reps) > nd:  # numpy's tile prepends axes to the data, ONNX's needs equal ranks
        x = em.one("Reshape", [x, em.ints([1] * (len(reps) - nd) + list(_tensor(call, 0).shape))])
    elif len(reps) < nd:
        reps = [1] * (nd - len(reps)) + reps
    return em.one("Tile", [x, em.ints(reps)])


@emitter("repeat")
def _repeat(em, call, args):
    shape = list(_tensor(call, 0).shape)
    nd = len(shape)
    axis = int(call.attrs.axis) % nd
    r = int(call.attrs.repeats)
    x = em.one("Reshape", [args[0], em.ints(shape[:axis + 1] + [1] + shape[axis + 1:])])
    x = em.one("Expand", [x, em.ints(shape[:axis + 1] + [r] + shape[axis + 1:])])
    return em.one("Reshape", [x, em.ints(_out_shape(call))])


@emitter("nn.pad")
def _pad(em, call, args):
    width = [(int(b), int(e)) for b, e in call.attrs.pad_width]
    pads = [b for b, _ in width] + [e for _, e in width]
    value = args[1]
    if _tensor(call, 1).shape:
        value = em.one("Reshape", [value, em.ints([])])
    return em.one("Pad", [args[0], em.ints(pads), value], mode=call.attrs.pad_mode)


def arg_axes(call) -> list:
    """The axes an ``argmax``/``argmin`` ``call`` reduces (ONNX's reduce one)."""
    a = call.attrs
    nd = len(_tensor(call, 0).shape)
    axes = list(range(nd)) if a.axis is None else [int(x) % nd for x in a.axis]
    return [i for i in range(nd) if i not in axes] if a.exclude else axes


def arg_node(em, call, args) -> str:
    """The ``ArgMax``/``ArgMin`` node of an ``argmax``/``argmin`` ``call`` (int64, as ONNX's is)."""
    a, axes = call.attrs, arg_axes(call)
    if len(axes) != 1:
        raise FormatError(f"{call.op.name} over {len(axes)} axes has no ONNX export (ONNX reduces one axis)")
    onnx_op = "ArgMax" if call.op.name == "argmax" else "ArgMin"
    return em.one(onnx_op, list(args), axis=axes[0], keepdims=int(bool(a.keepdims)),
                  select_last_index=int(bool(a.select_last_index)) or None)


def _arg(onnx_op: str):
    def emit(em, call, args):
        return em.one("Cast", [arg_node(em, call, args)], to=to_onnx_type(call.checked_type.dtype))
    return emit


emitter("argmax")(_arg("ArgMax"))
emitter("argmin")(_arg("ArgMin"))


@emitter("nn.prelu")
def _prelu(em, call, args):
    nd = len(_tensor(call, 0).shape)
    tail = nd - int(call.attrs.axis) % nd - 1
    slope = args[1]
    if tail:  # the slope along the channel axis: a reshaped constant, or a Reshape of a computed one
        value = em.values.get(slope)
        slope = (em.const(value.reshape((-1,) + (1,) * tail)) if value is not None
                 else em.one("Reshape", [slope, em.ints([-1] + [1] * tail)]))
    return em.one("PRelu", [args[0], slope])


@emitter("nn.conv2d_transpose", "nn.conv3d_transpose")
def _conv_transpose(em, call, args):
    kshape = _tensor(call, 1).shape
    nd = len(kshape) - 2
    data = "NCHW" if nd == 2 else "NCDHW"
    _check_layout(call, data_layout=data, kernel_layout="IOHW" if nd == 2 else "IODHW", out_layout=data)
    a = call.attrs
    return em.one("ConvTranspose", list(args), kernel_shape=list(kshape[2:]), strides=list(a.strides),
                  pads=_pads(a.padding, nd), dilations=list(a.dilation), group=int(a.groups),
                  output_padding=[int(p) for p in a.output_padding])


@emitter("nn.instance_norm")
def _instance_norm(em, call, args):
    a = call.attrs
    if a.axis != 1 or not a.center or not a.scale:
        raise FormatError("nn.instance_norm exports with axis=1, center and scale only")
    return em.one("InstanceNormalization", list(args), epsilon=float(a.epsilon))


_NEAREST = {"": None, "round": None, "round_prefer_floor": "round_prefer_floor",
            "round_prefer_ceil": "round_prefer_ceil", "floor": "floor", "ceil": "ceil"}


@emitter("image.resize2d")
def _resize2d(em, call, args):
    _check_layout(call, layout="NCHW")
    a = call.attrs
    mode = {"nearest_neighbor": "nearest", "linear": "linear", "cubic": "cubic"}[a.method]
    ctm = a.coordinate_transformation_mode
    kw = dict(mode=mode, coordinate_transformation_mode=ctm)
    if mode == "nearest":
        rounding = a.rounding_method or ("round" if ctm == "align_corners" else "floor")
        if rounding == "round":
            raise FormatError("image.resize2d with rounding_method='round' (halves to even) has no ONNX nearest_mode")
        kw["nearest_mode"] = rounding
    if mode == "cubic":
        kw["cubic_coeff_a"] = float(a.cubic_alpha)
        kw["exclude_outside"] = int(a.cubic_exclude)
    if ctm == "half_pixel_symmetric" and em.opset < 19:
        raise FormatError(f"image.resize2d with coordinate_transformation_mode='half_pixel_symmetric' needs "
                          f"opset 19 or later (writing opset {em.opset}); pass opset=19")
    if a.antialias and mode != "nearest":
        if em.opset < 18:
            raise FormatError(f"image.resize2d with antialias=1 needs opset 18 or later (writing opset {em.opset}); "
                              "pass opset=18")
        kw["antialias"] = 1
        kw["exclude_outside"] = int(a.cubic_exclude)
    roi = ""
    extent = (1.0, 1.0)
    if ctm == "tf_crop_and_resize":
        r = tuple(a.roi) if a.roi else (0.0, 0.0, 0.0, 0.0)
        roi = em.const(np.asarray([0, 0, r[0], r[1], 1, 1, r[2], r[3]], dtype="float32"))
        kw["extrapolation_value"] = float(a.extrapolation_value)
        extent = (r[2] - r[0], r[3] - r[1])
    if a.scales:  # ONNX maps with the scales and derives the size from them: they must agree
        in_shape = call.args[0].checked_type.shape
        if all(type(d) is int for d in in_shape[2:]) and \
                [int(np.floor(d * e * s)) for d, e, s in zip(in_shape[2:], extent, a.scales)] != list(a.size):
            raise FormatError(f"image.resize2d with scales={list(a.scales)} and size={list(a.size)} cannot be "
                              f"written: ONNX's Resize makes the output size floor(input x scale)")
        scales = em.const(np.asarray([1.0, 1.0, *a.scales], dtype="float32"))
        return em.one("Resize", [args[0], roi, scales], **kw)
    exact = _exact_scales(call.args[0].checked_type.shape, a.size) if ctm != "tf_crop_and_resize" else None
    if exact is not None:  # symbolic batch or channels: scales need no Shape of the input
        return em.one("Resize", [args[0], roi, em.const(np.asarray([1.0, 1.0, *exact], dtype="float32"))], **kw)
    return em.one("Resize", [args[0], roi, "", em.ints(_out_shape(call))], **kw)


def _exact_scales(in_shape, size):
    """The float32 scales ``size / in`` of a resize whose N or C is symbolic and whose H and W
    are static, when each is exact (then ``floor(in x scale)`` is ``size`` and the scale is the
    one a runtime derives from sizes); otherwise None (sizes are written)."""
    if all(type(d) is int for d in in_shape[:2]) or not all(type(d) is int for d in (*in_shape[2:], *size)):
        return None
    if 0 in in_shape[2:]:
        return None
    scales = [float(np.float32(s) / np.float32(d)) for d, s in zip(in_shape[2:], size)]
    if any(Fraction(sc) != Fraction(s, d) for d, s, sc in zip(in_shape[2:], size, scales)):
        return None
    return scales


@emitter("full")
def _full(em, call, args):
    return em.one("Expand", [em.one("Cast", [args[0]], to=_onnx(call)), em.ints(_out_shape(call))])


@emitter("zeros", "ones")
def _zeros_ones(em, call, args):
    value = np.zeros if call.op.name == "zeros" else np.ones
    shape = _out_shape(call)
    if not all(type(d) is int for d in shape):  # a run-time shape: ConstantOfShape
        fill = onnx.numpy_helper.from_array(value((1,), dtype=call.checked_type.dtype))
        return em.one("ConstantOfShape", [em.ints(shape)], value=fill)
    return em.const(value(shape, dtype=call.checked_type.dtype))


@emitter("full_like")
def _full_like(em, call, args):
    return em.one("Expand", [em.one("Cast", [args[1]], to=_onnx(call)), em.ints(_out_shape(call))])


@emitter("zeros_like", "ones_like")
def _like(em, call, args):
    value = 0 if call.op.name == "zeros_like" else 1
    return em.one("Expand", [em.const(np.asarray(value, dtype=call.checked_type.dtype)), em.ints(_out_shape(call))])


def _onnx(call) -> int:
    return to_onnx_type(call.checked_type.dtype)


@emitter("cumsum")
def _cumsum(em, call, args):
    x = args[0]
    axis = call.attrs.axis
    if axis is None:
        x, axis = em.one("Reshape", [x, em.ints([-1])]), 0
    out_dtype = call.checked_type.dtype
    if out_dtype != _tensor(call, 0).dtype:
        x = em.one("Cast", [x], to=to_onnx_type(out_dtype))
    return em.one("CumSum", [x, em.ints([int(axis)])], exclusive=int(bool(call.attrs.exclusive)) or None)


@emitter("cumprod")
def _cumprod(em, call, args):
    """ONNX has CumProd only from opset 26: a scan by doubling instead (Hillis and Steele),
    ``x *= x shifted by k`` (ones shifted in) for k = 1, 2, 4, ...: ``3 log2(n)`` nodes."""
    x = args[0]
    shape = list(_tensor(call, 0).shape)
    axis = call.attrs.axis
    if axis is None:
        x, shape, axis = em.one("Reshape", [x, em.ints([-1])]), [int(np.prod(shape, dtype=np.int64))], 0
    axis = int(axis) % len(shape)
    dtype = call.checked_type.dtype
    if dtype != _tensor(call, 0).dtype:
        x = em.one("Cast", [x], to=to_onnx_type(dtype))
    n = shape[axis]

    def shifted(v, k):
        ones = em.const(np.ones(shape[:axis] + [k] + shape[axis + 1:], dtype))
        head = em.one("Slice", [v, em.ints([0]), em.ints([n - k]), em.ints([axis])])
        return em.one("Concat", [ones, head], axis=axis)

    if call.attrs.exclusive and n:
        x = shifted(x, 1)
    k = 1
    while k < n:
        x = em.one("Mul", [x, shifted(x, k)])
        k *= 2
    return x


@emitter("topk")
def _topk(em, call, args):
    a = call.attrs
    shape = _tensor(call, 0).shape
    axis = int(a.axis) % len(shape)
    k = int(a.k) or shape[axis]  # (0: the whole axis, which may be symbolic)
    values, indices = em.node("TopK", [args[0], em.ints([k])], 2, axis=axis, largest=0 if a.is_ascend else None)
    if a.dtype != "int64":
        indices = em.one("Cast", [indices], to=to_onnx_type(a.dtype))
    return {"both": (values, indices), "values": values, "indices": indices}[a.ret_type]


@emitter("one_hot")
def _one_hot(em, call, args):
    a = call.attrs
    dt = call.checked_type.dtype
    # ONNX counts negative indices from the end; Relay gives them off_value: map them past depth
    idx = em.one("Cast", [args[0]], to=to_onnx_type("int64"))
    idx = em.one("Where", [em.one("Less", [idx, em.const(np.asarray(0, "int64"))]),
                           em.const(np.asarray(a.depth, "int64")), idx])
    values = em.one("Concat", [em.one("Reshape", [em.one("Cast", [v], to=to_onnx_type(dt)), em.ints([1])])
                               for v in (args[2], args[1])], axis=0)
    return em.one("OneHot", [idx, em.ints([int(a.depth)]), values], axis=int(a.axis))


@emitter("ndarray_size")
def _ndarray_size(em, call, args):
    size = math.prod(_tensor(call, 0).shape)
    dtype = call.checked_type.dtype
    if type(size) is int:
        return em.const(np.asarray(size, dtype=dtype))
    if size is ir.ANY:
        return em.one("Size", [args[0]]) if dtype == "int64" else \
            em.one("Cast", [em.one("Size", [args[0]])], to=to_onnx_type(dtype))
    return _scalar_of(em, size, dtype)


def _scalar_of(em, value, dtype: str) -> str:
    """A 0-D tensor of ``dtype`` holding a dimension (computed when symbolic)."""
    out = em.dim_values.scalar(value)
    return out if dtype == "int64" else em.one("Cast", [out], to=to_onnx_type(dtype))


@emitter("arange")
def _arange(em, call, args):
    a = call.attrs
    if not any(type(v) is ir.Dim for v in (a.start, a.stop, a.step)):
        return em.const(call.op.compute([], call.attrs))
    start, stop = (0, a.start) if a.stop is None else (a.start, a.stop)
    dtype = call.checked_type.dtype
    return em.one("Range", [_scalar_of(em, start, dtype), _scalar_of(em, stop, dtype), _scalar_of(em, a.step, dtype)])


@emitter("trilu")
def _trilu(em, call, args):
    return em.one("Trilu", list(args), upper=int(bool(call.attrs.upper)))


@emitter("shape_value")
def _shape_value(em, call, args):
    """Dimensions as a tensor: an initializer where they are ints, else computed from the
    graph inputs' shapes (:mod:`.dim_values`)."""
    values = call.attrs["values"]
    dtype = call.checked_type.dtype
    if isinstance(values, tuple):
        out = em.ints(values)
        return out if dtype == "int64" else em.one("Cast", [out], to=to_onnx_type(dtype))
    return _scalar_of(em, values, dtype)


def _onnx_indices(em, call, args) -> str:
    """TVM-layout indices (coordinates on the first axis) as ONNX's int64 (coordinates last)."""
    idx = args[1]
    t = _tensor(call, 1)
    if t.dtype != "int64":
        idx = em.one("Cast", [idx], to=to_onnx_type("int64"))
    if t.ndim > 1:
        idx = em.one("Transpose", [idx], perm=list(range(1, t.ndim)) + [0])
    return idx


_SINCE = {"add": 16, "mul": 16, "min": 18, "max": 18}


def _reduction_attrs(em, call, key: str) -> dict:
    value = call.attrs[key]
    if value == "update":
        return {}
    if em.opset < _SINCE[value]:
        raise FormatError(f"{call.op.name} with {key}={value!r} needs ONNX opset {_SINCE[value]} or later; "
                          f"export at a later opset")
    return {"reduction": value}


@emitter("gather_nd")
def _gather_nd(em, call, args):
    return em.one("GatherND", [args[0], _onnx_indices(em, call, args)], batch_dims=int(call.attrs.batch_dims))


@emitter("scatter_nd")
def _scatter_nd(em, call, args):
    return em.one("ScatterND", [args[0], _onnx_indices(em, call, args), args[2]],
                  **_reduction_attrs(em, call, "mode"))


@emitter("scatter_elements")
def _scatter_elements(em, call, args):
    idx = args[1]
    if _tensor(call, 1).dtype not in ("int32", "int64"):
        idx = em.one("Cast", [idx], to=to_onnx_type("int64"))
    return em.one("ScatterElements", [args[0], idx, args[2]], axis=int(call.attrs.axis),
                  **_reduction_attrs(em, call, "reduction"))


@emitter("reverse_sequence")
def _reverse_sequence(em, call, args):
    """ONNX's ReverseSequence: 2-D batch/time axes 0 and 1 only, int64 lengths."""
    nd = len(_tensor(call, 0).shape)
    seq_axis, batch_axis = int(call.attrs.seq_axis) % nd, int(call.attrs.batch_axis) % nd
    if {seq_axis, batch_axis} != {0, 1}:
        raise FormatError(f"reverse_sequence with seq_axis={seq_axis}, batch_axis={batch_axis}: ONNX's "
                          "ReverseSequence takes axes 0 and 1 only")
    lens = args[1]
    if _tensor(call, 1).dtype != "int64":
        lens = em.one("Cast", [lens], to=to_onnx_type("int64"))
    return em.one("ReverseSequence", [args[0], lens], time_axis=seq_axis, batch_axis=batch_axis)


@emitter("image.grid_sample")
def _grid_sample(em, call, args):
    """GridSample (opset 16; the mode names linear and cubic from opset 20, and 3-D data
    only from opset 20), the grid transposed back to ONNX's ``(N, *out, nd)``."""
    nd = len(_tensor(call, 0).shape) - 2
    if em.opset < 16 or (nd == 3 and em.opset < 20):
        raise FormatError(f"image.grid_sample on {nd}-D data needs ONNX opset {16 if nd == 2 else 20} or later")
    method = call.attrs.method
    if em.opset >= 20:
        method = {"bilinear": "linear", "bicubic": "cubic"}.get(method, method)
    grid = em.one("Transpose", [args[1]], perm=[0] + list(range(2, nd + 2)) + [1])
    return em.one("GridSample", [args[0], grid], mode=method, padding_mode=call.attrs.padding_mode,
                  align_corners=int(bool(call.attrs.align_corners)))


@emitter("dft")
def _dft(em, call, args):
    """ONNX's DFT (opset 17 on) over the last axis of ``[..., n, 2]`` (the real and
    imaginary parts stacked), split back into the two parts."""
    if em.opset < 17:
        raise FormatError(f"dft needs ONNX opset 17 or later (DFT); writing opset {em.opset}: pass opset=17")
    last = len(_tensor(call, 0).shape)
    parts = [em.one("Unsqueeze", [a, em.ints([last])]) for a in args]
    both = em.one("Concat", parts, axis=last)
    inverse = int(bool(call.attrs.inverse))
    if em.opset >= 20:
        out = em.one("DFT", [both, "", em.const(np.asarray(-2, dtype="int64"))], inverse=inverse)
    else:
        out = em.one("DFT", [both], axis=last - 1, inverse=inverse)
    return tuple(em.one("Squeeze", [p, em.ints([last])]) for p in em.node("Split", [out, em.ints([1, 1])], 2,
                                                                            axis=last))


@emitter("nn.deformable_conv2d", "nn.modulated_deformable_conv2d")
def _deform_conv(em, call, args):
    """ONNX's DeformConv (opset 19 on): inputs X, W, offset, B (none), mask."""
    if em.opset < 19:
        raise FormatError(f"{call.op.name} needs ONNX opset 19 or later (DeformConv); writing opset {em.opset}: "
                          "pass opset=19")
    a = call.attrs
    x, offset, w = args[:3]
    inputs = [x, w, offset] + (["", args[3]] if len(args) == 4 else [])
    return em.one("DeformConv", inputs, kernel_shape=list(_tensor(call, 2).shape[2:]), strides=list(a.strides),
                  pads=_pads(a.padding), dilations=list(a.dilation), group=int(a.groups),
                  offset_group=int(a.deformable_groups))


@emitter("nn.max_pool2d_with_argmax")
def _max_pool_argmax(em, call, args):
    """ONNX's MaxPool with its Indices output."""
    a = call.attrs
    kw = dict(kernel_shape=list(a.pool_size), strides=list(a.strides), pads=_pads(a.padding),
              ceil_mode=int(bool(a.ceil_mode)), storage_order=int(a.storage_order))
    if any(d != 1 for d in a.dilation):
        kw["dilations"] = list(a.dilation)
    return tuple(em.node("MaxPool", [args[0]], 2, **kw))


@emitter("nn.max_unpool2d")
def _max_unpool(em, call, args):
    a = call.attrs
    return em.one("MaxUnpool", [args[0], args[1], em.ints(a.output_size)], kernel_shape=list(a.pool_size),
                  strides=list(a.strides), pads=_pads(a.padding))


from . import emit_llm  # noqa: E402,F401  (the fused operators of language models: registers their emitters)
