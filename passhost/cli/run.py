"""``passhost run``: read a module, run a pipeline over it, print or write the result."""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from .. import ir, transform
from .._reproducer import CrashTracker
from ..errors import PasshostError, PassNotFound
from . import reproduce
from .common import EXAMPLES, CommandError, ExitCode, bind_params, example, load_input, one_line, parse_config, \
    registry, write_atomic

__all__ = ["add_parser", "cmd_run", "run_failure"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``run`` sub-command."""
    p = sub.add_parser("run", help="run a pipeline over a text-format module and print the result")
    src = p.add_mutually_exclusive_group()  # one is required: checked by reproduce.apply_reproduce
    src.add_argument("input", nargs="?", metavar="INPUT", help="text-format module file ('-' for stdin)")
    src.add_argument("--example", choices=EXAMPLES, help="a built-in workload instead of INPUT")
    src.add_argument("--reproduce", metavar="DIR",
                     help="replay a crash reproducer directory written by a failed run")
    p.add_argument("-p", "--pipeline", metavar="PIPELINE",
                   help="passes to run, e.g. 'FoldConstant,FuseOps(fuse_opt_level=2)' "
                        "(default: the default pipeline for -O)")
    p.add_argument("-O", dest="opt_level", type=int, default=None, metavar="N",
                   help="PassContext opt_level (default 2)")
    p.add_argument("--disable", action="append", default=[], metavar="NAME", help="disable a pass (repeatable)")
    p.add_argument("--require", action="append", default=[], metavar="NAME",
                   help="force a pass on regardless of -O (repeatable)")
    p.add_argument("--instrument", action="append", default=[], metavar="NAME(k=v)",
                   help="attach an instrument, e.g. timing (repeatable)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="PassContext config option; VALUE is a Python literal or else a string (repeatable)")
    p.add_argument("--params", metavar="FILE.npz", help="bind arrays to main's parameters by name")
    p.add_argument("--print-pipeline", action="store_true", help="print the pipeline text and exit")
    p.add_argument("--no-meta-data", dest="meta_data", action="store_false",
                   help="omit the #[metadata] section (constant data) from the output")
    p.add_argument("-o", "--output", metavar="OUT", help="write the result here (atomically) instead of stdout")
    p.add_argument("--report", metavar="OUT.json",
                   help="write a JSON report of every scheduled pass (needs the passhost-report plugin)")
    p.add_argument("--crash-dir", metavar="DIR",
                   help="where a failing pass leaves its reproducer (default ./passhost-crash-<timestamp>)")
    p.add_argument("--no-crash-dir", action="store_true", help="write no reproducer when a pass fails")
    p.set_defaults(func=cmd_run)
    return p


def run_failure(err: BaseException) -> tuple:
    """Exit status and one-line message for an error raised while the pipeline ran."""
    name = transform.failed_pass(err)
    hook = getattr(err, "passhost_hook", None)
    detail = f"{type(err).__name__}: {one_line(err)}"
    if isinstance(err, PassNotFound):  # a required pass is not installed: fix the environment
        return ExitCode.USAGE_ERROR, one_line(err) + (f" (required by pass {name!r})" if name else "")
    if name is not None:
        if isinstance(err, PasshostError) and name in str(err):
            return ExitCode.PASS_FAILED, one_line(err)
        return ExitCode.PASS_FAILED, f"pass {name!r} failed: {detail}"
    if hook is not None:
        return ExitCode.PASS_FAILED, f"instrument hook {hook} failed: {detail}"
    if isinstance(err, PasshostError):
        return err.exit_code, one_line(err)
    return ExitCode.PASS_FAILED, f"the pipeline failed: {detail}"


def cmd_run(args: argparse.Namespace) -> int:
    """Run ``passhost run``; returns the exit status."""
    from .. import instruments as instruments_facade
    from ..pipeline import default_pipeline, parse_element, pipeline

    reg = registry(args)
    repro = reproduce.apply_reproduce(args)  # --reproduce DIR fills the pipeline and settings
    if args.pipeline is not None:
        seq = pipeline(args.pipeline)
    else:
        seq = default_pipeline(args.opt_level, required=tuple(args.require))
    if args.print_pipeline:
        print(seq.spec)
        return ExitCode.OK
    insts = []
    for text in args.instrument:
        try:
            element = parse_element(text)
        except PasshostError as err:
            raise CommandError(f"--instrument {text!r}: {err}") from None
        insts.append(instruments_facade.get(element.name, **element.kwargs))
    report = instruments_facade.get("report") if args.report else None
    tracker = CrashTracker(seq) if reproduce.wants_reproducer(args) else None
    ctx = transform.PassContext(opt_level=args.opt_level, required_pass=args.require,
                                disabled_pass=args.disable,
                                instruments=[i for i in (*insts, report, tracker) if i is not None],
                                config=repro.config if repro else parse_config(args.config))
    for path in (args.output, args.report):
        directory = os.path.dirname(os.path.abspath(path)) if path else None
        if directory and not os.path.isdir(directory):
            raise CommandError(f"cannot write {path!r}: the directory {directory!r} does not exist")
    # the input comes last: every cheap argument is checked before a workload is built
    if repro is not None:
        mod = repro.module
    else:
        mod = example(args.example) if args.example else load_input(args.input)
    if args.params:
        mod = bind_params(mod, args.params)
    if tracker is not None:
        tracker.module = mod
    try:
        with ctx:
            out = seq(mod)
            # reports are read inside the context: instruments may drop them on exit (timing)
            reports = [inst.render() for inst in insts if callable(getattr(inst, "render", None))]
    except Exception as err:
        if args.traceback:
            raise
        code, message = run_failure(err)
        if report is not None:
            write_atomic(args.report, json.dumps(report.as_dict(), indent=2) + "\n")
        if tracker is not None and code == ExitCode.PASS_FAILED and transform.failed_pass(err) is not None:
            message += reproduce.save_after_failure(args.crash_dir, args.instrument, tracker, seq, ctx, reg,
                                                    err, message)
        print(f"passhost: error: {message}", file=sys.stderr)
        return code
    if report is not None:
        write_atomic(args.report, json.dumps(report.as_dict(), indent=2) + "\n")
    for rendered in reports:
        if rendered:
            print(rendered.rstrip("\n"), file=sys.stderr)
    text = ir.astext(out, show_meta_data=args.meta_data)
    if not text.endswith("\n"):
        text += "\n"
    if args.output:
        write_atomic(args.output, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return ExitCode.OK
