"""The command-line side of crash reproducers: ``passhost run --reproduce DIR`` and the
directory a failing ``passhost run`` leaves (the files themselves are written and read
by :mod:`passhost._reproducer`)."""
from __future__ import annotations

import argparse
import sys
from typing import Any, Optional

from .. import transform
from .._reproducer import CrashTracker, Reproducer, ReproducerError, default_crash_dir, load_reproducer, \
    remaining_pipeline, write_reproducer
from ..errors import PasshostError
from .common import CommandError

__all__ = ["apply_reproduce", "wants_reproducer", "save_after_failure"]


def apply_reproduce(args: argparse.Namespace) -> Optional[Reproducer]:
    """For ``passhost run --reproduce DIR``: load DIR and take the pipeline, opt_level,
    disabled/required passes and instruments from it. Also settles ``-O``'s default (2).

    :raises ReproducerError: DIR is unreadable, or options that DIR fixes were given too
    """
    if args.reproduce is None:
        if args.input is None and args.example is None:
            stdin = sys.stdin
            if stdin is None or stdin.closed or stdin.isatty():
                raise CommandError("one of the arguments INPUT --example is required (or --reproduce DIR), "
                                   "or pipe a module into stdin (see `passhost run --help`)")
            args.input = "-"  # like opt: with nothing named, the module comes from stdin
        if args.opt_level is None:
            args.opt_level = 2
        return None
    given = [opt for opt, value in (("-p", args.pipeline), ("-O", args.opt_level), ("--disable", args.disable),
                                    ("--require", args.require), ("--config", args.config),
                                    ("--instrument", args.instrument), ("--params", args.params))
             if value not in (None, [])]
    if given:
        raise ReproducerError(f"--reproduce takes the pipeline and its settings from {args.reproduce!r}; "
                              f"drop {', '.join(given)} (or edit the files there)")
    repro = load_reproducer(args.reproduce)
    args.pipeline = repro.pipeline
    args.opt_level = repro.opt_level
    args.disable = repro.disabled
    args.require = repro.required
    args.instrument = repro.instruments
    return repro


def wants_reproducer(args: argparse.Namespace) -> bool:
    """Whether a failing pass should leave a reproducer (not when replaying one, unless
    ``--crash-dir`` names where)."""
    if args.no_crash_dir:
        return False
    return args.reproduce is None or args.crash_dir is not None


def save_after_failure(crash_dir: Optional[str], instruments: list, tracker: CrashTracker, seq: Any,
                       ctx: transform.PassContext, registry: Any, err: BaseException, message: str) -> str:
    """Write the reproducer of a failed run to ``crash_dir`` (default: a new
    ``passhost-crash-<timestamp>`` under the system temp dir); returns the text to append
    to the error line."""
    path = crash_dir or default_crash_dir()
    try:
        write_reproducer(path, module=tracker.module, pipeline=remaining_pipeline(seq, tracker.next_index),
                         ctx=ctx, instruments=list(instruments), registry=registry,
                         failed_pass=transform.failed_pass(err), error=message)
    except PasshostError as why:
        return f" (no reproducer written: {why})"
    except Exception as why:  # e.g. the module cannot be printed
        return f" (no reproducer written: {type(why).__name__}: {' '.join(str(why).split())})"
    return f" (reproducer written to {path}; replay with: passhost run --reproduce {path})"
