"""Malformed models get one message naming the node and what is wrong, never a bare
Python exception (which the format layer could only report as "failed to read")."""
from __future__ import annotations

import random
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import passhost
from passhost import ir
from passhost.errors import FormatError, PasshostError
from passhost.transform import PassContext
from passhost_onnx.importer import from_onnx


def _one_node(node, inputs, outputs, opset=17, inits=()):
    graph = helper.make_graph([node], "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _f(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def test_a_node_with_a_missing_input_is_named():
    model = _one_node(helper.make_node("Add", ["x"], ["y"], name="add1"), [_f("x", [2])], [_f("y", [2])])
    with pytest.raises(FormatError, match=r"Add node 'add1' has 1 input\(s\), but ONNX's Add at opset 17 takes 2"):
        from_onnx(model)


def test_an_attribute_of_the_wrong_type_is_named():
    node = helper.make_node("Flatten", ["x"], ["y"], name="flat", axis="one")
    model = _one_node(node, [_f("x", [2, 3])], [_f("y", [2, 3])])
    with pytest.raises(FormatError, match=r"Flatten node 'flat': attribute 'axis' is STRING, but ONNX's Flatten "
                                          r"at opset 17 takes INT"):
        from_onnx(model)


def test_split_whose_num_outputs_is_not_its_output_count_fails_at_once():
    """(The converter used to build a list of num_outputs sizes first: a model saying
    num_outputs=2**31 took 24 GB before it failed.)"""
    node = helper.make_node("Split", ["x"], ["a", "b", "c"], name="split", num_outputs=4)
    model = _one_node(node, [_f("x", [6])], [_f("a", [2]), _f("b", [2]), _f("c", [2])], opset=18)
    with pytest.raises(FormatError, match=r"Split node 'split' \(opset 18\): num_outputs=4, but the node "
                                          r"has 3 outputs"):
        from_onnx(model)


def test_expand_to_a_shape_that_does_not_broadcast_is_named():
    shape = onnx.numpy_helper.from_array(np.array([3, 4], dtype=np.int64), "shape")
    node = helper.make_node("Expand", ["x", "shape"], ["y"], name="ex")
    model = _one_node(node, [_f("x", [2, 4])], [_f("y", [3, 4])], inits=[shape])
    with pytest.raises(FormatError, match=r"Expand node 'ex' \(opset 17\): cannot expand an input of shape "
                                          r"\(2, 4\) to \(3, 4\)"):
        from_onnx(model)


def test_a_converter_that_raises_is_reported_with_the_node_and_the_converter():
    def broken(node):
        return node.inputs[5]

    model = _one_node(helper.make_node("Relu", ["x"], ["y"], name="r"), [_f("x", [2])], [_f("y", [2])])
    with pytest.raises(FormatError, match=r"Relu node 'r' \(opset 17\): converting it failed \(IndexError: list index "
                                          r"out of range\); .* the converter .*broken has a bug: report it"):
        from_onnx(model, extra_converters=[("", "Relu", 17, broken)])


# ---------------------------------------------------------------------------------------
# mutated ONNX node tests: every failure is a clear PasshostError
# ---------------------------------------------------------------------------------------
def _mutate(model, rng):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    nodes = list(g.node)
    kind = rng.randrange(6)
    if kind == 0 and nodes:
        for a in rng.choice(nodes).attribute:
            if a.type == onnx.AttributeProto.INT:
                a.i = rng.choice([-3, -1, 0, 1, 2, 7, 99, 2 ** 31])
            elif a.type == onnx.AttributeProto.INTS and len(a.ints):
                a.ints[rng.randrange(len(a.ints))] = rng.choice([-2, 0, 1, 5, 99])
            elif a.type == onnx.AttributeProto.FLOAT:
                a.f = rng.choice([0.0, -1.0, float("nan"), 1e30])
            elif a.type == onnx.AttributeProto.STRING:
                a.s = rng.choice([b"", b"bogus"])
    elif kind == 1 and len(g.input):
        dims = rng.choice(list(g.input)).type.tensor_type.shape.dim
        if len(dims):
            dims[rng.randrange(len(dims))].dim_value = rng.choice([0, 1, 2, 7])
    elif kind == 2 and nodes:
        n = rng.choice(nodes)
        if len(n.input):
            del n.input[rng.randrange(len(n.input))]
    elif kind == 3 and nodes:
        rng.choice(nodes).attribute.append(helper.make_attribute(rng.choice(["axis", "perm", "mode", "keepdims"]),
                                                                 rng.choice([5, [1, 2], "x", 0.5])))
    elif kind == 4 and nodes:
        n = rng.choice(nodes)
        if len(n.input):
            n.input.append(n.input[0])
    elif kind == 5 and len(g.input):
        rng.choice(list(g.input)).type.tensor_type.elem_type = rng.choice([1, 2, 6, 7, 9, 10, 11])
    return m


@pytest.mark.parametrize("seed", range(4))
def test_mutated_node_tests_fail_with_a_clear_message_or_work(seed, tmp_path):
    from passhost_onnx.conformance import load_cases, select

    cases = select(load_cases(), ort_check=False)
    rng = random.Random(seed)
    src, dst = str(tmp_path / "m.onnx"), str(tmp_path / "out.onnx")
    for _ in range(60):
        case = rng.choice(cases)
        onnx.save(_mutate(case.model, rng), src)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mod = ir.load(src)
                with PassContext(opt_level=3):
                    mod = passhost.default_pipeline(3)(mod)
                ir.save(mod, dst)
        except PasshostError as err:
            # the format layer's catch-all ("failed to read") means a bare exception escaped
            assert "failed to read" not in str(err) and "failed to write" not in str(err), (case.name, str(err))


def test_huge_declared_constants_are_not_allocated_at_import():
    """(A ConstantOfShape of 10^11 floats, or an Expand of a constant to it, would have made
    the import allocate 400 GB.)"""
    shape = onnx.numpy_helper.from_array(np.array([100000, 1000000], dtype=np.int64), "shape")
    one = onnx.numpy_helper.from_array(np.array([1.0], dtype=np.float32), "one")
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["fill"],
                              value=onnx.numpy_helper.from_array(np.array([2.0], np.float32))),
             helper.make_node("Expand", ["one", "shape"], ["big"]),
             helper.make_node("Add", ["fill", "big"], ["y"])]
    model = _one_node(nodes[0], [], [_f("y", [100000, 1000000])], inits=[shape, one])
    model.graph.node.extend(nodes[1:])
    mod = from_onnx(model)
    calls = {e.op.name for e in ir.post_order(mod["main"]) if type(e) is ir.Call}
    assert {"full", "broadcast_to", "add"} <= calls


@pytest.mark.parametrize("opset", [13, 18])
def test_reduce_axes_out_of_range_are_named(opset):
    """(Found by mutating models: an axis of 99 used to reach the converter's catch-all.)"""
    if opset >= 18:
        node = helper.make_node("ReduceMax", ["x", "axes"], ["y"])
        inits = [onnx.numpy_helper.from_array(np.array([1, 99], dtype=np.int64), "axes")]
    else:
        node = helper.make_node("ReduceMax", ["x"], ["y"], axes=[1, 99])
        inits = []
    model = _one_node(node, [_f("x", [2, 3])], [_f("y", None)], inits=inits, opset=opset)
    with pytest.raises(FormatError, match=r"axes \[1, 99\] are out of range for its rank-2 input \(valid: -2..1\)"):
        from_onnx(model)
