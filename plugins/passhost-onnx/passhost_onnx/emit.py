"""One ONNX emitter per passhost operator: ``fn(em, call, args) -> output name(s)``.

``args`` are the names of the call's arguments (a tuple of names for a tuple argument);
``call.checked_type`` gives static output shapes, so reshapes are written with concrete
target shapes.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import onnx

from passhost import ir
from passhost.errors import FormatError
from passhost.ir import pad6

from .dim_values import reshape_target, unit_axes
from .dtypes import to_onnx_type

__all__ = ["EMITTERS", "emitter"]

EMITTERS: dict = {}


def emitter(*names: str) -> Callable:
    def register(fn: Callable) -> Callable:
        for n in names:
            EMITTERS[n] = fn
        return fn
    return register


def _simple(onnx_op: str):
    def emit(em, call, args):
        return em.one(onnx_op, list(args))
    return emit


for _ours, _theirs in {
    "add": "Add", "subtract": "Sub", "multiply": "Mul", "divide": "Div", "power": "Pow", "maximum": "Max",
    "minimum": "Min", "equal": "Equal", "less": "Less", "greater": "Greater", "less_equal": "LessOrEqual",
    "greater_equal": "GreaterOrEqual", "negative": "Neg", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
    "sigmoid": "Sigmoid", "tanh": "Tanh", "nn.relu": "Relu", "erf": "Erf", "floor": "Floor",
    "ceil": "Ceil", "abs": "Abs", "sign": "Sign", "sin": "Sin", "cos": "Cos", "round": "Round",
    "tan": "Tan", "asin": "Asin", "acos": "Acos", "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh",
    "asinh": "Asinh", "acosh": "Acosh", "atanh": "Atanh",
}.items():
    EMITTERS[_ours] = _simple(_theirs)


def _tensor(call: ir.Call, i: int) -> ir.TensorType:
    return call.args[i].checked_type


def _out_shape(call: ir.Call) -> tuple:
    return tuple(call.checked_type.shape)


def _select(em, dtype: str, cond: str, x: str, y: str) -> str:
    """``Where(cond, x, y)`` on ``dtype`` values: onnxruntime has no 8- or 16-bit integer
    Where kernel, so those select in int32 and cast back, and none for bools, which select
    with And/Or."""
    if dtype == "bool":  # (onnxruntime has no bool Where either): c and x, or not c and y
        return em.one("Or", [em.one("And", [cond, x]), em.one("And", [em.one("Not", [cond]), y])])
    if dtype not in ("int8", "int16"):
        return em.one("Where", [cond, x, y])
    wide = [em.one("Cast", [a], to=to_onnx_type("int32")) for a in (x, y)]
    return em.one("Cast", [em.one("Where", [cond, *wide])], to=to_onnx_type(dtype))


@emitter("where")
def _where(em, call, args):
    return _select(em, _tensor(call, 1).dtype, *args)


def _logical(onnx_op: str, bool_op: str):
    def emit(em, call, args):  # ONNX's Max/Min take no bools: on bools they are Or/And
        return em.one(bool_op if _tensor(call, 0).dtype == "bool" else onnx_op, list(args))
    return emit


EMITTERS["maximum"] = _logical("Max", "Or")
EMITTERS["minimum"] = _logical("Min", "And")


@emitter("mod")
def _mod(em, call, args):
    return em.one("Mod", list(args), fmod=1)


@emitter("floor_mod")
def _floor_mod(em, call, args):
    """Mod(fmod=0) on integers. ONNX allows floating-point operands only with fmod=1
    before opset 28, so there the truncated remainder takes the divisor's sign by hand,
    as numpy's mod does: ``r = Mod(a, b, fmod=1); where(r != 0 and (r < 0) != (b < 0), r + b, r)``."""
    if np.dtype(_tensor(call, 0).dtype).kind != "f":
        return em.one("Mod", list(args), fmod=0)
    a, b = args
    r = em.one("Mod", [a, b], fmod=1)
    zero = em.const(np.zeros((), _tensor(call, 0).dtype))
    nonzero = em.one("Not", [em.one("Equal", [r, zero])])
    signs_differ = em.one("Xor", [em.one("Less", [r, zero]), em.one("Less", [b, zero])])
    return em.one("Where", [em.one("And", [nonzero, signs_differ]), em.one("Add", [r, b]), r])


def _bitwise(onnx_op: str, bool_op: str):
    def emit(em, call, args):  # ONNX's Bitwise* take integers only (opset 18): on bools they are And/Or/Xor/Not
        if _tensor(call, 0).dtype == "bool":
            return em.one(bool_op, list(args))
        if em.opset < 18:
            raise FormatError(f"{call.op.name} on integers needs ONNX's {onnx_op} (opset 18); export at opset 18 "
                              "or later")
        return em.one(onnx_op, list(args))
    return emit


for _ours, _theirs, _bool in (("bitwise_and", "BitwiseAnd", "And"), ("bitwise_or", "BitwiseOr", "Or"),
                              ("bitwise_xor", "BitwiseXor", "Xor"), ("bitwise_not", "BitwiseNot", "Not")):
    EMITTERS[_ours] = _bitwise(_theirs, _bool)


def _shift(direction: str):
    """BitShift; before opset 28 ONNX's takes unsigned integers only, and a shift by the
    width or more is undefined, so the emitted graph spells out passhost's semantics: such
    a shift (or a negative amount) gives 0, or the sign shifting right; a signed value is
    shifted as its unsigned bit pattern, a negative one right as the complement of the
    complement shifted (arithmetic shift)."""
    def emit(em, call, args):
        dtype = _tensor(call, 0).dtype
        a, b = args
        if np.dtype(dtype).kind == "u" and em.opset >= 28:
            return em.one("BitShift", [a, b], direction=direction)
        udtype = np.dtype(dtype).str.replace("i", "u")
        utype = to_onnx_type(np.dtype(udtype).name)

        def c(v):
            return em.const(np.asarray(v, dtype))

        wide = em.one("Or", [em.one("Less", [b, c(0)]),
                             em.one("Not", [em.one("Less", [b, c(np.dtype(dtype).itemsize * 8)])])])
        amount = em.one("Cast", [_select(em, dtype, wide, c(0), b)], to=utype)
        signed = np.dtype(dtype).kind == "i"
        negative = em.one("Less", [a, c(0)]) if signed and direction == "RIGHT" else None
        x = a
        if negative is not None:  # ~a = -a - 1 for negatives: shift a non-negative value
            x = _select(em, dtype, negative, em.one("Sub", [em.one("Neg", [a]), c(1)]), a)
        shifted = em.one("BitShift", [em.one("Cast", [x], to=utype) if signed else x, amount], direction=direction)
        if signed:
            shifted = em.one("Cast", [shifted], to=to_onnx_type(dtype))
        if negative is not None:
            shifted = _select(em, dtype, negative, em.one("Sub", [em.one("Neg", [shifted]), c(1)]), shifted)
            fill = _select(em, dtype, negative, c(-1), c(0))
        else:
            fill = c(0)
        return _select(em, dtype, wide, fill, shifted)
    return emit


EMITTERS["left_shift"] = _shift("LEFT")
EMITTERS["right_shift"] = _shift("RIGHT")


@emitter("not_equal")
def _not_equal(em, call, args):
    return em.one("Not", [em.one("Equal", list(args))])


@emitter("rsqrt")
def _rsqrt(em, call, args):
    return em.one("Reciprocal", [em.one("Sqrt", list(args))])


@emitter("cast")
def _cast(em, call, args):
    if not call.attrs.saturate and call.attrs.dtype.startswith("float8"):  # (ONNX's default saturates)
        return em.one("Cast", list(args), to=to_onnx_type(call.attrs.dtype), saturate=0)
    return em.one("Cast", list(args), to=to_onnx_type(call.attrs.dtype))


@emitter("clip")
def _clip(em, call, args):
    dtype = _tensor(call, 0).dtype
    lo = em.const(np.asarray(call.attrs.a_min).astype(dtype))
    hi = em.const(np.asarray(call.attrs.a_max).astype(dtype))
    return em.one("Clip", [args[0], lo, hi])


@emitter("nn.leaky_relu")
def _leaky_relu(em, call, args):
    return em.one("LeakyRelu", list(args), alpha=float(call.attrs.alpha))


def _check_layout(call: ir.Call, **want: str) -> None:
    for attr, value in want.items():
        got = getattr(call.attrs, attr)
        if got not in ("", value):
            raise FormatError(f"{call.op.name} with {attr}={got!r} cannot be exported to ONNX (it needs {value})")


def _pads(padding, nd: int = 2) -> list:
    """ONNX's ``pads`` (all begins, then all ends) of a 2-D or 3-D operator's ``padding``."""
    if nd == 3:
        return [int(p) for p in pad6(padding)]
    p = tuple(int(x) for x in padding)
    if len(p) == 1:
        p = p * 4
    elif len(p) == 2:
        p = p + p
    return list(p)


_LAYOUTS = {2: ("NCHW", "OIHW"), 3: ("NCDHW", "OIDHW")}


@emitter("nn.conv2d", "nn.conv3d")
def _conv(em, call, args):
    kshape = _tensor(call, 1).shape
    nd = len(kshape) - 2
    data, kernel = _LAYOUTS[nd]
    _check_layout(call, data_layout=data, kernel_layout=kernel, out_layout=data)
    a = call.attrs
    return em.one("Conv", list(args), kernel_shape=list(kshape[2:]), strides=list(a.strides),
                  pads=_pads(a.padding, nd), dilations=list(a.dilation), group=int(a.groups))


@emitter("nn.bias_add")
def _bias_add(em, call, args):
    nd = len(_tensor(call, 0).shape)
    axis = call.attrs.axis % nd
    bias = args[1]
    tail = nd - axis - 1
    if tail:
        value = em.values.get(bias)
        if value is not None:
            bias = em.const(value.reshape((-1,) + (1,) * tail), source=bias)
        else:
            bias = em.one("Reshape", [bias, em.ints([-1] + [1] * tail)])
    return em.one("Add", [args[0], bias])


def _pool(onnx_op: str, call: ir.Call, em, args, **extra):
    a = call.attrs
    nd = len(a.pool_size)
    _check_layout(call, layout=_LAYOUTS[nd][0], out_layout=_LAYOUTS[nd][0])
    kw = dict(kernel_shape=list(a.pool_size), strides=list(a.strides), pads=_pads(a.padding, nd),
              ceil_mode=int(bool(a.ceil_mode)), **extra)
    if any(d != 1 for d in a.dilation):
        kw["dilations"] = list(a.dilation)
    return em.one(onnx_op, [args[0]], **kw)


@emitter("nn.max_pool2d", "nn.max_pool3d")
def _max_pool(em, call, args):
    return _pool("MaxPool", call, em, args)


@emitter("nn.avg_pool2d", "nn.avg_pool3d")
def _avg_pool(em, call, args):
    return _pool("AveragePool", call, em, args, count_include_pad=int(bool(call.attrs.count_include_pad)))


@emitter("nn.global_avg_pool2d")
def _gap(em, call, args):
    _check_layout(call, layout="NCHW", out_layout="NCHW")
    return em.one("GlobalAveragePool", list(args))


@emitter("nn.global_max_pool2d")
def _gmp(em, call, args):
    _check_layout(call, layout="NCHW", out_layout="NCHW")
    return em.one("GlobalMaxPool", list(args))


@emitter("nn.batch_norm")
def _batch_norm(em, call, args):
    if call.attrs.axis != 1 or not call.attrs.center or not call.attrs.scale:
        raise FormatError("nn.batch_norm exports with axis=1, center and scale only")
    y = em.one("BatchNormalization", list(args), epsilon=float(call.attrs.epsilon))
    return (y, args[3], args[4])


@emitter("nn.lrn")
def _lrn(em, call, args):
    if call.attrs.axis != 1:
        raise FormatError("nn.lrn exports with axis=1 only")
    a = call.attrs
    return em.one("LRN", list(args), size=int(a.size), alpha=float(a.alpha), beta=float(a.beta), bias=float(a.bias))


@emitter("nn.dense")
def _dense(em, call, args):
    """``Gemm(x, w, transB=1)`` for a 2-D float ``x``, else ``MatMul(x, transpose(w))``.
    A constant ``w`` that is a transposed view (a ``MatMul`` weight the import transposed
    and FoldConstant folded) is written as the bytes it views, never transposed in
    memory: ``Gemm(x, w.T)`` / ``MatMul(x, w.T)``, ``w.T`` being the original weight::

        nn.dense(%x, meta[Constant][0] /* a view of W [k, n] as [n, k] */)
        ->  Gemm(x, W)                               (was: Gemm(x, W transposed, transB=1))
    """
    x = _tensor(call, 0)
    w = em.values.get(args[1])
    viewed = w is not None and w.ndim == 2 and not w.flags.c_contiguous and w.T.flags.c_contiguous
    if len(x.shape) == 2 and x.dtype.startswith("float"):  # (onnxruntime has no integer Gemm)
        if viewed:  # (a third argument: the bias a composite joins, see convert_nn)
            return em.one("Gemm", [args[0], em.const(w.T, source=args[1]), *args[2:]])
        return em.one("Gemm", list(args), transB=1)
    # (w.T: a view; the writer writes it in C order, one weight at a time)
    wt = em.const(w.T, source=args[1]) if w is not None else em.one("Transpose", [args[1]], perm=[1, 0])
    return em.one("MatMul", [args[0], wt])


@emitter("nn.batch_matmul")
def _batch_matmul(em, call, args):
    a, b = args
    if call.attrs.transpose_a:
        a = em.one("Transpose", [a], perm=[0, 2, 1])
    if call.attrs.transpose_b:
        b = em.one("Transpose", [b], perm=[0, 2, 1])
    return em.one("MatMul", [a, b])


@emitter("nn.matmul")
def _matmul(em, call, args):
    a, b = args
    nd_a, nd_b = len(_tensor(call, 0).shape), len(_tensor(call, 1).shape)
    if call.attrs.transpose_a:
        a = em.one("Transpose", [a], perm=list(range(nd_a - 2)) + [nd_a - 1, nd_a - 2])
    if call.attrs.transpose_b:
        b = em.one("Transpose", [b], perm=list(range(nd_b - 2)) + [nd_b - 1, nd_b - 2])
    return em.one("MatMul", [a, b])


@emitter("nn.batch_flatten")
def _batch_flatten(em, call, args):
    return em.one("Flatten", list(args), axis=1)


@emitter("nn.softmax")
def _softmax(em, call, args):
    return em.one("Softmax", list(args), axis=int(call.attrs.axis))


@emitter("nn.dropout")
def _dropout(em, call, args):
    shape = _tensor(call, 0).shape
    if not all(type(d) is int for d in shape):  # a mask as large as the data, of run-time size
        true = onnx.numpy_helper.from_array(np.ones((1,), dtype="bool"))
        return (args[0], em.one("ConstantOfShape", [em.one("Shape", [args[0]])], value=true))
    return (args[0], em.const(np.ones(shape, dtype="bool")))


@emitter("nn.layer_norm")
def _layer_norm(em, call, args):
    """``LayerNormalization`` from opset 17 (over the last axis); otherwise the nine nodes it
    stands for."""
    a = call.attrs
    x, gamma, beta = args
    nd = len(_tensor(call, 0).shape)
    axis = int(a.axis) % nd
    if em.opset >= 17 and axis == nd - 1 and (a.center and a.scale or not _tensor(call, 0).is_static):
        # (ONNX's reduces every axis from `axis`; a scale or shift turned off is a [1] one or zero,
        # which it broadcasts: nothing computed for an axis of run-time size)
        dt = call.checked_type.dtype
        if not a.scale:
            gamma = em.const(np.ones(1, dt))
        if not a.center:
            beta = em.const(np.zeros(1, dt))
        return em.one("LayerNormalization", [x, gamma, beta], axis=axis, epsilon=float(a.epsilon))
    dt = call.checked_type.dtype
    tail = nd - axis - 1
    centered = em.one("Sub", [x, _reduce_node(em, "ReduceMean", 18, x, [axis], 1)])
    var = _reduce_node(em, "ReduceMean", 18, em.one("Mul", [centered, centered]), [axis], 1)
    std = em.one("Sqrt", [em.one("Add", [var, em.const(np.asarray(a.epsilon, dtype=dt))])])
    out = em.one("Div", [centered, std])
    for on, vec, op in ((a.scale, gamma, "Mul"), (a.center, beta, "Add")):
        if on:
            if tail:
                vec = em.one("Reshape", [vec, em.ints([-1] + [1] * tail)])
            out = em.one(op, [out, vec])
    return out


@emitter("reshape", "squeeze", "expand_dims", "nn.batch_flatten_static")
def _reshape(em, call, args):
    shape = list(_out_shape(call))
    if not all(type(d) is int for d in shape):  # ONNX's 0 and -1 where exact, else computed
        in_shape = tuple(_tensor(call, 0).shape)
        target = reshape_target(in_shape, tuple(shape))
        if target is None:  # only 1s inserted or removed: Unsqueeze / Squeeze, no shape to compute
            moved = unit_axes(in_shape, tuple(shape))
            if moved is not None:
                op, axes = moved
                return em.one(op, [args[0], em.ints(axes)])
        if target is None and any(d is ir.ANY for d in shape):  # a ? has no value to compute
            return _reshape_any(em, call, args)
        return em.one("Reshape", [args[0], em.ints(shape) if target is None else em.ints(target)])
    if 0 in shape:  # an empty axis: ONNX reads a 0 as "copy the input's" unless allowzero=1 (opset 14)
        if em.opset < 14:
            raise FormatError(f"{call.op.name} to {tuple(shape)}: a reshape to an empty axis needs ONNX's "
                              "Reshape allowzero=1, which opset 13 lacks; export at opset 14 or later")
        return em.one("Reshape", [args[0], em.ints(shape)], allowzero=1)
    return em.one("Reshape", [args[0], em.ints(shape)])


def _reshape_any(em, call: ir.Call, args) -> str:
    """A reshape-like call whose result has a ``?``: a reshape by its own ``newshape``
    (whose 0 and -1 mean in ONNX what they mean in Relay), an expand_dims as ``Unsqueeze``,
    a squeeze as ``Squeeze``."""
    nd_in = len(_tensor(call, 0).shape)
    name = call.op.name
    a = call.attrs
    if name == "reshape" and not a.allowzero and all(type(d) is not int or d >= -1 for d in a.newshape):
        return em.one("Reshape", [args[0], em.ints(list(a.newshape))])
    if name == "expand_dims":
        axis = int(a.axis) % (nd_in + 1)
        return em.one("Unsqueeze", [args[0], em.ints(range(axis, axis + int(a.num_newaxis)))])
    if name == "squeeze" and a.axis is not None:
        return em.one("Squeeze", [args[0], em.ints(sorted(int(x) % nd_in for x in a.axis))])
    raise FormatError(f"{name} to a shape with an unknown dimension ({tuple(map(str, _out_shape(call)))}) "
                      "cannot be written as an ONNX Reshape; specialise the model (--bind-dim)")


@emitter("transpose")
def _transpose(em, call, args):
    nd = len(_tensor(call, 0).shape)
    axes = call.attrs.axes
    perm = [int(a) % nd for a in axes] if axes is not None else list(reversed(range(nd)))
    return em.one("Transpose", list(args), perm=perm)


@emitter("concatenate")
def _concat(em, call, args):
    fields = args[0] if isinstance(args[0], tuple) else (args[0],)
    return em.one("Concat", list(fields), axis=int(call.attrs.axis))


@emitter("einsum")
def _einsum(em, call, args):
    fields = args[0] if isinstance(args[0], tuple) else (args[0],)
    return em.one("Einsum", list(fields), equation=str(call.attrs.equation))


@emitter("split")
def _split(em, call, args):
    ty = _tensor(call, 0)
    axis = call.attrs.axis % len(ty.shape)
    sizes = [t.shape[axis] for t in call.checked_type.fields]
    return tuple(em.node("Split", [args[0], em.ints(sizes)], len(sizes), axis=axis))


def reduce_axes(call) -> list:
    """The axes reduction ``call`` reduces, non-negative and in order."""
    nd = len(_tensor(call, 0).shape)
    axis = call.attrs.axis
    axes = list(range(nd)) if axis is None else [int(a) % nd for a in
                                                  (axis if isinstance(axis, (tuple, list)) else (axis,))]
    if call.attrs.exclude:
        axes = [i for i in range(nd) if i not in axes]
    return axes


def _reduce(onnx_op: str, since_input: int):
    def emit(em, call, args):
        axes = reduce_axes(call)
        if not axes:
            return em.one("Identity", [args[0]])
        return _reduce_node(em, onnx_op, since_input, args[0], axes, int(bool(call.attrs.keepdims)))
    return emit


def _reduce_node(em, onnx_op: str, since_input: int, x: str, axes: list, keep: int) -> str:
    """One ``Reduce*`` node: the axes as an input from opset ``since_input``, else as an attribute."""
    if em.opset >= since_input:
        return em.one(onnx_op, [x, em.ints(axes)], keepdims=keep)
    return em.one(onnx_op, [x], axes=axes, keepdims=keep)


EMITTERS["sum"] = _reduce("ReduceSum", 13)
EMITTERS["mean"] = _reduce("ReduceMean", 18)
EMITTERS["max"] = _reduce("ReduceMax", 18)
EMITTERS["min"] = _reduce("ReduceMin", 18)
EMITTERS["prod"] = _reduce("ReduceProd", 18)


@emitter("annotation.stop_fusion")
def _identity(em, call, args):
    return em.one("Identity", list(args))


@emitter("variance")
def _variance(em, call, args):
    """``variance(x, m)`` is the mean of ``(x - m)^2`` (times ``n / (n - 1)`` when unbiased)."""
    data, mean = args
    diff = em.one("Sub", [data, mean])
    out = EMITTERS["mean"](em, call, [em.one("Mul", [diff, diff])])
    if call.attrs.unbiased:
        in_shape, out_shape = _tensor(call, 0).shape, _out_shape(call)
        n = math.prod(in_shape) // max(1, math.prod(out_shape)) if all(
            type(d) is int for d in tuple(in_shape) + tuple(out_shape)) else None
        if n is None:
            raise FormatError("an unbiased variance over axes of symbolic size cannot be written yet; "
                              "specialise the model (--bind-dim) or use the biased one")
        if n > 1:
            out = em.one("Mul", [out, em.const(np.asarray(n / (n - 1), dtype=call.checked_type.dtype))])
    return out


for _name, _onnx_op in (("logical_and", "And"), ("logical_or", "Or"), ("logical_xor", "Xor"), ("logical_not", "Not")):
    EMITTERS[_name] = _simple(_onnx_op)


@emitter("nn.log_softmax")
def _log_softmax(em, call, args):
    return em.one("LogSoftmax", list(args), axis=int(call.attrs.axis))


@emitter("nn.gelu")
def _gelu(em, call, args):
    """``Gelu`` from opset 20; before it, the form Relay writes (five nodes)."""
    approximate = call.attrs.approximate
    if em.opset >= 20:
        return em.one("Gelu", list(args), approximate=approximate if approximate != "none" else None)
    dt = call.checked_type.dtype
    x = args[0]

    def c(v):
        return em.const(np.asarray(v, dtype=dt))

    if approximate == "tanh":
        cube = em.one("Pow", [x, c(3.0)])  # (one node; onnxruntime computes a cube as x * x * x)
        inner = em.one("Mul", [c(np.sqrt(2 / np.pi)), em.one("Add", [x, em.one("Mul", [c(0.044715), cube])])])
        phi = em.one("Add", [c(1.0), em.one("Tanh", [inner])])
    else:
        phi = em.one("Add", [c(1.0), em.one("Erf", [em.one("Mul", [x, c(1 / np.sqrt(2))])])])
    return em.one("Mul", [em.one("Mul", [x, c(0.5)]), phi])
