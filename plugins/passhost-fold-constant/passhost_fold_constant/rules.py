"""FoldConstant as rules: the pass's reference semantics, in a reader's words
(:mod:`._walk` is the same pass as a hand-fused loop, the one that runs; a property test
holds the two to structurally equal results).

Walking bottom-up (:func:`passhost.ir.rewrite_post_order`), outside ``Primitive``
functions:

* a call of an operator that computes (not stateful, not ``on_device``-like, not ``qnn.*``
  unless ``fold_qnn``) whose arguments are all constants (or tuples of them) is evaluated
  with its kernel, unless its result is larger than ``MAX_FOLD_BYTES`` or depends on a
  size variable; a folded weight is named after the first named one it came from;
* ``shape_of``/``ndarray_size`` of a static shape is a constant, of a symbolic one its
  ``shape_value``, and integer arithmetic on shape values folds as far as it is known
  (:func:`passhost.ir.fold_symbolic`);
* ``let %v = <constant>; body`` is ``body`` with the constant for ``%v``;
* ``if`` on a constant condition is the branch taken; ``(a, b).i`` of a literal tuple its
  field::

    %0 = add(1f, 2f);  let %v = multiply(%0, 2f);  add(%x, %v)     ->  add(%x, 6f)
"""
from __future__ import annotations

import numpy as np

from passhost import ir
from passhost.ir import Call, Constant, If, Op, TensorType, Tuple, TupleGetItem, is_primitive, type_of

from ._eval import _EVALUATE, _SHAPE, _fold_shape_op, _op_kind, _unwrap, evaluate_call, is_complex_constant
from ._eval import is_simple_constant
from ._walk import MAX_FOLD_BYTES, _derived_name

__all__ = ["fold_rules"]


def fold_rules(expr: ir.Expr, fold_qnn: bool = False) -> ir.Expr:
    """``expr`` with its constants folded (see the module docstring)."""
    shape_values: set = set()  # what fold_symbolic may take as an argument

    def shape_data(x: ir.Expr) -> bool:
        return type(x) is Constant or x in shape_values or (
            type(x) is Tuple and any(f in shape_values for f in x.fields)
            and all(type(f) is Constant or f in shape_values for f in x.fields))

    def call(node: Call) -> ir.Expr:
        kind = _op_kind(node.op, fold_qnn)
        if kind == _SHAPE and node.args:
            folded = _fold_shape_op(node, node)
            shape_values.add(node if folded is None else folded)
            return folded
        if kind != _EVALUATE:
            return None
        if not node.args:
            if node.op.name == "shape_value":
                shape_values.add(node)
            return None
        if all(is_complex_constant(a) for a in node.args):
            ty = type_of(node)
            if type(ty) is TensorType and (not ty.is_static or _too_large(ty)):
                return None
            out = evaluate_call(node, ty)
            if type(out) is Constant:
                _derived_name(out, node.args, node.op)
            return out
        if any(a in shape_values or type(a) is Tuple for a in node.args) and all(map(shape_data, node.args)):
            folded = ir.fold_symbolic(node)
            if folded is not None and type(folded) is Call:
                shape_values.add(folded)
            return folded
        return None

    def rule(node: ir.Expr) -> ir.Expr:
        t = type(node)
        if t is Call and type(node.op) is Op:
            return call(node)
        if t is TupleGetItem:
            inner = _unwrap(node.tuple_value)
            return inner.fields[node.index] if type(inner) is Tuple and node.index < len(inner.fields) else None
        if t is If:
            c = _unwrap(node.cond)
            if type(c) is Constant:
                return node.true_branch if c.data.tobytes()[:1] not in (b"", b"\x00") else node.false_branch
        return None

    def bind(var: ir.Var, value: ir.Expr):
        return value if is_simple_constant(value) else None

    return ir.rewrite_post_order(expr, rule, skip=lambda e: e is not expr and is_primitive(e), keep_types=True,
                                 bind=bind)


def _too_large(ty: TensorType) -> bool:
    n = 1
    for d in ty.shape:
        n *= d
    return n * np.dtype(ty.dtype).itemsize > MAX_FOLD_BYTES

