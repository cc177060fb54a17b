"""Converters of indexing and data-movement operators: Slice, Gather, GatherElements,
Expand, Tile, Pad, Range, ArgMax/ArgMin, DepthToSpace/SpaceToDepth::

    Slice(x, starts=[1], ends=[INT64_MAX], axes=[1])   /* x: (2, 5) */
    ->  strided_slice(%x, begin=[0, 1], end=[2, 5], strides=[1, 1])
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from passhost import ir
from passhost.ir.pattern import is_op, wildcard

from passhost.errors import FormatError

from .build import call, const, expand_to, reshape
from .composites import composite, example
from .emit_ops import arg_axes, arg_node
from .table import converter


def _slice(node, starts, ends, axes, steps):
    shape = node.shape(0)
    nd = len(shape)
    begin, end, strides = [0] * nd, list(shape), [1] * nd
    axes = range(len(starts)) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    axes = [int(a) + nd if int(a) < 0 else int(a) for a in axes]
    symbolic = [v for v in list(starts) + list(ends) if type(v) is ir.Dim] + \
        [shape[a] for a in axes if type(shape[a]) is not int]
    if symbolic:  # ONNX's clamping is strided_slice's own: only the sliced axes, bounds as given
        return call("strided_slice", node.inputs[0], begin=tuple(_bound(v) for v in starts),
                    end=tuple(_bound(v) for v in ends), strides=tuple(int(v) for v in steps), axes=tuple(axes))
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = int(a) + nd if int(a) < 0 else int(a)
        if int(st) == 0:
            raise node.error("a step of 0 is invalid")
        lo, hi, step = slice(int(s), int(e), int(st)).indices(int(shape[a]))
        begin[a], strides[a] = lo, step
        end[a] = hi if hi >= 0 else -(int(shape[a]) + 1)  # -1 after indices(): before index 0
    return call("strided_slice", node.inputs[0], begin=tuple(begin), end=tuple(end), strides=tuple(strides))


@converter("Slice", 1)
def _slice_attrs(node):
    return _slice(node, node.attr("starts"), node.attr("ends"), node.attr("axes"), None)


def _bound(v):
    """A slice bound for strided_slice: an int (ONNX's INT64 extremes kept as they are) or a
    dimension."""
    return v if type(v) is ir.Dim else int(v)


@converter("Slice", 10)
def _slice_inputs(node):
    starts = node.dims(1, "starts")
    ends = node.dims(2, "ends")
    axes = node.need_const(3, "axes").reshape(-1) if node.input(3) is not None else None
    steps = node.need_const(4, "steps").reshape(-1) if node.input(4) is not None else None
    return _slice(node, starts, ends, axes, steps)


@converter("Gather", 1)
def _gather(node):
    return call("take", node.inputs[0], node.inputs[1], axis=int(node.attr("axis", 0)), mode="fast")


@converter("GatherElements", 11)
def _gather_elements(node):
    return call("gather", node.inputs[0], node.inputs[1], axis=int(node.attr("axis", 0)))


@converter("Expand", 8)
def _expand(node):
    target = tuple(node.dims(1, "the shape"))
    try:
        return expand_to(node.inputs[0], node.shape(0), target, node.dtype(0))
    except FormatError as err:
        raise node.error(str(err)) from None


@converter("Tile", 6)
def _tile(node):
    reps = tuple(node.dims(1, "the repeats"))
    return call("tile", node.inputs[0], reps=reps)


_PAD_MODES = {"constant": "constant", "edge": "edge", "reflect": "reflect", "wrap": "wrap"}


def _wrap(node, width):
    """``wrap`` padding: each axis gets its own tail before and its head after (concatenations)."""
    x, shape = node.inputs[0], list(node.shape(0))
    for a, (before, after) in enumerate(width):
        if before < 0 or after < 0:
            raise node.error("negative pads with mode 'wrap' are not supported")
        if not before and not after:
            continue
        dim = shape[a]
        if before > dim or after > dim:
            raise node.error(f"wrap padding of {max(before, after)} exceeds axis {a} of size {dim}")
        parts = []
        for lo, hi in ((dim - before, dim), (0, dim), (0, after)):
            if hi > lo:
                begin, end = [0] * len(shape), list(shape)
                begin[a], end[a] = lo, hi
                parts.append(call("strided_slice", x, begin=tuple(begin), end=tuple(end), strides=(1,) * len(shape)))
        x = call("concatenate", ir.Tuple(parts), axis=a)
        shape[a] = dim + before + after
    return x


def _wrap_dynamic(node, width):
    """``wrap`` padding of dynamic sizes: the tail and head slices counted from the ends."""
    x = node.inputs[0]
    for a, (before, after) in enumerate(width):
        if before < 0 or after < 0:
            raise node.error("negative pads with mode 'wrap' are not supported")
        parts = []
        if before:
            parts.append(call("strided_slice", x, begin=(-before,), end=(2 ** 62,), strides=(1,), axes=(a,)))
        parts.append(x)
        if after:
            parts.append(call("strided_slice", x, begin=(0,), end=(after,), strides=(1,), axes=(a,)))
        if len(parts) > 1:
            x = call("concatenate", ir.Tuple(parts), axis=a)
    return x


def _pad(node, pads, value, mode, axes=None):
    nd = node.ndim(0)
    if mode not in _PAD_MODES:
        raise node.error(f"pad mode {mode!r} is not supported (passhost pads constant, edge, reflect, wrap)")
    pads = [p if type(p) is ir.Dim else int(p) for p in pads]
    axes = list(range(nd)) if axes is None else [int(a) + nd if int(a) < 0 else int(a) for a in axes]
    width = [[0, 0] for _ in range(nd)]
    k = len(axes)
    for i, a in enumerate(axes):
        width[a] = [pads[i], pads[i + k]]
    if mode == "wrap":
        if not all(type(p) is int for w in width for p in w):
            raise node.error("wrap padding by dynamic widths is not supported")
        if not all(type(d) is int for d in node.shape(0)):
            return _wrap_dynamic(node, width)
        return _wrap(node, width)
    if value is None:
        value = const(0, node.dtype(0))
    return call("nn.pad", node.inputs[0], value, pad_width=tuple(tuple(w) for w in width),
                pad_mode=_PAD_MODES[mode])


@converter("Pad", 1)
def _pad_attrs(node):
    pads = node.attr("pads", node.attr("paddings"))
    return _pad(node, pads, const(float(node.attr("value", 0.0)), node.dtype(0)), node.attr("mode", "constant"))


@converter("Pad", 11)
def _pad_inputs(node):
    pads = node.dims(1, "the pads")
    value = node.input(2)
    if value is not None and node.ndim(2):
        value = reshape(value, ())
    axes = node.need_const(3, "the axes").reshape(-1) if node.input(3) is not None else None
    return _pad(node, pads, value, node.attr("mode", "constant"), axes)


@converter("Range", 11)
def _range(node):
    known = [node.const(i) for i in range(3)]
    if any(k is None for k in known):  # a bound from the model's dynamic axes: arange of it
        start, limit, delta = (node.dims(i, what)[0] for i, what in enumerate(("start", "limit", "delta")))
        if type(delta) is not int or delta == 0:
            raise node.error(f"Range with a step of {delta} over dynamic bounds is not supported")
        return call("arange", start=start, stop=limit, step=delta, dtype=node.dtype(0))
    start, limit, delta = (k.reshape(()) for k in known)
    n = max(int(np.ceil((limit - start) / delta)), 0)
    return ir.Constant((start + np.arange(n, dtype=start.dtype) * delta).astype(start.dtype))


def _arg(name: str):
    def convert(node):
        nd = node.ndim(0)
        axis = int(node.attr("axis", 0))
        out = call(name, node.inputs[0], axis=(axis + nd if axis < 0 else axis,),
                   keepdims=bool(node.attr("keepdims", 1)), select_last_index=bool(node.attr("select_last_index", 0)))
        return call("cast", out, dtype="int64")
    return convert


converter("ArgMax", 1)(_arg("argmax"))
converter("ArgMin", 1)(_arg("argmin"))


@composite("onnx.ArgMax", is_op("cast")(is_op("argmax")(wildcard()) | is_op("argmin")(wildcard()))
           .has_attr({"dtype": "int64"}), check=lambda root: len(arg_axes(root.args[0])) == 1)
def _arg_back(em, m, args):
    """``cast(argmax(x), dtype="int64")`` -> ``ArgMax(x)`` (ONNX's is int64 already; ``ArgMin`` alike)"""
    return arg_node(em, m.root.args[0], args)


@converter("DepthToSpace", 1)
def _depth_to_space(node):
    n, c, h, w = node.shape(0)
    b = int(node.attr("blocksize"))
    if node.attr("mode", "DCR") == "DCR":
        x = reshape(node.inputs[0], (n, b, b, c // (b * b), h, w))
        x = call("transpose", x, axes=(0, 3, 4, 1, 5, 2))
    else:
        x = reshape(node.inputs[0], (n, c // (b * b), b, b, h, w))
        x = call("transpose", x, axes=(0, 1, 4, 2, 5, 3))
    return reshape(x, (n, c // (b * b), h * b, w * b))


@converter("SpaceToDepth", 1)
def _space_to_depth(node):
    n, c, h, w = node.shape(0)
    b = int(node.attr("blocksize"))
    x = reshape(node.inputs[0], (n, c, h // b, b, w // b, b))
    crd = node.attr("mode", "DCR") == "CRD"
    x = call("transpose", x, axes=(0, 1, 3, 5, 2, 4) if crd else (0, 3, 5, 1, 2, 4))
    return reshape(x, (n, c * b * b, h // b, w // b))


def _block_move(root) -> Optional[tuple]:
    """``(op_type, blocksize, mode)`` when ``root``, ``reshape(transpose(reshape(x)))``, is a
    ``DepthToSpace`` (CRD or DCR) or a ``SpaceToDepth`` of ``x``, as the converters above write
    them; the block size and the channels are static, the height and width may be symbolic."""
    t = root.args[0]
    x, mid, out = (tuple(e.checked_type.shape) for e in (t.args[0].args[0], t.args[0], root))
    perm = tuple(int(a) for a in t.attrs.axes or ())
    if len(x) != 4 or len(mid) != 6 or len(out) != 4 or type(x[1]) is not int:
        return None
    nb, c, h, w = x
    for b in {d for d in mid[1:4] if type(d) is int and d >= 2 and c % (d * d) == 0}:
        if out == (nb, c // (b * b), h * b, w * b):
            if mid == (nb, c // (b * b), b, b, h, w) and perm == (0, 1, 4, 2, 5, 3):
                return "DepthToSpace", b, "CRD"
            if mid == (nb, b, b, c // (b * b), h, w) and perm == (0, 3, 4, 1, 5, 2):
                return "DepthToSpace", b, "DCR"
    b = mid[3]
    if (all(type(d) is int for d in (h, w, b)) and b >= 2 and h % b == 0 and w % b == 0 and mid[5] == b
            and mid == (nb, c, h // b, b, w // b, b) and perm == (0, 3, 5, 1, 2, 4)
            and out == (nb, c * b * b, h // b, w // b)):
        return "SpaceToDepth", b, None
    return None


def _block_examples(rng) -> list:
    n, c, h, w, b = 1 + rng.randint(2), 4 * (1 + rng.randint(2)), 2 + 2 * rng.randint(2), 2 * (1 + rng.randint(2)), 2
    moves = [((n, c // 4, b, b, h, w), (0, 1, 4, 2, 5, 3), (n, c // 4, h * b, w * b)),   # DepthToSpace CRD
             ((n, b, b, c // 4, h, w), (0, 3, 4, 1, 5, 2), (n, c // 4, h * b, w * b)),   # DCR
             ((n, c, h // b, b, w // b, b), (0, 3, 5, 1, 2, 4), (n, c * b * b, h // b, w // b))]  # SpaceToDepth
    return [example(rng, lambda x, m=m: ir.reshape(ir.transpose(ir.reshape(x, m[0]), m[1]), m[2]), (n, c, h, w))
            for m in moves]


@composite("onnx.BlockMove", is_op("reshape")(is_op("transpose")(is_op("reshape")(wildcard()))),
           check=_block_move, examples=_block_examples)
def _block_move_back(em, m, args):
    """``reshape(transpose(reshape(x, (n, c/4, 2, 2, h, w)), (0, 1, 4, 2, 5, 3)), (n, c/4, 2h, 2w))``
    -> ``DepthToSpace(x, blocksize=2, mode="CRD")`` (DCR and ``SpaceToDepth`` alike)"""
    op, b, mode = m.info

    return em.one(op, args, blocksize=b, mode=mode)
