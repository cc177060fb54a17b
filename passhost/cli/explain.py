"""``passhost explain PASS INPUT``: for a pass made of rules, why each rule did or did not
fire at each node of the input (``--at %N`` or ``--op NAME`` narrow it to some nodes)::

    $ passhost explain FuseGelu model.onnx --op multiply
    %12 = multiply(%11, %10)
      erf_gelu_x_half     no: arg 1 of multiply: expected operator add, found %11 = erf(...)
      erf_gelu_half_erf   matched; rewrites it to nn.gelu
"""
from __future__ import annotations

import argparse
from typing import Optional

from .. import ir
from ..ir.pattern import DFPatternCallback, root_ops, why_not
from ..ir.pattern.match import _Matcher
from .common import CommandError, ExitCode, load_input, parse_input_shapes, stdout

__all__ = ["add_parser", "cmd_explain", "explain_rules"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("explain", help="say why each rule of a pass fires or not, node by node",
                       description="For a pass made of rules (transform.pattern_pass), report for every "
                                   "node where a rule is tried whether it matches, and if not, the "
                                   "deepest part of its pattern that failed and why.")
    p.add_argument("pass_name", metavar="PASS", help="a pass made of rules (see `passhost info PASS`)")
    p.add_argument("input", metavar="INPUT", help="a module or model file ('-': text on stdin)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--at", metavar="%N", help="only the node printed as %%N in the input's text")
    where.add_argument("--op", metavar="NAME", help="only calls of this operator")
    p.add_argument("--from", dest="from_format", metavar="FORMAT", help="read INPUT in this format (default: by suffix)")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D1,D2,...",
                   help="concrete shape of a model input with symbolic dimensions (repeatable)")
    p.set_defaults(func=cmd_explain)


def _rules_of(name: str) -> tuple:
    from .. import passes

    rules = passes.rules(name)
    if not rules:
        raise CommandError(f"pass {name!r} is not made of rules, so there is nothing to explain; "
                           "explain works on passes built with passhost.transform.pattern_pass")
    return rules


def _bound_lines(mod: ir.IRModule) -> dict:
    """``{"%N": "%N = op(...) /* ty=... */"}`` from one print of the module."""
    lines = {}
    for line in ir.pretty_print(mod).splitlines():
        line = line.strip()
        if line.startswith("%") and " = " in line:
            lines[line.split(" = ", 1)[0]] = line.rstrip(";")
    return lines


def _describe(node: ir.Expr, names: dict, lines: dict) -> str:
    label = names.get(node)
    if label in lines:
        return lines[label]
    text = str(node).strip().splitlines()[-1]  # an unbound node (a function's result) prints on its own
    return f"{label} = {text}" if label else text


def explain_rules(rules: tuple, mod: ir.IRModule, at: str = "", op: str = "",
                  names: Optional[dict] = None) -> list:
    """``[(node, [(rule name, verdict), ...]), ...]`` for the nodes of ``mod`` where a rule
    could be rooted (one of its root operators; every node for a rule rooted anywhere),
    narrowed to the node printed ``at`` or to calls of ``op``. A verdict is ``"no: <why>"``,
    ``"matched; its checks refused it"`` or ``"matched; rewrites it to <op>"``. The module
    must be typed; nothing in it is changed. ``names``: ``ir.printed_names(mod)``, when the
    caller has it."""
    if names is None:
        names = ir.printed_names(mod)
    full = {n: f"{label} = {n.op.name}(...)" if isinstance(n, ir.Call) and isinstance(n.op, ir.Op) else label
            for n, label in names.items()}
    rows = []
    for gv in mod.get_global_vars():
        for node in ir.post_order(mod[gv].body):
            if at and names.get(node) != at:
                continue
            if op and not (isinstance(node, ir.Call) and isinstance(node.op, ir.Op) and node.op.name == op):
                continue
            verdicts = []
            for r in rules:
                roots = root_ops(r.pattern)
                if roots is not None and not (isinstance(node, ir.Call) and isinstance(node.op, ir.Op)
                                              and node.op.name in roots):
                    continue
                verdicts.append((r.name, _verdict(r, node, full)))
            if verdicts:
                rows.append((node, verdicts))
    return rows


def _verdict(rule: DFPatternCallback, node: ir.Expr, names: dict) -> str:
    m = _Matcher()
    if not m.match(rule.pattern, node):
        return "no: " + why_not(rule.pattern, node, names)
    out = rule.callback(node, node, {p: [e] for p, e in m.memo.items()})
    if out is None or out is node:
        return "matched; its checks refused it (the callback returned nothing)"
    what = out.op.name if isinstance(out, ir.Call) and isinstance(out.op, ir.Op) else type(out).__name__
    return f"matched; rewrites it to {what}"


def cmd_explain(args: argparse.Namespace) -> int:
    rules = _rules_of(args.pass_name)
    if args.at and not (args.at.startswith("%") and args.at[1:].isdigit()):
        raise CommandError(f"--at {args.at!r}: expected a node number as printed, e.g. --at %7")
    if args.op:
        try:
            ir.Op.get(args.op)
        except Exception:  # noqa: BLE001 - an unknown name is a usage error
            raise CommandError(f"--op {args.op!r}: no such operator (see docs/operators.md)") from None
    mod = ir.infer_type(load_input(args.input, args.from_format, parse_input_shapes(args.input_shape) or None))
    names = ir.printed_names(mod)
    rows = explain_rules(rules, mod, at=args.at or "", op=args.op or "", names=names)
    if not rows:
        where = f"node {args.at}" if args.at else f"calls of {args.op}" if args.op else "the input"
        print(f"no rule of {args.pass_name} is tried at {where}: their patterns are rooted at "
              + ", ".join(sorted({o for r in rules for o in (root_ops(r.pattern) or {'any node'})})), file=stdout())
        return ExitCode.OK
    width = max(len(name) for _, vs in rows for name, _ in vs)
    lines = _bound_lines(mod)
    for node, verdicts in rows:
        print(_describe(node, names, lines), file=stdout())
        for name, verdict in verdicts:
            print(f"  {name:<{width}}  {verdict}", file=stdout())
    return ExitCode.OK
