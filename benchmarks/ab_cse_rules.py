"""Issue 13's port question, measured: EliminateCommonSubexpr as one rule over the host's
rewrite driver against the plugin's hand-fused explicit-stack loop.

Usage::

    python benchmarks/ab_cse_rules.py                        # the four scaling families, 100k nodes
    python benchmarks/ab_cse_rules.py --families dag --size 10000 --repeat 3

The plugin's rules module (``passhost_eliminate_common_subexpr.rules``) is the whole pass
written the way issue 13 asks (about 50 lines): calls
are keyed by operator, attrs class and arguments, with TVM's argument equivalence (the
same node, equal scalar constants, tuples field by field), and tuple projections by
tuple and index. It is handed to ``ir.rewrite_post_order(..., keep_types=True,
only={Call, TupleGetItem})`` and gives the plugin's output on every family (the script
checks structural equality).

Three timings per family, CPU seconds, medians of ``--repeat`` alternating runs, each on
a fresh type-inferred graph:

``plugin``  ``passhost_eliminate_common_subexpr.eliminate_common_subexpr`` (today's pass)
``rules``   the rule set over the driver
``walk``    the driver with a rule that returns ``None`` at once: the floor any rule set
            over today's driver pays (the walk, the rebuild bookkeeping and one Python call
            per call node) before it does any work of its own

Issue 13 asks a ported pass to stay within 1.1x of today's time on every family.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scaling import FAMILIES  # noqa: E402

from passhost import ir  # noqa: E402
from passhost.ir import Call, TupleGetItem  # noqa: E402
from passhost_eliminate_common_subexpr.rules import cse_rules  # noqa: E402  (the plugin's reference rules)

_OFFER = frozenset({Call, TupleGetItem})


def walk_only(expr: ir.Expr) -> ir.Expr:
    return ir.rewrite_post_order(expr, lambda node: None, keep_types=True, only=_OFFER)


def main() -> int:
    from passhost_eliminate_common_subexpr import eliminate_common_subexpr

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default=",".join(FAMILIES), help=f"of {', '.join(FAMILIES)}")
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    tools = {"plugin": eliminate_common_subexpr, "rules": cse_rules, "walk": walk_only}
    print(f"EliminateCommonSubexpr, {args.size:,} nominal nodes, median CPU time of {args.repeat} "
          "alternating runs on fresh graphs")
    print(f"{'family':9s} {'plugin':>10s} {'rules':>10s} {'walk':>10s} {'rules/plugin':>13s} "
          f"{'walk/plugin':>12s}  outputs")
    for family in args.families.split(","):
        times: dict = {name: [] for name in tools}
        same = True
        for rep in range(args.repeat):
            names = list(tools)
            names = names[rep % len(names):] + names[:rep % len(names)]
            outs = {}
            for name in names:
                func = ir.infer_type(FAMILIES[family](args.size))["main"]  # a fresh graph every run
                t0 = time.process_time()
                outs[name] = tools[name](func)
                times[name].append(time.process_time() - t0)
            same = same and ir.structural_equal(outs["plugin"], outs["rules"])
        med = {name: statistics.median(ts) for name, ts in times.items()}
        print(f"{family:9s} {med['plugin'] * 1e3:8.1f}ms {med['rules'] * 1e3:8.1f}ms {med['walk'] * 1e3:8.1f}ms "
              f"{med['rules'] / med['plugin']:13.2f} {med['walk'] / med['plugin']:12.2f}  "
              f"{'equal' if same else 'DIFFER'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
