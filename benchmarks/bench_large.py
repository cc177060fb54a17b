"""Models larger than memory, end to end, beside the peers (issue 35).

Each model is built under the system's temporary directory from seeded random weights
(:mod:`benchmarks.large_models`), then each tool takes it from file to optimised file in
a fresh process of its own, one at a time: passhost (``passhost run MODEL -O3 -o OUT``),
onnxslim, onnxscript's optimizer (over onnx-ir, which maps external data lazily) and
onnx-simplifier. ``--repeat`` rounds (3) each time ``cp`` and run every tool once, the
order rotating from round to round, and the medians are compared: on a shared machine
the disk and the CPU drift by 2x within minutes. A tool's peak RSS is its ``VmHWM`` (the
high-water mark of its resident set), read every 50 ms while it runs; not ``ru_maxrss``,
which Linux raises at ``exec`` to the resident set of the process that forked the child (a
pytest worker of a few hundred megabytes, say). Each tool is capped so that a shared machine neither swaps nor has
its other processes killed: a watchdog kills a tool whose resident set passes ``--limit``
(12 GB by default) and the row says ``out of memory (cap)``; behind it, the tool's
private memory (``RLIMIT_DATA``: heap and anonymous maps, not read-only file maps) is
limited to 2 GB more, so an allocation too fast for the watchdog fails in the tool
instead. The floor is ``cp`` of the weight files to the same disk, timed in the same run
before each round and after the last, alone and with the ``sync`` that makes the copies durable.
passhost fsyncs its output and the peers do not, so the disk is synced before each tool
and the ``sync`` right after it is timed too (``then sync``: the writing a tool left
for the kernel to finish).

The outputs are compared with the original in onnxruntime (optimisations off): the 3 GB
decoder itself, and for the 6 GB models a smaller sibling built by the same generator.
Everything is deleted at the end (``--keep`` leaves the directory).

Usage::

    python benchmarks/bench_large.py                          # the three models of issue 35
    python benchmarks/bench_large.py --scale 0.05 --tools passhost,onnxscript   # a quick look
    python benchmarks/bench_large.py --models matmul-6g --json out.json
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from benchmarks import large_models  # noqa: E402

#: name -> (generator, bytes of weights, layout)
MODELS = {
    "decoder-3g": ("decoder", 3e9, "one"),
    "matmul-6g": ("matmul", 6e9, "one"),
    "matmul-6g-inline": ("matmul", 6e9, "inline"),
}
TOOLS = ("passhost", "onnxslim", "onnxscript", "onnxsim")
#: the goals: peak RSS <= RSS_SHARE * weights + RSS_FIXED; wall <= PEER_SHARE * the fastest peer
#: that succeeds and <= CP_FACTOR * cp
RSS_SHARE, RSS_FIXED, PEER_SHARE, CP_FACTOR = 0.25, 300e6, 0.5, 2.0

#: what a peer's child runs: load, optimise, save with external data (one file) as passhost does
_PEERS = {
    "onnxslim": """
import onnxslim
onnxslim.slim(src, dst, save_as_external_data=True)
""",
    "onnxscript": """
import onnx_ir, onnxscript.optimizer
model = onnx_ir.load(src)
model = onnxscript.optimizer.optimize(model)
onnx_ir.save(model, dst, external_data=os.path.basename(dst) + ".data")
""",
    "onnxsim": """
import onnx, onnxsim
model, ok = onnxsim.simplify(src)
if not ok:
    raise SystemExit("onnxsim's own check failed")
onnx.save(model, dst, save_as_external_data=True, location=os.path.basename(dst) + ".data")
""",
}


def _command(tool: str, src: str, dst: str) -> list:
    if tool == "passhost":
        return [sys.executable, "-m", "passhost", "run", src, "-O3", "-o", dst, "--no-summary"]
    code = "import os, sys\nsrc, dst = sys.argv[1], sys.argv[2]\n" + _PEERS[tool]
    return [sys.executable, "-c", code, src, dst]


def _status_kb(pid: int, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


#: the private memory a capped child may have beyond the watchdog's limit (RLIMIT_DATA)
_DATA_MARGIN = 2e9
_OOM_WORDS = ("MemoryError", "bad_alloc", "Cannot allocate memory", "Failed to allocate", "out of memory")


def _cap(limit: float):
    """A ``preexec_fn`` limiting the child's private memory to ``limit`` + the margin."""
    if limit == float("inf"):
        return None
    data = int(limit + _DATA_MARGIN)

    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_DATA, (data, data))
    return preexec


def run_child(cmd: list, limit: float, timeout: float, cwd: str, capture: bool = False) -> dict:
    """Run ``cmd``; ``{ok, wall, peak_rss, error}``. Peak RSS is the child's ``VmHWM``, read
    while it runs (``ru_maxrss`` only for a child gone before the first reading);
    a child whose resident set passes ``limit`` bytes is killed, and one whose allocation
    fails at the ``RLIMIT_DATA`` behind it fails: both are ``out of memory (cap)``. With
    ``capture`` the row has the child's ``stdout``. Its output goes to files, never pipes
    (a chatty child would fill a pipe nobody reads while the watchdog polls)."""
    err_file = tempfile.TemporaryFile()
    out_file = tempfile.TemporaryFile() if capture else subprocess.DEVNULL
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=out_file, stderr=err_file, cwd=cwd, start_new_session=True,
                            preexec_fn=_cap(limit))
    killed = None
    hwm = 0
    try:
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            rss = _status_kb(proc.pid, "VmRSS") * 1024
            hwm = max(hwm, _status_kb(proc.pid, "VmHWM") * 1024)
            elapsed = time.perf_counter() - t0
            if killed is None and (rss > limit or elapsed > timeout):
                killed = (f"out of memory (cap): killed at {rss / 1e9:.1f} GB resident (cap {limit / 1e9:.1f} GB)"
                          if rss > limit else f"timed out after {timeout:.0f} s")
                os.killpg(proc.pid, signal.SIGKILL)
            time.sleep(0.05)
    except BaseException:  # the benchmark is stopping: so is the tool (in a session of its own)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = _drain(err_file).strip()
    out = _drain(out_file) if capture else None
    peak = hwm or usage.ru_maxrss * 1024
    if killed or proc.returncode != 0:
        last = [line for line in err.splitlines() if line.strip()][-1:] or [f"exit {proc.returncode}"]
        error = killed or last[0][:300]
        if not killed and (any(w in err for w in _OOM_WORDS) or proc.returncode == -signal.SIGKILL):
            error = f"out of memory (cap): {error}"
        return {"ok": False, "wall": wall, "peak_rss": peak, "error": error, "stdout": out}
    return {"ok": True, "wall": wall, "peak_rss": peak, "error": None, "stdout": out}


def _drain(f) -> str:
    f.seek(0)
    text = f.read().decode("utf-8", "replace")
    f.close()
    return text


def build(name: str, directory: str, scale: float = 1.0, sibling: bool = False) -> dict:
    """Build model ``name`` (or its small sibling) in ``directory``: ``{path, weight_bytes,
    weight_files, feeds}``."""
    kind, size, layout = MODELS[name]
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{name}{'-sibling' if sibling else ''}.onnx")
    if kind == "decoder":
        dims = large_models.decoder_sizes(size * scale)
        nbytes = large_models.decoder(path, layout=layout, **dims)
        feeds = {"input_ids": (np.arange(8, dtype=np.int64)[None] * 997) % 32000}
    else:
        width = 8192 if scale >= 0.25 else 1024
        layers = 2 if sibling else large_models.matmul_sizes(size * scale, width)
        nbytes = large_models.matmul_stack(path, layers=layers, width=width, layout=layout)
        feeds = {"x": np.random.default_rng(1).standard_normal((4, width)).astype(np.float32)}
    files = [path] if layout == "inline" else [os.path.join(directory, f) for f in os.listdir(directory)
                                                if f.startswith(os.path.basename(path) + ".")]
    return {"path": path, "weight_bytes": nbytes, "weight_files": files, "feeds": feeds}


def time_cp(files: list, directory: str) -> tuple:
    """Seconds ``cp`` takes to copy ``files`` into ``directory``, and with the ``sync``
    after it that makes the copies durable (passhost's output is fsynced); the copies
    are deleted."""
    out = os.path.join(directory, "cp")
    os.makedirs(out, exist_ok=True)
    subprocess.run(["sync"], check=True)
    t0 = time.perf_counter()
    subprocess.run(["cp", *files, out], check=True)
    took = time.perf_counter() - t0
    subprocess.run(["sync"], check=True)
    synced = time.perf_counter() - t0
    shutil.rmtree(out)
    return took, synced


_ORT = """
import json, sys
import numpy as np
import onnxruntime as ort
feeds = {k: np.load(v) for k, v in json.loads(sys.argv[3]).items()}
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
outs = [ort.InferenceSession(p, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0].astype(np.float64)
        for p in sys.argv[1:3]]
print(json.dumps([float(np.abs(outs[0] - outs[1]).max()), float(np.abs(outs[0]).max())]))
"""


def ort_difference(original: str, optimised: str, feeds: dict, directory: str,
                   limit: float = float("inf")) -> Optional[list]:
    """``[max |difference|, max |output|]`` of the two models' first outputs in onnxruntime,
    in a child process under the same memory cap as the tools; ``None`` when onnxruntime
    fails."""
    paths = {}
    for k, v in feeds.items():
        paths[k] = os.path.join(directory, f"feed_{k}.npy")
        np.save(paths[k], v)
    r = run_child([sys.executable, "-c", _ORT, original, optimised, json.dumps(paths)], limit, 3600, directory,
                  capture=True)
    for p in paths.values():
        os.unlink(p)
    if not r["ok"]:
        print(f"  onnxruntime failed: {r['error']}", file=sys.stderr)
        return None
    return json.loads(r["stdout"].strip().splitlines()[-1])


def _du(directory: str) -> int:
    return sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))


def _one_run(tool: str, model: dict, root: str, limit: float, timeout: float, check: bool) -> dict:
    """One run of ``tool`` on ``model`` in a fresh process (the disk synced before it, the
    ``sync`` after it timed), its output compared in onnxruntime if ``check``, then deleted."""
    out_dir = os.path.join(root, "out", tool)
    os.makedirs(out_dir, exist_ok=True)
    dst = os.path.join(out_dir, "out.onnx")
    os.sync()
    r = run_child(_command(tool, model["path"], dst), limit, timeout, out_dir)
    t0 = time.perf_counter()
    os.sync()
    r["sync_after"] = time.perf_counter() - t0
    r["output_bytes"] = _du(out_dir)
    if r["ok"] and check:
        r["ort"] = ort_difference(model["path"], dst, model["feeds"], root, limit)
    shutil.rmtree(out_dir)
    return r


def _summary(rows: list) -> dict:
    """A tool's runs as one row: the median run (by wall time) with every wall time in
    ``walls``, the largest peak RSS, the median sync after it; a failed run is the row."""
    failed = [r for r in rows if not r["ok"]]
    out = dict(failed[0] if failed else sorted(rows, key=lambda r: r["wall"])[len(rows) // 2])
    out.update(walls=[r["wall"] for r in rows], ort=rows[0].get("ort"), peak_rss=max(r["peak_rss"] for r in rows),
               sync_after=statistics.median(r["sync_after"] for r in rows))
    return out


def bench_model(name: str, root: str, tools: tuple, scale: float, limit: float, timeout: float,
                repeat: int = 3) -> dict:
    """Build ``name``; then ``repeat`` rounds, each timing cp and running every tool once,
    the tools' order rotating from round to round (the disk and CPU of a shared machine
    drift: each tool sees each part of the run), and a last cp. A tool that fails is not
    run again. passhost's first output is compared with the original in onnxruntime (the
    decoder's; a MatMul model's sibling); the model's row."""
    directory = os.path.join(root, name)
    t0 = time.perf_counter()
    model = build(name, directory, scale)
    print(f"{name}: {model['weight_bytes'] / 1e9:.2f} GB of weights built in {time.perf_counter() - t0:.0f} s",
          file=sys.stderr)
    row = {"model": name, "weight_bytes": model["weight_bytes"], "cp": [], "cp_sync": [], "tools": {}}
    runs: dict = {tool: [] for tool in tools}
    for i in range(repeat + 1):
        took, synced = time_cp(model["weight_files"], root)
        row["cp"].append(took)
        row["cp_sync"].append(synced)
        if i == repeat:
            break
        for tool in tools[i % len(tools):] + tools[:i % len(tools)]:
            if runs[tool] and not runs[tool][-1]["ok"]:
                continue
            check = tool == "passhost" and not runs[tool] and MODELS[name][0] != "matmul"
            runs[tool].append(_one_run(tool, model, root, limit, timeout, check))
    for tool in tools:
        row["tools"][tool] = _summary(runs[tool])
        print(f"  {tool}: {_line(row['tools'][tool])}", file=sys.stderr)
    shutil.rmtree(directory)
    if MODELS[name][0] == "matmul" and "passhost" in tools:
        row["sibling"] = _sibling_check(name, root, scale, limit)
    return row


def _sibling_check(name: str, root: str, scale: float, limit: float) -> dict:
    """passhost on the 2-layer sibling of a MatMul model, compared in onnxruntime."""
    directory = os.path.join(root, name + "-sibling")
    sib = build(name, directory, scale, sibling=True)
    dst = os.path.join(directory, "out.onnx")
    r = run_child(_command("passhost", sib["path"], dst), limit, 3600, directory)
    diff = ort_difference(sib["path"], dst, sib["feeds"], directory, limit) if r["ok"] else None
    shutil.rmtree(directory)
    return {"weight_bytes": sib["weight_bytes"], "ok": r["ok"], "error": r["error"], "ort": diff}


def _line(r: dict) -> str:
    if not r["ok"]:
        return f"FAILED after {r['wall']:.1f} s ({r['error']}), peak RSS {r['peak_rss'] / 1e9:.2f} GB"
    ort = f", onnxruntime max |diff| {r['ort'][0]:.3g}" if r.get("ort") else ""
    runs = f" (runs {', '.join(f'{w:.1f}' for w in r['walls'])})" if len(r.get("walls", ())) > 1 else ""
    return (f"{r['wall']:.1f} s{runs} then sync {r['sync_after']:.1f} s, peak RSS {r['peak_rss'] / 1e9:.2f} GB, "
            f"wrote {r['output_bytes'] / 1e9:.2f} GB{ort}")


def judge(row: dict) -> dict:
    """The goals for one model row: RSS, against peers, against cp (the copy alone, and
    with the sync that makes it durable as passhost's fsynced output is); ``None`` where
    there is nothing to compare with (no peer succeeded)."""
    mine = row["tools"].get("passhost")
    if not mine or not mine["ok"]:
        return {"rss": False, "peers": False, "cp": False, "cp_sync": False}
    peers = [r["wall"] for t, r in row["tools"].items() if t != "passhost" and r["ok"]]
    return {"rss": mine["peak_rss"] <= RSS_SHARE * row["weight_bytes"] + RSS_FIXED,
            "peers": (mine["wall"] <= PEER_SHARE * min(peers)) if peers else None,
            "cp": mine["wall"] <= CP_FACTOR * statistics.median(row["cp"]),
            "cp_sync": mine["wall"] <= CP_FACTOR * statistics.median(row["cp_sync"])}


def _ort_cell(diff: list) -> str:
    return f"ORT max diff {diff[0]:.2g} (of max |y| {diff[1]:.3g})"


def goals_markdown(rows: list) -> str:
    """One line per model: each goal's bound, passhost's figure, met or not."""
    lines = ["| model | peak RSS (bound) | wall / fastest peer (goal 0.5) | the same, each + its sync | "
             "wall / cp (goal 2) | wall / cp + sync (goal 2) |", "|---|---|---|---|---|---|"]
    for row in rows:
        mine = row["tools"].get("passhost")
        if not mine or not mine["ok"]:
            lines.append(f"| {row['model']} | passhost {'failed' if mine else 'not run'} | | | | |")
            continue
        g = row["goals"]
        yes = {True: "met", False: "**not met**", None: "no peer succeeded"}
        bound = RSS_SHARE * row["weight_bytes"] + RSS_FIXED
        peers = {t: r["wall"] for t, r in row["tools"].items() if t != "passhost" and r["ok"]}
        fastest = min(peers, key=peers.get) if peers else None
        vs_peer = f"{mine['wall'] / peers[fastest]:.2f} ({fastest}) {yes[g['peers']]}" if fastest else yes[None]
        durable = {t: r["wall"] + r["sync_after"] for t, r in row["tools"].items() if t != "passhost" and r["ok"]}
        vs_durable = (f"{(mine['wall'] + mine['sync_after']) / min(durable.values()):.2f} "
                      f"({min(durable, key=durable.get)})" if durable else "")
        lines.append(f"| {row['model']} | {mine['peak_rss'] / 1e9:.2f} GB ({bound / 1e9:.2f} GB) {yes[g['rss']]} | "
                     f"{vs_peer} | {vs_durable} | {mine['wall'] / statistics.median(row['cp']):.2f} {yes[g['cp']]} | "
                     f"{mine['wall'] / statistics.median(row['cp_sync']):.2f} {yes[g['cp_sync']]} |")
    return "\n".join(lines)


def markdown(rows: list) -> str:
    lines = ["| model | weights | cp (+ sync) | tool | wall | then sync | peak RSS | result |",
             "|---|---:|---:|---|---:|---:|---:|---|"]
    for row in rows:
        cp = f"{statistics.median(row['cp']):.1f} s ({statistics.median(row['cp_sync']):.1f} s)"
        for tool, r in row["tools"].items():
            result = "ok" if r["ok"] else f"fails: {r['error']}"
            if r.get("ort"):
                result += "; " + _ort_cell(r["ort"])
            lines.append(f"| {row['model']} | {row['weight_bytes'] / 1e9:.2f} GB | {cp} | {tool} | "
                         f"{r['wall']:.1f} s | {r['sync_after']:.1f} s | {r['peak_rss'] / 1e9:.2f} GB | {result} |")
        sib = row.get("sibling")
        if sib:
            diff = _ort_cell(sib["ort"]) if sib.get("ort") else f"fails: {sib['error'] or 'onnxruntime'}"
            lines.append(f"| {row['model']} sibling | {sib['weight_bytes'] / 1e9:.2f} GB | | passhost | | | | {diff} |")
    return "\n".join(lines)


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma list of {', '.join(MODELS)}")
    ap.add_argument("--tools", default=",".join(TOOLS), help=f"comma list of {', '.join(TOOLS)}")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every model's size (0.05: a quick run)")
    ap.add_argument("--limit", type=float, default=None, help="GB of RSS a tool may use before it is killed as "
                    "out of memory (default 12, or what is available now less 3 GB when that is less)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds a tool may take")
    ap.add_argument("--repeat", type=int, default=3, help="rounds: each times cp and runs every tool once, in an "
                    "order that rotates; the medians are compared (a tool that fails runs once)")
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="where the models are built")
    ap.add_argument("--keep", action="store_true", help="leave the built files")
    ap.add_argument("--json", metavar="FILE", help="write the rows as JSON")
    args = ap.parse_args(argv)
    available = _meminfo_kb("MemAvailable") * 1024
    limit = args.limit * 1e9 if args.limit else min(12e9, max(2e9, available - 3e9))
    root = tempfile.mkdtemp(prefix="passhost-bench-large-", dir=args.dir)
    rows = []
    # a benchmark stopped with kill (or a closed terminal) still deletes its gigabytes
    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        for name in args.models.split(","):
            rows.append(bench_model(name, root, tuple(args.tools.split(",")), args.scale, limit, args.timeout,
                                    args.repeat))
            rows[-1]["goals"] = judge(rows[-1])
            print(f"  goals: {rows[-1]['goals']}; cp {', '.join(f'{t:.1f}' for t in rows[-1]['cp'])} s, with sync "
                  f"{', '.join(f'{t:.1f}' for t in rows[-1]['cp_sync'])} s", file=sys.stderr)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(f"cap: {limit / 1e9:.1f} GB resident per tool", file=sys.stderr)
    print(markdown(rows))
    print()
    print(goals_markdown(rows))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=2)
    return 0


def _stop(signum, frame) -> None:
    raise SystemExit(128 + signum)


def _meminfo_kb(key: str) -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
