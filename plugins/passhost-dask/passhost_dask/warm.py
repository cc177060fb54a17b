"""Imported once by the fork server the LocalCluster's worker processes are forked from
(see :func:`passhost_dask.executor.start_fork_server`): Dask, passhost's jobs and every
installed plugin are loaded there, while the batch's own process goes on, so each worker
starts with them loaded instead of importing them itself (a spawned worker imports Dask,
and passhost at its first job: about half a second of CPU each).

The fork server leaves with ``os._exit`` once the batch's process has gone (it holds that
process's stdout and stderr, so a pipe reading them stays open until it is gone: Python's
teardown of the modules loaded here took half a second).

Nothing here may fail the fork server: a worker that finds something missing imports it
at its first job, as a spawned one would. Imported anywhere else, it only loads modules.
"""
import atexit
import os
import sys


def _in_fork_server() -> bool:
    """Whether this import runs in ``multiprocessing.forkserver.main`` (its preload)."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "main" and code.co_filename.endswith(os.path.join("multiprocessing", "forkserver.py")):
            return True
        frame = frame.f_back
    return False


def _leave(pid: int) -> None:
    if os.getpid() == pid:  # the fork server itself, never a worker forked from it
        from .remote import exit_now

        exit_now()


try:
    import distributed  # noqa: F401  (the worker itself)
    import passhost.jobs  # noqa: F401  (what the jobs call)
    from passhost import passes

    passes.names()  # loads the plugins (passes and formats) the jobs will look up
except Exception:  # the worker will say what is wrong when it runs a job
    pass

if _in_fork_server():  # after the imports: it runs before the exit handlers they registered
    atexit.register(_leave, os.getpid())
