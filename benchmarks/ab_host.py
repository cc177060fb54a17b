"""A/B of the host's whole-graph walkers: this tree against the host at a git revision.

For changes to the IR itself (how nodes describe their children, the rewrite driver):
``passhost/`` of ``REV`` is taken from ``git archive`` into a temporary directory, and each
repetition runs one child process per side (alternating which goes first) that builds
fresh graphs of the scaling families and times, in CPU seconds, ``post_order``, an
identity ``rewrite_post_order``, ``structural_hash``, ``structural_equal`` of two
equal graphs, ``well_formed`` and ``astext``. It prints the medians and new/old.

With ``--passes``, the cases are instead the passes of ``default_pipeline(3)``, each alone
on a fresh type-inferred graph inside ``PassContext(opt_level=3)`` (the installed plugins
over either host): what a change to the driver does to the passes built on it.

Usage::

    python benchmarks/ab_host.py --rev HEAD~3 [--families chain,dag,resnet,dupdead]
        [--size 100000] [--repeat 5] [--passes]
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(ROOT))

from benchmarks import git_tree  # noqa: E402
CASES = ("post_order", "rewrite_identity", "structural_hash", "structural_equal", "well_formed", "astext")


def measure(families: list, n: int, shift: int = 0, passes: bool = False) -> dict:
    """In a child process whose ``sys.path`` starts with the host to measure. ``shift``
    objects are allocated (and kept) first: where the graph's nodes land in memory moves
    set and dict timings by up to 20 % between otherwise equal processes, so each
    repetition uses another layout, the same one for both sides."""
    from passhost import ir

    # (tuples of 1 to 9 items span the allocator's size classes IR nodes fall in)
    ballast = [tuple(range(1 + i % 9)) for i in range(shift)]  # noqa: F841 - kept alive on purpose

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_scaling import FAMILIES

    def cpu(fn) -> float:
        gc.collect()
        t0 = time.process_time()
        fn()
        return time.process_time() - t0

    out = {}
    for fam in families:
        if passes:
            out.update(_run_passes(ir, fam, lambda f=FAMILIES[fam]: ir.infer_type(f(n)), cpu))
            continue
        mod, other = ir.infer_type(FAMILIES[fam](n)), ir.infer_type(FAMILIES[fam](n))
        out.update(_run_cases(ir, fam, mod["main"], other["main"], cpu))
    return out


def _run_passes(ir, fam: str, build, cpu) -> dict:
    import passhost
    from passhost.transform import PassContext

    out = {}
    for p in passhost.default_pipeline(3).passes:
        mod = build()  # a fresh input for every pass: nothing is timed on a graph already seen
        with PassContext(opt_level=3):
            out[f"{fam}/{p.info.name}"] = cpu(lambda p=p, mod=mod: p(mod))
    return out


def _run_cases(ir, fam: str, fn, other, cpu) -> dict:
    runs = {
        "post_order": lambda: ir.post_order(fn),
        "rewrite_identity": lambda: ir.rewrite_post_order(fn, lambda e: None),
        "structural_hash": lambda: ir.structural_hash(fn),
        "structural_equal": lambda: ir.structural_equal(fn, other),
        "well_formed": lambda: ir.well_formed(fn),
        "astext": lambda: ir.astext(fn, show_meta_data=False),
    }
    return {f"{fam}/{case}": cpu(runs[case]) for case in CASES}


def _child(host: str, families: str, n: int, shift: int, passes: bool = False) -> dict:
    code = (f"import sys, json; sys.path.insert(0, {host!r}); sys.path.insert(1, {str(ROOT)!r}); "
            f"from benchmarks.ab_host import measure; "
            f"print(json.dumps(measure({families.split(',')!r}, {n}, {shift}, {passes!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tempfile.gettempdir())
    if out.returncode:
        raise SystemExit(f"the child for {host} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", required=True)
    ap.add_argument("--families", default="chain,dag,resnet,dupdead")
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--passes", action="store_true", help="time the -O3 passes instead of the walkers")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        git_tree(args.rev, ("passhost",), tmp, str(ROOT))
        sides = {"old": tmp, "new": str(ROOT)}
        res: dict = {"old": {}, "new": {}}
        for r in range(args.repeat):
            for tag in (("old", "new") if r % 2 == 0 else ("new", "old")):
                for case, t in _child(sides[tag], args.families, args.size, 7919 * r, args.passes).items():
                    res[tag].setdefault(case, []).append(t)
    print(f"host {'passes' if args.passes else 'walkers'}: {args.rev} (old) vs the working tree (new), "
          f"{args.size:,} nominal nodes, "
          f"median of {args.repeat} alternating runs (a different memory layout each), CPU ms")
    print(f"{'case':32s} {'old':>9s} {'new':>9s} {'new/old':>8s}")
    for case in res["old"]:
        old, new = statistics.median(res["old"][case]) * 1e3, statistics.median(res["new"][case]) * 1e3
        print(f"{case:32s} {old:9.1f} {new:9.1f} {new / old:8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
