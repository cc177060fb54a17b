"""Matrix products: ``nn.matmul`` and ``nn.batch_matmul`` (pattern OUT_ELEMWISE_FUSABLE).

``nn.matmul(a, b)``: ``a`` is ``(..., K)`` (``(..., K, M)`` with ``transpose_a``, then
the result is ``(..., M, N)``) and ``b`` is the 2-D ``(K, N)`` (``(N, K)`` with
``transpose_b``); ``nn.dense`` is ``nn.matmul`` with ``transpose_b=True``.
``nn.batch_matmul(x, y)``: 3-D ``(B, I, K) x (B, K, J) -> (B, I, J)``, either batch may
be 1 (broadcast); the attribute ``transpose_b`` defaults to False as in TVM's
``BatchMatmulAttrs``, while the builder ``ir.nn.batch_matmul`` defaults it to True as
TVM's Python API does::

    nn.batch_matmul(%x, %y, transpose_b=True)   /* (2, 3, 4) x (2, 5, 4) -> (2, 3, 5) */
"""
from __future__ import annotations

import numpy as np

from ...errors import TypeInferenceError
from ..op import OpPattern
from ..types import TensorType
from ._util import broadcast_dim, kernel, reg, tensor_arg
from .nn import differ, static_of

FUSABLE = OpPattern.OUT_ELEMWISE_FUSABLE


def _matmul_rel(types: list, attrs) -> TensorType:
    op = "nn.matmul"
    a = tensor_arg(op, types, 0, "tensor_a")
    if a.ndim < (2 if attrs.transpose_a else 1):
        raise TypeInferenceError(f"{op}: tensor_a {a} has too few axes")
    k = a.shape[-2] if attrs.transpose_a else a.shape[-1]
    if types[1] is None:
        if attrs.units is None:
            raise TypeInferenceError(f"{op}: the type of tensor_b is unknown; give it a type annotation or set units")
        types[1] = TensorType((attrs.units, k) if attrs.transpose_b else (k, attrs.units), a.dtype)
    b = tensor_arg(op, types, 1, "tensor_b")
    if b.ndim != 2:
        raise TypeInferenceError(f"{op}: tensor_b must be 2-D, got {b}")
    bk, n = (b.shape[1], b.shape[0]) if attrs.transpose_b else b.shape
    if bk != k and differ(bk, k):
        raise TypeInferenceError(f"{op}: tensor_a {a} has {k} reduction elements but tensor_b {b} has {bk} "
                                 f"(transpose_a={attrs.transpose_a}, transpose_b={attrs.transpose_b})")
    if b.dtype != a.dtype:
        raise TypeInferenceError(f"{op}: dtype mismatch between tensor_a {a} and tensor_b {b}")
    if attrs.units is not None and attrs.units != n:
        if differ(attrs.units, n):
            raise TypeInferenceError(f"{op}: units={attrs.units} but tensor_b {b} gives {n} output features")
        n = static_of(n, attrs.units)
    lead = a.shape[:-2] + (a.shape[-1],) if attrs.transpose_a else a.shape[:-1]
    return TensorType(lead + (n,), attrs.out_dtype or a.dtype)


def _cast(x: np.ndarray, y: np.ndarray, dtype: str) -> tuple:
    if np.dtype(dtype) != x.dtype:
        return x.astype(dtype), y.astype(dtype)
    return x, y


@kernel
def _matmul(args: list, attrs) -> np.ndarray:
    a, b = args
    dtype = attrs.out_dtype or a.dtype
    a, b = _cast(a, b, dtype)
    if attrs.transpose_a:
        a = np.swapaxes(a, -1, -2)
    if attrs.transpose_b:
        b = b.T
    return np.matmul(a, b).astype(dtype, copy=False)


_MATMUL_ATTRS = (("units", None), ("out_dtype", ""), ("transpose_a", False), ("transpose_b", False))
reg("nn.matmul", 2, _matmul_rel, _matmul, attrs=_MATMUL_ATTRS, pattern=FUSABLE,
    summary="a @ b with optional transposes; b is a 2-D weight.")


def _batch_matmul_rel(types: list, attrs) -> TensorType:
    op = "nn.batch_matmul"
    x = tensor_arg(op, types, 0, "x")
    y = tensor_arg(op, types, 1, "y")
    if x.ndim != 3 or y.ndim != 3:
        raise TypeInferenceError(f"{op}: both operands must be 3-D (batch, rows, cols), got {x} and {y}")
    xb, xi, xk = (x.shape[0], x.shape[2], x.shape[1]) if attrs.transpose_a else x.shape
    yb, yk, yj = (y.shape[0], y.shape[2], y.shape[1]) if attrs.transpose_b else y.shape
    if type(xb) is int and type(yb) is int:
        if xb != yb and 1 not in (xb, yb):
            raise TypeInferenceError(f"{op}: batch sizes of {x} and {y} differ and neither is 1")
        batch = max(xb, yb)
    else:
        batch = broadcast_dim(xb, yb)
        if batch is None:
            raise TypeInferenceError(f"{op}: batch sizes of {x} and {y} differ and neither is 1")
    if xk != yk and differ(xk, yk):
        raise TypeInferenceError(f"{op}: {x} and {y} disagree on the reduction size ({xk} vs {yk}; "
                                 f"transpose_a={attrs.transpose_a}, transpose_b={attrs.transpose_b})")
    if x.dtype != y.dtype:
        raise TypeInferenceError(f"{op}: dtype mismatch between {x} and {y}")
    return TensorType((batch, xi, yj), attrs.out_dtype or x.dtype)


@kernel
def _batch_matmul(args: list, attrs) -> np.ndarray:
    x, y = args
    dtype = attrs.out_dtype or x.dtype
    x, y = _cast(x, y, dtype)
    if attrs.transpose_a:
        x = np.swapaxes(x, 1, 2)
    if attrs.transpose_b:
        y = np.swapaxes(y, 1, 2)
    return np.matmul(x, y).astype(dtype, copy=False)


reg("nn.batch_matmul", 2, _batch_matmul_rel, _batch_matmul,
    attrs=(("out_dtype", ""), ("transpose_a", False), ("transpose_b", False)), pattern=FUSABLE,
    summary="Batched matrix product of 3-D tensors (batch 1 broadcasts).")
