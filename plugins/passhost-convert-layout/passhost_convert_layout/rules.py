"""The layout rules of single operators: TVM's ``FInferCorrectLayout`` functions.

Each rule gets the converter and a call whose arguments are rewritten already, and
returns the rewritten call (recording the layout of its result), or None when the call
cannot follow its input's layout: the converter then gives it its inputs in their
original layouts, as TVM falls back when a rule declines. An operator without a rule
here is handled by the converter's general cases (element-wise, broadcast and reduce
operators); any other operator gets its inputs transformed back.

The rules (TVM's, from ``src/relay/op/**``):

* pools (``PoolInferCorrectLayout``): ``layout`` follows the input; a pool whose
  ``out_layout`` is set keeps its layout (its input is transformed back). Before and
  after, with the conv converted to NCHW::

      nn.max_pool2d(%y, pool_size=[2, 2], layout="NHWC")  |  nn.max_pool2d(%y', pool_size=[2, 2])

* ``image.resize2d`` (``ResizeInferCorrectLayout``): ``layout`` follows the input;
* ``nn.upsampling``/``nn.upsampling3d``: follow only a layout that keeps H, W (and D) where
  they are (an NCHW to NHWC conversion moves them: transformed back);
* ``vision.roi_align``/``vision.roi_pool`` and convolutions not in ``desired_layouts``:
  their own layout, so the input is transformed back;
* ``nn.batch_norm``, ``nn.layer_norm``, ``nn.instance_norm``, ``qnn.requantize``: the
  channel ``axis`` moves (``axis=3`` of NHWC is ``axis=1`` of NCHW);
* ``strided_slice`` (``StridedSliceInferCorrectLayout``): with ``axes``, the axes move;
  without, ``begin``/``end``/``strides`` are permuted, completed to every axis (a missing
  end is the axis's size, needed static)::

      strided_slice(%y, begin=[0, 1], end=[1, -1, 10], strides=[1, 1, 2, 1])   /* NCHW */
      strided_slice(%y', begin=[0, 0, 0, 1], end=[1, 10, 56, -1], strides=[1, 2, 1, 1])  /* NHWC */

* ``topk``: ``axis`` moves; both results keep the converted layout;
* ``slice_like``: ``axes`` move when both arguments carry the same converted layout;
* ``nn.l2_normalize``: ``axis`` moves (in the given order);
* ``transpose``, ``squeeze``, ``concatenate``, ``split``: as before (see the converter).
"""
from __future__ import annotations

from typing import Any, Optional

from passhost.ir import Call, Expr, TensorType

#: desired-layout attributes of operators whose definitions do not declare them
LAYOUT_ATTRS_BY_NAME = {
    "qnn.conv2d": {"data_layout_attr": "data_layout", "kernel_layout_attr": "kernel_layout",
                   "out_layout_attr": "out_layout"},
}
_POOLS = ("nn.max_pool2d", "nn.avg_pool2d", "nn.global_max_pool2d", "nn.global_avg_pool2d",
          "nn.adaptive_max_pool2d", "nn.adaptive_avg_pool2d")
_CHANNEL_OPS = ("nn.batch_norm", "nn.layer_norm", "nn.instance_norm", "qnn.requantize")


def layout_attrs(op: Any) -> dict:
    """The ``*_layout_attr`` keys of ``op`` (its definition's, else this plugin's table)."""
    extra = op.definition.extra
    if extra.get("data_layout_attr"):
        return extra
    return LAYOUT_ATTRS_BY_NAME.get(op.name, extra)


def moved_axis(axis: int, orig: str, cur: str) -> int:
    """Where axis ``axis`` of a tensor laid out as ``orig`` is once it is laid out as ``cur``
    (``axis`` may count from the end)."""
    return cur.index(orig[axis + len(orig) if axis < 0 else axis])


def _static_shape(node: Expr) -> Optional[tuple]:
    if not node.has_type or type(node.checked_type) is not TensorType:
        return None
    return node.checked_type.shape


def _follow(cv, node: Call, attrs: dict, lc: tuple, first: Expr) -> Expr:
    """``node`` rebuilt on ``first`` (its converted argument) with ``attrs``, its result in ``lc``."""
    cv.lay[node] = lc
    return cv.rebuild(node, [first] + [cv.orig(a) for a in node.args[1:]], attrs)


def pool(cv, node: Call) -> Optional[Expr]:
    lc = cv.converted_input(node)
    attrs = node.attrs
    if lc is None or attrs.out_layout or attrs.layout != lc[0]:
        return None
    return _follow(cv, node, dict(attrs, layout=lc[1]), lc, cv.new_of[node.args[0]])


def resize(cv, node: Call) -> Optional[Expr]:
    lc = cv.converted_input(node)
    if lc is None or node.attrs.layout != lc[0]:
        return None
    return _follow(cv, node, dict(node.attrs, layout=lc[1]), lc, cv.new_of[node.args[0]])


def upsampling(cv, node: Call) -> Optional[Expr]:
    lc = cv.converted_input(node)
    if lc is None or node.attrs.layout != lc[0]:
        return None
    o, c = lc
    if any(o.index(k) != c.index(k) for k in "DHW" if k in o):
        return None
    return _follow(cv, node, dict(node.attrs, layout=c), lc, cv.new_of[node.args[0]])


def channel_axis(cv, node: Call) -> Optional[Expr]:
    lc = cv.converted_input(node)
    if lc is None:
        return None
    attrs = dict(node.attrs, axis=moved_axis(node.attrs.axis, *lc))
    if node.op.name == "nn.batch_norm":
        cv.bn_lay[node] = (lc, (0,))  # mean and variance keep their "C" layout
        return cv.rebuild(node, [cv.new_of[node.args[0]]] + [cv.orig(a) for a in node.args[1:]], attrs)
    return _follow(cv, node, attrs, lc, cv.new_of[node.args[0]])


def _permuted_slice(attrs: Any, o: str, c: str, shape: Optional[tuple]) -> Optional[dict]:
    """begin/end/strides of a ``strided_slice`` without ``axes``, permuted from ``o`` to ``c``."""
    size_mode = attrs.slice_mode == "size"
    begin, end = attrs.begin, attrs.end
    strides = tuple(1 for _ in attrs.strides) if size_mode else attrs.strides
    new_begin, new_end, new_strides = [], [], []
    for letter in c:
        i = o.index(letter)
        if i >= len(end) and (shape is None or type(shape[i]) is not int):
            return None  # TVM needs the axis's size to close the range
        new_begin.append(begin[i] if i < len(begin) else 0)
        new_end.append(end[i] if i < len(end) else shape[i])
        new_strides.append(strides[i] if i < len(strides) else 1)
    return dict(attrs, begin=tuple(new_begin), end=tuple(new_end), strides=tuple(new_strides))


def strided_slice(cv, node: Call) -> Optional[Expr]:
    lc = cv.converted_input(node)
    if lc is None:
        return None
    o, c = lc
    attrs = node.attrs
    if attrs.axes is not None:
        new = dict(attrs, axes=tuple(moved_axis(a, o, c) for a in attrs.axes))
    else:
        new = _permuted_slice(attrs, o, c, _static_shape(node.args[0]))
        if new is None:
            return None
    return _follow(cv, node, new, lc, cv.new_of[node.args[0]])


def topk(cv, node: Call) -> Optional[Expr]:
    lc = cv.converted_input(node)
    if lc is None:
        return None
    attrs = dict(node.attrs, axis=moved_axis(node.attrs.axis, *lc))
    if node.attrs.ret_type == "both":
        cv.bn_lay[node] = (lc, None)  # values and indices, both converted
        return cv.rebuild(node, [cv.new_of[node.args[0]]], attrs)
    return _follow(cv, node, attrs, lc, cv.new_of[node.args[0]])


def slice_like(cv, node: Call) -> Optional[Expr]:
    lc = cv.converted_input(node)
    data, like = node.args
    if lc is None or node.attrs.axes is None or cv.lay.get(like) != lc:
        return None
    attrs = dict(node.attrs, axes=tuple(moved_axis(a, *lc) for a in node.attrs.axes))
    cv.lay[node] = lc
    return cv.rebuild(node, [cv.new_of[data], cv.new_of[like]], attrs)


def l2_normalize(cv, node: Call) -> Optional[Expr]:
    lc = cv.converted_input(node)
    if lc is None or node.attrs.axis is None:
        return None
    attrs = dict(node.attrs, axis=tuple(moved_axis(a, *lc) for a in node.attrs.axis))
    return _follow(cv, node, attrs, lc, cv.new_of[node.args[0]])


def own_layout(cv, node: Call) -> None:
    """Operators that keep their own layout (TVM's ROI rules, convolutions' rules)."""
    return None


RULES = {
    **{name: pool for name in _POOLS},
    **{name: channel_axis for name in _CHANNEL_OPS},
    "image.resize2d": resize, "nn.upsampling": upsampling, "nn.upsampling3d": upsampling,
    "strided_slice": strided_slice, "topk": topk, "slice_like": slice_like, "nn.l2_normalize": l2_normalize,
    "vision.roi_align": own_layout, "vision.roi_pool": own_layout,
}
