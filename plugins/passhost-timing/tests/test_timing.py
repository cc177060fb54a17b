"""The timing instrument: nesting, TVM's exact report format, clearing, JSON, errors."""
from __future__ import annotations

import itertools
import json
import logging
import re
import sys
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import passhost
from passhost import ir, testing, transform
from passhost.cli import main
from passhost.errors import PipelineError
from passhost.instrument import PassInstrument
from passhost.transform import PassContext, Sequential, function_pass, module_pass
from passhost_timing import PassTimingInstrument, TimingError
from passhost_timing import timing as timing_mod
from passhost_timing.timing import profile_tree, render_text

LINE = re.compile(r"^(\t*)([^\t:]+): (\d+)us \[(-?\d+)us\] \((\d+\.\d\d)%; (\d+\.\d\d)%\)$")


def _mod():
    x = ir.var("x", shape=(2, 3))
    return ir.IRModule.from_expr(ir.Function([x], ir.add(x, ir.const(1.0))))


def _identity(name, opt_level=0, body=None):
    def run(mod, ctx):
        if body is not None:
            body(mod, ctx)
        return mod

    return module_pass(run, opt_level=opt_level, name=name)


@pytest.fixture
def fake_clock(monkeypatch):
    """perf_counter_ns advances 1000 ns (1 us) per reading."""
    ticks = itertools.count(0, 1000)
    monkeypatch.setattr(timing_mod, "perf_counter_ns", lambda: next(ticks))


def test_tvm_notes_example_renders_exactly():
    # durations of TVM-NOTES §2.4 (ns): the arithmetic there is reproduced digit for digit
    roots = [["InferType", 0, 8012_000, []],
             ["FoldScaleAxis", 0, 7494_000, [["FoldConstant", 0, 7492_000, [["InferType", 0, 6492_000, []]]]]]]
    assert render_text(roots) == (
        "InferType: 8012us [8012us] (51.67%; 51.67%)\n"
        "FoldScaleAxis: 7494us [2us] (48.33%; 48.33%)\n"
        "\tFoldConstant: 7492us [1000us] (48.32%; 99.97%)\n"
        "\t\tInferType: 6492us [6492us] (41.87%; 86.65%)\n")


def test_hooks_build_the_nested_tree(fake_clock):
    timing = PassTimingInstrument()
    inner = _identity("Inner")
    outer = _identity("Outer", body=lambda mod, ctx: inner(mod))
    seq = Sequential([_identity("A"), outer])
    with PassContext(instruments=[timing]):
        seq(_mod())
        _identity("B")(_mod())
        report = timing.render()
    # clock readings: seq 0, A 1-2, Outer 3, Inner 4-5, Outer 6, seq 7, B 8-9 (x1000 ns)
    assert report == (
        "sequential: 7us [3us] (87.50%; 87.50%)\n"
        "\tA: 1us [1us] (12.50%; 14.29%)\n"
        "\tOuter: 3us [2us] (37.50%; 42.86%)\n"
        "\t\tInner: 1us [1us] (12.50%; 33.33%)\n"
        "B: 1us [1us] (12.50%; 12.50%)\n")


def test_function_pass_infer_type_and_required_passes_nest():
    @function_pass(opt_level=1, name="Fn", required=["InferType"])
    def fn(func, mod, ctx):
        return func

    timing = PassTimingInstrument()
    with PassContext(instruments=[timing]):
        Sequential([fn])(_mod())
        lines = timing.render().splitlines()
    assert [LINE.match(line).group(1) + LINE.match(line).group(2) for line in lines] == [
        "sequential", "\tInferType", "\tFn", "\t\tInferType"]


def test_every_line_matches_the_format_and_the_numbers_add_up():
    timing = PassTimingInstrument()
    mod, _ = testing.resnet(18)
    seq = Sequential([passhost.passes.SimplifyInference(), passhost.passes.FoldConstant(),
                      passhost.passes.EliminateCommonSubexpr()])
    with PassContext(opt_level=3, instruments=[timing]):
        seq(mod)
        report = timing.render()
        tree = timing.profile()
    assert report.endswith("\n") and not report.endswith("\n\n")
    lines = report.split("\n")[:-1]
    for line in lines:
        assert LINE.match(line), line
    # the JSON tree has the same passes in the same pre-order, and consistent numbers
    flat, stack = [], [(0, p) for p in reversed(tree["passes"])]
    while stack:
        depth, node = stack.pop()
        flat.append((depth, node))
        assert node["self_us"] == pytest.approx(node["duration_us"] - sum(c["duration_us"] for c in node["children"]))
        stack.extend((depth + 1, c) for c in reversed(node["children"]))
    assert [("\t" * d) + n["name"] for d, n in flat] == [LINE.match(line).group(1) + LINE.match(line).group(2)
                                                        for line in lines]
    assert tree["total_us"] == pytest.approx(sum(p["duration_us"] for p in tree["passes"]))
    assert flat[0][1]["percent_total"] == 100.0


def test_empty_render_returns_empty_string_and_logs(caplog):
    timing = PassTimingInstrument()
    with caplog.at_level(logging.WARNING, logger="passhost.timing"):
        assert timing.render() == ""
    assert "no passes have been profiled, did you enable pass profiling?" in caplog.text


def test_exit_and_override_clear_the_profile():
    timing = PassTimingInstrument()
    with PassContext(instruments=[timing]) as ctx:
        _identity("A")(_mod())
        assert timing.render().startswith("A: ")
        ctx.override_instruments([])
        assert timing.render() == ""
        ctx.override_instruments([timing])
        _identity("B")(_mod())
        assert timing.render().startswith("B: ")
    assert timing.render() == ""


def test_json_format_option_and_argument(fake_clock):
    timing = passhost.instruments.get("timing", format="json")
    with PassContext(instruments=[timing]):
        Sequential([_identity("A")])(_mod())
        doc = json.loads(timing.render())
        text = timing.render(format="text")
    assert doc == {"unit": "us", "total_us": 3.0, "passes": [
        {"name": "sequential", "duration_us": 3.0, "self_us": 2.0, "percent_total": 100.0,
         "percent_parent": 100.0, "children": [
             {"name": "A", "duration_us": 1.0, "self_us": 1.0, "percent_total": 33.33,
              "percent_parent": 33.33, "children": []}]}]}
    assert text.startswith("sequential: 3us [2us] (100.00%; 100.00%)\n\tA: 1us")


def test_bad_format_is_rejected():
    with pytest.raises(TimingError, match="format must be one of 'text', 'json'"):
        PassTimingInstrument(format="xml")
    with pytest.raises(PipelineError, match="timing"):
        passhost.instruments.get("timing", format="xml")
    with pytest.raises(TimingError, match="render format"):
        PassTimingInstrument().render("yaml")


def test_render_inside_a_pass_is_an_error():
    timing = PassTimingInstrument()
    seen = []

    def peek(mod, ctx):
        with pytest.raises(TimingError, match="still in a pass.*'Peek'"):
            timing.render()
        seen.append(timing.running)

    with PassContext(instruments=[timing]):
        _identity("Peek", body=peek)(_mod())
        assert timing.render().startswith("Peek: ")
    assert seen == [("Peek",)]


def test_a_failing_pass_stays_open_until_exit():
    timing = PassTimingInstrument()

    def boom(mod, ctx):
        raise ValueError("boom")

    with PassContext(instruments=[timing]):
        with pytest.raises(ValueError, match="boom"):
            _identity("Boom", body=boom)(_mod())
        assert timing.running == ("Boom",)
        with pytest.raises(TimingError, match="'Boom'"):
            timing.render()
    assert timing.running == () and timing.render() == ""


def test_an_inner_failure_caught_by_the_outer_pass_is_closed(fake_clock):
    timing = PassTimingInstrument()

    def boom(mod, ctx):
        raise ValueError("boom")

    def outer(mod, ctx):
        with pytest.raises(ValueError):
            _identity("Inner", body=boom)(mod)

    with PassContext(instruments=[timing]):
        _identity("Outer", body=outer)(_mod())
        report = timing.render()
    assert [line.split(":")[0] for line in report.splitlines()] == ["Outer", "\tInner"]


def test_skipped_passes_are_not_recorded():
    class Veto(PassInstrument):
        def should_run(self, mod, info):
            return info.name != "Skip"

    timing = PassTimingInstrument()
    with PassContext(opt_level=1, instruments=[Veto(), timing], disabled_pass=["Off"]):
        Sequential([_identity("Skip"), _identity("Off"), _identity("High", opt_level=3), _identity("Run")])(_mod())
        names = [line.split(":")[0] for line in timing.render().splitlines()]
    assert names == ["sequential", "\tRun"]


def test_deep_nesting_renders_without_recursion():
    depth = sys.getrecursionlimit() * 5
    root = node = ["P0", 0, depth * 1000, []]
    for i in range(1, depth):
        child = [f"P{i}", 0, (depth - i) * 1000, []]
        node[3].append(child)
        node = child
    text = render_text([root])
    assert text.count("\n") == depth
    assert text.splitlines()[-1] == "\t" * (depth - 1) + f"P{depth - 1}: 1us [1us] ({100 / depth:.2f}%; 50.00%)"
    tree = profile_tree([root])
    assert tree["passes"][0]["name"] == "P0"


def test_zero_total_prints_zero_percent():
    assert render_text([["A", 0, 0, []]]) == "A: 0us [0us] (0.00%; 0.00%)\n"


def test_registered_and_named_like_tvm():
    timing = passhost.instruments.get("timing")
    assert isinstance(timing, PassTimingInstrument)
    assert timing.name == "PassTimingInstrument"
    info = passhost.instruments.info("timing")
    assert info.distribution == "passhost-timing" and "TVM" in info.summary


def test_cli_prints_the_report_to_stderr(capsys):
    code = main(["run", "--example", "tutorial", "-O", "3", "--instrument", "timing", "--no-meta-data"])
    out, err = capsys.readouterr()
    assert code == 0 and out.startswith('#[version = "0.0.5"]')
    lines = err.splitlines()
    assert lines and all(LINE.match(line) for line in lines), err
    assert lines[0].startswith("default_pipeline: ") and "\tFoldConstant: " in err


def test_cli_json_report(capsys):
    code = main(["run", "--example", "tutorial", "-p", "FoldConstant", "--instrument", 'timing(format="json")'])
    _, err = capsys.readouterr()
    assert code == 0
    doc = json.loads(err)
    assert doc["passes"][0]["name"] == "sequential"
    assert doc["passes"][0]["children"][0]["name"] == "FoldConstant"
    assert doc["passes"][0]["children"][0]["children"][0]["name"] == "InferType"


def test_module_is_unchanged_by_timing():
    mod = _mod()
    with PassContext(instruments=[PassTimingInstrument()]):
        out = passhost.passes.FoldConstant()(mod)
    ref = passhost.passes.FoldConstant()(mod)
    assert transform.PassContext.current().instruments == ()
    assert ir.structural_equal(out, ref)


def test_each_thread_keeps_its_own_profile():
    timing = PassTimingInstrument()
    barrier = threading.Barrier(2)
    reports = {}

    def worker(name):
        def body(mod, ctx):
            barrier.wait(timeout=30)  # both threads are inside a pass at the same time
            return mod

        with PassContext(instruments=[timing]):
            Sequential([module_pass(body, opt_level=0, name=name)])(_mod())
            reports[name] = [line.split(":")[0] for line in timing.render().splitlines()]

    threads = [threading.Thread(target=worker, args=(n,)) for n in ("Left", "Right")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert reports == {"Left": ["sequential", "\tLeft"], "Right": ["sequential", "\tRight"]}
    assert timing.render() == ""  # the main thread profiled nothing


def _forests():
    leaf = st.builds(lambda d: ["P", 0, d, []], st.integers(0, 10**9))

    def grow(children):
        return st.builds(lambda d, kids: ["P", 0, sum(k[2] for k in kids) + d, kids],
                         st.integers(0, 10**9), st.lists(children, max_size=4))

    return st.lists(st.recursive(leaf, grow, max_leaves=30), min_size=1, max_size=5)


def test_render_matches_the_tree_on_random_profiles():
    @settings(max_examples=200, deadline=None)
    @given(_forests())
    def check(roots):
        text = render_text(roots)
        tree = profile_tree(roots)
        lines = text.split("\n")
        assert lines[-1] == ""
        flat, stack = [], [(0, n, None) for n in reversed(tree["passes"])]
        while stack:
            depth, node, parent = stack.pop()
            flat.append((depth, node, parent))
            stack.extend((depth + 1, c, node) for c in reversed(node["children"]))
        assert len(flat) == len(lines) - 1
        total = tree["total_us"]
        for line, (depth, node, parent) in zip(lines, flat):
            m = LINE.match(line)
            assert m and len(m.group(1)) == depth
            assert int(m.group(3)) == round(node["duration_us"])
            assert abs(int(m.group(4)) - node["self_us"]) <= 0.5 + 1e-6
            base = total if parent is None else parent["duration_us"]
            expect = 100.0 * node["duration_us"] / base if base else 0.0
            assert float(m.group(6)) == pytest.approx(expect, abs=0.005 + 1e-9)
            assert float(m.group(5)) == pytest.approx(100.0 * node["duration_us"] / total if total else 0.0,
                                                      abs=0.005 + 1e-9)

    check()
