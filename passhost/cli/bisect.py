"""``passhost bisect``: find the first pass of a pipeline that changes a module's
results (the search itself is :func:`passhost._bisect.bisect`)."""
from __future__ import annotations

import argparse
import os
import time
from typing import Any

from .. import ir, transform
from .._bisect import bisect, flatten, load_inputs, seeded_inputs
from ..pipeline import default_pipeline, pipeline
from .run import run_config
from .common import EXAMPLES, CommandError, ExitCode, bind_params, example, load_input, opt_level, registry, stdout, \
    write_atomic

__all__ = ["add_parser", "cmd_bisect"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``bisect`` sub-command to the ``passhost`` parser."""
    p = sub.add_parser("bisect", help="find the first pass of a pipeline that changes the results")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("input", nargs="?", metavar="INPUT", help="text-format module file ('-' for stdin)")
    src.add_argument("--example", choices=EXAMPLES, help="a built-in workload instead of INPUT")
    p.add_argument("-p", "--pipeline", metavar="PIPELINE",
                   help="the passes to bisect (default: the default pipeline at -O, as `passhost run` runs it)")
    p.add_argument("-O", dest="opt_level", type=opt_level, default=2, metavar="N",
                   help="PassContext opt_level, 0 to 4 (default 2)")
    p.add_argument("--disable", action="append", default=[], metavar="NAME", help="disable a pass (repeatable)")
    p.add_argument("--require", action="append", default=[], metavar="NAME",
                   help="force a pass on regardless of -O (repeatable)")
    p.add_argument("--no-verify-each", action="store_true", help="do not verify the module after every pass")
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
    registry(args)
    if args.rtol < 0 or args.atol < 0:
        raise CommandError("--rtol and --atol must not be negative")
    seq = pipeline(args.pipeline) if args.pipeline else default_pipeline(args.opt_level, required=args.require)
    ctx = transform.PassContext(opt_level=args.opt_level, required_pass=args.require,
                                disabled_pass=args.disable, config=run_config(args))
    mod = example(args.example) if args.example else load_input(args.input)
    if args.params:
        mod = bind_params(mod, args.params)
    if "main" not in {gv.name_hint for gv in mod.functions}:
        raise CommandError("bisect evaluates @main, but the module has no @main")
    mod = ir.infer_type(mod)
    inputs = load_inputs(mod, args.inputs) if args.inputs else seeded_inputs(mod, args.seed)
    with ctx:
        leaves = flatten(seq, ctx)
    print("passes: " + ", ".join(f"#{i} {_label(p, w)}" for i, (p, w) in enumerate(leaves, 1)), file=stdout())
    found = bisect(mod, leaves, ctx, inputs, rtol=args.rtol, atol=args.atol, log=lambda line: print(line, file=stdout()))
    if found.index is None:
        print(f"no pass changes the results: all {len(leaves)} passes agree with the unoptimised module "
              f"(rtol={args.rtol:g}, atol={args.atol:g})", file=stdout())
        return ExitCode.PASS_FAILED
    p, where = leaves[found.index - 1]
    print(f"first bad pass: #{found.index} {_label(p, where)}: {found.reason}", file=stdout())
    out_dir = args.output_dir or os.path.join(
        os.curdir, "passhost-bisect-" + time.strftime("%Y%m%d-%H%M%S"))
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as err:
        raise CommandError(f"cannot create {out_dir!r}: {err.strerror or err}") from None
    written = []
    for name, module in (("before.txt", found.before), ("after.txt", found.after)):
        if module is None:
            continue
        path = os.path.join(out_dir, name)
        text = ir.astext(module, show_meta_data=True).rstrip("\n") + "\n"
        write_atomic(path, text)
        written.append(path)
    print("wrote " + " and ".join(written), file=stdout())
    stdout().flush()
    return ExitCode.OK
