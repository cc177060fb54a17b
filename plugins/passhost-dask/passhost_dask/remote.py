"""What runs on the Dask workers.

The executor pickles this module *by value* (``cloudpickle.register_pickle_by_value``), so a
worker needs passhost and the plugins the pipeline uses, but not passhost-dask. Keep it
free of imports from ``passhost_dask``.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from typing import Any, Callable, Optional


def worker_address() -> Optional[str]:
    """The address of the Dask worker running this, or ``None`` outside one."""
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return None


def probe(files: list, marker: Optional[str], token: str, needs: tuple = ()) -> dict:
    """What one worker has: its passhost, the plugins the batch needs, and whether it sees
    the client's files.

    :param files: ``(path, size)`` of every input, as the client sees them
    :param marker: a file the client wrote into the output directory (``None``: no output)
    :param token: what ``marker`` holds
    :param needs: ``(kind, name, mode)``: ``("passes", "FoldConstant", None)``,
        ``("formats", "onnx", "load")``
    :returns: ``{"passhost": version or None, "error": why passhost does not import,
        "lacks": the ``(kind, name)`` of ``needs`` this worker does not have,
        "unseen": the first path this worker does not see as the client does, or None}``
        (loading the plugins here also warms the worker up for its first job)
    """
    out: dict = {"passhost": None, "error": None, "unseen": None, "lacks": []}
    try:
        import passhost
        import passhost.jobs  # noqa: F401  (what the jobs call)
        from passhost import passes
        from passhost.formats import format_for

        out["passhost"] = passhost.__version__
        installed = set(passes.names())
        for kind, name, mode in needs:
            if kind == "passes" and name not in installed:
                out["lacks"].append((kind, name))
            elif kind == "formats":
                try:
                    format_for("x", name, mode)
                except Exception:  # not installed here (or it cannot do that)
                    out["lacks"].append((kind, name))
    except Exception as err:  # reported by the client as one line
        out["error"] = f"{type(err).__name__}: {' '.join(str(err).split())}"
    for path, size in files:
        try:
            if os.path.getsize(path) == size:
                continue
        except OSError:
            pass
        out["unseen"] = path
        return out
    if marker is not None:
        try:
            with open(marker, encoding="utf-8") as f:
                if f.read() == token:
                    return out
        except OSError:
            pass
        out["unseen"] = os.path.dirname(marker) + os.sep
    return out


def run_paths(fn: Callable, job: Any) -> dict:
    """Run ``fn(job)`` where the paths are: the worker reads and writes the shared files."""
    row = fn(job)
    row["worker"] = worker_address()
    return row


def run_bytes(fn: Callable, job: Any, data: bytes) -> tuple:
    """Run ``fn`` on a copy of the input in a temporary directory of the worker.

    :returns: ``(row, files)``: the row with the client's paths in it, and every file the
        job wrote beside its output (``name -> bytes``; the output itself and its side
        files such as ``OUT.data``), for the client to write
    """
    tmp = tempfile.mkdtemp(prefix="passhost-job-")
    try:
        src_dir, out_dir = os.path.join(tmp, "in"), os.path.join(tmp, "out")
        os.mkdir(src_dir)
        os.mkdir(out_dir)
        src = os.path.join(src_dir, os.path.basename(job.input))
        with open(src, "wb") as f:
            f.write(data)
        dst = os.path.join(out_dir, os.path.basename(job.output)) if job.output else None
        row = fn(dataclasses.replace(job, input=src, output=dst))
        files = {}
        for name in sorted(os.listdir(out_dir)):
            path = os.path.join(out_dir, name)
            if not name.startswith(".") and os.path.isfile(path):  # never a temporary of an atomic write
                with open(path, "rb") as f:
                    files[name] = f.read()
        row["model"], row["output"] = job.input, job.output
        if row.get("error"):  # the client's paths, not the worker's temporary ones
            row["error"] = row["error"].replace(src, job.input)
            if dst is not None:
                row["error"] = row["error"].replace(dst, job.output)
        row["worker"] = worker_address()
        return row, files
    finally:
        shutil.rmtree(tmp, ignore_errors=True)



def exit_now() -> None:
    """Flush standard output and error and leave the process at once, skipping Python's
    teardown of the modules loaded (a worker's, or the fork server's: half a second)."""
    import sys

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(0)


def fast_exit_plugin() -> Any:
    """A worker plugin for the LocalCluster a batch starts (never a user's cluster): when a
    worker closes, its process leaves with ``os._exit`` once its streams are flushed,
    skipping the interpreter's teardown of every module it imported -- about a second per
    worker, which closing the cluster would otherwise wait for. Its jobs are done by then
    and their outputs written (atomically) by the jobs themselves."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class FastExit(WorkerPlugin):
        name = "passhost-fast-exit"

        def teardown(self, worker: Any) -> None:
            import atexit

            atexit.register(exit_now)  # registered last, so it runs first among the atexit handlers

    return FastExit()
