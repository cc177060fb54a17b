"""ONNX If at import and export (passhost_onnx.control): a constant condition imports one
branch in place, a run-time one becomes passhost's if, written back as ONNX If; checked
against onnxruntime."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import passhost
from passhost import ir, transform
from passhost.errors import FormatError
from passhost_onnx import from_onnx, to_onnx


def _tensor(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def _branch(name, nodes, outputs, inits=()):
    return helper.make_graph(nodes, name, [], [_tensor(o, [2, 3]) for o in outputs], initializer=list(inits))


def _model(nodes, inputs, outputs, opset=17, inits=()):
    m = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits)),
                          opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m)
    return m


def _has_if(mod) -> bool:
    return any(type(e) is ir.If for e in ir.post_order(mod["main"]))


def _dynamic_model():
    """y = if c: relu(x) + 1 else: -x; z = y * x (both branches read the outer x; the then
    branch has an initializer)."""
    then = _branch("then", [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "one"], ["t"])],
                   ["t"], [numpy_helper.from_array(np.ones((2, 3), np.float32), "one")])
    other = _branch("else", [helper.make_node("Neg", ["x"], ["e"])], ["e"])
    return _model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
                   helper.make_node("Mul", ["y", "x"], ["z"])],
                  [_tensor("c", [], TensorProto.BOOL), _tensor("x", [2, 3])], [_tensor("z", [2, 3])])


@pytest.mark.parametrize("cond", [True, False])
def test_a_run_time_condition_becomes_an_if_that_round_trips_through_onnxruntime(cond, tmp_path, ort_run):
    model = _dynamic_model()
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    feeds = {"c": np.array(cond), "x": x}
    want, = ort_run(model.SerializeToString(), feeds)
    mod = from_onnx(model)
    assert _has_if(mod)
    np.testing.assert_allclose(ir.evaluate(mod, np.array(cond), x), want, rtol=1e-6, atol=1e-6)
    with transform.PassContext(opt_level=3):
        opt = passhost.default_pipeline(3)(mod)
    ir.save(opt, str(tmp_path / "if.onnx"))  # the streamed, checked write
    out = onnx.load(str(tmp_path / "if.onnx"))
    onnx.checker.check_model(out)
    assert [n.op_type for n in out.graph.node].count("If") == 1
    got, = ort_run(str(tmp_path / "if.onnx"), feeds)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_a_condition_known_at_import_imports_only_its_branch(ort_run):
    # if Shape(x)[0] == 2: x + 1 else: Reshape(x, [3, 2]) -- the else branch would not even type
    shape = helper.make_node("Shape", ["x"], ["s"])
    first = helper.make_node("Gather", ["s", "zero"], ["n"], axis=0)
    eq = helper.make_node("Equal", ["n", "two"], ["c"])
    then = _branch("then", [helper.make_node("Add", ["x", "k"], ["t"])], ["t"],
                   [numpy_helper.from_array(np.float32(1), "k")])
    other = helper.make_graph([helper.make_node("Reshape", ["x", "shp"], ["e"])], "else", [], [_tensor("e", [3, 2])],
                              initializer=[numpy_helper.from_array(np.array([3, 2], np.int64), "shp")])
    g = helper.make_graph([shape, first, eq, helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                          "g", [_tensor("x", [2, 3])], [_tensor("y", None)],
                          initializer=[numpy_helper.from_array(np.array(0, np.int64), "zero"),
                                       numpy_helper.from_array(np.array(2, np.int64), "two")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    mod = from_onnx(model)
    assert not _has_if(mod)
    assert [e.op.name for e in ir.post_order(mod["main"]) if type(e) is ir.Call] == ["add"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(ir.evaluate(mod, x), x + 1)
    got, = ort_run(to_onnx(mod).SerializeToString(), {"x": x})
    np.testing.assert_array_equal(got, x + 1)  # (exact by construction: one IEEE addition)


def test_nested_ifs_with_two_outputs_and_outer_values(tmp_path, ort_run):
    # outer: if a { (if b {x*2} else {x}), x - 1 } else { (x, x + 1) }
    inner = helper.make_node("If", ["b"], ["i"],
                             then_branch=_branch("t2", [helper.make_node("Add", ["x", "x"], ["d"])], ["d"]),
                             else_branch=_branch("e2", [helper.make_node("Identity", ["x"], ["same"])], ["same"]))
    then = helper.make_graph([inner, helper.make_node("Sub", ["x", "one"], ["m"])], "t1", [],
                             [_tensor("i", [2, 3]), _tensor("m", [2, 3])])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["xo"]), helper.make_node("Add", ["x", "one"], ["p"])],
                              "e1", [], [_tensor("xo", [2, 3]), _tensor("p", [2, 3])])
    model = _model([helper.make_node("If", ["a"], ["y1", "y2"], then_branch=then, else_branch=other)],
                   [_tensor("a", [1], TensorProto.BOOL), _tensor("b", [], TensorProto.BOOL), _tensor("x", [2, 3])],
                   [_tensor("y1", [2, 3]), _tensor("y2", [2, 3])], inits=[numpy_helper.from_array(np.float32(1), "one")])
    mod = from_onnx(model)
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    exported = to_onnx(mod)
    onnx.checker.check_model(exported)
    for a in (True, False):
        for b in (True, False):
            feeds = {"a": np.array([a]), "b": np.array(b), "x": x}
            want = ort_run(model.SerializeToString(), feeds)
            got = ir.evaluate(mod, np.array([a]), np.array(b), x)
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-6)
            for g, w in zip(ort_run(exported.SerializeToString(), feeds), want):
                np.testing.assert_allclose(g, w, rtol=1e-6)


def test_branches_of_different_shapes_and_unsupported_branch_operators_are_named():
    then = _branch("then", [helper.make_node("Relu", ["x"], ["t"])], ["t"])
    other = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["e"], keepdims=0)], "else", [],
                              [_tensor("e", [])])
    model = helper.make_model(helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="pick")], "g",
        [_tensor("c", [], TensorProto.BOOL), _tensor("x", [2, 3])], [_tensor("y", None)]),
        opset_imports=[helper.make_opsetid("", 11)])
    with pytest.raises(FormatError, match=r"If node 'pick': .*different types.*both branches must give the same"):
        from_onnx(model)
    weird = _branch("then", [helper.make_node("Det", ["x"], ["t"])], ["t"])
    model.graph.node[0].attribute[0].g.CopyFrom(weird) if model.graph.node[0].attribute[0].name == "then_branch" \
        else model.graph.node[0].attribute[1].g.CopyFrom(weird)
    with pytest.raises(FormatError, match=r"1 unsupported ONNX operator\(s\) at opset 11: Det \(x1\)"):
        from_onnx(model)


# -- Loop and Scan, unrolled ------------------------------------------------------------------
def _loop_body(cond_nodes=None, cond_out="cond_in"):
    """(iter, cond_in, acc) -> (cond, acc + x * iter, acc * 2): a carried sum and a scan output."""
    nodes = [helper.make_node("Cast", ["iter"], ["it"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x", "it"], ["xi"]),
             helper.make_node("Add", ["acc", "xi"], ["acc_out"]),
             helper.make_node("Mul", ["acc", "two"], ["doubled"]),
             *(cond_nodes or [helper.make_node("Identity", ["cond_in"], ["cond_out"])])]
    return helper.make_graph(
        nodes, "body", [_tensor("iter", [], TensorProto.INT64), _tensor("cond_in", [], TensorProto.BOOL),
                        _tensor("acc", [2, 3])],
        [_tensor("cond_out", [], TensorProto.BOOL), _tensor("acc_out", [2, 3]), _tensor("doubled", [2, 3])],
        initializer=[numpy_helper.from_array(np.float32(2), "two")])


def _loop_model(body, trip=None, cond=True, trip_input=False):
    inits = [numpy_helper.from_array(np.array(cond), "c")]
    inputs = [_tensor("x", [2, 3]), _tensor("a0", [2, 3])]
    if trip_input:
        inputs.append(_tensor("m", [], TensorProto.INT64))
    elif trip is not None:
        inits.append(numpy_helper.from_array(np.array(trip, np.int64), "m"))
    loop = helper.make_node("Loop", ["m" if trip is not None or trip_input else "", "c", "a0"], ["a", "steps"],
                            body=body, name="loop")
    return _model([loop], inputs, [_tensor("a", [2, 3]), _tensor("steps", ["n", 2, 3])], inits=inits)


@pytest.mark.parametrize("trip", [1, 4])
def test_a_loop_with_a_known_trip_count_is_unrolled(trip, tmp_path, ort_run):
    model = _loop_model(_loop_body(), trip=trip)
    rng = np.random.default_rng(2)
    feeds = {"x": rng.standard_normal((2, 3)).astype(np.float32), "a0": rng.standard_normal((2, 3)).astype(np.float32)}
    want = ort_run(model.SerializeToString(), feeds)
    mod = from_onnx(model)
    got = ir.evaluate(mod, feeds["x"], feeds["a0"])
    assert got[1].shape == (trip, 2, 3)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    with transform.PassContext(opt_level=3):
        opt = passhost.default_pipeline(3)(mod)
    ir.save(opt, str(tmp_path / "loop.onnx"))
    assert "Loop" not in [n.op_type for n in onnx.load(str(tmp_path / "loop.onnx")).graph.node]
    for g, w in zip(ort_run(str(tmp_path / "loop.onnx"), feeds), want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_a_loop_stops_where_its_condition_turns_false(ort_run):
    # a while loop: cond = iter < 2, so three iterations of at most 50
    stop = [helper.make_node("Less", ["iter", "lim"], ["cond_out"])]
    body = _loop_body(stop)
    body.initializer.append(numpy_helper.from_array(np.array(2, np.int64), "lim"))
    model = _loop_model(body, trip=50)
    feeds = {"x": np.ones((2, 3), np.float32), "a0": np.zeros((2, 3), np.float32)}
    want = ort_run(model.SerializeToString(), feeds)
    got = ir.evaluate(from_onnx(model), feeds["x"], feeds["a0"])
    assert got[1].shape == want[1].shape == (3, 2, 3)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w)  # (exact by construction: small integers, x being ones)


def test_loops_that_cannot_be_unrolled_are_named():
    with pytest.raises(FormatError, match=r"Loop node 'loop': its trip count must be known at import time"):
        from_onnx(_loop_model(_loop_body(), trip_input=True))
    data_cond = [helper.make_node("ReduceMax", ["acc_out"], ["mx"], keepdims=0),
                 helper.make_node("Less", ["mx", "two"], ["cond_out"])]
    with pytest.raises(FormatError, match=r"its condition \(the body's first output\) must be known at import time"):
        from_onnx(_loop_model(_loop_body(data_cond), trip=5))
    with pytest.raises(FormatError, match=r"runs no iteration, so its scan outputs have no static shape"):
        from_onnx(_loop_model(_loop_body(), trip=0))


def test_a_scan_is_unrolled_with_directions_and_axes(tmp_path, ort_run):
    # states (s, p); scanned x over axis 1, backwards; y = s + x_t stacked on axis 1 of the output
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "xt"], ["s_out"]), helper.make_node("Mul", ["p", "xt"], ["p_out"]),
         helper.make_node("Identity", ["s_out"], ["y"])], "scan_body",
        [_tensor("s", [3]), _tensor("p", [3]), _tensor("xt", [3])],
        [_tensor("s_out", [3]), _tensor("p_out", [3]), _tensor("y", [3])])
    scan = helper.make_node("Scan", ["s0", "p0", "x"], ["s", "p", "ys"], body=body, num_scan_inputs=1,
                            scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[-1])
    model = _model([scan], [_tensor("s0", [3]), _tensor("p0", [3]), _tensor("x", [3, 4])],
                   [_tensor("s", [3]), _tensor("p", [3]), _tensor("ys", [3, 4])], opset=16)
    rng = np.random.default_rng(3)
    feeds = {"s0": rng.standard_normal(3).astype(np.float32), "p0": np.ones(3, np.float32),
             "x": rng.standard_normal((3, 4)).astype(np.float32)}
    want = ort_run(model.SerializeToString(), feeds)
    mod = from_onnx(model)
    for g, w in zip(ir.evaluate(mod, feeds["s0"], feeds["p0"], feeds["x"]), want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    ir.save(mod, str(tmp_path / "scan.onnx"))
    for g, w in zip(ort_run(str(tmp_path / "scan.onnx"), feeds), want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_loops_too_long_to_unroll_and_bad_scan_axes_are_named(monkeypatch):
    from passhost_onnx import unroll

    monkeypatch.setattr(unroll, "MAX_ITERATIONS", 3)
    with pytest.raises(FormatError, match=r"Loop node 'loop': it would run more than 3 iterations"):
        from_onnx(_loop_model(_loop_body(), trip=10 ** 9))  # (a hostile trip count: an error, not a hang)
    body = helper.make_graph([helper.make_node("Add", ["s", "xt"], ["s_out"])], "b",
                             [_tensor("s", [3]), _tensor("xt", [3])], [_tensor("s_out", [3])])
    for axes, message in (([2], r"scan_input_axes 2 is out of range for rank 2"),
                          ([0, 1], r"scan_input_axes has 2 entries for 1 tensors")):
        scan = helper.make_node("Scan", ["s0", "x"], ["s"], body=body, num_scan_inputs=1, scan_input_axes=axes,
                                name="sc")
        model = helper.make_model(helper.make_graph([scan], "g", [_tensor("s0", [3]), _tensor("x", [4, 3])],
                                                    [_tensor("s", [3])]), opset_imports=[helper.make_opsetid("", 16)])
        with pytest.raises(FormatError, match=rf"Scan node 'sc': {message}"):
            from_onnx(model)


def test_nested_loops_share_one_unrolling_budget(monkeypatch):
    from passhost_onnx import unroll

    monkeypatch.setattr(unroll, "MAX_UNROLLED_NODES", 40)
    monkeypatch.setattr("passhost_onnx.importer.MAX_UNROLLED_NODES", 40)
    with pytest.raises(FormatError, match=r"Loop node 'loop': unrolling the model's loops would make more than 40"):
        from_onnx(_loop_model(_loop_body(), trip=9))   # 9 iterations of a 5-node body
    assert from_onnx(_loop_model(_loop_body(), trip=8)) is not None
