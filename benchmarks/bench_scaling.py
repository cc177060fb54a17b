"""Scaling benchmarks: four graph families at 1k-1M nodes through every -O3 pass and the pipeline.

Usage::

    python benchmarks/bench_scaling.py                              # all families, 1k/10k/100k
    python benchmarks/bench_scaling.py --family chain --sizes 1000000 --cases O3
    python benchmarks/bench_scaling.py --sizes 300 --repeat 1 --warmup 0    # tiny (smoke)
    python benchmarks/bench_scaling.py --isolate --json out.json    # one process per family x size
    python benchmarks/bench_scaling.py --profile chain:1000000:O3   # cProfile one case

Families (``size`` is the nominal node count; the exact count, every node reachable
from ``main`` as :func:`passhost.ir.post_order` lists it, is reported):

``chain``
    :func:`passhost.testing.chain`: ``add(add(%x, 0.5f), 0.5f)...``.
``dupdead``
    a ``let`` chain in which every step binds a value twice (structurally identical:
    CSE work) and a value nobody uses (DCE work)::

        let %a0 = add(%x, 0.5f); let %b0 = add(%x, 0.5f);
        let %d0 = multiply(%x, 0.5f);          /* dead */
        let %v0 = add(%a0, %b0); let %a1 = add(%v0, 0.5f); ...

    TVM 0.27's DeadCodeElimination is quadratic on such programs (7.8 ms at 1k nodes,
    0.48 s at 10k, 71 s at 100k); passhost's must stay linear.
``dag``
    a seeded wide random DAG over ``Tensor[(2, 2), float32]``: binary and unary
    elementwise calls whose operands are drawn from the last ~64 values (so values are
    shared and many are live at once), structurally duplicated calls (CSE work) and
    all-constant sub-expressions (FoldConstant work); every value is used.
``resnet``
    stacked basic ResNet blocks (conv2d, batch_norm, relu, conv2d, batch_norm, add,
    relu) on ``Tensor[(1, 4, 8, 8), float32]`` with per-block constant weights, as
    after ``bind_params_by_name``: SimplifyInference, FoldConstant and FoldScaleAxis
    all have work.

Cases per family and size: ``InferType`` (``ir.infer_type`` of the untyped graph),
each pass of ``passhost.default_pipeline(3)`` alone on the type-inferred graph, and
``O3``: the whole pipeline on the untyped graph inside ``PassContext(opt_level=3)``.
Each reports CPU and wall time (median, min, max), CPU time per node and the peak
resident set size (the kernel's ``VmHWM``, reset before each case; it includes the
input graph). ``O3`` runs first so that, in a fresh process (``--isolate``), its
peak is not inflated by memory an earlier case left to the allocator.
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import passhost  # noqa: E402
from benchmarks import current_rss_mb, fmt_seconds, machine_info, measure, peak_rss_mb, reset_peak_rss  # noqa: E402
from passhost import ir  # noqa: E402
from passhost.transform import PassContext  # noqa: E402

DEFAULT_SIZES = (1_000, 10_000, 100_000)
#: 1M-node goals (chain and dag through O3): seconds of CPU, MiB of peak RSS, and the
#: allowed growth of CPU time per node from 10k to 1M nodes
GOAL_1M_SECONDS = 15.0
GOAL_1M_PEAK_MB = 2048.0
GOAL_PER_NODE_GROWTH = 1.3


# ------------------------------------------------------------------------------- families


def chain_family(n: int) -> ir.IRModule:
    from passhost.testing import chain

    return chain(max(1, n - 4))


def dupdead_family(n: int) -> ir.IRModule:
    """A let chain: per step two identical bindings, one dead one, one that joins them."""
    t = ir.TensorType((2,), "float32")
    x = ir.Var("x", t)
    c = ir.const(np.float32(0.5))
    add, mul = ir.Op.get("add"), ir.Op.get("multiply")
    Var, Call, Let = ir.Var, ir.Call, ir.Let
    bindings = []
    prev: ir.Expr = x
    for i in range(max(1, n // 12)):  # 4 lets + 4 vars + 4 calls per step
        a, b, d, v = Var(f"a{i}", t), Var(f"b{i}", t), Var(f"d{i}", t), Var(f"v{i}", t)
        bindings += [(a, Call(add, (prev, c))), (b, Call(add, (prev, c))),
                     (d, Call(mul, (prev, c))), (v, Call(add, (a, b)))]
        prev = v
    body: ir.Expr = prev
    for var, value in reversed(bindings):
        body = Let(var, value, body)
    return ir.IRModule.from_expr(ir.Function([x], body))


def dag_family(n: int, seed: int = 0, window: int = 64) -> ir.IRModule:
    """A wide random DAG of about ``n`` nodes (see the module docstring)."""
    rnd = random.Random(seed)
    t = ir.TensorType((2, 2), "float32")
    params = [ir.Var(f"p{i}", t) for i in range(4)]
    consts = [ir.const(np.full((2, 2), v, dtype="float32")) for v in (0.5, 1.5, 2.0, -1.0)]
    binary = [ir.Op.get(o) for o in ("add", "subtract", "multiply", "maximum", "minimum")]
    unary = [ir.Op.get(o) for o in ("negative", "nn.relu")]
    add = ir.Op.get("add")
    Call = ir.Call
    pool: list = list(params)
    used = [True] * len(pool)  # parameters need no use
    unused = 0
    nodes = len(params) + len(consts)

    def pick() -> ir.Expr:
        nonlocal unused
        k = len(pool) - 1 - min(len(pool) - 1, int(rnd.expovariate(1.0 / window)))
        if not used[k]:
            used[k] = True
            unused -= 1
        return pool[k]

    while nodes + unused < n:
        r = rnd.random()
        if r < 0.6:
            a = pick()
            b = rnd.choice(consts) if rnd.random() < 0.2 else pick()
            e = Call(rnd.choice(binary), (a, b))
        elif r < 0.75:
            e = Call(rnd.choice(unary), (pick(),))
        elif r < 0.9:
            k = len(pool) - 1 - min(len(pool) - 1, rnd.randrange(window))
            src = pool[k]
            if type(src) is not Call:
                continue
            e = Call(src.op, src.args, src.attrs)  # same operands: structurally identical
        else:
            folded = Call(rnd.choice(binary[:3]), (rnd.choice(consts), rnd.choice(consts)))
            e = Call(rnd.choice(binary), (pick(), folded))
            nodes += 1
        pool.append(e)
        used.append(False)
        unused += 1
        nodes += 1
    rest = [e for e, u in zip(pool, used) if not u]
    while len(rest) > 1:  # join the results pairwise: every value is used
        rest = [Call(add, (rest[i], rest[i + 1])) if i + 1 < len(rest) else rest[i]
                for i in range(0, len(rest), 2)]
    return ir.IRModule.from_expr(ir.Function(params, rest[0] if rest else pool[-1]))


def resnet_family(n: int, seed: int = 0, channels: int = 4) -> ir.IRModule:
    """Stacked basic ResNet blocks with constant weights (about 19 nodes per block)."""
    rng = np.random.RandomState(seed)
    x = ir.Var("data", ir.TensorType((1, channels, 8, 8), "float32"))
    c = channels

    def w() -> ir.Constant:
        return ir.const((rng.standard_normal((c, c, 3, 3)) * 0.1).astype("float32"))

    def bn(data: ir.Expr) -> ir.Expr:
        gamma, beta, mean = (ir.const(rng.uniform(0.5, 1.5, c).astype("float32")) for _ in range(3))
        var = ir.const(rng.uniform(0.5, 1.5, c).astype("float32"))
        return ir.nn.batch_norm(data, gamma, beta, mean, var)[0]

    y: ir.Expr = x
    for _ in range(max(1, n // 19)):
        h = ir.nn.relu(bn(ir.nn.conv2d(y, w(), padding=(1, 1), channels=c, kernel_size=(3, 3))))
        h = bn(ir.nn.conv2d(h, w(), padding=(1, 1), channels=c, kernel_size=(3, 3)))
        y = ir.nn.relu(ir.add(h, y))
    return ir.IRModule.from_expr(ir.Function([x], y))


FAMILIES: dict = {"chain": chain_family, "dupdead": dupdead_family, "dag": dag_family,
                  "resnet": resnet_family}


def count_nodes(mod: ir.IRModule) -> int:
    """Every node reachable from ``main`` (operators, variables and constants included)."""
    return len(ir.post_order(mod["main"]))


# ------------------------------------------------------------------------------- cases


def pipeline_pass_names(opt_level: int = 3) -> list:
    """The passes of ``passhost.default_pipeline(opt_level)`` as installed now."""
    return list(passhost.default_pipeline(opt_level).spec.names)


def case_names() -> list:
    """The scaling cases: ``O3``, ``InferType`` and each pass of the -O3 pipeline."""
    return ["O3", "InferType"] + pipeline_pass_names(3)


def case_runners(family: str, n: int) -> dict:
    """``{case: (setup, run, warmup_setup)}`` for one family and size."""
    build = FAMILIES[family]
    small = min(n, 300)

    def typed(size: int) -> Callable:
        return lambda: ir.infer_type(build(size))

    def in_context(fn: Callable) -> Callable:
        def run(mod):
            with PassContext(opt_level=3):
                return fn(mod)
        return run

    cases: dict = {"O3": (lambda: build(n), in_context(passhost.default_pipeline(3)), lambda: build(small))}
    cases["InferType"] = (lambda: build(n), ir.infer_type, lambda: build(small))
    for name in pipeline_pass_names(3):
        cases[name] = (typed(n), in_context(passhost.passes.get(name)), typed(small))
    return cases


def run_one(family: str, n: int, cases: tuple = (), repeat: int = 3, warmup: int = 1) -> list:
    """Measure the cases of one family and size in this process."""
    nodes = count_nodes(FAMILIES[family](n))
    results = []
    for name, (setup, fn, warm) in case_runners(family, n).items():
        if cases and name not in cases:
            continue
        gc.collect()
        reset_peak_rss()
        rss0 = current_rss_mb()
        r = measure(setup, fn, repeat=repeat, warmup=warmup, warmup_setup=warm)
        r.update({
            "bench": "scaling", "family": family, "size": n, "nodes": nodes, "case": name,
            "cpu_per_node_us": r["cpu"]["median"] / nodes * 1e6,
            "wall_per_node_us": r["wall"]["median"] / nodes * 1e6,
            "rss_before_mb": round(rss0, 1), "peak_rss_mb": round(peak_rss_mb(), 1),
        })
        results.append(r)
    return results


def run_isolated(family: str, n: int, cases: tuple = (), repeat: int = 3, warmup: int = 1,
                 timeout: float = 3600.0) -> list:
    """:func:`run_one` in a fresh interpreter (clean peak RSS; a crash or timeout is
    reported as an ``error`` entry instead of stopping the suite)."""
    fd, out = tempfile.mkstemp(suffix=".json", prefix="bench_scaling_")
    os.close(fd)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--family", family, "--sizes", str(n),
           "--repeat", str(repeat), "--warmup", str(warmup), "--json", out, "--quiet"]
    if cases:
        cmd += ["--cases", ",".join(cases)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            return [{"bench": "scaling", "family": family, "size": n, "case": ",".join(cases) or "*",
                     "error": (proc.stderr or proc.stdout).strip()[-2000:]}]
        return json.loads(Path(out).read_text())["results"]
    except subprocess.TimeoutExpired:
        return [{"bench": "scaling", "family": family, "size": n, "case": ",".join(cases) or "*",
                 "error": f"timed out after {timeout:.0f} s"}]
    finally:
        Path(out).unlink(missing_ok=True)


def growth(results: list, small: int = 10_000) -> list:
    """Per family and case: CPU time per node at the largest size over that at ``small``."""
    by_key: dict = {}
    for r in results:
        if r.get("bench") == "scaling" and "error" not in r:
            by_key.setdefault((r["family"], r["case"]), {})[r["size"]] = r["cpu_per_node_us"]
    rows = []
    for (family, case), sizes in by_key.items():
        big = max(sizes)
        if small in sizes and big > small:
            rows.append({"family": family, "case": case, "from": small, "to": big,
                         "ratio": sizes[big] / sizes[small],
                         "meets_goal": sizes[big] / sizes[small] <= GOAL_PER_NODE_GROWTH})
    return rows


def print_table(results: list, out=sys.stdout) -> None:
    print(f"{'family':<8}{'size':>8}{'nodes':>9} {'case':<23}{'cpu median':>11}{'min':>10}{'max':>10}"
          f"{'wall med':>10}{'us/node':>8}{'peak MB':>9}{'gc after':>10}", file=out)
    for r in results:
        if "error" in r:
            print(f"{r['family']:<8}{r['size']:>8} {'':>8} {r['case']:<23}ERROR: "
                  f"{r['error'].splitlines()[-1] if r['error'] else ''}", file=out)
            continue
        c = r["cpu"]
        print(f"{r['family']:<8}{r['size']:>8}{r['nodes']:>9} {r['case']:<23}{fmt_seconds(c['median']):>11}"
              f"{fmt_seconds(c['min']):>10}{fmt_seconds(c['max']):>10}{fmt_seconds(r['wall']['median']):>10}"
              f"{r['cpu_per_node_us']:>8.2f}{r['peak_rss_mb']:>9.0f}"
              f"{fmt_seconds(r['gc_after']['median']) if 'gc_after' in r else '':>10}", file=out)
    rows = growth(results)
    if rows:
        print(f"\nCPU time per node, largest size / 10k (goal <= {GOAL_PER_NODE_GROWTH}):", file=out)
        for g in rows:
            print(f"  {g['family']:<8} {g['case']:<23} {g['ratio']:.2f}  {'ok' if g['meets_goal'] else 'MISSED'}",
                  file=out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", default=",".join(FAMILIES), help="comma-separated families (default all)")
    ap.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)),
                    help="comma-separated nominal node counts (default 1000,10000,100000)")
    ap.add_argument("--cases", default="", help="comma-separated cases (default: InferType, every pass, O3)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per case (default 3)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs on a 300-node graph first (default 1)")
    ap.add_argument("--isolate", action="store_true", help="one fresh process per family and size")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    ap.add_argument("--quiet", action="store_true", help="no table")
    ap.add_argument("--profile", metavar="FAMILY:SIZE:CASE", help="cProfile one case and print the top functions")
    args = ap.parse_args(argv)
    if args.profile:
        family, size, case = args.profile.split(":")
        setup, fn, _ = case_runners(family, int(size))[case]
        mod = setup()
        prof = cProfile.Profile()
        prof.runcall(fn, mod)
        stats = pstats.Stats(prof, stream=sys.stdout)
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_stats(25)
        return 0
    families = [f for f in args.family.split(",") if f]
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        ap.error(f"unknown family {unknown[0]!r}; families: {', '.join(FAMILIES)}")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    cases = tuple(c for c in args.cases.split(",") if c)
    results: list = []
    for family in families:
        for n in sizes:
            if args.isolate:
                results += run_isolated(family, n, cases, args.repeat, args.warmup)
            else:
                results += run_one(family, n, cases, args.repeat, args.warmup)
    if not args.quiet:
        print_table(results)
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine_info(), "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
