"""Element-wise and broadcasting operators.

Unary: ``negative exp log sqrt rsqrt sigmoid tanh nn.relu nn.leaky_relu cast clip
erf floor ceil round abs sign sin cos tan asin acos atan sinh cosh asinh acosh atanh``
(pattern ELEMWISE; ``round`` rounds half to
even, as ONNX ``Round`` and numpy do; ``erf`` is exact to double precision) and the opaque helpers ``annotation.stop_fusion`` and ``shape_of``.
Binary (numpy broadcasting, equal dtypes): ``add subtract multiply divide power
maximum minimum``, the comparisons ``less greater equal not_equal less_equal
greater_equal`` (bool result) and ``logical_and logical_or logical_xor`` (bools;
``logical_not`` is unary), ``bitwise_and bitwise_or bitwise_xor`` (integers or bools;
``bitwise_not`` is unary) and ``left_shift right_shift`` (typed for any dtype as TVM's
``BroadcastRel`` types them, computed for integers); ternary ``where``. ``nn.gelu`` (attribute ``approximate``,
"none" or "tanh") is ``0.5 * x * (1 + erf(x / sqrt(2)))``::

    nn.gelu(%x)     ==    multiply(multiply(%x, 0.5f), add(1f, erf(multiply(%x, 0.707107f))))
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from ...errors import EvaluationError, IRError, TypeInferenceError
from ..op import OpPattern
from ..types import TensorType, check_dtype, is_float
from ._util import broadcast_shape, kernel, reg, tensor_arg

E, B, OPAQUE = OpPattern.ELEMWISE, OpPattern.BROADCAST, OpPattern.OPAQUE


# -- unary -------------------------------------------------------------------------
def _identity_rel(name: str):
    def rel(types: list, attrs) -> TensorType:
        return tensor_arg(name, types, 0, "data")

    rel.__name__ = f"{name.replace('.', '_')}_rel"
    return rel


def _unary_kernel(fn):
    @kernel
    def run(args: list, attrs) -> np.ndarray:
        x = args[0]
        return np.asarray(fn(x)).astype(x.dtype, copy=False)

    return run


def _rsqrt(x):
    return 1.0 / np.sqrt(x)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _relu(x):
    return np.maximum(x, np.zeros((), dtype=x.dtype))


_ERF = np.frompyfunc(math.erf, 1, 1)


def _erf(x):
    if x.size == 0:
        return x
    return _ERF(x.astype("float64")).astype("float64")


_UNARY = [
    ("negative", np.negative, "Numerical negative, -x."),
    ("exp", np.exp, "Exponential, e**x."),
    ("log", np.log, "Natural logarithm."),
    ("sqrt", np.sqrt, "Square root."),
    ("rsqrt", _rsqrt, "Reciprocal square root, 1/sqrt(x)."),
    ("sigmoid", _sigmoid, "Logistic sigmoid, 1/(1+exp(-x))."),
    ("tanh", np.tanh, "Hyperbolic tangent."),
    ("nn.relu", _relu, "Rectified linear unit, max(x, 0)."),
    ("erf", _erf, "Gauss error function."),
    ("floor", np.floor, "Round towards minus infinity."),
    ("ceil", np.ceil, "Round towards plus infinity."),
    ("round", np.round, "Round to the nearest integer, halves to even."),
    ("abs", np.abs, "Absolute value."),
    ("sign", np.sign, "Sign: -1, 0 or 1."),
    ("sin", np.sin, "Sine."),
    ("cos", np.cos, "Cosine."),
    ("tan", np.tan, "Tangent."),
    ("asin", np.arcsin, "Inverse sine."),
    ("acos", np.arccos, "Inverse cosine."),
    ("atan", np.arctan, "Inverse tangent."),
    ("sinh", np.sinh, "Hyperbolic sine."),
    ("cosh", np.cosh, "Hyperbolic cosine."),
    ("asinh", np.arcsinh, "Inverse hyperbolic sine."),
    ("acosh", np.arccosh, "Inverse hyperbolic cosine."),
    ("atanh", np.arctanh, "Inverse hyperbolic tangent."),
]
for _name, _fn, _doc in _UNARY:
    reg(_name, 1, _identity_rel(_name), _unary_kernel(_fn), pattern=E, summary=_doc,
        extra={"layout_agnostic": True})


@kernel
def _leaky_relu(args: list, attrs) -> np.ndarray:
    x = args[0]
    return np.where(x > 0, x, x * attrs.alpha).astype(x.dtype, copy=False)


@kernel
def _gelu(args: list, attrs) -> np.ndarray:
    x = args[0]
    w = x.astype("float64")
    if attrs.approximate == "tanh":
        y = 0.5 * w * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (w + 0.044715 * w ** 3)))
    else:
        y = 0.5 * w * (1.0 + _erf(w / math.sqrt(2.0)))
    return y.astype(x.dtype, copy=False)


def _check_gelu(attrs) -> None:
    if attrs["approximate"] not in ("none", "tanh"):
        raise IRError(f"operator nn.gelu: approximate must be 'none' or 'tanh', got {attrs['approximate']!r}")


def _float_rel(name: str):
    def rel(types: list, attrs) -> TensorType:
        t = tensor_arg(name, types, 0, "data")
        if not t.dtype.startswith(("float", "bfloat")):
            raise TypeInferenceError(f"{name}: data must be a float tensor, got {t.dtype}")
        return t

    rel.__name__ = f"{name.replace('.', '_')}_rel"
    return rel


reg("nn.gelu", 1, _float_rel("nn.gelu"), _gelu, attrs=(("approximate", "none"),), pattern=E,
    attr_check=_check_gelu, extra={"layout_agnostic": True},
    summary="GELU: x * Phi(x), 0.5 * x * (1 + erf(x / sqrt(2))) (approximate='tanh': the tanh form).")


reg("nn.leaky_relu", 1, _identity_rel("nn.leaky_relu"), _leaky_relu, attrs=(("alpha", 0.25),),
    pattern=E, summary="Leaky ReLU: x if x > 0 else alpha * x.", extra={"layout_agnostic": True})


@kernel
def _clip(args: list, attrs) -> np.ndarray:
    x = args[0]
    return np.clip(x, attrs.a_min, attrs.a_max).astype(x.dtype, copy=False)


def _check_clip(attrs) -> None:
    for key in ("a_min", "a_max"):
        v = attrs[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise IRError(f"operator clip: attribute {key} must be a number, got {v!r}")


reg("clip", 1, _identity_rel("clip"), _clip, attrs=(("a_min", None), ("a_max", None)), pattern=E,
    attr_check=_check_clip, summary="Clip values into [a_min, a_max].", extra={"layout_agnostic": True})


def _cast_rel(types: list, attrs) -> TensorType:
    t = tensor_arg("cast", types, 0, "data")
    if t.dtype == attrs.dtype:
        return t
    return TensorType(t.shape, attrs.dtype)


#: the largest finite value of each float8 dtype (a saturating cast clips to it)
_FLOAT8_MAX = {d: float(ml_dtypes.finfo(d).max)
               for d in ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")}


@kernel
def _cast(args: list, attrs) -> np.ndarray:
    """numpy's (and ml_dtypes') conversion, which rounds to nearest even. To a float8 dtype
    with ``saturate`` (the default, as ONNX's ``Cast``), a value beyond the type's range,
    infinities included, becomes its largest finite value of that sign, and NaN stays NaN;
    without, it becomes NaN (``e4m3fn``, the ``fnuz`` types) or an infinity (``e5m2``)."""
    x = args[0]
    top = _FLOAT8_MAX.get(attrs.dtype) if attrs.saturate else None
    if top is not None:
        if x.dtype.name in _FLOAT8_MAX:  # (float8 to float8: clipped in float32, exact)
            x = x.astype(np.float32)
        elif not is_float(x.dtype):
            x = x.astype(np.float64)
        x = np.clip(x, -top, top)  # (exact: every float8 maximum is a float16, bfloat16 and float32)
    return x.astype(attrs.dtype, copy=False)


def _check_dtype_attr(op: str):
    def check(attrs) -> None:
        try:
            check_dtype(attrs.dtype)
        except IRError as err:
            raise IRError(f"operator {op}: attribute dtype: {err}") from None

    return check


reg("cast", 1, _cast_rel, _cast, attrs=(("dtype", None), ("saturate", True)), pattern=E,
    attr_check=_check_dtype_attr("cast"),
    summary="Convert to another dtype (to float8: out-of-range values saturate unless saturate=False).",
    extra={"layout_agnostic": True})


@kernel
def _identity(args: list, attrs) -> np.ndarray:
    return args[0]


reg("annotation.stop_fusion", 1, _identity_rel("annotation.stop_fusion"), _identity, pattern=OPAQUE,
    summary="Identity that FuseOps never fuses across (removed by FuseOps).")


def _shape_of_rel(types: list, attrs) -> TensorType:
    t = tensor_arg("shape_of", types, 0, "data")
    return TensorType((t.ndim,), attrs.dtype)


@kernel
def _shape_of(args: list, attrs) -> np.ndarray:
    return np.array(args[0].shape, dtype=attrs.dtype)


reg("shape_of", 1, _shape_of_rel, _shape_of, attrs=(("dtype", "int32"),), pattern=OPAQUE,
    attr_check=_check_dtype_attr("shape_of"), summary="The shape of a tensor as a 1-D tensor.")


# -- binary ------------------------------------------------------------------------
def _binary_rel(name: str, result_dtype: str = ""):
    def rel(types: list, attrs) -> TensorType:
        a, b = types[0], types[1]
        if a is None and b is not None:
            types[0] = a = b
        elif b is None and a is not None:
            types[1] = b = a
        a = tensor_arg(name, types, 0, "the left operand")
        b = tensor_arg(name, types, 1, "the right operand")
        if a.dtype != b.dtype:
            raise TypeInferenceError(f"{name}: dtype mismatch between {a} and {b}; cast one operand")
        dtype = result_dtype or a.dtype
        if a is b or a.shape == b.shape:
            shape = a.shape
        else:
            shape = broadcast_shape(a.shape, b.shape)
            if shape is None:
                raise TypeInferenceError(f"{name}: cannot broadcast {a} with {b}")
        if dtype == a.dtype:
            if shape == a.shape:
                return a
            if shape == b.shape:
                return b
        return TensorType(shape, dtype)

    rel.__name__ = f"{name}_rel"
    return rel


def _divide(a, b):
    if a.dtype.kind in "iu":
        # C (truncating) integer division, as TVM does; x / 0 gives 0 here
        q = np.floor_divide(a, b)
        fix = (q < 0) & (q * b != a)
        return np.where(b == 0, np.zeros_like(q), q + fix.astype(q.dtype))
    return np.true_divide(a, b)


def _power(a, b):
    if a.dtype.kind in "iu":
        return np.power(a.astype("float64"), b.astype("float64"))
    return np.power(a, b)


def _binary_kernel(fn, result_dtype: str = ""):
    @kernel
    def run(args: list, attrs) -> np.ndarray:
        a, b = args
        return np.asarray(fn(a, b)).astype(result_dtype or a.dtype, copy=False)

    return run


_BINARY = [
    ("add", np.add, "Element-wise addition with broadcasting."),
    ("subtract", np.subtract, "Element-wise subtraction with broadcasting."),
    ("multiply", np.multiply, "Element-wise multiplication with broadcasting."),
    ("divide", _divide, "Element-wise division with broadcasting (integers truncate)."),
    ("power", _power, "Element-wise power with broadcasting."),
    ("maximum", np.maximum, "Element-wise maximum with broadcasting."),
    ("minimum", np.minimum, "Element-wise minimum with broadcasting."),
    ("mod", np.fmod, "Element-wise truncated remainder (C's fmod: the sign of the dividend) with broadcasting."),
    ("floor_mod", np.mod, "Element-wise floored remainder (the sign of the divisor) with broadcasting."),
]
for _name, _fn, _doc in _BINARY:
    reg(_name, 2, _binary_rel(_name), _binary_kernel(_fn), pattern=B, summary=_doc)

_COMPARE = [
    ("less", np.less, "x < y"),
    ("greater", np.greater, "x > y"),
    ("equal", np.equal, "x == y"),
    ("not_equal", np.not_equal, "x != y"),
    ("less_equal", np.less_equal, "x <= y"),
    ("greater_equal", np.greater_equal, "x >= y"),
]
for _name, _fn, _doc in _COMPARE:
    reg(_name, 2, _binary_rel(_name, "bool"), _binary_kernel(_fn, "bool"), pattern=B,
        summary=f"Element-wise comparison {_doc} with broadcasting (bool result).")


def _bool_rel(name: str, n: int):
    inner = _binary_rel(name, "bool") if n == 2 else None

    def rel(types: list, attrs) -> TensorType:
        for i in range(n):
            t = tensor_arg(name, types, i)
            if t.dtype != "bool":
                raise TypeInferenceError(f"{name}: arguments must be bool tensors, argument {i} is {t.dtype}")
        return inner(types, attrs) if inner is not None else types[0]

    rel.__name__ = f"{name}_rel"
    return rel


for _name, _fn in (("logical_and", np.logical_and), ("logical_or", np.logical_or), ("logical_xor", np.logical_xor)):
    reg(_name, 2, _bool_rel(_name, 2), _binary_kernel(_fn, "bool"), pattern=B,
        summary=f"Element-wise {_name.split('_')[1]} of bool tensors with broadcasting.")
reg("logical_not", 1, _bool_rel("logical_not", 1), _unary_kernel(np.logical_not), pattern=E,
    summary="Element-wise not of a bool tensor.", extra={"layout_agnostic": True})


def _int_rel(name: str, n: int, kinds: str):
    """The relation of an element-wise op on integer (``kinds`` "iu") or also bool ("iub") tensors."""
    inner = _binary_rel(name) if n == 2 else None

    def rel(types: list, attrs) -> TensorType:
        for i in range(n):
            t = tensor_arg(name, types, i)
            if np.dtype(t.dtype).kind not in kinds:
                what = "integer or bool" if "b" in kinds else "integer"
                raise TypeInferenceError(f"{name}: arguments must be {what} tensors, argument {i} is {t.dtype}")
        return inner(types, attrs) if inner is not None else types[0]

    rel.__name__ = f"{name}_rel"
    return rel


def _shift(name: str, fn, fill_sign: bool):
    """``fn`` (numpy's shift) as ONNX defines it: a shift by a negative amount or by the type's
    width or more gives 0, or, shifting right, the sign (-1 for a negative signed value).

    The relation is TVM's ``BroadcastRel`` (any dtype, both the same), so a float shift types;
    only its computation needs integers (topi refuses it too)."""
    def run(a, b):
        if a.dtype.kind not in "iu":
            raise EvaluationError(f"{name}: no kernel shifts {a.dtype} tensors; the type relation accepts any "
                                  "dtype (as TVM's BroadcastRel does) but the computation needs integers")
        wide = (b < 0) | (b >= a.dtype.itemsize * 8)
        out = fn(a, np.where(wide, 0, b).astype(a.dtype, copy=False))
        fill = np.where(a < 0, -1, 0).astype(a.dtype) if fill_sign and a.dtype.kind == "i" else np.zeros_like(out)
        return np.where(wide, fill, out)
    return run


for _name, _fn in (("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or), ("bitwise_xor", np.bitwise_xor)):
    reg(_name, 2, _int_rel(_name, 2, "iub"), _binary_kernel(_fn), pattern=B,
        summary=f"Element-wise bitwise {_name.split('_')[1]} of integer or bool tensors with broadcasting.")
reg("bitwise_not", 1, _int_rel("bitwise_not", 1, "iub"), _unary_kernel(np.invert), pattern=E,
    summary="Element-wise bitwise not of an integer or bool tensor.", extra={"layout_agnostic": True})
reg("left_shift", 2, _binary_rel("left_shift"), _binary_kernel(_shift("left_shift", np.left_shift, False)), pattern=B,
    summary="Element-wise x << y with broadcasting (typed for any dtype, as TVM; computed for integers).")
reg("right_shift", 2, _binary_rel("right_shift"), _binary_kernel(_shift("right_shift", np.right_shift, True)),
    pattern=B, summary="Element-wise x >> y with broadcasting (typed for any dtype, as TVM; computed for integers, "
    "arithmetic for signed ones).")
# (a shift by a negative amount or by the width or more: 0, or the sign shifting right, as ONNX defines it)


def _where_rel(types: list, attrs) -> TensorType:
    op = "where"
    x, y = types[1], types[2]
    if x is None and y is not None:
        types[1] = x = y
    elif y is None and x is not None:
        types[2] = y = x
    cond = tensor_arg(op, types, 0, "the condition")
    x = tensor_arg(op, types, 1, "the true operand")
    y = tensor_arg(op, types, 2, "the false operand")
    if x.dtype != y.dtype:
        raise TypeInferenceError(f"{op}: dtype mismatch between {x} and {y}; cast one operand")
    shape = broadcast_shape(x.shape, y.shape)
    if shape is None:
        raise TypeInferenceError(f"{op}: cannot broadcast {x} with {y}")
    full = broadcast_shape(cond.shape, shape)
    if full is None:
        raise TypeInferenceError(f"{op}: cannot broadcast the condition {cond} with {TensorType(shape, x.dtype)}")
    if full == x.shape:
        return x
    if full == y.shape:
        return y
    return TensorType(full, x.dtype)


@kernel
def _where(args: list, attrs) -> np.ndarray:
    c, x, y = args
    return np.where(c.astype(bool, copy=False), x, y).astype(x.dtype, copy=False)


reg("where", 3, _where_rel, _where, pattern=B,
    summary="Select from x where the condition holds, else from y (broadcasting).")
