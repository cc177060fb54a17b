"""``passhost run``: read a module, run a pipeline over it, print or write the result."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from typing import Any, Optional

from .. import ir, progress, transform, weights
from ..instrument import PassInstrument
from ..io import written_bytes
from .._reproducer import CrashTracker
from .._context import VERIFY_KEY
from ..errors import PassError, PasshostError, PassNotFound
from . import reproduce
from .progress import Progress, human_bytes
from .summary import Summary, count_module_ops, peak_memory
from .common import EXAMPLES, CommandError, ExitCode, bind_params, byte_size, example, load_input, load_options, \
    one_line, out_of_memory, parse_config, stdout, opt_level, parse_input_shapes, pass_names, registry, write_atomic

__all__ = ["add_parser", "cmd_run", "run_failure"]


RUN_EXAMPLES = """examples:
  passhost run --example tutorial -O3                 the default pipeline on a built-in program
  passhost run model.onnx -O3 -o model.opt.onnx       an ONNX model in and out
  passhost run m.txt -p FoldConstant,EliminateCommonSubexpr -O3 --instrument timing
  passhost run models/*.onnx -O3 -o out/ -j 2 --check a batch, checked against onnxruntime
  passhost run m.txt --print-pipeline -O3             what -O3 would run, as a -p text
  cat m.txt | passhost run - -o -                     stdin to stdout
"""


_LAYOUTS = ("one", "per-tensor", "inline")


def _layout(text: str) -> str:
    """``--external-data``'s value (argparse reads an INPUT given right after it as one)."""
    if text not in _LAYOUTS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a layout: give one of {', '.join(_LAYOUTS)} "
                                         "(and INPUT before --external-data when it takes no value)")
    return text


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``run`` sub-command."""
    p = sub.add_parser("run", help="run a pipeline over a module or model file and print or write the result",
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=RUN_EXAMPLES)
    src = p.add_mutually_exclusive_group()  # one is required: checked by reproduce.apply_reproduce
    # INPUT stays outside the group: argparse rejects an empty nargs="*" beside --example there
    p.add_argument("input", nargs="*", default=None, metavar="INPUT",
                     help="module or model file(s): text format ('-' for stdin), .onnx with passhost-onnx, ...; "
                          "several inputs need -o DIR/")
    src.add_argument("--example", choices=EXAMPLES, help="a built-in workload instead of INPUT")
    src.add_argument("--reproduce", metavar="DIR",
                     help="replay a crash reproducer directory written by a failed run")
    _pipeline_arguments(p)
    _output_arguments(p)
    _model_arguments(p)
    _weights_arguments(p)
    _batch_arguments(p)
    _checking_arguments(p)
    p.set_defaults(func=cmd_run)
    return p


def _pipeline_arguments(p: argparse.ArgumentParser) -> None:
    """-p, -O, --disable, --require, --instrument, --config, --params, --print-pipeline."""
    p.add_argument("-p", "--pipeline", metavar="PIPELINE",
                   help="passes to run, e.g. 'FoldConstant,FuseOps(fuse_opt_level=2)' "
                        "(default: the default pipeline for -O)")
    p.add_argument("-O", dest="opt_level", type=opt_level, default=None, metavar="N",
                   help="PassContext opt_level, 0 to 4 (default 2; -O3 runs every first-party pass)")
    p.add_argument("--disable", action="append", default=[], metavar="NAME[,NAME...]",
                   help="disable passes (a comma list; repeatable); unknown names are an error")
    p.add_argument("--require", action="append", default=[], metavar="NAME[,NAME...]",
                   help="force passes on regardless of -O (a comma list; repeatable)")
    p.add_argument("--instrument", action="append", default=[], metavar="NAME(k=v)",
                   help="attach an instrument, e.g. timing (repeatable)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="PassContext config option; VALUE is a Python literal or else a string (repeatable)")
    p.add_argument("--params", metavar="FILE.npz", help="bind arrays to main's parameters by name")
    p.add_argument("--print-pipeline", action="store_true", help="print the pipeline text and exit")


def _output_arguments(p: argparse.ArgumentParser) -> None:
    """--meta-data, -o, --from, --to."""
    meta = p.add_mutually_exclusive_group()
    meta.add_argument("--no-meta-data", dest="meta_data", action="store_false", default=None,
                      help="omit the #[metadata] section (constant data) from the output")
    meta.add_argument("--meta-data", dest="meta_data", action="store_true", default=None,
                      help="print the #[metadata] section even to a terminal (which gets the text "
                           "without it by default; files and pipes always get it)")
    p.add_argument("-o", "--output", metavar="OUT",
                   help="write the result here (atomically; the format by suffix) instead of stdout; "
                        "a directory (DIR/) takes one output per INPUT")
    p.add_argument("--from", dest="from_format", metavar="FORMAT", help="read INPUT in this format (default: by suffix)")
    p.add_argument("--to", dest="to_format", metavar="FORMAT", help="write OUT in this format (default: by suffix)")


def _model_arguments(p: argparse.ArgumentParser) -> None:
    """How a model file is read: --input-shape, --bind-dim, --keep-op."""
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D1,D2,...",
                   help="specialise a model input to a concrete shape (repeatable; dynamic axes are kept "
                        "without it)")
    p.add_argument("--bind-dim", action="append", default=[], metavar="NAME=VALUE",
                   help="specialise one size variable (an ONNX dim_param) everywhere it occurs (repeatable)")
    p.add_argument("--keep-op", action="append", default=[], metavar="OP[,OP...]",
                   help="ONNX: keep these standard operators as they are (e.g. LSTM,GRU: not unrolled into "
                        "their arithmetic); the passes leave them alone and the export writes them back (repeatable)")
    p.add_argument("--inline-functions", action="store_true",
                   help="ONNX: expand the model's local functions into the graph (by default each is kept: "
                        "optimised as a function and written back as one)")


def _weights_arguments(p: argparse.ArgumentParser) -> None:
    """How a model file is written: --opset, --target, --external-data, --inline-below, --weights-in-memory."""
    p.add_argument("--opset", type=int, metavar="N", help="ONNX opset of the written model (default: the input model's, within 13..23, "
                   "else 17; with --target onnxruntime 23 once a fusion made RMSNormalization/RotaryEmbedding/Attention)")
    p.add_argument("--target", choices=("onnx", "onnxruntime"), default=None,
                   help="ONNX output for a runtime: onnxruntime writes opset 23's fused operators and its "
                        "com.microsoft ones where they measured faster than the standard ones (SiLU as QuickGelu)")
    p.add_argument("--external-data", nargs="?", const="one", default=None, type=_layout, metavar="LAYOUT",
                   help="where ONNX weights go: one (the default when given alone: OUT.data beside the model), "
                        "per-tensor (OUT.<weight>.data each), inline (in OUT; one file anyway above 2 GB); "
                        "without it, the input's layout is kept")
    p.add_argument("--inline-below", type=byte_size, default=None, metavar="SIZE",
                   help="with external data, weights smaller than SIZE stay inside the model file (default 1K; "
                        "K, M, G are powers of 1024)")
    p.add_argument("--weights-in-memory", type=byte_size, default=None, metavar="SIZE",
                   help="new weights the passes compute (folded batch norms, scales) stay in memory up to SIZE in "
                        "all (default 256M); further ones go to a scratch file in the temporary directory and are "
                        "mapped back, so a model larger than memory folds one weight at a time")


def _batch_arguments(p: argparse.ArgumentParser) -> None:
    """Several INPUTs: -j, --executor, --transfer."""
    p.add_argument("-j", "--jobs", type=int, default=None, metavar="N",
                   help="run several INPUTs in N processes (default 1; with --executor dask: N workers)")
    p.add_argument("--executor", default="local", metavar="NAME[://ADDRESS]",
                   help="where several INPUTs run: local (the default: -j N processes here), dask (a Dask "
                        "LocalCluster, or the scheduler in DASK_SCHEDULER_ADDRESS), dask://HOST:PORT (a running "
                        "Dask scheduler); `passhost list` shows the installed executors")
    p.add_argument("--transfer", choices=("auto", "paths", "bytes"), default="auto",
                   help="how an executor on other machines gets the models: paths (the workers share this file "
                        "system), bytes (each model is sent, its output sent back); auto checks which works")


def _checking_arguments(p: argparse.ArgumentParser) -> None:
    """--check, --report, --crash-dir, --summary, --no-verify-each."""
    p.add_argument("--check", action="store_true",
                   help="compare the outputs of the result with the original's on random inputs "
                        "(onnxruntime for ONNX files when installed, else passhost's interpreter)")
    p.add_argument("--report", metavar="OUT.json",
                   help="write a JSON report of every scheduled pass (needs the passhost-report plugin)")
    p.add_argument("--crash-dir", metavar="DIR",
                   help="where a failing pass leaves its reproducer (default $TMPDIR/passhost-crash-<timestamp>)")
    p.add_argument("--no-crash-dir", action="store_true", help="write no reproducer when a pass fails")
    summary = p.add_mutually_exclusive_group()
    summary.add_argument("--summary", dest="summary", action="store_true", default=None,
                         help="print what each pass did (operator counts, time) on stderr at the end "
                              "(the default when stderr is a terminal)")
    summary.add_argument("--no-summary", dest="summary", action="store_false", default=None,
                         help="do not print the end-of-run summary")
    p.add_argument("--no-verify-each", action="store_true",
                   help="do not verify the module after every pass (verification names the pass that "
                        "leaves malformed IR; it is on by default, as in mlir-opt)")


def run_failure(err: BaseException) -> tuple:
    """Exit status and one-line message for an error raised while the pipeline ran."""
    name = transform.failed_pass(err)
    hook = getattr(err, "passhost_hook", None)
    detail = f"{type(err).__name__}: {one_line(err)}"
    instrument = getattr(err, "passhost_instrument", None)
    if hook is not None and instrument is not None:
        if isinstance(err, PassError) and instrument in str(err):  # already says who (a SystemExit, say)
            return ExitCode.PASS_FAILED, one_line(err)
        around = name or getattr(err, "passhost_hook_pass", None)
        during = f" during pass {around!r}" if around else ""
        return ExitCode.PASS_FAILED, f"{instrument} failed in {hook}{during}: {detail}"
    if isinstance(err, MemoryError):  # a size in the input no machine can hold: bad input, exit 2
        return ExitCode.USAGE_ERROR, out_of_memory(err, f" in pass {name!r}" + _provenance(name) if name else "")
    if isinstance(err, PassNotFound):  # a required pass is not installed: fix the environment
        return ExitCode.USAGE_ERROR, one_line(err) + (f" (required by pass {name!r})" if name else "")
    if name is not None:
        who = f"pass {name!r}" + _provenance(name)
        if isinstance(err, PasshostError) and f"pass {name!r}" in str(err):
            return ExitCode.PASS_FAILED, one_line(err).replace(f"pass {name!r}", who, 1)
        if isinstance(err, PasshostError) and name in str(err):
            return ExitCode.PASS_FAILED, one_line(err)
        return ExitCode.PASS_FAILED, f"{who} failed: {detail}"
    if hook is not None:
        return ExitCode.PASS_FAILED, f"instrument hook {hook} failed: {detail}"
    if isinstance(err, PasshostError):
        return err.exit_code, one_line(err)
    return ExitCode.PASS_FAILED, f"the pipeline failed: {detail}"


def run_config(args: argparse.Namespace) -> dict:
    """``--config`` values, with verify-each on unless ``--no-verify-each`` (an explicit
    ``--config passhost.verify_each=...`` wins)."""
    config = parse_config(args.config)
    config.setdefault(VERIFY_KEY, not getattr(args, "no_verify_each", False))
    return config


def _provenance(pass_name: str) -> str:
    """`` (from passhost-x==1.0)`` for an installed pass: who to report a failure to."""
    from ..registry import get_registry

    try:
        record = get_registry().pass_record(pass_name)
    except Exception:  # not registered (a pass built in Python), or a clash
        return ""
    return f" (from {record.source.requirement})" if record.source.distribution else ""


def _render(insts: list) -> list:
    """Each instrument's ``render()`` text; a failure or a non-string names the instrument."""
    from .._blame import blamed, instrument_label

    reports = []
    for inst in insts:
        render = getattr(inst, "render", None)
        if not callable(render):
            continue
        try:
            text = render()
        except BaseException as exc:
            raise blamed(exc, "render", inst) from None
        if text is not None and not isinstance(text, str):
            err = PassError(f"{instrument_label(inst)} failed in render: it returned {type(text).__name__}, "
                            "not a str (render() returns the report text, or None)")
            err.passhost_hook, err.passhost_instrument = "render", instrument_label(inst)
            raise err
        reports.append(text)
    return reports


def save_options(args: argparse.Namespace, path: str) -> dict:
    """The options ``ir.save`` gets for ``path`` from ``--no-meta-data``, ``--opset``, ``--external-data``,
    ``--target``."""
    from ..formats import format_for

    fmt = format_for(path, args.to_format, "save").name
    if fmt == "text":
        given = [o for o, v in (("--opset", args.opset), ("--external-data", args.external_data),
                                ("--inline-below", args.inline_below is not None), ("--target", args.target)) if v]
        if given:
            raise CommandError(f"{', '.join(given)} apply to ONNX output; {path!r} is written as text")
        return {"show_meta_data": args.meta_data is not False}
    options: dict = {}
    if args.opset is not None:
        options["opset"] = args.opset
    if args.external_data:
        options["external_data"] = args.external_data
    if args.inline_below is not None:
        options["inline_below"] = args.inline_below
    if args.target and args.target != "onnx":
        options["target"] = args.target
    return options


def _is_batch(args: argparse.Namespace, inputs: list) -> bool:
    out = args.output
    return len(inputs) > 1 or bool(inputs and out and (out.endswith(("/", os.sep)) or os.path.isdir(out)))


def cmd_batch(args: argparse.Namespace, inputs: list, seq: Any) -> int:
    """``passhost run A.onnx B.onnx -o DIR/ [-j N]``: one job per input and a summary table."""
    from ..formats import format_for
    from .batch import Job, batch_exit, check_batch_args, format_table, open_executor, output_paths, run_batch

    check_batch_args(args)
    if args.jobs is not None and args.jobs < 1:
        raise CommandError(f"-j {args.jobs}: give at least 1 process")
    if "-" in inputs:
        raise CommandError("stdin ('-') cannot be one of several inputs")
    executor = open_executor(args.executor, workers=args.jobs, transfer=args.transfer)  # checked before out/ is made
    suffix = None
    if args.to_format is not None:
        suffix = format_for("x", args.to_format, "save").suffixes[0]
    outputs = output_paths(inputs, args.output, suffix)
    shapes = parse_input_shapes(args.input_shape)
    config = run_config(args)
    jobs = []
    for src, dst in zip(inputs, outputs):
        jobs.append(Job(src, dst, seq.spec, args.opt_level, tuple(args.disable), tuple(args.require), config,
                        args.from_format, args.to_format, shapes,
                        save_options(args, dst) if dst else {}, args.check, load_options(args.keep_op, args.bind_dim, args.inline_functions)))
    rows = run_batch(jobs, executor=executor)
    print(format_table(rows), file=stdout())
    return batch_exit(rows)


def _note_gated(seq: Any, args: argparse.Namespace) -> None:
    """A pass named with ``-p`` that the level will skip (TVM's gating, kept) gets one note
    on stderr saying how to run it, and so does one that ``--disable`` names."""
    for p in getattr(seq, "passes", ()):
        info = getattr(p, "info", None)
        if info is None:
            continue
        if info.name in args.disable:
            print(f"passhost: note: {info.name} is named in -p and disabled by --disable: it will not run",
                  file=sys.stderr)
        elif info.opt_level > args.opt_level and info.name not in args.require:
            print(f"passhost: note: {info.name} (opt_level {info.opt_level}) is skipped at -O{args.opt_level}; "
                  f"run it with -O{info.opt_level} or --require {info.name}", file=sys.stderr)


class _LetGo(PassInstrument):
    """After each pass, the mapped weights' pages it read leave the process's memory
    (:func:`passhost.weights.release_all`; they stay in the page cache)."""

    def run_after_pass(self, mod: Any, info: Any) -> None:
        weights.release_all()


def cmd_run(args: argparse.Namespace) -> int:
    """Run ``passhost run``; returns the exit status. New weights past ``--weights-in-memory``
    go to a scratch file, and a terminal shows each step's progress."""
    shown = Progress(sys.stderr, 1) if sys.stderr.isatty() else None
    budget = weights.DEFAULT_BUDGET if args.weights_in_memory is None else args.weights_in_memory
    with weights.spill_to_disk(budget), progress.watch(shown.on_step) if shown else contextlib.nullcontext():
        return _run(args, shown)


def _run(args: argparse.Namespace, shown: Optional[Progress]) -> int:
    reg = registry(args)
    inputs = list(args.input or [])
    args.input = inputs[0] if inputs else None
    for flag, value in (("--example", args.example), ("--reproduce", args.reproduce)):
        if inputs and value is not None:
            raise CommandError(f"argument INPUT: not allowed with argument {flag} (see `passhost run --help`)")
    repro = reproduce.apply_reproduce(args)  # --reproduce DIR fills the pipeline and settings
    args.disable = pass_names(reg, args.disable, "--disable", installed=False)
    args.require = pass_names(reg, args.require, "--require", installed=True)
    seq = _pipeline_of(args, reg, repro)
    if args.print_pipeline:
        print(seq.spec, file=stdout())
        return ExitCode.OK
    if _is_batch(args, inputs):
        return cmd_batch(args, inputs, seq)
    _check_single_run(args)
    out_options = save_options(args, args.output) if args.output else None
    insts, report, tracker, summary, ctx = _context(args, seq, shown, repro)
    # the input comes last: every cheap argument is checked before a workload is built
    mod = repro.module if repro is not None else _read_module(args)
    if args.params:
        mod = bind_params(mod, args.params)
    if tracker is not None:
        tracker.module = mod
    start = time.perf_counter()
    try:
        with ctx:
            out = seq(mod)
            # reports are read inside the context: instruments may drop them on exit (timing)
            reports = _render(insts)
    except Exception as err:
        if args.traceback:
            raise
        return _failed(args, err, report, tracker, seq, ctx, reg)
    if report is not None:
        write_atomic(args.report, json.dumps(report.as_dict(), indent=2) + "\n")
    for rendered in reports:
        if rendered:
            print(rendered.rstrip("\n"), file=sys.stderr)
    if summary is not None and summary.render():
        print(summary.render(), file=sys.stderr)
    _write_or_print(args, out, out_options, summary)
    return _check(args, mod, out, start) if args.check else ExitCode.OK


def _pipeline_of(args: argparse.Namespace, reg: Any, repro: Any) -> Any:
    """The pipeline ``-p`` names, or the default one of ``-O``."""
    from ..pipeline import default_pipeline, pipeline

    if args.pipeline is not None:
        seq = pipeline(args.pipeline)
        if repro is None:  # a replay reruns what was recorded, gating included
            _note_gated(seq, args)
        return seq
    seq = default_pipeline(args.opt_level, required=tuple(args.require))
    if not reg.pass_names():
        print("passhost: warning: no passes are installed, so the default pipeline is empty and the module "
              "is written unchanged; install the first-party passes (`bash scripts/dev-install.sh` in the "
              "repository, or e.g. `pip install passhost-fold-constant`)", file=sys.stderr)
    return seq


def _check_single_run(args: argparse.Namespace) -> None:
    """The options of a batch, given to one input, and ``--to`` without ``-o``."""
    if args.jobs not in (None, 1):
        raise CommandError("-j runs several INPUTs in parallel; give more than one INPUT and -o DIR/")
    if args.executor != "local" or args.transfer != "auto":
        flag = "--executor" if args.executor != "local" else "--transfer"
        raise CommandError(f"{flag} applies to a batch: give several INPUTs, or -o DIR/ for one")
    if args.to_format not in (None, "text") and not args.output:
        raise CommandError(f"--to {args.to_format} writes a file: give -o OUT")


def _context(args: argparse.Namespace, seq: Any, shown: Optional[Progress], repro: Any) -> tuple:
    """``(instruments, report, tracker, summary, PassContext)`` of one run; the output and
    report directories are checked to exist."""
    from .. import instruments as instruments_facade
    from ..pipeline import parse_element

    insts = []
    for text in args.instrument:
        try:
            element = parse_element(text)
        except PasshostError as err:
            raise CommandError(f"--instrument {text!r}: {err}") from None
        insts.append(instruments_facade.get(element.name, **element.kwargs))
    report = instruments_facade.get("report") if args.report else None
    tracker = CrashTracker(seq) if reproduce.wants_reproducer(args) else None
    if shown is not None:
        names = [getattr(getattr(p, "info", None), "name", "") for p in getattr(seq, "passes", ())]
        shown.names, shown.total = names, max(len(names), 1)
    show_summary = args.summary if args.summary is not None else sys.stderr.isatty()
    summary = Summary(args.opt_level) if show_summary else None
    ctx = transform.PassContext(opt_level=args.opt_level, required_pass=args.require,
                                disabled_pass=args.disable,
                                instruments=[i for i in (*insts, report, tracker, shown, summary, _LetGo())
                                             if i is not None],
                                config=repro.config if repro else run_config(args))
    for path in (args.output, args.report):
        directory = os.path.dirname(os.path.abspath(path)) if path else None
        if directory and not os.path.isdir(directory):
            raise CommandError(f"cannot write {path!r}: the directory {directory!r} does not exist")
    return insts, report, tracker, summary, ctx


def _read_module(args: argparse.Namespace) -> Any:
    """``--example``'s program, or INPUT read (saying so on a terminal: a large model takes a moment)."""
    shapes = parse_input_shapes(args.input_shape)
    if args.example:
        if shapes or args.from_format or args.keep_op or args.bind_dim or args.inline_functions:
            raise CommandError("--input-shape, --bind-dim, --keep-op, --inline-functions and --from apply to "
                               "INPUT files, not --example")
        return example(args.example)
    said = sys.stderr.isatty() and args.input != "-"
    if said:
        sys.stderr.write(f"reading {args.input} ...")
        sys.stderr.flush()
    try:
        return load_input(args.input, args.from_format, shapes or None, load_options(args.keep_op, args.bind_dim, args.inline_functions))
    finally:
        if said:
            sys.stderr.write("\r" + " " * (len(args.input) + 12) + "\r")
            sys.stderr.flush()


def _failed(args: argparse.Namespace, err: Exception, report: Any, tracker: Any, seq: Any, ctx: Any,
            reg: Any) -> int:
    """A pipeline that raised: its one-line message (and a reproducer), the report kept."""
    code, message = run_failure(err)
    if report is not None:
        write_atomic(args.report, json.dumps(report.as_dict(), indent=2) + "\n")
    if tracker is not None and code == ExitCode.PASS_FAILED and transform.failed_pass(err) is not None:
        message += reproduce.save_after_failure(args.crash_dir, args.instrument, tracker, seq, ctx, reg,
                                                err, message)
    print(f"passhost: error: {message}", file=sys.stderr)
    return code


def _write_or_print(args: argparse.Namespace, out: Any, out_options: Optional[dict], summary: Any) -> None:
    """``-o OUT`` written (with what was written and the peak memory in the summary), else
    the program's text on standard output (constant data elided on a terminal)."""
    if args.output:
        written, saving = written_bytes(), time.perf_counter()
        notes = ir.save(out, args.output, format=args.to_format, **out_options)
        if summary is not None and isinstance(notes, list):
            for line in notes:
                print(line, file=sys.stderr)
        if summary is not None:
            print(f"passhost: wrote {human_bytes(written_bytes() - written)} to {args.output} in "
                  f"{time.perf_counter() - saving:.1f} s; peak memory {human_bytes(peak_memory())}", file=sys.stderr)
        return
    show = args.meta_data
    if show is None:  # a terminal gets the program, not megabytes of base64 weights
        show = not getattr(stdout(), "isatty", lambda: False)()
        if not show:
            print("passhost: note: constant data elided on a terminal; use -o FILE, a pipe or "
                  "--meta-data to get a text that reads back", file=sys.stderr)
    text = ir.astext(out, show_meta_data=show)
    stdout().write(text if text.endswith("\n") else text + "\n")
    stdout().flush()


def _check(args: argparse.Namespace, mod: Any, out: Any, start: float) -> int:
    """``--check``: the outputs (and the signature) of the result against the input's."""
    from .batch import format_table
    from .check import SignatureChanged, max_difference

    row = {"model": args.input or args.example, "ops_before": count_module_ops(mod),
           "ops_after": count_module_ops(out), "seconds": time.perf_counter() - start, "error": None,
           "max_diff": None}
    try:
        row["max_diff"] = max_difference(args.input or "", mod, args.output, out,
                                         specialised=bool(args.input_shape or args.bind_dim))
    except SignatureChanged as err:
        row["error"] = str(err)
    print(format_table([row]), file=sys.stderr)
    if row["error"] is not None:
        return SignatureChanged.exit_code
    return ExitCode.OK
