"""Converters of operators passhost builds from several host operators (Trilu, Hardmax,
OneHot, LpNormalization, RMSNormalization, MeanVarianceNormalization, Swish, CumSum, TopK,
LpPool, EyeLike), of RotaryEmbedding (``nn.rotary_embedding``, its tables read at the
positions given), and of Mod, which is TVM's ``mod``/``floor_mod``::

    Mod(a, b) (fmod=0)     ->  floor_mod(%a, %b)     /* the remainder takes the divisor's sign */
    Mod(a, b) (fmod=1)     ->  mod(%a, %b)           /* C's fmod: the dividend's sign */
"""
from __future__ import annotations

import numpy as np

from passhost import ir
from passhost.ir.dims import floordiv

from .build import call, const, positions, reshape, static
from .table import converter


def _c(node, value, i: int = 0) -> ir.Constant:
    return const(value, node.dtype(i))


def _trunc(x, node):
    return call("multiply", call("sign", x), call("floor", call("abs", x)))


@converter("Mod", 10)
def _mod(node):
    """``fmod=1``: TVM's ``mod`` (truncated, the dividend's sign); ``fmod=0``: ``floor_mod``
    (the divisor's sign, numpy's and ONNX's reference)."""
    return call("mod" if int(node.attr("fmod", 0)) else "floor_mod", node.inputs[0], node.inputs[1])


@converter("Trilu", 14)
def _trilu(node):
    shape = node.shape(0)
    rows, cols = shape[-2], shape[-1]
    upper = int(node.attr("upper", 1)) != 0
    if not static((rows, cols)):  # a matrix of run-time size: the host's trilu (k may be computed too)
        k = node.input(1)
        if k is None:
            k = const(0, "int64")
        elif node.shape(1) != ():
            k = reshape(k, ())
        return call("trilu", node.inputs[0], k, upper=upper)
    k = int(node.need_const(1, "k").reshape(-1)[0]) if node.input(1) is not None else 0
    tri = np.triu if upper else np.tril
    mask = tri(np.ones((rows, cols), dtype=bool), k)
    return call("where", ir.Constant(mask), node.inputs[0], _c(node, 0))


@converter("Hardmax", 13)
def _hardmax(node):
    """``equal(argmax(x, axis, keepdims), positions along axis)``: one-hot at the first maximum."""
    nd = node.ndim(0)
    axis = int(node.attr("axis", -1)) % nd
    first = call("argmax", node.inputs[0], axis=(axis,), keepdims=False)
    at = positions(node.inputs[0], node.shape(0), axis)
    hot = call("equal", call("expand_dims", call("cast", first, dtype="int64"), axis=axis), at)
    return call("cast", hot, dtype=node.dtype(0))


@converter("OneHot", 11)
def _one_hot(node):
    depth = int(node.need_const(1, "the depth").reshape(-1)[0])
    values = node.inputs[2]
    indices = node.inputs[0]
    if np.dtype(node.dtype(0)).kind == "f":
        indices = _trunc(indices, node)
    indices = call("cast", indices, dtype="int64")
    # negative indices count from the end
    indices = call("where", call("less", indices, const(0, "int64")), call("add", indices, const(depth, "int64")),
                   indices)
    off = call("take", values, ir.Constant(np.asarray(0, "int64")), axis=0, mode="fast")
    on = call("take", values, ir.Constant(np.asarray(1, "int64")), axis=0, mode="fast")
    return call("one_hot", indices, on, off, depth=depth, axis=int(node.attr("axis", -1)), dtype=node.dtype(2))


@converter("LpNormalization", 1)
def _lp_normalization(node):
    x = node.inputs[0]
    axis = int(node.attr("axis", -1))
    p = int(node.attr("p", 2))
    if p == 1:
        norm = call("sum", call("abs", x), axis=(axis,), keepdims=True)
    elif p == 2:
        norm = call("sqrt", call("sum", call("multiply", x, x), axis=(axis,), keepdims=True))
    else:
        raise node.error(f"p={p} is not 1 or 2")
    zero = _c(node, 0)  # a zero vector stays zero, as ONNX's reference implementation has it
    return call("where", call("equal", norm, zero), zero, call("divide", x, norm))


@converter("RMSNormalization", 23)
def _rms_normalization(node):
    """``nn.rms_norm`` where it is ONNX's definition: float32 data, or half-precision data
    normalised in float32 (``stash_type=1``, the default; ``nn.rms_norm`` rounds the normalised
    value before the scale as the function body does), the scale of the data's dtype. Otherwise
    the function body: ``Cast`` to the stash type, the normalisation, ``Cast`` back, ``Mul``."""
    x, scale = node.inputs[0], node.inputs[1]
    nd = node.ndim(0)
    axis = int(node.attr("axis", -1))
    eps = float(node.attr("epsilon", 1e-5))
    dtype = node.dtype(0)
    stash = {1: "float32", 11: "float64", 10: "float16", 16: "bfloat16"}.get(int(node.attr("stash_type", 1)))
    if stash is None:
        raise node.error(f"stash_type={node.attr('stash_type')} is not a float type")
    if node.dtype(1) == dtype and stash == "float32" and np.dtype(dtype).itemsize <= 4:
        return call("nn.rms_norm", x, scale, axis=axis % nd - nd, epsilon=eps)
    wide = x if stash == dtype else call("cast", x, dtype=stash)
    ms = call("mean", call("multiply", wide, wide), axis=tuple(range(axis % nd, nd)), keepdims=True)
    normalised = call("divide", wide, call("sqrt", call("add", ms, const(eps, stash))))
    if stash != dtype:
        normalised = call("cast", normalised, dtype=dtype)
    if node.dtype(1) != dtype:
        normalised = call("cast", normalised, dtype=node.dtype(1))
    return call("multiply", normalised, scale)


@converter("RotaryEmbedding", 23)
def _rotary_embedding(node):
    """``nn.rotary_embedding``; a 3-D input ``(batch, seq, heads * head)`` is split into
    ``num_heads`` heads around it, and the caches are read at ``position_ids`` when given."""
    return rotary(node, node.inputs[0], node.inputs[1], node.inputs[2], 3)


def rotary(node, x: ir.Expr, cos: ir.Expr, sin: ir.Expr, at: int) -> ir.Expr:
    """ONNX's and onnxruntime's RotaryEmbedding as ``nn.rotary_embedding`` (both rotate
    ``(batch, heads, seq, head)`` data, or ``(batch, seq, heads * head)`` with ``num_heads``)::

        RotaryEmbedding(x, cos_cache, sin_cache, position_ids)   /* x: (batch, heads, seq, 16) */
        ->  nn.rotary_embedding(%x, take(%cos_cache, %position_ids, axis=0), take(%sin_cache, ...))

    ``at`` is the place of ``position_ids`` among the node's inputs."""
    kw = dict(interleaved=bool(node.attr("interleaved", 0)), rotary_dim=int(node.attr("rotary_embedding_dim", 0)))
    position_ids = node.input(at)
    if position_ids is not None:
        if node.ndim(at) != 2:
            raise node.error("position_ids other than (batch, sequence) are not supported")
        cos, sin = call("take", cos, position_ids, axis=0), call("take", sin, position_ids, axis=0)
    if node.ndim(0) == 4:
        return call("nn.rotary_embedding", x, cos, sin, **kw)
    heads = int(node.attr("num_heads", 0))
    if node.ndim(0) != 3 or not heads:
        raise node.error(f"a {node.ndim(0)}-D input is not (batch, seq, hidden) with num_heads")
    batch, seq, hidden = node.shape(0)
    head = hidden // heads if type(hidden) is int else floordiv(hidden, heads)
    x4 = call("transpose", reshape(x, (batch, seq, heads, head)), axes=(0, 2, 1, 3))
    out = call("transpose", call("nn.rotary_embedding", x4, cos, sin, **kw), axes=(0, 2, 1, 3))
    return reshape(out, (batch, seq, hidden))


@converter("MeanVarianceNormalization", 9)
def _mvn(node):
    x = node.inputs[0]
    axes = tuple(int(a) for a in node.attr("axes", (0, 2, 3)))
    mean = call("mean", x, axis=axes, keepdims=True)
    centered = call("subtract", x, mean)
    var = call("mean", call("multiply", centered, centered), axis=axes, keepdims=True)
    return call("divide", centered, call("add", call("sqrt", var), _c(node, 1e-9)))


@converter("Swish", 24)
def _swish(node):
    x = node.inputs[0]
    alpha = float(node.attr("alpha", 1.0))
    return call("multiply", x, call("sigmoid", call("multiply", x, _c(node, alpha))))


@converter("CumSum", 11)
@converter("CumProd", 26)
def _cumulative(node):
    """``cumsum``/``cumprod``; ``reverse`` scans a flipped copy and flips the result back."""
    nd = node.ndim(0)
    axis = int(node.need_const(1, "the axis").reshape(-1)[0]) % nd
    x = node.inputs[0]
    reverse = int(node.attr("reverse", 0))
    if reverse:
        x = _flip(x, axis)
    op = "cumsum" if node.op_type == "CumSum" else "cumprod"
    out = call(op, x, axis=axis, exclusive=bool(int(node.attr("exclusive", 0))))
    return _flip(out, axis) if reverse else out


def _flip(x, axis: int):
    return call("strided_slice", x, begin=(-1,), end=(-(2 ** 62),), strides=(-1,), axes=(axis,))


@converter("LpPool", 11)
def _lp_pool(node):
    """``(sum over the window of |x|^p)^(1/p)``: an average pool of ``|x|^p`` counting the pads,
    times the window size (2- and 3-D; 1-D through the 2-D operators)."""
    from .convert_nn import _pool, _pool_common
    from .node import Node

    p = float(node.attr("p", 2))
    kernel, strides, dilations, pads, ceil = _pool_common(node)
    powered = call("power", call("abs", node.inputs[0]), _c(node, p))
    if not static(node.shape(0)[2:]):  # (SAME padding and ceil_mode over dynamic sizes)
        inner = Node(node.op_type, node.domain, node.name, [ir.infer_type(powered)], node.attrs, node.outputs,
                     node.opset)
        avg = _pool(inner, f"nn.avg_pool{len(kernel)}d", 0, kernel, strides, dilations, pads, ceil,
                    count_include_pad=True)
    else:
        avg = call(f"nn.avg_pool{len(kernel)}d", powered, pool_size=kernel, strides=strides, dilation=dilations,
                   padding=pads, ceil_mode=ceil, count_include_pad=True)
    total = call("multiply", avg, _c(node, float(np.prod(kernel))))
    return call("power", total, _c(node, 1.0 / p))


@converter("EyeLike", 9)
def _eye_like(node):
    from .dtypes import to_dtype

    rows, cols = node.shape(0)
    dtype = to_dtype(int(node.attr("dtype")), repr(node)) if node.attr("dtype") is not None else node.dtype(0)
    k = int(node.attr("k", 0))
    if not static((rows, cols)):  # ones where col - row == k
        shape = node.shape(0)
        diff = call("subtract", positions(node.inputs[0], shape, 1), positions(node.inputs[0], shape, 0))
        return call("cast", call("equal", diff, const(k, "int64")), dtype=dtype)
    return ir.Constant(np.eye(rows, cols, k=k, dtype=dtype))


def _topk(node, k):
    shape = node.shape(0)
    axis = int(node.attr("axis", -1)) % len(shape)
    is_ascend = not bool(int(node.attr("largest", 1)))
    if type(k) is not int:  # k from the model's dynamic sizes
        if not (type(k) is ir.Dim and k == shape[axis]):
            raise node.error(f"k={k} depends on the sizes of the model's dynamic axes and is not the whole axis "
                             f"{axis} ({shape[axis]}); passhost's topk takes a static k or the whole axis")
        t = call("topk", node.inputs[0], k=0, axis=axis, is_ascend=is_ascend, dtype="int64")  # Relay's k=0: all
        return ir.TupleGetItem(t, 0), ir.TupleGetItem(t, 1)
    if k == 0 and type(shape[axis]) is not int:  # an empty result: slices of nothing
        empty = call("strided_slice", node.inputs[0], begin=(0,), end=(0,), axes=(axis,))
        return empty, call("cast", empty, dtype="int64")
    if k == 0:  # ONNX's k=0 is an empty result, Relay's k=0 is the whole axis
        t = call("topk", node.inputs[0], k=int(shape[axis]), axis=axis, is_ascend=is_ascend, dtype="int64")
        return tuple(call("strided_slice", ir.TupleGetItem(t, i), begin=(0,), end=(0,), axes=(axis,)) for i in (0, 1))
    t = call("topk", node.inputs[0], k=k, axis=axis, is_ascend=is_ascend, dtype="int64")
    return ir.TupleGetItem(t, 0), ir.TupleGetItem(t, 1)


@converter("TopK", 1)
def _topk_1(node):
    return _topk(node, int(node.attr("k")))


@converter("TopK", 10)
def _topk_10(node):
    return _topk(node, node.dims(1, "k")[0])


@converter("GlobalLpPool", 2)
def _global_lp_pool(node):
    """``(sum over the spatial axes of |x|^p)^(1/p)``, the axes kept."""
    p = float(node.attr("p", 2))
    axes = tuple(range(2, node.ndim(0)))
    total = call("sum", call("power", call("abs", node.inputs[0]), _c(node, p)), axis=axes, keepdims=True)
    return call("power", total, _c(node, 1.0 / p))
