"""``passhost check-rules [PASS...]``: test that the rules of passes made of rules keep the
numbers (:mod:`passhost.ir.pattern.soundness`); exit 1 when one does not::

    $ passhost check-rules FuseGelu
    PASS      RULE                TRIALS  FIRED  SECONDS  RESULT
    FuseGelu  erf_gelu_x_half     673     56     3.2      sound
"""
from __future__ import annotations

import argparse

from .common import CommandError, ExitCode, print_table, stdout

__all__ = ["add_parser", "cmd_check_rules"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check-rules", help="check that the rules of passes keep the numbers",
                       description="Instantiate each rule's pattern with random shapes and values, rewrite, "
                                   "and compare the interpreter's results before and after. Exit 1 when a "
                                   "rule changes the numbers or the type, printing the smallest failing input.")
    p.add_argument("passes", nargs="*", metavar="PASS", help="passes made of rules (default: every installed one)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--seconds", type=float, default=6.0, metavar="S", help="time budget per rule (default 6)")
    p.set_defaults(func=cmd_check_rules)


def _rules(name: str, explicit: bool) -> tuple:
    from .. import passes

    rules = passes.rules(name)
    if not rules:
        if explicit:
            raise CommandError(f"pass {name!r} is not made of rules; check-rules checks passes built with "
                               "passhost.transform.pattern_pass")
        return ()
    return rules


def cmd_check_rules(args: argparse.Namespace) -> int:
    from .. import passes
    from ..ir.pattern.soundness import check_rule

    names = list(args.passes) or list(passes.names())
    todo = [(n, r) for n in names for r in _rules(n, bool(args.passes))]
    if not todo:
        print("no installed pass is made of rules", file=stdout())
        return ExitCode.OK
    rows, bad = [], []
    for name, r in todo:
        report = check_rule(r, seed=args.seed, max_seconds=args.seconds)
        result = {True: "sound", False: "UNSOUND", None: "not exercised"}[report.sound]
        rows.append((name, r.name, str(report.trials), str(report.fired), f"{report.seconds:.1f}", result))
        if report.counterexample is not None:
            bad.append((name, r.name, report.counterexample))
    print_table([("PASS", "RULE", "TRIALS", "FIRED", "SECONDS", "RESULT")] + rows)
    for name, rule_name, example in bad:
        print(f"\n{name}/{rule_name}: {example}", file=stdout())
    quiet = sum(1 for row in rows if row[-1] == "not exercised")
    print(f"\n{len(rows)} rule(s): {len(rows) - len(bad) - quiet} sound, {len(bad)} unsound, {quiet} not exercised", file=stdout())
    return ExitCode.PASS_FAILED if bad else ExitCode.OK
