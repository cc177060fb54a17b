"""The ONNX forms of the fused operators of language models (``nn.rms_norm``,
``nn.rotary_embedding``, ``nn.attention``), by opset and target.

=====================  ==========================================  ==============================
operator               opset 23 on                                 below opset 23 (decomposed)
=====================  ==========================================  ==============================
``nn.rms_norm``        ``RMSNormalization``                        ``Pow, ReduceMean, Add, Sqrt,
                                                                   Div, Mul`` (the form
                                                                   onnxruntime's own fusion reads)
``nn.rotary_embedding``  ``RotaryEmbedding``                       ``Slice``, ``Neg``, ``Concat``,
                                                                   two ``Mul``, ``Add`` (the
                                                                   tables widened once)
``nn.attention``       ``Attention`` (the KV cache's ``Concat``     ``MatMul, Add, Softmax,
                       taken in as ``past_key``/``past_value``;    (IsNaN, Where,) MatMul``; key-value
                       in a half type ``softmax_precision=1``;     heads broadcast in 5-D, never
                       float32 values under a half query:          copied; in a half type ``Cast``
                       decomposed)                                 around the softmax
=====================  ==========================================  ==============================

``Attention`` zeroes a query row masked whole whatever ``zero_masked_rows`` says (ONNX's errata:
zeros, not NaN), so an attention written without PyTorch's guard gives zeros there from opset 23
where it gave NaN; the decomposed form keeps or leaves out the guard as the operator says.

After the nodes are written, :func:`llm_peepholes` keeps the heads in 3-D around ``Attention``
and ``RotaryEmbedding`` (:func:`heads_in_3d`), and with ``target="onnxruntime"``
(``ir.save(..., target="onnxruntime")``, ``--target onnxruntime``) writes onnxruntime's
``com.microsoft`` operators where onnxruntime 1.32's CPU kernels measured faster than the
standard ones: SiLU, ``Mul(x, Sigmoid(x))``, as one ``QuickGelu(alpha=1)`` (a composite of
``convert_contrib``; half the time at 128
tokens; onnxruntime fuses it itself only at ``ORT_ENABLE_EXTENDED`` and above). The others were
measured and are not written: ``Skip(Simplified)LayerNormalization`` is slower than ``Add`` and
the standard norm (2x for RMS, 7x for LayerNorm at 128 tokens of 256), ``FastGelu`` is the
kernel of ``Gelu(approximate="tanh")``, and ``GroupQueryAttention``/``MultiHeadAttention`` are
slower than opset 23's ``Attention`` (46 against 21 us a decode step of 8 heads over 128).
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
import onnx

from passhost import ir
from passhost.errors import FormatError

from .dtypes import to_onnx_type
from .emit import _reduce_node, _tensor, emitter

__all__ = ["FUSED_OPS", "FUSED_OPSET", "fused_opset", "llm_peepholes", "heads_in_3d"]

#: the operators whose standard ONNX form needs opset 23
FUSED_OPS = ("nn.rms_norm", "nn.rotary_embedding", "nn.attention")
FUSED_OPSET = 23
MS = "com.microsoft"


def fused_opset(mod: ir.IRModule) -> Optional[int]:
    """:data:`FUSED_OPSET` when a function of ``mod`` calls one of :data:`FUSED_OPS`, else
    ``None``: the opset a model is written at by default once a fusion has made one."""
    found = []
    wanted = {ir.Op.get(n) for n in FUSED_OPS}

    def visit(e):
        if not found and type(e) is ir.Call and e.op in wanted:
            found.append(e)

    for gv in mod.functions:
        ir.post_order_visit(mod[gv.name_hint], visit)
        if found:
            return FUSED_OPSET
    return None


def _target(em) -> str:
    return getattr(em, "target", "") or ""


def _const(em, value, dtype) -> str:
    return em.const(np.asarray(value, dtype=dtype))


def _producer(em, name: str, op_type: str):
    """The node ``op_type`` that wrote ``name``, if nothing written so far reads ``name`` and it
    is not a graph output (a peephole may then take it in), else ``None``."""
    for n in reversed(em.nodes):
        if name in n.output:
            if n.op_type != op_type or n.domain:
                return None
            break
    else:
        return None
    if any(name in m.input for m in em.nodes) or name in em.captured:
        return None
    return n


def _wide(em, x: str, dtype: str) -> tuple:
    """``x`` in float32 when ``dtype`` is narrower (normalisations compute there), and the cast back."""
    if np.dtype(dtype).itemsize >= 4:
        return x, (lambda y: y), dtype
    return (em.one("Cast", [x], to=to_onnx_type("float32")),
            (lambda y: em.one("Cast", [y], to=to_onnx_type(dtype))), "float32")


# -- RMS normalisation --------------------------------------------------------------------
def _unit(call: ir.Call) -> bool:
    """``gamma`` is a constant of ones (the product with it changes nothing)."""
    g = call.args[1]
    return isinstance(g, ir.Constant) and bool(np.all(g.data == 1))


@emitter("nn.rms_norm")
def _rms_norm(em, call, args):
    """From opset 23 ``RMSNormalization``, which ONNX defines as ``nn.rms_norm`` is, in a half
    type too (the normalised value cast back before the product with the scale). Below it, in
    a half type, the graph Hugging Face's exports hold: ``Cast`` to float32, the normalisation,
    ``Cast`` back, ``Mul`` by ``gamma`` (left out when ``gamma`` is ones)."""
    a = call.attrs
    x, gamma = args
    nd = len(_tensor(call, 0).shape)
    axis = int(a.axis) % nd
    dt = call.checked_type.dtype
    eps = float(a.epsilon)
    if em.opset >= FUSED_OPSET:
        return em.one("RMSNormalization", [x, gamma], axis=axis, epsilon=eps)
    xw, back, wt = _wide(em, x, dt)
    square = em.one("Pow", [xw, _const(em, 2.0, wt)])
    mean = _reduce_node(em, "ReduceMean", 18, square, list(range(axis, nd)), 1)
    rms = em.one("Sqrt", [em.one("Add", [mean, _const(em, eps, wt)])])
    if wt == dt:
        return em.one("Mul", [em.one("Div", [xw, rms]), gamma])
    normalised = back(em.one("Div", [xw, rms]))
    return normalised if _unit(call) else em.one("Mul", [normalised, gamma])


# -- rotary embedding ---------------------------------------------------------------------
@emitter("nn.rotary_embedding")
def _rotary(em, call, args):
    a = call.attrs
    x, cos, sin = args
    shape = tuple(_tensor(call, 0).shape)
    head = shape[3]
    rot = int(a.rotary_dim) or head
    if em.opset >= FUSED_OPSET and type(rot) is int:
        if _tensor(call, 1).shape[0] != shape[0]:  # one row for every batch entry: ONNX wants one each
            target = em.ints([shape[0], 1, 1])
            cos, sin = em.one("Expand", [cos, target]), em.one("Expand", [sin, target])
        kw = {"rotary_embedding_dim": rot} if a.rotary_dim else {}
        return em.one("RotaryEmbedding", [x, cos, sin], interleaved=int(bool(a.interleaved)), **kw)
    return _rotary_decomposed(em, x, cos, sin, bool(a.interleaved), rot, head)


def _rotary_decomposed(em, x: str, cos: str, sin: str, interleaved: bool, rot: int, head: int) -> str:
    """Below opset 23, the form Hugging Face's models are exported in: ``x * c + turn(x) * s``
    with the tables widened to the rotated size once (``_merge_duplicates`` shares them between
    the calls), ``turn(x)`` being ``concat(-x2, x1)`` (interleaved: the pairs swapped, the first
    negated). The same numbers as the operator: ``x1 * c + (-x2) * s`` is ``x1 * c - x2 * s``."""
    last, axis1 = em.ints([-1]), em.ints([1])
    part = x if rot == head else em.one("Slice", [x, em.ints([0]), em.ints([rot]), last])
    if interleaved:  # tables (b, s, r/2) -> (b, 1, s, r) as c0 c0 c1 c1 ...; pairs swapped
        def widen(t):
            pairs = em.one("Concat", [em.one("Unsqueeze", [t, last])] * 2, axis=-1)
            return em.one("Unsqueeze", [em.one("Reshape", [pairs, em.ints([0, 0, rot])]), axis1])

        split = em.one("Reshape", [part, em.ints([0, 0, 0, rot // 2, 2])])
        x1, x2 = em.node("Split", [split, em.ints([1, 1])], 2, axis=-1)
        turned = em.one("Reshape", [em.one("Concat", [em.one("Neg", [x2]), x1], axis=-1), em.ints([0, 0, 0, rot])])
    else:
        def widen(t):
            return em.one("Unsqueeze", [em.one("Concat", [t, t], axis=-1), axis1])

        x1 = em.one("Slice", [part, em.ints([0]), em.ints([rot // 2]), last])
        x2 = em.one("Slice", [part, em.ints([rot // 2]), em.ints([rot]), last])
        turned = em.one("Concat", [em.one("Neg", [x2]), x1], axis=-1)
    out = em.one("Add", [em.one("Mul", [part, widen(cos)]), em.one("Mul", [turned, widen(sin)])])
    if rot == head:
        return out
    return em.one("Concat", [out, em.one("Slice", [x, em.ints([rot]), em.ints([head]), last])], axis=-1)


# -- attention ----------------------------------------------------------------------------
def _no_mask(call: ir.Call) -> bool:
    m = call.args[3]
    return isinstance(m, ir.Constant) and m.data.ndim == 0 and m.data.dtype != np.bool_ and float(m.data) == 0.0


def _cache_concat(em, name: str):
    """The ``Concat(past, new, axis=2)`` that wrote ``name``, ``past`` a graph input: what
    ``Attention`` takes in as ``past_key``/``past_value`` and gives back as ``present``."""
    n = _producer(em, name, "Concat")
    if n is None or len(n.input) != 2:
        return None
    axis = next((att.i for att in n.attribute if att.name == "axis"), None)
    return n if axis in (2, -2) else None


def _half(dtype: str) -> bool:
    return np.dtype(dtype).itemsize < 4


@emitter("nn.attention")
def _attention(em, call, args):
    """From opset 23 ``Attention`` (in a half type with ``softmax_precision=1``, float32: ONNX's
    function body then rounds where ``nn.attention`` does), except float32 values under a half
    query, which ``Attention`` cannot take (its output has the query's type): those, and every
    attention below opset 23, are written as the nodes they stand for."""
    q, k, v, mask = args
    qt = _tensor(call, 0)
    dt = qt.dtype
    head = qt.shape[3]
    scale = call.attrs.scale
    mask = "" if _no_mask(call) else mask
    if em.opset >= FUSED_OPSET and (not mask or _tensor(call, 3).ndim >= 2) and call.checked_type.dtype == dt:
        kw = {} if scale is None else {"scale": float(scale)}
        if _half(dt):
            kw["softmax_precision"] = onnx.TensorProto.FLOAT
        kc, vc = _cache_concat(em, k), _cache_concat(em, v)
        if kc is not None and vc is not None:
            em.nodes.remove(kc)
            em.nodes.remove(vc)
            outs = em.node("Attention", [q, kc.input[1], vc.input[1], mask, kc.input[0], vc.input[0]], 3, **kw)
            em.nodes[-1].output[1], em.nodes[-1].output[2] = kc.output[0], vc.output[0]
            return outs[0]
        return em.one("Attention", [q, k, v, mask] if mask else [q, k, v], **kw)
    return _decomposed_attention(em, call, q, k, v, mask, dt, head, scale, bool(call.attrs.zero_masked_rows))


def _decomposed_attention(em, call, q, k, v, mask, dt, head, scale, guard: bool) -> str:
    """``softmax(q s @ (k s)^T + mask) @ v`` (the NaN rows zeroed where the operator says so; no
    multiply by a scale of 1); grouped-query heads as a 5-D product ``(batch, kv_heads, group,
    seq, head)`` against the key-value heads unsqueezed, so the keys and values are never
    repeated. In a half type ``dt`` the masked scores are cast to float32 for the softmax and
    the probabilities back to ``dt`` before ``dt`` values (float32 values: not)."""
    root = math.sqrt(1.0 / math.sqrt(head) if scale is None else float(scale))
    s = _const(em, root, dt)

    def scaled(t: str) -> str:
        return t if np.asarray(root, dt) == 1 else em.one("Mul", [t, s])

    q_heads, kv_heads = _tensor(call, 0).shape[1], _tensor(call, 1).shape[1]
    grouped = q_heads != kv_heads
    if grouped and not (type(q_heads) is int and type(kv_heads) is int):
        raise FormatError(f"nn.attention with {q_heads} query and {kv_heads} key-value heads: below opset "
                          f"{FUSED_OPSET} the grouped heads must be static; export at opset {FUSED_OPSET}")
    k_t = em.one("Transpose", [scaled(k)], perm=[0, 1, 3, 2])
    qs = scaled(q)
    if grouped:
        group = q_heads // kv_heads
        qs = em.one("Reshape", [qs, em.ints([0, kv_heads, group, -1, head])])
        k_t, v = (em.one("Unsqueeze", [t, em.ints([2])]) for t in (k_t, v))
    scores = em.one("MatMul", [qs, k_t])
    if mask:
        mt = _tensor(call, 3)
        if mt.dtype == "bool":
            mask = em.one("Where", [mask, _const(em, 0.0, dt), _const(em, -np.inf, dt)])
        if grouped:
            mask = _grouped_mask(em, mask, tuple(mt.shape), q_heads, kv_heads)
        scores = em.one("Add", [scores, mask])
    half = _half(dt)
    if half:
        scores = em.one("Cast", [scores], to=onnx.TensorProto.FLOAT)
    p = em.one("Softmax", [scores], axis=-1)
    pdt = "float32" if half else dt
    if half and call.checked_type.dtype == dt:
        p, pdt = em.one("Cast", [p], to=to_onnx_type(dt)), dt  # (NaN stays NaN: the guard after it)
    if guard:
        p = em.one("Where", [em.one("IsNaN", [p]), _const(em, 0.0, pdt), p])
    out = em.one("MatMul", [p, v])
    if grouped:
        out = em.one("Reshape", [out, em.ints([0, q_heads, -1, call.checked_type.shape[3]])])
    return out


def _grouped_mask(em, mask: str, shape: tuple, q_heads: int, kv_heads: int) -> str:
    """A mask broadcasting against ``(batch, q_heads, q_seq, kv_seq)`` made to broadcast against
    the grouped scores ``(batch, kv_heads, group, q_seq, kv_seq)``."""
    if len(shape) <= 2:
        return mask
    if len(shape) == 3:
        mask = em.one("Unsqueeze", [mask, em.ints([0])])
        shape = (1,) + shape
    if shape[1] == 1:
        return em.one("Unsqueeze", [mask, em.ints([2])])
    return em.one("Reshape", [mask, em.ints([shape[0], kv_heads, q_heads // kv_heads, shape[2], shape[3]])])


# -- heads in 3-D -------------------------------------------------------------------------
def _int_attr(node, name: str, default=None):
    return next((a.i for a in node.attribute if a.name == name), default)


def _ints_attr(node, name: str):
    return next((list(a.ints) for a in node.attribute if a.name == name), None)


def heads_in_3d(em, view) -> None:
    """``Attention`` (and the ``RotaryEmbedding`` before it) on the projections as they come,
    ``(batch, seq, heads * head)``, with ``q_num_heads``/``kv_num_heads`` (``num_heads``): the
    exporters' ``Reshape`` to ``(batch, seq, heads, head)`` and ``Transpose`` to ``(batch, heads,
    seq, head)`` of the query, key and value go, and so do the ``Transpose`` back and the
    ``Reshape`` of the output. Eight nodes a layer fewer for the same kernels (a decode step's
    time is mostly such small nodes). Only where every one of them is read by this chain alone;
    the changes go through ``view`` (:class:`~.node_view.NodeView`)."""
    atts = [n for n in view.alive() if n.op_type == "Attention" and not n.domain
            and _int_attr(n, "q_num_heads") is None]
    if not atts:
        return

    def only_reader(name: str, node) -> bool:
        return view.only_reader(name) is node

    def readers_of(name: str) -> list:
        return view.readers_of(name)

    def split_heads(name: str, reader):
        """``(x3, heads, [nodes to drop])`` for ``Transpose(Reshape(x3, (b, s, h, d)), [0, 2, 1, 3])``."""
        t = view.writer(name)
        if t is None or t.op_type != "Transpose" or _ints_attr(t, "perm") != [0, 2, 1, 3] or not only_reader(name, reader):
            return None
        r = view.writer(t.input[0])
        if r is None or r.op_type != "Reshape" or not only_reader(t.input[0], t):
            return None
        four, three = em.shapes.get(r.output[0]), em.shapes.get(r.input[0])
        if (four is None or three is None or len(four) != 4 or len(three) != 3 or type(four[2]) is not int
                or type(four[3]) is not int or three[:2] != four[:2] or three[2] != four[2] * four[3]):
            return None
        return r.input[0], four[2], [t, r]

    plans = []
    for att in atts:
        plan = {"att": att, "drop": [], "rotary": []}
        heads = []
        for i in range(3):
            name = att.input[i]
            rot = view.writer(name)
            if rot is not None and rot.op_type == "RotaryEmbedding" and not rot.domain and only_reader(name, att) \
                    and _int_attr(rot, "num_heads") is None:
                got = split_heads(rot.input[0], rot)
                if got is None:
                    break
                plan["rotary"].append((rot, got[0], got[1]))
                heads.append((name, got[1]))
            else:
                got = split_heads(name, att)
                if got is None:
                    break
                heads.append((got[0], got[1]))
            plan["drop"].extend(got[2])
        else:
            y = att.output[0]
            t2 = view.only_reader(y)
            if (t2 is None or t2.op_type != "Transpose" or _ints_attr(t2, "perm") != [0, 2, 1, 3]
                    or view.only_reader(t2.output[0]) is None):
                continue
            r2 = readers_of(t2.output[0])[0]
            target = em.values.get(r2.input[1]) if r2.op_type == "Reshape" and len(r2.input) > 1 else None
            out = em.shapes.get(r2.output[0])  # (None for a graph output, renamed since)
            if r2.op_type != "Reshape" or (out is not None and len(out) not in (2, 3)) or (
                    target is not None and any(int(v) == 0 for v in list(target)[2:])):
                continue
            plan.update(heads=heads, t2=t2, r2=r2)
            plans.append(plan)
    for plan in plans:
        _heads_in_3d(em, view, plan)


def _heads_in_3d(em, view, plan: dict) -> None:
    """One attention's plan (see :func:`heads_in_3d`) carried out: new nodes in the old ones' places."""
    att, heads, t2 = plan["att"], plan["heads"], plan["t2"]
    for rot, x3, h in plan["rotary"]:
        view.replace(rot, _with(rot, {0: x3}, num_heads=h))
    y = att.output[0]
    view.replace(att, _with(att, {i: name for i, (name, _) in enumerate(heads)},
                            q_num_heads=heads[0][1], kv_num_heads=heads[1][1]))
    r2 = view.move_reader(plan["r2"], t2.output[0], y)
    view.drop(t2, *plan["drop"])
    four = em.shapes.get(t2.output[0])
    if (four is not None and len(four) == 4 and type(four[2]) is int and type(four[3]) is int
            and em.shapes.get(r2.output[0]) == (four[0], four[1], four[2] * four[3]) and r2.output[0] not in view.pinned):
        view.move_readers(r2.output[0], y)  # a reshape to the shape the output has now
        view.drop(r2)


def _with(node, inputs: dict, **ints):
    """A copy of ``node`` with the inputs at the given positions and the int attributes added."""
    new = onnx.NodeProto()
    new.CopyFrom(node)
    for i, name in inputs.items():
        new.input[i] = name
    new.attribute.extend([helper_attr(k, v) for k, v in ints.items()])
    return new


def helper_attr(name: str, value: int):
    from onnx import helper

    return helper.make_attribute(name, int(value))


def llm_peepholes(em, view) -> None:
    """What the export does once every node is written (see the module doc), through ``view``."""
    heads_in_3d(em, view)
