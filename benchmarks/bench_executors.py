"""The executors side by side (issue 36): one batch of models through the local process
pool (``passhost run MODELS -O3 -o out/ -j 2``) and through a Dask LocalCluster of two
workers (``... --executor dask -j 2``), run as a user runs them: one ``passhost`` process
per run, its wall time from start until its output pipes close (the pool's or the
cluster's start and stop included), and the CPU time of every process it started. The
goal: Dask within 1.2x of ``-j 2`` on a 50-model batch.

Usage::

    python benchmarks/bench_executors.py                        # 50 generated models, 5 rounds
    python benchmarks/bench_executors.py --models squeezenet    # the zoo's SqueezeNet, reseeded 50 times
    python benchmarks/bench_executors.py --count 4 --rounds 1   # tiny (smoke)
    python benchmarks/bench_executors.py --check --json out.json
    python benchmarks/bench_executors.py --running              # also a running 2-worker scheduler

Models (``--models``):

``generated`` (the default)
    ResNet-style stacks of ``--blocks`` residual blocks (Conv 3x3, BatchNormalization,
    Relu, Conv, BatchNormalization, Add, Relu; 8 channels, 16x16), seeded per model:
    ~220 KB files that take ~55 ms of CPU each (read, -O3, write) and the ``fsync`` of
    their output.
``squeezenet``
    the model zoo's SqueezeNet 1.0 (``passhost_onnx.zoo``), reseeded per model: 5 MB
    files that take ~20 ms of CPU each, so fixed costs (starting processes, importing
    passhost and Dask in them, starting the cluster) weigh most: the worst case for a
    cluster.

Each round runs both executors on the same inputs into fresh output directories, in
alternating order, after one untimed warm-up run of each (bytecode cached in the run's
scratch directory, as in an installed passhost; this machine sets
``PYTHONDONTWRITEBYTECODE``); outputs are checked byte for byte against each other. The
report gives each executor's median wall and CPU time, the ratio of the medians and the
median of the rounds' ratios. With ``--running`` a third column, ``dask://`` on a
LocalCluster of two workers started before the rounds (a team's standing cluster: no
cluster start or stop in the timing), shows what the batch itself costs on Dask.

Measured 2026-11-28 (2 cores shared with other sessions; medians of 5 to 9 rounds;
outputs byte-identical in every round). Before: the plugin at c2303d0 (two spawned
workers, each importing Dask and then passhost at its first job; one round trip through
the client per model); after: 3babc22 to f20a1f3 (which starts the fork server 0.06 s
earlier):

=======================================  ===========  ===========  ==============  =============
batch of 50, load average (1 min)        local -j 2   dask -j 2    ratio (paired)  CPU local/dask
=======================================  ===========  ===========  ==============  =============
squeezenet, before, load 3.0-3.9         2.16 s       3.68 s       1.70x (1.66x)   2.15 / 3.46 s
generated, before, load 2.9-3.8          1.95 s       3.01 s       1.54x (1.59x)   3.41 / 4.88 s
squeezenet, after, load 2.9-3.9          2.05 s       2.38 s       1.16x (1.16x)   1.90 / 2.30 s
squeezenet, after, load 3.5-5.1          3.21 s       3.85 s       1.20x (1.20x)   2.09 / 2.65 s
squeezenet, after, load 2.7-2.9          1.14 s       1.56 s       1.37x (1.40x)   1.85 / 2.34 s
generated, after, load 5.1-5.6           5.21 s       5.10 s       0.98x (1.08x)   3.74 / 4.15 s
generated, after, load 3.3-3.6           4.24 s       4.21 s       0.99x (1.17x)   3.59 / 4.09 s
=======================================  ===========  ===========  ==============  =============

On a running scheduler (``--running``, the generated batch at load 5.1-5.6) Dask took 4.24 s,
0.81x of ``-j 2``, which starts its processes every run.

Where ``--executor dask``'s time goes, and what is left (measured with time-stamped
phases, ``-X importtime`` and per-process CPU): the workers are forked from a fork server
that imports Dask, passhost and the plugins once (0.45 s of CPU, instead of each spawned
worker importing Dask and passhost), started before the batch's process imports Dask
(0.17 s) and starts the scheduler; the scheduler gets the batch as one graph and hands a
freed worker the next model itself; the workers' profiler and monitors are off; the fork
server leaves with ``os._exit`` and the batch's process freezes its heap at exit (the
teardown of Dask's modules took 0.5 s and 0.1 s). Left over ``-j 2``: about 0.5 s of CPU
(0.40-0.56 s above: Dask imported twice, 0.35 s; scheduling, ~2 ms a model here and ~2 ms on the worker,
offset by one import of passhost fewer) and on the path to the first model the fork
server's imports plus forking and registering the workers (0.14 s) where ``-j 2`` spawns
two processes that import passhost side by side. That is the floor for SqueezeNet's 50
models: about 0.4 s of wall over a ``-j 2`` run of 1.1-3 s, 1.16-1.4x; the generated batch, whose
``-j 2`` run takes longer, is within 1.2x.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    import resource
except ImportError:  # not on Windows: no CPU times
    resource = None

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import machine_info  # noqa: E402

GOAL_RATIO = 1.2
EXECUTORS = {"local -j 2": ["-j", "2"], "dask -j 2": ["--executor", "dask", "-j", "2"]}


def generated_model(blocks: int, seed: int, channels: int = 8, size: int = 16):
    """A ResNet-style stack of ``blocks`` residual blocks with seeded weights (an onnx ModelProto)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.RandomState(seed)
    nodes, inits = [], []

    def weight(name, array):
        inits.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    x = "input"
    for b in range(blocks):
        skip = x
        for j in range(2):
            p = f"block{b}.conv{j}"
            w = weight(f"{p}.weight", rng.randn(channels, channels, 3, 3) * np.sqrt(0.5 / (channels * 9)))
            nodes.append(helper.make_node("Conv", [x, w], [f"{p}.out"], pads=[1, 1, 1, 1], name=f"{p}/Conv"))
            bn = [weight(f"{p}.bn.{k}", v) for k, v in (
                ("scale", 1 + 0.1 * rng.randn(channels)), ("bias", 0.1 * rng.randn(channels)),
                ("mean", 0.1 * rng.randn(channels)), ("var", 1 + 0.1 * rng.rand(channels)))]
            nodes.append(helper.make_node("BatchNormalization", [f"{p}.out", *bn], [f"{p}.bn"], name=f"{p}/BN"))
            x = f"{p}.bn"
            if j == 0:
                nodes.append(helper.make_node("Relu", [x], [f"{p}.relu"], name=f"{p}/Relu"))
                x = f"{p}.relu"
        nodes.append(helper.make_node("Add", [x, skip], [f"block{b}.sum"], name=f"block{b}/Add"))
        nodes.append(helper.make_node("Relu", [f"block{b}.sum"], [f"block{b}.out"], name=f"block{b}/Relu"))
        x = f"block{b}.out"
    shape = [1, channels, size, size]
    graph = helper.make_graph(nodes, "resblocks", [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def write_models(kind: str, count: int, directory: Path, blocks: int = 40) -> list:
    """``count`` models of ``kind`` in ``directory``; returns their paths."""
    import onnx

    paths = []
    for i in range(count):
        path = directory / f"{kind}{i:03d}.onnx"
        if kind == "generated":
            model = generated_model(blocks, seed=i)
        elif kind == "squeezenet":
            from passhost_onnx.zoo import light_path, reseed

            model = reseed(onnx.load(light_path("squeezenet")), seed=i)
        else:
            raise SystemExit(f"bench_executors: unknown --models {kind!r}: generated or squeezenet")
        onnx.save(model, str(path))
        paths.append(str(path))
    return paths


def _adopt_orphans() -> bool:
    """Linux: become the parent of what a run leaves behind (Dask's fork server and the
    workers forked from it end just after passhost, reparented), so their CPU time counts
    with the run's. ``False`` where that is not possible (no CPU times then)."""
    if resource is None:
        return False
    try:
        import ctypes

        return ctypes.CDLL(None).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def _children() -> set:
    """The pids of this process's children (Linux's /proc)."""
    me, kids = os.getpid(), set()
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                    kids.add(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return kids


def _reap(keep: set) -> None:
    """Wait for the processes a run left here (adopted orphans, ending), not for ``keep``
    (``--running``'s workers, alive throughout)."""
    while True:
        left = _children() - keep
        if not left:
            return
        for pid in left:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def bench_env(cache: Path) -> dict:
    """The environment of the timed runs: bytecode cached (in ``cache``), as in an installed
    passhost; with ``PYTHONDONTWRITEBYTECODE`` (set on the machine these figures come from)
    every process compiled passhost's source again, 0.2 s each."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


def run_once(inputs: list, out: Path, options: list, check: bool, env: dict | None = None,
             cpu: bool = False) -> tuple:
    """One ``passhost run`` of the batch: ``(wall seconds, CPU seconds of every process it
    started, or None without cpu)``; the wall time runs until its stdout and stderr close
    (raises if it fails). ``cpu`` needs :func:`_adopt_orphans` to have succeeded."""
    argv = [sys.executable, "-m", "passhost", "run", *inputs, "-O3", "-o", f"{out}/", *options]
    if check:
        argv.append("--check")
    keep = _children() if cpu else set()
    before = resource.getrusage(resource.RUSAGE_CHILDREN) if cpu else None
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bench_executors: {' '.join(options)} exited {done.returncode}:\n"
                         f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    if not cpu:
        return wall, None
    _reap(keep)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def same_outputs(a: Path, b: Path) -> bool:
    names = sorted(p.name for p in a.iterdir())
    return names == sorted(p.name for p in b.iterdir()) and all(
        (a / n).read_bytes() == (b / n).read_bytes() for n in names)


def run(kind: str = "generated", count: int = 50, rounds: int = 5, blocks: int = 40, check: bool = False,
        running: bool = False) -> dict:
    """Measure; returns the report as a dict."""
    work = Path(tempfile.mkdtemp(prefix="passhost-bench-executors-"))
    cluster = None
    try:
        models = work / "models"
        models.mkdir()
        inputs = write_models(kind, count, models, blocks)
        env, cpu = bench_env(work / "pycache"), _adopt_orphans()
        executors = dict(EXECUTORS)
        if running:
            import logging

            import distributed

            cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                               dashboard_address=":0", silence_logs=logging.CRITICAL)
            executors["dask:// 2"] = ["--executor", "dask://" + cluster.scheduler_address.split("://")[1]]
        for options in executors.values():  # untimed: bytecode written, inputs in the page cache
            run_once(inputs[:3], work / "warm-up", options, check, env, cpu)
            shutil.rmtree(work / "warm-up")
        walls: dict = {name: [] for name in executors}
        cpus: dict = {name: [] for name in executors}
        identical = True
        for r in range(rounds):
            order = list(executors) if r % 2 == 0 else list(reversed(executors))
            outs = {}
            for name in order:
                outs[name] = work / f"out-{r}-{len(outs)}"
                wall, used = run_once(inputs, outs[name], executors[name], check, env, cpu)
                walls[name].append(wall)
                cpus[name].append(used)
            first, *others = outs.values()
            identical = identical and all(same_outputs(first, other) for other in others)
            for out in outs.values():
                shutil.rmtree(out)
        return summarise(walls, cpus if cpu else None) | {
            "models": kind, "count": count, "blocks": blocks if kind == "generated" else None, "check": check,
            "rounds": rounds, "outputs_identical": identical, "input_bytes": sum(os.path.getsize(p) for p in inputs)}
    finally:
        if cluster is not None:
            cluster.close()
        shutil.rmtree(work, ignore_errors=True)


def summarise(walls: dict, cpus: dict | None) -> dict:
    """Medians, the ratio of the medians, and the median of each round's ratio (the rounds
    alternate, so a round's two runs saw about the same load: the steadier figure)."""
    medians = {name: statistics.median(w) for name, w in walls.items()}
    ratio = medians["dask -j 2"] / medians["local -j 2"]
    paired = statistics.median(d / loc for d, loc in zip(walls["dask -j 2"], walls["local -j 2"]))
    out = {"walls": walls, "medians": medians, "ratio": ratio, "paired_ratio": paired, "goal_ratio": GOAL_RATIO,
           "goal_met": ratio <= GOAL_RATIO}
    if cpus is not None:
        out["cpus"] = cpus
        out["cpu_medians"] = {name: statistics.median(c) for name, c in cpus.items()}
    return out


def render(report: dict) -> str:
    lines = [f"{report['count']} {report['models']} models ({report['input_bytes'] / 1e6:.1f} MB), -O3"
             + (" --check" if report["check"] else "") + f", {report['rounds']} round(s):"]
    cpu = report.get("cpu_medians")
    for name, walls in report["walls"].items():
        lines.append(f"  {name:<12} median {report['medians'][name]:6.2f} s   "
                     + (f"CPU {cpu[name]:5.2f} s   " if cpu else "")
                     + f"(rounds: {', '.join(f'{w:.2f}' for w in walls)})")
    if "dask:// 2" in report["medians"]:
        lines.append(f"  a running scheduler / local = {report['medians']['dask:// 2'] / report['medians']['local -j 2']:.2f}x")
    verdict = "met" if report["goal_met"] else "NOT met"
    paired = f", median of the rounds' ratios {report['paired_ratio']:.2f}x" if "paired_ratio" in report else ""
    lines.append(f"  dask / local = {report['ratio']:.2f}x{paired} (goal <= {report['goal_ratio']}x: {verdict}); "
                 f"outputs byte-identical: {'yes' if report['outputs_identical'] else 'NO'}")
    return "\n".join(lines)


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="generated", choices=("generated", "squeezenet"))
    parser.add_argument("--count", type=int, default=50, help="models in the batch (default 50)")
    parser.add_argument("--rounds", type=int, default=5, help="runs of each executor (default 5)")
    parser.add_argument("--blocks", type=int, default=40, help="residual blocks per generated model (default 40)")
    parser.add_argument("--check", action="store_true", help="add --check (onnxruntime compares each output)")
    parser.add_argument("--running", action="store_true",
                        help="also time --executor dask:// on a 2-worker LocalCluster started before the rounds")
    parser.add_argument("--json", metavar="FILE", help="also write the report (and the machine) as JSON")
    args = parser.parse_args(argv)
    before = machine_info()
    report = run(args.models, args.count, args.rounds, args.blocks, args.check, args.running)
    report["machine"] = before
    try:
        report["loadavg_after"] = list(os.getloadavg())
    except OSError:
        pass
    print(render(report))
    print(f"  load average before {before.get('loadavg')}, after {report.get('loadavg_after')}; "
          f"{before.get('usable_cores', before.get('cores'))} usable cores")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0 if report["outputs_identical"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
