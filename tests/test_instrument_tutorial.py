"""TVM's pass-instrument tutorial (seed tvm-pass-instrument-tutorial-zh.txt) through the
installed instrument plugins: the timing profile of ``InferType`` + ``FoldScaleAxis``,
``override_instruments`` on the current context, the RelayCallNodeDiffer (``op-diff``)
on ResNet-18, and the tutorial's exception scenarios with the plugin instruments mixed in.
"""
from __future__ import annotations

import json
import re
from pprint import pformat

import pytest

import passhost
from passhost import ir, testing, transform
from passhost.testing.tutorial_instruments import PassBadEnterCtx, PassBadExitCtx, PassBadRunBefore, PassFine
from passhost.transform import PassContext

LINE = re.compile(r"^(\t*)([^\t:]+): (\d+)us \[(-?\d+)us\] \((\d+\.\d\d)%; (\d+\.\d\d)%\)$")


@pytest.fixture(scope="module")
def resnet18():
    return testing.resnet(num_layers=18, batch_size=1, image_shape=(3, 224, 224))


@pytest.fixture
def relay_mod(resnet18):
    return resnet18[0]


@pytest.fixture
def default_ctx():
    """The thread's default context, left without instruments afterwards."""
    ctx = PassContext.current()
    yield ctx
    ctx.override_instruments([])  # even if the test failed half-way


def _parse(report):
    assert report.endswith("\n")
    rows = []
    for line in report.split("\n")[:-1]:
        m = LINE.match(line)
        assert m, repr(line)
        tabs, name, dur, self_us, pct_total, pct_parent = m.groups()
        rows.append((tabs + name, int(dur), int(self_us), float(pct_total), float(pct_parent)))
    return rows


def _check_arithmetic(rows):
    """The printed numbers agree with each other (up to rounding to whole microseconds)."""
    depths = [len(r[0]) - len(r[0].lstrip("\t")) for r in rows]
    top = [r for r, d in zip(rows, depths) if d == 0]
    total = sum(r[1] for r in top)
    slack = len(rows)  # each printed duration is off by at most 0.5 us
    assert sum(r[3] for r in top) == pytest.approx(100.0, abs=0.01 * len(top) + 100.0 * slack / total)
    for i, (row, depth) in enumerate(zip(rows, depths)):
        name, dur, self_us, pct_total, pct_parent = row
        assert pct_total == pytest.approx(100.0 * dur / total, abs=0.01 + 100.0 * slack / total)
        if depth == 0:
            assert pct_total == pct_parent
        else:
            parent = next(rows[j] for j in range(i - 1, -1, -1) if depths[j] == depth - 1)
            assert pct_parent == pytest.approx(100.0 * dur / parent[1], abs=0.01 + 100.0 * slack / parent[1])
        children = []
        for j in range(i + 1, len(rows)):
            if depths[j] <= depth:
                break
            if depths[j] == depth + 1:
                children.append(rows[j][1])
        assert abs(self_us - (dur - sum(children))) <= len(children) + 1


# --------------------------------------------------------------------------------------
# PassTimingInstrument
# --------------------------------------------------------------------------------------
def test_timing_profile_of_infer_type_and_fold_scale_axis(relay_mod):
    timing_inst = passhost.instruments.get("timing")
    with PassContext(instruments=[timing_inst]):
        relay_mod = passhost.passes.InferType()(relay_mod)
        relay_mod = passhost.passes.FoldScaleAxis()(relay_mod)
        # before leaving the context, take the profile
        profiles = timing_inst.render()
    rows = _parse(profiles)
    # opt_level 2: the Sequential's two opt-level-3 passes are skipped, as in the seed
    assert [r[0] for r in rows] == ["InferType", "FoldScaleAxis", "\tFoldConstant", "\t\tInferType"]
    _check_arithmetic(rows)
    fold_scale_axis, fold_constant, inner = rows[1], rows[2], rows[3]
    assert fold_scale_axis[1] >= fold_constant[1] >= inner[1]
    assert fold_constant[4] == pytest.approx(100.0 * fold_constant[1] / fold_scale_axis[1], abs=1.0)
    assert timing_inst.render() == ""  # the context exited: profiles cleared


def test_timing_with_override_instruments_on_the_current_context(relay_mod, default_ctx, caplog):
    timing_inst = passhost.instruments.get("timing")
    cur_pass_ctx = PassContext.current()
    assert cur_pass_ctx is default_ctx
    cur_pass_ctx.override_instruments([timing_inst])
    relay_mod = passhost.passes.InferType()(relay_mod)
    relay_mod = passhost.passes.FoldScaleAxis()(relay_mod)
    rows = _parse(timing_inst.render())
    assert [r[0] for r in rows] == ["InferType", "FoldScaleAxis", "\tFoldConstant", "\t\tInferType"]
    _check_arithmetic(rows)
    # registering an empty list clears the instruments; exit_pass_ctx drops the profiles
    cur_pass_ctx.override_instruments([])
    assert cur_pass_ctx.instruments == ()
    assert timing_inst.render() == ""
    assert "no passes have been profiled, did you enable pass profiling?" in caplog.text


# --------------------------------------------------------------------------------------
# RelayCallNodeDiffer (op-diff) with the timing instrument after it
# --------------------------------------------------------------------------------------
def test_op_diff_on_resnet18(resnet18):
    relay_mod, relay_params = resnet18
    call_node_inst = passhost.instruments.get("op-diff")
    timing_inst = passhost.instruments.get("timing")
    convert_layout = "ConvertLayout" in passhost.passes.names()
    if convert_layout:  # the tutorial's pipeline
        pass_seq = transform.Sequential([
            passhost.passes.FoldConstant(),
            passhost.passes.ConvertLayout(desired_layouts={"nn.conv2d": ["NHWC", "HWIO"]}),
            passhost.passes.FoldConstant(),
        ])
    else:
        pass_seq = transform.Sequential([passhost.passes.SimplifyInference(), passhost.passes.FoldConstant()])
    relay_mod = relay_mod.copy()
    relay_mod["main"] = ir.bind_params_by_name(relay_mod["main"], relay_params)
    before = ir.count_ops(relay_mod["main"])
    with PassContext(opt_level=3, instruments=[call_node_inst, timing_inst]):
        out = pass_seq(relay_mod)
        profiles = timing_inst.render()
    diffs = call_node_inst.get_pass_to_op_diff()
    if convert_layout:
        # exactly what the seed prints
        assert diffs == [
            (1, "CanonicalizeOps", {"add": 1, "nn.bias_add": -1}),
            (1, "ConvertLayout", {"expand_dims": 1, "layout_transform": 23}),
            (1, "FoldConstant", {"expand_dims": -1, "layout_transform": -21}),
            (0, "sequential", {"add": 1, "layout_transform": 2, "nn.bias_add": -1}),
        ], pformat(diffs)
    else:
        n_bn = before["nn.batch_norm"]
        assert n_bn == 19
        depth, name, simplify = diffs[0]
        assert (depth, name) == (1, "SimplifyInference")
        assert simplify["nn.batch_norm"] == -n_bn
        assert [(d, n) for d, n, _ in diffs] == [(1, "SimplifyInference"), (1, "FoldConstant"), (0, "sequential")]
        # every batch_norm became x * scale + shift with constant scale and shift
        assert diffs[-1] == (0, "sequential", {"nn.batch_norm": -n_bn, "multiply": n_bn, "add": n_bn})
    # the recorded deltas are the real before/after counts
    total = diffs[-1][2]
    after = ir.count_ops(out["main"])
    assert {op: after.get(op, 0) - before.get(op, 0) for op in set(before) | set(after)
            if after.get(op, 0) != before.get(op, 0)} == total
    names = [r[0] for r in _parse(profiles)]
    assert names[0] == "sequential" and "\tFoldConstant" in names


def test_op_diff_of_simplify_inference_on_resnet18(resnet18):
    relay_mod, relay_params = resnet18
    differ = passhost.instruments.get("op-diff")
    relay_mod = relay_mod.copy()
    relay_mod["main"] = ir.bind_params_by_name(relay_mod["main"], relay_params)
    seq = transform.Sequential([passhost.passes.SimplifyInference(), passhost.passes.FoldConstant()])
    with PassContext(opt_level=3, instruments=[differ]):
        seq(relay_mod)
    # SimplifyInference expands each of the 19 batch_norms (one of them without scale);
    # FoldConstant folds the arithmetic on the bound parameters away
    assert differ.get_pass_to_op_diff() == [
        (1, "SimplifyInference", {"add": 57, "divide": 19, "expand_dims": 38, "multiply": 56,
                                  "negative": 19, "nn.batch_norm": -19, "sqrt": 19}),
        (1, "FoldConstant", {"add": -38, "divide": -19, "expand_dims": -38, "multiply": -37,
                             "negative": -19, "sqrt": -19}),
        (0, "sequential", {"add": 19, "multiply": 19, "nn.batch_norm": -19}),
    ]


# --------------------------------------------------------------------------------------
# exception handling, with the plugin instruments in the list
# --------------------------------------------------------------------------------------
def _catch(capsys, fn):
    try:
        fn()
    except ValueError as ex:
        print("Catching", str(ex).split("\n")[-1])
    return capsys.readouterr().out


def test_bad_enter_ctx_exits_the_timing_instrument_and_disables_all(relay_mod, capsys):
    timing = passhost.instruments.get("timing")
    differ = passhost.instruments.get("op-diff")
    stale = transform.PassInfo(0, "Stale")  # a profile that survives unless exit_pass_ctx runs
    timing.run_before_pass(relay_mod, stale)
    timing.run_after_pass(relay_mod, stale)
    assert timing.render().startswith("Stale: ")
    demo_ctx = PassContext(instruments=[PassFine("PassFine_0"), timing, PassBadEnterCtx("PassBadEnterCtx"),
                                        differ, PassFine("PassFine_1")])

    def run():
        with demo_ctx:
            passhost.passes.InferType()(relay_mod)

    assert _catch(capsys, run).splitlines() == [
        "PassFine_0 enter_pass_ctx",
        "PassBadEnterCtx bad enter_pass_ctx!!!",
        "PassFine_0 exit_pass_ctx",
        "Catching PassBadEnterCtx bad enter_pass_ctx",
    ]
    assert timing.render() == ""  # timing (entered) was exited in reverse order: cleared
    assert demo_ctx.instruments == ()
    demo_ctx.override_instruments([])  # nothing printed: the instruments were cleared
    assert capsys.readouterr().out == ""


def test_bad_exit_ctx_leaves_later_instruments_unexited(relay_mod, capsys, tmp_path):
    trace_path = tmp_path / "trace.json"
    timing = passhost.instruments.get("timing")
    trace = passhost.instruments.get("trace", path=str(trace_path))
    demo_ctx = PassContext(instruments=[PassFine("PassFine_0"), timing, PassBadExitCtx("PassBadExitCtx"),
                                        trace, PassFine("PassFine_1")])

    def run():
        with demo_ctx:
            passhost.passes.InferType()(relay_mod)
            assert _parse(timing.render())[0][0] == "InferType"

    assert _catch(capsys, run).splitlines() == [
        "PassFine_0 enter_pass_ctx", "PassBadExitCtx enter_pass_ctx", "PassFine_1 enter_pass_ctx",
        "PassFine_0 should_run", "PassBadExitCtx should_run", "PassFine_1 should_run",
        "PassFine_0 run_before_pass", "PassBadExitCtx run_before_pass", "PassFine_1 run_before_pass",
        "PassFine_0 run_after_pass", "PassBadExitCtx run_after_pass", "PassFine_1 run_after_pass",
        "PassFine_0 exit_pass_ctx", "PassBadExitCtx bad exit_pass_ctx!!!",
        "Catching PassBadExitCtx bad exit_pass_ctx",
    ]
    assert timing.render() == ""  # exited before the failure
    assert not trace_path.exists()  # after the failure: never exited, so never written
    assert demo_ctx.instruments == ()


def test_bad_run_before_with_exits_every_instrument(relay_mod, capsys):
    timing = passhost.instruments.get("timing")
    differ = passhost.instruments.get("op-diff")
    demo_ctx = PassContext(instruments=[PassFine("PassFine_0"), timing, PassBadRunBefore("PassBadRunBefore"),
                                        differ, PassFine("PassFine_1")])

    def run():
        # All exit_pass_ctx are called.
        with demo_ctx:
            passhost.passes.InferType()(relay_mod)

    assert _catch(capsys, run).splitlines() == [
        "PassFine_0 enter_pass_ctx", "PassBadRunBefore enter_pass_ctx", "PassFine_1 enter_pass_ctx",
        "PassFine_0 should_run", "PassBadRunBefore should_run", "PassFine_1 should_run",
        "PassFine_0 run_before_pass", "PassBadRunBefore bad run_before_pass!!!",
        "PassFine_0 exit_pass_ctx", "PassBadRunBefore exit_pass_ctx", "PassFine_1 exit_pass_ctx",
        "Catching PassBadRunBefore bad run_before_pass",
    ]
    assert timing.running == () and timing.render() == ""
    assert differ.get_pass_to_op_diff() == []
    # instrumentation is not disabled: override_instruments exits the old ones again
    demo_ctx.override_instruments([])
    assert capsys.readouterr().out.splitlines() == [
        "PassFine_0 exit_pass_ctx", "PassBadRunBefore exit_pass_ctx", "PassFine_1 exit_pass_ctx"]


def test_bad_run_before_without_with_keeps_the_timing_node_open(relay_mod, capsys, default_ctx):
    timing = passhost.instruments.get("timing")
    cur_pass_ctx = PassContext.current()
    cur_pass_ctx.override_instruments([PassFine("PassFine_0"), timing, PassBadRunBefore("PassBadRunBefore"),
                                       PassFine("PassFine_1")])
    assert capsys.readouterr().out.splitlines() == [
        "PassFine_0 enter_pass_ctx", "PassBadRunBefore enter_pass_ctx", "PassFine_1 enter_pass_ctx"]

    def run():
        # No exit_pass_ctx got executed.
        passhost.passes.InferType()(relay_mod)

    assert _catch(capsys, run).splitlines() == [
        "PassFine_0 should_run", "PassBadRunBefore should_run", "PassFine_1 should_run",
        "PassFine_0 run_before_pass", "PassBadRunBefore bad run_before_pass!!!",
        "Catching PassBadRunBefore bad run_before_pass",
    ]
    # timing's run_before_pass ran, the pass did not: its node is open, as in TVM
    assert timing.running == ("InferType",)
    with pytest.raises(passhost.errors.PasshostError, match="still in a pass"):
        timing.render()
    cur_pass_ctx.override_instruments([])
    assert capsys.readouterr().out.splitlines() == [
        "PassFine_0 exit_pass_ctx", "PassBadRunBefore exit_pass_ctx", "PassFine_1 exit_pass_ctx"]
    assert timing.running == () and timing.render() == ""


def test_a_failing_pass_under_every_plugin_instrument(relay_mod, tmp_path):
    timing = passhost.instruments.get("timing")
    differ = passhost.instruments.get("op-diff")
    trace = passhost.instruments.get("trace", path=str(tmp_path / "t.json"))
    printer = passhost.instruments.get("print-ir", dump_dir=str(tmp_path / "dumps"))

    @transform.module_pass(opt_level=0, name="Broken")
    def broken(mod, ctx):
        raise RuntimeError("broken pass")

    with pytest.raises(RuntimeError, match="broken pass") as info:
        with PassContext(instruments=[timing, differ, trace, printer]):
            passhost.passes.InferType()(relay_mod)
            broken(relay_mod)
    assert transform.failed_pass(info.value) == "Broken"
    # every exit ran (none masked the pass's error): profile dropped, trace written
    assert timing.render() == ""
    events = [e for e in json.loads((tmp_path / "t.json").read_text())["traceEvents"] if e["ph"] != "M"]
    assert [(e["name"], e["ph"], e["args"].get("unfinished", False)) for e in events] == [
        ("InferType", "B", False), ("InferType", "E", False), ("Broken", "B", False), ("Broken", "E", True)]
    assert differ.get_pass_to_op_diff() == []
    assert sorted(p.name for p in (tmp_path / "dumps").iterdir()) == ["000-start.txt"]
