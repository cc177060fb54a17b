"""Converters of DFT and STFT onto TVM's ``dft`` (the transform along the last axis, real
and imaginary parts as two tensors)::

    DFT(x, axis=1)          /* x: (2, 8, 1), a real signal */
    ->  %0 = dft(reshape(%x, newshape=[2, 8]), zeros((2, 8)));
        concatenate((expand_dims(%0.0, axis=-1), expand_dims(%0.1, axis=-1)), axis=-1)   /* (2, 8, 2) */

``dft_length`` pads the signal with zeros or cuts it, ``onesided`` keeps the first
``n // 2 + 1`` bins, ``inverse`` divides by ``n``; ``inverse`` with ``onesided`` rebuilds
a real signal from its one-sided spectrum (numpy's ``irfft``). STFT takes its frames with one ``take``
of a constant index matrix, multiplies them by the window and transforms each.
"""
from __future__ import annotations

import numpy as np

from passhost import ir

from .build import call, const, drop_axes, reshape, static
from .table import converter


def _parts(node, x, shape: tuple) -> tuple:
    """The real and imaginary parts of ONNX's ``[..., 1 or 2]`` signal."""
    if type(shape[-1]) is not int:  # real or complex, which one at run time: an empty imaginary slice
        if shape[-1] is ir.ANY:     # of a real signal is padded to a zero one (by 2 - size)
            raise node.error("the size of the signal's last axis (1: real, 2: complex) is unknown (?)")
        end = len(shape) - 1
        re = drop_axes(call("strided_slice", x, begin=(0,), end=(1,), axes=(end,)), shape[:-1] + (1,), [end])
        im = call("strided_slice", x, begin=(1,), end=(2,), axes=(end,))
        width = tuple((0, 0) for _ in range(end)) + ((0, 2 - shape[-1]),)
        im = call("nn.pad", im, const(0, node.dtype(0)), pad_width=width)
        return re, drop_axes(im, shape[:-1] + (1,), [end])
    if shape[-1] not in (1, 2):
        raise node.error(f"the signal's last axis must be 1 (real) or 2 (complex), got {shape[-1]}")
    body = tuple(shape[:-1])
    end = len(shape) - 1
    re = reshape(call("strided_slice", x, begin=(0,), end=(1,), axes=(end,)), body)
    if shape[-1] == 1:
        return re, call("zeros", shape=body, dtype=node.dtype(0))
    return re, reshape(call("strided_slice", x, begin=(1,), end=(2,), axes=(end,)), body)


def _fit(re, im, shape: tuple, axis: int, length: int, dtype: str) -> tuple:
    """Both parts (shape ``shape``) cut to ``length`` along ``axis``, or padded with zeros."""
    n = shape[axis]
    if type(n) is not int or type(length) is not int:  # cut, then pad by what is missing
        if length == n:
            return re, im
        width = tuple((0, ir.dims.dmax(0, length - n)) if i == axis else (0, 0) for i in range(len(shape)))
        return tuple(call("nn.pad", call("strided_slice", p, begin=(0,), end=(length,), axes=(axis,)),
                          const(0, dtype), pad_width=width) for p in (re, im))
    if length < n:
        return tuple(call("strided_slice", p, begin=(0,), end=(length,), axes=(axis,)) for p in (re, im))
    if length > n:
        width = tuple((0, length - n) if i == axis else (0, 0) for i in range(len(shape)))
        return tuple(call("nn.pad", p, const(0, dtype), pad_width=width) for p in (re, im))
    return re, im


def _transform(re, im, shape: tuple, axis: int, length: int, inverse: bool, onesided: bool, dtype: str):
    """ONNX's ``[..., 2]`` result of transforming ``re + i im`` (shape ``shape``) along ``axis``."""
    re, im = _fit(re, im, shape, axis, length, dtype)
    last = len(shape) - 1
    perm = [i for i in range(len(shape)) if i != axis] + [axis]
    if axis != last:
        re, im = call("transpose", re, axes=tuple(perm)), call("transpose", im, axes=tuple(perm))
    out = call("dft", re, im, inverse=bool(inverse))
    re, im = ir.TupleGetItem(out, 0), ir.TupleGetItem(out, 1)
    if onesided:
        re, im = (call("strided_slice", p, begin=(0,), end=(length // 2 + 1,), axes=(last,)) for p in (re, im))
    if axis != last:
        back = tuple(int(i) for i in np.argsort(perm))
        re, im = call("transpose", re, axes=back), call("transpose", im, axes=back)
    return call("concatenate", ir.Tuple([call("expand_dims", re, axis=-1), call("expand_dims", im, axis=-1)]),
                axis=-1)


@converter("DFT", 17)
def _dft(node):
    shape = node.shape(0)
    rank = len(shape)
    if node.opset >= 20:
        axis = int(node.need_const(2, "the axis").reshape(-1)[0]) if node.input(2) is not None else -2
    else:
        axis = int(node.attr("axis", 1))
    if not -rank <= axis < rank or axis % rank == rank - 1:
        raise node.error(f"axis {axis} is not a signal axis of the {rank}-D input (the last axis holds the "
                         "real and imaginary parts)")
    axis %= rank
    inverse, onesided = int(node.attr("inverse", 0)), int(node.attr("onesided", 0))
    if node.input(1) is not None:
        length = node.dims(1, "dft_length")[0]
    else:
        length = 2 * (shape[axis] - 1) if inverse and onesided else shape[axis]
    if length is ir.ANY:
        raise node.error("the transform's length is unknown (?)")
    if (length < 1) if type(length) is int else ir.dims.provably_unequal(ir.dims.dmax(length, 1), length):
        raise node.error(f"dft_length must be positive, got {length}")
    re, im = _parts(node, node.inputs[0], shape)
    if inverse and onesided:
        return _irfft(re, im, tuple(shape[:-1]), axis, length, node.dtype(0))
    return _transform(re, im, tuple(shape[:-1]), axis, length, inverse, onesided, node.dtype(0))


def _irfft(re, im, shape: tuple, axis: int, length: int, dtype: str):
    """The real signal of length ``length`` whose one-sided spectrum is ``re + i im`` (numpy's
    ``irfft``): the spectrum cut or padded to ``length // 2 + 1`` bins, its other half the
    mirrored conjugate, transformed back; the real part (``[..., length, 1]``)."""
    bins = length // 2 + 1
    re, im = _fit(re, im, shape, axis, bins, dtype)
    if type(length) is not int:  # the bins beyond the half mirrored (none for a length of 2 or less)
        upper = call("arange", start=bins, stop=ir.dims.dmax(bins, length), step=1, dtype="int64")
        mirror = call("subtract", ir.shape_value(length, "int64"), upper)
        re = call("concatenate", ir.Tuple([re, call("take", re, mirror, axis=axis)]), axis=axis)
        im = call("concatenate", ir.Tuple([im, call("negative", call("take", im, mirror, axis=axis))]), axis=axis)
    elif length > bins:
        mirror = ir.Constant(np.array([length - k for k in range(bins, length)], dtype="int64"))
        re = call("concatenate", ir.Tuple([re, call("take", re, mirror, axis=axis)]), axis=axis)
        im = call("concatenate", ir.Tuple([im, call("negative", call("take", im, mirror, axis=axis))]), axis=axis)
    full = tuple(length if i == axis else d for i, d in enumerate(shape))
    both = _transform(re, im, full, axis, length, True, False, dtype)
    return call("strided_slice", both, begin=(0,), end=(1,), axes=(len(shape),))


#: the largest frame index matrix STFT builds (elements): declared shapes must not make
#: the importer allocate gigabytes
_MAX_FRAME_INDEX = 1 << 24


@converter("STFT", 17)
def _stft(node):
    shape = node.shape(0)
    if len(shape) != 3:
        raise node.error(f"the signal must be [batch, length, 1 or 2], got {list(shape)}")
    step = int(node.need_const(1, "frame_step").reshape(-1)[0])
    window = node.input(2)
    if node.input(3) is not None:
        frame = node.dims(3, "frame_length")[0]
    elif window is not None:
        frame = node.shape(2)[0]
    else:
        raise node.error("STFT needs a window or a frame_length")
    if frame is ir.ANY or shape[1] is ir.ANY:
        raise node.error("the frame or the signal length is unknown (?)")
    if not static((frame, shape[1])):
        if step < 1 or ir.dims.provably_unequal(ir.dims.dmin(frame, shape[1]), frame):
            raise node.error(f"frame_step {step} and frame_length {frame} do not fit a signal of length {shape[1]}")
    elif step < 1 or not 1 <= frame <= shape[1]:
        raise node.error(f"frame_step {step} and frame_length {frame} do not fit a signal of length {shape[1]}")
    frames = (shape[1] - frame) // step + 1
    if static((frame, shape[1])):
        if frames * frame > _MAX_FRAME_INDEX:
            raise node.error(f"{frames} frames of {frame} samples are too many for passhost's STFT (its index "
                             "matrix)")
        index = (np.arange(frames)[:, None] * step + np.arange(frame)[None, :]).astype("int64")
    else:  # the frame starts plus the offsets in a frame, of dynamic counts
        starts = call("multiply", reshape(call("arange", start=0, stop=frames, step=1, dtype="int64"), (frames, 1)),
                      const(step, "int64"))
        index = call("add", starts, reshape(call("arange", start=0, stop=frame, step=1, dtype="int64"), (1, frame)))
    re, im = _parts(node, node.inputs[0], shape)
    re, im = (call("take", p, ir.Constant(index) if isinstance(index, np.ndarray) else index, axis=1) for p in (re, im))
    if window is not None:
        w = reshape(window, (1, 1, frame))
        re, im = call("multiply", re, w), call("multiply", im, w)
    onesided = int(node.attr("onesided", 1))
    if onesided and shape[2] == 2:
        raise node.error("onesided=1 needs a real signal (its last axis 1)")
    return _transform(re, im, (shape[0], frames, frame), 2, frame, False, onesided, node.dtype(0))
