"""The executors side by side (issue 36): one batch of models through the local process
pool (``passhost run MODELS -O3 -o out/ -j 2``) and through a Dask LocalCluster of two
workers (``... --executor dask -j 2``), run as a user runs them: one ``passhost`` process
per run, its wall time from start to exit (the pool's or the cluster's start and stop
included). The goal: Dask within 1.2x of ``-j 2`` on a 50-model batch.

Usage::

    python benchmarks/bench_executors.py                        # 50 generated models, 3 rounds
    python benchmarks/bench_executors.py --models squeezenet    # the zoo's SqueezeNet, reseeded 50 times
    python benchmarks/bench_executors.py --count 4 --rounds 1   # tiny (smoke)
    python benchmarks/bench_executors.py --check --json out.json
    python benchmarks/bench_executors.py --running              # also a running 2-worker scheduler

Models (``--models``):

``generated`` (the default)
    ResNet-style stacks of ``--blocks`` residual blocks (Conv 3x3, BatchNormalization,
    Relu, Conv, BatchNormalization, Add, Relu; 8 channels, 16x16), seeded per model:
    ~220 KB files whose -O3 takes a few tenths of a second each, like the zoo's CNNs
    (ResNet-50: 0.37 s), so the batch measures running models rather than starting
    processes.
``squeezenet``
    the model zoo's SqueezeNet 1.0 (``passhost_onnx.zoo``), reseeded per model: 5 MB
    files whose -O3 takes ~50 ms, so fixed costs (spawning workers, importing passhost
    in them, starting the cluster) dominate: the worst case for a cluster.

Each round runs both executors on the same inputs into fresh output directories, in
alternating order; outputs are checked byte for byte against each other. The report
gives each executor's median wall time and the ratio of the medians. With ``--running``
a third column, ``dask://`` on a LocalCluster of two workers started before the rounds
(a team's standing cluster: no cluster start or stop in the timing, workers warm after
the first round), shows what the batch itself costs on Dask.

Measured (2 cores shared with other work, load average 3 to 7, so single rounds vary by
up to 2x; medians of 3 to 5 rounds, outputs byte-identical in every round):

=====================================  ==========  ===========  =====  =============
batch of 50                            local -j 2  dask -j 2    ratio  dask:// (running)
=====================================  ==========  ===========  =====  =============
generated, 160 blocks (~47 MB)         25.4 s      24.8 s       0.97x
generated, 40 blocks (default)         7.8 s       8.8 s        1.12x  6.1 s (0.78x)
same, 5 rounds, another hour           6.0 s       7.8 s        1.29x  4.8 s (0.79x)
generated, 40 blocks, ``--check``      13.5 s      13.5 s       1.00x
squeezenet (248 MB)                    6.8 s       10.2 s       1.50x
=====================================  ==========  ===========  =====  =============

What ``--executor dask`` adds is about 2 s per run, whatever the batch: importing Dask
here (0.6 s), starting the scheduler and two worker processes that import Dask too, and
about 10 ms per model (one model per worker thread in flight: the next is sent when one
ends, so a dying worker takes no other model with it). Closing the cluster costs 0.1 s
(its workers leave with ``os._exit``; Python's teardown took a second). So the 1.2x goal
holds once ``-j 2`` itself takes about 12 s or more (models of a few tenths of a second
each, or ``--check``), and is missed for batches of very quick models such as SqueezeNet
at 50 ms each; on a scheduler that is already running (a team's cluster) Dask is faster
than ``-j 2``, which starts its processes every run.
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


def run_once(inputs: list, out: Path, options: list, check: bool) -> float:
    """One ``passhost run`` of the batch; returns its wall time (raises if it fails)."""
    argv = [sys.executable, "-m", "passhost", "run", *inputs, "-O3", "-o", f"{out}/", *options]
    if check:
        argv.append("--check")
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bench_executors: {' '.join(options)} exited {done.returncode}:\n"
                         f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return wall


def same_outputs(a: Path, b: Path) -> bool:
    names = sorted(p.name for p in a.iterdir())
    return names == sorted(p.name for p in b.iterdir()) and all(
        (a / n).read_bytes() == (b / n).read_bytes() for n in names)


def run(kind: str = "generated", count: int = 50, rounds: int = 3, blocks: int = 40, check: bool = False,
        running: bool = False) -> dict:
    """Measure; returns the report as a dict."""
    work = Path(tempfile.mkdtemp(prefix="passhost-bench-executors-"))
    cluster = None
    try:
        models = work / "models"
        models.mkdir()
        inputs = write_models(kind, count, models, blocks)
        executors = dict(EXECUTORS)
        if running:
            import logging

            import distributed

            cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                               dashboard_address=":0", silence_logs=logging.CRITICAL)
            executors["dask:// 2"] = ["--executor", "dask://" + cluster.scheduler_address.split("://")[1]]
        walls: dict = {name: [] for name in executors}
        identical = True
        for r in range(rounds):
            order = list(executors) if r % 2 == 0 else list(reversed(executors))
            outs = {}
            for name in order:
                outs[name] = work / f"out-{r}-{len(outs)}"
                walls[name].append(run_once(inputs, outs[name], executors[name], check))
            first, *others = outs.values()
            identical = identical and all(same_outputs(first, other) for other in others)
            for out in outs.values():
                shutil.rmtree(out)
        medians = {name: statistics.median(w) for name, w in walls.items()}
        ratio = medians["dask -j 2"] / medians["local -j 2"]
        return {"models": kind, "count": count, "blocks": blocks if kind == "generated" else None, "check": check,
                "rounds": rounds, "walls": walls, "medians": medians, "ratio": ratio, "goal_ratio": GOAL_RATIO,
                "goal_met": ratio <= GOAL_RATIO, "outputs_identical": identical,
                "input_bytes": sum(os.path.getsize(p) for p in inputs)}
    finally:
        if cluster is not None:
            cluster.close()
        shutil.rmtree(work, ignore_errors=True)


def render(report: dict) -> str:
    lines = [f"{report['count']} {report['models']} models ({report['input_bytes'] / 1e6:.1f} MB), -O3"
             + (" --check" if report["check"] else "") + f", {report['rounds']} round(s):"]
    for name, walls in report["walls"].items():
        lines.append(f"  {name:<12} median {report['medians'][name]:6.2f} s   "
                     f"(rounds: {', '.join(f'{w:.2f}' for w in walls)})")
    if "dask:// 2" in report["medians"]:
        lines.append(f"  a running scheduler / local = {report['medians']['dask:// 2'] / report['medians']['local -j 2']:.2f}x")
    verdict = "met" if report["goal_met"] else "NOT met"
    lines.append(f"  dask / local = {report['ratio']:.2f}x (goal <= {report['goal_ratio']}x: {verdict}); "
                 f"outputs byte-identical: {'yes' if report['outputs_identical'] else 'NO'}")
    return "\n".join(lines)


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="generated", choices=("generated", "squeezenet"))
    parser.add_argument("--count", type=int, default=50, help="models in the batch (default 50)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each executor (default 3)")
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
