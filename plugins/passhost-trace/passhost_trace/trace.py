"""The ``trace`` instrument: every pass as a Chrome trace event (open it in Perfetto).

Each pass that runs becomes a pair of duration events in the Trace Event Format: a
``"B"`` (begin) event in ``run_before_pass`` and an ``"E"`` (end) event in
``run_after_pass``. Nested passes (a Sequential's children, the ``InferType`` at the end
of a function pass) nest in the viewer because their events lie inside their parent's.
Timestamps ``ts`` are microseconds since the context was entered, from a monotonic clock,
so they never decrease. ``args`` carry the module size: the number of calls (``calls``)
in the input module on ``B`` and in the output module on ``E``, plus ``opt_level`` on
``B``. ``FoldConstant()(mod)`` on ``multiply(%x, add(2f, 3f))`` records (one event a line)::

    {"traceEvents": [
      {"name": "process_name", "ph": "M", "pid": 27790, "tid": 27790, "args": {"name": "passhost"}},
      {"name": "thread_name", "ph": "M", "pid": 27790, "tid": 27790, "args": {"name": "passes (thread 27790)"}},
      {"name": "FoldConstant", "cat": "pass", "ph": "B", "ts": 79.118, "pid": 27790, "tid": 27790,
       "args": {"opt_level": 2, "calls": 2}},
      {"name": "InferType", "cat": "pass", "ph": "B", "ts": 283.131, "pid": 27790, "tid": 27790,
       "args": {"opt_level": 0, "calls": 1}},
      {"name": "InferType", "cat": "pass", "ph": "E", "ts": 366.665, "pid": 27790, "tid": 27790,
       "args": {"calls": 1}},
      {"name": "FoldConstant", "cat": "pass", "ph": "E", "ts": 377.191, "pid": 27790, "tid": 27790,
       "args": {"calls": 1}}
    ], "displayTimeUnit": "ms", "otherData": {"producer": "passhost-trace"}}

With ``path`` the JSON is written to that file (atomically) when the context exits;
without it, :meth:`PassTraceInstrument.render` returns it (``passhost run --instrument
trace`` then prints it to stderr). A pass that raised has no ``E`` event of its own; at
exit it is closed with ``"args": {"unfinished": true}`` so the file still loads.
"""
from __future__ import annotations

import json
import os
import threading
from time import perf_counter_ns
from typing import Any, Optional

from passhost.errors import PasshostError
from passhost.instrument import PassInstrument
from passhost.io import write_text_atomic
from passhost.ir import IRModule, count_ops

__all__ = ["PassTraceInstrument", "TraceError", "count_calls", "write_json_atomic"]


class TraceError(PasshostError):
    """The trace instrument was configured wrongly or could not write its file."""


def count_calls(mod: IRModule) -> int:
    """The number of operator calls in every function of ``mod``."""
    return sum(sum(count_ops(f).values()) for _, f in mod.items())


def write_json_atomic(path: str, doc: Any) -> None:
    """Write ``doc`` as JSON to ``path`` atomically (:func:`passhost.io.write_text_atomic`).

    :raises TraceError: the file cannot be written
    """
    try:
        write_text_atomic(path, json.dumps(doc) + "\n", fsync=False)
    except OSError as err:
        raise TraceError(f"trace: cannot write {path!r}: {err.strerror or err}; "
                         "choose a path in a writable directory") from None


class PassTraceInstrument(PassInstrument):
    """Record every pass as Chrome trace events (``{"traceEvents": [...]}``).

    :param path: write the trace here when the context exits (atomically); ``None``
        keeps it in memory for :meth:`trace` / :meth:`render`
    :param calls: record the module size (number of calls) in each event's ``args``;
        counting costs one walk per distinct module, so turn it off for the lowest overhead
    :raises TraceError: a badly typed option, or ``path`` in a directory that does not exist
    """

    def __init__(self, path: Optional[str] = None, calls: bool = True) -> None:
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise TraceError(f"trace: path must be a file path, got {path!r}")
        if not isinstance(calls, bool):
            raise TraceError(f"trace: calls must be True or False, got {calls!r}")
        self.path = None if path is None else os.fspath(path)
        if self.path is not None and not os.path.isdir(os.path.dirname(os.path.abspath(self.path))):
            raise TraceError(f"trace: cannot write {self.path!r}: its directory does not exist; "
                             "create it or choose another path")
        self.calls = calls
        self._events: list = []
        self._open: list = []  # (name, tid) of the passes begun and not ended
        self._t0 = perf_counter_ns()
        self._pid = os.getpid()
        self._cache: tuple = ((), 0)
        self._last_ts = 0.0
        self._doc: Optional[dict] = None

    # -- hooks -----------------------------------------------------------------------------
    def enter_pass_ctx(self) -> None:
        self._events = []
        self._open = []
        self._t0 = perf_counter_ns()
        self._last_ts = 0.0
        self._doc = None

    def exit_pass_ctx(self) -> None:
        self._doc = self.trace()
        self._events = []
        self._open = []
        self._cache = ((), 0)
        if self.path is not None:
            write_json_atomic(self.path, self._doc)

    def run_before_pass(self, mod: IRModule, info: Any) -> None:
        args = {"opt_level": info.opt_level}
        if self.calls:
            args["calls"] = self._count(mod)
        tid = threading.get_native_id()
        self._open.append((info.name, tid))
        self._events.append(self._make(info.name, "B", tid, args, self._now()))

    def run_after_pass(self, mod: IRModule, info: Any) -> None:
        ts = self._now()  # before counting: the count is not part of the pass
        tid = threading.get_native_id()
        opened = self._open
        for i in range(len(opened) - 1, -1, -1):
            if opened[i] == (info.name, tid):
                break
        else:  # installed while this pass was running
            return
        events = self._events
        for name, t in reversed(opened[i + 1:]):  # passes inside it that raised
            events.append(self._make(name, "E", t, {"unfinished": True}, ts))
        del opened[i:]
        events.append(self._make(info.name, "E", tid, {"calls": self._count(mod)} if self.calls else {}, ts))

    # -- results ---------------------------------------------------------------------------
    def trace(self) -> dict:
        """The trace so far (or, after the context exited, the trace it wrote), with
        passes still open closed as unfinished."""
        if self._doc is not None and not self._events:
            return self._doc
        events = list(self._events)
        ts = self._now()
        for name, tid in reversed(self._open):
            events.append(self._make(name, "E", tid, {"unfinished": True}, ts))
        tids = sorted({e["tid"] for e in events}) or [self._pid]
        meta = [{"name": "process_name", "ph": "M", "pid": self._pid, "tid": tids[0],
                 "args": {"name": "passhost"}}]
        meta += [{"name": "thread_name", "ph": "M", "pid": self._pid, "tid": t,
                  "args": {"name": f"passes (thread {t})"}} for t in tids]
        return {"traceEvents": meta + events, "displayTimeUnit": "ms",
                "otherData": {"producer": "passhost-trace"}}

    def render(self) -> str:
        """The trace as JSON text, or ``""`` when ``path`` is set (the file is written
        when the context exits)."""
        if self.path is not None:
            return ""
        return json.dumps(self.trace()) + "\n"

    # -- helpers ---------------------------------------------------------------------------
    def _now(self) -> float:
        ts = (perf_counter_ns() - self._t0) / 1000.0
        if ts < self._last_ts:  # monotonic clock; guard against float rounding only
            ts = self._last_ts
        self._last_ts = ts
        return ts

    def _make(self, name: str, ph: str, tid: int, args: dict, ts: float) -> dict:
        return {"name": name, "cat": "pass", "ph": ph, "ts": ts, "pid": self._pid, "tid": tid, "args": args}

    def _count(self, mod: IRModule) -> int:
        snap = tuple(f for _, f in mod.items())
        old, n = self._cache
        if old and len(old) == len(snap) and all(a is b for a, b in zip(old, snap)):
            return n
        n = count_calls(mod)
        self._cache = (snap, n)
        return n
