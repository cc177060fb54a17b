"""passhost benchmarks: shared timing, memory and machine-information helpers.

Every benchmark reports wall-clock **and** CPU time (``time.process_time``): this
project is developed on shared, loaded machines where wall time mostly measures the
neighbours, while CPU time of a single-threaded run is close to what the same run
takes on an idle machine. Goals are judged on the median CPU time.

Run everything with ``python -m benchmarks`` (see :mod:`benchmarks.run`).
"""
from __future__ import annotations

import gc
import io
import os
import platform
import resource
import statistics
import subprocess
import sys
import tarfile
import time
from typing import Any, Callable, Optional

__all__ = [
    "measure",
    "summary",
    "machine_info",
    "peak_rss_mb",
    "current_rss_mb",
    "reset_peak_rss",
    "fmt_seconds",
]


def summary(samples: list) -> dict:
    """``{"median", "min", "max"}`` of a non-empty list of seconds."""
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}


def measure(setup: Callable[[], Any], run: Callable[[Any], Any], repeat: int = 3,
            warmup: int = 1, warmup_setup: Optional[Callable[[], Any]] = None) -> dict:
    """Time ``run(setup())`` ``repeat`` times after ``warmup`` untimed runs.

    ``setup`` builds a fresh input for every run (outside the clock), so passes and
    type inference that write into their input never see an already processed graph.
    Garbage from the previous run is collected before each timed run. The warm-up
    runs use ``warmup_setup`` when given (a smaller input: a warm-up only needs to
    load plugins and fill caches, and a second 1M-node run would double the cost).

    After each timed run, with its input and output still alive, a full
    ``gc.collect()`` is timed separately (``gc_after``): the pass manager pauses the
    cyclic collector while a pipeline runs, so the collection work the run caused is
    done afterwards; this is an upper bound of it (it also traverses the input).

    :returns: ``{"wall": summary, "cpu": summary, "gc_after": summary (CPU), "repeat":
        repeat, "warmup": warmup}``
    """
    for _ in range(warmup):
        arg = (warmup_setup or setup)()
        run(arg)
        del arg
    walls, cpus, gcs = [], [], []
    for _ in range(max(1, repeat)):
        arg = setup()
        gc.collect()
        c0, t0 = time.process_time(), time.perf_counter()
        out = run(arg)
        t1, c1 = time.perf_counter(), time.process_time()
        walls.append(t1 - t0)
        cpus.append(c1 - c0)
        gc.collect()
        gcs.append(time.process_time() - c1)
        del arg, out
    return {"wall": summary(walls), "cpu": summary(cpus), "gc_after": summary(gcs),
            "repeat": max(1, repeat), "warmup": warmup}


# ------------------------------------------------------------------------------- memory


def _status_kb(field: str) -> Optional[int]:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def current_rss_mb() -> float:
    """The process's resident set size now, in MiB (0 where /proc is missing)."""
    kb = _status_kb("VmRSS")
    return (kb or 0) / 1024.0


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (``VmHWM``) to the current RSS (Linux >= 4.0).

    :returns: whether the reset worked; when it did not, :func:`peak_rss_mb` is the
        peak of the whole process so far
    """
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_mb() -> float:
    """Peak resident set size in MiB since the last :func:`reset_peak_rss` (or since
    the process started)."""
    kb = _status_kb("VmHWM")
    if kb is None:
        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024.0


# ------------------------------------------------------------------------------- machine


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict:
    """CPU model, logical cores (and how many this process may use), memory, load
    average, Python and passhost versions, installed passes."""
    info: dict = {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
    }
    if hasattr(os, "sched_getaffinity"):
        info["usable_cores"] = len(os.sched_getaffinity(0))
    try:
        info["loadavg"] = list(os.getloadavg())
    except OSError:
        info["loadavg"] = None
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        info["memory_gb"] = round(pages * size / 2**30, 1)
    except (ValueError, OSError):
        info["memory_gb"] = None
    try:
        import passhost

        info["passhost"] = passhost.__version__
        info["passes"] = passhost.passes.names()
        info["o3_pipeline"] = str(passhost.default_pipeline(3).spec)
    except Exception as exc:  # noqa: BLE001 - machine info must never stop a benchmark
        info["passhost_error"] = f"{type(exc).__name__}: {exc}"
    info["argv"] = sys.argv
    return info


def fmt_seconds(s: float) -> str:
    """Seconds in a short human unit (``812 us``, ``3.41 ms``, ``1.203 s``)."""
    if s < 1e-3:
        return f"{s * 1e6:.0f} us"
    if s < 1.0:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.3f} s"


def git_tree(rev: str, paths: tuple, into: str, cwd: str) -> str:
    """The files under ``paths`` of git revision ``rev`` (of the repository at ``cwd``),
    written into the directory ``into``: the old side of an A/B script. Returns ``into``."""
    data = subprocess.run(["git", "archive", rev, *paths], cwd=cwd, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into
