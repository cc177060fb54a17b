"""``nn.attention``: scaled dot-product attention with an optional mask and grouped-query heads
(ONNX's ``Attention``, opset 23, in its 4-D form)::

    nn.attention(%q, %k, %v, %mask, scale=0.125f)
    /* %q: (batch, q_heads, q_seq, head)  %k: (batch, kv_heads, kv_seq, head)
       %v: (batch, kv_heads, kv_seq, v_head)  ->  (batch, q_heads, q_seq, v_head) */

computes, as ONNX's definition and PyTorch's ``scaled_dot_product_attention`` do::

    s = sqrt(scale)                         /* scale None: 1 / sqrt(head) */
    p = softmax((%q * s) @ (%k * s)^T + mask, axis=-1)
    p = where(isnan(p), 0, p)               /* zero_masked_rows: a row masked whole gives zeros */
    p @ %v

``zero_masked_rows=False`` leaves the guard out, as attention written without it computes (a
row masked whole is then NaN): FuseAttention keeps the graph's own choice.

Query head ``h`` reads key-value head ``h // (q_heads / kv_heads)`` (grouped-query attention;
``kv_heads == q_heads`` is plain multi-head attention). A float ``mask`` is added to the scores
and a bool one keeps the scores where it is True (``-inf`` elsewhere); either broadcasts against
``(batch, q_heads, q_seq, kv_seq)``. A scalar zero mask is no mask.

**Half precision** (float16, bfloat16 query and key) rounds where ONNX's function body of
``Attention`` with ``softmax_precision=1`` rounds, which is also where Hugging Face's
half-precision attention rounds (``softmax(..., dtype=float32).to(query.dtype)``)::

    s = half(sqrt(scale))
    scores = half(half(%q * s) @ half(%k * s)^T)       /* each product summed in float32 */
    x = half(scores + mask)                            /* a bool mask adds 0 or -inf: exact */
    p = softmax(float32(x))                            /* in float32 */
    half(half(p) @ %v)                                 /* %v of the half type */
    p @ %v                                             /* %v float32: neither rounded */

The value may be float32 under a half query and key (the output is then float32): PyTorch's
exporter writes ``scaled_dot_product_attention`` on float16 data with a float32 mask so, the
scores cast to float32 before the mask and the values after the repeat.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..op import OpPattern
from ..types import TensorType
from ._util import kernel, reg, tensor_arg
from .nn import differ, indivisible

_OP = "nn.attention"


def _rel(types: list, attrs) -> TensorType:
    names = ("query", "key", "value")
    q, k, v = (tensor_arg(_OP, types, i, n) for i, n in enumerate(names))
    for t, n in zip((q, k, v), names):
        if t.ndim != 4 or not (t.dtype == q.dtype or (n == "value" and t.dtype == "float32" and _half(q.dtype))) \
                or not t.dtype.startswith(("float", "bfloat")):
            raise TypeInferenceError(f"{_OP}: {n} {t} must be a 4-D floating-point tensor (batch, heads, "
                                     f"sequence, head size) of the query's dtype (the value may be float32 "
                                     f"under a half query)")
    batch, q_heads, q_seq, head = q.shape
    kv_heads, kv_seq = k.shape[1], k.shape[2]
    problems = []
    if differ(k.shape[0], batch) or differ(v.shape[0], batch):
        problems.append("their batch sizes differ")
    if differ(k.shape[3], head):
        problems.append("the query and key head sizes differ")
    if differ(v.shape[1], kv_heads) or differ(v.shape[2], kv_seq):
        problems.append("the key and value differ in heads or sequence")
    if type(kv_heads) is int and kv_heads and (indivisible(q_heads, kv_heads)):
        problems.append("the query heads are not a multiple of the key-value heads")
    if problems:
        raise TypeInferenceError(f"{_OP}: query {q}, key {k}, value {v}: {'; '.join(problems)}")
    mask = tensor_arg(_OP, types, 3, "mask")
    if mask.dtype != "bool" and mask.dtype != q.dtype and mask.ndim:
        raise TypeInferenceError(f"{_OP}: the mask {mask} must be bool or of the query's dtype {q.dtype}")
    scores = (batch, q_heads, q_seq, kv_seq)
    if mask.ndim > 4 or any(d != 1 and s != 1 and differ(d, s) for d, s in zip(mask.shape[::-1], scores[::-1])):
        raise TypeInferenceError(f"{_OP}: the mask {mask} does not broadcast against the scores {scores}")
    return TensorType((batch, q_heads, q_seq, v.shape[3]), v.dtype)


def _half(dtype: str) -> bool:
    """A float type narrower than float32: the kernel rounds at the function body's steps."""
    return np.dtype(dtype).itemsize < 4


def _check(attrs) -> None:
    s = attrs.scale
    if s is not None and (isinstance(s, bool) or not isinstance(s, (int, float)) or not s > 0):
        raise IRError(f"operator {_OP}: attribute scale must be a positive float or None, got {s!r}")


def root_scale(scale, head: int) -> float:
    """What the query and the key are each multiplied by: ``sqrt(scale)``, ``scale`` None
    being ``1 / sqrt(head)``."""
    return math.sqrt(1.0 / math.sqrt(head) if scale is None else float(scale))


@kernel
def _attention(args: list, attrs) -> np.ndarray:
    q, k, v, mask = args
    if _half(q.dtype):
        return _half_attention(q, k, v, mask, attrs)
    dt = q.dtype
    s = dt.type(root_scale(attrs.scale, q.shape[-1]))
    rep = q.shape[1] // max(k.shape[1], 1)
    ks, vs = k * s, v
    if rep > 1:
        ks, vs = np.repeat(ks, rep, axis=1), np.repeat(v, rep, axis=1)
    scores = np.matmul(q * s, np.swapaxes(ks, -1, -2))
    if mask.dtype == np.bool_:
        scores = scores + np.where(mask, dt.type(0), dt.type(-np.inf))
    elif mask.ndim or mask != 0:
        scores = scores + mask.astype(dt, copy=False)
    p = _softmax(scores)
    if attrs.zero_masked_rows:
        p = np.where(np.isnan(p), dt.type(0), p)
    return np.matmul(p, vs).astype(dt, copy=False)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return (e / np.sum(e, axis=-1, keepdims=True)).astype(x.dtype, copy=False)


def _half_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray, attrs) -> np.ndarray:
    """The half-precision steps of the module doc: every product in float32, rounded to the
    half type ``h`` where ONNX's function body rounds (``softmax_precision=1``)."""
    h, f = q.dtype, np.float32
    s = f(h.type(root_scale(attrs.scale, q.shape[-1])))
    rep = q.shape[1] // max(k.shape[1], 1)
    qs = (q.astype(f) * s).astype(h).astype(f)
    ks = (k.astype(f) * s).astype(h).astype(f)
    vs = v.astype(f)
    if rep > 1:
        ks, vs = np.repeat(ks, rep, axis=1), np.repeat(vs, rep, axis=1)
    scores = np.matmul(qs, np.swapaxes(ks, -1, -2)).astype(h).astype(f)
    if mask.dtype == np.bool_:
        scores = scores + np.where(mask, f(0), f(-np.inf))  # (adds 0 or -inf: nothing to round)
    elif mask.ndim or mask != 0:
        scores = (scores + mask.astype(f)).astype(h).astype(f)
    p = _softmax(scores)
    if attrs.zero_masked_rows:
        p = np.where(np.isnan(p), f(0), p)
    if v.dtype == f:
        return np.matmul(p, vs)
    return np.matmul(p.astype(h).astype(f), vs).astype(h)


reg(_OP, 4, _rel, _attention, attrs=(("scale", None), ("zero_masked_rows", True)), pattern=OpPattern.OPAQUE,
    attr_check=_check,
    summary="Scaled dot-product attention with a mask and grouped-query heads (ONNX Attention).")
