"""Print and parse time against nesting depth: is the text format linear in nested scopes?

Usage::

    python benchmarks/bench_nesting.py                      # depths 250 .. 64,000
    python benchmarks/bench_nesting.py --depths 250,1000 --repeat 1    # tiny (smoke)
    python benchmarks/bench_nesting.py --json out.json
    python benchmarks/bench_nesting.py --deep               # issue 38's families, 20,000 and 100,000 deep

Three shapes, each nested ``depth`` levels (the texts are what ``repro/nested_scopes.py``
and a nested-``if`` fuzzer wrote):

==========  =====================================================================
shape       text
==========  =====================================================================
let_block   ``let %v0 = { let %v1 = { ... %x }; %v1 }; %v0``
if_else     ``if (%c) { if (%c) { ... %x } else { %x } } else { %x }``
fn_literal  ``fn (%a0) { fn (%a1) { ... %x }(%a1) }(%a0)``: closures called in place
==========  =====================================================================

For each shape and depth: the CPU time of ``ir.astext`` on a freshly parsed module
(parsed outside the clock, a new one every repetition), of ``ir.parse`` of the text,
and the size of the printed text. The log-log slope of time (and of output size)
against depth, fitted by least squares over all depths, is the growth exponent:
**goal ≤ 1.1** for printing (issue 18 §2; before the rope printer it was ~3 for time
and 2 for size).

``--deep`` runs the twelve families of :mod:`passhost.testing.deep` instead (issue 38
§3: tuples, tuple types, projections, functions, closures, lets, ifs ... nested one in
another), at 20,000 and 100,000 deep by default: the CPU time to parse, print and run
``-O3`` on each (one run each: at these depths a run is seconds), the growth exponent
between the depths, and the goal that each step takes **under 10 s at 100,000 deep**.
``tests/test_deep_text.py`` checks the same programs for correctness, without a clock.
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import fmt_seconds, machine_info, measure  # noqa: E402
from passhost import ir  # noqa: E402
from passhost.testing.deep import DEEP_FAMILIES  # noqa: E402

DEPTHS = (250, 1000, 4000, 16000, 64000)
SLOPE_GOAL = 1.1
_HEAD = '#[version = "0.0.5"]\n'


def let_block(n: int) -> str:
    return (_HEAD + "def @main(%x: float32) {\n  " + "".join(f"let %v{i} = {{" for i in range(n)) + "%x"
            + "".join(f"}}; %v{i}" for i in reversed(range(n))) + "\n}\n")


def if_else(n: int) -> str:
    return (_HEAD + "def @main(%c: bool, %x: float32) -> float32 {\n  " + "if (%c) { " * n + "%x"
            + " } else { %x }" * n + "\n}\n")


def fn_literal(n: int) -> str:
    return (_HEAD + "def @main(%x: float32) {\n  " + "".join(f"fn (%a{i}: float32) {{ " for i in range(n))
            + "%x" + " }(%x)" * n + "\n}\n")


SHAPES = {"let_block": let_block, "if_else": if_else, "fn_literal": fn_literal}


def slope(xs: list, ys: list) -> float:
    """Least-squares slope of log(y) against log(x)."""
    lx = [math.log(x) for x in xs]
    ly = [math.log(max(y, 1e-9)) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    den = sum((a - mx) ** 2 for a in lx)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / den


def run(depths=DEPTHS, repeat: int = 3, warmup: int = 1, shapes=tuple(SHAPES)) -> list:
    """One row per shape and depth, then one ``slope`` row per shape."""
    rows = []
    for shape in shapes:
        make = SHAPES[shape]
        per_shape = []
        for depth in depths:
            text = make(depth)
            printed = measure(lambda t=text: ir.parse(t), ir.astext, repeat=repeat, warmup=warmup)
            parsed = measure(lambda t=text: t, ir.parse, repeat=repeat, warmup=warmup)
            out_chars = len(ir.astext(ir.parse(text)))
            row = {"bench": "nesting", "case": shape, "depth": depth, "input_chars": len(text),
                   "output_chars": out_chars, "print": printed, "parse": parsed}
            rows.append(row)
            per_shape.append(row)
        xs = [r["depth"] for r in per_shape]
        s_print = slope(xs, [r["print"]["cpu"]["median"] for r in per_shape])
        s_parse = slope(xs, [r["parse"]["cpu"]["median"] for r in per_shape])
        s_size = slope(xs, [r["output_chars"] for r in per_shape])
        rows.append({"bench": "nesting", "case": shape, "slope_print": s_print, "slope_parse": s_parse,
                     "slope_output": s_size, "goal": SLOPE_GOAL,
                     "meets_goal": s_print <= SLOPE_GOAL and s_size <= SLOPE_GOAL})
    return rows


DEEP_DEPTHS = (20_000, 100_000)
DEEP_GOAL_SECONDS = 10.0


def _cpu(fn, *args):
    gc.collect()
    start = time.process_time()
    out = fn(*args)
    return out, time.process_time() - start


def run_deep(depths=DEEP_DEPTHS, families=tuple(DEEP_FAMILIES)) -> list:
    """One row per family: CPU seconds to parse, print and run ``-O3`` at each depth, the
    growth exponent of the sum, and whether every step at the deepest took under
    :data:`DEEP_GOAL_SECONDS`."""
    import passhost
    from passhost import transform

    rows = []
    for name in families:
        steps: dict = {}
        for depth in depths:
            mod, parse = _cpu(ir.parse, DEEP_FAMILIES[name](depth))
            _, show = _cpu(ir.astext, mod)
            with transform.PassContext(opt_level=3):
                _, o3 = _cpu(passhost.default_pipeline(3), mod)
            steps[depth] = {"parse": parse, "print": show, "O3": o3}
        deepest = steps[max(depths)]
        rows.append({"bench": "deep", "case": name, "steps": steps,
                     "slope": slope(list(depths), [sum(steps[d].values()) for d in depths]) if len(depths) > 1
                     else None, "goal_seconds": DEEP_GOAL_SECONDS,
                     "meets_goal": max(deepest.values()) < DEEP_GOAL_SECONDS})
    return rows


def print_deep_table(rows: list, out=None) -> None:
    out = out or sys.stdout
    depths = list(rows[0]["steps"]) if rows else []
    head = "".join(f"{f'{s} @{d:,}':>18}" for d in depths for s in ("parse", "print", "-O3"))
    print(f"{'family':<15}{head}{'slope':>7}  under {DEEP_GOAL_SECONDS:g} s", file=out)
    for r in rows:
        cells = "".join(f"{fmt_seconds(r['steps'][d][s]):>18}" for d in depths for s in ("parse", "print", "O3"))
        sl = "-" if r["slope"] is None else f"{r['slope']:.2f}"
        print(f"{r['case']:<15}{cells}{sl:>7}  {'yes' if r['meets_goal'] else 'NO'}", file=out)


def print_table(rows: list, out=sys.stdout) -> None:
    print(f"{'shape':<12}{'depth':>8}{'input':>11}{'output':>12}{'print (CPU)':>13}{'parse (CPU)':>13}",
          file=out)
    for r in rows:
        if "slope_print" in r:
            print(f"{r['case']:<12}  log-log slope: print {r['slope_print']:.2f}, parse {r['slope_parse']:.2f}, "
                  f"output size {r['slope_output']:.2f} (goal <= {r['goal']})  "
                  f"{'yes' if r['meets_goal'] else 'NO'}", file=out)
            continue
        print(f"{r['case']:<12}{r['depth']:>8}{r['input_chars']:>11}{r['output_chars']:>12}"
              f"{fmt_seconds(r['print']['cpu']['median']):>13}{fmt_seconds(r['parse']['cpu']['median']):>13}",
              file=out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--depths", default=",".join(map(str, DEPTHS)),
                    help="comma-separated nesting depths (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per case (default 3)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    ap.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated shapes (default all)")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    ap.add_argument("--deep", action="store_true",
                    help="the families of passhost.testing.deep through parse, print and -O3 "
                         f"(--depths defaults to {','.join(map(str, DEEP_DEPTHS))})")
    args = ap.parse_args(argv)
    if args.deep:
        given = args.depths != ",".join(map(str, DEPTHS))
        depths = [int(d) for d in args.depths.split(",")] if given else list(DEEP_DEPTHS)
        shapes = args.shapes.split(",") if args.shapes != ",".join(SHAPES) else list(DEEP_FAMILIES)
        rows = run_deep(depths, tuple(shapes))
        print_deep_table(rows)
    else:
        depths = [int(d) for d in args.depths.split(",")]
        rows = run(depths, args.repeat, args.warmup, tuple(args.shapes.split(",")))
        print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine_info(), "results": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
