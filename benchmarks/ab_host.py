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

With ``--plugins``, the old side also takes the plugins' packages at ``REV`` (first on its
``sys.path``), for a change to the host and the passes together. The old side is the
working tree in which each file the commits ``REV..HEAD`` changed is as it was at ``REV``,
so uncommitted work in the tree (someone else's) is on both sides and only those commits
differ. Each repetition pairs one old and one new run per case; the table gives the median
of the per-pair ratios new/old and their quartiles (the figure to judge a change by).

Usage::

    python benchmarks/ab_host.py --rev HEAD~3 [--families chain,dag,resnet,dupdead]
        [--size 100000] [--repeat 5] [--passes] [--plugins]
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


def _child(host: str, families: str, n: int, shift: int, passes: bool = False, plugins: tuple = ()) -> dict:
    code = (f"import sys, json; sys.path[0:0] = {[host, *plugins]!r}; sys.path.insert(1, {str(ROOT)!r}); "
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
    ap.add_argument("--plugins", action="store_true", help="the old side takes the plugins at REV too")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.plugins:
            old_plugins = _old_tree(args.rev, tmp)
        else:
            git_tree(args.rev, ("passhost",), tmp, str(ROOT))
            old_plugins = ()
        sides = {"old": (tmp, old_plugins), "new": (str(ROOT), ())}
        res: dict = {"old": {}, "new": {}}
        for r in range(args.repeat):
            for tag in (("old", "new") if r % 2 == 0 else ("new", "old")):
                host, plugins = sides[tag]
                for case, t in _child(host, args.families, args.size, 7919 * r, args.passes, plugins).items():
                    res[tag].setdefault(case, []).append(t)
    print(f"host {'and plugins ' if args.plugins else ''}{'passes' if args.passes else 'walkers'}: "
          f"{args.rev} (old) vs the working tree (new), {args.size:,} nominal nodes, "
          f"{args.repeat} alternating runs (a different memory layout each), CPU ms")
    print(f"{'case':32s} {'old':>9s} {'new':>9s} {'new/old':>8s} {'quartiles':>12s}")
    for case in res["old"]:
        olds, news = res["old"][case], res["new"][case]
        ratios = sorted(b / a for a, b in zip(olds, news) if a > 0)
        q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
        old, new = statistics.median(olds) * 1e3, statistics.median(news) * 1e3
        print(f"{case:32s} {old:9.1f} {new:9.1f} {statistics.median(ratios):8.3f} {q[0]:6.3f}-{q[2]:.3f}")
    return 0


def _old_tree(rev: str, into: str) -> tuple:
    """The host and the plugins as the working tree has them, except the files the commits
    ``rev..HEAD`` changed, which are as they were at ``rev`` (see the module docs). Returns
    the plugin directories to put first on the old side's ``sys.path``."""
    import shutil

    dest = Path(into)
    for top in ("passhost", "plugins"):
        shutil.copytree(ROOT / top, dest / top, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    changed = subprocess.run(["git", "diff", "--name-only", f"{rev}..HEAD", "--", "passhost", "plugins"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for rel in changed:
        target = dest / rel
        old = subprocess.run(["git", "show", f"{rev}:{rel}"], cwd=ROOT, capture_output=True)
        if old.returncode:  # a file the commits added
            target.unlink(missing_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(old.stdout)
    return tuple(str(p) for p in sorted((dest / "plugins").iterdir()) if p.is_dir())


if __name__ == "__main__":
    raise SystemExit(main())
