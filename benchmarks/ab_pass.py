"""A/B of one pass: the installed plugin against the same plugin at a git revision.

For ports of a pass to another implementation (a rule set over the rewrite driver, say):
the old package is taken from ``git archive REV``, imported under another name beside the
installed one, and both passes run on fresh graphs of the scaling families, alternating
(the order swaps every repetition), in one process. It prints the median CPU time of
each and their ratio, and checks that both give structurally equal modules.

Usage::

    python benchmarks/ab_pass.py --rev HEAD~1 --plugin plugins/passhost-simplify-inference \\
        --factory SimplifyInference [--families resnet,chain] [--size 100000] [--repeat 7]

``--factory`` names the pass constructor in the plugin package (called without
arguments); the new pass is ``passhost.passes.get(--name or --factory)``. The host is the
installed one for both, so the A/B isolates the plugin.
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import passhost
from passhost import ir
from passhost.transform import PassContext

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))
from bench_scaling import FAMILIES  # noqa: E402

from benchmarks import git_tree  # noqa: E402


def mlp_family(n: int, seed: int = 0, width: int = 8) -> ir.IRModule:
    """dense + bias_add + relu layers (3 calls and 2 constants each): CanonicalizeOps' and
    FuseDenseBias' food, which the scaling families lack."""
    import numpy as np

    rng = np.random.RandomState(seed)
    x = ir.var("x", shape=(1, width))
    y = x
    for _ in range(max(1, n // 6)):
        w = ir.const((rng.standard_normal((width, width)) * 0.3).astype("float32"))
        b = ir.const(rng.standard_normal(width).astype("float32"))
        y = ir.nn.relu(ir.nn.bias_add(ir.nn.dense(y, w), b))
    return ir.IRModule.from_expr(ir.Function([x], y))


BUILDERS = {**FAMILIES, "mlp": mlp_family}


def load_old(rev: str, plugin: str, into: Path) -> object:
    """Import the plugin package of ``plugin`` as it was at ``rev`` (as ``<package>_ab_old``)."""
    root = Path(subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                               check=True).stdout.strip())
    rel = Path(plugin).resolve().relative_to(root)
    git_tree(rev, (str(rel),), str(into), str(root))
    packages = [p for p in (into / rel).iterdir() if (p / "__init__.py").exists()]
    if len(packages) != 1:
        raise SystemExit(f"{plugin} at {rev}: expected one package, found {[p.name for p in packages]}")
    pkg = packages[0]
    name = pkg.name + "_ab_old"
    spec = importlib.util.spec_from_file_location(name, pkg / "__init__.py", submodule_search_locations=[str(pkg)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def cpu(fn, mod):
    with PassContext(opt_level=3):
        t0 = time.process_time()
        out = fn(mod)
        return time.process_time() - t0, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", required=True)
    ap.add_argument("--plugin", required=True, help="the plugin's directory, e.g. plugins/passhost-fold-constant")
    ap.add_argument("--factory", required=True, help="the pass constructor in the plugin package")
    ap.add_argument("--name", help="the registered pass name (default: --factory)")
    ap.add_argument("--families", default=",".join(BUILDERS), help=f"of {', '.join(BUILDERS)}")
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        old_pkg = load_old(args.rev, args.plugin, Path(tmp))
        old = getattr(old_pkg, args.factory)()
        new = passhost.passes.get(args.name or args.factory)
        print(f"{args.name or args.factory}: {args.rev} (old) vs the working tree (new), "
              f"{args.size:,} nominal nodes, median of {args.repeat} alternating runs, CPU seconds")
        print(f"{'family':10s} {'old':>9s} {'new':>9s} {'new/old':>8s}  outputs")
        for family in args.families.split(","):
            build = BUILDERS[family]
            times = {"old": [], "new": []}
            same = True
            for rep in range(args.repeat):
                order = (("old", old), ("new", new)) if rep % 2 == 0 else (("new", new), ("old", old))
                outs = {}
                for label, p in order:
                    mod = ir.infer_type(build(args.size))  # a fresh graph for every run
                    t, outs[label] = cpu(p, mod)
                    times[label].append(t)
                same = same and ir.structural_equal(outs["old"], outs["new"])
            o, n = statistics.median(times["old"]), statistics.median(times["new"])
            print(f"{family:10s} {o:9.4f} {n:9.4f} {n / o:8.2f}  {'equal' if same else 'DIFFER'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
