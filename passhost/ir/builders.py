"""Builders: ``ir.var``, ``ir.const`` and one function per core operator.

They mirror TVM's ``relay`` Python API::

    x = ir.var("x", shape=(1, 3), dtype="float32")
    y = ir.add(x, ir.const(1.0))          # add(%x, 1f)
    z = ir.sum(y, axis=1, keepdims=True)  # sum(%0, axis=[1], keepdims=True)

Neural-network builders live in :mod:`passhost.ir.nn`.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from ..errors import IRError
from .dims import Dim, parse_dim
from .expr import Call, Constant, Expr, Tuple, Var
from .op import Op
from .types import TensorType, Type, check_dtype

__all__ = [
    "var", "const",
    "add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "mod", "floor_mod",
    "less", "greater", "equal", "not_equal", "less_equal", "greater_equal", "where",
    "logical_and", "logical_or", "logical_xor", "logical_not",
    "arange", "cumsum", "cumprod", "topk", "one_hot", "ndarray_size",
    "negative", "exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "cast", "clip",
    "erf", "floor", "ceil", "round", "abs", "sign", "sin", "cos",
    "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "left_shift", "right_shift",
    "reshape", "transpose", "expand_dims", "squeeze", "concatenate", "split", "einsum", "dft",
    "gather_nd", "scatter_nd", "scatter_elements", "reverse_sequence",
    "strided_slice", "take", "gather", "broadcast_to", "tile", "repeat",
    "full", "zeros", "ones", "full_like", "zeros_like", "ones_like",
    "sum", "mean", "max", "min", "prod", "variance", "argmax", "argmin",
    "layout_transform", "shape_of", "stop_fusion", "shape_value", "trilu",
    "slice_like", "reverse_reshape",
]

_OPS: dict = {}


def _op(name: str) -> Op:
    op = _OPS.get(name)
    if op is None:
        op = _OPS[name] = Op.get(name)
    return op


def _call(name: str, args: Sequence[Any], attrs: Optional[dict] = None) -> Call:
    return Call(_op(name), [_expr(a, args) for a in args], attrs)


def _expr(value: Any, siblings: Sequence[Any]) -> Expr:
    """An argument as an expression; plain numbers become constants of a sibling's dtype
    (float32 when no sibling's type is known)."""
    if isinstance(value, Expr):
        return value
    dtype = None
    for s in siblings:
        if isinstance(s, Expr):
            t = s._checked_type if s._checked_type is not None else getattr(s, "type_annotation", None)
            if isinstance(t, TensorType):
                dtype = t.dtype
                break
    if dtype is None and isinstance(value, (int, float)) and not isinstance(value, bool):
        dtype = "float32"  # as Expr arithmetic sugar does: ``x + 1`` adds 1f
    if isinstance(value, (bool, int, float, np.generic, np.ndarray, list)):
        return const(value, dtype)
    raise IRError(f"operator arguments must be expressions or numbers, got {value!r}")


# -- leaves ----------------------------------------------------------------------------
def var(name: str, type_annotation: Any = None, *, shape: Optional[Sequence[int]] = None,
        dtype: str = "float32") -> Var:
    """A variable ``%name``.

    :param type_annotation: a :class:`Type`, or a dtype string meaning a scalar tensor
        of that dtype, or ``None`` (inferred later, or from ``shape``)
    :param shape: builds ``TensorType(shape, dtype)`` when no annotation is given
    :param dtype: dtype used with ``shape``
    """
    if isinstance(type_annotation, str):
        type_annotation = TensorType((), check_dtype(type_annotation))
    elif type_annotation is None and shape is not None:
        type_annotation = TensorType(shape, dtype)
    elif type_annotation is not None and not isinstance(type_annotation, Type):
        if isinstance(type_annotation, (tuple, list)):
            raise IRError(f"var {name!r}: pass a shape with shape=..., not as the type annotation")
        raise IRError(f"var {name!r}: type_annotation must be a Type or a dtype string, got {type_annotation!r}")
    return Var(name, type_annotation)


def const(value: Any, dtype: Optional[str] = None) -> Constant:
    """A constant with TVM's dtype rules.

    Python ``float`` → float32, ``int`` → int32, ``bool`` → bool; numpy float64 →
    float32 and int64 → int32 when ``dtype`` is not given.
    """
    if isinstance(value, Constant):
        return value if dtype is None or value.dtype == dtype else Constant(value.data.astype(check_dtype(dtype)))
    if dtype is not None:
        dtype = check_dtype(dtype)
        return Constant(np.array(value, dtype=dtype))
    if isinstance(value, bool):
        return Constant(np.array(value, dtype="bool"))
    if isinstance(value, int):
        return Constant(np.array(value, dtype="int32"))
    if isinstance(value, float):
        return Constant(np.array(value, dtype="float32"))
    arr = np.asarray(value)
    if arr.dtype == np.float64:
        arr = arr.astype("float32")
    elif arr.dtype == np.int64:
        arr = arr.astype("int32")
    return Constant(arr)


# -- element-wise ------------------------------------------------------------------------
def _binary(name: str):
    def build(lhs: Any, rhs: Any) -> Call:
        return _call(name, (lhs, rhs))

    build.__name__ = build.__qualname__ = name
    build.__doc__ = f"``{name}(lhs, rhs)`` with numpy broadcasting."
    return build


def _unary(name: str, doc: str):
    def build(data: Expr) -> Call:
        return _call(name, (data,))

    build.__name__ = build.__qualname__ = name.split(".")[-1]
    build.__doc__ = doc
    return build


add = _binary("add")
subtract = _binary("subtract")
multiply = _binary("multiply")
divide = _binary("divide")
power = _binary("power")
maximum = _binary("maximum")
minimum = _binary("minimum")
mod = _binary("mod")
bitwise_and = _binary("bitwise_and")
bitwise_or = _binary("bitwise_or")
bitwise_xor = _binary("bitwise_xor")
left_shift = _binary("left_shift")
right_shift = _binary("right_shift")
floor_mod = _binary("floor_mod")
less = _binary("less")
greater = _binary("greater")
equal = _binary("equal")
not_equal = _binary("not_equal")
less_equal = _binary("less_equal")
greater_equal = _binary("greater_equal")
logical_and = _binary("logical_and")
logical_or = _binary("logical_or")
logical_xor = _binary("logical_xor")

negative = _unary("negative", "``-x``.")
exp = _unary("exp", "``e**x``.")
log = _unary("log", "Natural logarithm.")
sqrt = _unary("sqrt", "Square root.")
rsqrt = _unary("rsqrt", "``1 / sqrt(x)``.")
sigmoid = _unary("sigmoid", "``1 / (1 + exp(-x))``.")
tanh = _unary("tanh", "Hyperbolic tangent.")
erf = _unary("erf", "Gauss error function.")
floor = _unary("floor", "Round towards minus infinity.")
ceil = _unary("ceil", "Round towards plus infinity.")
round = _unary("round", "Round to the nearest integer (halves to even, as ONNX Round).")  # noqa: A001
abs = _unary("abs", "Absolute value.")  # noqa: A001
sign = _unary("sign", "Sign: -1, 0 or 1.")
sin = _unary("sin", "Sine.")
cos = _unary("cos", "Cosine.")
tan = _unary("tan", "Tangent.")
asin = _unary("asin", "Inverse sine.")
acos = _unary("acos", "Inverse cosine.")
atan = _unary("atan", "Inverse tangent.")
sinh = _unary("sinh", "Hyperbolic sine.")
cosh = _unary("cosh", "Hyperbolic cosine.")
asinh = _unary("asinh", "Inverse hyperbolic sine.")
acosh = _unary("acosh", "Inverse hyperbolic cosine.")
atanh = _unary("atanh", "Inverse hyperbolic tangent.")
bitwise_not = _unary("bitwise_not", "Bitwise not of an integer or bool tensor.")
logical_not = _unary("logical_not", "Element-wise not of a bool tensor.")
stop_fusion = _unary("annotation.stop_fusion", "``annotation.stop_fusion(x)``: a barrier for FuseOps.")


def where(condition: Any, x: Any, y: Any) -> Call:
    """``x`` where ``condition`` holds, else ``y`` (broadcasting)."""
    return _call("where", (condition, x, y))


def cast(data: Expr, dtype: str, saturate: bool = True) -> Call:
    """Convert ``data`` to ``dtype`` (to a float8 dtype, out-of-range values become the
    type's largest finite value, or, with ``saturate=False``, NaN or an infinity)."""
    if saturate:
        return _call("cast", (data,), {"dtype": check_dtype(dtype)})
    return _call("cast", (data,), {"dtype": check_dtype(dtype), "saturate": False})


def clip(a: Expr, a_min: float, a_max: float) -> Call:
    """Clip values into ``[a_min, a_max]`` (stored as floats, as TVM does)."""
    return _call("clip", (a,), {"a_min": float(a_min), "a_max": float(a_max)})


def arange(start: Any, stop: Any = None, step: Any = 1, dtype: str = "float32") -> Call:
    """``arange``: values ``start, start + step, ...`` below ``stop`` (``arange(n)``: ``0..n-1``)."""
    nums = [v if v is None or type(v) is Dim or isinstance(v, (int, float)) and not isinstance(v, bool)
            else _number(v) for v in (start, stop, step)]
    return Call(_op("arange"), (), {"start": nums[0], "stop": nums[1], "step": nums[2], "dtype": check_dtype(dtype)})


def _number(v: Any) -> Any:
    arr = np.asarray(v)
    if arr.size != 1 or arr.dtype.kind not in "iuf":
        raise IRError(f"arange: bounds must be numbers, got {v!r}")
    return arr.reshape(()).item()


def cumsum(data: Expr, axis: Optional[int] = None, dtype: str = "", exclusive: bool = False) -> Call:
    """``cumsum``: running sums along ``axis`` (None: of the flattened data)."""
    return _call("cumsum", (data,), {"axis": None if axis is None else int(axis), "dtype": dtype,
                                     "exclusive": bool(exclusive)})


def cumprod(data: Expr, axis: Optional[int] = None, dtype: str = "", exclusive: bool = False) -> Call:
    """``cumprod``: running products along ``axis`` (None: of the flattened data)."""
    return _call("cumprod", (data,), {"axis": None if axis is None else int(axis), "dtype": dtype,
                                      "exclusive": bool(exclusive)})


def topk(data: Expr, k: int = 1, axis: int = -1, ret_type: str = "both", is_ascend: bool = False,
         dtype: str = "int32") -> Call:
    """``topk``: the ``k`` largest values along ``axis`` and their indices (``ret_type="both"``:
    a tuple; ``k=0``: all, sorted)."""
    return _call("topk", (data,), {"k": int(k), "axis": int(axis), "ret_type": ret_type,
                                   "is_ascend": bool(is_ascend), "dtype": check_dtype(dtype)})


def one_hot(indices: Expr, on_value: Any, off_value: Any, depth: int, axis: int = -1,
            dtype: str = "float32") -> Call:
    """``one_hot``: a new axis of ``depth`` positions, ``on_value`` at the index, ``off_value`` elsewhere."""
    on, off = (v if isinstance(v, Expr) else Constant(np.asarray(v, dtype=check_dtype(dtype)))
               for v in (on_value, off_value))
    return _call("one_hot", (indices, on, off), {"depth": int(depth), "axis": int(axis), "dtype": check_dtype(dtype)})


def ndarray_size(data: Expr, dtype: str = "int32") -> Call:
    """``ndarray_size``: the number of elements of ``data`` as a scalar."""
    return _call("ndarray_size", (data,), {"dtype": check_dtype(dtype)})


def shape_of(data: Expr, dtype: str = "int32") -> Call:
    """The shape of ``data`` as a 1-D tensor."""
    return _call("shape_of", (data,), {"dtype": check_dtype(dtype)})


# -- shapes --------------------------------------------------------------------------
def _ints(value: Any, what: str) -> tuple:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),)
    try:
        out = tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise IRError(f"{what} must be an int or a sequence of ints, got {value!r}") from None
    return out


def _dims(value: Any, what: str) -> tuple:
    """A shape attribute: ints, size variables and expressions over them (a string is
    read as one: ``"batch"``, ``"seq + 1"``)."""
    if type(value) is Dim or isinstance(value, (int, np.integer, str)) and not isinstance(value, bool):
        value = (value,)
    try:
        items = list(value)
    except TypeError:
        raise IRError(f"{what} must be a sequence of dimensions, got {value!r}") from None
    out = []
    for v in items:
        if type(v) is Dim:
            out.append(v)
        elif isinstance(v, str):
            try:
                out.append(parse_dim(v))
            except (ValueError, IRError) as err:
                raise IRError(f"{what}: {v!r} is not a dimension ({err})") from None
        elif isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            out.append(int(v))
        else:
            raise IRError(f"{what} must be a sequence of dimensions, got {value!r}")
    return tuple(out)


def trilu(data: Expr, k: Any = 0, upper: bool = True) -> Call:
    """``trilu``: the upper (``upper``) or lower triangle of the last two axes of ``data``,
    ``k`` diagonals over (an int or a scalar int64 expression); zeros elsewhere."""
    k = k if isinstance(k, Expr) else Constant(np.asarray(int(k), dtype="int64"))
    return Call(_op("trilu"), (data, k), {"upper": bool(upper)})


def shape_value(values: Any, dtype: str = "int64") -> Call:
    """``shape_value``: dimensions (ints, size variables, expressions) as an integer
    tensor; a list gives a 1-D tensor, one dimension a scalar::

        ir.shape_value(["batch", "seq", 768])   # shape_value(values=[batch, seq, 768])  Tensor[(3), int64]
        ir.shape_value("seq + 1")               # shape_value(values=seq + 1)            int64
    """
    if isinstance(values, (list, tuple)):
        attr: Any = _dims(values, "shape_value values")
    else:
        attr = _dims(values, "shape_value values")[0]
    return Call(_op("shape_value"), (), {"values": attr, "dtype": check_dtype(dtype)})


def reshape(data: Expr, newshape: Any, allowzero: bool = False) -> Call:
    """``reshape(data, newshape)`` (TVM's codes 0, -1, -2, -3, -4 are accepted; with
    ``allowzero`` a 0 is an empty dimension, as in TVM and ONNX)."""
    attrs = {"newshape": _dims(newshape, "reshape newshape")}
    if allowzero:
        attrs["allowzero"] = True
    return _call("reshape", (data,), attrs)


def transpose(data: Expr, axes: Optional[Sequence[int]] = None) -> Call:
    """Permute axes (reverse them when ``axes`` is None)."""
    return _call("transpose", (data,), {"axes": None if axes is None else _ints(axes, "transpose axes")})


def expand_dims(data: Expr, axis: int, num_newaxis: int = 1) -> Call:
    """Insert ``num_newaxis`` size-1 axes at ``axis``."""
    return _call("expand_dims", (data,), {"axis": int(axis), "num_newaxis": int(num_newaxis)})


def squeeze(data: Expr, axis: Optional[Any] = None) -> Call:
    """Remove size-1 axes (all of them when ``axis`` is None)."""
    return _call("squeeze", (data,), {"axis": None if axis is None else _ints(axis, "squeeze axis")})


def einsum(data: Any, equation: str) -> Call:
    """Einstein summation of ``data`` (a list/tuple of expressions or a Tuple expression)
    by numpy's ``equation``, e.g. ``einsum([a, b], "bij,bjk->bik")``."""
    if isinstance(data, (list, tuple)):
        data = Tuple([_expr(d, data) for d in data])
    elif not isinstance(data, Expr):
        raise IRError(f"einsum needs a list of expressions or a Tuple, got {data!r}")
    return Call(_op("einsum"), (data,), {"equation": str(equation)})


def dft(re_data: Expr, im_data: Expr, inverse: bool = False) -> Call:
    """The discrete Fourier transform of ``re_data + i im_data`` along the last axis (TVM's
    ``dft``); tuple-valued: ``call[0]`` the real part, ``call[1]`` the imaginary part."""
    return _call("dft", (re_data, im_data), {"inverse": bool(inverse)})


def gather_nd(data: Expr, indices: Expr, batch_dims: int = 0) -> Call:
    """Gather at the coordinates along ``indices``' first axis (TVM's layout)."""
    return _call("gather_nd", (data, indices), {"batch_dims": int(batch_dims)})


def scatter_nd(data: Expr, indices: Expr, updates: Expr, mode: str = "update") -> Call:
    """A copy of ``data`` with ``updates`` written at the coordinates along ``indices``' first axis."""
    return _call("scatter_nd", (data, indices, updates), {"mode": str(mode)})


def scatter_elements(data: Expr, indices: Expr, updates: Expr, axis: int = 0, reduction: str = "update") -> Call:
    """A copy of ``data`` with ``updates[i][j]`` written at index ``indices[i][j]`` along ``axis``."""
    return _call("scatter_elements", (data, indices, updates), {"axis": int(axis), "reduction": str(reduction)})


def reverse_sequence(data: Expr, seq_lengths: Expr, seq_axis: int = 1, batch_axis: int = 0) -> Call:
    """Reverse the first ``seq_lengths[b]`` elements along ``seq_axis`` of each batch entry ``b``."""
    return _call("reverse_sequence", (data, seq_lengths), {"seq_axis": int(seq_axis), "batch_axis": int(batch_axis)})


def concatenate(data: Any, axis: int = 0) -> Call:
    """Join tensors along ``axis``; ``data`` is a list/tuple of expressions or a Tuple expression."""
    if isinstance(data, (list, tuple)):
        data = Tuple([_expr(d, data) for d in data])
    elif not isinstance(data, Expr):
        raise IRError(f"concatenate needs a list of expressions or a Tuple, got {data!r}")
    return Call(_op("concatenate"), (data,), {"axis": int(axis)})


def split(data: Expr, indices_or_sections: Any, axis: int = 0) -> Call:
    """Split along ``axis`` into equal sections (int) or at indices (list); tuple-valued.

    Use ``call[i]`` (a :class:`TupleGetItem`) to get one part.
    """
    if isinstance(indices_or_sections, (int, np.integer)) and not isinstance(indices_or_sections, bool):
        ios: Any = int(indices_or_sections)
    else:
        ios = _ints(indices_or_sections, "split indices_or_sections")
    return _call("split", (data,), {"indices_or_sections": ios, "axis": int(axis)})


def strided_slice(data: Expr, begin: Any, end: Any, strides: Any = None, axes: Any = None,
                  slice_mode: str = "end") -> Call:
    """``strided_slice``: ``data[begin:end:strides]`` per axis (``axes``: which axes the
    lists refer to, all from 0 when None); ``slice_mode="size"`` reads ``end`` as sizes
    (-1: to the end). ``strides`` defaults to ``[1]``, as in TVM."""
    return _call("strided_slice", (data,), {
        "begin": _dims(begin, "strided_slice begin"), "end": _dims(end, "strided_slice end"),
        "strides": _ints(strides if strides is not None else (1,), "strided_slice strides"),
        "slice_mode": slice_mode, "axes": None if axes is None else _ints(axes, "strided_slice axes")})


def take(data: Expr, indices: Any, axis: Optional[int] = None, batch_dims: int = 0, mode: str = "clip") -> Call:
    """``take``: elements of ``data`` at integer ``indices`` along ``axis`` (the flattened
    data when None); ``mode`` ``clip`` clamps indices, ``wrap`` takes them modulo the
    axis, ``fast`` uses them as they are (negative ones count from the end)."""
    if not isinstance(indices, Expr):
        indices = const(np.asarray(indices, dtype="int32"))
    return _call("take", (data, indices), {"batch_dims": int(batch_dims),
                                           "axis": None if axis is None else int(axis), "mode": mode})


def gather(data: Expr, axis: int, indices: Any) -> Call:
    """``gather`` (ONNX GatherElements): ``out[..i..] = data[..indices[..i..]..]`` along ``axis``;
    the argument order is TVM's ``gather(data, axis, indices)``."""
    if not isinstance(indices, Expr):
        indices = const(np.asarray(indices, dtype="int32"))
    return _call("gather", (data, indices), {"axis": int(axis)})


def broadcast_to(data: Expr, shape: Any) -> Call:
    """``broadcast_to``: broadcast ``data`` to ``shape`` (numpy rules)."""
    return _call("broadcast_to", (data,), {"shape": _dims(shape, "broadcast_to shape")})


def tile(data: Expr, reps: Any) -> Call:
    """``tile``: repeat the tensor ``reps[i]`` times along each axis (numpy.tile)."""
    return _call("tile", (data,), {"reps": _dims(reps, "tile reps")})


def repeat(data: Expr, repeats: int, axis: int) -> Call:
    """``repeat``: repeat each element ``repeats`` times along ``axis`` (numpy.repeat)."""
    return _call("repeat", (data,), {"repeats": int(repeats), "axis": int(axis)})


def _shape(shape: Any, what: str) -> tuple:
    return () if shape is None else _dims(shape, what)


def full(fill_value: Any, shape: Any = (), dtype: str = "") -> Call:
    """``full``: a tensor of ``shape`` filled with the scalar ``fill_value`` (an expression
    or a number); ``dtype`` empty means the fill value's dtype."""
    return _call("full", (fill_value,), {"shape": _shape(shape, "full shape"),
                                         "dtype": check_dtype(dtype) if dtype else ""})


def zeros(shape: Any, dtype: str = "float32") -> Call:
    """``zeros``: a tensor of zeros (no arguments; shape and dtype are attributes)."""
    return Call(_op("zeros"), (), {"shape": _shape(shape, "zeros shape"), "dtype": check_dtype(dtype)})


def ones(shape: Any, dtype: str = "float32") -> Call:
    """``ones``: a tensor of ones (no arguments; shape and dtype are attributes)."""
    return Call(_op("ones"), (), {"shape": _shape(shape, "ones shape"), "dtype": check_dtype(dtype)})


def full_like(data: Expr, fill_value: Any) -> Call:
    """``full_like``: shaped and typed like ``data``, filled with the scalar ``fill_value``."""
    return _call("full_like", (data, fill_value))


def zeros_like(data: Expr) -> Call:
    """``zeros_like``: zeros shaped and typed like ``data``."""
    return _call("zeros_like", (data,))


def ones_like(data: Expr) -> Call:
    """``ones_like``: ones shaped and typed like ``data``."""
    return _call("ones_like", (data,))


def layout_transform(data: Expr, src_layout: str, dst_layout: str) -> Call:
    """Convert ``data`` from ``src_layout`` to ``dst_layout`` (e.g. NCHW → NHWC)."""
    return _call("layout_transform", (data,), {"src_layout": src_layout, "dst_layout": dst_layout})


# -- reductions --------------------------------------------------------------------------
def _axis(axis: Any) -> Any:
    return None if axis is None else _ints(axis, "reduction axis")


def _reduce(name: str):
    def build(data: Expr, axis: Any = None, keepdims: bool = False, exclude: bool = False) -> Call:
        return _call(name, (data,), {"axis": _axis(axis), "keepdims": bool(keepdims), "exclude": bool(exclude)})

    build.__name__ = build.__qualname__ = name
    build.__doc__ = (f"``{name}`` over ``axis`` (None: all axes; ``exclude``: all but those; "
                     "``keepdims``: keep reduced axes as size 1).")
    return build


sum = _reduce("sum")  # noqa: A001  (TVM's name)
mean = _reduce("mean")
max = _reduce("max")  # noqa: A001
min = _reduce("min")  # noqa: A001
prod = _reduce("prod")


def _arg_reduce(name: str, what: str):
    def build(data: Expr, axis: Any = None, keepdims: bool = False, exclude: bool = False,
              select_last_index: bool = False) -> Call:
        return _call(name, (data,), {"axis": _axis(axis), "keepdims": bool(keepdims),
                                     "select_last_index": bool(select_last_index),
                                     "exclude": bool(exclude)})

    build.__name__ = build.__qualname__ = name
    build.__doc__ = (f"Index (int32) of the {what} over ``axis`` (None: all axes, flattened); "
                     "``select_last_index`` picks the last of equal values.")
    return build


argmax = _arg_reduce("argmax", "maximum")
argmin = _arg_reduce("argmin", "minimum")


def variance(data: Expr, mean: Optional[Expr] = None, axis: Any = None, keepdims: bool = False,
             exclude: bool = False, unbiased: bool = False) -> Call:
    """Variance over ``axis``; ``mean`` defaults to ``mean(data, axis, keepdims=True, exclude)``."""
    if mean is None:
        mean = _call("mean", (data,), {"axis": _axis(axis), "keepdims": True, "exclude": bool(exclude)})
    return _call("variance", (data, mean), {"axis": _axis(axis), "keepdims": bool(keepdims),
                                            "exclude": bool(exclude), "unbiased": bool(unbiased)})


def slice_like(data: Expr, shape_like: Expr, axes: Optional[Sequence[int]] = None) -> Call:
    """``slice_like``: ``data`` sliced from the start of each of ``axes`` (None: every axis
    both have) to ``shape_like``'s size there (TVM's ``relay.slice_like``)."""
    return _call("slice_like", (data, shape_like), {"axes": None if axes is None else _ints(axes, "slice_like axes")})


def reverse_reshape(data: Expr, newshape: Any) -> Call:
    """``contrib_reverse_reshape``: ``reshape`` whose special codes (0, -1, -2, -3) are read
    from the right (TVM's ``relay.reverse_reshape``)."""
    return _call("contrib_reverse_reshape", (data,), {"newshape": _dims(newshape, "reverse_reshape newshape")})
