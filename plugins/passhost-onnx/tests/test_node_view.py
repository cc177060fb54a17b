"""passhost_onnx.node_view: the ONNX-level view the export's remaining rewrites go through."""
from __future__ import annotations

import pytest
from onnx import helper

from passhost_onnx.node_view import NodeView


def _chain():
    t1 = helper.make_node("Transpose", ["g"], ["t1"], perm=[0, 3, 1, 2])
    t2 = helper.make_node("Transpose", ["t1"], ["t2"], perm=[0, 2, 3, 1])
    return t1, t2, helper.make_node("Relu", ["t2"], ["y"])


def test_a_reader_moved_and_the_pair_dropped_leave_use_lists_that_agree():
    t1, t2, relu = _chain()
    view = NodeView([t1, t2, relu], pinned=["y"])
    assert view.made("t1", "Transpose") is t1
    view.move_readers("t2", "g")
    view.drop(t2, t1)
    assert [(n.op_type, list(n.input)) for n in view.alive()] == [("Relu", ["g"])]
    assert relu.input[0] == "t2"  # (replaced by a new node, never edited)
    assert [n.op_type for n in view.readers_of("g")] == ["Relu"] and view.writer("t1") is None


def test_a_graph_output_is_never_read_once_and_its_writer_never_dropped():
    t1, t2, relu = _chain()
    view = NodeView([t1, t2, relu], pinned=["y", "t1"])  # t1 a graph output too
    assert view.made("t1", "Transpose") is None and view.only_reader("t1") is None
    with pytest.raises(AssertionError, match="'y'"):
        view.drop(relu)


def test_a_node_that_takes_over_a_graph_output_lets_the_old_writer_go():
    # what the 1-D lift does: the new operator writes the reshape's output name itself
    conv = helper.make_node("Conv", ["x", "w"], ["c"])
    reshape = helper.make_node("Reshape", ["c", "s"], ["y"])
    view = NodeView([conv, reshape], pinned=["y"])
    view.replace(conv, helper.make_node("Conv", ["x", "w1"], ["y"]))
    view.drop(reshape)
    assert [list(n.output) for n in view.alive()] == [["y"]] and view.readers_of("c") == []


def test_a_node_reading_a_value_twice_moves_once():
    sq = helper.make_node("Mul", ["t", "t"], ["y"])
    view = NodeView([helper.make_node("Relu", ["x"], ["t"]), sq], pinned=["y"])
    view.move_readers("t", "x")
    assert [list(n.input) for n in view.alive()][1] == ["x", "x"] and not view.readers.get("t")


def test_the_walk_meets_a_node_replaced_meanwhile_as_its_replacement():
    t1, t2, relu = _chain()
    view = NodeView([t1, t2, relu], pinned=["y"])
    met = []
    for n in view.current():
        met.append(list(n.input))
        if n is t1:
            view.move_readers("t2", "g")
            view.drop(t2)
    assert met == [["g"], ["g"]] and relu.input[0] == "t2"


def test_equal_shape_arithmetic_is_merged_and_the_unread_dropped_without_editing_a_node():
    from passhost_onnx.exporter import Emitter, _drop_unread, _merge_duplicates

    em = Emitter(17)
    a, b = em.const([1], "int64"), em.const([1], "int64")  # equal small initializers
    s1, s2 = helper.make_node("Shape", ["x"], ["s1"]), helper.make_node("Shape", ["x"], ["s2"])
    c1, c2 = helper.make_node("Concat", ["s1", a], ["c1"], axis=0), helper.make_node("Concat", ["s2", b], ["c2"], axis=0)
    out = helper.make_node("Add", ["c1", "c2"], ["y"])
    left = helper.make_node("Neg", ["x"], ["unread"])
    nodes = [s1, s2, c1, c2, out, left]
    before = [n.SerializeToString() for n in nodes]
    view = NodeView(nodes, pinned=["y"])
    _merge_duplicates(em, view)
    _drop_unread(view)
    assert [(n.op_type, list(n.input)) for n in view.alive()] == [("Shape", ["x"]), ("Concat", ["s1", a]),
                                                                  ("Add", ["c1", "c1"])]
    assert [n.SerializeToString() for n in nodes] == before  # (new nodes, none edited)
