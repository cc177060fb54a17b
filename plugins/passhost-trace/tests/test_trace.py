"""The trace instrument: Chrome trace-event JSON with nesting, monotonic ts, sizes, files."""
from __future__ import annotations

import json
import os

import pytest

import passhost
from passhost import ir, testing
from passhost.cli import main
from passhost.errors import PipelineError
from passhost.transform import PassContext, Sequential, module_pass
from passhost_trace import PassTraceInstrument, TraceError
from passhost_trace.trace import count_calls


def _mod():
    x = ir.var("x", shape=(2,))
    return ir.IRModule.from_expr(ir.Function([x], ir.multiply(x, ir.add(ir.const(2.0), ir.const(3.0)))))


def _identity(name, body=None):
    def run(mod, ctx):
        if body is not None:
            body(mod, ctx)
        return mod

    return module_pass(run, opt_level=0, name=name)


def check_trace(doc):
    """Valid for Perfetto: JSON-serialisable, B/E balanced and properly nested per thread,
    ts never decreasing; returns the pass events."""
    json.loads(json.dumps(doc))
    events = doc["traceEvents"]
    meta = [e for e in events if e["ph"] == "M"]
    assert {e["name"] for e in meta} >= {"process_name", "thread_name"}
    passes = [e for e in events if e["ph"] != "M"]
    stacks: dict = {}
    last = -1.0
    for e in passes:
        assert set(e) >= {"name", "ph", "ts", "pid", "tid", "args"}
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert e["ts"] >= last
        last = e["ts"]
        stack = stacks.setdefault(e["tid"], [])
        if e["ph"] == "B":
            stack.append(e["name"])
        else:
            assert e["ph"] == "E" and stack.pop() == e["name"]
    assert all(not s for s in stacks.values())
    return passes


def test_nested_events_with_sizes():
    trace = PassTraceInstrument()
    mod = _mod()
    with PassContext(opt_level=3, instruments=[trace]):
        out = Sequential([passhost.passes.FoldConstant(), _identity("Id")])(mod)
    events = check_trace(trace.trace())
    assert [(e["name"], e["ph"]) for e in events] == [
        ("sequential", "B"), ("FoldConstant", "B"), ("InferType", "B"), ("InferType", "E"),
        ("FoldConstant", "E"), ("Id", "B"), ("Id", "E"), ("sequential", "E")]
    assert events[0]["args"] == {"opt_level": 0, "calls": 2}
    assert events[1]["args"] == {"opt_level": 2, "calls": 2}
    assert events[4]["args"] == {"calls": count_calls(out)} == {"calls": 1}
    assert {e["cat"] for e in events} == {"pass"}


def test_calls_option_off():
    trace = PassTraceInstrument(calls=False)
    with PassContext(instruments=[trace]):
        _identity("Id")(_mod())
    events = check_trace(trace.trace())
    assert events[0]["args"] == {"opt_level": 0} and events[1]["args"] == {}


def test_path_is_written_at_exit(tmp_path):
    path = tmp_path / "trace.json"
    trace = passhost.instruments.get("trace", path=str(path))
    with PassContext(instruments=[trace]):
        passhost.passes.FoldConstant()(_mod())
        assert not path.exists()
        assert trace.render() == ""
    doc = json.loads(path.read_text())
    assert [e["name"] for e in check_trace(doc)] == ["FoldConstant", "InferType", "InferType", "FoldConstant"]
    assert os.listdir(tmp_path) == ["trace.json"]  # no temporary file left behind
    assert trace.trace() == doc


def test_render_without_path_is_the_json():
    trace = PassTraceInstrument()
    with PassContext(instruments=[trace]):
        _identity("Id")(_mod())
        doc = json.loads(trace.render())
    assert [e["name"] for e in check_trace(doc)] == ["Id", "Id"]


def test_a_failing_pass_is_closed_as_unfinished(tmp_path):
    path = tmp_path / "t.json"
    trace = PassTraceInstrument(path=path)

    def boom(mod, ctx):
        raise ValueError("boom")

    def outer(mod, ctx):
        with pytest.raises(ValueError):
            _identity("Inner", boom)(mod)

    with pytest.raises(ValueError, match="boom"):
        with PassContext(instruments=[trace]):
            _identity("Outer", outer)(_mod())
            _identity("Top", boom)(_mod())
    events = check_trace(json.loads(path.read_text()))
    assert [(e["name"], e["ph"], e["args"].get("unfinished", False)) for e in events] == [
        ("Outer", "B", False), ("Inner", "B", False), ("Inner", "E", True), ("Outer", "E", False),
        ("Top", "B", False), ("Top", "E", True)]


def test_unwritable_path(tmp_path):
    with pytest.raises(TraceError, match="directory does not exist"):
        PassTraceInstrument(path=tmp_path / "missing" / "t.json")
    target = tmp_path / "gone"
    target.mkdir()
    trace = PassTraceInstrument(path=target / "t.json")
    target.rmdir()  # removed while the passes ran
    with pytest.raises(TraceError, match="cannot write"):
        with PassContext(instruments=[trace]):
            _identity("Id")(_mod())


def test_new_context_starts_a_new_trace():
    trace = PassTraceInstrument()
    with PassContext(instruments=[trace]):
        _identity("A")(_mod())
    with PassContext(instruments=[trace]):
        _identity("B")(_mod())
    assert [e["name"] for e in check_trace(trace.trace())] == ["B", "B"]


def test_resnet18_trace_is_consistent():
    mod, params = testing.resnet(18)
    trace = PassTraceInstrument()
    seq = Sequential([passhost.passes.SimplifyInference(), passhost.passes.FoldConstant()])
    with PassContext(opt_level=3, instruments=[trace]):
        out = seq(mod)
    events = check_trace(trace.trace())
    assert events[0]["args"]["calls"] == count_calls(mod)
    assert events[-1]["args"]["calls"] == count_calls(out)


def test_options_and_registration():
    with pytest.raises(TraceError, match="path"):
        PassTraceInstrument(path=3)
    with pytest.raises(TraceError, match="calls"):
        PassTraceInstrument(calls="no")
    with pytest.raises(PipelineError, match="trace"):
        passhost.instruments.get("trace", file="x")
    assert passhost.instruments.info("trace").distribution == "passhost-trace"


def test_cli_writes_the_file(capsys, tmp_path):
    path = tmp_path / "run.json"
    code = main(["run", "--example", "tutorial", "-O", "3", "--instrument", f"trace(path={str(path)!r})",
                 "--no-meta-data"])
    _, err = capsys.readouterr()
    assert code == 0 and err == ""
    events = check_trace(json.loads(path.read_text()))
    assert events[0]["name"] == "default_pipeline"
