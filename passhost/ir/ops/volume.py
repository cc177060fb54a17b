"""3-D (volumetric) convolution and pooling, as TVM's ``nn.conv3d``, ``nn.max_pool3d`` and
``nn.avg_pool3d``: video and medical-imaging models. Data is ``NCDHW`` and kernels are
``OIDHW`` (the only layouts here); ``padding`` has 1, 3 (``d, h, w``, both sides) or 6
values ``(front, top, left, back, bottom, right)``::

    nn.conv3d(%x, %w, padding=[1, 1, 1])   /* (1, 3, 8, 16, 16) * (4, 3, 3, 3, 3) -> (1, 4, 8, 16, 16) */
    nn.max_pool3d(%x, pool_size=[2, 2, 2], strides=[2, 2, 2])   /* -> (1, 3, 4, 8, 8) */

Pooling has ``dilation``, ``ceil_mode`` and, averaging, ``count_include_pad`` as the 2-D
operators do. The kernels are sliding-window views of the padded input (a ``tensordot``
for convolution, one ``einsum`` with groups).
"""
from __future__ import annotations

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..op import OpPattern
from ..types import TensorType
from ..dims import UndecidableDim
from ._util import dims_differ, kernel, reg, shape_text, tensor_arg
from .nn import _windows, conv_out_dim
from .pool import pool_out_dim

FUSABLE = OpPattern.OUT_ELEMWISE_FUSABLE


def pad6(padding: tuple) -> tuple:
    """``(front, top, left, back, bottom, right)`` of 1, 3 or 6 padding values."""
    p = tuple(int(v) for v in padding)
    return p * 6 if len(p) == 1 else p + p if len(p) == 3 else p


def _check_triple(op: str, attrs, name: str, positive: bool = True, allow_none: bool = False) -> None:
    v = attrs[name]
    if v is None and allow_none:
        return
    if (not isinstance(v, tuple) or len(v) != 3 or not all(isinstance(d, int) and not isinstance(d, bool) for d in v)
            or (positive and min(v) < 1)):
        raise IRError(f"operator {op}: attribute {name} must be 3 {'positive ' if positive else ''}ints, got {v!r}")


def _check_common(op: str, attrs, size_key: str, layouts: tuple) -> None:
    _check_triple(op, attrs, "strides")
    _check_triple(op, attrs, "dilation")
    _check_triple(op, attrs, size_key, allow_none=size_key == "kernel_size")
    p = attrs.padding
    if not isinstance(p, tuple) or len(p) not in (1, 3, 6) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in p):
        raise IRError(f"operator {op}: attribute padding must be 1, 3 or 6 ints >= 0, got {p!r}")
    for key, want in layouts:
        if attrs[key] not in (want, ""):
            raise IRError(f"operator {op}: attribute {key} must be {want!r} (the only layout of 3-D operators), "
                          f"got {attrs[key]!r}")


# -- symbolic dimensions: fail only where it is provable ------------------------------------
def _nonzero(r) -> bool:
    """A remainder that is provably nonzero (a nonzero int; a symbolic one may be 0)."""
    return type(r) is int and r != 0


def _not_positive(out: tuple) -> bool:
    """Whether an output size is provably ``<= 0`` (one that depends on the size variables
    is accepted: the kernel checks it on the bound shapes)."""
    for d in out:
        if type(d) is int:
            if d <= 0:
                return True
        else:
            try:
                if d <= 0:
                    return True
            except UndecidableDim:
                pass
    return False


# -- conv3d ----------------------------------------------------------------------------
def grouped_data(op: str, types: list, groups: int) -> tuple:
    """``(data type, batch, channels)`` of a 3-D convolution's NCDHW data, checked: 5-D, its
    channels divisible by ``groups``."""
    data = tensor_arg(op, types, 0, "data")
    if data.ndim != 5:
        raise TypeInferenceError(f"{op}: data must be 5-D (NCDHW), got {data}")
    n, c = data.shape[:2]
    if _nonzero(c % groups):
        raise TypeInferenceError(f"{op}: data has {c} input channels, not divisible by groups={groups}")
    return data, n, c


def _conv3d_rel(types: list, attrs) -> TensorType:
    op = "nn.conv3d"
    groups = attrs.groups
    data, n, c = grouped_data(op, types, groups)
    if types[1] is None and attrs.channels is not None and attrs.kernel_size is not None:
        types[1] = TensorType((attrs.channels, c // groups) + tuple(attrs.kernel_size), data.dtype)
    weight = tensor_arg(op, types, 1, "the weight")
    if weight.ndim != 5 or weight.dtype != data.dtype or dims_differ(weight.shape[1] * groups, c) \
            or _nonzero(weight.shape[0] % groups):
        raise TypeInferenceError(f"{op}: the weight {weight} does not fit the data {data} with groups={groups} "
                                 "(want O x C/groups x kd x kh x kw, same dtype)")
    p = pad6(attrs.padding)
    out = tuple(conv_out_dim(data.shape[2 + i], p[i], p[3 + i], weight.shape[2 + i], attrs.strides[i],
                             attrs.dilation[i]) for i in range(3))
    if _not_positive(out):
        raise TypeInferenceError(f"{op}: the kernel {shape_text(weight.shape[2:])} does not fit the padded input "
                                 f"{data}")
    return TensorType((n, weight.shape[0]) + out, attrs.out_dtype or data.dtype)


@kernel
def _conv3d(args: list, attrs) -> np.ndarray:
    x, w = args
    out_dtype = attrs.out_dtype or x.dtype
    if np.dtype(out_dtype) != x.dtype:
        x, w = x.astype(out_dtype), w.astype(out_dtype)
    p = pad6(attrs.padding)
    n, c = x.shape[:2]
    o, ig = w.shape[:2]
    k = w.shape[2:]
    out = tuple(conv_out_dim(x.shape[2 + i], p[i], p[3 + i], k[i], attrs.strides[i], attrs.dilation[i])
                for i in range(3))
    xp = np.pad(x, ((0, 0), (0, 0)) + tuple((p[i], p[3 + i]) for i in range(3)))
    win = _windows(xp, k, attrs.strides, attrs.dilation, out)
    g = attrs.groups
    if g == 1:
        res = np.tensordot(win, w, axes=([1, 5, 6, 7], [1, 2, 3, 4])).transpose(0, 4, 1, 2, 3)
    else:
        wing = win.reshape((n, g, c // g) + out + k)
        wg = w.reshape((g, o // g, ig) + k)
        res = np.einsum("ngcdhwijk,gocijk->ngodhw", wing, wg, optimize=True).reshape((n, o) + out)
    return np.ascontiguousarray(res).astype(out_dtype, copy=False)


def _check_conv3d(attrs) -> None:
    _check_common("nn.conv3d", attrs, "kernel_size", (("data_layout", "NCDHW"), ("kernel_layout", "OIDHW"),
                                                       ("out_layout", "NCDHW")))
    if isinstance(attrs.groups, bool) or not isinstance(attrs.groups, int) or attrs.groups < 1:
        raise IRError(f"operator nn.conv3d: attribute groups must be a positive int, got {attrs.groups!r}")


reg("nn.conv3d", 2, _conv3d_rel, _conv3d,
    attrs=(("strides", (1, 1, 1)), ("padding", (0, 0, 0)), ("dilation", (1, 1, 1)), ("groups", 1),
           ("channels", None), ("kernel_size", None), ("data_layout", "NCDHW"), ("kernel_layout", "OIDHW"),
           ("out_layout", ""), ("out_dtype", "")),
    pattern=FUSABLE, attr_check=_check_conv3d,
    summary="3-D convolution (NCDHW data, OIDHW kernels; strides, padding, dilation, groups).")


# -- pool3d ------------------------------------------------------------------------------
def _pool_out(shape: tuple, attrs) -> tuple:
    p = pad6(attrs.padding)
    return tuple(pool_out_dim(shape[2 + i], p[i], p[3 + i], attrs.pool_size[i], attrs.strides[i],
                              attrs.dilation[i], bool(attrs.ceil_mode)) for i in range(3))


def _pool3d_rel(op: str):
    def rel(types: list, attrs) -> TensorType:
        data = tensor_arg(op, types, 0, "data")
        if data.ndim != 5:
            raise TypeInferenceError(f"{op}: data must be 5-D (NCDHW), got {data}")
        out = _pool_out(data.shape, attrs)
        if _not_positive(out):
            raise TypeInferenceError(f"{op}: pool_size {list(attrs.pool_size)} does not fit the padded input {data}")
        return TensorType(data.shape[:2] + out, data.dtype)

    rel.__name__ = f"{op.replace('.', '_')}_rel"
    return rel


def _padded_windows(x: np.ndarray, attrs, pad_value) -> tuple:
    """The windows of ``x`` padded (with the extra end padding ceil mode needs) and the geometry."""
    p = pad6(attrs.padding)
    out = _pool_out(x.shape, attrs)
    widths = []
    for i in range(3):
        extra = max(0, (out[i] - 1) * attrs.strides[i] + (attrs.pool_size[i] - 1) * attrs.dilation[i] + 1
                    - (x.shape[2 + i] + p[i] + p[3 + i]))
        widths.append((p[i], p[3 + i] + extra))
    xp = np.pad(x, ((0, 0), (0, 0)) + tuple(widths), constant_values=pad_value)
    return _windows(xp, attrs.pool_size, attrs.strides, attrs.dilation, out), widths, out


@kernel
def _max_pool3d(args: list, attrs) -> np.ndarray:
    x = args[0]
    low = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    win, _, _ = _padded_windows(x, attrs, low)
    return np.ascontiguousarray(win.max(axis=(-3, -2, -1))).astype(x.dtype, copy=False)


@kernel
def _avg_pool3d(args: list, attrs) -> np.ndarray:
    x = args[0]
    acc = "float64" if x.dtype.kind in "iub" else x.dtype
    win, widths, out = _padded_windows(x.astype(acc, copy=False), attrs, 0)
    total = win.sum(axis=(-3, -2, -1))
    p = pad6(attrs.padding)
    mask = np.zeros(tuple(x.shape[2 + i] + lo + hi for i, (lo, hi) in enumerate(widths)), "float64")
    if attrs.count_include_pad:  # the explicit padding counts, ceil mode's extra end does not
        mask[tuple(slice(0, x.shape[2 + i] + p[i] + p[3 + i]) for i in range(3))] = 1.0
    else:
        mask[tuple(slice(p[i], p[i] + x.shape[2 + i]) for i in range(3))] = 1.0
    count = _windows(mask[None, None], attrs.pool_size, attrs.strides, attrs.dilation, out).sum(axis=(-3, -2, -1))
    res = np.where(count > 0, total / np.maximum(count, 1.0), 0.0)
    return np.ascontiguousarray(res).astype(x.dtype, copy=False)


def _check_pool3d(op: str):
    def check(attrs) -> None:
        _check_common(op, attrs, "pool_size", (("layout", "NCDHW"), ("out_layout", "NCDHW")))
    return check


_POOL_ATTRS = (("pool_size", None), ("strides", (1, 1, 1)), ("dilation", (1, 1, 1)), ("padding", (0, 0, 0)),
               ("layout", "NCDHW"), ("out_layout", ""), ("ceil_mode", False))
reg("nn.max_pool3d", 1, _pool3d_rel("nn.max_pool3d"), _max_pool3d, attrs=_POOL_ATTRS, pattern=FUSABLE,
    attr_check=_check_pool3d("nn.max_pool3d"), summary="3-D max pooling (NCDHW).")
reg("nn.avg_pool3d", 1, _pool3d_rel("nn.avg_pool3d"), _avg_pool3d, attrs=_POOL_ATTRS + (("count_include_pad", False),),
    pattern=FUSABLE, attr_check=_check_pool3d("nn.avg_pool3d"), summary="3-D average pooling (NCDHW).")
