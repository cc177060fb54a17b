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
