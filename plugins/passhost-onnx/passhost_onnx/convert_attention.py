"""ONNX's ``Attention`` (opset 23) as ``nn.attention`` where the operator computes its
definition: the KV cache's ``past_key``/``past_value`` concatenated in front of the keys and
values (``present_key``/``present_value`` out), 3-D inputs ``(batch, seq, heads * head)`` split
into ``q_num_heads``/``kv_num_heads`` heads around it, ``is_causal`` as a bool mask aligned to
the bottom right (query ``i`` sees key ``j`` when ``j <= i + past``) joined with the mask::

    Attention(Q, K, V, mask, past_key, past_value, is_causal=1, scale=0.25)   /* 4-D, float32 */
    ->  %k = concatenate((%past_key, %K), axis=2);  %v = concatenate((%past_value, %V), axis=2);
        (nn.attention(%Q, %k, %v, logical_and(%mask, %causal), scale=0.25f), %k, %v)

``nn.attention`` zeroes a query row masked whole as the errata of ``Attention`` has it (a row
whose scores are NaN for another reason -- infinite products -- is zeroed too, where ONNX's
guard, which reads the mask, leaves it NaN). A half-precision query is mapped with
``softmax_precision=1`` (float32), where ``nn.attention`` rounds as the function body does;
float32 and float64 with the softmax in their own type. Every other form -- a ``softcap``, the
``qk_matmul_output`` output, a softmax in the half type, values of another type than the
query's, a mask shorter than the keys (ONNX pads it), ``nonpad_kv_seqlen`` -- is expanded into
the operator's function body, as before (:data:`~.table.USE_BODY`).
"""
from __future__ import annotations

import numpy as np
import onnx

from passhost import ir
from passhost.ir.dims import floordiv, provably_equal

from .build import arange, call, const, reshape
from .table import USE_BODY, converter

__all__ = ["maps"]

#: the softmax_precision each query dtype maps with (None: the attribute absent)
_PRECISIONS = {"float16": (onnx.TensorProto.FLOAT,), "bfloat16": (onnx.TensorProto.FLOAT,),
               "float32": (None, onnx.TensorProto.FLOAT), "float64": (None, onnx.TensorProto.DOUBLE)}


def _same(a, b) -> bool:
    if a is ir.ANY or b is ir.ANY:
        return False
    return a == b or (type(a) is not int or type(b) is not int) and provably_equal(a, b)


#: the attributes of opset 23's Attention (a later opset's others -- a sliding window -- are the body's)
_ATTRIBUTES = frozenset(["is_causal", "kv_num_heads", "q_num_heads", "qk_matmul_output_mode", "scale", "softcap",
                         "softmax_precision"])


def maps(attrs: dict, inputs: list, outputs: list, dtype: str) -> bool:
    """Whether an ``Attention`` node of these attributes, inputs (present or ``None``, by
    position), outputs (names, ``""`` for an absent one) and query dtype is ``nn.attention``
    as far as they tell (its shapes are checked too, when converting)."""
    if not _ATTRIBUTES.issuperset(attrs) or float(attrs.get("softcap", 0.0) or 0.0) != 0.0:
        return False
    if len(outputs) > 3 and outputs[3]:
        return False
    present = [i < len(inputs) and inputs[i] is not None for i in range(7)]
    return not present[6] and present[4] == present[5] and attrs.get("softmax_precision") in _PRECISIONS.get(dtype, ())


def _maps(node) -> bool:
    """Whether ``nn.attention`` computes this node's definition (see the module doc)."""
    dt = node.dtype(0)
    if not maps(node.attrs, node.inputs, node.outputs, dt) or node.dtype(1) != dt or node.dtype(2) != dt:
        return False
    nd = node.ndim(0)
    if nd == 3 and not (node.attr("q_num_heads") and node.attr("kv_num_heads")):
        return False
    if nd not in (3, 4) or node.ndim(1) != nd or node.ndim(2) != nd:
        return False
    if node.input(3) is not None and (node.dtype(3) not in ("bool", dt) or not _same(node.shape(3)[-1], _total(node))):
        return False
    if node.attr("is_causal", 0) and any(d is ir.ANY for d in (_total(node), node.shape(0)[-2 if nd == 4 else 1])):
        return False
    return True


def _total(node):
    """The length of the keys, the cache's included."""
    seq = node.shape(1)[-2 if node.ndim(1) == 4 else 1]
    return seq if node.input(4) is None else node.shape(4)[2] + seq


def _heads(node, i: int, heads: int) -> ir.Expr:
    """Input ``i``, ``(batch, seq, heads * head)``, as ``(batch, heads, seq, head)``."""
    batch, seq, hidden = node.shape(i)
    head = hidden // heads if type(hidden) is int else floordiv(hidden, heads)
    return call("transpose", reshape(node.inputs[i], (batch, seq, heads, head)), axes=(0, 2, 1, 3))


def _causal(q_seq, total, past) -> ir.Expr:
    """``(q_seq, total)`` bool: key ``j`` at or before query ``i``'s position ``i + past``."""
    keys = reshape(arange(total, "int64"), (1, total))
    if type(q_seq) is int and type(past) is int:
        queries = ir.Constant(np.arange(past, past + q_seq, dtype="int64").reshape(q_seq, 1))
    else:
        queries = reshape(call("arange", start=past, stop=past + q_seq, step=1, dtype="int64"), (q_seq, 1))
    return call("less_equal", keys, queries)


@converter("Attention", 23)
def _attention(node):
    if not _maps(node):
        return USE_BODY
    dt, nd = node.dtype(0), node.ndim(0)
    if nd == 3:
        hq, hk = int(node.attr("q_num_heads")), int(node.attr("kv_num_heads"))
        q, k, v = _heads(node, 0, hq), _heads(node, 1, hk), _heads(node, 2, hk)
    else:
        q, k, v = node.inputs[:3]
    past = 0
    if node.input(4) is not None:
        past = node.shape(4)[2]
        k = call("concatenate", ir.Tuple([node.inputs[4], k]), axis=2)
        v = call("concatenate", ir.Tuple([node.inputs[5], v]), axis=2)
    mask = node.input(3)
    if node.attr("is_causal", 0):
        causal = _causal(node.shape(0)[-2 if nd == 4 else 1], _total(node), past)
        if mask is None:
            mask = causal
        elif node.dtype(3) == "bool":
            mask = call("logical_and", mask, causal)
        else:
            mask = call("add", mask, call("where", causal, const(0.0, dt), const(-np.inf, dt)))
    if mask is None:
        mask = const(0.0, dt)
    scale = node.attr("scale")
    y = call("nn.attention", q, k, v, mask, scale=None if scale is None else float(scale), zero_masked_rows=True)
    if nd == 3:
        batch, seq = node.shape(0)[:2]
        y = call("transpose", y, axes=(0, 2, 1, 3))
        vhead = node.shape(2)[2] // int(node.attr("kv_num_heads")) if type(node.shape(2)[2]) is int else \
            floordiv(node.shape(2)[2], int(node.attr("kv_num_heads")))
        y = reshape(y, (batch, seq, int(node.attr("q_num_heads")) * vhead))
    return (y, k, v) if len(node.outputs) > 1 else y
