"""Node children described once: each class's FIELDS drive the traversals, the rebuild,
structural comparison and hashing, the verifier and the printer's use counts."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from passhost import ir
from passhost.ir import expr as ir_expr

HOST = Path(ir.__file__).resolve().parent


def _x(name="x"):
    return ir.var(name, shape=(2,), dtype="float32")


def _samples():
    x, y = _x(), _x("y")
    call = ir.add(x, y)
    tup = ir.Tuple([x, call])
    v = ir.var("v")
    return {
        ir.Call: call,
        ir.Tuple: tup,
        ir.TupleGetItem: ir.TupleGetItem(tup, 1),
        ir.Function: ir.Function([x, y], call, attrs={"Primitive": 1}),
        ir.Let: ir.Let(v, call, ir.multiply(v, v)),
        ir.If: ir.If(ir.const(True), x, call),
    }


def test_every_node_class_describes_its_fields_once_and_children_follow_them():
    assert set(ir_expr.NODE_CLASSES) == {ir.Var, ir.Constant, ir.GlobalVar, ir.Op, ir.Call, ir.Function,
                                         ir.Tuple, ir.TupleGetItem, ir.Let, ir.If}
    for cls, node in _samples().items():
        want = []
        for name, kind in cls.FIELDS:
            value = getattr(node, name)
            if kind in (ir_expr.CHILD, ir_expr.BINDER):
                want.append(value)
            elif kind in (ir_expr.CHILDREN, ir_expr.BINDERS):
                want.extend(value)
        assert ir.children(node) == tuple(want), cls.__name__
    assert ir.If.FIELDS == (("cond", "child"), ("true_branch", "child"), ("false_branch", "child"))


def test_op_is_defined_beside_the_other_node_classes():
    assert ir.Op.__module__ == "passhost.ir.expr" and ir.Op is ir_expr.Op
    assert "from .op import Op" not in (HOST / "expr.py").read_text()  # no bottom-of-module import


def test_with_children_rebuilds_every_class_keeping_its_data_and_span():
    z = _x("z")
    for cls, node in _samples().items():
        ir.set_span(node, ir.Span("model.onnx", name=cls.__name__))
        kids = ir.children(node)
        assert ir.with_children(node, kids) is node
        # replace the last child that is a use (not a binder, not the callee) by %z
        repl = list(kids)
        repl[-1] = z
        new = ir.with_children(node, repl)
        assert type(new) is cls and new is not node
        assert ir.children(new)[-1] is z
        for name, kind in cls.FIELDS:
            if kind == ir_expr.DATA:
                assert getattr(new, name) == getattr(node, name), (cls.__name__, name)
        assert new.span == node.span


def test_structural_equality_and_hash_read_data_fields_from_the_table():
    x = _x()
    tup = ir.Tuple([x, x])
    a, b = ir.TupleGetItem(tup, 0), ir.TupleGetItem(tup, 1)
    assert not ir.structural_equal(a, b)
    assert ir.structural_equal(a, ir.TupleGetItem(tup, 0))
    assert ir.structural_hash(a) == ir.structural_hash(ir.TupleGetItem(tup, 0))
    f1 = ir.Function([x], x, attrs={"Primitive": 1})
    f2 = ir.Function([x], x)
    assert not ir.structural_equal(f1, f2)
    # binders map one to one: fn (%a) { %a } equals fn (%b) { %b }
    p, q = _x("p"), _x("q")
    assert ir.structural_equal(ir.Function([p], ir.nn.relu(p)), ir.Function([q], ir.nn.relu(q)))
    assert ir.structural_hash(ir.Function([p], ir.nn.relu(p))) == ir.structural_hash(ir.Function([q], ir.nn.relu(q)))
    c = ir.const(np.float32(1))
    i1, i2 = ir.If(ir.const(True), x, c), ir.If(ir.const(True), c, x)
    assert not ir.structural_equal(i1, i2)


def test_default_visitors_walk_and_rebuild_through_the_table():
    seen = []

    class Names(ir.ExprVisitor):
        def visit_var(self, var):
            seen.append(var.name_hint)

    node = _samples()[ir.Let]
    Names().visit(node)
    assert seen == ["v", "x", "y"]

    class ReluToTanh(ir.ExprMutator):
        def visit_call(self, call):
            new = self.visit_children(call)
            return ir.tanh(new.args[0]) if new.op.name == "nn.relu" else new

    x = _x()
    out = ReluToTanh().visit(ir.If(ir.const(True), ir.nn.relu(x), x))
    assert ir.structural_equal(out, ir.If(ir.const(True), ir.tanh(x), x))


#: host modules that still name If's fields, and why: the node definition, and rules
#: that are about an If in particular (printing it, evaluating one branch, typing it,
#: the IfPattern of the pattern language)
_IF_FIELDS_ALLOWED = {"expr.py", "printer.py", "interpreter.py", "type_infer.py", "match.py", "nodes.py"}


def test_no_host_walker_spells_out_the_fields_of_if():
    offenders = []
    for path in HOST.rglob("*.py"):
        if path.name in _IF_FIELDS_ALLOWED:
            continue
        if re.search(r"\.(true_branch|false_branch)\b", path.read_text()):
            offenders.append(str(path.relative_to(HOST)))
    assert offenders == []
