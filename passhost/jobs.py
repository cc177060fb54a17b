"""One job of a batch (``passhost run A B C -o DIR/``), as an executor sees it: the public
home of what :class:`passhost.hookspecs.ExecutorEntry`'s executors handle.

- :class:`Job`: one model, as plain data (picklable: it crosses to worker processes);
- :func:`run_job`: the function the jobs are submitted with; it reads, optimises, writes
  and checks one model and returns its row, never raising;
- :func:`lost_row`: the row of a job that never came back (its worker died for good).

A remote worker imports this module before its first job (``passhost-dask`` does), so the
first job does not pay for it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Optional

from . import ir, transform
from .cli.common import ExitCode, one_line
from .cli.summary import count_module_ops
from .errors import PasshostError

__all__ = ["Job", "run_job", "lost_row"]


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
    from .pipeline import pipeline

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
            from .cli.check import max_difference

            row["max_diff"] = max_difference(job.input, mod, job.output, out)
    except Exception as err:  # one model's failure is its row, never the batch's end
        from .cli.run import run_failure

        if stage == "optimise":
            code, message = run_failure(err)
        else:
            code = err.exit_code if isinstance(err, PasshostError) else ExitCode.PASS_FAILED
            message = one_line(err) if isinstance(err, PasshostError) else f"{type(err).__name__}: {one_line(err)}"
        row["error"] = message
        row["exit"] = int(code)
    row["seconds"] = time.perf_counter() - start
    return row


def lost_row(job: Job, message: str) -> dict:
    """The row of a job that did not come back (its worker died, its executor failed):
    ``message`` is its error, its exit status 1 (as a failing pass: the input was fine)."""
    return {"model": job.input, "output": job.output, "ops_before": None, "ops_after": None, "seconds": None,
            "max_diff": None, "error": message, "exit": int(ExitCode.PASS_FAILED)}
