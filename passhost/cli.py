"""The ``passhost`` command: list the installed plugins, describe one, run a pipeline.

Exit status (:class:`ExitCode`): 0 success, 1 a pass (or instrument) failed, 2 bad
usage or bad input. Every error is one line on stderr, never a traceback (pass
``--traceback`` to see one when debugging a plugin).
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from enum import IntEnum
from typing import Any, Optional, Sequence

from . import _reproducer, ir, transform
from .errors import ParseError, PasshostError, PassNotFound, PluginConflict, PluginLoadError
from .io import write_text_atomic

__all__ = ["ExitCode", "main", "build_parser"]

EXAMPLES = ("tutorial", "resnet18", "resnet50")


class ExitCode(IntEnum):
    """Exit status of the ``passhost`` command."""

    OK = 0
    PASS_FAILED = 1
    USAGE_ERROR = 2


class CommandError(PasshostError):
    """Bad command-line usage or unreadable input (exit 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise CommandError(f"{message} (see `{self.prog} --help`)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``passhost`` (also used to render docs/cli.md)."""
    parser = _Parser(prog="passhost", description="Relay-style graph passes, every pass a plugin.")
    parser.add_argument("--strict-plugins", action="store_true",
                        help="fail when any plugin is broken or two plugins clash, instead of listing them")
    parser.add_argument("--traceback", action="store_true", help="show the Python traceback of an error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("list", help="list installed passes, instruments and broken plugins")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_cmd_list)

    p = sub.add_parser("info", help="describe one pass or instrument")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(func=_cmd_info)

    p = sub.add_parser("run", help="run a pipeline over a text-format module and print the result")
    src = p.add_mutually_exclusive_group()  # one is required: checked by _reproducer.apply_reproduce
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
    p.set_defaults(func=_cmd_run)
    from ._bisect import add_parser as add_bisect_parser

    add_bisect_parser(sub, EXAMPLES)
    return parser


# -- helpers ----------------------------------------------------------------------------
def _registry(args: argparse.Namespace) -> Any:
    from .registry import get_registry

    reg = get_registry()
    if args.strict_plugins:
        if reg.broken:
            raise PluginLoadError(reg.broken[0].message + " (--strict-plugins)")
        if reg.conflicts:
            raise PluginConflict(reg.conflicts[0].message + " (--strict-plugins)")
    return reg


def _one_line(err: BaseException) -> str:
    if isinstance(err, ParseError) and err.line:
        return f"{err.source_name}:{err.line}:{err.column}: error: {err.message}"
    text = " ".join(str(err).split())
    return text or type(err).__name__


def _dash(value: Any) -> str:
    return "-" if value in (None, "", ()) else str(value)


# -- list / info ----------------------------------------------------------------------------
def _cmd_list(args: argparse.Namespace) -> int:
    reg = _registry(args)
    passes = reg.pass_records()
    instruments = reg.instrument_records()
    if args.json:
        doc = {
            "passes": [r.as_dict() for r in passes],
            "instruments": [r.as_dict() for r in instruments],
            "configs": [r.as_dict() for r in reg.config_records()],
            "broken": [b.as_dict() for b in reg.broken],
            "conflicts": [c.as_dict() for c in reg.conflicts],
            "disabled": [s.as_dict() for s in reg.disabled],
        }
        print(json.dumps(doc, indent=2))
        return ExitCode.OK
    rows = [("NAME", "KIND", "OPT", "REQUIRED", "DISTRIBUTION", "SUMMARY")]
    for r in passes:
        rows.append((r.name, "pass", str(r.opt_level), _dash(",".join(r.required)), r.source.requirement, r.summary))
    for r in instruments:
        rows.append((r.name, "instrument", "-", "-", r.source.requirement, r.summary))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[5])
    if len(rows) == 1:
        print("(no passes or instruments installed: pip install a passhost plugin, "
              "e.g. passhost-fold-constant)")
    for title, items in (("broken plugins", [b.message for b in reg.broken]),
                         ("conflicts", [c.message for c in reg.conflicts]),
                         ("disabled plugins", [f"{s.describe()} (PASSHOST_DISABLE_PLUGINS)" for s in reg.disabled])):
        if items:
            print(f"\n{title}:")
            for line in items:
                print(f"  {line}")
    if not reg.autoload:
        print("\nplugin autoloading is disabled (PASSHOST_DISABLE_PLUGIN_AUTOLOAD)")
    return ExitCode.OK


def _cmd_info(args: argparse.Namespace) -> int:
    from .errors import InstrumentNotFound, PassNotFound

    reg = _registry(args)
    try:
        record = reg.pass_record(args.name)
    except PassNotFound as pass_err:
        try:
            record = reg.instrument_record(args.name)
        except InstrumentNotFound:
            raise pass_err from None
    fields = [("name", record.name), ("kind", record.kind)]
    if record.kind == "pass":
        entry = record.entry
        fields += [("opt_level", record.opt_level), ("required", ", ".join(record.required)),
                   ("default pipeline", "yes" if entry.default else "no"),
                   ("after", ", ".join(entry.after)), ("before", ", ".join(entry.before))]
    fields += [("distribution", record.source.requirement), ("plugin", record.source.name),
               ("summary", record.summary)]
    for key, value in fields:
        print(f"{key + ':':<18}{_dash(value)}")
    doc = getattr(record.entry.factory, "__doc__", None)
    if not (isinstance(doc, str) and doc.strip()) and record.kind == "pass":
        doc = getattr(getattr(record.build(), "pass_func", None), "__doc__", None)
    if isinstance(doc, str) and doc.strip():
        import inspect

        print()
        print(inspect.cleandoc(doc))
    return ExitCode.OK


# -- run ----------------------------------------------------------------------------------
def _example(name: str) -> ir.IRModule:
    from . import testing

    if name == "tutorial":
        return ir.IRModule.from_expr(testing.example())
    mod, params = testing.resnet(int(name[len("resnet"):]))
    out = mod.copy()
    out["main"] = ir.bind_params_by_name(mod["main"], params)
    return out


def _load_input(path: str) -> ir.IRModule:
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
    except (OSError, UnicodeDecodeError) as err:
        raise CommandError(f"cannot read INPUT {path!r}: {getattr(err, 'strerror', None) or err}") from None
    return ir.parse(text, source_name="<stdin>" if path == "-" else path)


def _bind_params(mod: ir.IRModule, path: str) -> ir.IRModule:
    from .numerics import load_npz

    params = load_npz(path, "--params", CommandError)
    if "main" not in {gv.name_hint for gv in mod.functions}:
        raise CommandError("--params binds parameters of @main, but the module has no @main")
    known = {p.name_hint for p in mod["main"].params}
    unknown = sorted(set(params) - known)
    if unknown:
        raise CommandError(f"--params {path!r}: @main has no parameter named {', '.join(unknown)} "
                           f"(its parameters: {', '.join(sorted(known)) or 'none'})")
    out = mod.copy()
    out["main"] = ir.bind_params_by_name(mod["main"], params)
    return out


def _config(items: Sequence[str]) -> dict:
    config = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise CommandError(f"--config needs KEY=VALUE, got {item!r}")
        try:
            value = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            value = text
        config[key.strip()] = value
    return config


def _write_atomic(path: str, text: str) -> None:
    """:func:`passhost.io.write_text_atomic`, with a failure as a :class:`CommandError`."""
    try:
        write_text_atomic(path, text)
    except OSError as err:
        raise CommandError(f"cannot write {path!r}: {err.strerror or err}") from None


def _run_failure(err: BaseException) -> tuple:
    """Exit status and one-line message for an error raised while the pipeline ran."""
    name = transform.failed_pass(err)
    hook = getattr(err, "passhost_hook", None)
    detail = f"{type(err).__name__}: {_one_line(err)}"
    if isinstance(err, PassNotFound):  # a required pass is not installed: fix the environment
        return ExitCode.USAGE_ERROR, _one_line(err) + (f" (required by pass {name!r})" if name else "")
    if name is not None:
        if isinstance(err, PasshostError) and name in str(err):
            return ExitCode.PASS_FAILED, _one_line(err)
        return ExitCode.PASS_FAILED, f"pass {name!r} failed: {detail}"
    if hook is not None:
        return ExitCode.PASS_FAILED, f"instrument hook {hook} failed: {detail}"
    if isinstance(err, PasshostError):
        return err.exit_code, _one_line(err)
    return ExitCode.PASS_FAILED, f"the pipeline failed: {detail}"


def _cmd_run(args: argparse.Namespace) -> int:
    from . import instruments as instruments_facade
    from .pipeline import default_pipeline, parse_element, pipeline

    registry = _registry(args)
    repro = _reproducer.apply_reproduce(args)  # --reproduce DIR fills the pipeline and settings
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
    tracker = _reproducer.CrashTracker(seq) if _reproducer.wants_reproducer(args) else None
    ctx = transform.PassContext(opt_level=args.opt_level, required_pass=args.require,
                                disabled_pass=args.disable,
                                instruments=[i for i in (*insts, report, tracker) if i is not None],
                                config=repro.config if repro else _config(args.config))
    for path in (args.output, args.report):
        directory = os.path.dirname(os.path.abspath(path)) if path else None
        if directory and not os.path.isdir(directory):
            raise CommandError(f"cannot write {path!r}: the directory {directory!r} does not exist")
    # the input comes last: every cheap argument is checked before a workload is built
    if repro is not None:
        mod = repro.module
    else:
        mod = _example(args.example) if args.example else _load_input(args.input)
    if args.params:
        mod = _bind_params(mod, args.params)
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
        code, message = _run_failure(err)
        if report is not None:
            _write_atomic(args.report, json.dumps(report.as_dict(), indent=2) + "\n")
        if tracker is not None and code == ExitCode.PASS_FAILED and transform.failed_pass(err) is not None:
            message += _reproducer.save_after_failure(args, tracker, seq, ctx, registry, err, message)
        print(f"passhost: error: {message}", file=sys.stderr)
        return code
    if report is not None:
        _write_atomic(args.report, json.dumps(report.as_dict(), indent=2) + "\n")
    for rendered in reports:
        if rendered:
            print(rendered.rstrip("\n"), file=sys.stderr)
    text = ir.astext(out, show_meta_data=args.meta_data)
    if not text.endswith("\n"):
        text += "\n"
    if args.output:
        _write_atomic(args.output, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return ExitCode.OK


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the ``passhost`` command; returns the exit status."""
    parser = build_parser()
    traceback = argv is not None and "--traceback" in argv or argv is None and "--traceback" in sys.argv
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            raise CommandError("choose a command: list, info, run or bisect (see `passhost --help`)")
        return int(args.func(args))
    except PasshostError as err:
        if traceback:
            raise
        print(f"passhost: error: {_one_line(err)}", file=sys.stderr)
        return int(err.exit_code)
    except BrokenPipeError:
        # the reader went away (e.g. `passhost list | head`); exit quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return ExitCode.PASS_FAILED
    except KeyboardInterrupt:
        print("passhost: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # a bug in passhost or a plugin outside any pass
        if traceback:
            raise
        print(f"passhost: error: internal error {type(err).__name__}: {_one_line(err)} "
              "(rerun with --traceback and report it)", file=sys.stderr)
        return ExitCode.PASS_FAILED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
