"""IR host benchmarks: print, parse, structural_hash, type inference, post-order walk, memory.

Usage::

    python benchmarks/bench_ir.py                 # 100k-node chains, 1M-node walk
    python benchmarks/bench_ir.py -n 1000 --big 10000 --repeat 1    # tiny (smoke)
    python benchmarks/bench_ir.py --json out.json
    python benchmarks/bench_ir.py --profile parse

Cases (``chain(n)`` is :func:`passhost.testing.chain`: ``add(add(%x, 0.5f), 0.5f)...``;
each run gets a freshly built graph, built outside the clock):

===================  ==========================================================  =========
case                 what                                                        goal
===================  ==========================================================  =========
print                ``str(mod)`` of a typed ``chain(n)``                        0.5 s
parse                ``ir.parse`` of ``ir.astext`` of it (includes its inference)  1 s
structural_hash      ``ir.structural_hash(mod["main"])``                        0.3 s
infer_type           ``ir.infer_type`` of an untyped ``chain(n)``                0.5 s
post_order_visit     ``ir.post_order_visit`` over ``chain(big)``, no-op fn        1.5 s
memory_per_node      tracemalloc bytes per node of ``chain(n)``, untyped and     1 KiB
                     typed
===================  ==========================================================  =========

Goals are for n = 100,000 and big = 1,000,000 and scale linearly with the size.
"""
from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import tracemalloc
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import fmt_seconds, machine_info, measure  # noqa: E402
from passhost import ir  # noqa: E402
from passhost.ir import post_order  # noqa: E402
from passhost.testing import chain  # noqa: E402

#: goal in seconds at the reference size (n for all but post_order_visit, which uses big)
GOALS = {"print": 0.5, "parse": 1.0, "structural_hash": 0.3, "infer_type": 0.5, "post_order_visit": 1.5}
REF_N, REF_BIG = 100_000, 1_000_000
#: goal in bytes per node
MEMORY_GOAL = 1024


def _typed_chain(n: int) -> ir.IRModule:
    return ir.infer_type(chain(n))


def _noop(node) -> None:
    return None


def timing_cases(n: int, big: int) -> dict:
    """``{name: (size, setup, run)}``; ``setup()`` builds the input outside the clock."""
    text_cache: dict = {}
    walk_cache: dict = {}

    def text_setup() -> str:
        if n not in text_cache:
            text_cache[n] = ir.astext(_typed_chain(n))
        return text_cache[n]

    def walk_setup():
        # post_order_visit does not touch its input: build the big chain once
        if big not in walk_cache:
            walk_cache[big] = chain(big)["main"]
        return walk_cache[big]

    return {
        "print": (n, lambda: _typed_chain(n), str),
        "parse": (n, text_setup, ir.parse),
        "structural_hash": (n, lambda: chain(n)["main"], ir.structural_hash),
        "infer_type": (n, lambda: chain(n), ir.infer_type),
        "post_order_visit": (big, walk_setup, lambda f: ir.post_order_visit(f, _noop)),
    }


def memory_per_node(n: int) -> dict:
    """Bytes per node (tracemalloc) of an untyped ``chain(n)`` and after type inference."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        mod = chain(n)
        built = tracemalloc.get_traced_memory()[0] - base
        ir.infer_type(mod)
        typed = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    nodes = len(post_order(mod["main"]))
    return {"nodes": nodes, "untyped_bytes_per_node": built / nodes, "typed_bytes_per_node": typed / nodes,
            "goal_bytes": MEMORY_GOAL}


def run(n: int = REF_N, big: int = REF_BIG, repeat: int = 3, warmup: int = 1,
        only: tuple = ()) -> list:
    """Run the cases and return one result dict per case (see :func:`measure`)."""
    results = []
    for name, (size, setup, fn) in timing_cases(n, big).items():
        if only and name not in only:
            continue
        ref = REF_BIG if name == "post_order_visit" else REF_N
        goal = GOALS[name] * size / ref
        r = measure(setup, fn, repeat=repeat, warmup=warmup)
        r.update({"bench": "ir", "case": name, "size": size, "goal_s": goal,
                  "meets_goal": r["cpu"]["median"] <= goal})
        results.append(r)
    if not only or "memory_per_node" in only:
        m = memory_per_node(n)
        m.update({"bench": "ir", "case": "memory_per_node", "size": n,
                  "meets_goal": m["typed_bytes_per_node"] <= MEMORY_GOAL})
        results.append(m)
    return results


def print_table(results: list, out=sys.stdout) -> None:
    print(f"{'case':<18}{'size':>9}{'cpu median':>12}{'cpu min':>11}{'cpu max':>11}"
          f"{'wall median':>13}{'goal':>10}  ok", file=out)
    for r in results:
        if r["case"] == "memory_per_node":
            print(f"{r['case']:<18}{r['size']:>9}  untyped {r['untyped_bytes_per_node']:.0f} B/node, "
                  f"typed {r['typed_bytes_per_node']:.0f} B/node (goal {r['goal_bytes']} B)"
                  f"  {'yes' if r['meets_goal'] else 'NO'}", file=out)
            continue
        c, w = r["cpu"], r["wall"]
        print(f"{r['case']:<18}{r['size']:>9}{fmt_seconds(c['median']):>12}{fmt_seconds(c['min']):>11}"
              f"{fmt_seconds(c['max']):>11}{fmt_seconds(w['median']):>13}{fmt_seconds(r['goal_s']):>10}"
              f"  {'yes' if r['meets_goal'] else 'NO'}", file=out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=REF_N, help=f"chain length for most cases (default {REF_N})")
    ap.add_argument("--big", type=int, default=REF_BIG, help=f"chain length for post_order_visit (default {REF_BIG})")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per case (default 3)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    ap.add_argument("--profile", metavar="CASE", choices=list(GOALS), help="cProfile one case")
    ap.add_argument("cases", nargs="*", help=f"cases (default all of {', '.join(GOALS)}, memory_per_node)")
    args = ap.parse_args(argv)
    if args.profile:
        size, setup, fn = timing_cases(args.n, args.big)[args.profile]
        arg = setup()
        prof = cProfile.Profile()
        prof.runcall(fn, arg)
        pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(20)
        return 0
    results = run(args.n, args.big, args.repeat, args.warmup, tuple(args.cases))
    print_table(results)
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine_info(), "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
