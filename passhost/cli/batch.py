"""``passhost run`` over several models: one job per input, optionally in a process pool,
and a summary table at the end.

::

    passhost run models/*.onnx -O3 -o out/ -j 2 --check

Each job reads its model, runs the pipeline, writes ``out/<name>`` and (with ``--check``)
compares the outputs of the written model with the original's on seeded random inputs.
A job that fails is a row of the table with its error; the others go on. The exit
status is 0 when every job succeeded, else the status of the first failure (1: a pass
failed, 2: an input could not be read or written).

Where the jobs run is an *executor* (``--executor NAME[://ADDRESS]``): the built-in
``local`` one (:class:`LocalExecutor`: ``-j N`` processes of this machine), or one a plugin
registers with ``passhost_register_executors`` (``passhost-dask``: a Dask cluster). See
:class:`passhost.hookspecs.ExecutorEntry` for the interface.
"""
from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from typing import Any, Optional

from ..errors import PasshostError, UsageError
from ..jobs import Job, lost_row, run_job
from .common import CommandError, ExitCode, one_line
from .summary import count_module_ops

__all__ = ["Job", "run_job", "run_batch", "batch_exit", "check_batch_args", "count_module_ops", "output_paths",
           "format_table", "lost_row", "LocalExecutor", "open_executor", "TRANSFERS"]

#: ``--transfer``: how jobs reach remote workers (the executor decides what ``auto`` means)
TRANSFERS = ("auto", "paths", "bytes")


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
        if r.get("note"):  # e.g. run again after its worker died
            status += f" ({r['note']})"
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
        took = f" ({row['seconds']:.2f} s)" if row.get("seconds") is not None else ""  # a lost job has no time
        print(f"[{done}/{total}] {os.path.basename(row['model'])}: {state}{took}", file=sys.stderr, flush=True)


class _Held:
    """A job :class:`LocalExecutor` has been given and runs once ``as_completed`` asks."""

    __slots__ = ("fn", "job")

    def __init__(self, fn: Any, job: Job) -> None:
        self.fn, self.job = fn, job


class LocalExecutor:
    """The built-in executor (``--executor local``, the default): ``workers`` processes of
    this machine; with one worker (or one job) the jobs run in this process, in order.

    Processes are spawned, not forked: workers import passhost afresh (no forked locks or
    half-copied registries). A worker that dies (killed, out of memory) fails the jobs its
    pool still held, each with a row saying so.
    """

    def __init__(self, address: Optional[str] = None, *, workers: Optional[int] = None,
                 transfer: str = "auto") -> None:
        if address is not None:
            raise UsageError(f"--executor local://{address}: the local executor takes no address; a cluster "
                             "needs an executor plugin (passhost-dask: --executor dask://HOST:PORT)")
        if transfer == "bytes":
            raise UsageError("--transfer bytes: the local executor's processes read and write this machine's "
                             "files themselves; --transfer is for executors on other machines (--executor dask)")
        self.workers = 1 if workers is None else workers
        self.description = (f"{self.workers} local processes" if self.workers > 1 else "this process")
        self._pool: Optional[ProcessPoolExecutor] = None

    def __enter__(self) -> "LocalExecutor":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def submit(self, fn: Any, job: Job) -> _Held:
        return _Held(fn, job)

    def as_completed(self, handles: Any) -> Any:
        handles = list(handles)
        if self.workers <= 1 or len(handles) <= 1:
            for handle in handles:
                yield handle, handle.fn(handle.job)
            return
        self._pool = ProcessPoolExecutor(max_workers=min(self.workers, len(handles)), mp_context=get_context("spawn"))
        futures = {self._pool.submit(h.fn, h.job): h for h in handles}
        for future in as_completed(futures):
            handle = futures[future]
            try:
                row = future.result()
            except Exception as err:  # the worker process died (killed, out of memory)
                row = lost_row(handle.job, f"worker process failed: {type(err).__name__}: {one_line(err)}")
            yield handle, row


def open_executor(spec: str, *, workers: Optional[int] = None, transfer: str = "auto") -> tuple:
    """Build the executor ``spec`` names (``NAME`` or ``NAME://ADDRESS``); returns ``(record, executor)``.

    :raises UsageError: an unknown or uninstalled executor (naming the distribution to
        install), a bad ``--transfer``, or an executor that refuses the options
    """
    from ..registry import get_registry

    name, sep, address = spec.partition("://")
    if not name or (sep and not address):
        raise UsageError(f"--executor {spec!r}: give NAME or NAME://ADDRESS (e.g. local, dask, dask://HOST:8786)")
    if transfer not in TRANSFERS:
        raise UsageError(f"--transfer {transfer!r}: choose from {', '.join(TRANSFERS)}")
    record = get_registry().executor_record(name)
    try:
        executor = record.entry.factory(address or None, workers=workers, transfer=transfer)
    except PasshostError:
        raise
    except Exception as err:
        raise UsageError(f"executor {name!r} ({record.source.requirement}) could not be set up: "
                         f"{type(err).__name__}: {one_line(err)}") from err
    return record, executor


def run_batch(jobs: list, workers: Optional[int] = None, *, executor: Any = "local", transfer: str = "auto") -> list:
    """Run ``jobs`` on ``executor`` (``local``: in a pool of ``workers`` processes when > 1);
    rows in input order. A job the executor loses is a failed row, never a missing one.

    :param executor: ``NAME`` or ``NAME://ADDRESS``, or what :func:`open_executor` returned
    """
    if isinstance(executor, str):
        executor = open_executor(executor, workers=workers, transfer=transfer)
    record, ex = executor
    rows: list = [None] * len(jobs)
    try:
        started = ex.__enter__()
    except PasshostError:
        raise
    except Exception as err:
        raise UsageError(f"executor {record.name!r} ({record.source.requirement}) could not start: "
                         f"{type(err).__name__}: {one_line(err)}") from err
    ex = started if started is not None else ex
    try:
        if record.name != "local":
            print(f"passhost: note: running {len(jobs)} model(s) on {ex.description}", file=sys.stderr, flush=True)
        pending = {ex.submit(run_job, job): i for i, job in enumerate(jobs)}
        done = 0
        try:
            for handle, row in ex.as_completed(list(pending)):
                i = pending.pop(handle)
                rows[i] = row
                done += 1
                _progress(done, len(jobs), row)
                if row.get("note"):
                    print(f"passhost: warning: {os.path.basename(row['model'])}: {row['note']}", file=sys.stderr)
        except PasshostError:
            raise
        except Exception as err:  # the executor itself failed (a lost scheduler, a bug): its jobs are rows
            message = f"executor {record.name!r} failed: {type(err).__name__}: {one_line(err)}"
            for i in pending.values():
                rows[i] = lost_row(jobs[i], message)
    except BaseException:
        ex.__exit__(*sys.exc_info())
        raise
    ex.__exit__(None, None, None)
    for i, row in enumerate(rows):
        if row is None:
            rows[i] = lost_row(jobs[i], f"executor {record.name!r} did not run it")
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
                                     ("--params", args.params), ("--crash-dir", args.crash_dir),
                                     ("--weights-in-memory", args.weights_in_memory))
              if value not in (None, [])]
    if single:
        raise CommandError(f"{', '.join(single)} apply to a single INPUT; run the models one at a time")
