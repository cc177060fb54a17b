"""ConvertLayout: run convolutions (and their neighbours) in desired layouts (TVM's ``convert_layout.cc``).

``desired_layouts`` maps an operator with a data-layout attribute to ``[data_layout,
kernel_layout]`` (``"default"`` kernel: ``HWIO`` for ``NHWC`` data, ``OIHW`` for ``NCHW``),
e.g. ``{"nn.conv2d": ["NHWC", "HWIO"]}``. Every value carries a *current* layout beside
its *original* one; one post-order sweep rewrites each call:

* a **desired** op gets its inputs converted (``layout_transform(data, "NCHW", "NHWC")``,
  ``layout_transform(weight, "OIHW", "HWIO")`` -- folded later by FoldConstant when the
  weight is a constant) and runs in the desired layout;
* ops that **adapt** follow their input's current layout: layout-agnostic element-wise
  ops (``OpDef.extra["layout_agnostic"]``), broadcast ops (every operand is brought to the
  layout of the first converted one; an operand of lower rank ``k`` -- laid out as the
  trailing ``k`` axes of the original layout -- gets ``expand_dims(x, 0, rank - k)`` and
  then a ``layout_transform`` from its expanded layout, TVM's ``Layout::ExpandPrimal``;
  scalars broadcast as they are), reductions (axes moved, ``exclude`` too; without
  ``keepdims`` the remaining axes keep their converted order) and the operators with a
  rule of their own in :mod:`.rules` (TVM's ``FInferCorrectLayout``: pools, resize,
  upsampling, batch/layer/instance norm, ``strided_slice``, ``topk``, ``slice_like``,
  ``nn.l2_normalize``) or here (``transpose``, ``squeeze``, ``concatenate``, ``split``);
* ``nn.dense`` takes its input in the original layout and declares its output ``"NC"``
  (TVM's ``DenseInferCorrectLayout``), so a 1-D bias added to it (``CanonicalizeOps``
  turns ``nn.bias_add`` into ``add``) gets ``expand_dims(b, 0, 1)`` -- the pattern of
  TVM's ResNet-18 op diff;
* ``TupleGetItem`` of a literal tuple is its field, layout included (TVM's ForwardRewrite
  folds it);
* any other consumer (convolutions and ROI operators not in ``desired_layouts``,
  ``nn.softmax``, ``nn.bias_add`` called without CanonicalizeOps, ``nn.batch_flatten``,
  ``reshape``, tuples, the function result, ...) gets its inputs transformed back to
  their original layouts, as TVM does for an operator without a layout rule.

Transforms are memoised per (value, source, target), so a value read in the same layout
by several consumers is transformed once. A closure is converted with the function that
holds it (as TVM's ForwardRewrite enters it): a value the closure shares with the code
around it is rewritten once, for both. Primitive functions (FuseOps output) are left as
they are. Linear, explicit stack (one post-order list).

Before::

    def @main(%x: Tensor[(1, 3, 8, 8), float32], %w: Tensor[(4, 3, 3, 3), float32]) {
      %0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1]);
      %1 = nn.relu(%0);
      nn.batch_flatten(%1)
    }

After ``ConvertLayout({"nn.conv2d": ["NHWC", "default"]})``::

    def @main(%x: Tensor[(1, 3, 8, 8), float32], %w: Tensor[(4, 3, 3, 3), float32]) {
      %0 = layout_transform(%x, src_layout="NCHW", dst_layout="NHWC");
      %1 = layout_transform(%w, src_layout="OIHW", dst_layout="HWIO");
      %2 = nn.conv2d(%0, %1, padding=[1, 1, 1, 1], data_layout="NHWC", kernel_layout="HWIO");
      %3 = nn.relu(%2);
      %4 = layout_transform(%3, src_layout="NHWC", dst_layout="NCHW");
      nn.batch_flatten(%4)
    }
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from passhost.errors import PassError
from passhost.ir import (
    Call,
    Constant,
    Expr,
    Function,
    GlobalVar,
    Op,
    OpPattern,
    TensorType,
    Tuple,
    TupleGetItem,
    Var,
    children,
    paused_gc,
    post_order,
    set_span,
    with_children,
)
from passhost.ir import parse_layout

from .rules import RULES, layout_attrs, moved_axis
from passhost.transform import function_pass

__all__ = ["normalize_desired_layouts", "expand_primal", "convert_layout_function", "ConvertLayout"]

_NAME = "ConvertLayout"
_DEFAULT_KERNEL = {"NCHW": "OIHW", "NHWC": "HWIO"}
_REDUCE_ATTRS = ("axis", "keepdims", "exclude")
#: ops whose output layout is known (though never converted) when their input has this rank,
#: as TVM's ``FInferCorrectLayout`` of ``nn.dense`` declares ``"NC"``
_KNOWN_OUTPUT = {"nn.dense": (2, "NC")}


def normalize_desired_layouts(desired: Any) -> dict:
    """``{op name: (data layout, kernel layout or "default")}``, validated.

    :raises PassError: for anything but a mapping of op names to one or two layout strings
    """
    if not isinstance(desired, Mapping) or not desired:
        raise PassError(f"{_NAME}: desired_layouts must be a non-empty dict such as "
                        f"{{'nn.conv2d': ['NHWC', 'HWIO']}}, got {desired!r}", _NAME)
    out = {}
    for name, layouts in desired.items():
        if not isinstance(name, str):
            raise PassError(f"{_NAME}: desired_layouts keys are operator names, got {name!r}", _NAME)
        try:
            op = Op.get(name)
        except Exception:
            raise PassError(f"{_NAME}: desired_layouts names the unknown operator {name!r}", _NAME) from None
        if not layout_attrs(op).get("data_layout_attr"):
            raise PassError(f"{_NAME}: operator {name!r} has no data layout attribute; "
                            "desired layouts can be given for the convolutions, pools, image.resize2d, "
                            "vision.roi_align/roi_pool and qnn.conv2d", _NAME)
        if isinstance(layouts, str) or not isinstance(layouts, (list, tuple)) or not 1 <= len(layouts) <= 2:
            raise PassError(f"{_NAME}: desired_layouts[{name!r}] must be [data_layout] or "
                            f"[data_layout, kernel_layout], got {layouts!r}", _NAME)
        data = layouts[0]
        kernel = layouts[1] if len(layouts) == 2 else "default"
        for lay in (data,) + ((kernel,) if kernel != "default" else ()):
            try:
                parse_layout(lay)
            except Exception as err:
                raise PassError(f"{_NAME}: desired_layouts[{name!r}]: {err}", _NAME) from None
        if kernel == "default" and layout_attrs(op).get("kernel_layout_attr") and data not in _DEFAULT_KERNEL:
            raise PassError(f"{_NAME}: no default kernel layout for data layout {data!r}; "
                            "give the kernel layout explicitly", _NAME)
        out[name] = (data, kernel)
    return out


def expand_primal(sub: str, dst: str) -> str:
    """TVM's ``Layout::ExpandPrimal``: the axes of ``dst`` missing from ``sub`` (in ``dst``
    order) followed by ``sub`` -- the layout of ``sub`` after leading ``expand_dims``."""
    return "".join(c for c in dst if c not in sub) + sub


_moved_axis = moved_axis


def _rank(node: Expr) -> Optional[int]:
    if not node.has_type:
        return None
    ty = node.checked_type
    return len(ty.shape) if type(ty) is TensorType else None


class _Converter:
    """State of one function's rewrite."""

    def __init__(self, desired: dict) -> None:
        self.desired = desired
        self.new_of: dict = {}
        self.lay: dict = {}        # original node -> (original layout, current layout)
        self.bn_lay: dict = {}     # tuple-valued call -> (layout of its converted fields, their indices or None: all)
        self.memo: dict = {}       # (new expr, src, dst) -> transformed expr

    # -- transforms -------------------------------------------------------------------
    def transform(self, expr: Expr, src: str, dst: str) -> Expr:
        if src == dst:
            return expr
        key = (expr, src, dst)
        out = self.memo.get(key)
        if out is None:
            out = self.memo[key] = Call(Op.get("layout_transform"), [expr],
                                        {"src_layout": src, "dst_layout": dst})
        return out

    def orig(self, node: Expr) -> Expr:
        """``node`` rewritten, in its original layout."""
        new = self.new_of.get(node, node)
        lc = self.lay.get(node)
        if lc is not None:
            return self.transform(new, lc[1], lc[0])
        tl = self.bn_lay.get(node)
        return new if tl is None else self.untuple(node, new, tl)

    def untuple(self, node: Expr, new: Expr, tl: tuple) -> Expr:
        """A tuple-valued call used whole (not through ``TupleGetItem``): a tuple of its
        fields, each converted one transformed back to its original layout."""
        key = (new, "untuple")
        out = self.memo.get(key)
        if out is None:
            (o, c), which = tl
            n = len(node.checked_type.fields)
            out = self.memo[key] = Tuple([
                self.transform(TupleGetItem(new, i), c, o) if which is None or i in which else TupleGetItem(new, i)
                for i in range(n)])
        return out

    def in_layout(self, node: Expr, orig: str, want: str) -> Expr:
        """``node`` (originally laid out as ``orig``) rewritten, laid out as ``want``."""
        lc = self.lay.get(node)
        if lc is not None and lc[0] == orig:
            return self.transform(self.new_of[node], lc[1], want)
        return self.transform(self.orig(node), orig, want)

    def expand_expr(self, node: Expr, orig: str, want: str) -> Expr:
        """A lower-rank broadcast operand brought to rank ``len(orig)``, laid out as ``want``."""
        k = _rank(node)
        new = self.orig(node)
        if not k:
            return new  # a scalar (or untyped) operand broadcasts as it is
        n = len(orig)
        key = (new, "expand", n)
        exp = self.memo.get(key)
        if exp is None:
            exp = self.memo[key] = Call(Op.get("expand_dims"), [new], {"axis": 0, "num_newaxis": n - k})
        return self.transform(exp, expand_primal(orig[n - k:], want), want)

    # -- rules -----------------------------------------------------------------------------
    def call(self, node: Call) -> Expr:
        op = node.op
        if type(op) is not Op:
            return self.generic(node)
        name = op.name
        lattrs = layout_attrs(op)
        if lattrs.get("data_layout_attr") is not None:
            if name in self.desired:
                return self.desired_op(node, lattrs)
            if name not in RULES:
                return self.generic(node)  # a convolution keeps its own layouts, as TVM's ConvInferCorrectLayout
        rule = RULES.get(name) or _ADAPT.get(name)
        if rule is not None:
            out = rule(self, node)
            return self.generic(node) if out is None else out
        return self.general(node)

    def general(self, node: Call) -> Expr:
        """Operators without a rule of their own: element-wise, broadcast and reduce ones
        follow their input, ``nn.dense`` declares its output ``NC``, the rest read their
        inputs in the original layouts."""
        d = node.op.definition
        args = node.args
        a0 = args[0] if args else None
        lc0 = self.lay.get(a0) if a0 is not None else None
        known = _KNOWN_OUTPUT.get(node.op.name)
        if known is not None:
            out = self.generic(node)
            if a0 is not None and _rank(a0) == known[0]:
                self.lay[node] = (known[1], known[1])
            return out
        if d.pattern == OpPattern.BROADCAST and d.extra.get("channel_axis_attr") is None:
            return self.broadcast(node)  # a later operand may carry the layout
        if lc0 is None:
            return self.generic(node)
        if d.extra.get("layout_agnostic") and len(args) == 1:
            self.lay[node] = lc0
            return self.rebuild(node, [self.new_of[a0]], node.attrs)
        if d.pattern == OpPattern.COMM_REDUCE and len(args) == 1 and all(k in node.attrs for k in _REDUCE_ATTRS):
            return self.reduce(node, lc0)
        return self.generic(node)

    def desired_op(self, node: Call, lattrs: dict) -> Expr:
        """An operator of ``desired_layouts``: its data (and kernel) in the desired layouts."""
        want, kernel = self.desired[node.op.name]
        dattr = lattrs["data_layout_attr"]
        attrs = dict(node.attrs)
        src = attrs[dattr]
        oattr = lattrs.get("out_layout_attr")
        out_orig = (attrs.get(oattr) if oattr else "") or src
        args = [self.in_layout(node.args[0], src, want)]
        kattr = lattrs.get("kernel_layout_attr")
        if kattr is not None:
            ksrc = attrs[kattr]
            kwant = _DEFAULT_KERNEL[want] if kernel == "default" else kernel
            args.append(self.in_layout(node.args[1], ksrc, kwant))
            attrs[kattr] = kwant
            rest = node.args[2:]
        else:
            rest = node.args[1:]
        args.extend(self.orig(a) for a in rest)
        attrs[dattr] = want
        if oattr:
            # a pool runs and returns in the desired layout (TVM's convert_pooling sets both);
            # a conv's out_layout "" follows its data layout
            attrs[oattr] = "" if kattr is not None else want
        self.lay[node] = (out_orig, want)
        return self.rebuild(node, args, attrs)

    def broadcast(self, node: Call) -> Expr:
        target = None
        for a in node.args:
            lc = self.lay.get(a)
            if lc is not None:
                target = lc
                break
        if target is None:
            return self.generic(node)
        o, c = target
        n = len(o)
        if _rank(node) != n:
            # a broadcast-pattern op that changes the rank (expand_dims, squeeze, ...): its
            # result is not in the operand's layout, so it gets its input in the original one
            return self.generic(node)
        args = []
        for a in node.args:
            lc = self.lay.get(a)
            if lc is not None and lc[0] == o:
                args.append(self.transform(self.new_of[a], lc[1], c))
            elif lc is not None:
                return self.generic(node)  # operands known in unrelated layouts
            elif _rank(a) == n:
                args.append(self.in_layout(a, o, c))
            elif _rank(a) is not None and _rank(a) < n:
                args.append(self.expand_expr(a, o, c))
            else:
                return self.generic(node)
        self.lay[node] = target
        return self.rebuild(node, args, node.attrs)

    def reduce(self, node: Call, lc0: tuple) -> Expr:
        """TVM's ``ReduceInferCorrectLayout``: the reduced axes move (``exclude`` lists the
        kept ones, which move the same way); the result keeps the remaining axes in their
        converted order, laid out accordingly."""
        o, c = lc0
        attrs = dict(node.attrs)
        axis = attrs["axis"]
        n = len(o)
        listed = () if axis is None else tuple(
            (a + n if a < 0 else a) for a in ((axis,) if isinstance(axis, int) else axis))
        if not listed:
            gone = set(o)  # every axis (exclude is ignored without axes, as in TVM)
        elif attrs["exclude"]:
            gone = {x for i, x in enumerate(o) if i not in listed}
        else:
            gone = {o[a] for a in listed}
        if axis is not None and listed:
            moved = sorted(c.index(o[a]) for a in listed)
            attrs["axis"] = moved[0] if isinstance(axis, int) and len(moved) == 1 else moved
        if attrs["keepdims"]:
            self.lay[node] = lc0
        else:
            o2, c2 = "".join(x for x in o if x not in gone), "".join(x for x in c if x not in gone)
            if o2 != c2:
                self.lay[node] = (o2, c2)
        return self.rebuild(node, [self.new_of[node.args[0]]], attrs)

    # -- layout rules of single operators (TVM's FInferCorrectLayout) -------------------------
    def converted_input(self, node: Call) -> Optional[tuple]:
        """``(original, current)`` layout of the first argument, when it was converted."""
        lc = self.lay.get(node.args[0])
        return lc if lc is not None and lc[0] != lc[1] else None

    def transpose(self, node: Call) -> Optional[Expr]:
        """Absorb the conversion: new axes read the converted input, the result is as before."""
        lc = self.converted_input(node)
        if lc is None:
            return None
        o, c = lc
        axes = node.attrs["axes"]
        attrs = dict(node.attrs)
        attrs["axes"] = [_moved_axis(a, o, c) for a in (range(len(o) - 1, -1, -1) if axes is None else axes)]
        return self.rebuild(node, [self.new_of[node.args[0]]], attrs)

    def squeeze(self, node: Call) -> Optional[Expr]:
        """Squeeze the same axes of the converted input; the rest keep their converted order."""
        lc = self.converted_input(node)
        a0 = node.args[0]
        if lc is None or not a0.has_type:
            return None
        o, c = lc
        n = len(o)
        axis = node.attrs["axis"]
        if axis is None:
            shape = a0.checked_type.shape
            if not all(isinstance(d, int) for d in shape):
                return None
            gone = {o[i] for i, d in enumerate(shape) if d == 1}
        else:
            gone = {o[a + n if a < 0 else a] for a in axis}
        attrs = dict(node.attrs)
        attrs["axis"] = sorted(c.index(x) for x in gone)
        out = self.rebuild(node, [self.new_of[a0]], attrs)
        o2, c2 = "".join(x for x in o if x not in gone), "".join(x for x in c if x not in gone)
        if o2 != c2:
            self.lay[node] = (o2, c2)
        return out

    def concatenate(self, node: Call) -> Optional[Expr]:
        """All fields in the layout of the first converted one; the axis follows."""
        tup = node.args[0]
        if type(tup) is not Tuple:
            return None
        target = next((self.lay[f] for f in tup.fields if f in self.lay), None)
        if target is None or target[0] == target[1]:
            return None
        o, c = target
        n = len(o)
        for f in tup.fields:
            lc = self.lay.get(f)
            if (lc is not None and lc[0] != o) or _rank(f) != n:
                return None
        attrs = dict(node.attrs)
        attrs["axis"] = _moved_axis(attrs["axis"], o, c)
        self.lay[node] = target
        return self.rebuild(node, [Tuple([self.in_layout(f, o, c) for f in tup.fields])], attrs)

    def split(self, node: Call) -> Optional[Expr]:
        """Split the converted input along the same axis; every field stays converted."""
        lc = self.converted_input(node)
        if lc is None:
            return None
        o, c = lc
        attrs = dict(node.attrs)
        attrs["axis"] = _moved_axis(attrs["axis"], o, c)
        self.bn_lay[node] = (lc, None)
        return self.rebuild(node, [self.new_of[node.args[0]]], attrs)

    def rebuild(self, node: Call, args: list, attrs: Any) -> Expr:
        """``node`` with new arguments and attributes, keeping its span (as TVM keeps
        ``ref_call->span``)."""
        if (attrs is node.attrs or attrs == node.attrs) and all(a is b for a, b in zip(args, node.args)):
            return node
        return set_span(Call(node.op, args, attrs), node.span)

    def generic(self, node: Expr) -> Expr:
        """Any other node: its inputs in their original layouts. A ``TupleGetItem`` of a
        literal tuple is that field, with its layout (TVM's ForwardRewrite folds it)."""
        if type(node) is TupleGetItem:
            tv = node.tuple_value
            if type(tv) is Tuple:
                field = tv.fields[node.index]
                if field in self.lay:
                    self.lay[node] = self.lay[field]
                elif field in self.bn_lay:
                    self.bn_lay[node] = self.bn_lay[field]
                return self.new_of.get(field, field)
            bl = self.bn_lay.get(tv)
            if bl is not None and (bl[1] is None or node.index in bl[1]):
                self.lay[node] = bl[0]
                new_tv = self.new_of[tv]
                return node if new_tv is tv else TupleGetItem(new_tv, node.index)
            if bl is not None:
                new_tv = self.new_of[tv]
                return node if new_tv is tv else TupleGetItem(new_tv, node.index)
        kids = children(node)
        return with_children(node, tuple(self.orig(k) if k in self.new_of else k for k in kids))

    def run(self, func: Function) -> Function:
        new_of = self.new_of
        for node in post_order(func.body, skip=_primitive):
            t = type(node)
            if t is Var or t is Constant or t is Op or t is GlobalVar or _primitive(node):
                new_of[node] = node
            elif t is Call:
                new_of[node] = self.call(node)
            else:
                new_of[node] = self.generic(node)
        body = self.orig(func.body)
        if body is func.body:
            return func
        return Function(func.params, body, func.ret_type, func.attrs)


def _primitive(node: Expr) -> bool:
    return type(node) is Function and bool(node.attrs.get("Primitive"))


#: operators with their own layout rule (each returns None to fall back to the generic one)
_ADAPT = {"transpose": _Converter.transpose, "squeeze": _Converter.squeeze,
          "concatenate": _Converter.concatenate, "split": _Converter.split}


def convert_layout_function(func: Function, desired_layouts: Mapping) -> Function:
    """``func`` with the ops of ``desired_layouts`` in their desired layouts (see the module docs).

    ``func`` must be typed (ranks decide how broadcast operands are expanded).
    """
    desired = normalize_desired_layouts(desired_layouts)
    with paused_gc():
        return _Converter(desired).run(func)


@function_pass(opt_level=3, name="ConvertLayout", required=["InferType", "CanonicalizeOps"], preserves_types=True)
class ConvertLayout:
    """Run the given operators in desired layouts, adapting their neighbours and inserting
    ``layout_transform`` at the edges.

    Function pass, ``opt_level`` 3, requires ``InferType`` and ``CanonicalizeOps``.
    Before / after with ``{"nn.conv2d": ["NHWC", "HWIO"]}``::

        %0 = nn.conv2d(%x, %w);     |  %0 = layout_transform(%x, src_layout="NCHW", dst_layout="NHWC");
        nn.relu(%0)                 |  %1 = layout_transform(%w, src_layout="OIHW", dst_layout="HWIO");
                                    |  %2 = nn.conv2d(%0, %1, data_layout="NHWC", kernel_layout="HWIO");
                                    |  %3 = nn.relu(%2);
                                    |  layout_transform(%3, src_layout="NHWC", dst_layout="NCHW")

    :param desired_layouts: ``{op name: [data_layout, kernel_layout or "default"]}``
    """

    def __init__(self, desired_layouts: Any = None) -> None:
        # ``None`` is accepted so the registry can build the pass to read its info;
        # running it without desired layouts is an error
        self.desired_layouts = None if desired_layouts is None else normalize_desired_layouts(desired_layouts)

    def transform_function(self, func: Function, mod: Any, ctx: Any) -> Function:
        if self.desired_layouts is None:
            raise PassError(f"{_NAME} needs desired_layouts, e.g. "
                            "ConvertLayout(desired_layouts={'nn.conv2d': ['NHWC', 'HWIO']})", _NAME)
        return _Converter(self.desired_layouts).run(func)  # the pass manager pauses the GC
