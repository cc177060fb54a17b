"""``nn.rotary_embedding``: rotary position embedding (ONNX's ``RotaryEmbedding``, opset 23),
applied to the queries and keys of Llama-style attention::

    nn.rotary_embedding(%x, %cos, %sin)       /* %x: (batch, heads, seq, head_size) */
                                              /* %cos, %sin: (batch, seq, rotary_dim / 2) */

The first ``rotary_dim`` values of each head (all of them when it is 0) turn by the angles
whose cosines and sines are given, the rest pass through. Without ``interleaved`` the pairs are
``(x[i], x[i + rotary_dim/2])`` (Hugging Face's ``rotate_half``)::

    x1, x2 = x[..., :r/2], x[..., r/2:r]
    out = concat(x1 * cos - x2 * sin, x2 * cos + x1 * sin, x[..., r:])

which is, value for value, ``x * concat(cos, cos) + concat(-x2, x1) * concat(sin, sin)``; with
``interleaved`` they are ``(x[2i], x[2i + 1])`` (GPT-J's). ``cos`` and ``sin`` hold one row per
batch entry (or one row for every entry: a batch of 1) and sequence position.
"""
from __future__ import annotations

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..op import OpPattern
from ..types import TensorType
from ._util import kernel, reg, tensor_arg
from .nn import differ, indivisible

_OP = "nn.rotary_embedding"


def _rel(types: list, attrs) -> TensorType:
    data = tensor_arg(_OP, types, 0, "data")
    if data.ndim != 4 or not data.dtype.startswith(("float", "bfloat")):
        raise TypeInferenceError(f"{_OP}: the data {data} must be a 4-D floating-point tensor "
                                 "(batch, heads, sequence, head_size)")
    batch, _, seq, head = data.shape
    rot = attrs.rotary_dim or head
    if indivisible(rot, 2) or (type(head) is int and type(rot) is int and rot > head):
        raise TypeInferenceError(f"{_OP}: rotary_dim={attrs.rotary_dim} must be even and at most the head "
                                 f"size of the data {data}")
    for i, name in ((1, "cos"), (2, "sin")):
        t = tensor_arg(_OP, types, i, name)
        if (t.dtype != data.dtype or t.ndim != 3 or (t.shape[0] != 1 and differ(t.shape[0], batch))
                or differ(t.shape[1], seq) or differ(t.shape[2], rot // 2)):
            raise TypeInferenceError(f"{_OP}: {name} {t} must be ({batch} or 1, {seq}, {rot // 2}) of the "
                                     f"data's dtype for the data {data} (rotary_dim {rot})")
    return data


def _check(attrs) -> None:
    r = attrs.rotary_dim
    if isinstance(r, bool) or not isinstance(r, int) or r < 0:
        raise IRError(f"operator {_OP}: attribute rotary_dim must be a non-negative int, got {r!r}")


@kernel
def _rotary(args: list, attrs) -> np.ndarray:
    x, cos, sin = args
    rot = attrs.rotary_dim or x.shape[-1]
    c, s = cos[:, None], sin[:, None]  # (batch, 1, seq, rot/2): the same angle for every head
    if attrs.interleaved:
        x1, x2 = x[..., 0:rot:2], x[..., 1:rot:2]
        turned = np.stack([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1).reshape(x.shape[:-1] + (rot,))
    else:
        x1, x2 = x[..., :rot // 2], x[..., rot // 2:rot]
        turned = np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)
    if rot == x.shape[-1]:
        return turned.astype(x.dtype, copy=False)
    return np.concatenate([turned, x[..., rot:]], axis=-1).astype(x.dtype, copy=False)


reg(_OP, 3, _rel, _rotary, attrs=(("interleaved", False), ("rotary_dim", 0)), pattern=OpPattern.OPAQUE,
    attr_check=_check, summary="Rotary position embedding of (batch, heads, seq, head) data (ONNX RotaryEmbedding).")
