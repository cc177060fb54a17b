"""The end-of-run summary ``passhost run`` prints on stderr: what each pass of the pipeline
did to the operator count, and how long it took, as onnx-simplifier's table shows::

    passhost: default_pipeline at -O2: 13 -> 4 operator calls in 3.1 ms
      pass                    ops       time
      SimplifyInference       13 -> 13  0.2 ms
      FoldConstant            13 -> 9   1.1 ms
      EliminateCommonSubexpr  skipped (opt_level 3 > -O2)
      FuseOps                 9 -> 9    1.4 ms

``InferType`` runs the pipeline makes between passes are left out of the rows (their time
is in the total). It is shown when stderr is a terminal, or with ``--summary``;
``--no-summary`` hides it.
"""
from __future__ import annotations

import time
from typing import Any

from .. import ir
from ..instrument import PassInstrument

__all__ = ["Summary", "count_module_ops", "peak_memory"]


def peak_memory() -> int:
    """The process's peak resident set size in bytes (``VmHWM``; ``ru_maxrss`` where /proc
    is missing). Mapped pages a run read count too, until they were dropped."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def count_module_ops(mod: ir.IRModule) -> int:
    """Operator calls over every function of ``mod`` (fused functions included)."""
    return sum(sum(ir.count_ops(func).values()) for _, func in mod.items())


class Summary(PassInstrument):
    """Records, for each pass directly inside the pipeline, the operator count before and
    after it and its time, and the passes the pipeline skipped and why."""

    name = "summary"

    def __init__(self, opt_level: int) -> None:
        self.opt_level = opt_level
        self.depth = 0
        self.rows: list = []
        self.open: list = []
        self.pipeline = ""
        self.first = None
        self.last = None
        self.start = self.end = 0.0

    def run_before_pass(self, mod: Any, info: Any) -> None:
        self.depth += 1
        if self.depth == 1:
            self.pipeline = info.name
            self.first = count_module_ops(mod)
            self.start = time.perf_counter()
        elif self.depth == 2:
            self.open.append((info.name, count_module_ops(mod), time.perf_counter()))

    def run_after_pass(self, mod: Any, info: Any) -> None:
        if self.depth == 2 and self.open:
            name, before, t0 = self.open.pop()
            if name != "InferType":  # the typing the pipeline runs before each pass: noise here
                self.rows.append((name, before, count_module_ops(mod), time.perf_counter() - t0, ""))
        elif self.depth == 1:
            self.last = count_module_ops(mod)
            self.end = time.perf_counter()
        self.depth -= 1

    def on_pass_skipped(self, info: Any, reason: str) -> None:
        if self.depth == 1:
            why = {"opt_level": f"opt_level {info.opt_level} > -O{self.opt_level}",
                   "disabled": "--disable"}.get(reason, "an instrument said no")
            self.rows.append((info.name, None, None, 0.0, f"skipped ({why})"))

    def render(self) -> str:
        if self.first is None or self.last is None:
            return ""
        total = (self.end - self.start) * 1e3
        lines = [f"passhost: {self.pipeline} at -O{self.opt_level}: {self.first} -> {self.last} operator calls "
                 f"in {total:.1f} ms"]
        if not self.rows:
            return lines[0]
        table = [("pass", "ops", "time")]
        for name, before, after, seconds, note in self.rows:
            if note:
                table.append((name, note, ""))
            else:
                table.append((name, f"{before} -> {after}", f"{seconds * 1e3:.1f} ms"))
        w0 = max(len(r[0]) for r in table)
        w1 = max(len(r[1]) for r in table if r[2] or r is table[0])
        for name, ops, took in table:
            lines.append(f"  {name.ljust(w0)}  {ops.ljust(w1) if took else ops}  {took}".rstrip())
        return "\n".join(lines)
