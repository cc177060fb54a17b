"""Paired A/B of one ONNX model end to end: this tree against the tree at a git revision.

For changes that should make ``bench_onnx``'s passhost row faster. The row itself cannot
tell a 5 % change: on a shared virtual machine the CPU's speed drifts by up to half
within seconds (the same loop took 35 to 53 ms, one run every half second), and two
children timed a few seconds apart see different machines. Here both sides run at once,
each in a child process of its own (``passhost/``, ``plugins/`` and ``benchmarks/`` of
``REV`` from ``git archive`` for the old side; the working tree for the new), warmed up,
and the parent asks them for one run each in turn, alternating which goes first. A pair
of runs is a fraction of a second apart, so the drift cancels in the pair's ratio; the
median of those ratios is the result, with its quartiles. (Run against ``--rev HEAD``
itself, it gives the noise: about 1.0, quartiles ±0.1.)

Each run is ``bench_onnx``'s: ``ir.load`` of a fresh read of the file, ``-O3``, and
``ir.save``, timed in CPU seconds, the phases in wall seconds. With ``--export`` a run is
the export alone: each child loads and optimises the model once, and a run is one
``export_parts`` of it (CPU seconds), for changes to the exporter, whose few milliseconds
the whole run drowns.

Usage::

    python benchmarks/ab_onnx.py --rev HEAD~2 [--model densenet121] [--pairs 60]
    python benchmarks/ab_onnx.py --rev 462d727 --export --model path/to/model.onnx --pairs 31
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import git_tree  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

#: what a side's child runs: its tree first on sys.path (the host, then every plugin
#: package over the installed ones), one warm-up, then one timed run per request
_CHILD = r"""
import glob, json, os, sys
root = sys.argv[1]
sys.path[:0] = [root] + sorted(glob.glob(os.path.join(root, "plugins", "*")))
import passhost
if not passhost.__file__.startswith(root):
    raise SystemExit(f"passhost came from {passhost.__file__}, not from {root}")
from benchmarks.bench_onnx import timed_run
src, dst = sys.argv[2], sys.argv[3]
timed_run("passhost", src, dst)
print("ready", flush=True)
for _ in sys.stdin:
    r = timed_run("passhost", src, dst)
    print(json.dumps([r["cpu"], r["phases"]["load"], r["phases"]["optimize"], r["phases"]["save"]]), flush=True)
"""

PHASES = ("load", "optimise", "save")

#: the child of an ``--export`` run: the model loaded and optimised once, then one timed
#: ``export_parts`` per request
_CHILD_EXPORT = r"""
import gc, glob, json, os, sys, time
root = sys.argv[1]
sys.path[:0] = [root] + sorted(glob.glob(os.path.join(root, "plugins", "*")))
import passhost
if not passhost.__file__.startswith(root):
    raise SystemExit(f"passhost came from {passhost.__file__}, not from {root}")
from passhost import ir, transform
from passhost_onnx.exporter import export_parts
mod = ir.load(sys.argv[2])
with transform.PassContext(opt_level=3):
    mod = ir.infer_type(passhost.default_pipeline(3)(mod))
export_parts(mod)
print("ready", flush=True)
for _ in sys.stdin:
    gc.collect()
    start = time.process_time()
    export_parts(mod)
    print(json.dumps([time.process_time() - start]), flush=True)
"""


def extract(rev: str, into: str) -> str:
    """``passhost/``, ``plugins/`` and ``benchmarks/`` of ``rev`` in the directory ``into``."""
    return git_tree(rev, ("passhost", "plugins", "benchmarks"), into, str(ROOT))


def _start(root: str, src: str, dst: str, child: str = _CHILD) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", child, root, src, dst], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=tempfile.gettempdir())
    if proc.stdout.readline().strip() != "ready":
        proc.kill()
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()
        raise SystemExit(f"the child for {root} failed to start (see its error above)")
    return proc


def pairs(old_root: str, new_root: str, src: str, n: int, workdir: str, export: bool = False) -> dict:
    """``{"old": rows, "new": rows}``, ``n`` rows a side taken in alternating pairs; a row is
    ``[cpu, load, optimise, save]`` in seconds (``export``: ``[cpu]`` of the export alone)."""
    child = _CHILD_EXPORT if export else _CHILD
    procs = {tag: _start(root, src, os.path.join(workdir, f"out_{tag}.onnx"), child)
             for tag, root in (("old", old_root), ("new", new_root))}
    res: dict = {"old": [], "new": []}
    try:
        for i in range(n):
            for tag in (("old", "new") if i % 2 == 0 else ("new", "old")):
                proc = procs[tag]
                proc.stdin.write("run\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
                if not line:
                    raise SystemExit(f"the {tag} child stopped (see its error above)")
                res[tag].append(json.loads(line))
    finally:
        for proc in procs.values():
            proc.stdin.close()
            proc.wait()
            proc.stdout.close()
    return res


def _quartiles(values: list) -> tuple:
    v = sorted(values)
    return v[(len(v) - 1) // 4], statistics.median(v), v[3 * (len(v) - 1) // 4]


def report(res: dict, rev: str, model: str, out=sys.stdout) -> dict:
    """Print the medians of each side and the paired ratios; returns the ratios' medians."""
    phases = PHASES[:len(res["new"][0]) - 1]  # (none for a run of the export alone)
    print(f"{model}: {rev} (old) vs the working tree (new), {len(res['new'])} alternating pairs; "
          "CPU ms of the whole run, wall ms of each phase (medians)", file=out)
    print(f"{'side':5s} {'cpu':>8s} " + " ".join(f"{p:>9s}" for p in phases), file=out)
    for tag in ("old", "new"):
        cols = list(zip(*res[tag]))
        print(f"{tag:5s} {statistics.median(cols[0]) * 1e3:8.1f} "
              + " ".join(f"{statistics.median(c) * 1e3:9.1f}" for c in cols[1:]), file=out)
    medians = {}
    for k, label in enumerate(("cpu",) + phases):
        lo, mid, hi = _quartiles([b[k] / a[k] for a, b in zip(res["old"], res["new"])])
        medians[label] = mid
        print(f"new/old {label:9s} {mid:.3f}  (quartiles {lo:.3f}-{hi:.3f})", file=out)
    return medians


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", required=True, help="the git revision to compare against (the old side)")
    ap.add_argument("--model", default="densenet121",
                    help="a zoo model of bench_onnx (default densenet121), or an .onnx file")
    ap.add_argument("--pairs", type=int, default=60)
    ap.add_argument("--export", action="store_true", help="time the export alone (export_parts)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from benchmarks.bench_onnx import prepare

    with tempfile.TemporaryDirectory() as tmp:
        if args.model.endswith(".onnx") and not os.path.isfile(args.model):
            raise SystemExit(f"no model file {args.model}")
        src = os.path.abspath(args.model) if args.model.endswith(".onnx") else prepare(args.model, tmp)["path"]
        old = extract(args.rev, os.path.join(tmp, "old"))
        report(pairs(old, str(ROOT), src, args.pairs, tmp, args.export), args.rev, args.model)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
