"""``passhost run`` over several models: one job per input, optionally in a process pool,
and a summary table at the end.

::

    passhost run models/*.onnx -O3 -o out/ -j 2 --check

Each job reads its model, runs the pipeline, writes ``out/<name>`` and (with ``--check``)
compares the outputs of the written model with the original's on seeded random inputs.
A job that fails is a row of the table with its error; the others go on. The exit
status is 0 when every job succeeded, else the status of the first failure (1: a pass
failed, 2: an input could not be read or written).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import Any, Optional

from .. import ir, transform
from ..errors import PasshostError
from .common import CommandError, ExitCode, one_line
from .summary import count_module_ops

__all__ = ["Job", "run_job", "run_batch", "batch_exit", "check_batch_args", "count_module_ops", "output_paths",
           "format_table"]


@dataclass
class Job:
    """One model of a batch: everything a worker process needs, as plain data."""

    input: str
    output: Optional[str]
    pipeline: str
    opt_level: int
    disabled: tuple = ()
    required: tuple = ()
    config: dict = field(default_factory=dict)
    from_format: Optional[str] = None
    to_format: Optional[str] = None
    input_shapes: dict = field(default_factory=dict)
    save_options: dict = field(default_factory=dict)
    check: bool = False
    load_options: dict = field(default_factory=dict)


def run_job(job: Job) -> dict:
    """Run one job; never raises (the error is the row's ``error``)."""
    from ..pipeline import pipeline

    row: dict = {"model": job.input, "output": job.output, "ops_before": None, "ops_after": None,
                 "seconds": None, "max_diff": None, "error": None, "exit": int(ExitCode.OK)}
    start = time.perf_counter()
    stage = "read"
    try:
        mod = ir.load(job.input, format=job.from_format, input_shapes=job.input_shapes or None, **job.load_options)
        row["ops_before"] = count_module_ops(mod)
        stage = "optimise"
        seq = pipeline(job.pipeline)
        with transform.PassContext(opt_level=job.opt_level, disabled_pass=job.disabled,
                                   required_pass=job.required, config=job.config):
            out = seq(mod)
        row["ops_after"] = count_module_ops(out)
        if job.output is not None:
            stage = "write"
            ir.save(out, job.output, format=job.to_format, **job.save_options)
        if job.check:
            stage = "check"
            from .check import max_difference

            row["max_diff"] = max_difference(job.input, mod, job.output, out)
    except Exception as err:  # one model's failure is its row, never the batch's end
        from .run import run_failure

        if stage == "optimise":
            code, message = run_failure(err)
        else:
            code = err.exit_code if isinstance(err, PasshostError) else ExitCode.PASS_FAILED
            message = one_line(err) if isinstance(err, PasshostError) else f"{type(err).__name__}: {one_line(err)}"
        row["error"] = message
        row["exit"] = int(code)
    row["seconds"] = time.perf_counter() - start
    return row


def output_paths(inputs: list, output: Optional[str], suffix: Optional[str]) -> list:
    """One output path per input inside the directory ``output`` (created if missing).

    :param suffix: the output suffix (``--to``'s); default: the input's own
    :raises CommandError: two inputs would write the same file
    """
    if output is None:
        return [None] * len(inputs)
    os.makedirs(output, exist_ok=True)
    paths, seen = [], {}
    for path in inputs:
        stem, own = os.path.splitext(os.path.basename(path))
        target = os.path.join(output, stem + (suffix if suffix is not None else own))
        if target in seen:
            raise CommandError(f"{seen[target]!r} and {path!r} would both be written to {target!r}; "
                               "rename one of them or run them separately")
        seen[target] = path
        paths.append(target)
    return paths


def _cell(value: Any, fmt: str = "{}") -> str:
    return "-" if value is None else fmt.format(value)


def format_table(rows: list) -> str:
    """The summary table: per model ops before/after, seconds, max difference, status."""
    head = ("MODEL", "OPS BEFORE", "OPS AFTER", "SECONDS", "MAX DIFF", "STATUS")
    lines = [head]
    for r in rows:
        status = "ok" if r["error"] is None else f"FAILED: {r['error']}"
        lines.append((os.path.basename(r["model"]), _cell(r["ops_before"]), _cell(r["ops_after"]),
                      _cell(r["seconds"], "{:.2f}"), _cell(r["max_diff"], "{:.3g}"), status))
    widths = [max(len(line[i]) for line in lines) for i in range(5)]
    out = ["  ".join(c.ljust(w) for c, w in zip(line[:5], widths)) + "  " + line[5] for line in lines]
    failed = sum(r["error"] is not None for r in rows)
    out.append(f"{len(rows)} model(s), {len(rows) - failed} ok, {failed} failed")
    return "\n".join(out)


def _progress(done: int, total: int, row: dict) -> None:
    if sys.stderr.isatty():
        state = "ok" if row["error"] is None else "FAILED"
        print(f"[{done}/{total}] {os.path.basename(row['model'])}: {state} ({row['seconds']:.2f} s)",
              file=sys.stderr, flush=True)


def run_batch(jobs: list, workers: int) -> list:
    """Run ``jobs`` (in a pool of ``workers`` processes when > 1); rows in input order."""
    rows: list = [None] * len(jobs)
    if workers <= 1 or len(jobs) <= 1:
        for i, job in enumerate(jobs):
            rows[i] = run_job(job)
            _progress(i + 1, len(jobs), rows[i])
        return rows
    # spawn: workers import passhost afresh (no forked locks or half-copied registries)
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(run_job, job): i for i, job in enumerate(jobs)}
        done = 0
        for future in as_completed(futures):
            i = futures[future]
            try:
                rows[i] = future.result()
            except Exception as err:  # the worker process died (killed, out of memory)
                rows[i] = {"model": jobs[i].input, "output": jobs[i].output, "ops_before": None,
                           "ops_after": None, "seconds": None, "max_diff": None,
                           "error": f"worker process failed: {type(err).__name__}: {one_line(err)}",
                           "exit": int(ExitCode.PASS_FAILED)}
            done += 1
            _progress(done, len(jobs), rows[i])
    return rows


def batch_exit(rows: list) -> int:
    """0 when every row succeeded, else the first failure's status."""
    for r in rows:
        if r["error"] is not None:
            return r["exit"]
    return int(ExitCode.OK)


def check_batch_args(args: argparse.Namespace) -> None:
    """Options that make sense for one model only."""
    single = [opt for opt, value in (("--instrument", args.instrument), ("--report", args.report),
                                     ("--params", args.params), ("--crash-dir", args.crash_dir))
              if value not in (None, [])]
    if single:
        raise CommandError(f"{', '.join(single)} apply to a single INPUT; run the models one at a time")
