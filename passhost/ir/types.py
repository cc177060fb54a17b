"""Types of the IR: tensors, tuples and functions.

Types are small immutable *values*: two ``TensorType((1, 3), "float32")`` objects
compare equal and hash alike. Their printed form is TVM's::

    Tensor[(1, 64, 56, 56), float32]    # rank 4
    Tensor[(3), float32]                # rank 1 (no trailing comma)
    float32                             # rank 0
    (Tensor[(2), float32], int32)       # tuple
    fn (Tensor[(2), float32]) -> Tensor[(2), float32]
"""
from __future__ import annotations

from typing import Iterable, Sequence

import ml_dtypes  # noqa: F401  (registers bfloat16, float8_*, int4 and uint4 with numpy)
import numpy as np

from ..errors import IRError
from .dims import ANY, Dim, parse_dim

__all__ = ["Type", "TensorType", "TupleType", "FuncType", "DTYPES", "FLOAT_DTYPES", "LOW_PRECISION_DTYPES",
           "check_dtype", "is_float"]

#: the low-precision dtypes numpy has only through ``ml_dtypes`` (their names are
#: ml_dtypes'; the ONNX plugin maps them to BFLOAT16, FLOAT8E4M3FN, ..., INT4, UINT4).
#: ``np.dtype(name)`` knows them once ``ml_dtypes`` is imported, which this module does.
LOW_PRECISION_DTYPES = frozenset(
    ["bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "int4", "uint4"]
)

#: dtypes the IR knows, with their numpy names
DTYPES = frozenset(
    ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"]
) | LOW_PRECISION_DTYPES

#: the floating-point dtypes (numpy calls most of ml_dtypes' kind ``V``, not ``f``:
#: test a dtype with :func:`is_float`, never with ``np.dtype(d).kind == "f"``)
FLOAT_DTYPES = frozenset(
    ["float16", "float32", "float64", "bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
     "float8_e5m2fnuz"]
)


def is_float(dtype: object) -> bool:
    """Whether ``dtype`` (a name, numpy dtype or array) is a floating-point dtype,
    ml_dtypes' ``bfloat16`` and ``float8_*`` included."""
    if isinstance(dtype, str):
        return dtype in FLOAT_DTYPES
    if isinstance(dtype, np.ndarray):
        dtype = dtype.dtype
    try:
        return np.dtype(dtype).name in FLOAT_DTYPES
    except TypeError:
        return False

_set = object.__setattr__


#: numpy dtype object -> its name (numpy's ``dtype.name`` is a slow Python property,
#: and every new Constant asks for it)
_NUMPY_NAMES: dict = {}


def check_dtype(dtype: object) -> str:
    """Return ``dtype`` as a canonical dtype string, or raise :class:`IRError`."""
    if isinstance(dtype, str) and dtype in DTYPES:
        return dtype
    if type(dtype).__module__.startswith("numpy"):
        known = _NUMPY_NAMES.get(dtype)
        if known is not None:
            return known
    name = getattr(dtype, "name", None)  # numpy dtype / numpy scalar type
    if isinstance(name, str) and name in DTYPES and type(dtype).__module__.startswith("numpy"):
        _NUMPY_NAMES[dtype] = name
    if name is None and isinstance(dtype, type):
        name = getattr(dtype, "__name__", None)
    if isinstance(name, str) and name in DTYPES:
        return name
    raise IRError(
        f"unknown dtype {dtype!r}: use one of {', '.join(sorted(DTYPES))}"
    )


class Type:
    """Base class of all types (immutable, compared structurally)."""

    __slots__ = ("_text",)

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __str__(self) -> str:
        text = self._text
        if text is None:
            text = _render_nested(self)
            _set(self, "_text", text)
        return text

    def _render(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError


def _shape_dims(shape: Iterable) -> tuple:
    """``shape`` as a tuple of dimensions: ints (numpy ints converted), :class:`Dim` and
    ``?``; a string is read as a dimension (``"batch"``, ``"seq + 1"``, ``"?"``)."""
    try:
        dims = tuple(shape)
    except TypeError:
        raise IRError(f"tensor shape must be a sequence of dimensions, got {shape!r}") from None
    for d in dims:
        if type(d) is not int:
            break
    else:
        for d in dims:
            if d < 0:
                raise IRError(f"tensor shape {dims} has a negative dimension")
        return dims
    out = []
    for d in dims:
        if type(d) is int or type(d) is Dim or d is ANY:
            pass
        elif isinstance(d, str):
            try:
                d = parse_dim(d)
            except (ValueError, IRError) as err:
                raise IRError(f"tensor shape {shape!r}: {d!r} is not a dimension ({err})") from None
        elif isinstance(d, bool) or not hasattr(d, "__index__"):
            raise IRError(f"tensor shape must be a sequence of ints, size variables or ?, got {shape!r}")
        else:
            d = int(d.__index__())
        if type(d) is int and d < 0:
            raise IRError(f"tensor shape {tuple(map(str, out + [d]))} has a negative dimension")
        out.append(d)
    return tuple(out)


class TensorType(Type):
    """A tensor of ``shape`` and ``dtype``. A dimension is an int, a symbolic
    :class:`~passhost.ir.dims.Dim` (a size variable or an expression over them) or ``?``
    (:data:`~passhost.ir.dims.ANY`); a string names one.

    >>> str(TensorType((1, 3), "float32"))
    'Tensor[(1, 3), float32]'
    >>> str(TensorType(("batch", "seq*2", "?"), "int64"))
    'Tensor[(batch, 2*seq, ?), int64]'
    """

    __slots__ = ("shape", "dtype", "_hash")

    def __init__(self, shape: Iterable = (), dtype: str = "float32") -> None:
        dims = _shape_dims(shape)
        dtype = check_dtype(dtype)
        _set(self, "shape", dims)
        _set(self, "dtype", dtype)
        _set(self, "_hash", hash((dims, dtype)))
        _set(self, "_text", None)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def concrete_shape(self) -> tuple:
        """TVM-compatible alias of :attr:`shape`."""
        return self.shape

    @property
    def is_static(self) -> bool:
        """Whether every dimension is an int (no size variable, no ``?``)."""
        for d in self.shape:
            if type(d) is not int:
                return False
        return True

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is not TensorType:
            return NotImplemented
        return self._hash == other._hash and self.shape == other.shape and self.dtype == other.dtype  # type: ignore[attr-defined]

    def __ne__(self, other: object) -> bool:
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    def __hash__(self) -> int:
        return self._hash

    def _render(self) -> str:
        if not self.shape:
            return self.dtype
        if len(self.shape) == 1:
            return f"Tensor[({self.shape[0]}), {self.dtype}]"
        return f"Tensor[({', '.join(map(str, self.shape))}), {self.dtype}]"

    def __repr__(self) -> str:
        return f"TensorType({self.shape!r}, {self.dtype!r})"


class TupleType(Type):
    """A tuple of field types. ``TupleType([a, b])`` prints ``(a, b)``; one field ``(a,)``."""

    __slots__ = ("fields", "_hash")

    def __init__(self, fields: Sequence[Type]) -> None:
        fields = tuple(fields)
        for f in fields:
            if not isinstance(f, Type):
                raise IRError(f"TupleType fields must be types, got {f!r}")
        _set(self, "fields", fields)
        _set(self, "_hash", hash(("tuple",) + fields))
        _set(self, "_text", None)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is not TupleType:
            return NotImplemented
        return self._hash == other._hash and _equal_nested(self, other)  # type: ignore[attr-defined]

    def __ne__(self, other: object) -> bool:
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    def __hash__(self) -> int:
        return self._hash

    def __len__(self) -> int:
        return len(self.fields)

    def __getitem__(self, i: int) -> Type:
        return self.fields[i]

    def __repr__(self) -> str:
        return f"TupleType({list(self.fields)!r})"


class FuncType(Type):
    """The type of a function: ``fn (T1, T2) -> R``."""

    __slots__ = ("arg_types", "ret_type", "_hash")

    def __init__(self, arg_types: Sequence[Type], ret_type: Type) -> None:
        args = tuple(arg_types)
        for a in args + (ret_type,):
            if not isinstance(a, Type):
                raise IRError(f"FuncType needs types, got {a!r}")
        _set(self, "arg_types", args)
        _set(self, "ret_type", ret_type)
        _set(self, "_hash", hash(("fn", args, ret_type)))
        _set(self, "_text", None)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is not FuncType:
            return NotImplemented
        return self._hash == other._hash and _equal_nested(self, other)  # type: ignore[attr-defined]

    def __ne__(self, other: object) -> bool:
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"FuncType({list(self.arg_types)!r}, {self.ret_type!r})"


class IncompleteType(Type):
    """A type not known yet (TVM's ``IncompleteType``, printed ``?``).

    Type inference gives it, for a moment, to the return type of a recursive function
    without a return annotation while it reads that type off the function's
    non-recursive branches; no typed expression keeps it. Two incomplete types are equal
    only if they are the same object.
    """

    __slots__ = ()

    def __init__(self) -> None:
        _set(self, "_text", None)

    def _render(self) -> str:
        return "?"

    def __repr__(self) -> str:
        return "IncompleteType()"


def has_incomplete(t: Type) -> bool:
    """Whether ``t`` is or holds an :class:`IncompleteType` (explicit stack)."""
    stack = [t]
    while stack:
        x = stack.pop()
        tx = type(x)
        if tx is IncompleteType:
            return True
        if tx is TupleType:
            stack.extend(x.fields)
        elif tx is FuncType:
            stack.extend(x.arg_types)
            stack.append(x.ret_type)
    return False


#: pairs of distinct tuple or function types found equal: ``(id(a), id(b)) -> (a, b)``
#: (holding both, so an id is not reused while its entry lives); cleared at its bound
_PROVEN: dict = {}
_MAX_PROVEN = 1 << 16


def _equal_nested(a: Type, b: Type) -> bool:
    """``a == b`` for tuple and function types, with an explicit stack: two equal tuple
    types 100,000 levels deep compare at the default recursion limit (tensor types and
    other leaves compare with their own ``==``).

    A pair found equal is remembered. When a pass rebuilds a deep nest (closures returning
    closures, tuples of tuples), each level's new type holds the previous level's new type
    and is compared with the old one, which holds the old previous one: the pair compared
    one level down. Each level then costs a lookup instead of a walk to the bottom
    (100,000 nested closures through FuseOps and its checks: from hours to a second)."""
    proven = _PROVEN
    if (id(a), id(b)) in proven:
        return True
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if x is y or (id(x), id(y)) in proven:
            continue
        tx = type(x)
        if tx is not type(y):
            return False
        if tx is TupleType:
            if x._hash != y._hash or len(x.fields) != len(y.fields):
                return False
            stack.extend(zip(x.fields, y.fields))
        elif tx is FuncType:
            if x._hash != y._hash or len(x.arg_types) != len(y.arg_types):
                return False
            stack.append((x.ret_type, y.ret_type))
            stack.extend(zip(x.arg_types, y.arg_types))
        elif not x == y:
            return False
    if len(proven) >= _MAX_PROVEN:
        proven.clear()
    proven[(id(a), id(b))] = (a, b)
    return True


def _render_nested(t: Type) -> str:
    """The text of ``t``, written piece by piece with an explicit stack: a tuple type
    100,000 levels deep prints at the default recursion limit and in linear time (only
    ``t``'s own text is kept; nested types that already have theirs reuse it)."""
    out: list = []
    stack: list = [t]
    while stack:
        x = stack.pop()
        if type(x) is str:
            out.append(x)
        elif x._text is not None:
            out.append(x._text)
        elif isinstance(x, TupleType):
            fields = x.fields
            pieces: list = ["("]
            for i, f in enumerate(fields):
                if i:
                    pieces.append(", ")
                pieces.append(f)
            pieces.append(",)" if len(fields) == 1 else ")")
            stack.extend(reversed(pieces))
        elif isinstance(x, FuncType):
            pieces = ["fn ("]
            for i, a in enumerate(x.arg_types):
                if i:
                    pieces.append(", ")
                pieces.append(a)
            pieces += [") -> ", x.ret_type]
            stack.extend(reversed(pieces))
        else:
            out.append(x._render())
    return "".join(out)
