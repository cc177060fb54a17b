"""The ``dask`` executor: the jobs of ``passhost run A B ... -o out/`` on a Dask cluster.

::

    passhost run models/*.onnx -O3 -o out/ --executor dask               # a LocalCluster of -j N workers
    passhost run models/*.onnx -O3 -o out/ --executor dask://HOST:8786   # a running scheduler
    DASK_SCHEDULER_ADDRESS=tcp://HOST:8786 passhost run ... --executor dask

**The LocalCluster** a batch starts is quick to start: its worker processes are forked
from a fork server that loaded Dask, passhost and the plugins once (:mod:`.warm`), started
first so that it loads them while this process imports Dask and starts the scheduler;
what only its dashboard shows is off. About 0.5 s of CPU over ``-j 2`` remains for a batch
of 50 (importing Dask here and in the fork server, ~5 ms a model of scheduling).

**Paths or bytes.** Before the first job, every worker is asked whether it sees each input
(same path, same size) and a marker file written into the output directory. If all do,
jobs send paths and the workers read and write the files themselves (``paths``);
otherwise each model's bytes go to its worker and the output's bytes come back, to be
written here (``bytes``). ``--transfer paths|bytes`` chooses; a note on stderr says which.
In ``bytes`` mode a model whose weights live in side files (ONNX external data) cannot be
read on the worker: use a shared file system there.

**Workers that die.** At most one job per worker thread is on a worker at a time, so a
worker that dies (out of memory, a crash in native code) takes at most the jobs it was
running. On a running scheduler this process sends the next job when one ends; the
LocalCluster started here gets a batch of more than twice its threads at once, and its
scheduler (``worker-saturation`` 1.0) holds the jobs back and hands each freed thread the
next, with no round trip through this process (a smaller batch is sent one job at a time:
Dask queues only larger task groups). The scheduler runs a lost job again on another
worker; the row says so. The LocalCluster allows one such retry per job
(``distributed.scheduler.allowed-failures: 1``); a running scheduler applies its own
setting (Dask's default is 3). A job that exhausts them is a failed row, and nothing is
written for it. Outputs are written atomically: by the job's ``ir.save`` (paths), or here
with :func:`passhost.io.write_bytes_atomic`, side files first and the model last (bytes).
"""
from __future__ import annotations

import importlib.util
import logging
import os
import secrets
import sys
import threading
import warnings
from collections import deque
from typing import Any, Iterator, Optional

from passhost.errors import UsageError
from passhost.io import write_bytes_atomic

from . import remote

__all__ = ["DaskExecutor", "SCHEDULER_ENV", "TRANSFERS"]

#: the environment variable naming a running scheduler (Dask's own)
SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"
TRANSFERS = ("auto", "paths", "bytes")
#: how long to wait for a scheduler, and for its first worker (Dask's connect timeout)
_CONNECT_KEY = "distributed.comm.timeouts.connect"
#: Dask's settings for the LocalCluster a batch starts (a user's scheduler keeps its own)
_LOCAL_CLUSTER = {
    "distributed.scheduler.allowed-failures": 1,  # a job whose worker died runs once more
    "distributed.scheduler.worker-saturation": 1.0,  # one job per worker thread, the rest queued
    # what only the dashboard shows: the workers' statistical profiler (a stack sample every
    # 10 ms), the system monitor every 0.5 s, the event loops' health every 20 ms; about
    # 0.13 s of CPU over 50 SqueezeNets (the run's processes: 3.07 -> 2.94 s, medians of 7)
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.admin.tick.interval": "500ms",
}


def lost_row(job: Any, message: str) -> dict:
    """:func:`passhost.jobs.lost_row` (imported when needed: loading the plugin stays light)."""
    from passhost.jobs import lost_row as row

    return row(job, message)


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


class _Job:
    """A job held until ``as_completed`` sends it (at most one per worker thread)."""

    __slots__ = ("fn", "job")

    def __init__(self, fn: Any, job: Any) -> None:
        self.fn, self.job = fn, job


class DaskExecutor:
    """Run a batch's jobs on a Dask distributed cluster.

    :param address: ``HOST:PORT`` (or a full Dask address, ``tls://HOST:PORT``) of a
        running scheduler; ``None``: the one ``DASK_SCHEDULER_ADDRESS`` names, else a
        ``LocalCluster`` started for the batch (and stopped after it)
    :param workers: ``-j``: the LocalCluster's worker processes (default: one per core);
        with a running scheduler, at most this many jobs at once
    :param transfer: ``auto``, ``paths`` or ``bytes`` (see the module's docs)
    """

    def __init__(self, address: Optional[str] = None, *, workers: Optional[int] = None,
                 transfer: str = "auto") -> None:
        if transfer not in TRANSFERS:
            raise UsageError(f"--transfer {transfer!r}: choose from {', '.join(TRANSFERS)}")
        self.origin = f"--executor dask://{address}" if address else None
        if address is None and os.environ.get(SCHEDULER_ENV, "").strip():
            address = os.environ[SCHEDULER_ENV].strip()
            self.origin = SCHEDULER_ENV
        if address is not None and "://" not in address:
            address = "tcp://" + address
        self.address = address
        self.workers = workers
        self.transfer = transfer
        self.description = "a Dask cluster"
        self.client: Any = None
        self.cluster: Any = None
        #: worker address -> threads, kept current by the scheduler's add/remove-worker events
        self._workers: dict = {}
        self._recount = False
        #: task key -> the worker whose unexpected death made it run again
        self._rerun: dict = {}
        self._lock = threading.Lock()
        self._subscribed = False
        self._sent = 0

    # -- starting and stopping ----------------------------------------------------------
    def __enter__(self) -> "DaskExecutor":
        try:
            for name in ("dask", "distributed"):
                if importlib.util.find_spec(name) is None:
                    raise ModuleNotFoundError(f"No module named {name!r}")
            # first: the fork server loads what the workers need while this process goes on
            forked = self.address is None and start_fork_server()
            import dask
            import distributed
        except ImportError as err:
            raise UsageError(f"the dask executor needs Dask distributed ({_one_line(err)}): "
                             "pip install 'dask[distributed]'") from None
        import cloudpickle

        cloudpickle.register_pickle_by_value(remote)  # workers need passhost, not passhost-dask
        timeout = dask.config.get(_CONNECT_KEY, "30s")
        if self.address is None:
            n = self.workers or os.cpu_count() or 1
            if sys.stderr.isatty():
                print(f"starting a Dask LocalCluster of {n} workers ...", file=sys.stderr, flush=True)
            with dask.config.set({**_LOCAL_CLUSTER,
                                  "distributed.worker.multiprocessing-method": "forkserver" if forked else "spawn"}):
                self.cluster = distributed.LocalCluster(
                    n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                    dashboard_address=":0", silence_logs=logging.CRITICAL)
            self.client = distributed.Client(self.cluster, set_as_default=False)
            _freeze_at_exit()
            self.client.register_plugin(remote.fast_exit_plugin())  # closing then takes 0.1 s, not 1 s
            dashboard = importlib.util.find_spec("bokeh") is not None  # the status page needs bokeh
            self.description = (f"a Dask LocalCluster of {n} worker processes at {self.cluster.scheduler_address}"
                                + (f" (dashboard {self.cluster.dashboard_link})" if dashboard else ""))
            return self
        try:
            self.client = distributed.Client(self.address, timeout=timeout, set_as_default=False)
        except (OSError, TimeoutError) as err:
            raise UsageError(f"cannot reach the Dask scheduler at {self.address} (from {self.origin}): "
                             f"{_one_line(err)}; is `dask scheduler` running there?") from None
        try:
            self.client.wait_for_workers(1, timeout=dask.utils.parse_timedelta(timeout))
        except (OSError, TimeoutError):
            self.close()
            raise UsageError(f"the Dask scheduler at {self.address} has no workers (waited {timeout}); start "
                             f"some with `dask worker {self.address}`") from None
        workers = self.client.nthreads()
        self.description = (f"the Dask scheduler at {self.address} (from {self.origin}): {len(workers)} workers, "
                            f"{sum(workers.values())} threads")
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Disconnect, and stop the LocalCluster if this executor started it."""
        client, cluster, self.client, self.cluster = self.client, self.cluster, None, None
        if client is not None and self._subscribed:
            try:  # first, or the scheduler logs a failed send of our own leaving to us
                client.unsubscribe_topic("all")
            except Exception:
                pass
        for thing in (client, cluster):
            if thing is not None:
                try:
                    thing.close()
                except Exception:  # closing after a lost scheduler: nothing left to stop
                    pass

    # -- the submit/as-completed interface ---------------------------------------------
    def submit(self, fn: Any, job: Any) -> _Job:
        """Hold ``job``; :meth:`as_completed` sends it when a worker thread is free."""
        return _Job(fn, job)

    def as_completed(self, handles: Any) -> Iterator[tuple]:
        """Send the jobs, one per worker thread at a time; yield ``(handle, row)`` as each ends."""
        from distributed import as_completed

        handles = list(handles)
        self._choose_transfer([h.job for h in handles])
        # which tasks a dying worker takes down: the scheduler says so as it happens (no
        # question per job), and says when workers come and go (the number in flight)
        self.client.subscribe_topic("all", self._on_event)
        self._subscribed = True
        self._count_workers()
        queue = deque(handles)
        running: dict = {}
        ready: deque = deque()
        finished = as_completed(loop=self.client.loop, with_results=True, raise_errors=False)
        if self.cluster is not None and self.transfer == "paths" and len(queue) > 2 * self._capacity():
            for future, handle in zip(self._send_all(handles), handles):  # the scheduler holds them back
                running[future] = handle
                finished.add(future)
            queue.clear()

        def top_up() -> None:
            capacity = self._capacity() if queue else 0
            while queue and len(running) < capacity:
                handle = queue.popleft()
                sent = self._send(handle)
                if isinstance(sent, dict):  # the input could not be read here: its row
                    ready.append((handle, sent))
                    continue
                running[sent] = handle
                finished.add(sent)

        top_up()
        while running or ready:
            if ready:
                yield ready.popleft()
                top_up()
                continue
            future, result = next(finished)
            handle = running.pop(future)
            top_up()  # keep the freed worker busy while this row is made
            yield handle, self._row(handle, future, result)

    # -- helpers ------------------------------------------------------------------------
    def _on_event(self, event: Any) -> None:
        """A scheduler event (on the client's event-loop thread)."""
        msg = event[1] if isinstance(event, tuple) and len(event) == 2 else None
        if not isinstance(msg, dict):
            return
        with self._lock:
            if msg.get("action") == "remove-worker":
                worker = msg.get("worker")
                self._workers.pop(worker, None)
                if not msg.get("expected"):
                    for key in (*msg.get("processing-tasks", ()), *msg.get("lost-computed-tasks", ())):
                        self._rerun.setdefault(key, worker)
            elif msg.get("action") == "add-worker":
                self._recount = True

    def _count_workers(self) -> None:
        try:
            workers = dict(self.client.nthreads())
        except Exception:  # a lost scheduler: the futures will say so
            return
        with self._lock:
            self._workers, self._recount = workers, False

    def _capacity(self) -> int:
        """The worker threads the scheduler has now (fewer after a worker died, until it is
        back), capped by ``-j`` on a running scheduler."""
        if self._recount:
            self._count_workers()
        with self._lock:
            count = sum(self._workers.values())
        if self.cluster is None and self.workers:
            count = min(count, self.workers)
        return max(count, 1)

    def _choose_transfer(self, jobs: list) -> None:
        """Probe the workers; settle ``paths`` or ``bytes`` and say which on stderr."""
        if self.cluster is not None and self.transfer in ("auto", "paths"):
            self.transfer = "paths"
            print("passhost: note: sending paths: the LocalCluster's workers read the inputs and write the "
                  "outputs on this machine", file=sys.stderr)
            return
        outputs = sorted({os.path.dirname(os.path.abspath(j.output)) for j in jobs if j.output})
        files = []
        for j in jobs:
            try:
                files.append((os.path.abspath(j.input), os.path.getsize(j.input)))
            except OSError:
                pass  # its row will say it cannot be read
        token = secrets.token_hex(8)
        markers = []
        try:
            for directory in outputs:
                marker = os.path.join(directory, f".passhost-dask-probe-{token}")
                write_bytes_atomic(marker, token.encode(), fsync=False)
                markers.append(marker)
            report = {}
            needs = _needs(jobs)
            asked = tuple((kind, name, mode) for kind, name, mode, _ in needs)
            for marker in markers or [None]:
                for address, facts in self.client.run(remote.probe, files, marker, token, asked).items():
                    if address not in report or facts["unseen"]:
                        report[address] = facts
        except (OSError, UsageError) as err:
            raise UsageError(f"the Dask workers could not be asked what they see: {_one_line(err)}") from None
        finally:
            for marker in markers:
                try:
                    os.unlink(marker)
                except OSError:
                    pass
        for address, facts in sorted(report.items()):
            if facts["error"]:
                raise UsageError(f"Dask worker {address} cannot import passhost ({facts['error']}): install "
                                 "passhost and the plugins the pipeline uses on every worker")
        for address, facts in sorted(report.items()):
            missing = {tuple(k) for k in facts.get("lacks", ())}
            lacks = list(dict.fromkeys(what for kind, name, _, what in needs if (kind, name) in missing))
            if lacks:
                raise UsageError(f"Dask worker {address} lacks what the batch needs: {', '.join(lacks)}; install "
                                 "the same plugins on every worker as here")
        import passhost

        skew = sorted({f["passhost"] for f in report.values()} - {passhost.__version__})
        if skew:
            print(f"passhost: warning: Dask workers run passhost {', '.join(skew)}, this is "
                  f"{passhost.__version__}: outputs may differ from a local run", file=sys.stderr)
        unseen = next(((a, f["unseen"]) for a, f in sorted(report.items()) if f["unseen"]), None)
        if self.transfer == "paths" and unseen is not None:
            raise UsageError(f"--transfer paths: Dask worker {unseen[0]} does not see {unseen[1]!r} as this machine "
                             "does; share the file system with the workers, or use --transfer bytes")
        if self.transfer == "auto":
            self.transfer = "bytes" if unseen is not None else "paths"
        if self.transfer == "paths":
            print("passhost: note: sending paths: every Dask worker sees the inputs and the output directory, "
                  "and reads and writes them itself (--transfer bytes sends the models instead)", file=sys.stderr)
        else:
            why = (f"worker {unseen[0]} does not see {unseen[1]!r}" if unseen is not None else "--transfer bytes")
            print(f"passhost: note: sending model bytes ({why}): each model goes to its worker and its output "
                  "comes back to be written here", file=sys.stderr)

    def _key(self, job: Any) -> str:
        """A unique task key; every job's is in one task group, ``passhost-job`` (Dask's
        ``key_split`` stops at the number), whatever the model's name."""
        self._sent += 1
        return f"passhost-job-{self._sent}-{os.path.basename(job.input)}-{secrets.token_hex(6)}"

    def _send_all(self, handles: list) -> list:
        """Submit every job in one graph (paths), for the scheduler to hand out: the futures.

        The LocalCluster started here runs with ``worker-saturation`` 1.0, so its scheduler
        sends each worker thread one job and queues the rest, giving a freed thread the next
        without a round trip through this process (about 8 ms a model here). Dask queues
        only tasks of a group larger than twice the threads, all present when it decides:
        hence one graph, and batches that small sent one by one (:meth:`_send`)."""
        keys = [self._key(h.job) for h in handles]
        return self.client.map(remote.run_paths, [h.fn for h in handles], [h.job for h in handles],
                               key=keys, pure=False)

    def _send(self, handle: _Job) -> Any:
        """Submit one job: its future, or its row when the input cannot be read here."""
        job = handle.job
        key = self._key(job)
        if self.transfer == "paths":
            return self.client.submit(remote.run_paths, handle.fn, job, key=key, pure=False)
        try:
            with open(job.input, "rb") as f:
                data = f.read()
        except OSError as err:
            row = lost_row(job, f"cannot read {job.input!r}: {err.strerror or err}")
            row["exit"] = 2
            return row
        with warnings.catch_warnings():  # the model rides in the task: that is the point of bytes
            warnings.filterwarnings("ignore", message="Sending large graph")
            return self.client.submit(remote.run_bytes, handle.fn, job, data, key=key, pure=False)

    def _row(self, handle: _Job, future: Any, result: Any) -> dict:
        """The row of a finished future; in ``bytes`` mode its files are written here first."""
        from distributed import KilledWorker

        job = handle.job
        status = future.status
        future.release()
        with self._lock:
            died = self._rerun.pop(future.key, None)
        if status != "finished":
            err = result[1] if status == "error" and isinstance(result, tuple) and len(result) == 3 else result
            if isinstance(err, KilledWorker):
                last = getattr(getattr(err, "last_worker", None), "address", None) or died or "unknown"
                return lost_row(job, f"its Dask worker died each time it ran (last {last}): out of memory, "
                                     "or a crash in native code; nothing was written for it")
            what = _one_line(err) if isinstance(err, BaseException) else f"the task ended as {status!r}"
            return lost_row(job, f"the Dask cluster could not run it: {what}")
        if self.transfer == "bytes":
            row, files = result
            row = self._write_back(job, row, files)
        else:
            row = result
        if died is not None:
            row["note"] = "run again: its first Dask worker died"
            if self.transfer == "paths" and job.output:
                _sweep(job.output)
        return row

    @staticmethod
    def _write_back(job: Any, row: dict, files: dict) -> dict:
        """Write what the worker wrote, atomically: side files first, the model last."""
        if not job.output or not files:
            return row
        directory, main = os.path.dirname(os.path.abspath(job.output)), os.path.basename(job.output)
        try:
            for name in sorted(files, key=lambda n: n == main):
                write_bytes_atomic(os.path.join(directory, name), files[name])
        except OSError as err:
            row["error"] = f"cannot write {os.path.join(directory, name)!r}: {err.strerror or err}"
            row["exit"] = 2
        return row


def _freeze_at_exit() -> None:
    """When this process exits, move what it holds out of the cyclic garbage collector's
    reach (``gc.freeze``) before the interpreter's teardown, whose collections would walk
    every object of the ~700 modules Dask brought in: 0.1 s of CPU, 0.12 -> 0.03 s for
    passhost with Dask loaded. Registered once, by the executor that loaded Dask for its
    own cluster; the exit handlers registered before it still run (after it), and objects
    that die by reference counting are still finalized (Python never promised ``__del__``
    for what is left at exit)."""
    global _FROZEN_AT_EXIT
    if not _FROZEN_AT_EXIT:
        import atexit
        import gc

        atexit.register(gc.freeze)
        _FROZEN_AT_EXIT = True


_FROZEN_AT_EXIT = False


def start_fork_server() -> bool:
    """Start (once per process) the fork server the LocalCluster's workers are forked
    from, preloading :mod:`passhost_dask.warm`; ``False`` where there is none (Windows).

    It is a fresh interpreter started now, not a fork of this process (whose threads and
    locks a fork would copy), so it imports Dask, passhost and the plugins on another
    core while this process imports Dask and starts the scheduler; each worker is then a
    fork of it that imports nothing. It has this process's environment, as ``-j N``'s
    workers do: Dask's ``distributed.nanny.pre-spawn-environ`` (one BLAS thread) is set
    in each worker's ``os.environ`` but reaches only what loads after the fork, not numpy.
    It exits with this process."""
    import multiprocessing
    from multiprocessing import forkserver

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return False
    multiprocessing.get_context("forkserver").set_forkserver_preload(["passhost_dask.warm"])
    forkserver.ensure_running()  # returns at once; the server imports, then serves
    try:  # Dask would set its own preload (importing pandas here if installed): ours runs already
        import distributed.utils

        distributed.utils._forkserver_preload_set = True
    except ImportError:
        pass
    return True


def _needs(jobs: list) -> list:
    """``(kind, name, mode, description)`` of every pass and format the jobs use, as this
    machine's registry sees them (the passes named in each pipeline and those they require)."""
    import re

    from passhost import passes
    from passhost.formats import format_for

    needs: dict = {}
    installed = set(passes.names())
    for job in jobs:
        todo = [n for n in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", str(job.pipeline or "")) if n in installed]
        while todo:
            name = todo.pop()
            if ("passes", name, None) not in needs:
                info = passes.info(name)
                needs["passes", name, None] = f"pass {name!r} ({info.source.distribution or 'in-process'})"
                todo.extend(r for r in info.required if r in installed)
        for path, fmt, mode in ((job.input, job.from_format, "load"), (job.output, job.to_format, "save")):
            if path is None:
                continue
            try:
                record = format_for(path, fmt, mode)
            except Exception:  # the job's own row will say why
                continue
            needs["formats", record.name, mode] = f"format {record.name!r} ({record.source.distribution})"
    return [(kind, name, mode, what) for (kind, name, mode), what in sorted(needs.items(), key=lambda kv: str(kv[0]))]


def _sweep(output: str) -> None:
    """Remove what a killed worker's atomic write of ``output`` left behind: the hidden
    ``.NAME.<random>.tmp`` file (or ``.NAME.<random>`` directory) beside it."""
    import shutil

    directory, name = os.path.dirname(os.path.abspath(output)), os.path.basename(output)
    try:
        entries = os.listdir(directory)
    except OSError:
        return
    for entry in entries:
        if entry.startswith(f".{name}.") and entry != name:
            path = os.path.join(directory, entry)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.unlink(path)
                except OSError:
                    pass
