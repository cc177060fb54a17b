"""The report instrument: every scheduled pass with why it ran or was skipped."""
from __future__ import annotations

import json

import pytest

import passhost
from passhost import ir
from passhost.instrument import PassInstrument
from passhost.transform import PassContext, Sequential, module_pass
from passhost_report import ReportInstrument
from passhost_report.report import module_changed, module_op_count


def _mod():
    x = ir.var("x", shape=(2,))
    return ir.IRModule.from_expr(ir.Function([x], ir.add(ir.multiply(x, ir.const(2.0)), x)))


def _identity(name, opt_level, required=()):
    return module_pass(lambda mod, ctx: mod, opt_level=opt_level, name=name, required=list(required))


def _drop_add(mod, ctx):
    out = mod.copy()
    f = mod["main"]
    out["main"] = ir.Function(f.params, f.body.args[0])
    return out


class Veto(PassInstrument):
    def __init__(self, name):
        self.vetoed = name

    def should_run(self, mod, info):
        return info.name != self.vetoed


def test_registered_under_its_name():
    assert "report" in passhost.instruments.names()
    assert isinstance(passhost.instruments.get("report"), ReportInstrument)


def test_every_skip_and_run_reason():
    report = ReportInstrument()
    seq = Sequential([
        _identity("Low", 1),
        _identity("High", 3),
        _identity("Off", 0),
        _identity("Forced", 3),
        _identity("Vetoed", 0),
        module_pass(_drop_add, opt_level=2, name="DropAdd", required=["InferType"]),
    ])
    with PassContext(opt_level=2, disabled_pass=["Off"], required_pass=["Forced"],
                     instruments=[report, Veto("Vetoed")]):
        out = seq(_mod())
    got = [(e.name, e.depth, e.status, e.reason, e.changed) for e in report.passes]
    assert got == [
        ("sequential", 0, "ran", "direct", True),
        ("Low", 1, "ran", "opt_level", False),
        ("High", 1, "skipped", "opt_level", None),
        ("Off", 1, "skipped", "disabled", None),
        ("Forced", 1, "ran", "required_pass", False),
        ("Vetoed", 1, "skipped", "should_run", None),
        ("InferType", 1, "ran", "required by DropAdd", False),
        ("DropAdd", 1, "ran", "opt_level", True),
    ]
    drop = report.passes[-1]
    assert (drop.ops_before, drop.ops_after, drop.op_delta) == (2, 1, -1)
    assert drop.parent == 0 and report.passes[0].parent is None
    assert all(e.wall_ms >= 0 for e in report.passes if e.status == "ran")
    assert report.summary() == {"ran": 5, "changed": 2, "failed": 0,
                                "skipped": {"disabled": 1, "opt_level": 1, "should_run": 1}}
    assert module_op_count(out) == 1
    assert json.loads(json.dumps(report.as_dict()))["passes"][7]["op_delta"] == -1


def test_render_is_a_table_with_nesting():
    report = ReportInstrument()
    inner = Sequential([_identity("A", 0)], name="inner")
    with PassContext(instruments=[report]):
        Sequential([inner, _identity("B", 9)])(_mod())
    lines = report.render().splitlines()
    assert lines[0].split() == ["#", "PASS", "STATUS", "REASON", "CHANGED", "TIME", "ms", "OPS"]
    assert lines[2].split()[:4] == ["1", "inner", "ran", "opt_level"]
    assert lines[3].startswith("2        A ") or lines[3].split()[1:3] == ["A", "ran"]
    assert "    A" in lines[3] and "  inner" in lines[2]
    assert lines[4].split()[1:4] == ["B", "skipped", "opt_level"]
    assert ReportInstrument().render() == ""


def test_a_failing_pass_is_reported_failed_and_records_survive_the_context():
    report = ReportInstrument()

    def boom(mod, ctx):
        raise ValueError("boom")

    with pytest.raises(ValueError):
        with PassContext(instruments=[report]):
            Sequential([_identity("A", 0), module_pass(boom, opt_level=0, name="Boom")])(_mod())
    assert [(e.name, e.status) for e in report.passes] == [("sequential", "failed"), ("A", "ran"),
                                                            ("Boom", "failed")]
    assert report.summary()["failed"] == 2
    # entering a context again starts a new report
    with PassContext(instruments=[report]):
        _identity("C", 0)(_mod())
    assert [(e.name, e.reason) for e in report.passes] == [("C", "direct")]


def test_count_ops_can_be_turned_off():
    report = ReportInstrument(count_ops=False)
    with PassContext(instruments=[report]):
        _identity("A", 0)(_mod())
    assert report.passes[0].ops_before is None and report.passes[0].op_delta is None
    with pytest.raises(TypeError):
        ReportInstrument(count_ops="yes")


def test_module_changed_uses_identity_then_structure():
    mod = ir.infer_type(_mod())
    assert not module_changed(mod, mod)
    assert not module_changed(mod, mod.copy())
    rebuilt = ir.parse(mod.astext(show_meta_data=True))
    assert not module_changed(mod, rebuilt)
    assert module_changed(mod, _drop_add(mod, None))


def test_no_skip_hook_means_no_notification():
    """A context whose instruments lack on_pass_skipped never calls it (zero cost)."""
    ctx = PassContext(instruments=[Veto("x")])
    assert ctx._skip_hooks == ()
    assert PassContext(instruments=[ReportInstrument()])._skip_hooks != ()


class _Plugin:
    from passhost import hookimpl as _hookimpl

    @_hookimpl
    def passhost_register_passes(self):
        from passhost.hookspecs import PassEntry

        yield PassEntry("Low", lambda: _identity("Low", 1))
        yield PassEntry("High", lambda: _identity("High", 3))
        yield PassEntry("Off", lambda: _identity("Off", 0))
        yield PassEntry("Forced", lambda: _identity("Forced", 3))
        yield PassEntry("DropAdd", lambda: module_pass(_drop_add, opt_level=1, name="DropAdd",
                                                       required=["Low"]))
        yield PassEntry("Boom", lambda: module_pass(_boom, opt_level=0, name="Boom"))


def _boom(mod, ctx):
    raise ValueError("boom")


def test_cli_report_json(tmp_path, capsys):
    import passhost_report
    from passhost.cli import main
    from passhost.registry import Registry, use_registry

    reg = Registry(load_entrypoints=False)
    reg.register_plugin(_Plugin(), "report-test")
    reg.register_plugin(passhost_report, "report")
    src = tmp_path / "in.txt"
    src.write_text(_mod().astext())
    with use_registry(reg):
        code = main(["run", str(src), "-O", "1", "-p", "Low,High,Off,Forced,DropAdd", "--disable", "Off",
                     "--require", "Forced", "--report", str(tmp_path / "r.json"), "--no-meta-data"])
        out, err = capsys.readouterr()
        # the two skips are also told on stderr, one note each (issue 15: nothing silently cut)
        assert code == 0 and err == ("passhost: note: High (opt_level 3) is skipped at -O1; run it with -O3 or "
                                     "--require High\npasshost: note: Off is named in -p and disabled by --disable: "
                                     "it will not run\n")
        doc = json.loads((tmp_path / "r.json").read_text())
        assert [(p["name"], p["status"], p["reason"]) for p in doc["passes"]] == [
            ("sequential", "ran", "direct"), ("Low", "ran", "opt_level"), ("High", "skipped", "opt_level"),
            ("Off", "skipped", "disabled"), ("Forced", "ran", "required_pass"),
            ("Low", "ran", "required by DropAdd"), ("DropAdd", "ran", "opt_level")]
        assert doc["passes"][-1]["op_delta"] == -1 and doc["passes"][-1]["changed"] is True
        assert doc["summary"]["skipped"] == {"disabled": 1, "opt_level": 1}
        # a failing run still writes its report, with the failing pass marked
        code = main(["run", str(src), "-p", "Low,Boom", "--report", str(tmp_path / "f.json"), "--no-crash-dir"])
        capsys.readouterr()
        doc = json.loads((tmp_path / "f.json").read_text())
        assert code == 1 and [(p["name"], p["status"]) for p in doc["passes"]] == [
            ("sequential", "failed"), ("Low", "ran"), ("Boom", "failed")]
        # without the plugin --report fails clearly
        bare = Registry(load_entrypoints=False)
        bare.register_plugin(_Plugin(), "report-test")
        with use_registry(bare):
            code = main(["run", str(src), "-p", "Low", "--report", str(tmp_path / "x.json")])
        _, err = capsys.readouterr()
        assert code == 2 and err.startswith("passhost: error: ") and "report" in err and err.count("\n") == 1
        assert not (tmp_path / "x.json").exists()


def test_cli_report_into_a_missing_directory_fails_before_running(tmp_path, capsys):
    import passhost_report
    from passhost.cli import main
    from passhost.registry import Registry, use_registry

    reg = Registry(load_entrypoints=False)
    reg.register_plugin(_Plugin(), "report-test")
    reg.register_plugin(passhost_report, "report")
    src = tmp_path / "in.txt"
    src.write_text(_mod().astext())
    with use_registry(reg):
        code = main(["run", str(src), "-p", "Boom", "--report", str(tmp_path / "nope" / "r.json")])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"passhost: error: cannot write '{tmp_path / 'nope' / 'r.json'}': the directory ")


def test_rule_counts_of_passes_made_of_rules():
    import passhost
    from passhost import ir, transform
    from passhost.ir.pattern import is_op, rule

    neg_neg = transform.pattern_pass("NegNeg", [rule(lambda x: is_op("negative")(is_op("negative")(x)), lambda x: x,
                                                     name="neg_neg")])
    x = ir.var("x", shape=(2,))
    mod = ir.IRModule.from_expr(ir.Function([x], ir.add(ir.negative(ir.negative(x)), ir.negative(x))))
    report = passhost.instruments.get("report")
    with transform.PassContext(instruments=[report]):
        neg_neg(mod)
        neg_neg(mod)
    entries = [e for e in report.passes if e.name == "NegNeg"]
    assert len(entries) == 2
    for e in entries:  # each run: three negatives tried, one matched and rewritten (one sweep: the
        # replacement brings no new negative, so no second sweep is needed)
        assert e.rules == {"neg_neg": {"tried": 3, "matched": 1, "rewritten": 1}}
    assert report.as_dict()["passes"][0]["rules"] == {"neg_neg": {"tried": 3, "matched": 1, "rewritten": 1}}
    assert "NegNeg/neg_neg  3 / 1 / 1" in report.render()


def test_merged_duplicates_count_as_a_change_with_the_real_op_counts():
    import passhost
    from passhost import ir, transform

    x = ir.var("x", shape=(2,))
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([x], ir.add(ir.exp(x), ir.exp(x)))))
    assert ir.structural_hash(mod) == ir.structural_hash(passhost.passes.EliminateCommonSubexpr()(mod))  # same tree
    report = passhost.instruments.get("report")
    with transform.PassContext(opt_level=3, instruments=[report]):
        passhost.pipeline("EliminateCommonSubexpr")(mod)
    [cse] = [e for e in report.passes if e.name == "EliminateCommonSubexpr"]
    assert cse.changed is True and (cse.ops_before, cse.ops_after) == (3, 2)  # but two exp calls became one
    same = ir.infer_type(ir.IRModule.from_expr(ir.Function([x], ir.add(ir.exp(x), ir.exp(x)))))
    assert not ir.module_changed(mod, same)  # equal trees, equal sharing
