"""Shared helpers for the core operator definitions.

Type-relation helpers raise :class:`~passhost.errors.TypeInferenceError` with a
message that starts with the operator name (``"add: cannot broadcast ..."``).
Kernels are wrapped by :func:`kernel`, which silences numpy floating-point
warnings (overflow, division by zero, invalid) and turns numpy scalars back into
arrays, so every kernel returns ``ndarray`` (or a tuple of them).
"""
from __future__ import annotations

import contextvars
import functools
from typing import Any, Callable, Optional

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..op import OpDef, OpPattern, register_op
from ..dims import broadcast_dim
from ..types import FLOAT_DTYPES, TensorType

__all__ = [
    "reg",
    "kernel",
    "in_float32",
    "FLOAT32_FOR_HALF",
    "SCALED_IN_HALF",
    "ROUNDED_IN_STEPS",
    "quiet_kernels",
    "tensor_arg",
    "norm_axis",
    "norm_axes",
    "broadcast_shape",
    "broadcast_dim",
    "vector_type",
    "prod",
    "check_int_pair",
    "check_pad",
    "pad4",
]


def reg(name: str, num_inputs: int, type_rel: Callable, compute: Optional[Callable] = None, *,
        attrs: tuple = (), pattern: int = OpPattern.OPAQUE, stateful: bool = False,
        summary: str = "", attr_check: Optional[Callable] = None, extra: Optional[dict] = None):
    """Register one core operator (a thin wrapper over :func:`register_op`). An operator
    named in :data:`FLOAT32_FOR_HALF` gets its kernel wrapped by :func:`in_float32` and
    ``extra["half_in_float32"] = True``; one named in :data:`SCALED_IN_HALF` gets
    ``extra["half_scaled_in_half"] = True`` and one in :data:`ROUNDED_IN_STEPS`
    ``extra["half_rounded_in_steps"] = True`` (their kernels widen and round by themselves)."""
    extra = dict(extra or {})
    if name in FLOAT32_FOR_HALF and compute is not None:
        compute = in_float32(compute)
        extra["half_in_float32"] = True
    if name in SCALED_IN_HALF:
        extra["half_scaled_in_half"] = True
    if name in ROUNDED_IN_STEPS:
        extra["half_rounded_in_steps"] = True
    return register_op(OpDef(name=name, num_inputs=num_inputs, type_rel=type_rel, compute=compute,
                             attrs=attrs, pattern=pattern, stateful=stateful, summary=summary,
                             attr_check=attr_check, extra=extra))


#: the core operators whose kernels compute float16, bfloat16 and float8 tensors in float32
#: and round their results once to the tensor's dtype (:func:`in_float32`): those numpy
#: cannot run on ml_dtypes' arrays at all (``einsum``, the convolutions), those that
#: accumulate (numpy sums a bfloat16 array in bfloat16: 4096 x 0.1 gives 32), and those
#: built of several numpy operations (each would round). onnxruntime's kernels do the same:
#: they accumulate in float32 and store the half type. Every other operator runs on the
#: half-precision arrays as they are: it moves or compares elements, or is one numpy ufunc,
#: which ml_dtypes (and numpy, for float16) computes in float32 and rounds once -- the same
#: result. docs/ir.md lists these names.
FLOAT32_FOR_HALF = frozenset([
    # element-wise kernels made of several numpy operations
    "sigmoid", "rsqrt", "erf", "nn.gelu", "nn.leaky_relu", "nn.prelu", "power", "mod", "floor_mod",
    # products
    "nn.conv2d", "nn.conv3d", "nn.conv2d_transpose", "nn.conv3d_transpose", "nn.deformable_conv2d",
    "nn.modulated_deformable_conv2d", "nn.dense", "nn.matmul", "nn.batch_matmul", "einsum",
    # reductions and scans
    "sum", "mean", "prod", "variance", "max", "min", "argmax", "argmin", "cumsum", "cumprod", "topk",
    # normalisations, attention
    "nn.batch_norm", "nn.layer_norm", "nn.instance_norm", "nn.l2_normalize", "nn.lrn", "nn.softmax",
    "nn.log_softmax", "nn.rotary_embedding",
    # pooling
    "nn.avg_pool2d", "nn.avg_pool3d", "nn.global_avg_pool2d", "nn.adaptive_avg_pool2d", "nn.max_pool2d",
    "nn.max_pool3d", "nn.global_max_pool2d", "nn.adaptive_max_pool2d", "nn.max_pool2d_with_argmax",
    "nn.max_unpool2d",
    # resampling, gathering with interpolation, scattering with a reduction, transforms
    "image.resize2d", "image.grid_sample", "nn.upsampling", "nn.upsampling3d", "vision.roi_align",
    "vision.roi_pool", "scatter_nd", "scatter_elements", "dft",
])

#: the normalisations whose half-precision result is not rounded once: they normalise in float32,
#: round the normalised value to the data's dtype and multiply it by their scale in that dtype,
#: as ONNX's function body (``stash_type=1``: ``Cast`` back before ``Mul(Normalized, Scale)``)
#: and Hugging Face's ``weight * x.to(input_dtype)`` do -- so that the graph a half-precision
#: model is exported as fuses into one call exactly. docs/ir.md lists these names.
SCALED_IN_HALF = frozenset(["nn.rms_norm"])

#: the operators whose half-precision result rounds at each step of ONNX's function body, not
#: once: ``nn.attention`` rounds the scaled query and key, their product and the masked scores
#: to the half type, takes the softmax in float32 (``softmax_precision=1``) and rounds the
#: probabilities before their product with the values -- what ONNX's ``Attention`` and Hugging
#: Face's half-precision attention compute, so that such a graph fuses into one call exactly.
#: docs/ir.md lists these names.
ROUNDED_IN_STEPS = frozenset(["nn.attention"])

#: the dtypes :func:`in_float32` widens (numpy scalar types: ``arr.dtype.type`` is cheap)
_HALF_TYPES = frozenset(np.dtype(d).type for d in (
    "float16", "bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"))
_WIDE_TYPES = frozenset([np.float32, np.float64])
_FLOAT_NAMES = FLOAT_DTYPES


def _half_of(value: Any) -> Any:
    """The first half-precision dtype among ``value``'s arrays (a tuple's too), or None;
    and whether it holds a float32/float64 array."""
    half, wide = None, False
    for a in (value if isinstance(value, (tuple, list)) else (value,)):
        t = getattr(getattr(a, "dtype", None), "type", None)
        if t in _HALF_TYPES:
            half = half or a.dtype
        elif t in _WIDE_TYPES:
            wide = True
    return half, wide


def _widen(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return type(value)(_widen(v) for v in value)
    if getattr(getattr(value, "dtype", None), "type", None) in _HALF_TYPES:
        return value.astype(np.float32)
    return value


def _narrow(value: Any, dtype: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return tuple(_narrow(v, dtype) for v in value)
    arr = np.asarray(value)
    return arr.astype(dtype) if arr.dtype == np.float32 else arr


def in_float32(fn: Callable) -> Callable:
    """Wrap kernel ``fn``: called with float16, bfloat16 or float8 arrays, it runs on float32
    copies and its float32 results are rounded once to that dtype (to the ``out_dtype`` or
    ``dtype`` attribute's float dtype when set; kept float32 when a float32 argument came in
    too). Other calls go straight to ``fn``."""

    @functools.wraps(fn)
    def run(args: list, attrs: Any) -> Any:
        half = None
        wide = False
        for a in args:
            h, w = _half_of(a)
            half = half or h
            wide = wide or w
        if half is None:
            return fn(args, attrs)
        if _QUIET.get():
            return _finish(fn([_widen(a) for a in args], attrs), attrs, half, wide)
        with np.errstate(all="ignore"):  # (ml_dtypes warns converting some NaNs)
            return _finish(fn([_widen(a) for a in args], attrs), attrs, half, wide)

    run.half_in_float32 = True  # type: ignore[attr-defined]
    return run


def _finish(out: Any, attrs: Any, half: Any, wide: bool) -> Any:
    """:func:`in_float32`'s float32 results rounded to the dtype they have."""
    want = None
    if attrs:  # (an integer dtype attribute is that of integer results, such as topk's indices)
        want = attrs.get("out_dtype") or attrs.get("dtype")
        want = np.dtype(str(want)) if want and str(want) in _FLOAT_NAMES else None
    if want is not None:
        return _narrow(out, want) if want.type in _HALF_TYPES else out
    return out if wide else _narrow(out, half)


def _as_array(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(np.asarray(v) for v in value)
    return np.asarray(value)


#: set inside :class:`quiet_kernels`: numpy's warnings are off already, so a kernel call
#: need not turn them off (and back on) itself
_QUIET: contextvars.ContextVar = contextvars.ContextVar("passhost_quiet_kernels", default=False)


class quiet_kernels:
    """Context manager: numpy floating-point warnings off, once, for every operator
    kernel called inside (``np.errstate(all="ignore")`` plus a flag the kernels read).

    Each kernel silences the warnings by itself when called alone; a caller that runs
    many kernels in a row (a constant folder, an interpreter) enters this once instead
    of paying for the ``errstate`` in every call::

        with ir.quiet_kernels():
            for call in calls:
                call.op.compute([a.data for a in call.args], call.attrs)
    """

    __slots__ = ("_state", "_token")

    def __enter__(self) -> "quiet_kernels":
        self._state = np.errstate(all="ignore")
        self._state.__enter__()
        self._token = _QUIET.set(True)
        return self

    def __exit__(self, *exc: Any) -> None:
        _QUIET.reset(self._token)
        self._state.__exit__(*exc)


def kernel(fn: Callable) -> Callable:
    """Decorate a numpy kernel: no floating-point warnings, arrays out."""
    quiet = _QUIET.get

    @functools.wraps(fn)
    def run(args: list, attrs: Any) -> Any:
        if quiet():
            return _as_array(fn(args, attrs))
        with np.errstate(all="ignore"):
            return _as_array(fn(args, attrs))

    return run


def tensor_arg(op: str, types: list, i: int, what: str = "") -> TensorType:
    """``types[i]`` as a :class:`TensorType`, or a clear error."""
    t = types[i]
    label = what or f"argument {i}"
    if t is None:
        raise TypeInferenceError(
            f"{op}: the type of {label} is unknown; give the variable a type annotation "
            "(e.g. ir.var(name, shape=..., dtype=...))")
    if type(t) is not TensorType:
        raise TypeInferenceError(f"{op}: {label} must be a tensor, got {t}")
    return t


def norm_axis(op: str, axis: Any, ndim: int, what: str = "axis", extra: int = 0) -> int:
    """Normalise a possibly negative axis into ``[0, ndim + extra)``."""
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeInferenceError(f"{op}: {what} must be an int, got {axis!r}")
    n = ndim + extra
    a = int(axis)
    if not -n <= a < n:
        raise TypeInferenceError(f"{op}: {what}={a} is out of range for a rank-{ndim} tensor "
                                 f"(valid: {-n}..{n - 1})")
    return a + n if a < 0 else a


def norm_axes(op: str, axis: Any, ndim: int, exclude: bool = False) -> tuple:
    """Sorted reduction axes: ``None`` means all, an int one, a sequence several."""
    if axis is None:
        axes = set(range(ndim))
    else:
        items = axis if isinstance(axis, (tuple, list)) else (axis,)
        axes = set()
        for a in items:
            k = norm_axis(op, a, ndim)
            if k in axes:
                raise TypeInferenceError(f"{op}: axis {a} is listed twice in {axis!r}")
            axes.add(k)
    if exclude:
        axes = set(range(ndim)) - axes
    return tuple(sorted(axes))


#: (shape, shape) -> broadcast shape; every binary call of a graph asks again for the
#: same few pairs (bounded in size)
_BROADCAST: dict = {}


def broadcast_shape(a: tuple, b: tuple) -> Optional[tuple]:
    """numpy broadcasting of two shapes, or ``None`` when they do not broadcast."""
    if a == b:
        return a
    known = _BROADCAST.get((a, b))
    if known is not None:
        return known
    out = _broadcast_shape(a, b)
    if out is not None and len(_BROADCAST) < 4096:
        _BROADCAST[(a, b)] = out
    return out


def _broadcast_shape(a: tuple, b: tuple) -> Optional[tuple]:
    la, lb = len(a), len(b)
    n = la if la > lb else lb
    out = []
    for i in range(n):
        da = a[i - n + la] if i - n + la >= 0 else 1
        db = b[i - n + lb] if i - n + lb >= 0 else 1
        if da == db or db == 1:
            out.append(da)
        elif da == 1:
            out.append(db)
        elif type(da) is int and type(db) is int:
            return None
        else:
            d = broadcast_dim(da, db)
            if d is None:
                return None
            out.append(d)
    return tuple(out)


def vector_type(op: str, types: list, i: int, length: int, dtype: str, what: str, reason: str,
                cache: Optional[list] = None) -> TensorType:
    """Check (or fill in, when unknown) a rank-1 parameter of ``length`` elements.

    ``cache`` is a one-element list holding the vector type shared by all the
    parameters of one call (so the result tuple reuses one object).
    """
    t = types[i]
    if t is None:
        if cache is not None and cache[0] is not None:
            t = cache[0]
        else:
            t = TensorType((length,), dtype)
        types[i] = t
    elif type(t) is not TensorType or t.shape != (length,) or t.dtype != dtype:
        expected = TensorType((length,), dtype)
        raise TypeInferenceError(f"{op}: {what} has type {t} but {reason}; expected {expected}")
    if cache is not None and cache[0] is None:
        cache[0] = t
    return t


def prod(values: Any) -> int:
    out = 1
    for v in values:
        out *= int(v)
    return out


def check_int_pair(op: str, attrs: Any, name: str, positive: bool = True, allow_none: bool = False) -> None:
    """Attribute check: ``attrs[name]`` is a pair of ints (positive unless told)."""
    v = attrs[name]
    if v is None and allow_none:
        return
    ok = isinstance(v, tuple) and len(v) == 2 and all(
        isinstance(x, int) and not isinstance(x, bool) and (x > 0 if positive else x >= 0) for x in v)
    if not ok:
        kind = "positive" if positive else "non-negative"
        raise IRError(f"operator {op}: attribute {name} must be two {kind} ints, got {v!r}")


def check_pad(op: str, attrs: Any, name: str = "padding") -> None:
    """Attribute check: padding has 1, 2 or 4 non-negative ints."""
    v = attrs[name]
    ok = isinstance(v, tuple) and len(v) in (1, 2, 4) and all(
        isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v)
    if not ok:
        raise IRError(f"operator {op}: attribute {name} must be 1, 2 or 4 non-negative ints "
                      f"(top, left, bottom, right), got {v!r}")


def pad4(padding: tuple) -> tuple:
    """``(top, left, bottom, right)`` from 1, 2 or 4 padding values (TVM's get_pad_tuple2d)."""
    if len(padding) == 1:
        p = padding[0]
        return (p, p, p, p)
    if len(padding) == 2:
        return (padding[0], padding[1], padding[0], padding[1])
    return tuple(padding)


# -- symbolic dimensions: products, broadcasting checks, shape attributes ---------------
from ..dims import ANY, Dim, UndecidableDim, provably_unequal  # noqa: E402  (for the helpers below)


def dim_prod(values: Any) -> Any:
    """The product of dimensions (ints, :class:`~passhost.ir.dims.Dim`, ``?``); an int when
    all are ints (:func:`prod` without its ``int()``)."""
    out: Any = 1
    for v in values:
        out = out * v
    return out


def broadcasts_to(src: tuple, dst: tuple) -> bool:
    """Whether ``src`` may broadcast to exactly ``dst`` (numpy rules): ``False`` only when
    it provably cannot (a longer ``src``, or an axis provably neither 1 nor ``dst``'s)."""
    if len(src) > len(dst):
        return False
    for d, s in zip(src, dst[len(dst) - len(src):]):
        if d == s or d == 1:
            continue
        if provably_unequal(d, 1) and provably_unequal(d, s):
            return False
    return True


def check_dims_attr(op: str, key: str, value: Any, message: str, nonneg: bool = True) -> None:
    """Attribute check of a list of dimensions: ints (``>= 0`` when ``nonneg``) or
    :class:`~passhost.ir.dims.Dim` (not provably negative when ``nonneg``); ``?`` is
    refused with its own message, anything else with ``message`` (``{v}``: the value)."""
    if not isinstance(value, tuple):
        raise IRError(message.format(v=repr(value)))
    for d in value:
        if d is ANY:
            raise IRError(f"operator {op}: attribute {key}={format_dims(value)} holds ?: a shape attribute "
                          "needs known dimensions (ints or size-variable expressions such as batch or seq + 1)")
        if type(d) is int:
            if nonneg and d < 0:
                raise IRError(message.format(v=repr(value)))
        elif type(d) is Dim:
            if nonneg and provably_negative(d):
                raise IRError(f"operator {op}: attribute {key}={format_dims(value)} has the negative dimension {d}")
        else:
            raise IRError(message.format(v=repr(value)))


def provably_negative(d: Any) -> bool:
    """Whether the dimension ``d`` is ``< 0`` for every binding (``?``: no)."""
    try:
        return d is not ANY and d < 0
    except UndecidableDim:
        return False


def format_dims(shape: Any) -> str:
    """``[batch, 3, seq + 1]``: a list of dimensions as the text format writes it."""
    return "[" + ", ".join(str(d) for d in shape) + "]"


def unify_dim(a: Any, b: Any) -> Any:
    """Of two dimensions that must be equal (and are not provably unequal): the static one
    if any, else a size-variable expression rather than ``?``, else ``a``."""
    if type(a) is int:
        return a
    if type(b) is int or a is ANY:
        return b
    return a


def provably_greater(a: Any, b: Any) -> bool:
    """Whether ``a > b`` for every binding (undecidable, or ``?``: no)."""
    try:
        return a > b
    except UndecidableDim:
        return False


def shape_text(shape: Any) -> str:
    """A shape as messages write it: ``(2, 3)`` (a static one, as ``str(tuple)``),
    ``(batch, 3)``."""
    for d in shape:
        if type(d) is not int:
            break
    else:
        return str(tuple(shape))
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def dims_differ(a: Any, b: Any) -> bool:
    """Whether two dimensions that must be equal are not: ints that differ, or symbolic
    ones that provably differ (``n`` and ``n + 1``; not ``n`` and ``m``)."""
    return a != b and ((type(a) is int and type(b) is int) or provably_unequal(a, b))
