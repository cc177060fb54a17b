"""Benchmark the ``-O3`` default pipeline on ResNet-18 and ResNet-50 with bound parameters.

Usage::

    python benchmarks/bench_models.py                 # both networks, best of --repeat
    python benchmarks/bench_models.py --profile 50    # cProfile one ResNet-50 run
    python benchmarks/bench_models.py --per-pass      # also the timing instrument's report
    python benchmarks/bench_models.py --verify-each   # A/B: verify-each off and on, alternating

``--verify-each`` times each network with the ``passhost.verify_each`` config off and on
(what ``passhost run`` uses), alternating, a fresh module every run, and prints the
overhead of the medians (issue 16's goal: at most 10 % on ResNet-50 -O3).

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


def run_once(mod: ir.IRModule, instruments: list = (), report: bool = False, verify: bool = False) -> tuple:
    """Run the -O3 default pipeline once: ``(wall seconds, cpu seconds, output)``;
    ``report`` prints each instrument's ``render()`` (inside the context, where the
    timing instrument still holds its profile)."""
    with PassContext(opt_level=3, instruments=list(instruments), config={"passhost.verify_each": verify}):
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


def verify_overhead(num_layers: int, repeat: int, cache: dict) -> dict:
    """verify-each's cost two ways: CPU medians of whole runs with it off and on
    (alternating, fresh modules; noisy at these sizes, a few ms either way), and the time
    spent inside the verifier itself in the "on" runs, against the rest of the run."""
    from passhost._context import _Verifier

    real = _Verifier.run_after_pass
    inside = [0.0]

    def timed(self, mod, info):
        t0 = time.process_time()
        try:
            real(self, mod, info)
        finally:
            inside[0] += time.process_time() - t0

    off, on, share = [], [], []
    _Verifier.run_after_pass = timed
    try:
        for _ in range(repeat):
            for verify, out in ((False, off), (True, on)):
                inside[0] = 0.0
                _, cpu, _ = run_once(fresh_module(num_layers, cache), verify=verify)
                out.append(cpu)
                if verify:
                    share.append(inside[0] / max(cpu - inside[0], 1e-9))
    finally:
        _Verifier.run_after_pass = real
    med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    return {"off": med(off), "on": med(on), "overhead": med(on) / med(off) - 1.0, "inside": med(share)}


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--layers", type=int, nargs="*", default=[18, 50])
    ap.add_argument("--profile", type=int, metavar="LAYERS", help="cProfile one warm run of this network")
    ap.add_argument("--per-pass", action="store_true", help="print the timing instrument's report")
    ap.add_argument("--verify-each", action="store_true", help="A/B the verify-each overhead and exit")
    args = ap.parse_args(argv)
    cache: dict = {}

    # cold: the first pipeline run of this process
    mod = fresh_module(args.layers[0], cache)
    cold, _, _ = run_once(mod)
    print(f"cold first run (resnet{args.layers[0]}, includes imports/registry): {cold:.3f} s")

    if args.verify_each:
        print(f"{'network':10} {'off (cpu)':>10} {'on (cpu)':>10} {'A/B':>8} {'in verifier':>12}  (goal <= 10 %)")
        for n in args.layers:
            r = verify_overhead(n, args.repeat, cache)
            print(f"resnet{n:<4} {r['off']:10.4f} {r['on']:10.4f} {100 * r['overhead']:7.1f}% "
                  f"{100 * r['inside']:11.1f}%")
        return 0

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
