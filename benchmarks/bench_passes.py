"""Benchmark the core passes on 100,000-node chains.

Usage::

    python benchmarks/bench_passes.py            # time every case (best of --repeat)
    python benchmarks/bench_passes.py --profile fold-nothing   # cProfile one case
    python benchmarks/bench_passes.py -n 1000000 --repeat 1

Cases (each input is built and, where a pipeline would have typed it, type-inferred
before the clock starts; the times include the type inference every function pass
runs afterwards):

=================  ===================================================  ========
case               what                                                 target
=================  ===================================================  ========
cse                EliminateCommonSubexpr on ``add(add(x, c), c)...``   0.5 s
dce                DeadCodeElimination on the same chain as ``let``s    0.3 s
fold-nothing       FoldConstant with nothing to fold (the same chain)   0.5 s
fold-all           FoldConstant of an all-constant chain (one result)   2 s
=================  ===================================================  ========
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from typing import Callable

import numpy as np

import passhost
from passhost import ir
from passhost.testing import chain

TARGETS = {"cse": 0.5, "dce": 0.3, "fold-nothing": 0.5, "fold-all": 2.0}


def let_chain(n: int) -> ir.IRModule:
    """``let %v1 = add(%x, c); let %v2 = add(%v1, c); ... %vn`` (every binding used)."""
    t = ir.TensorType((2,), "float32")
    x = ir.var("x", t)
    c = ir.const(np.full(2, 0.5, dtype="float32"))
    vs = [ir.Var(f"v{i}", t) for i in range(n)]
    values = [ir.add(prev, c) for prev, c in zip([x] + vs[:-1], [c] * n)]
    body: ir.Expr = vs[-1]
    for v, value in zip(reversed(vs), reversed(values)):
        body = ir.Let(v, value, body)
    return ir.IRModule.from_expr(ir.Function([x], body))


def constant_chain(n: int) -> ir.IRModule:
    """``add(add(add(0f, 1f), 1f), ...)``: everything folds into one constant."""
    one = ir.const(np.float32(1.0))
    e: ir.Expr = ir.const(np.float32(0.0))
    add = ir.Op.get("add")
    for _ in range(n):
        e = ir.Call(add, (e, one))
    return ir.IRModule.from_expr(ir.Function([], e))


def cases(n: int) -> dict:
    """``{name: (setup() -> module, run(module) -> module)}``."""
    return {
        "cse": (lambda: ir.infer_type(chain(n)), passhost.passes.EliminateCommonSubexpr()),
        "dce": (lambda: ir.infer_type(let_chain(n)), passhost.passes.DeadCodeElimination()),
        "fold-nothing": (lambda: ir.infer_type(chain(n)), passhost.passes.FoldConstant()),
        "fold-all": (lambda: constant_chain(n), passhost.passes.FoldConstant()),
    }


def measure(setup: Callable, run: Callable, repeat: int) -> tuple:
    """Best wall-clock and best CPU seconds over ``repeat`` runs (CPU time is the
    steadier number on a machine shared with other work)."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        mod = setup()
        t0, c0 = time.perf_counter(), time.process_time()
        run(mod)
        c1, t1 = time.process_time(), time.perf_counter()
        wall = min(wall, t1 - t0)
        cpu = min(cpu, c1 - c0)
    return wall, cpu


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=100_000, help="chain length (default 100000)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per case; the best is reported")
    ap.add_argument("--profile", metavar="CASE", help="cProfile one case and print the top functions")
    ap.add_argument("cases", nargs="*", help=f"cases to run (default: all of {', '.join(TARGETS)})")
    args = ap.parse_args(argv)
    table = cases(args.n)
    if args.profile:
        setup, run = table[args.profile]
        mod = setup()
        prof = cProfile.Profile()
        prof.enable()
        run(mod)
        prof.disable()
        pstats.Stats(prof, stream=sys.stdout).sort_stats("cumulative").print_stats(25)
        return 0
    names = args.cases or list(table)
    print(f"{'case':<14}{'wall s':>10}{'cpu s':>10}{'target':>10}  (n={args.n}, best of {args.repeat})")
    for name in names:
        setup, run = table[name]
        wall, cpu = measure(setup, run, args.repeat)
        target = TARGETS[name] * args.n / 100_000
        flag = "" if wall <= target else "  (wall) slower than target"
        print(f"{name:<14}{wall:>10.3f}{cpu:>10.3f}{target:>10.2f}{flag}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
