"""Smoke test of the benchmark suite: every benchmark runs at a tiny size.

Nothing here looks at a time: the benchmarks are never part of pass/fail. The checks
are that each benchmark runs, measures what it says (well-formed statistics, node
counts near the nominal size, goals attached) and that the entry point writes its JSON.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from passhost import ir

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # benchmarks/ is a top-level package of the repository, not installed
    sys.path.insert(0, str(ROOT))

from benchmarks import bench_ir, bench_onnx, bench_scaling, measure, peers, run, summary  # noqa: E402


def _check_stats(r: dict) -> None:
    for clock in ("cpu", "wall"):
        s = r[clock]
        assert 0 <= s["min"] <= s["median"] <= s["max"]


def test_summary_and_measure_count_runs():
    assert summary([3.0, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0}
    calls = []
    r = measure(lambda: len(calls), calls.append, repeat=3, warmup=2)
    assert len(calls) == 5 and r["repeat"] == 3 and r["warmup"] == 2
    _check_stats(r)


def test_bench_ir_tiny():
    results = bench_ir.run(n=200, big=500, repeat=1, warmup=0)
    by_case = {r["case"]: r for r in results}
    assert set(by_case) == set(bench_ir.GOALS) | {"memory_per_node"}
    for name, r in by_case.items():
        if name == "memory_per_node":
            assert r["nodes"] >= 200 and 0 < r["untyped_bytes_per_node"] <= r["typed_bytes_per_node"] * 2
            continue
        _check_stats(r)
        assert r["goal_s"] == pytest.approx(bench_ir.GOALS[name] * r["size"] /
                                            (bench_ir.REF_BIG if name == "post_order_visit" else bench_ir.REF_N))
    assert by_case["post_order_visit"]["size"] == 500


@pytest.mark.parametrize("family", list(bench_scaling.FAMILIES))
def test_families_are_well_typed_and_near_their_size(family):
    mod = bench_scaling.FAMILIES[family](600)
    ir.infer_type(mod)
    assert ir.well_formed(mod)
    assert 0.8 * 600 <= bench_scaling.count_nodes(mod) <= 1.2 * 600


def test_dag_family_is_wide_and_shares_values():
    mod = bench_scaling.dag_family(2000)
    uses: dict = {}
    for node in ir.post_order(mod["main"]):
        if isinstance(node, ir.Call):
            for a in node.args:
                uses[a] = uses.get(a, 0) + 1
    shared = sum(1 for n, k in uses.items() if isinstance(n, ir.Call) and k > 1)
    assert shared > 100
    # structural duplicates exist, so CSE has work
    calls = [n for n in ir.post_order(mod["main"]) if isinstance(n, ir.Call)]
    keys = {(n.op, n.args) for n in calls}
    assert len(keys) < len(calls)


def test_dupdead_family_has_dead_and_duplicate_bindings():
    mod = bench_scaling.dupdead_family(240)
    out = bench_scaling.case_runners("dupdead", 240)["DeadCodeElimination"]
    typed = out[0]()
    after = out[1](typed)
    lets = [n for n in ir.post_order(typed["main"]) if isinstance(n, ir.Let)]
    lets_after = [n for n in ir.post_order(after["main"]) if isinstance(n, ir.Let)]
    assert len(lets) == 4 * (240 // 12) and len(lets_after) < len(lets)
    assert bench_scaling.count_nodes(mod) > 200


def test_bench_scaling_runs_every_case_in_process():
    results = bench_scaling.run_one("chain", 200, repeat=1, warmup=0)
    cases = [r["case"] for r in results]
    assert cases[:2] == ["O3", "InferType"]
    assert cases[2:] == bench_scaling.pipeline_pass_names(3)
    for r in results:
        _check_stats(r)
        assert r["nodes"] == 200 and r["peak_rss_mb"] > 0


def test_bench_scaling_isolated_and_growth():
    results = bench_scaling.run_isolated("dag", 300, ("InferType",), repeat=1, warmup=0, timeout=600)
    assert len(results) == 1 and "error" not in results[0], results
    fake = [dict(results[0], size=s, cpu_per_node_us=v) for s, v in ((10_000, 2.0), (1_000_000, 2.2))]
    (g,) = bench_scaling.growth(fake)
    assert g["ratio"] == pytest.approx(1.1) and g["meets_goal"]


def test_peers_passhost_side_and_optional_peers():
    wanted = tuple(p for p in ("xdsl",) if peers.xdsl_available())
    rows = peers.run((120,), ("chain", "dupdead"), repeat=1, warmup=0, peers=wanted)
    assert [(r["family"], r["case"]) for r in rows] == [(f, c) for f in ("chain", "dupdead") for c in peers.CASES]
    for r in rows:
        _check_stats(r["passhost"])
        for res in r["peers"].values():
            assert "error" not in res, res
            assert res["ratio"] > 0


def test_entry_point_quick_writes_json(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--only", "ir,nesting,passes,passmgr,models",
                           "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    (path,) = tmp_path.glob("*.json")
    report = json.loads(path.read_text())
    assert set(report["results"]) == {"ir", "nesting", "passes", "passmgr", "models"}
    assert "error" not in report["results"]["models"], report["results"]["models"]
    assert report["machine"]["cores"] >= 1 and report["machine"]["cpu_model"]
    assert len(report["load_before"]) == 3
    assert {r["case"] for r in report["results"]["passes"]} == {"cse", "dce", "fold-nothing", "fold-all"}
    assert report["results"]["passmgr"]["per_pass_us"], report["results"]["passmgr"]
    assert "== IR" in proc.stdout and "== nested scopes" in proc.stdout


def test_script_entry_point_help():
    proc = subprocess.run([sys.executable, "benchmarks/run.py", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "--quick" in proc.stdout and "--full" in proc.stdout
    assert run.BENCHES == ("ir", "nesting", "scaling", "passes", "passmgr", "models", "instruments", "peers", "onnx")


@pytest.fixture(scope="module")
def onnx_rows():
    pytest.importorskip("onnx")
    pytest.importorskip("passhost_onnx")
    return bench_onnx.run(bench_onnx.QUICK_MODELS, repeat=1, warmup=0)


def test_bench_onnx_every_tool_has_a_row(onnx_rows):
    assert [r["tool"] for r in onnx_rows] == list(bench_onnx.TOOLS)
    for r in onnx_rows:
        assert r["weight_bytes"] > 1_000_000 and r["nodes_before"] > 50
        if not bench_onnx.installed(r["tool"]):
            assert r["skipped"] == "not installed"
            continue
        assert "error" not in r, r
        _check_stats(r)
        assert set(r["phases"]) == ({"load"} if r["tool"] == "passhost-import" else {"load", "optimize", "save"})
        if r["tool"] != "passhost-import":
            assert r["nodes"] > 0 and r["function_nodes"] >= 0
    ph = onnx_rows[0]
    assert ph["tool"] == "passhost" and "peak_bytes" in ph and ph["peak_bytes"] > 0
    if _has("onnxruntime"):
        assert ph["max_abs_diff"] < 1e-4


def _has(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def test_bench_onnx_missing_tool_says_not_installed(monkeypatch):
    pytest.importorskip("onnx")
    pytest.importorskip("passhost_onnx")
    monkeypatch.setitem(bench_onnx.NEEDS, "onnxsim", "no_such_module_for_the_smoke_test")
    rows = bench_onnx.run(bench_onnx.QUICK_MODELS, ("passhost-import", "onnxsim"), repeat=1, warmup=0, memory=False)
    assert rows[1]["skipped"] == "not installed" and "wall" in rows[0] and "peak_bytes" not in rows[0]
    assert "not installed" in bench_onnx.markdown(rows)


def test_bench_onnx_through_the_runner():
    pytest.importorskip("onnx")
    pytest.importorskip("passhost_onnx")
    entry = run.run_onnx(quick=True, repeat=1, warmup=0, timeout=600)
    assert "error" not in entry, entry
    assert [r["tool"] for r in entry["rows"]] == list(bench_onnx.TOOLS)
    assert "### ONNX models end to end" in run.markdown({"results": {"onnx": entry}, "machine": {},
                                                          "load_before": [], "load_after": [],
                                                          "settings": {"repeat": 1, "warmup": 0}})


def test_bench_onnx_prepares_the_transformer_encoders_with_static_shapes(tmp_path):
    pytest.importorskip("passhost_onnx")
    pytest.importorskip("onnxruntime")
    import onnx

    info = bench_onnx.prepare("bert", str(tmp_path))
    model = onnx.load(info["path"])
    dims = [[d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input]
    assert dims == [[1, bench_onnx.TRANSFORMER_SEQ]] * 2 and info["nodes"] == len(model.graph.node)
    outs = bench_onnx.ort_outputs(info["path"])  # int64 token ids and mask feeds
    assert outs[0].shape == (1, bench_onnx.TRANSFORMER_SEQ, 256)


def test_bench_rules_tiny():
    from benchmarks import bench_rules

    pairs = bench_rules.rule_pairs({("Conv", "Relu")})
    assert len(pairs) == 46 and ("Conv", "Relu") not in pairs
    rows = bench_rules.bench_scaling([300, 600], repeat=1)
    assert [r["rules"] for r in rows] == [46, 46] and all(r["per_node_rule_ns"] > 0 for r in rows)


def test_bench_nesting_tiny():
    from benchmarks import bench_nesting
    rows = bench_nesting.run((200, 400, 800), repeat=1, warmup=0)
    slopes = [r for r in rows if "slope_print" in r]
    assert {r["case"] for r in slopes} == set(bench_nesting.SHAPES)
    for r in rows:
        if "slope_print" in r:
            # output size is deterministic: linear in depth (the old printer's was ~2)
            assert r["slope_output"] < 1.1 and r["meets_goal"] in (True, False)
        else:
            _check_stats(r["print"])
            _check_stats(r["parse"])
            assert r["output_chars"] > r["input_chars"] > r["depth"]
    assert bench_nesting.slope([1, 2, 4], [3, 6, 12]) == pytest.approx(1.0)
    assert bench_nesting.slope([1, 2, 4], [1, 4, 16]) == pytest.approx(2.0)


def test_bench_nesting_deep_tiny(capsys):
    from benchmarks import bench_nesting
    from passhost.testing.deep import DEEP_FAMILIES
    assert bench_nesting.main(["--deep", "--depths", "50,100", "--shapes", "tuples,lets"]) == 0
    rows = bench_nesting.run_deep((50, 100), tuple(DEEP_FAMILIES))
    assert [r["case"] for r in rows] == list(DEEP_FAMILIES)
    for r in rows:
        assert set(r["steps"]) == {50, 100} and all(v >= 0 for s in r["steps"].values() for v in s.values())
        assert r["meets_goal"] is True  # (100 deep: milliseconds)
    assert capsys.readouterr().out.count("\n") == 3


def test_ab_host_measures_every_walker_in_process():
    from benchmarks.ab_host import CASES, measure

    got = measure(["chain", "dupdead"], 300, shift=50)
    assert set(got) == {f"{fam}/{case}" for fam in ("chain", "dupdead") for case in CASES}
    assert all(t >= 0 for t in got.values())


@pytest.mark.parametrize("family", sorted(bench_scaling.FAMILIES))
def test_ab_cse_rules_gives_the_plugins_output(family):
    # the experiment's rule set must be EliminateCommonSubexpr, or its timings mean nothing
    from passhost_eliminate_common_subexpr import eliminate_common_subexpr

    from benchmarks.ab_cse_rules import cse_rules, walk_only

    func = ir.infer_type(bench_scaling.FAMILIES[family](600))["main"]
    want = eliminate_common_subexpr(func)
    assert want is not func or family in ("chain", "resnet")
    assert ir.structural_equal(cse_rules(func), want)
    assert walk_only(func) is func


def test_ab_cse_rules_merges_scalars_tuples_and_attr_classes():
    from passhost_eliminate_common_subexpr import eliminate_common_subexpr

    from benchmarks.ab_cse_rules import cse_rules

    x = ir.var("x", shape=(2, 3))
    a = ir.add(ir.add(x, ir.const(np.float32(1))), ir.add(x, ir.const(np.float32(1))))
    c = ir.concatenate(ir.Tuple([a, x]), axis=0)
    d = ir.concatenate(ir.Tuple([a, x]), axis=0)
    e = ir.concatenate(ir.Tuple([a, x]), axis=1)
    func = ir.infer_type(ir.IRModule.from_expr(ir.Function([x], ir.Tuple([c, d, e]))))["main"]
    got = cse_rules(func)
    assert ir.structural_equal(got, eliminate_common_subexpr(func))
    assert ir.count_ops(got) == {"add": 2, "concatenate": 2}


def test_ab_onnx_pairs_two_live_trees_and_reports_paired_ratios(tmp_path):
    pytest.importorskip("onnx")
    pytest.importorskip("passhost_onnx")
    import io

    from benchmarks import ab_onnx

    src = bench_onnx.prepare("squeezenet", str(tmp_path))["path"]
    res = ab_onnx.pairs(str(ROOT), str(ROOT), src, 2, str(tmp_path))
    assert [len(res["old"]), len(res["new"])] == [2, 2]
    assert all(len(row) == 4 and all(t > 0 for t in row) for side in res.values() for row in side)
    out = io.StringIO()
    medians = ab_onnx.report(res, "HEAD", "squeezenet", out=out)
    assert set(medians) == {"cpu", "load", "optimise", "save"} and all(m > 0 for m in medians.values())
    assert "2 alternating pairs" in out.getvalue()


def test_ab_onnx_times_the_export_alone(tmp_path):
    pytest.importorskip("onnx")
    pytest.importorskip("passhost_onnx")
    import io

    from benchmarks import ab_onnx

    src = bench_onnx.prepare("squeezenet", str(tmp_path))["path"]
    res = ab_onnx.pairs(str(ROOT), str(ROOT), src, 2, str(tmp_path), export=True)
    assert all(len(row) == 1 and row[0] > 0 for side in res.values() for row in side)
    out = io.StringIO()
    assert set(ab_onnx.report(res, "HEAD", "squeezenet", out=out)) == {"cpu"}
    with pytest.raises(SystemExit, match="no model file"):
        ab_onnx.main(["--rev", "HEAD", "--export", "--model", str(tmp_path / "missing.onnx")])


def test_ab_onnx_extracts_a_revision_with_its_plugins(tmp_path):
    from benchmarks import ab_onnx

    tree = Path(ab_onnx.extract("HEAD", str(tmp_path)))
    assert (tree / "passhost" / "__init__.py").exists()
    assert (tree / "benchmarks" / "bench_onnx.py").exists()
    assert any((tree / "plugins").glob("passhost-onnx/passhost_onnx/importer.py"))


def test_bench_large_tiny(tmp_path, capsys):
    """The large-model benchmark at a few megabytes: the model is built, cp and passhost
    timed, the smaller sibling compared in onnxruntime, everything deleted."""
    pytest.importorskip("onnxruntime")
    from benchmarks import bench_large

    out = tmp_path / "rows.json"
    assert bench_large.main(["--models", "matmul-6g", "--tools", "passhost", "--scale", "0.002", "--repeat", "1",
                             "--dir", str(tmp_path), "--json", str(out)]) == 0
    row = json.loads(out.read_text())[0]
    mine = row["tools"]["passhost"]
    assert mine["ok"], mine["error"]
    assert mine["output_bytes"] >= row["weight_bytes"] and len(row["cp"]) == 2, row
    assert row["sibling"]["ok"] and row["sibling"]["ort"][0] < 1e-5, row["sibling"]
    assert row["goals"]["rss"], mine
    assert "| matmul-6g | " in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.json"]  # the models are gone


def test_bench_large_caps_a_tool_that_takes_too_much_memory(tmp_path):
    """A tool past the cap is killed (or fails to allocate) and reported as out of memory,
    so the benchmark can run the peers on a shared machine."""
    from benchmarks import bench_large

    grow = "import time\nblocks = []\nwhile True:\n    blocks.append(bytearray(50 << 20))\n    time.sleep(0.01)\n"
    r = bench_large.run_child([sys.executable, "-c", grow], 200e6, 60, str(tmp_path))
    assert not r["ok"] and r["error"].startswith("out of memory (cap)")
    ok = bench_large.run_child([sys.executable, "-c", "print('hi')"], 200e6, 60, str(tmp_path), capture=True)
    assert ok["ok"] and ok["stdout"].strip() == "hi" and ok["peak_rss"] > 0
