"""``passhost bisect``: find the first pass that changes a module's results (private;
wired into :mod:`passhost.cli`).

The pipeline is flattened (nested :class:`~passhost.transform.Sequential` s that the
context would run are replaced by their passes; those it would skip are dropped) into
passes ``#1 .. #N``. The unoptimised module is evaluated with :func:`passhost.ir.evaluate`
on the inputs (seeded random arrays, or ``--inputs FILE.npz``) to get the reference.
Like LLVM's ``-opt-bisect-limit``, a binary search then runs prefixes of the flattened
pipeline and compares each prefix's results with the reference (``rtol``/``atol``):
the first pass of the shortest failing prefix is the guilty one. A prefix "fails" when
its results differ, when a pass raises, or when its output cannot be evaluated.

The search assumes that once results are wrong they stay wrong (as LLVM's does); it
runs each prefix from the cached output of the longest good prefix found so far and
evaluates about ``log2(N) + 1`` modules.

Exit status: 0 the guilty pass was found (its before/after IR is written to ``-o DIR``),
1 no pass changes the results, 2 bad usage or input (including a module whose
reference evaluation fails).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional


from . import ir, transform
from .errors import PasshostError
from .numerics import compare_outputs, evaluable, load_npz, random_inputs

__all__ = ["add_parser", "cmd_bisect", "flatten", "compare_results", "Bisection", "bisect"]


# -- comparing results ------------------------------------------------------------------------
def compare_results(got: Any, want: Any, rtol: float, atol: float) -> Optional[str]:
    """None when ``got`` matches ``want`` (nested tuples of arrays) within ``rtol``/``atol``
    (NaNs match NaNs), else a one-line description of the worst difference
    (:func:`passhost.numerics.compare_outputs`)."""
    diff = compare_outputs(got, want, rtol, atol)
    return None if diff is None else diff[2]


def seeded_inputs(mod: ir.IRModule, seed: int) -> list:
    """Uniform [-1, 1) arrays (integers in [-1, 1]) for ``main``'s parameters, seeded."""
    return random_inputs(mod, seed)


def load_inputs(mod: ir.IRModule, path: str) -> list:
    """Arrays for ``main``'s parameters from an ``.npz`` saved with names (no pickles)."""
    from .cli import CommandError

    arrays = load_npz(path, "--inputs", CommandError)
    names = [p.name_hint for p in mod["main"].params]
    missing = [n for n in names if n not in arrays]
    if missing:
        raise CommandError(f"--inputs {path!r} has no array for parameter %{missing[0]} of @main "
                           f"(it needs: {', '.join(names) or 'none'})")
    return [arrays[n] for n in names]


# -- flattening --------------------------------------------------------------------------------
def flatten(seq: Any, ctx: transform.PassContext, where: str = "") -> list:
    """``[(pass, where)]``: the leaf passes of ``seq`` in run order.

    A nested Sequential the context would skip is dropped; one it runs is replaced by
    the passes its own ``required`` names (resolved now) followed by its children.
    ``where`` names the enclosing Sequentials (``"FoldScaleAxis"``).
    """
    out: list = []
    stack = [(p, where) for p in reversed(seq.passes)]
    while stack:
        p, w = stack.pop()
        if isinstance(p, transform.Sequential):
            if not ctx.pass_enabled(p.info):
                continue
            inner = f"{w}/{p.info.name}" if w else p.info.name
            stack.extend((c, inner) for c in reversed(p.passes))
            stack.extend((transform.resolve_pass(r), w) for r in reversed(p.info.required))
        else:
            out.append((p, w))
    return out


# -- the search ---------------------------------------------------------------------------------
@dataclass
class Bisection:
    """The outcome: ``index`` is the 1-based number of the guilty pass (None: none found)."""

    passes: list
    index: Optional[int]
    reason: str = ""
    before: Optional[ir.IRModule] = None
    after: Optional[ir.IRModule] = None
    error: Optional[BaseException] = None
    evaluations: int = 0

    @property
    def guilty(self) -> Optional[Any]:
        return None if self.index is None else self.passes[self.index - 1][0]


def bisect(mod: ir.IRModule, leaves: list, ctx: transform.PassContext, inputs: list, *, rtol: float,
           atol: float, log: Callable[[str], None] = lambda line: None) -> Bisection:
    """Binary-search the first of ``leaves`` after which ``mod``'s results differ.

    :raises PasshostError: the unoptimised module cannot be evaluated (bad input)
    """
    try:
        want = ir.evaluate(mod, *inputs)
    except PasshostError as err:
        raise type(err)(f"cannot evaluate the input module: {' '.join(str(err).split())}") from None
    n = len(leaves)
    cache: dict = {0: mod}
    result = Bisection(leaves, None)

    def probe(k: int, lo: int) -> Optional[str]:
        """Run passes lo+1..k on the cached output of prefix lo; None if results match."""
        try:
            with ctx:
                out = transform.Sequential([p for p, _ in leaves[lo:k]])(cache[lo])
        except Exception as err:
            probe.error = err
            return f"pass raised {type(err).__name__}: {' '.join(str(err).split())}"
        probe.error = None
        cache[k] = out
        result.evaluations += 1
        try:
            got = ir.evaluate(evaluable(out), *inputs)
        except Exception as err:
            return f"the output cannot be evaluated: {type(err).__name__}: {' '.join(str(err).split())}"
        return compare_results(got, want, rtol, atol)

    probe.error = None
    lo, hi = 0, n
    why = probe(n, 0) if n else None
    log(f"passes 1..{n}: " + (why or "results match"))
    if why is None:
        return result
    hi_why, hi_error = why, probe.error
    while hi - lo > 1:
        mid = (lo + hi) // 2
        why = probe(mid, lo)
        log(f"passes 1..{mid}: " + (why or "results match"))
        if why is None:
            lo = mid
        else:
            hi, hi_why, hi_error = mid, why, probe.error
    result.index = hi
    result.reason = hi_why
    result.error = hi_error
    result.before = cache[lo]  # lo == hi - 1: the output of the last good prefix
    result.after = cache.get(hi)  # None when the guilty pass raised
    return result


# -- the command --------------------------------------------------------------------------------
def add_parser(sub: Any, examples: tuple) -> argparse.ArgumentParser:
    """Add the ``bisect`` sub-command to the ``passhost`` parser."""
    p = sub.add_parser("bisect", help="find the first pass of a pipeline that changes the results")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("input", nargs="?", metavar="INPUT", help="text-format module file ('-' for stdin)")
    src.add_argument("--example", choices=examples, help="a built-in workload instead of INPUT")
    p.add_argument("-p", "--pipeline", metavar="PIPELINE", required=True, help="the passes to bisect")
    p.add_argument("-O", dest="opt_level", type=int, default=2, metavar="N",
                   help="PassContext opt_level (default 2)")
    p.add_argument("--disable", action="append", default=[], metavar="NAME", help="disable a pass (repeatable)")
    p.add_argument("--require", action="append", default=[], metavar="NAME",
                   help="force a pass on regardless of -O (repeatable)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="PassContext config option (repeatable)")
    p.add_argument("--params", metavar="FILE.npz", help="bind arrays to main's parameters by name first")
    p.add_argument("--inputs", metavar="FILE.npz",
                   help="main's inputs by parameter name (default: seeded uniform random arrays)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--rtol", type=float, default=1e-5, help="relative tolerance (default 1e-5)")
    p.add_argument("--atol", type=float, default=1e-5, help="absolute tolerance (default 1e-5)")
    p.add_argument("-o", "--output-dir", dest="output_dir", metavar="DIR",
                   help="where to write before.txt/after.txt (default ./passhost-bisect-<timestamp>)")
    p.set_defaults(func=cmd_bisect)
    return p


def _label(p: Any, where: str) -> str:
    return f"{p.info.name} (in {where})" if where else p.info.name


def cmd_bisect(args: argparse.Namespace) -> int:
    """Run ``passhost bisect``; returns the exit status."""
    from . import cli
    from .pipeline import pipeline

    cli._registry(args)
    if args.rtol < 0 or args.atol < 0:
        raise cli.CommandError("--rtol and --atol must not be negative")
    seq = pipeline(args.pipeline)
    ctx = transform.PassContext(opt_level=args.opt_level, required_pass=args.require,
                                disabled_pass=args.disable, config=cli._config(args.config))
    mod = cli._example(args.example) if args.example else cli._load_input(args.input)
    if args.params:
        mod = cli._bind_params(mod, args.params)
    if "main" not in {gv.name_hint for gv in mod.functions}:
        raise cli.CommandError("bisect evaluates @main, but the module has no @main")
    mod = ir.infer_type(mod)
    inputs = load_inputs(mod, args.inputs) if args.inputs else seeded_inputs(mod, args.seed)
    with ctx:
        leaves = flatten(seq, ctx)
    print("passes: " + ", ".join(f"#{i} {_label(p, w)}" for i, (p, w) in enumerate(leaves, 1)))
    found = bisect(mod, leaves, ctx, inputs, rtol=args.rtol, atol=args.atol, log=print)
    if found.index is None:
        print(f"no pass changes the results: all {len(leaves)} passes agree with the unoptimised module "
              f"(rtol={args.rtol:g}, atol={args.atol:g})")
        return cli.ExitCode.PASS_FAILED
    p, where = leaves[found.index - 1]
    print(f"first bad pass: #{found.index} {_label(p, where)}: {found.reason}")
    out_dir = args.output_dir or os.path.join(
        os.curdir, "passhost-bisect-" + time.strftime("%Y%m%d-%H%M%S"))
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as err:
        raise cli.CommandError(f"cannot create {out_dir!r}: {err.strerror or err}") from None
    written = []
    for name, module in (("before.txt", found.before), ("after.txt", found.after)):
        if module is None:
            continue
        path = os.path.join(out_dir, name)
        text = ir.astext(module, show_meta_data=True).rstrip("\n") + "\n"
        cli._write_atomic(path, text)
        written.append(path)
    print("wrote " + " and ".join(written))
    sys.stdout.flush()
    return cli.ExitCode.OK
