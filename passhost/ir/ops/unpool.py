"""``nn.max_pool2d_with_argmax`` and ``nn.max_unpool2d``: max pooling that also returns
where each maximum was, and its inverse that puts values back there (SegNet-style
decoders; ONNX's ``MaxPool`` with its ``Indices`` output and ``MaxUnpool``)::

    %p = nn.max_pool2d_with_argmax(%x, pool_size=[2, 2], strides=[2, 2]);   /* (values, indices) */
    nn.max_unpool2d(%p.0, %p.1, output_size=[1, 3, 8, 8], pool_size=[2, 2], strides=[2, 2])

An index is the position in the whole input tensor, row-major (ONNX's: ``((n * C + c) * H
+ h) * W + w``), or with ``storage_order=1`` column-major within each plane (``(n * C + c)
* H * W + w * H + h``); the first maximum of a window wins. ``max_unpool2d`` writes
``data`` at ``indices`` of a zero tensor of the size the pooling it inverts had (its
pooling attributes give it), placed at the top left of ``output_size`` when that is
larger (ONNX's ``output_shape``). NCHW only.
"""
from __future__ import annotations

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..dims import Dim
from ..op import OpPattern
from ..types import TensorType, TupleType
from ._util import check_int_pair, check_pad, kernel, pad4, reg, tensor_arg
from .nn import differ, surely_le, surely_lt
from .pool import _out_hw, _prepare

_ARGMAX, _UNPOOL = "nn.max_pool2d_with_argmax", "nn.max_unpool2d"


def _argmax_rel(types: list, attrs) -> TupleType:
    data = tensor_arg(_ARGMAX, types, 0, "data")
    if data.ndim != 4:
        raise TypeInferenceError(f"{_ARGMAX}: data must be 4-D (NCHW), got {data}")
    n, c, h, w = data.shape
    oh, ow = _out_hw(h, w, attrs)
    if surely_le(oh, 0) or surely_le(ow, 0):
        raise TypeInferenceError(f"{_ARGMAX}: pool_size {list(attrs.pool_size)} does not fit the padded input {data}")
    return TupleType([TensorType((n, c, oh, ow), data.dtype), TensorType((n, c, oh, ow), "int64")])


@kernel
def _argmax(args: list, attrs) -> tuple:
    x = args[0]
    n, c, h, w = x.shape
    low = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    win, (_, _, pt, pl, _, _, _, _, oh, ow) = _prepare(x, attrs, low)
    kh, kw = attrs.pool_size
    flat = win.reshape(n, c, oh, ow, kh * kw)
    pick = flat.argmax(axis=-1)
    values = np.take_along_axis(flat, pick[..., None], axis=-1)[..., 0]
    (sh, sw), (dh, dw) = attrs.strides, attrs.dilation
    rows = np.arange(oh)[:, None] * sh + (pick // kw) * dh - pt
    cols = np.arange(ow)[None, :] * sw + (pick % kw) * dw - pl
    planes = (np.arange(n)[:, None] * c + np.arange(c)[None, :])[:, :, None, None]
    within = cols * h + rows if attrs.storage_order else rows * w + cols
    return np.ascontiguousarray(values), (planes * (h * w) + within).astype(np.int64)


def _pooled_from(data_shape: tuple, attrs) -> tuple:
    """The size of the input the pooling that ``nn.max_unpool2d`` inverts had."""
    pt, pl, pb, pr = pad4(attrs.padding)
    pads = ((pt, pb), (pl, pr))
    return tuple(data_shape[:2]) + tuple((data_shape[2 + i] - 1) * attrs.strides[i] + attrs.pool_size[i]
                                         - sum(pads[i]) for i in range(2))


def _unpool_rel(types: list, attrs) -> TensorType:
    data = tensor_arg(_UNPOOL, types, 0, "data")
    indices = tensor_arg(_UNPOOL, types, 1, "the indices")
    if data.ndim != 4 or indices.ndim != 4 or any(differ(a, b) for a, b in zip(indices.shape, data.shape)) \
            or np.dtype(indices.dtype).kind not in "iu":
        raise TypeInferenceError(f"{_UNPOOL}: data must be 4-D (NCHW) and the indices integers of its shape, got "
                                 f"{data} and {indices}")
    size, pooled = tuple(attrs.output_size), _pooled_from(data.shape, attrs)
    if differ(size[0], data.shape[0]) or differ(size[1], data.shape[1]) \
            or any(surely_lt(s, p) for s, p in zip(size, pooled)):
        raise TypeInferenceError(f"{_UNPOOL}: output_size {list(size)} must keep the data's batch and channels and "
                                 f"hold the unpooled [{', '.join(map(str, pooled))}]")
    return TensorType(size, data.dtype)


@kernel
def _unpool(args: list, attrs) -> np.ndarray:
    data, indices = args
    pooled = _pooled_from(data.shape, attrs)
    flat_out = np.zeros(int(np.prod(pooled)), dtype=data.dtype)
    flat = indices.reshape(-1).astype(np.int64)
    if flat.size and (flat.min() < 0 or flat.max() >= flat_out.size):
        raise IRError(f"{_UNPOOL}: an index is outside the unpooled tensor of {flat_out.size} elements")
    flat_out[flat] = data.reshape(-1)
    out = np.zeros(tuple(attrs.output_size), dtype=data.dtype)
    out[tuple(slice(0, p) for p in pooled)] = flat_out.reshape(pooled)
    return out


def _check_argmax(attrs) -> None:
    for key in ("pool_size", "strides", "dilation"):
        check_int_pair(_ARGMAX, attrs, key)
    check_pad(_ARGMAX, attrs)
    if attrs.layout != "NCHW":
        raise IRError(f"operator {_ARGMAX}: attribute layout must be 'NCHW', got {attrs.layout!r}")
    if attrs.storage_order not in (0, 1):
        raise IRError(f"operator {_ARGMAX}: attribute storage_order must be 0 or 1, got {attrs.storage_order!r}")


def _check_unpool(attrs) -> None:
    for key in ("pool_size", "strides"):
        check_int_pair(_UNPOOL, attrs, key)
    check_pad(_UNPOOL, attrs)
    size = attrs.output_size
    if not (isinstance(size, tuple) and len(size) == 4 and all(
            (isinstance(d, int) and not isinstance(d, bool) and d > 0) or type(d) is Dim for d in size)):
        raise IRError(f"operator {_UNPOOL}: attribute output_size must be 4 positive ints or dimensions (N, C, H, W), "
                      f"got {size!r}")


reg(_ARGMAX, 1, _argmax_rel, _argmax,
    attrs=(("pool_size", None), ("strides", (1, 1)), ("dilation", (1, 1)), ("padding", (0, 0)), ("layout", "NCHW"),
           ("ceil_mode", False), ("storage_order", 0)),
    pattern=OpPattern.OPAQUE, attr_check=_check_argmax,
    summary="2-D max pooling that also returns each maximum's index in the input (a tuple).")
reg(_UNPOOL, 2, _unpool_rel, _unpool,
    attrs=(("output_size", None), ("pool_size", None), ("strides", (1, 1)), ("padding", (0, 0))),
    pattern=OpPattern.OPAQUE, attr_check=_check_unpool,
    summary="Put values back at the indices of nn.max_pool2d_with_argmax (zeros elsewhere).")
