"""Benchmark the ``-O3`` default pipeline on ResNet-18 and ResNet-50 with bound parameters.

Usage::

    python benchmarks/bench_models.py                 # both networks, best of --repeat
    python benchmarks/bench_models.py --profile 50    # cProfile one ResNet-50 run
    python benchmarks/bench_models.py --per-pass      # also the timing instrument's report

Each repetition gets a **fresh** module (the network built and its parameters bound
with ``ir.bind_params_by_name`` before the clock starts), so the time covers everything
the pipeline does to an untyped, just-bound program: InferType, SimplifyInference,
FoldConstant (evaluating the BN arithmetic and the scaled weights with numpy),
FoldScaleAxis, EliminateCommonSubexpr, DeadCodeElimination and FuseOps. The first run
of the process is reported separately ("cold": lazy imports, first numpy calls, the
registry); the goal applies to the warm time.

==========  ===============
network     goal (warm)
==========  ===============
resnet18    --
resnet50    0.5 s
==========  ===============
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import sys
import time

import passhost
from passhost import ir, testing
from passhost.transform import PassContext

GOALS = {50: 0.5}


def fresh_module(num_layers: int, cache: dict) -> ir.IRModule:
    """ResNet-``num_layers`` with its parameters bound, untyped after binding."""
    if num_layers not in cache:
        cache[num_layers] = testing.resnet(num_layers)
    mod, params = cache[num_layers]
    return ir.IRModule.from_expr(ir.bind_params_by_name(mod["main"], params))


def run_once(mod: ir.IRModule, instruments: list = (), report: bool = False) -> tuple:
    """Run the -O3 default pipeline once: ``(wall seconds, cpu seconds, output)``;
    ``report`` prints each instrument's ``render()`` (inside the context, where the
    timing instrument still holds its profile)."""
    with PassContext(opt_level=3, instruments=list(instruments)):
        seq = passhost.default_pipeline(3)
        gc.collect()  # start every run from the same collector state (outside the clock)
        w0, c0 = time.perf_counter(), time.process_time()
        out = seq(mod)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        if report:
            for inst in instruments:
                print(inst.render())
        return wall, cpu, out


def bench(num_layers: int, repeat: int, cache: dict) -> dict:
    walls, cpus = [], []
    for _ in range(repeat):
        mod = fresh_module(num_layers, cache)
        wall, cpu, out = run_once(mod)
        walls.append(wall)
        cpus.append(cpu)
    ops = ir.count_ops(out["main"])
    return {"best": min(walls), "median": sorted(walls)[len(walls) // 2], "cpu": min(cpus),
            "batch_norm": ops.get("nn.batch_norm", 0), "multiply": ops.get("multiply", 0)}


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--layers", type=int, nargs="*", default=[18, 50])
    ap.add_argument("--profile", type=int, metavar="LAYERS", help="cProfile one warm run of this network")
    ap.add_argument("--per-pass", action="store_true", help="print the timing instrument's report")
    args = ap.parse_args(argv)
    cache: dict = {}

    # cold: the first pipeline run of this process
    mod = fresh_module(args.layers[0], cache)
    cold, _, _ = run_once(mod)
    print(f"cold first run (resnet{args.layers[0]}, includes imports/registry): {cold:.3f} s")

    if args.profile:
        fresh_module(args.profile, cache)
        run_once(fresh_module(args.profile, cache))  # warm up
        mod = fresh_module(args.profile, cache)
        prof = cProfile.Profile()
        prof.enable()
        run_once(mod)
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
        return 0

    failed = False
    print(f"{'network':10} {'best':>8} {'median':>8} {'cpu':>8} {'goal':>6}  batch_norm  multiply")
    for n in args.layers:
        r = bench(n, args.repeat, cache)
        goal = GOALS.get(n)
        mark = "" if goal is None else ("ok" if r["best"] <= goal else "SLOW")
        failed |= mark == "SLOW"
        goal_s = f"{goal:.1f}" if goal else "--"
        print(f"resnet{n:<4} {r['best']:8.3f} {r['median']:8.3f} {r['cpu']:8.3f} {goal_s:>6}  "
              f"{r['batch_norm']:10d}  {r['multiply']:8d}  {mark}")
        if args.per_pass:
            run_once(fresh_module(n, cache), [passhost.instruments.get("timing")], report=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
