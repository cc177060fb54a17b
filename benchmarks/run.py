"""Run every passhost benchmark, print one report and write it as JSON.

Usage::

    python -m benchmarks                  # everything, up to 100k nodes (a few minutes)
    python -m benchmarks --full           # also the 1M-node cases (chain and dag; tens of minutes)
    python -m benchmarks --quick          # every benchmark at a tiny size (seconds; the smoke test)
    python -m benchmarks --only ir,scaling --repeat 5
    python benchmarks/run.py ...          # the same

Benchmarks (``--only`` names):

``ir``           :mod:`benchmarks.bench_ir` — print, parse, structural_hash, infer_type,
                 post_order_visit, memory per node
``nesting``      :mod:`benchmarks.bench_nesting` — print and parse of scopes nested 250 to
                 64,000 deep, and the log-log slope of time against depth
``scaling``      :mod:`benchmarks.bench_scaling` — four graph families through each -O3
                 pass and the whole pipeline; one fresh process per family and size
``passes``       ``bench_passes.py`` cases (CSE, DCE, FoldConstant on 100k chains)
``passmgr``      ``bench_passmgr.py`` (pass-manager overhead per pass; run as a script)
``models``       ``bench_models.py`` and ``instruments``: ``bench_instruments.py``, run
                 as scripts when present
``peers``        :mod:`benchmarks.peers` — xDSL and TVM Relax side by side, when installed
``onnx``         :mod:`benchmarks.bench_onnx` — ResNet-50 and DenseNet-121 file to file: passhost
                 import + -O3 + export beside onnxscript, onnxsim and onnxoptimizer (in a
                 child process, so its memory figures are its own)

Every timed case is run ``--warmup`` times untimed, then ``--repeat`` times; the report
gives the median, min and max of CPU time (``time.process_time``) and of wall time.
Goals are judged on the median CPU time, which on a shared machine is much closer to
an idle machine's wall time than the wall time is. Results go to
``benchmarks/results/<UTC timestamp>.json`` (git-ignored) with the machine information
(CPU model, cores, load average before and after, Python, installed passes).

The benchmarks are never part of the test suite's pass/fail; ``tests/test_benchmarks_smoke.py``
only checks that each runs at a tiny size.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import bench_ir, bench_nesting, bench_onnx, bench_scaling, fmt_seconds, machine_info, measure, peers  # noqa: E402

HERE = Path(__file__).resolve().parent
BENCHES = ("ir", "nesting", "scaling", "passes", "passmgr", "models", "instruments", "peers", "onnx")
#: scripts owned by other parts of the project, run as subprocesses
SCRIPTS = {"passmgr": "bench_passmgr.py", "models": "bench_models.py", "instruments": "bench_instruments.py"}


def _load_script(name: str):
    """Import ``benchmarks/<name>`` by path (it is a script, not necessarily a module)."""
    path = HERE / name
    spec = importlib.util.spec_from_file_location(f"_bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_passes(n: int, repeat: int, warmup: int) -> list:
    """``bench_passes.py``'s cases, timed with median/min/max (its own ``main`` keeps the best)."""
    mod = _load_script("bench_passes.py")
    out = []
    for name, (setup, fn) in mod.cases(n).items():
        r = measure(setup, fn, repeat=repeat, warmup=warmup)
        goal = mod.TARGETS.get(name)
        r.update({"bench": "passes", "case": name, "size": n})
        if goal is not None:
            r["goal_s"] = goal * n / 100_000
            r["meets_goal"] = r["cpu"]["median"] <= r["goal_s"]
        out.append(r)
    return out


#: small-size options per script for ``--quick``, used when the script's ``--help`` lists them
QUICK_ARGS = {"passmgr": ["--passes", "50", "--repeats", "3"], "instruments": ["--repeats", "1", "--layers", "18"],
              "models": ["--repeat", "1", "--layers", "18"]}


def _quick_args(path: Path, key: str):
    """The options that make ``path`` run at a tiny size, or ``None`` if it has none."""
    helptext = subprocess.run([sys.executable, str(path), "--help"], capture_output=True, text=True,
                              timeout=120, cwd=HERE.parent).stdout
    wanted = QUICK_ARGS.get(key, [])
    if wanted and all(a in helptext for a in wanted if a.startswith("--")):
        return wanted
    if "--quick" in helptext:
        return ["--quick"]
    return None


def run_script(key: str, quick: bool, timeout: float = 1800.0) -> dict:
    """Run another owner's benchmark script; keep its output (and numbers found in it)."""
    path = HERE / SCRIPTS[key]
    entry: dict = {"bench": key, "script": SCRIPTS[key]}
    if not path.exists():
        entry["skipped"] = f"{SCRIPTS[key]} is not in benchmarks/ yet"
        return entry
    args: list = []
    if quick:
        args = _quick_args(path, key)
        if args is None:
            entry["skipped"] = f"{SCRIPTS[key]} has no small-size option; run without --quick to include it"
            return entry
    c0, t0 = _child_cpu(), time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True,
                              timeout=timeout, cwd=HERE.parent)
    except subprocess.TimeoutExpired:
        entry["error"] = f"timed out after {timeout:.0f} s"
        return entry
    entry.update({"args": args, "returncode": proc.returncode, "wall_s": time.perf_counter() - t0,
                  "cpu_s": _child_cpu() - c0, "stdout": proc.stdout[-20000:]})
    if proc.returncode != 0:
        entry["error"] = proc.stderr.strip()[-2000:]
    if key == "passmgr":
        entry["per_pass_us"] = [
            {"instruments": int(m.group(1)), "us_per_pass": float(m.group(2)), "bare_loop_us": float(m.group(3))}
            for m in re.finditer(r"(\d+) instruments: ([\d.]+) us/pass\s+\(bare loop ([\d.]+)", proc.stdout)]
    return entry


def run_onnx(quick: bool, repeat: int, warmup: int, timeout: float = 3600.0) -> dict:
    """``bench_onnx.py`` in a child process (peak RSS of its own), its rows read back as JSON."""
    entry: dict = {"bench": "onnx", "script": "bench_onnx.py"}
    args = ["--quick"] if quick else ["--repeat", str(repeat), "--warmup", str(warmup)]
    with tempfile.TemporaryDirectory(prefix="bench_onnx_json_") as tmp:
        out = Path(tmp) / "onnx.json"
        try:
            proc = subprocess.run([sys.executable, str(HERE / "bench_onnx.py"), *args, "--json", str(out)],
                                  capture_output=True, text=True, timeout=timeout, cwd=HERE.parent)
        except subprocess.TimeoutExpired:
            entry["error"] = f"timed out after {timeout:.0f} s"
            return entry
        entry.update({"args": args, "returncode": proc.returncode, "stdout": proc.stdout[-20000:]})
        if proc.returncode != 0 or not out.exists():
            entry["error"] = proc.stderr.strip()[-2000:] or f"exit status {proc.returncode}"
            return entry
        data = json.loads(out.read_text())
    if "skipped" in data:
        entry["skipped"] = data["skipped"]
        return entry
    entry.update({"versions": data["versions"], "load_before": data["load_before"], "load_after": data["load_after"],
                  "settings": data["settings"], "rows": data["results"]})
    return entry


def _child_cpu() -> float:
    t = os.times()
    return t.children_user + t.children_system


# ------------------------------------------------------------------------------- report


def print_report(report: dict, out=sys.stdout) -> None:
    m = report["machine"]
    print(f"machine: {m.get('cpu_model')}, {m.get('cores')} cores ({m.get('usable_cores')} usable), "
          f"{m.get('memory_gb')} GB, Python {m.get('python')}", file=out)
    print(f"load average before {report['load_before']}, after {report['load_after']}; "
          f"O3 = {m.get('o3_pipeline')}", file=out)
    print(f"times: median [min-max] of {report['settings']['repeat']} runs after {report['settings']['warmup']} "
          f"warm-up; goals judged on median CPU time", file=out)
    res = report["results"]
    if res.get("ir"):
        print("\n== IR (bench_ir)", file=out)
        bench_ir.print_table(res["ir"], out)
    if res.get("nesting"):
        print("\n== nested scopes (bench_nesting)", file=out)
        bench_nesting.print_table(res["nesting"], out)
    if res.get("passes"):
        print("\n== passes (bench_passes)", file=out)
        print(f"{'case':<14}{'size':>9}{'cpu median':>12}{'min':>11}{'max':>11}{'wall median':>13}{'goal':>10}",
              file=out)
        for r in res["passes"]:
            c = r["cpu"]
            print(f"{r['case']:<14}{r['size']:>9}{fmt_seconds(c['median']):>12}{fmt_seconds(c['min']):>11}"
                  f"{fmt_seconds(c['max']):>11}{fmt_seconds(r['wall']['median']):>13}"
                  f"{fmt_seconds(r.get('goal_s', 0)):>10}  {'yes' if r.get('meets_goal') else 'NO'}", file=out)
    if res.get("scaling"):
        print("\n== scaling (bench_scaling)", file=out)
        bench_scaling.print_table(res["scaling"], out)
        goals = report.get("goals_1m")
        if goals:
            print("\n1M-node goals (O3 CPU <= 15 s, peak RSS <= 2048 MB, per-node growth <= 1.3):", file=out)
            for g in goals:
                gca = "" if g.get("gc_after_s") is None else f", then gc {fmt_seconds(g['gc_after_s'])}"
                print(f"  {g['family']:<6} O3 {fmt_seconds(g['cpu_s'])} cpu ({fmt_seconds(g['wall_s'])} wall{gca}), "
                      f"peak {g['peak_rss_mb']:.0f} MB, growth {g['growth']}: "
                      f"{'ok' if g['meets_goal'] else 'MISSED'}", file=out)
    for key in ("passmgr", "models", "instruments"):
        e = res.get(key)
        if not e:
            continue
        print(f"\n== {key} ({e['script']})", file=out)
        if "skipped" in e:
            print(f"skipped: {e['skipped']}", file=out)
            continue
        if e.get("stdout"):
            print(e["stdout"].rstrip()[-4000:], file=out)
        if e.get("error"):
            print(f"ERROR: {e['error'].splitlines()[-1] if e['error'] else ''}", file=out)
    if res.get("peers"):
        print(f"\n== peers {report.get('peer_versions')}", file=out)
        peers.print_table(res["peers"], out)
    if res.get("onnx"):
        e = res["onnx"]
        print(f"\n== ONNX models end to end (bench_onnx) {e.get('versions', '')}", file=out)
        if "rows" in e:
            bench_onnx.print_table(e["rows"], out)
        else:
            print(e.get("skipped") or f"ERROR: {e.get('error')}", file=out)


def goals_1m(scaling: list) -> list:
    """The 1M-node O3 goals for chain and dag, from the scaling results."""
    growth = {(g["family"], g["case"]): g for g in bench_scaling.growth(scaling)}
    rows = []
    for r in scaling:
        if r.get("case") == "O3" and r.get("size", 0) >= 1_000_000 and "error" not in r:
            g = growth.get((r["family"], "O3"))
            ok = (r["cpu"]["median"] <= bench_scaling.GOAL_1M_SECONDS
                  and r["peak_rss_mb"] <= bench_scaling.GOAL_1M_PEAK_MB and (g is None or g["meets_goal"]))
            rows.append({"family": r["family"], "cpu_s": r["cpu"]["median"], "wall_s": r["wall"]["median"],
                         "gc_after_s": r.get("gc_after", {}).get("median"),
                         "peak_rss_mb": r["peak_rss_mb"], "growth": None if g is None else round(g["ratio"], 2),
                         "meets_goal": ok})
    return rows


def _ms(s: float) -> str:
    return fmt_seconds(s).replace(" ", "\u00a0")


def markdown(report: dict) -> str:
    """The report's tables in Markdown (what docs/performance.md shows)."""
    lines: list = []
    res = report["results"]
    m = report["machine"]
    lines += [f"Machine: {m.get('cpu_model')}, {m.get('cores')} logical cores, {m.get('memory_gb')} GB, "
              f"Python {m.get('python')} ({m.get('platform')}); load average {report['load_before']} before, "
              f"{report['load_after']} after; {report['settings']['repeat']} timed runs after "
              f"{report['settings']['warmup']} warm-up (at 1M nodes: O3 as often, each pass alone once; warm-ups on 300 nodes); "
              f"-O3 = `{m.get('o3_pipeline')}`.", ""]
    if res.get("ir"):
        lines += ["### IR (`bench_ir.py`)", "",
                  "| case | size | CPU median | CPU min–max | wall median | goal | met |", "|---|---:|---:|---:|---:|---:|---|"]
        for r in res["ir"]:
            if r["case"] == "memory_per_node":
                lines.append(f"| memory per node | {r['size']:,} | {r['typed_bytes_per_node']:.0f} B (typed), "
                             f"{r['untyped_bytes_per_node']:.0f} B (untyped) | | | 1024 B | "
                             f"{'yes' if r['meets_goal'] else '**no**'} |")
                continue
            c = r["cpu"]
            lines.append(f"| {r['case']} | {r['size']:,} | {_ms(c['median'])} | {_ms(c['min'])}–{_ms(c['max'])} | "
                         f"{_ms(r['wall']['median'])} | {_ms(r['goal_s'])} | {'yes' if r['meets_goal'] else '**no**'} |")
        lines.append("")
    if res.get("nesting"):
        lines += ["### Nested scopes (`bench_nesting.py`)", "",
                  "| shape | depth | output chars | print CPU | parse CPU |", "|---|---:|---:|---:|---:|"]
        slopes = []
        for r in res["nesting"]:
            if "slope_print" in r:
                slopes.append(f"{r['case']}: print {r['slope_print']:.2f}, parse {r['slope_parse']:.2f}, "
                              f"output {r['slope_output']:.2f} ({'met' if r['meets_goal'] else '**not met**'})")
                continue
            lines.append(f"| {r['case']} | {r['depth']:,} | {r['output_chars']:,} | "
                         f"{_ms(r['print']['cpu']['median'])} | {_ms(r['parse']['cpu']['median'])} |")
        lines += ["", "Log-log slopes against depth (goal ≤ 1.1): " + "; ".join(slopes) + ".", ""]
    if res.get("scaling"):
        rows = [r for r in res["scaling"] if "error" not in r]
        sizes = sorted({r["size"] for r in rows})
        lines += ["### Scaling (`bench_scaling.py`)", "",
                  "CPU median per case (µs per node in brackets); for O3 also the peak RSS and the "
                  "CPU time of a full `gc.collect()` right after the run (the collection work the "
                  "paused collector leaves for later; an upper bound):", "",
                  "| family | case | " + " | ".join(f"{s:,}" for s in sizes) + " |",
                  "|---|---|" + "---:|" * len(sizes)]
        by = {(r["family"], r["case"], r["size"]): r for r in rows}
        for family in dict.fromkeys(r["family"] for r in rows):
            for case in dict.fromkeys(r["case"] for r in rows if r["family"] == family):
                cells = []
                for s in sizes:
                    r = by.get((family, case, s))
                    if r is None:
                        cells.append("")
                        continue
                    cell = f"{_ms(r['cpu']['median'])} ({r['cpu_per_node_us']:.2f})"
                    if case == "O3":
                        cell += f", {r['peak_rss_mb']:.0f} MB"
                        if "gc_after" in r:
                            cell += f", gc {_ms(r['gc_after']['median'])}"
                    cells.append(cell)
                lines.append(f"| {family} | {case} | " + " | ".join(cells) + " |")
        errors = [r for r in res["scaling"] if "error" in r]
        for r in errors:
            lines.append(f"\nerror: {r['family']} {r['size']}: {r['error'].splitlines()[-1]}")
        lines.append("")
        g = bench_scaling.growth(rows)
        if g:
            lines += ["CPU time per node at the largest size over that at 10k (goal ≤ 1.3):", "",
                      "| family | case | µs/node at 10k | ratio largest/10k |", "|---|---|---:|---:|"]
            per10k = {(r["family"], r["case"]): r["cpu_per_node_us"] for r in rows if r["size"] == 10_000}
            for x in g:
                flag = "" if x["meets_goal"] else " **(> 1.3)**"
                lines.append(f"| {x['family']} | {x['case']} | {per10k[(x['family'], x['case'])]:.2f} | "
                             f"{x['ratio']:.2f} ({x['to']:,}){flag} |")
            lines.append("")
    if res.get("peers"):
        versions = ", ".join(f"{k} {v}" for k, v in (report.get("peer_versions") or {}).items())
        lines += [f"### Peers (`peers.py`; {versions})", "",
                  "| family | size | pass | passhost CPU | xDSL CPU (ratio) | TVM Relax CPU (ratio) |",
                  "|---|---:|---|---:|---:|---:|"]
        for r in res["peers"]:
            cells = []
            for peer in ("xdsl", "tvm"):
                p = r["peers"].get(peer, {})
                cells.append(f"{_ms(p['cpu']['median'])} (×{p['ratio']:.2f})" if "cpu" in p
                             else (p.get("skipped") or p.get("error") or "—"))
            lines.append(f"| {r['family']} | {r['size']:,} | {r['case']} | {_ms(r['passhost']['cpu']['median'])} | "
                         + " | ".join(cells) + " |")
        lines.append("")
    if res.get("onnx", {}).get("rows"):
        e = res["onnx"]
        versions = ", ".join(f"{k} {v}" for k, v in e["versions"].items())
        lines += [f"### ONNX models end to end (`bench_onnx.py`; {versions})", "", bench_onnx.markdown(e["rows"]), ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="tiny sizes, one run each, in one process")
    size.add_argument("--full", action="store_true", help="also the 1M-node scaling cases (chain, dag)")
    ap.add_argument("--only", default=",".join(BENCHES), help=f"comma-separated subset of {', '.join(BENCHES)}")
    ap.add_argument("--repeat", type=int, default=None, help="timed runs per case (default 3; 1 with --quick)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed runs first (default 1; 0 with --quick)")
    ap.add_argument("--families", default=",".join(bench_scaling.FAMILIES), help="scaling families")
    ap.add_argument("--out", default=str(HERE / "results"), help="directory for the JSON (default benchmarks/results)")
    ap.add_argument("--markdown", metavar="JSON", help="print the tables of a saved report as Markdown and exit")
    args = ap.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())))
        return 0
    only = [b for b in args.only.split(",") if b]
    bad = [b for b in only if b not in BENCHES]
    if bad:
        ap.error(f"unknown benchmark {bad[0]!r}; benchmarks: {', '.join(BENCHES)}")
    repeat = args.repeat if args.repeat is not None else (1 if args.quick else 3)
    warmup = args.warmup if args.warmup is not None else (0 if args.quick else 1)
    families = [f for f in args.families.split(",") if f]

    load_before = [round(x, 2) for x in os.getloadavg()]
    started = _dt.datetime.now(_dt.timezone.utc)
    results: dict = {}
    report = {"started": started.isoformat(timespec="seconds"), "load_before": load_before,
              "settings": {"quick": args.quick, "full": args.full, "repeat": repeat, "warmup": warmup,
                           "only": only, "families": families},
              "machine": machine_info(), "results": results}
    t0, c0 = time.perf_counter(), time.process_time()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t0:7.1f}s] {msg}", file=sys.stderr, flush=True)

    if "ir" in only:
        log("ir")
        results["ir"] = (bench_ir.run(n=1_000, big=10_000, repeat=repeat, warmup=warmup) if args.quick
                         else bench_ir.run(repeat=repeat, warmup=warmup))
    if "nesting" in only:
        log("nesting")
        results["nesting"] = (bench_nesting.run((250, 1_000), repeat=1, warmup=0) if args.quick
                              else bench_nesting.run(repeat=repeat, warmup=warmup))
    if "passes" in only:
        log("passes")
        results["passes"] = run_passes(1_000 if args.quick else 100_000, repeat, warmup)
    if "scaling" in only:
        scaling: list = []
        sizes = (300, 1_000) if args.quick else (1_000, 10_000, 100_000)
        for family in families:
            for n in sizes:
                log(f"scaling {family} {n}")
                if args.quick:
                    scaling += bench_scaling.run_one(family, n, (), repeat, warmup)
                else:
                    scaling += bench_scaling.run_isolated(family, n, (), repeat, warmup)
        if args.full:
            for family in ("chain", "dag"):
                if family in families:
                    # the goal case, O3, gets the usual repeats (first in a fresh process, so
                    # its peak RSS is the real one); each pass alone runs once at 1M
                    log(f"scaling {family} 1000000 O3")
                    scaling += bench_scaling.run_isolated(family, 1_000_000, ("O3",), repeat, 1)
                    log(f"scaling {family} 1000000 passes")
                    others = tuple(c for c in bench_scaling.case_names() if c != "O3")
                    scaling += bench_scaling.run_isolated(family, 1_000_000, others, 1, 1)
        results["scaling"] = scaling
        report["goals_1m"] = goals_1m(scaling)
    for key in ("passmgr", "models", "instruments"):
        if key in only:
            log(key)
            results[key] = run_script(key, args.quick)
    if "peers" in only:
        log("peers")
        if args.quick:
            report["peer_versions"] = peers.peer_versions(("xdsl",))
            results["peers"] = peers.run((300,), ("chain", "dupdead"), repeat, warmup,
                                         tuple(p for p in ("xdsl",) if peers.xdsl_available()))
        else:
            report["peer_versions"] = peers.peer_versions()
            rows = peers.run((1_000, 10_000), repeat=repeat, warmup=warmup)
            rows += peers.run((100_000,), ("chain", "dupdead"), repeat=1, warmup=0)
            results["peers"] = rows
    if "onnx" in only:
        log("onnx")
        results["onnx"] = run_onnx(args.quick, repeat, warmup)
    report["total_wall_s"] = time.perf_counter() - t0
    report["total_cpu_s"] = time.process_time() - c0 + _child_cpu()
    report["load_after"] = [round(x, 2) for x in os.getloadavg()]

    print_report(report)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{started.strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps(report, indent=1, default=str))
    print(f"\nwrote {path} (total {report['total_wall_s']:.0f} s wall, {report['total_cpu_s']:.0f} s cpu)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
