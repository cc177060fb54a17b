"""``LSTM``/``GRU``/``RNN`` over dynamic axes, kept as one node (the import unrolls a static
one into its steps; a sequence of run-time length cannot be unrolled, and over a dynamic
batch the unrolled form is dozens of nodes per step where runtimes have one kernel).

The kept node is typed here from its input, as the operator defines it, so its outputs keep
the model's size variables where ONNX's shape inference may give up; and an initial state
that is provably all zeros (PyTorch's exporters build one with ``Expand`` from the input's
shape) is dropped, as ONNX defines an absent one to be zeros::

    %h0 = strided_slice(full(0f, shape=[4, batch, 16]), begin=[0, 0, 0], end=[2, batch, 16]);
    onnx.opaque(%x, %w, %r, %b, %h0, %h0, op_type="LSTM", ...)
      ->
    onnx.opaque(%x, %w, %r, %b, op_type="LSTM", ...)       /* initial_h and initial_c: "" */
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import onnx

from passhost import ir

__all__ = ["RECURRENT", "dynamic_recurrence", "recurrent_shapes", "without_zero_states"]

#: recurrent operators kept as they are when their input has a dynamic axis
RECURRENT = frozenset({"LSTM", "GRU", "RNN"})

#: input positions of the initial states (initial_h; LSTM's initial_c)
_STATES = {"LSTM": (5, 6), "GRU": (5,), "RNN": (5,)}

#: operators through which a zero fill stays a zero fill
_PASS_ZERO = frozenset({"strided_slice", "cast", "reshape", "squeeze", "expand_dims", "broadcast_to", "transpose"})


def dynamic_recurrence(n: onnx.NodeProto, inputs: list) -> bool:
    """Whether ``n`` is an ``LSTM``/``GRU``/``RNN`` whose input has a dynamic axis."""
    if n.op_type not in RECURRENT or n.domain not in ("", "ai.onnx") or not inputs or inputs[0] is None:
        return False
    t = inputs[0].checked_type
    return isinstance(t, ir.TensorType) and not t.is_static


def _is_zero_fill(e: ir.Expr) -> bool:
    """``e`` is all zeros by its construction: a zero constant, ``zeros``, ``full`` of a zero
    constant, maybe sliced, cast, reshaped or broadcast."""
    while type(e) is ir.Call and isinstance(e.op, ir.Op) and e.op.name in _PASS_ZERO:
        e = e.args[0]
    if isinstance(e, ir.Constant):
        return e.data.size > 0 and not np.any(e.data)
    if type(e) is ir.Call and isinstance(e.op, ir.Op):
        if e.op.name == "zeros":
            return True
        return e.op.name == "full" and isinstance(e.args[0], ir.Constant) and not np.any(e.args[0].data)
    return False


def without_zero_states(n: onnx.NodeProto, inputs: list) -> list:
    """``inputs`` with each initial state that is all zeros replaced by ``None`` (absent)."""
    out = list(inputs)
    for i in _STATES[n.op_type]:
        if i < len(out) and out[i] is not None and _is_zero_fill(out[i]):
            out[i] = None
    return out


def _attr(n: onnx.NodeProto, name: str, default):
    a = next((a for a in n.attribute if a.name == name), None)
    return default if a is None else onnx.helper.get_attribute_value(a)


def recurrent_shapes(n: onnx.NodeProto, inputs: list) -> Optional[list]:
    """The shapes of ``n``'s outputs (``Y``, ``Y_h``, and ``Y_c`` for ``LSTM``) from its
    input's and weights' types, as the operator defines them; ``None`` when a type is missing."""
    x, r = inputs[0], inputs[2] if len(inputs) > 2 else None
    if x is None or r is None or not isinstance(r.checked_type, ir.TensorType):
        return None
    shape = tuple(x.checked_type.shape)
    if len(shape) != 3:
        return None
    dirs = 2 if _attr(n, "direction", b"forward") in (b"bidirectional", "bidirectional") else 1
    hidden = _attr(n, "hidden_size", None)
    hidden = int(hidden) if hidden is not None else r.checked_type.shape[-1]
    if int(_attr(n, "layout", 0)):
        batch, seq = shape[0], shape[1]
        y, state = (batch, seq, dirs, hidden), (batch, dirs, hidden)
    else:
        seq, batch = shape[0], shape[1]
        y, state = (seq, dirs, batch, hidden), (dirs, batch, hidden)
    return [y, state, state][:3 if n.op_type == "LSTM" else 2]
